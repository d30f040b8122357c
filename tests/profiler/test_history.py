"""profiler.history (the SQLite run store), profiler.changepoints and ``gradtrace runs``."""
import json
import multiprocessing
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from . import needs_dashboard
from gradtrace.cli.main import main
from gradtrace.profiler import changepoints, history, stats

from .test_stats import steps_profile


def test_a_step_in_a_synthetic_history_is_one_change_point():
    rng = np.random.default_rng(0)
    y = np.r_[np.full(20, 10.0), np.full(20, 11.0)] * rng.lognormal(0, 0.02, 40)
    y[7] *= 1.8                         # a one-off slow run is not a level
    (cp,) = changepoints.change_points(y)
    assert cp.index == 20 and cp.ratio == pytest.approx(1.1, rel=0.03)
    assert cp.before == pytest.approx(10.0, rel=0.03) and cp.after == pytest.approx(11.0, rel=0.03)
    assert changepoints.change_points(np.full(30, 5.0) * rng.lognormal(0, 0.02, 30)) == []
    assert changepoints.change_points([1.0, 2.0]) == []
    with pytest.raises(ValueError, match="positive"):
        changepoints.change_points([1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])


def test_a_stored_run_gives_back_its_samples(tmp_path):
    store = history.RunStore(tmp_path / "s" / "runs.sqlite")
    data = steps_profile(6, seed=1)
    run_id = store.add(data, "a.gtprof", {"commit": "abc"})
    assert store.schema_version == history.SCHEMA_VERSION
    back, direct = store.samples(run_id), stats.step_samples(data)
    for kind in stats.KINDS:
        assert sorted(back.names[kind]) == sorted(direct.names[kind])
        for name in direct.names[kind]:
            np.testing.assert_array_equal(back.values[kind][:, back.names[kind].index(name)],
                                          direct.values[kind][:, direct.names[kind].index(name)])
    assert store.resolve("commit=abc").id == store.resolve("abc").id == store.resolve(f"#{run_id}").id
    with pytest.raises(history.HistoryError, match="no run 'nope'"):
        store.resolve("nope")


def test_a_store_from_a_newer_gradtrace_or_another_file_is_refused(tmp_path):
    path = tmp_path / "runs.sqlite"
    history.RunStore(path).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(history.HistoryError, match="schema version 99 is newer"):
        history.RunStore(path)
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    with pytest.raises(history.HistoryError, match="not a gradtrace run store"):
        history.RunStore(other)
    (tmp_path / "text").write_text("hello")
    with pytest.raises(history.HistoryError, match="not a gradtrace run store"):
        history.RunStore(tmp_path / "text")


def _add_runs(args):
    path, worker = args
    store = history.RunStore(path)
    for k in range(5):
        store.add(steps_profile(4, seed=10 * worker + k), f"w{worker}-{k}.gtprof", {"worker": str(worker)})
    store.close()


def test_concurrent_adds_from_several_processes_lose_nothing(tmp_path):
    path = str(tmp_path / "runs.sqlite")
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        pool.map(_add_runs, [(path, w) for w in range(4)])
    runs = history.RunStore(path).runs()
    assert len(runs) == 20 and sorted(r.source for r in runs) == sorted(
        f"w{w}-{k}.gtprof" for w in range(4) for k in range(5))
    assert all(r.n_steps == 4 for r in runs)


def test_runs_commands_end_to_end(tmp_path, capsys):
    store = str(tmp_path / "runs.sqlite")
    files = []
    for i in range(10):
        f = tmp_path / f"r{i}.gtprof"
        steps_profile(8, matmul_us=100 if i < 5 else 140, seed=i).save(f)
        files.append(str(f))
    for i, f in enumerate(files):
        assert main(["runs", "add", f, "--store", store, "--tag", f"commit=c{i}"]) == 0
    capsys.readouterr()
    assert main(["runs", "list", "--store", store, "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 10
    assert main(["runs", "trend", "--op", "matmul", "--store", store, "--json"]) == 0
    trend = json.loads(capsys.readouterr().out)
    assert len(trend["runs"]) == 10
    assert [(c["index"], round(c["ratio"], 1)) for c in trend["change_points"]] == [(5, 1.4)]
    assert main(["runs", "trend", "--store", store]) == 0
    assert "step time" in capsys.readouterr().out
    assert main(["runs", "compare", "c0", "c9", "--store", store, "--fail-on-regression", "10"]) == 1
    out, err = capsys.readouterr()
    assert "slower" in out and err.startswith("gradtrace runs compare: regression over 10%: op matmul")
    assert main(["runs", "compare", "c0", "c1", "--store", store, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert {r["verdict"] for r in rows if r["tested"]} == {"unchanged"}


@pytest.mark.parametrize("argv, message", [
    (["runs", "list"], "no run store here"),
    (["runs", "add", "missing.gtprof"], "missing.gtprof: no such file"),
    (["runs", "add", "x.gtprof", "--tag", "novalue"], "--tag 'novalue': give KEY=VALUE"),
    (["runs", "compare", "1", "2"], "no run store here"),
])
def test_runs_bad_input_is_one_line_and_status_2(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_view_store_option_is_checked_before_the_server_starts(tmp_path, monkeypatch):
    needs_dashboard()
    from gradtrace.cli.commands import _history_store
    from gradtrace.cli.errors import CLIError

    with pytest.raises(CLIError, match="no run store here"):
        _history_store(str(tmp_path / "none.sqlite"))
    history.RunStore(tmp_path / "runs.sqlite").close()
    assert _history_store(str(tmp_path / "runs.sqlite")) == str(tmp_path / "runs.sqlite")
    monkeypatch.chdir(tmp_path)
    assert _history_store(None) is None                    # no ./gradtrace-runs/runs.sqlite
    history.RunStore(history.DEFAULT_STORE).close()
    assert str(_history_store(None)) == history.DEFAULT_STORE


def test_trend_of_a_module_of_a_torch_trace(tmp_path, capsys):
    trace = str(Path(__file__).parent / "data" / "torch_mlp_cpu.json.gz")
    store = str(tmp_path / "runs.sqlite")
    assert main(["runs", "add", trace, trace, "--store", store]) == 0
    capsys.readouterr()
    assert main(["runs", "trend", "--module", "Linear_0", "--store", store, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["name"] == "nn.Module: Linear_0" and len(result["runs"]) == 2
    assert main(["runs", "trend", "--module", "Nope", "--store", store]) == 2
    assert "no module named 'Nope'" in capsys.readouterr().err
