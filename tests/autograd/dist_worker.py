"""One rank of the multi-process tests in test_distributed.py (run under mpirun).

``python dist_worker.py SCENARIO``: each scenario asserts on this rank and prints
``rank R ok SCENARIO`` at the end; the test counts those lines.
"""
import sys
import time

import numpy as np

import gradtrace.autograd as ag
from gradtrace.autograd import distributed as dist
from gradtrace.autograd import nn, optim
from gradtrace.autograd.nn.parallel import DistributedDataParallel as DDP


def collectives(rank, n):
    t = ag.tensor([rank + 1.0, 10.0 * rank], dtype="float64")
    dist.all_reduce(t)
    assert t.tolist() == [n * (n + 1) / 2, 10.0 * n * (n - 1) / 2], t
    for op, expect in ((dist.ReduceOp.MAX, n - 1.0), (dist.ReduceOp.MIN, 0.0),
                       (dist.ReduceOp.AVG, (n - 1) / 2)):
        t = ag.tensor([float(rank)], dtype="float64")
        version = t._version
        dist.all_reduce(t, op)
        assert t.tolist() == [expect], (op, t)
        assert t._version == version + 1       # in place, as an in-place op
    t = ag.tensor([float(rank)] * 3, dtype="float64")
    dist.broadcast(t, src=n - 1)
    assert t.tolist() == [n - 1.0] * 3
    outs = [ag.zeros(2, dtype="float64") for _ in range(n)]
    dist.all_gather(outs, ag.tensor([rank, -rank], dtype="float64"))
    assert [o.tolist() for o in outs] == [[r, -r] for r in range(n)]
    out = ag.zeros(2, dtype="float64")
    dist.reduce_scatter(out, [ag.tensor([r * 100.0 + rank, 1.0], dtype="float64") for r in range(n)])
    assert out.tolist() == [rank * 100.0 * n + n * (n - 1) / 2, float(n)], out
    t = ag.tensor([1.0], dtype="float64")
    work = dist.all_reduce(t, async_op=True)
    assert work.wait() and t.tolist() == [float(n)]
    dist.barrier()


class MLP(nn.Module):
    def __init__(self, extra=False):
        super().__init__()
        self.fc1 = nn.Linear(5, 7)
        self.fc2 = nn.Linear(7, 3)
        if extra:
            self.unused = nn.Linear(3, 3)

    def forward(self, x):
        return self.fc2(self.fc1(x).tanh())


def _model(seed, extra=False):
    ag.manual_seed(seed)
    return MLP(extra).double()


def _batches(n, per_rank, steps, micro):
    rng = np.random.default_rng(123)
    return [[(rng.standard_normal((n * per_rank, 5)), rng.standard_normal((n * per_rank, 3)))
             for _ in range(micro)] for _ in range(steps)]


def _loss(out, y):
    return ((out - ag.tensor(y)) ** 2).mean()


def ddp_equals_one_process(rank, n, micro=1, **ddp_kwargs):
    """5 SGD steps of DDP on shards == 5 steps of one process on the whole batch."""
    per_rank, steps = 4, 5
    data = _batches(n, per_rank, steps, micro)
    ref = _model(0, ddp_kwargs.get("find_unused_parameters", False))
    ref_opt = optim.SGD(ref.parameters(), lr=0.1)
    for step in data:
        ref_opt.zero_grad()
        for x, y in step:
            _loss(ref(ag.tensor(x)), y).backward()
        ref_opt.step()
    model = _model(0 if rank == 0 else rank + 7, ddp_kwargs.get("find_unused_parameters", False))  # replaced by rank 0's
    ddp = DDP(model, **ddp_kwargs)
    opt = optim.SGD(ddp.parameters(), lr=0.1)
    shard = slice(rank * per_rank, (rank + 1) * per_rank)
    for step in data:
        opt.zero_grad()
        for k, (x, y) in enumerate(step):
            if k < len(step) - 1:
                with ddp.no_sync():
                    _loss(ddp(ag.tensor(x[shard])), y[shard]).backward()
            else:
                _loss(ddp(ag.tensor(x[shard])), y[shard]).backward()
        opt.step()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        if name.startswith("unused"):
            assert p.grad is None, name
            continue
        diff = float(np.abs(p.detach().numpy() - q.detach().numpy()).max())
        assert diff <= 1e-12, (name, diff)
    return len(ddp._buckets)


def ddp(rank, n):
    assert ddp_equals_one_process(rank, n) == 1                  # 25 MB: one bucket
    assert ddp_equals_one_process(rank, n, bucket_cap_mb=0.00005) > 2
    ddp_equals_one_process(rank, n, micro=3, bucket_cap_mb=0.00005)   # no_sync accumulation
    ddp_equals_one_process(rank, n, find_unused_parameters=True)
    # Without find_unused_parameters, a parameter that gets no gradient is reported.
    wrapped = DDP(_model(0, extra=True), bucket_cap_mb=0.00005)
    x = ag.tensor(np.ones((2, 5)))
    wrapped(x).sum().backward()
    try:
        wrapped(x)
    except RuntimeError as exc:
        assert "Expected to have finished reduction" in str(exc) and "unused.weight" in str(exc), exc
    else:
        raise AssertionError("an unused parameter went unreported")


def timeout(rank, n):
    """Rank 1 never joins; rank 0's all_reduce gives up after 2 s and aborts the job."""
    if rank == 1:
        time.sleep(300)
    dist.all_reduce(ag.tensor([1.0]))


def raises(rank, n):
    dist.barrier()
    if rank == n - 1:
        raise ValueError(f"boom on rank {rank}")
    dist.all_reduce(ag.tensor([1.0]))    # the others wait here until the job is stopped


if __name__ == "__main__":
    scenario = sys.argv[1]
    dist.init_process_group("mpi", timeout=2 if scenario == "timeout" else 60)
    r, size = dist.get_rank(), dist.get_world_size()
    globals()[scenario](r, size)
    print(f"rank {r} ok {scenario}", flush=True)
    dist.destroy_process_group()
