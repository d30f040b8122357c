"""autograd.distributed and DistributedDataParallel: collectives, DDP against one process,
timeouts, on 2 and 3 ranks through mpirun (dist_worker.py is one rank), plus the NCCL backend's
Python logic against the one-rank CuPy stand-in."""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from gradtrace.autograd.utils.data import DistributedSampler

HERE = pathlib.Path(__file__).resolve().parent
WORKER = HERE / "dist_worker.py"
FAKECUPY = HERE.parent / "fakecupy"

mpi = pytest.mark.skipif(
    not (shutil.which("mpirun") or shutil.which("mpirun", path=os.path.dirname(sys.executable)))
    or __import__("importlib").util.find_spec("mpi4py") is None,
    reason="needs mpi4py and Open MPI's mpirun (pip install 'gradtrace[mpi]')")


def mpirun(n: int, *argv, timeout=240):
    exe = shutil.which("mpirun") or shutil.which("mpirun", path=os.path.dirname(sys.executable))
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return subprocess.run([exe, "-n", str(n), "--oversubscribe", sys.executable, *map(str, argv)],
                          capture_output=True, text=True, env=env, timeout=timeout)


# ---------------------------------------------------------------------------- sampler


@pytest.mark.parametrize("n, drop_last, expect", [
    (3, False, [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]),    # padded from the start
    (3, True, [[0, 3, 6], [1, 4, 7], [2, 5, 8]]),              # tail dropped
    (2, False, [[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]]),
])
def test_sampler_splits_like_torch(n, drop_last, expect):
    shares = [list(DistributedSampler(range(10), n, r, shuffle=False, drop_last=drop_last))
              for r in range(n)]
    assert shares == expect
    assert all(len(DistributedSampler(range(10), n, r, drop_last=drop_last)) == len(expect[0])
               for r in range(n))


def test_sampler_shuffles_per_epoch_and_ranks_partition_the_data():
    samplers = [DistributedSampler(range(12), 3, r, seed=5) for r in range(3)]
    epoch0 = [list(s) for s in samplers]
    assert sorted(sum(epoch0, [])) == list(range(12))
    for s in samplers:
        s.set_epoch(1)
    epoch1 = [list(s) for s in samplers]
    assert sorted(sum(epoch1, [])) == list(range(12)) and epoch1 != epoch0
    assert [list(s) for s in samplers] == epoch1          # same epoch, same order


def test_sampler_rejects_a_rank_outside_the_world():
    with pytest.raises(ValueError, match="Invalid rank 3"):
        DistributedSampler(range(4), 3, 3)


def test_collectives_need_a_process_group():
    from gradtrace.autograd import distributed as dist, tensor

    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="Default process group has not been initialized"):
        dist.all_reduce(tensor([1.0]))
    with pytest.raises(ValueError, match="unknown backend"):
        dist.init_process_group("gloo")


# ---------------------------------------------------------------------------- several ranks


@mpi
@pytest.mark.parametrize("n", [2, 3])
def test_collectives_on_several_ranks(n):
    res = mpirun(n, WORKER, "collectives")
    assert res.returncode == 0, res.stdout + res.stderr
    assert sorted(res.stdout.split("\n")[:-1]) == [f"rank {r} ok collectives" for r in range(n)]


