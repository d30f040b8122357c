"""The GPU check script's dry run on a CPU: every step is listed, the CPU-capable ones run and
pass, the GPU-only ones say they were skipped, so the first minute of a lent GPU goes to
measuring (benchmarks/gpu_check.sh, ../shared/GPU.md)."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEPS = ["environment", "wheels", "cuda_tests", "kernel_recording", "profiler_truth", "torch_traces", "train_step", "host_overhead", "graph_probe", "compiled_backward",
         "memory", "full_tests"]


def test_dry_run(tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ, OUT=str(out))
    proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--dry-run"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    summary = dict(line.split(": ", 1) for line in (out / "summary.txt").read_text().splitlines())
    assert list(summary) == STEPS
    for name in ("environment", "profiler_truth", "torch_traces", "memory", "host_overhead"):
        assert summary[name].startswith("rc=0"), (name, (out / f"{name}.log").read_text()[-2000:])
    for name in ("wheels", "kernel_recording", "cuda_tests", "train_step", "graph_probe", "compiled_backward",
                 "full_tests"):
        assert summary[name] == "skipped (no GPU)"
    truth = json.loads((out / "profiler_truth.json").read_text())
    assert truth["truth"]["sums_telescope"] and truth["truth"]["cuda_never_above_wall"]
    assert truth["overhead"]["ratio"] > 0
