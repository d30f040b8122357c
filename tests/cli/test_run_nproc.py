"""``gradtrace run --nproc N``: ranks through mpirun, one profile per rank, failing fast."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import textwrap

import numpy as np
import pytest

from gradtrace import profiler
from gradtrace.cli import launch
from tests.cli.conftest import run_cli

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mpi4py") is None
    or not (shutil.which("mpirun") or shutil.which("mpirun", path=os.path.dirname(sys.executable))),
    reason="needs mpi4py and Open MPI's mpirun (pip install 'gradtrace[mpi]')")

TRAIN = """\
import os
import numpy as np
import gradtrace.autograd as ag
from gradtrace import profiler
from gradtrace.autograd import distributed as dist, nn, optim
from gradtrace.autograd.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("mpi", timeout=60)
rank = dist.get_rank()
model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 2)).double()
ddp = DDP(model, bucket_cap_mb=0.0002)
opt = optim.SGD(ddp.parameters(), lr=0.1)
rng = np.random.default_rng(rank)
for step in range(3):
    opt.zero_grad()
    x = ag.tensor(rng.standard_normal((8, 6)))
    (ddp(x) ** 2).mean().backward()
    opt.step()
    profiler.current().step()
print("trained", rank, len(ddp._buckets))
print("threads", rank, os.environ.get("OMP_NUM_THREADS"))
"""


def _script(tmp_path, body, name="train.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def test_every_rank_writes_its_profile_with_its_collectives(tmp_path):
    run_dir = tmp_path / "run"
    res = run_cli("run", "--nproc", "2", "--out", run_dir, _script(tmp_path, TRAIN), cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert sorted(p.name for p in run_dir.iterdir()) == ["rank0.gtprof", "rank1.gtprof"]
    assert "2 rank profile(s) saved in" in res.stderr
    n_buckets = int(res.stdout.split("trained 0 ")[1].split()[0])
    assert n_buckets > 1
    # each rank's BLAS got its share of the cores (unless this environment chose a count)
    threads = launch.rank_blas_threads(2, launch._usable_cores(), False, os.environ)
    expected = str(threads) if threads is not None else os.environ.get("OMP_NUM_THREADS")
    for rank in range(2):
        assert f"threads {rank} {expected}\n" in res.stdout, res.stdout
    for rank in range(2):
        data = profiler.load(run_dir / f"rank{rank}.gtprof")
        meta = data.metadata
        info = dict(meta["distributed_info"])
        assert info.pop("start_barrier_ns") > 0     # the run's common clock
        assert info == {"backend": "mpi", "rank": rank, "world_size": 2}
        cols = data.event_columns
        names = np.array([data.strings[i] for i in cols["name_id"]])
        comms = np.flatnonzero(names == "record_param_comms")
        # the wrap's broadcast of rank 0's parameters, then 3 steps x buckets
        assert len(comms) == 1 + 3 * n_buckets
        assert (names == "mpi:broadcast").sum() == 1
        assert (names == "mpi:all_reduce").sum() == 3 * n_buckets
        entries = {e["Seq"]: e for e in meta["distributed_collectives"]}
        seqs = cols["sequence_nr"][comms].tolist()
        assert sorted(entries) == sorted(seqs)
        backward_seqs = set(cols["sequence_nr"][cols["scope"] == 1].tolist())
        for seq in seqs:
            e = entries[seq]
            if e["Collective name"] == "broadcast":
                continue
            assert e["Collective name"] == "allreduce" and e["dtype"] == "Double"
            assert e["Group size"] == 2 and e["Rank"] == rank and e["In msg nelems"] > 0
            assert e["completed_ns"] >= e["start_ns"]
            # the bucket's gradients come from backward nodes recorded in this profile
            assert e["backward_sequence_nrs"] and set(e["backward_sequence_nrs"]) <= backward_seqs


def test_table_of_a_run_folder_summarizes_each_rank(tmp_path):
    run_dir = tmp_path / "run"
    res = run_cli("run", "--nproc", "2", "--schedule", "0,1,2", "--out", run_dir,
                  _script(tmp_path, TRAIN), cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    res = run_cli("table", run_dir, "--json")
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert [r["rank"] for r in summary["ranks"]] == [0, 1]
    for r in summary["ranks"]:
        assert r["steps"] == 2 and r["communication_ns"] > 0
        assert r["exposed_ns"] + r["hidden_ns"] >= r["communication_ns"] * 0.99
        assert r["compute_ns"] + r["exposed_ns"] + r["idle_ns"] <= r["step_ns"] * 1.01
    assert [s["step"] for s in summary["steps"]] == ["ProfilerStep#1", "ProfilerStep#2"]
    text = run_cli("table", run_dir).stdout
    assert "Ranks (mean per step, ms)" in text and "Slowest rank per step" in text


def test_a_rank_that_raises_stops_the_job_with_a_line_naming_it(tmp_path):
    body = """\
    from gradtrace.autograd import distributed as dist
    import gradtrace.autograd as ag
    dist.init_process_group("mpi", timeout=120)
    dist.barrier()
    if dist.get_rank() == 1:
        raise ValueError("bad batch on this rank")
    dist.all_reduce(ag.tensor([1.0]))   # rank 0 waits here until the job is stopped
    print("rank 0 was not stopped")
    """
    run_dir = tmp_path / "run"
    res = run_cli("run", "--nproc", "2", "--out", run_dir, _script(tmp_path, body), cwd=tmp_path,
                  timeout=100)            # well below the script's own 120 s collective timeout
    assert res.returncode != 0
    assert "gradtrace run: rank 1 failed: ValueError: bad batch on this rank" in res.stderr, res.stderr
    assert "was not stopped" not in res.stdout
    assert (run_dir / "rank1.gtprof").exists()       # the failing rank's partial profile


def test_nproc_needs_a_positive_count(tmp_path):
    res = run_cli("run", "--nproc", "0", _script(tmp_path, TRAIN), cwd=tmp_path)
    assert res.returncode == 2 and "--nproc 0: give at least 1 process" in res.stderr
