"""Kernel recording's Python logic (profiler/cupti_activity.py and the collector's placement of
CUPTI records), on hand-built records: no CUPTI, no GPU. The end-to-end runs against the
stand-in CUPTI are in test_kernel_recording.py."""
from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import pytest

from gradtrace import profiler
from gradtrace.profiler import collector as collector_module
from gradtrace.profiler import cupti_activity
from gradtrace.profiler.collector import Collector
from gradtrace.profiler.cupti_activity import (ActivityRecords, ClockFit, api_call_name, clock_sample, demangle,
                                               memcpy_name, memset_name)
from gradtrace.profiler.data import ProfileData
from gradtrace.profiler.kernel_names import memcpy_kind, readable_kernel_name
from gradtrace.profiler.records import EVENT_COLUMNS, GpuKind, Scope, empty_columns

A100 = {"id": 0, "name": "NVIDIA A100", "computeMajor": 8, "computeMinor": 0, "maxThreadsPerBlock": 1024,
        "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32,
        "sharedMemPerBlock": 49152, "sharedMemPerMultiprocessor": 167936, "numSms": 108}


# ----------------------------------------------------------------------------- names


@pytest.mark.parametrize("mangled, demangled", [
    ("_Z10add_kernelPfS_i", "add_kernel(float*, float*, int)"),
    ("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_",
     "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
     "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)"),
    ("ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn"),       # cuBLAS's: not mangled
    ("_Znot a symbol", "_Znot a symbol"),                         # fails: the raw name
])
def test_kernel_names_are_demangled_as_kineto_shows_them(mangled, demangled):
    assert demangle(mangled) == demangled


def test_a_demangled_name_shortens_as_on_a_torch_trace():
    name = demangle("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_")
    assert readable_kernel_name(name) == "at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, " \
                                         "at::detail::Array<char*, 1> >"


def test_memcpy_and_memset_names_are_kinetos_and_their_kinds_read_back():
    # CUpti_ActivityMemcpyKind HTOD=1, DTOH=2, DTOD=8; CUpti_ActivityMemoryKind PAGEABLE=1, PINNED=2, DEVICE=3.
    assert memcpy_name(1, 1, 3) == "Memcpy HtoD (Pageable -> Device)"
    assert memcpy_name(2, 3, 2) == "Memcpy DtoH (Device -> Pinned)"
    assert memcpy_name(8, 3, 3) == "Memcpy DtoD (Device -> Device)"
    assert memset_name(3) == "Memset (Device)"
    assert memcpy_kind(memcpy_name(1, 1, 3)) == ("HtoD", "pageable")      # the pin_memory advice reads this
    assert memcpy_kind(memcpy_name(1, 2, 3)) == ("HtoD", "pinned")
    assert memcpy_kind(memset_name(3)) == ("Memset", None)
    assert memcpy_name(42, 9, 3) == "Memcpy <unknown> (Unrecognized -> Device)"


@pytest.mark.parametrize("raw, name", [("cudaLaunchKernel_v7000", "cudaLaunchKernel"),
                                       ("cudaMemcpyAsync_ptsz_v7000", "cudaMemcpyAsync"),
                                       ("cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync"),
                                       ("cuLaunchKernel", "cuLaunchKernel"),
                                       ("cudaGraphLaunch_v10000", "cudaGraphLaunch")])
def test_api_call_names_lose_their_version_suffix(raw, name):
    assert api_call_name(raw) == name


# ----------------------------------------------------------------------------- clocks


def test_the_clock_fit_maps_an_offset_clock_running_at_another_rate():
    # CUPTI's clock: 5 s ahead and 200 ppm fast.
    def cupti(p):
        return 5_000_000_000 + int(p * 1.0002)

    samples = [(cupti(1_000_000), 1_000_000), (cupti(2_001_000_000), 2_001_000_000)]
    fit = ClockFit(samples)
    perf = np.array([1_000_000, 500_000_000, 2_001_000_000, 3_000_000_000])
    np.testing.assert_allclose(fit.to_perf_ns([cupti(p) for p in perf]), perf, atol=2)
    one = ClockFit(samples[:1])                            # one sample: the offset only
    assert one.slope == 1.0 and one.to_perf_ns([samples[0][0]])[0] == samples[0][1]