BLAS_WARNING_CASES = [
    ({"OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "0"}, True),
    ({"OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "1"}, False),  # once
    ({"OMPI_COMM_WORLD_LOCAL_SIZE": "1", "OMPI_COMM_WORLD_LOCAL_RANK": "0"}, False),
    ({"MPI_LOCALNRANKS": "3", "MPI_LOCALRANKID": "0"}, True),                         # MPICH
    ({"OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMP_NUM_THREADS": "1"}, False),
    ({"OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OPENBLAS_NUM_THREADS": "1"}, False),
    ({"OMPI_COMM_WORLD_LOCAL_SIZE": "2", "MKL_NUM_THREADS": "1"}, False),
    ({}, False),                                                                     # no MPI
]


@pytest.mark.parametrize("environ, warns", BLAS_WARNING_CASES)
def test_ranks_sharing_a_machine_are_warned_about_blas_threads(environ, warns):
    from gradtrace.autograd.distributed.mpi import blas_oversubscription_warning

    message = blas_oversubscription_warning(environ)
    assert (message is not None) == warns
    if warns:
        assert "OMP_NUM_THREADS" in message and "gradtrace run --nproc N" in message


@mpi
def test_plain_mpirun_warns_once_unless_a_thread_count_is_set(monkeypatch):
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    res = mpirun(2, WORKER, "collectives")
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stderr.count("RuntimeWarning: 2 ranks share this machine") == 1, res.stderr
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    res = mpirun(2, WORKER, "collectives")
    assert res.returncode == 0 and "ranks share this machine" not in res.stderr, res.stderr


@mpi
@pytest.mark.parametrize("n", [2, 3])
def test_ddp_ends_equal_to_one_process_on_the_whole_batch(n):
    """5 SGD steps, float64, within 1e-12: one bucket, several buckets, no_sync accumulation
    over 3 micro-batches, find_unused_parameters; and the unused-parameter error."""
    res = mpirun(n, WORKER, "ddp")
    assert res.returncode == 0, res.stdout + res.stderr
    assert sorted(res.stdout.split("\n")[:-1]) == [f"rank {r} ok ddp" for r in range(n)]


@mpi
def test_a_collective_whose_peer_never_comes_times_out_and_aborts_the_job():
    res = mpirun(2, WORKER, "timeout", timeout=200)   # rank 1 would sleep 300 s
    assert res.returncode != 0
    assert "rank 0: all_reduce #1 (4 bytes of float32) timed out after 2 s" in res.stderr, res.stderr
    assert "ok" not in res.stdout


# ---------------------------------------------------------------------------- NCCL (stand-in)

NCCL_SCRIPT = """
import os
import numpy as np
import gradtrace.autograd as ag
from gradtrace.autograd import backend, distributed as dist, nn
from gradtrace.autograd.nn.parallel import DistributedDataParallel as DDP
from gradtrace import profiler
os.environ.update(RANK="0", WORLD_SIZE="1")
dist.init_process_group("nccl", timeout=30)
assert (dist.get_backend(), dist.get_rank(), dist.get_world_size()) == ("nccl", 0, 1)
t = ag.tensor([1.0, 2.0], device="cuda")
dist.all_reduce(t, dist.ReduceOp.AVG)
outs = [ag.zeros(2, device="cuda")]
dist.all_gather(outs, t)
out = ag.zeros(2, device="cuda")
dist.reduce_scatter(out, [t])
dist.broadcast(t, src=0)
dist.barrier()
assert out.tolist() == outs[0].tolist() == t.tolist() == [1.0, 2.0]
try:
    dist.all_reduce(ag.tensor([1.0]))
except dist.DistBackendError as exc:
    assert "GPU arrays only" in str(exc)
else:
    raise AssertionError("a CPU tensor went to NCCL")
model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)).to("cuda")
ddp = DDP(model, bucket_cap_mb=0.00001)
with profiler.profile() as prof:
    ddp(ag.ones((2, 3), device="cuda")).sum().backward()
assert all(p.grad is not None for p in model.parameters())
comm = dist._group.backend.comm
assert comm.calls.count("all_reduce") == 1 + len(ddp._buckets) and "broadcast" in comm.calls, comm.calls
meta = prof.profile_data.metadata
info = dict(meta["distributed_info"]); assert info.pop("start_barrier_ns") > 0
assert info == {"backend": "nccl", "rank": 0, "world_size": 1}
assert len(meta["distributed_collectives"]) == len(ddp._buckets)
print("nccl ok", len(ddp._buckets))
"""


def test_nccl_backend_logic_against_the_one_rank_cupy_stand_in(tmp_path):
    """Never a GPU: the stand-in checks calls and buffers, not NCCL."""
    script = tmp_path / "nccl_check.py"
    script.write_text(NCCL_SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(FAKECUPY), os.environ.get("PYTHONPATH", "")]))
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                         timeout=240)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.startswith("nccl ok ") and int(res.stdout.split()[-1]) > 1
