"""``gradtrace table RUN_DIR`` on a folder of torch.profiler traces, one per rank."""
from __future__ import annotations

import json

from tests.cli.conftest import run_cli
from tests.profiler.rank_traces import write_rank_traces


def test_table_of_a_folder_of_torch_traces(tmp_path):
    write_rank_traces(tmp_path)
    res = run_cli("table", tmp_path)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    rank1 = next(ln.split() for ln in lines if ln.split()[:2] == ["1", "2"])
    assert rank1[2:4] == ["1.250", "0.600"]                       # step, compute (ms)
    assert any(ln.split()[:2] == ["ProfilerStep#2", "1"] for ln in lines)
    assert "common clock: wall clock (each trace's baseTimeNanoseconds)" in res.stdout
    summary = json.loads(run_cli("table", tmp_path, "--json").stdout)
    assert [r["rank"] for r in summary["ranks"]] == [0, 1]
    empty = tmp_path / "empty"
    empty.mkdir()
    res = run_cli("table", empty)
    assert res.returncode == 2 and "is a directory" in res.stderr


def test_view_of_a_folder_with_a_rankless_trace_is_one_line(tmp_path):
    from tests.profiler.rank_traces import rank_trace

    (tmp_path / "a.json").write_text(json.dumps(rank_trace(0, with_rank=False)))
    res = run_cli("view", tmp_path, "--no-browser")
    assert res.returncode == 2 and "no rank" in res.stderr and len(res.stderr.strip().splitlines()) == 1
