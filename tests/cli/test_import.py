"""Every command that takes a profile takes a torch.profiler trace; ``gradtrace import``."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from gradtrace import profiler
from tests.cli.conftest import run_cli

DATA = Path(__file__).parents[1] / "profiler" / "data"
TRACE = DATA / "torch_mlp_cpu.json.gz"
PLAIN = DATA / "torch_mlp_cpu_plain.json"
AMD = DATA / "amd_mi250_minitoy_train.json.gz"      # a real GPU trace (data/KINETO_SAMPLES.md)


def _ok(res):
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    return res


def test_table_on_a_torch_trace():
    out = _ok(run_cli("table", TRACE, "--limit", "0", "--sort", "cpu_time_total")).stdout
    assert "aten::addmm" in out and "nn.Module: Linear" in out and "Self CPU time total" in out
    rows = json.loads(_ok(run_cli("table", PLAIN, "--json", "--limit", "0")).stdout)
    assert any(r["name"] == "aten::addmm" and r["count"] == 4 for r in rows)


def test_table_forward_op_shows_pairing_ambiguity():
    out = _ok(run_cli("table", TRACE, "--group-by", "forward-op")).stdout
    assert "aten::addmm" in out and "AddmmBackward" in out
    assert ("12 backward ops: 6 matched one forward op, 6 matched several (the latest-starting one is "
            "used, as PyTorch does), 0 none") in out


@pytest.mark.parametrize("group, expected", [("shape", "[[32, 16]]"),
                                             ("stack", "record_torch_traces.py"), ("module", "Linear")])
def test_table_groups_that_need_recorded_options(group, expected):
    assert expected in _ok(run_cli("table", TRACE, "--group-by", group, "--limit", "0")).stdout


def test_import_writes_a_profile_that_every_command_reads(tmp_path):
    out = tmp_path / "run.gtprof"
    res = _ok(run_cli("import", TRACE, "-o", out))
    assert f"wrote {out}: 250 events, 55 memory records (from 898 trace events)" in res.stdout
    assert "12 backward ops" in res.stdout
    data = profiler.load(out)
    assert data.n_events == 250 and data.metadata["source"] == "torch_trace"
    diff = _ok(run_cli("diff", out, PLAIN, "--limit", "5")).stdout
    assert f"A = {out}" in diff and f"B = {PLAIN}" in diff


def test_import_default_output_beside_the_trace(tmp_path):
    trace = tmp_path / "step.pt.trace.json.gz"
    trace.write_bytes(TRACE.read_bytes())
    _ok(run_cli("import", trace))
    assert profiler.load(tmp_path / "step.pt.trace.gtprof").n_events == 250


@pytest.mark.parametrize("flag, suffix", [("--chrome", "t.json.gz"), ("--speedscope", "s.json"),
                                          ("--stacks", "f.folded")])
def test_export_a_torch_trace(tmp_path, flag, suffix):
    _ok(run_cli("export", PLAIN, flag, tmp_path / suffix))
    assert (tmp_path / suffix).stat().st_size > 100


def test_table_on_a_gpu_trace_has_cuda_columns():
    out = _ok(run_cli("table", AMD, "--sort", "self_cuda_time_total",
                      "--limit", "5")).stdout
    assert "Self CUDA time total: 149.042us" in out


def test_bad_traces_are_one_line_and_exit_2(tmp_path):
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(TRACE.read_bytes()[:4000])
    broken = tmp_path / "broken.json"
    broken.write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1}')
    for path in (cut, broken):
        res = run_cli("table", path)
        assert res.returncode == 2 and "Traceback" not in res.stderr
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"gradtrace table: error: {path}: ")
        assert "truncated" in lines[0] and "prof.export_chrome_trace" in lines[0]
    res = run_cli("import", tmp_path / "nothing.json")
    assert res.returncode == 2 and "no such file" in res.stderr


def test_import_refuses_a_gradtrace_profile(tmp_path):
    saved = tmp_path / "a.gtprof"
    profiler.load(PLAIN).save(saved)
    res = run_cli("import", saved, "-o", tmp_path / "b.gtprof")
    assert res.returncode == 2 and "needs no import" in res.stderr


def test_import_warnings_go_to_stderr(tmp_path):
    events = [{"ph": "X", "cat": "cpu_op", "name": n, "pid": 1, "tid": 1, "ts": ts, "dur": dur}
              for n, ts, dur in (("aten::b", 150, 50), ("aten::c", 190, 40))]
    path = tmp_path / "overlap.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)
    res = _ok(run_cli("table", path))
    assert f"warning: {path}: 1 events set aside" in res.stderr
    assert "aten::b" in res.stdout and "aten::c" not in res.stdout


def test_dashboard_pages_build_on_a_torch_trace():
    pytest.importorskip("dash")
    from gradtrace.viewer import timeline_page
    from gradtrace.viewer.app import MAIN, PAGES
    from gradtrace.viewer.registry import PageContext, Registry
    from gradtrace.viewer.loading import load_path
    from gradtrace.viewer.model import ProfileView

    for path in (TRACE, AMD):
        data = load_path(path)
        view = ProfileView(data, path.name)
        registry = Registry()
        registry.add(view, MAIN)
        for page in PAGES:
            assert page.layout(PageContext(view, registry, MAIN)) is not None, page.PATH
        lanes = [lane.label for lane in timeline_page.index_of(view).lanes]
        assert lanes and lanes[0] == "thread 1"
