"""gradtrace's HTA figures against HTA's own, pinned from ``data/record_hta_figures.py``
(HolisticTraceAnalysis 0.5.0; HTA is not a dependency: its numbers are written down here).

Where the definition is the same the figures are equal. Three things differ by design, and the
comparison takes them out first (see docs/gpu-analysis.md, "gradtrace and HTA"):

* **the work counted**: with two or more profiler steps HTA keeps only the GPU activities whose
  runtime call is in the trace (the 872 NCCL and other kernels of ``gpu_5steps_rank0`` launched
  from threads the trace did not record are dropped); gradtrace keeps every activity, so that
  Σ self CUDA is the trace's device time. :func:`_hta_selection` makes the same choice.
* **the window**: HTA takes the span from the first activity's start to the last one's end;
  gradtrace takes the steps (first step's start to last step's end). The comparison uses HTA's.
* **cuda_sync events** ("Stream Sync", "Stream Wait Event" of the simple_add and AlexNet
  traces) are GPU activities to HTA (a wait counted as compute, a sync as non-compute) and not
  to gradtrace, which imports work, not waits: there gradtrace's compute and span are smaller.
"""
from __future__ import annotations


import numpy as np
import pytest

from gradtrace.profiler import load
from gradtrace.profiler import gpu as G

from . import gpu_traces as gt
from . import kineto_samples as ks

# The real traces by name: kept in data/, and the five-step original where ../shared has it.
TRACES = {p.name: p for p in ks.gpu_traces()}

# HTA's figures (microseconds), printed by data/record_hta_figures.py.
HTA = {
    "gpu_traces": {
        "comm_comp_overlap_pct": 20.0, "compute_us": 110.0, "non_compute_us": 15.0, "idle_us": 25.0,
        "kernel_span_us": 150.0, "idle_breakdown_us": {"host_wait": 20.0, "kernel_wait": 13.0, "other": 0.0},
        "kernel_type_us": {"COMMUNICATION": 8.0, "COMPUTATION": 108.0, "COMPUTATION overlapping COMMUNICATION": 2.0,
                           "MEMORY": 7.0},
        "queue_length_max": {"20": 1, "7": 2},
        "launch": {"count": 5, "short_kernels": 0, "launch_delay_sum_us": 38.0, "cpu_duration_sum_us": 13.0}},
    "gpu_1step.json.gz": {
        "comm_comp_overlap_pct": 1.08, "compute_us": 67035.0, "non_compute_us": 65914.0, "idle_us": 237696.0,
        "kernel_span_us": 370645.0,
        "idle_breakdown_us": {"host_wait": 173997.0, "kernel_wait": 8104.0, "other": 888900.0},
        "kernel_type_us": {"COMMUNICATION": 55654.0, "COMMUNICATION overlapping MEMORY": 142.0,
                           "COMPUTATION": 64871.0, "COMPUTATION overlapping COMMUNICATION": 611.0,
                           "COMPUTATION overlapping MEMORY": 1553.0, "MEMORY": 10118.0},
        "queue_length_max": {"25": 4, "27": 17, "285": 4, "363": 4, "7": 917, "84": 3},
        "launch": {"count": 1306, "short_kernels": 415, "launch_delay_sum_us": 157401234.0, "cpu_duration_sum_us": 167134.0}},
    "gpu_5steps_rank0.json.gz": {
        "comm_comp_overlap_pct": 1.47, "compute_us": 179676.0, "non_compute_us": 201180.0, "idle_us": 848216.0,
        "kernel_span_us": 1229072.0,
        "idle_breakdown_us": {"host_wait": 1926182.0, "kernel_wait": 22177.0, "other": 3483505.0},
        "kernel_type_us": {"COMMUNICATION": 159989.0, "COMMUNICATION overlapping MEMORY": 744.0,
                           "COMPUTATION": 173432.0, "COMPUTATION overlapping COMMUNICATION": 2405.0,
                           "COMPUTATION overlapping MEMORY": 3839.0, "MEMORY": 40447.0},
        "queue_length_max": {"25": 4, "27": 17, "285": 4, "363": 4, "7": 946, "84": 3},
        "launch": {"count": 6530, "short_kernels": 2080, "launch_delay_sum_us": 793205203.0, "cpu_duration_sum_us": 858754.0}},
    "simple_add_trace.json.gz": {
        "comm_comp_overlap_pct": None, "compute_us": 10676.0, "non_compute_us": 39287.0, "idle_us": 16414376.0,
        "kernel_span_us": 16464339.0, "idle_breakdown_us": {"host_wait": 29559515.0, "kernel_wait": 99.0, "other": 0.0},
        "kernel_type_us": {"COMPUTATION": 10676.0, "MEMORY": 39088.0}, "queue_length_max": {"20": 1, "7": 5},
        "launch": {"count": 98, "short_kernels": 29, "launch_delay_sum_us": 10264.0, "cpu_duration_sum_us": 4260778.0}},
    "alexnet_cuda_sync.json.gz": {
        "comm_comp_overlap_pct": None, "compute_us": 10637.0, "non_compute_us": 55690.0, "idle_us": 12929684.0,
        "kernel_span_us": 12996011.0,
        "idle_breakdown_us": {"host_wait": 24866725.0, "kernel_wait": 107.0, "other": 0.0},
        "kernel_type_us": {"COMPUTATION": 10637.0, "MEMORY": 55511.0}, "queue_length_max": {"20": 2, "7": 18},
        "launch": {"count": 98, "short_kernels": 23, "launch_delay_sum_us": 39283.0, "cpu_duration_sum_us": 3113616.0}},
    "amd_mi250_minitoy_train.json.gz": {
        "comm_comp_overlap_pct": None, "compute_us": 96.0, "non_compute_us": 35.0, "idle_us": 8780.0,
        "kernel_span_us": 8911.0, "idle_breakdown_us": {"host_wait": 8780.0, "other": 0.0},
        "kernel_type_us": {"COMPUTATION": 96.0, "MEMORY": 35.0}, "queue_length_max": {"0": 1},
        "launch": {"count": 0, "short_kernels": 0, "launch_delay_sum_us": 0.0, "cpu_duration_sum_us": 0.0}},
}


