"""Profiler truth on a device: do the profile's CUDA figures agree with the device's clock?

For a profiled training step of a small MLP (``--device cuda``: on the GPU, timed by CUDA
events; ``--device cpu``: the same code path with host clocks, the dry run of
``benchmarks/gpu_check.sh``):

* Σ self CUDA equals the top-level CUDA total (the sums telescope, nothing counted twice);
* the step's CUDA time stays within 10% of, and never above, the event-timed wall clock of
  the step (device time is a subset of the step's time);
* the profiler's overhead on a launch-bound step (many tiny ops): profiled / unprofiled step
  time, median of repeats after warm-up (target at most 1.3x).

Prints a table and writes JSON. Usage:
    python benchmarks/profiler_truth.py [--device cuda|cpu] [--steps N] [--quick] [--json PATH]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gradtrace import autograd as ag  # noqa: E402
from gradtrace import profiler  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _results import RESULTS_DIR, write_json  # noqa: E402


class _Clock:
    """Step wall clock: CUDA events on a GPU (the device's own timeline), else perf_counter."""

    def __init__(self, device: str):
        self.cuda = device.startswith("cuda")

    def start(self):
        if self.cuda:
            self.begin, self.end = ag.cuda.Event(enable_timing=True), ag.cuda.Event(enable_timing=True)
            self.begin.record()
        else:
            self.t0 = time.perf_counter()

    def stop_ms(self) -> float:
        if self.cuda:
            self.end.record()
            self.end.synchronize() if hasattr(self.end, "synchronize") else ag.cuda.synchronize()
            return float(self.begin.elapsed_time(self.end))
        return (time.perf_counter() - self.t0) * 1e3


def _mlp(device: str, width: int, depth: int, batch: int = 64):
    ag.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [ag.nn.Linear(width, width, device=device), ag.nn.ReLU()]
    model = ag.nn.Sequential(*layers, ag.nn.Linear(width, 1, device=device))
    opt = ag.optim.SGD(model.parameters(), lr=1e-3)
    x = ag.randn(batch, width, device=device)
    y = ag.randn(batch, 1, device=device)

    def step():
        opt.zero_grad()
        loss = ag.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    return step


def check_truth(device: str, steps: int, width: int, batch: int) -> dict:
    """Profile ``steps`` steps; per step, the profile's CUDA total against the wall clock.
    "Within 10%" holds only for a GPU-bound step: on a launch-bound one the device idles
    between kernels (the first H200 run: a 1024-wide MLP at batch 64 was 4% device time)."""
    step = _mlp(device, width, 4, batch)
    for _ in range(3):
        step()
    clock = _Clock(device)
    walls = []
    activities = ["cpu", "cuda"] if device.startswith("cuda") else ["cpu"]
    with profiler.profile(activities=activities) as prof:
        for _ in range(steps):
            clock.start()
            step()
            walls.append(clock.stop_ms())
            prof.step()
    data = prof.profile_data
    a = data.analysis
    self_cuda = int(a.self_cuda_ns.sum())
    top_cuda = int(a.cuda_total_ns[a.parent < 0].sum())
    # A step's CUDA time: the self CUDA of the events launched inside its host range.
    cols = data.event_columns
    step_cuda = [float(a.self_cuda_ns[(cols["start_ns"] >= s) & (cols["start_ns"] < e)].sum()) / 1e6
                 for _, s, e in data.step_ranges(device_aligned=False)]
    pairs = list(zip(step_cuda, walls))
    return {
        "device": device, "steps": steps, "width": width, "batch": batch,
        "kernel_recording": data.metadata.get("kernel_recording"),
        "self_cuda_total_ms": self_cuda / 1e6, "top_level_cuda_total_ms": top_cuda / 1e6,
        "sums_telescope": self_cuda == top_cuda,
        "step_cuda_ms": step_cuda, "step_wall_ms": walls,
        "cuda_never_above_wall": all(c <= w * 1.0001 for c, w in pairs),
        # Steady state: the first profiled step pays the profiler's start on the host (CUPTI's
        # first records: 37.7 ms against 32.2 of the others on an H200), and the device idles
        # meanwhile, which the profile shows as it should. Shown in the table, not checked.
        "cuda_within_10pct_of_wall": all(c >= 0.9 * w for c, w in pairs[1:]) if data.has_device_time else None,
    }


def _tiny_ops(device: str, n: int):
    x = ag.full((16,), 0.5, device=device, requires_grad=True)

    def step():
        y = x
        for _ in range(n):
            y = y * 1.0001 + 0.0001
        y.sum().backward()
        if device.startswith("cuda"):
            ag.cuda.synchronize()
    return step


def check_overhead(device: str, n: int, repeats: int, record_kernels=None) -> dict:
    """Launch-bound step (2n tiny forward ops, 2n backward nodes): profiled / unprofiled.
    On a GPU, with kernel recording (CUPTI) on and off: its API records cost per launch."""
    step = _tiny_ops(device, n)
    activities = ["cpu", "cuda"] if device.startswith("cuda") else ["cpu"]
    options = {"record_kernels": record_kernels} if device.startswith("cuda") else {}
    off, on = [], []
    step()
    for _ in range(repeats):   # interleaved, so drift hits both alike
        t0 = time.perf_counter()
        step()
        off.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        with profiler.profile(activities=activities, **options) as prof:
            step()
        _ = prof.profile_data.analysis       # the profile's first read is part of the cost
        on.append(time.perf_counter() - t0)
    off_ms, on_ms = statistics.median(off) * 1e3, statistics.median(on) * 1e3
    return {"ops": 4 * n, "off_ms": off_ms, "on_ms": on_ms, "ratio": on_ms / off_ms,
            "kernel_recording": prof.profile_data.metadata.get("kernel_recording")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda" if ag.cuda.is_available() else "cpu")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="tiny sizes (the dry run)")
    ap.add_argument("--json", default=os.path.join(RESULTS_DIR, "profiler_truth.json"))
    args = ap.parse_args(argv)
    cuda = args.device.startswith("cuda")
    # A GPU-bound step on a GPU (4096-wide, batch 4096: about 40 ms of matmuls on an H200).
    width, batch = (64, 64) if args.quick else (4096, 4096) if cuda else (1024, 64)
    n, repeats = (50, 3) if args.quick else (500, 15)
    truth = check_truth(args.device, 3 if args.quick else args.steps, width, batch)
    overheads = [check_overhead(args.device, n, repeats, rk) for rk in ((None, False) if cuda else (None,))]
    print(f"device {args.device}: {truth['steps']} profiled steps of a {width}-wide MLP, batch {batch}, "
          f"kernel recording {truth['kernel_recording']}")
    print(f"  Σ self CUDA {truth['self_cuda_total_ms']:.3f} ms, top-level CUDA total "
          f"{truth['top_level_cuda_total_ms']:.3f} ms: telescope {truth['sums_telescope']}")
    print(f"  {'step':>4} {'CUDA ms':>10} {'wall ms':>10} {'CUDA/wall':>10}")
    for k, (c, w) in enumerate(zip(truth["step_cuda_ms"], truth["step_wall_ms"])):
        print(f"  {k:>4} {c:>10.3f} {w:>10.3f} {c / w if w else 0:>10.3f}")
    print(f"  CUDA never above wall: {truth['cuda_never_above_wall']}; within 10% (steps 1-): "
          f"{truth['cuda_within_10pct_of_wall']}")
    for overhead in overheads:
        print(f"overhead, launch-bound step of {overhead['ops']} ops, kernel recording "
              f"{overhead['kernel_recording']}: off {overhead['off_ms']:.2f} ms, "
              f"profiled {overhead['on_ms']:.2f} ms, {overhead['ratio']:.2f}x (target <= 1.3x)")
    overhead = overheads[0]
    write_json(args.json, {"truth": truth, "overhead": overhead, "overheads": overheads})
    ok = truth["sums_telescope"] and truth["cuda_never_above_wall"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
