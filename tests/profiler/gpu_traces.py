"""A small torch.profiler (Kineto) GPU trace built by hand, whose every GPU figure can be
worked out on paper: the fixture of the kernel-argument import, exact device time (a
CUDA-graph launch), device-aligned steps and the GPU analyses. It lives in ``tests/`` so
that kernel attribution is tested whether or not ``../shared/kineto-samples`` is there.

Times are microseconds from the trace's ``baseTimeNanoseconds``, as Kineto writes them.
One host thread (pid 100, tid 100); the device is pid 0, streams 7 (compute) and 20 (NCCL).

ProfilerStep#1, host [0, 100]:

=====  ==========================  ===========  ====================================
host   op / runtime call           correlation  device activity (stream, interval)
=====  ==========================  ===========  ====================================
10-30  aten::mm / cudaLaunchKernel 11           sgemm kernel (7, [20, 50])
35-45  aten::copy_ / MemcpyAsync   12           Memcpy HtoD Pageable (7, [55, 60])
46-50  aten::zero_ / MemsetAsync   13           Memset (7, [60, 62])
60-64  cudaGraphLaunch             14           3 kernels (7, [70, 75] [75, 85] [85, 90])
80-90  nccl:all_reduce / Launch    15           NCCL all-reduce kernel (20, [88, 98])
92-99  cudaDeviceSynchronize
=====  ==========================  ===========  ====================================

ProfilerStep#2, host [100, 150]: aten::mm at 105-120 launches (correlation 21, 106-108) a
kernel on stream 7 at [110, 170] — 20 us past its step's host end: the device tail.

So: kernels 30 + 5 + 10 + 5 + 10 + 60 = 120 us, memcpy 5, memset 2; Σ = 127 us. The three
graph kernels share correlation 14 and are placed at one instant (the launch's start).
Device-aligned steps: [0, 100] (its work ends at 98) and [100, 170].
"""
from __future__ import annotations

import json
from pathlib import Path

BASE_NS = 1_700_000_000_000_000_000
HOST = dict(pid=100, tid=100)
SGEMM = "void ampere_sgemm_128x64_tn(int, int, int, float const*, int, float const*, int, float*, int)"
ELEMENTWISE = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
               "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)")
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
MEMCPY = "Memcpy HtoD (Pageable -> Device)"
MEMSET = "Memset (Device)"

# Launch arguments of the kernels, as Kineto writes them.
SGEMM_ARGS = {"grid": [8, 4, 1], "block": [256, 1, 1], "registers per thread": 128, "shared memory": 16384,
              "blocks per SM": 0.5, "warps per SM": 4.0, "est. achieved occupancy %": 25}
SMALL_ARGS = {"grid": [216, 1, 1], "block": [128, 1, 1], "registers per thread": 32, "shared memory": 0,
              "blocks per SM": 2.0, "warps per SM": 8.0, "est. achieved occupancy %": 50}
NCCL_ARGS = {"grid": [2, 1, 1], "block": [640, 1, 1], "registers per thread": 96, "shared memory": 4096,
             "blocks per SM": 0.0185, "warps per SM": 0.37, "est. achieved occupancy %": 3}

KERNEL_US = 120
MEMCPY_US = 5
MEMSET_US = 2
DEVICE_US = KERNEL_US + MEMCPY_US + MEMSET_US
HOST_STEPS_US = [(0, 100), (100, 150)]
ALIGNED_STEPS_US = [(0, 100), (100, 170)]
GRAPH_KERNELS_US = [(70, 75), (75, 85), (85, 90)]


def _x(cat: str, name: str, ts: float, dur: float, device: bool = False, stream: int = 7, **args) -> dict:
    where = {"pid": 0, "tid": stream} if device else HOST
    if device:
        args = {"device": 0, "context": 1, "stream": stream, **args}
    return {"ph": "X", "cat": cat, "name": name, **where, "ts": ts, "dur": dur, "args": args}


def _launch(events: list, op: str | None, op_span, call: str, call_span, corr: int, activities) -> None:
    """An op (optional) around a runtime call that starts ``activities``: (cat, name, ts, dur, args)."""
    ext = {"External id": corr}
    if op is not None:
        events.append(_x("cpu_op", op, op_span[0], op_span[1] - op_span[0], **ext))
    events.append(_x("cuda_runtime", call, call_span[0], call_span[1] - call_span[0], correlation=corr, **ext))
    for cat, name, ts, dur, args, stream in activities:
        events.append(_x(cat, name, ts, dur, device=True, stream=stream, correlation=corr, **ext, **args))


def gpu_trace() -> dict:
    """The trace document (a dict ready for ``json.dumps``)."""
    ev: list = [
        _x("user_annotation", "ProfilerStep#1", 0, 100),
        _x("user_annotation", "ProfilerStep#2", 100, 50),
    ]
    _launch(ev, "aten::mm", (10, 30), "cudaLaunchKernel", (12, 16), 11,
            [("kernel", SGEMM, 20, 30, SGEMM_ARGS, 7)])
    _launch(ev, "aten::copy_", (35, 45), "cudaMemcpyAsync", (36, 40), 12,
            [("gpu_memcpy", MEMCPY, 55, 5, {"bytes": 1_000_000, "memory bandwidth (GB/s)": 200.0}, 7)])
    _launch(ev, "aten::zero_", (46, 50), "cudaMemsetAsync", (47, 48), 13,
            [("gpu_memset", MEMSET, 60, 2, {"bytes": 4096, "memory bandwidth (GB/s)": 2.048}, 7)])
    _launch(ev, None, None, "cudaGraphLaunch", (60, 64), 14,
            [("kernel", ELEMENTWISE, s, e - s, SMALL_ARGS, 7) for s, e in GRAPH_KERNELS_US])
    _launch(ev, "nccl:all_reduce", (80, 90), "cudaLaunchKernel", (81, 83), 15,
            [("kernel", NCCL, 88, 10, NCCL_ARGS, 20)])
    ev.append(_x("cuda_runtime", "cudaDeviceSynchronize", 92, 7, correlation=16))
    _launch(ev, "aten::mm", (105, 120), "cudaLaunchKernel", (106, 108), 21,
            [("kernel", SGEMM, 110, 60, SGEMM_ARGS, 7)])
    ev.append({"ph": "M", "name": "thread_name", **HOST, "args": {"name": "python"}})
    return {"schemaVersion": 1, "baseTimeNanoseconds": BASE_NS, "displayTimeUnit": "ms",
            "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85_520_809_984,
                                  "computeMajor": 9, "computeMinor": 0, "maxThreadsPerBlock": 1024,
                                  "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536,
                                  "regsPerMultiprocessor": 65536, "warpSize": 32, "sharedMemPerBlock": 49152,
                                  "sharedMemPerMultiprocessor": 233472, "numSms": 132,
                                  "sharedMemPerBlockOptin": 232448}],
            "traceEvents": ev}


def write_gpu_trace(path) -> Path:
    """Write :func:`gpu_trace` to ``path`` (``.json``) and return the path."""
    path = Path(path)
    path.write_text(json.dumps(gpu_trace()))
    return path