def test_a_clock_sample_pairs_the_tightest_read():
    ticks = iter([0, 1000, 5000, 5010, 9000, 9004, 20000, 20100, 30000, 30500])
    cupti_reads = iter([77, 88, 99, 111, 122])
    c, p = clock_sample(lambda: next(cupti_reads), lambda: next(ticks))
    assert (c, p) == (99, 9002)                            # the 4 ns pair, at its midpoint


# ----------------------------------------------------------------------------- unavailable


def test_a_missing_cupti_python_gives_the_install_line(monkeypatch):
    monkeypatch.setattr(cupti_activity, "_loaded", {})
    monkeypatch.setitem(sys.modules, "cupti", None)          # import cupti raises ImportError
    module, reason = cupti_activity.load_cupti()
    assert module is None and reason == cupti_activity.NOT_INSTALLED
    assert "pip install 'gradtrace[cuda12]'" in reason


def test_record_kernels_true_without_cuda_says_why():
    with pytest.raises(RuntimeError, match="record_kernels=True, but kernels cannot be recorded: 'cuda' is not"):
        with profiler.profile(activities=["cpu"], record_kernels=True):
            pass
    with pytest.raises(ValueError, match="record_kernels"):
        profiler.profile(record_kernels="yes")


def test_a_cpu_profile_is_unchanged():
    with profiler.profile(activities=["cpu"]) as prof:
        pass
    assert "kernel_recording" not in prof.profile_data.metadata
    assert len(prof.profile_data.gpu_columns["event"]) == 0


# ----------------------------------------------------------------------------- records -> events


class _StubSession:
    """What the collector reads of an ActivitySession at stop."""

    def __init__(self, records, fit):
        self.records, self._fit = records, fit

    def clock(self):
        return self._fit

    def call_name(self, domain, cbid):
        return {(0, 211): "cudaLaunchKernel", (0, 311): "cudaGraphLaunch", (0, 41): "cudaMemcpyAsync",
                (0, 51): "cudaMemsetAsync", (0, 165): "cudaDeviceSynchronize", (1, 307): "cuLaunchKernel",
                (1, 7): "cuCtxGetCurrent"}[(domain, cbid)]

    def stream_id(self, handle):
        return {0x7F00: 7}.get(handle)


OFFSET = 9_000_000          # CUPTI ns - perf ns in the hand-built records


def _kernel(corr, start, end, grid=(216, 1, 1), block=(256, 1, 1), regs=32, name="_Z10add_kernelPfS_i"):
    return SimpleNamespace(start=start + OFFSET, end=end + OFFSET, device_id=0, context_id=1, stream_id=7,
                           correlation_id=corr, grid_x=grid[0], grid_y=grid[1], grid_z=grid[2], block_x=block[0],
                           block_y=block[1], block_z=block[2], registers_per_thread=regs, static_shared_memory=0,
                           dynamic_shared_memory=0, name=name, graph_id=0)


def _call(domain, cbid, corr, start, end, os_thread):
    return domain, SimpleNamespace(cbid=cbid, correlation_id=corr, start=start + OFFSET, end=end + OFFSET,
                                   thread_id=os_thread)


