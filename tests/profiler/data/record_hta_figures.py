"""Print HTA's figures for the GPU traces that tests/profiler/test_gpu_hta.py pins.

Not a test, and HTA is not a dependency of gradtrace: run it by hand with a Python that has
HolisticTraceAnalysis (a venv of its own, as it pulls pandas and plotly)::

    python -m venv /work/venv-hta && /work/venv-hta/bin/pip install HolisticTraceAnalysis
    /work/venv-hta/bin/python tests/profiler/data/record_hta_figures.py > hta_figures.json

It runs, on each real trace that has GPU work (kept here, and the five-step original of
``gpu_1step.json.gz`` when ``../shared/kineto-samples`` has it: see ``KINETO_SAMPLES.md``)
and on the generated trace of ``tests/profiler/gpu_traces.py``: the temporal breakdown, the idle-time breakdown
(default 30 us threshold, summed over streams), the communication/computation overlap, the
kernel-type breakdown (memory kernels included), the queue-length summary and the kernel
launch statistics. HTA wants a
folder of rank traces, so each trace is copied into a folder of its own. Every profiler step
is kept (``include_last_profiler_step=True``), as gradtrace keeps them.

Recorded with HolisticTraceAnalysis 0.5.0, pandas 3.1.1, numpy 2.4.6 (Python 3.11).
"""
from __future__ import annotations

import json
import logging
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLES = HERE.parents[2].parent / "shared" / "kineto-samples"
TRACES = (HERE / "gpu_1step.json.gz", HERE / "simple_add_trace.json.gz", HERE / "alexnet_cuda_sync.json.gz",
          HERE / "amd_mi250_minitoy_train.json.gz", SAMPLES / "gpu_5steps_rank0.json.gz")


def figures(trace: Path) -> dict:
    from hta.trace_analysis import TraceAnalysis  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(trace, Path(tmp) / ("rank0" + "".join(trace.suffixes)))
        ta = TraceAnalysis(trace_dir=tmp, include_last_profiler_step=True)
        rank = ta.t.get_ranks()[0]
        temporal = ta.get_temporal_breakdown(visualize=False).iloc[0]
        idle, _ = ta.get_idle_time_breakdown(ranks=[rank], visualize=False)
        idle_sum = idle.groupby("idle_category")["idle_time"].sum().to_dict()
        overlap = ta.get_comm_comp_overlap(visualize=False).iloc[0]["comp_comm_overlap_pctg"]
        kinds, _ = ta.get_gpu_kernel_breakdown(visualize=False, include_memory_kernels=True)
        queue = ta.get_queue_length_summary(ranks=[rank])
        try:
            launch = ta.get_cuda_kernel_launch_stats(ranks=[rank], visualize=False)[rank]
        except KeyError:    # no cudaLaunchKernel in the trace (the AMD one)
            launch = None
        queue_max = {} if queue is None else {
            str(int(s)): float(row[("queue_length", "max")]) for (_, s), row in queue.iterrows()}
    return {
        "idle_us": float(temporal["idle_time(us)"]),
        "compute_us": float(temporal["compute_time(us)"]),
        "non_compute_us": float(temporal["non_compute_time(us)"]),
        "kernel_span_us": float(temporal["kernel_time(us)"]),
        "idle_breakdown_us": {k: float(v) for k, v in idle_sum.items()},
        "comm_comp_overlap_pct": None if overlap != overlap else float(overlap),
        "kernel_type_us": {r["kernel_type"]: float(r["sum"]) for _, r in kinds.iterrows()},
        "queue_length_max": queue_max,
        # HTA's launch statistics: its short kernels, and its launch delays (start - call end,
        # clipped at 0) summed.
        "launch": None if launch is None else {
            "count": int(len(launch)),
            "short_kernels": int(((launch.cpu_duration <= 50) & (launch.gpu_duration < launch.cpu_duration)).sum()),
            "launch_delay_sum_us": float(launch.launch_delay.sum()),
            "cpu_duration_sum_us": float(launch.cpu_duration.sum())},
    }


def main() -> None:
    logging.disable(logging.WARNING)
    sys.path.insert(0, str(HERE.parents[2]))
    from tests.profiler import gpu_traces  # noqa: PLC0415

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        out["gpu_traces"] = figures(gpu_traces.write_gpu_trace(Path(tmp) / "trace.json"))
    for path in TRACES:
        if path.exists():
            out[path.name] = figures(path)
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
