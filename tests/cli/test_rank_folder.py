"""``gradtrace table RUN_DIR`` and ``gradtrace view RUN_DIR``: a folder of torch.profiler traces,
one per rank, or of ``rank{R}.gtprof`` files; any other folder of profiles is refused in one line."""
from __future__ import annotations

import json

import pytest

from tests.cli.conftest import run_cli
from tests.profiler.rank_traces import rank_trace, write_rank_traces


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


def _one_line_error(res, *names):
    """Exit status 2, one line on stderr naming every file."""
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    for name in names:
        assert name in lines[0], (name, lines[0])
    return lines[0]


def _save(path):
    from tests.cli.profiles import hand_made

    hand_made().save(path)
    return path


def test_folder_of_unrelated_runs_and_an_export_is_refused_naming_them(tmp_path):
    """Two .gtprof runs that are not ranks and an exported JSON: never "Rank 0" of one of them."""
    _save(tmp_path / "before.gtprof")
    _save(tmp_path / "after.gtprof")
    assert run_cli("export", tmp_path / "after.gtprof", "--chrome", tmp_path / "after.json").returncode == 0
    for command in (("table",), ("view", "--no-browser")):
        res = run_cli(*command, tmp_path)
        line = _one_line_error(res, "after.gtprof", "before.gtprof", "after.json")
        assert "not one run's ranks" in line and "Rank" not in res.stdout


@pytest.mark.parametrize("files, message", [
    (("run.gtprof",), "run.gtprof is not named rank{R}.gtprof"),
    (("rank0.gtprof", "rank1.gtprof", "rank01.gtprof"), "rank 1 in rank01.gtprof, rank1.gtprof"),
    (("rank0.gtprof", "worker.json"), "gradtrace profiles (rank0.gtprof) beside torch traces (worker.json)"),
])
def test_folder_that_is_not_one_run_is_one_line(tmp_path, files, message):
    for name in files:
        if name.endswith(".gtprof"):
            _save(tmp_path / name)
        else:
            (tmp_path / name).write_text(json.dumps(rank_trace(0)))
    for command in (("table",), ("view", "--no-browser")):
        assert message in _one_line_error(run_cli(*command, tmp_path), *files)


def test_traces_of_one_rank_or_no_rank_are_refused_by_table_and_view(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(rank_trace(0)))
    (tmp_path / "b.json").write_text(json.dumps(rank_trace(0)))
    (tmp_path / "c.json").write_text(json.dumps(rank_trace(1, with_rank=False)))
    for command in (("table",), ("view", "--no-browser")):
        line = _one_line_error(run_cli(*command, tmp_path), "a.json", "b.json", "c.json")
        assert "rank 0 in a.json, b.json" in line and "c.json has no rank" in line


def test_run_folder_ignores_files_that_are_not_profiles(tmp_path):
    _save(tmp_path / "rank0.gtprof")
    _save(tmp_path / "rank1.gtprof")
    (tmp_path / "README.txt").write_text("two ranks of gradtrace run --nproc 2")
    res = run_cli("table", tmp_path)
    assert res.returncode == 0, res.stderr
    assert [ln.split()[0] for ln in res.stdout.splitlines() if ln.split()[:1] in (["0"], ["1"])] == ["0", "1"]
