"""``gradtrace import DIR -o OUT``: a folder of rank traces imported serially, in ``--nproc``
processes and on MPI ranks (``mpirun -n 2``), all writing the same bytes (issue 31)."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from gradtrace import profiler
from gradtrace.profiler.ranks import load_run
from tests.cli.conftest import cli_env, run_cli
from tests.profiler.rank_traces import rank_trace, write_rank_traces


def _files(folder) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.suffix == ".gtprof"}


def test_serial_and_nproc_imports_write_the_same_bytes(tmp_path):
    traces = tmp_path / "traces"
    write_rank_traces(traces)
    for name, extra in (("serial", []), ("two", ["--nproc", "2"])):
        res = run_cli("import", traces, "-o", tmp_path / name, *extra)
        assert res.returncode == 0, res.stderr
        assert "imported 2 trace(s)" in res.stdout
    serial = _files(tmp_path / "serial")
    assert list(serial) == ["rank0.gtprof", "rank1.gtprof"]
    assert serial == _files(tmp_path / "two")
    table = run_cli("table", tmp_path / "two")
    assert table.returncode == 0 and "common clock" in table.stdout


def test_load_run_in_processes_equals_the_serial_load(tmp_path):
    write_rank_traces(tmp_path)
    serial, parallel = load_run(tmp_path, nproc=1), load_run(tmp_path, nproc=2)
    assert list(serial) == list(parallel) == [0, 1]
    for rank in serial:
        for name, col in serial[rank].event_columns.items():
            np.testing.assert_array_equal(parallel[rank].event_columns[name], col)
        meta = dict(parallel[rank].metadata)
        meta.pop("gradtrace_version"), meta.pop("schema_version")   # what saving adds
        assert meta == serial[rank].metadata


def test_a_bad_trace_in_a_worker_is_one_line(tmp_path):
    write_rank_traces(tmp_path)
    (tmp_path / "worker_c.json").write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1')
    res = run_cli("import", tmp_path, "-o", tmp_path / "out", "--nproc", "2")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not list((tmp_path / "out").glob("*.gtprof*"))
    import json

    (tmp_path / "worker_c.json").write_text(json.dumps(rank_trace(1)))     # a second rank 1
    res = run_cli("import", tmp_path, "-o", tmp_path / "out", "--nproc", "2")
    assert res.returncode == 2 and "a second trace of rank 1" in res.stderr
    assert not list((tmp_path / "out").glob("*.gtprof*"))


def _mpirun():
    return shutil.which("mpirun") or shutil.which("mpirun", path=os.path.dirname(sys.executable))


@pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None or not _mpirun(),
                    reason="needs mpi4py and Open MPI's mpirun (pip install 'gradtrace[mpi]')")
def test_mpi_ranks_share_the_traces_and_write_the_same_bytes(tmp_path):
    from gradtrace.cli.launch import mpirun_env

    traces = tmp_path / "traces"
    write_rank_traces(traces)
    assert run_cli("import", traces, "-o", tmp_path / "serial").returncode == 0
    env, env_args, _ = mpirun_env(2)
    env.update(cli_env())
    cmd = [_mpirun(), "-n", "2", "--oversubscribe", *env_args, "-x", "PYTHONPATH", sys.executable, "-m",
           "gradtrace.cli", "import", str(traces), "-o", str(tmp_path / "mpi")]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "on 2 MPI ranks" in res.stdout and res.stdout.count("imported") == 1
    assert _files(tmp_path / "mpi") == _files(tmp_path / "serial")
    assert profiler.load(tmp_path / "mpi" / "rank1.gtprof").n_events > 0
