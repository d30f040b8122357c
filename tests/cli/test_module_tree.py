"""``gradtrace table --group-by module``: the module tree, rendered and as nested JSON."""
from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console

from gradtrace import profiler
from gradtrace.cli.commands import profile_tables, table_json
from gradtrace.cli.render import emit
from gradtrace.profiler import columns
from tests.cli.conftest import run_cli

TRACE = Path(__file__).resolve().parents[1] / "profiler" / "data" / "torch_mlp_cpu.json.gz"


def _text(renderable) -> str:
    console = Console(file=StringIO(), width=100, color_system=None)
    emit(console, renderable, True)
    return console.file.getvalue()


def test_torch_trace_tree_is_indented_with_torch_headers():
    out = _text(profile_tables(profiler.load(TRACE), group_by="module", plain=True))
    lines = out.splitlines()
    assert lines[0] == "Forward + backward time per nn.Module (the module tree)"
    body = lines[lines.index(next(ln for ln in lines if ln.startswith("---"))) + 1:]
    names = [ln[:len(ln) - len(ln.lstrip())] + ln.split()[0] for ln in body[:5]]
    assert names == ["Sequential_0", "  Linear_0", "  ReLU_0", "  Linear_1", "(no"]
    header = " ".join(lines[1:4])
    for spec in ("Fwd Self", "Bwd Self", "Fwd+Bwd", "# of", "Calls"):
        assert spec in header
    assert max(len(ln) for ln in lines) <= 100


def test_tree_columns_are_known_specs():
    assert all(i in columns.COLUMNS for i in columns.MODULE_TREE_COLUMNS)
    assert columns.COLUMNS["forward_backward_cpu_time_total"].header == "Fwd+Bwd CPU total"


def test_json_is_the_nested_tree_with_shares():
    rows = table_json(profiler.load(TRACE), group_by="module")
    assert [r["module"] for r in rows] == ["Sequential_0", "(no module)"]
    seq = rows[0]
    assert [c["module"] for c in seq["children"]] == ["Linear_0", "ReLU_0", "Linear_1"]
    assert seq["forward_backward_cpu_time_total"] == pytest.approx(
        seq["self_cpu_time_total"] + sum(c["forward_backward_cpu_time_total"] for c in seq["children"]))
    assert sum(r["forward_backward_cpu_time_total_percent"] for r in rows) == pytest.approx(100.0)


def test_limit_cuts_the_tree_and_says_so():
    out = _text(profile_tables(profiler.load(TRACE), group_by="module", limit=2, plain=True))
    assert "  ReLU_0" not in out and "3 more modules below (--limit 0 shows the whole tree)" in out


def test_cli_end_to_end_on_a_gradtrace_demo(demo_profile):
    res = run_cli("table", demo_profile, "--group-by", "module", "--limit", "0")
    assert res.returncode == 0, res.stderr
    assert "\n  Linear #1 " in res.stdout and "\n  Linear #2 " in res.stdout
    tree = json.loads(run_cli("table", demo_profile, "--group-by", "module", "--json").stdout)
    root = tree[0]
    assert root["depth"] == 0 and root["children"] and root["children"][0]["depth"] == 1
    assert all(c["backward_cpu_time_total"] > 0 for c in root["children"] if c["module"].startswith("Linear"))