def _profile(monkeypatch):
    """A profile of two threads' ops and hand-built CUPTI records, built by the collector."""
    monkeypatch.setattr(collector_module, "_device_properties", lambda name: dict(A100))
    c = Collector({"cpu", "cuda"}, False, False, False, False, False)
    strings = [c._intern_string(s) for s in ("mm", "add", "ProfilerStep#0")]
    # thread 1: ProfilerStep#0 [0, 1000] > mm [100, 200]; thread 2: add [150, 260]
    events = empty_columns(EVENT_COLUMNS, 3)
    events.update(name_id=np.array([strings[2], strings[0], strings[1]], np.int32),
                  start_ns=np.array([0, 100, 150]), end_ns=np.array([1000, 200, 260]),
                  thread_id=np.array([1, 1, 2], np.int32), scope=np.array([2, 0, 0], np.int8),
                  sequence_nr=np.array([-1, 5, 6]), fwd_thread_id=np.zeros(3, np.int32),
                  device_id=np.full(3, c._intern_string("cuda:0"), np.int32), stream=np.full(3, 0x7F00))
    rec = ActivityRecords()
    R, D = cupti_activity.RUNTIME, cupti_activity.DRIVER
    for domain, call in (_call(R, 211, 1, 110, 130, 1001),          # mm's cuBLAS launch
                         _call(R, 311, 2, 150, 160, 1001),          # a CUDA-graph launch of 3 kernels
                         _call(D, 307, 3, 170, 180, 1002),          # add: CuPy's own kernel (driver)
                         _call(D, 7, 50, 171, 172, 1002),           # a driver call launching nothing
                         _call(R, 41, 4, 200, 270, 1002),           # overruns add by 10 ns: clamped
                         _call(R, 51, 5, 180, 190, 1001),
                         _call(R, 165, 60, 300, 310, 4242)):        # a thread the engine never saw
        rec.add_call(domain, call)
    rec.add_kernel(_kernel(1, 140, 190, grid=(864, 1, 1), regs=47))
    for k in range(3):
        rec.add_kernel(_kernel(2, 200 + 10 * k, 205 + 10 * k))
    rec.add_kernel(_kernel(3, 185, 195))
    rec.add_kernel(_kernel(99, 400, 420))                            # its launch is not in the profile
    rec.add_memcpy(SimpleNamespace(start=210 + OFFSET, end=214 + OFFSET, device_id=0, context_id=1, stream_id=7,
                                   correlation_id=4, bytes=4096, copy_kind=1, src_kind=2, dst_kind=3, graph_id=0))
    rec.add_memset(SimpleNamespace(start=230 + OFFSET, end=231 + OFFSET, device_id=0, context_id=1, stream_id=9,
                                   correlation_id=5, bytes=64, memory_kind=3, graph_id=0))
    c._kernel_session = _StubSession(rec, ClockFit([(OFFSET, 0), (OFFSET + 10**7, 10**7)]))
    c._kernel_records = rec
    c._native_threads = {1: (1001, 7_001, 7_001), 2: (1002, 7_002, 7_002)}
    c._start_ns, c._end_ns = 0, 1000
    merged, node, gpu, counts = c._with_kernels(events, np.full(3, -1, np.int64))
    data = ProfileData(merged, empty_columns(profiler.records.MEMORY_COLUMNS), c._strings, {"devices": ["cuda:0"]},
                       gpu_columns=gpu)
    return data, counts


