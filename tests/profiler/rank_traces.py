"""Two synthetic torch.profiler traces of a data-parallel run (ranks 0 and 1), for the tests of
profiler/ranks.py, ``gradtrace table RUN_DIR`` and the dashboard's Ranks page.

Each rank runs two ``ProfilerStep``s. In a step of ``dur`` microseconds (ts in us, relative to
the trace's ``baseTimeNanoseconds``, as Kineto writes them):

* ``aten::mm`` launches a compute kernel on the device from ``+100`` to ``+compute_end``;
* ``record_param_comms`` launches an NCCL all-reduce kernel from ``comm`` to ``comm_end``.

Rank 1's second step is slower (1500 us, longer compute and a later all-reduce), and its
trace starts 50 us later on the wall clock (``baseTimeNanoseconds`` + 50,000).
"""
from __future__ import annotations

import json
from pathlib import Path

BASE_NS = 1_700_000_000_000_000_000
# rank -> [(step ts, dur, compute kernel end, comm kernel start, comm kernel end)] in us
STEPS = {0: [(0, 1000, 500, 400, 800), (1000, 1000, 500, 400, 800)],
         1: [(0, 1000, 500, 400, 800), (1000, 1500, 900, 800, 1300)]}
# What the tests expect per rank and step, in us:
# step, compute, communication, exposed (comm without compute beside it), hidden, idle.
EXPECTED = {0: [(1000, 400, 400, 300, 100, 300), (1000, 400, 400, 300, 100, 300)],
            1: [(1000, 400, 400, 300, 100, 300), (1500, 800, 500, 400, 100, 300)]}


def _x(cat, name, ts, dur, tid=1, pid=10, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def rank_trace(rank: int, with_rank: bool = True) -> dict:
    """The trace document of one rank."""
    events, corr = [], 100 * rank
    for k, (t, dur, compute_end, comm, comm_end) in enumerate(STEPS[rank], start=1):
        events.append(_x("user_annotation", f"ProfilerStep#{k}", t, dur))
        for op, kernel, k0, k1 in (("aten::mm", "ampere_sgemm_128x64_nn", t + 100, t + compute_end),
                                   ("record_param_comms", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", t + comm, t + comm_end)):
            corr += 1
            launch = k0 - 60
            events.append(_x("cpu_op", op, launch - 5, 40, **{"External id": corr}))
            events.append(_x("cuda_runtime", "cudaLaunchKernel", launch, 20, correlation=corr, **{"External id": corr}))
            events.append(_x("kernel", kernel, k0, k1 - k0, tid=7, pid=0, device=0, stream=7, correlation=corr,
                             **{"External id": corr}))
    doc = {"schemaVersion": 1, "baseTimeNanoseconds": BASE_NS + 50_000 * rank, "displayTimeUnit": "ms",
           "traceEvents": events}
    if with_rank:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
    return doc


def write_rank_traces(folder) -> list[Path]:
    """Write ``worker_a.json`` (rank 0) and ``worker_b.json`` (rank 1) into ``folder``: file
    names without the rank, so it is read from ``distributedInfo``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank, name in ((0, "worker_a.json"), (1, "worker_b.json")):
        path = folder / name
        path.write_text(json.dumps(rank_trace(rank)))
        paths.append(path)
    return paths