def _hta_selection(data) -> tuple[G.DeviceWork, dict]:
    """The device work HTA analyses and gradtrace's figures over HTA's window."""
    (work,) = G.device_work(data).values()
    steps = data.step_ranges(device_aligned=False)
    if len(steps) >= 2:
        # HTA's _filter_irrelevant_gpu_kernels: activities whose runtime call (by correlation)
        # started by the end of the last step.
        work = work.take((work.launch_call >= 0) & (work.launch_start <= steps[-1][2]))
    lo, hi = np.array([work.start.min()]), np.array([work.end.max()])
    return work, {**G.device_figures(data, work, lo, hi)[0], "kernel_span_us": float(hi[0] - lo[0]) / 1000}


def _queue_max(data, work: G.DeviceWork) -> dict:
    return {str(s): int(q.max()) for s, (_, q) in G.queue_length(data, work.device).items()}


def _launch(data, device: str) -> dict:
    stats = G.launch_stats(data, device)
    return {"count": len(stats["event"]), "short_kernels": int(stats["short"].sum()),
            "launch_delay_sum_us": float(stats["launch_delay_us"].sum()),
            "cpu_duration_sum_us": float(stats["cpu_duration_us"].sum())}


@pytest.mark.parametrize("name", ["gpu_traces", *(n for n in HTA if n in TRACES and not n.startswith("amd"))])
def test_launch_statistics_equal_hta(name, tmp_path):
    """HTA's cuda_kernel_launch_stats: the launches of cudaLaunchKernel, cudaMemcpyAsync and
    cudaMemsetAsync, their delays (start − call end, clipped at 0) and short kernels."""
    data = load(gt.write_gpu_trace(tmp_path / "trace.json") if name == "gpu_traces" else TRACES[name])
    assert _launch(data, "cuda:0") == HTA[name]["launch"]


