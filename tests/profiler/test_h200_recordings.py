"""Profiles recorded on the first lent GPU (an NVIDIA H200, CUDA 13, PyTorch 2.11, CuPy 14,
cupti-python 13.4) by benchmarks/gpu_check.sh, kept as fixtures (``tests/profiler/data/h200_*``):

* three torch.profiler traces of a small MLP training step (benchmarks/record_torch_gpu_traces.py):
  plain, the step replayed as a ``torch.cuda.CUDAGraph``, and with stacks and memory;
* gradtrace's own profile of a training step with kernel recording (CUPTI), from
  benchmarks/kernel_recording_check.py after the thread fix: its API calls sit on the
  threads and inside the ops that made them.

Figures pinned from these files (what gradtrace reads in them today)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from gradtrace import profiler
from gradtrace.profiler.kernels import kernel_table
from gradtrace.profiler.records import GpuKind, Scope

from .kineto_samples import DATA

PLAIN, GRAPH, STACK_MEMORY = (DATA / f"h200_torch_{n}.json.gz" for n in ("plain", "cuda_graph", "stack_memory"))
OWN = DATA / "h200_gradtrace_kernels.gtprof"
API = re.compile(r"cu(da)?[A-Z]")


def _device_ns(data):
    ev, cols = data.gpu_columns["event"], data.event_columns
    return int((cols["device_end_ns"][ev] - cols["device_start_ns"][ev]).sum())


# path: (events, device activities, device ns)
PINNED = {PLAIN: (271, 42, 122_653), GRAPH: (68, 46, 132_063), STACK_MEMORY: (279, 42, 122_755),
          OWN: (309, 105, 168_925)}


@pytest.mark.parametrize("path", list(PINNED), ids=lambda p: p.name)
def test_every_device_nanosecond_is_counted_once(path):
    data = profiler.load(path)
    events, activities, device_ns = PINNED[path]
    assert (data.n_events, len(data.gpu_columns["event"]), _device_ns(data)) == (events, activities, device_ns)
    a = data.analysis
    assert int(a.self_cuda_ns.sum()) == device_ns == int(a.cuda_total_ns[a.parent < 0].sum())
    assert data.metadata["device_properties"][0]["name"] == "NVIDIA H200"


def test_a_cuda_graph_launch_holds_its_kernels():
    data = profiler.load(GRAPH)
    a, names = data.analysis, data.strings
    launches = [i for i in range(data.n_events) if data.name_of(i) == "cudaGraphLaunch"]
    assert len(launches) == 2
    kernels = data.gpu_columns["event"][data.gpu_columns["kind"] == GpuKind.KERNEL]
    under = {int(a.parent[k]) for k in kernels.tolist()}
    per_launch = [sum(1 for k in kernels.tolist() if a.parent[k] == launch) for launch in launches]
    assert per_launch == [20, 20] and set(launches) <= under
    assert all(names[i] for i in data.event_columns["name_id"][kernels])


def test_stacks_and_memory_are_read():
    data = profiler.load(STACK_MEMORY)
    assert int((data.event_columns["stack_id"] >= 0).sum()) == 89
    assert len(data.memory_columns["time_ns"]) == 60
    assert data.metadata["profile_memory"] is True or len(data.memory_columns["time_ns"])


def test_own_recording_puts_each_launch_inside_its_op_on_its_thread():
    """What the first H200 run got wrong (CUPTI names threads by pthread_self): every
    launching call on an engine thread and inside an op or backward node."""
    data = profiler.load(OWN)
    cols, g, a = data.event_columns, data.gpu_columns, data.analysis
    counts = data.metadata["kernel_recording_counts"]
    assert counts["gpu_events_without_launch"] == 0 and "unmatched_os_threads" not in counts
    calls = a.parent[g["event"]]
    assert (calls >= 0).all()
    assert all(API.match(data.name_of(c)) for c in calls.tolist())
    ops = a.parent[calls]
    assert (ops >= 0).all()
    op_threads = set(cols["thread_id"][cols["scope"] != Scope.USER_SCOPE].tolist())
    assert set(cols["thread_id"][calls].tolist()) <= op_threads
    # The runtime calls Kineto leaves out are left out here too.
    assert not {data.name_of(i) for i in range(data.n_events)} & {"cudaGetDevice", "cudaSetDevice"}


def test_own_recording_kernels_have_h200_occupancy():
    data = profiler.load(OWN)
    rows = kernel_table(data)
    assert len(rows) == 17
    gemm = [r for r in rows if r.name.startswith("sm80_xmma_gemm")]
    assert gemm and all(r.tensor_cores for r in gemm)
    computation = [r for r in rows if r.kind == "COMPUTATION"]
    assert len(computation) == 16
    assert all(r.occupancy_pct is not None and 0 <= r.occupancy_pct <= 100 for r in computation)