def test_records_become_events_and_gpu_rows_as_a_torch_trace_import_makes_them(monkeypatch):
    data, counts = _profile(monkeypatch)
    cols, g, s = data.event_columns, data.gpu_columns, data.strings
    name = [s[i] for i in cols["name_id"]]
    parent = data.analysis.parent
    assert list(np.diff(g["event"]) > 0) == [True] * (len(g["event"]) - 1)      # ascending rows
    assert sorted(g["kind"].tolist()) == [GpuKind.KERNEL] * 6 + [GpuKind.MEMCPY, GpuKind.MEMSET]
    assert counts["api_calls"] == 6 and counts["gpu_events"] == 8 and counts["gpu_events_without_launch"] == 1
    assert "cuCtxGetCurrent" not in name                              # launched nothing: left out
    by_corr = {int(c_): [int(e) for e in g["event"][g["correlation"] == c_]] for c_ in np.unique(g["correlation"])}
    for corr, call_name, thread in ((1, "cudaLaunchKernel", 1), (2, "cudaGraphLaunch", 1), (3, "cuLaunchKernel", 2),
                                    (4, "cudaMemcpyAsync", 2), (5, "cudaMemsetAsync", 1)):
        for ev in by_corr[corr]:
            call = parent[ev]
            # zero CPU time, at the start of its launching call, a child of it, on its thread
            assert name[call] == call_name and cols["start_ns"][ev] == cols["end_ns"][ev] == cols["start_ns"][call]
            assert cols["thread_id"][ev] == cols["thread_id"][call] == thread
    assert len(by_corr[2]) == 3                                       # a graph's kernels: each its own event
    # The calls nest in their ops (the memcpy's call clamped into add's range).
    assert name[parent[parent[by_corr[1][0]]]] == "mm" and name[parent[parent[by_corr[3][0]]]] == "add"
    memcpy_call = parent[by_corr[4][0]]
    assert cols["end_ns"][memcpy_call] == 260 and name[parent[memcpy_call]] == "add"
    # A call from an OS thread the engine never saw: a thread of its own.
    sync = name.index("cudaDeviceSynchronize")
    assert cols["thread_id"][sync] == 3
    orphan = by_corr[99][0]
    assert cols["thread_id"][orphan] == counts["orphan_gpu_thread"] == 4 and parent[orphan] < 0
    # Device intervals on the profile's clock; streams as the profile stores them (handle), else CUPTI's id.
    assert cols["device_start_ns"][by_corr[1][0]] == 140 and cols["device_end_ns"][by_corr[1][0]] == 190
    assert set(cols["stream"][g["event"]].tolist()) == {0x7F00, 9}
    assert s[cols["device_id"][by_corr[1][0]]] == "cuda:0"
    # Names: demangled kernels; Kineto's memcpy/memset names.
    assert name[by_corr[1][0]] == "add_kernel(float*, float*, int)"
    assert name[by_corr[4][0]] == "Memcpy HtoD (Pinned -> Device)" and name[by_corr[5][0]] == "Memset (Device)"
    # Launch arguments and Kineto's estimates (A100: 864 blocks of 256, 47 registers -> 8, 64, 63 %).
    row = np.flatnonzero(g["event"] == by_corr[1][0])[0]
    assert (g["grid_x"][row], g["block_x"][row], g["registers_per_thread"][row]) == (864, 256, 47)
    assert (g["blocks_per_sm"][row], g["warps_per_sm"][row], g["occupancy_pct"][row]) == (8.0, 64.0, 63.0)
    copy = np.flatnonzero(g["event"] == by_corr[4][0])[0]
    assert g["bytes"][copy] == 4096 and g["bandwidth_gbps"][copy] == 1024.0 and np.isnan(g["occupancy_pct"][copy])
    assert g["context"][copy] == 1 and g["correlation"][copy] == 4


def test_self_cuda_is_the_activities_time_and_ops_total_their_kernels(monkeypatch):
    data, _ = _profile(monkeypatch)
    cols, g, a = data.event_columns, data.gpu_columns, data.analysis
    dur = cols["device_end_ns"][g["event"]] - cols["device_start_ns"][g["event"]]
    assert a.self_cuda_ns.sum() == dur.sum()
    assert a.self_cuda_ns.sum() == a.cuda_total_ns[a.parent < 0].sum()
    name = [data.strings[i] for i in cols["name_id"]]
    # mm's range holds its kernel (50 ns), the graph launch's three (3 x 5) and the memset (1).
    assert a.cuda_total_ns[name.index("mm")] == 50 + 15 + 1
    assert a.self_cuda_ns[name.index("mm")] == 0
    assert int((cols["scope"] == Scope.FUNCTION).sum()) == len(name) - 1