def _check_same_definition(ours: dict, hta: dict) -> None:
    t = ours["temporal"]
    assert (t["idle_us"], t["compute_us"], t["non_compute_us"]) == (hta["idle_us"], hta["compute_us"],
                                                                     hta["non_compute_us"])
    assert ours["kernel_span_us"] == hta["kernel_span_us"]
    assert {k[:-len("_us")]: v for k, v in ours["idle_breakdown"].items()} == hta["idle_breakdown_us"]
    assert ours["comm_comp_overlap_pct"] == pytest.approx(hta["comm_comp_overlap_pct"], abs=0.005)  # HTA rounds
    assert ours["kernel_type_us"] == hta["kernel_type_us"]


def test_generated_trace_equals_hta(tmp_path):
    data = load(gt.write_gpu_trace(tmp_path / "trace.json"))
    work, ours = _hta_selection(data)
    _check_same_definition(ours, HTA["gpu_traces"])
    assert _queue_max(data, work) == HTA["gpu_traces"]["queue_length_max"]


@pytest.mark.parametrize("name", [n for n in ("gpu_1step.json.gz", "gpu_5steps_rank0.json.gz") if n in TRACES])
def test_training_steps_equal_hta(name):
    data = load(TRACES[name])
    work, ours = _hta_selection(data)
    hta = HTA[name]
    _check_same_definition(ours, hta)
    assert _queue_max(data, work) == hta["queue_length_max"]
    # gradtrace's own figures (every activity, over the steps) differ from HTA's as the module
    # docstring says: with two or more steps, more work (the kernels without a runtime call)
    # over a longer window; with one, HTA too keeps every activity.
    dev = data.gpu_summary()["devices"]["cuda:0"]
    if len(data.step_ranges()) >= 2:
        assert dev["temporal"]["compute_us"] > hta["compute_us"]
    else:
        assert dev["temporal"]["compute_us"] == hta["compute_us"]


@pytest.mark.parametrize("name", ["simple_add_trace.json.gz", "alexnet_cuda_sync.json.gz"])
def test_traces_with_sync_events_against_hta(name):
    data = load(TRACES[name])
    work, ours = _hta_selection(data)
    hta = HTA[name]
    # Same: the memcpy/memset time, the idle breakdown (sync events sit on streams of their own
    # moments, between kernels, and change no gap's cause), no communication.
    assert ours["kernel_type_us"]["MEMORY"] == hta["kernel_type_us"]["MEMORY"]
    assert {k[:-len("_us")]: v for k, v in ours["idle_breakdown"].items()} == hta["idle_breakdown_us"]
    assert ours["comm_comp_overlap_pct"] is None and hta["comm_comp_overlap_pct"] is None
    # Different: HTA counts "Stream Wait Event" as compute and its sync events widen its span.
    assert 0 < hta["compute_us"] - ours["temporal"]["compute_us"] < 10
    assert ours["kernel_span_us"] <= hta["kernel_span_us"]


def test_amd_trace_against_hta():
    """HTA rounds each activity's start up to a whole microsecond and drops the fraction of its
    duration; the MI250 trace's times have fractions, so HTA's figures are smaller, by less
    than 2 us an activity. gradtrace keeps the fractions."""
    data = load(ks.AMD)
    work, ours = _hta_selection(data)
    hta = HTA["amd_mi250_minitoy_train.json.gz"]
    n = len(work.start)
    for ours_us, hta_us in ((ours["temporal"]["compute_us"], hta["compute_us"]),
                            (ours["kernel_type_us"]["MEMORY"], hta["kernel_type_us"]["MEMORY"])):
        assert 0 <= ours_us - hta_us < 2 * n
    assert _queue_max(data, work) == hta["queue_length_max"]
    # HTA's launch statistics look for the CUDA names only (none here: 0 launches); gradtrace
    # takes their HIP forms too (hipLaunchKernel...), as HTA's queue length does.
    assert hta["launch"]["count"] == 0 and _launch(data, work.device)["count"] == 16
