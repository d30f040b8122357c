"""Profiler collection overhead on a chain of tiny ops.

``y = y * 1.0001 + 0.0001`` for 2,000 iterations on a 16-element float32 tensor with
requires_grad, forward then backward (about 8,000 recorded ranges: 4,000 forward ops, 4,000
backward nodes). Median of 7 runs each: profiling off, on (cpu), and on with record_shapes.
The profiled time includes start and stop (turning the rows into columns), not analysis.
Two reference rows register a do-nothing range sink (without / with input descriptions), the
lane the profiler uses, to split the cost between the engine's RecordFunction machinery
(building each range's row) and the profiler's own work (keeping the rows, the stop).
Target (issue 17): profiled <= 1.3x unprofiled, with and without record_shapes.

Usage: python benchmarks/profiler_overhead.py [--iterations N] [--repeats R] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gradtrace import autograd  # noqa: E402
from gradtrace import profiler  # noqa: E402
from gradtrace.autograd import record_function as rf  # noqa: E402


def chain(n: int) -> None:
    x = autograd.full((16,), 0.5, requires_grad=True)
    y = x
    for _ in range(n):
        y = y * 1.0001 + 0.0001
    y.sum().backward()


def run(n: int, mode: str) -> tuple[float, int]:
    """Seconds for one forward+backward of the chain, and the number of recorded events."""
    if mode == "off":
        t0 = time.perf_counter()
        chain(n)
        return time.perf_counter() - t0, 0
    if mode.startswith("null-sink"):
        # The engine's own RecordFunction cost (a row per range, input descriptions) with a
        # sink that drops the rows: what is left above it is the profiler's share.
        handle = rf.add_range_sink(lambda row: None, needs_inputs=mode.endswith("+inputs"))
        t0 = time.perf_counter()
        chain(n)
        elapsed = time.perf_counter() - t0
        handle.remove()
        return elapsed, 0
    t0 = time.perf_counter()
    with profiler.profile(activities=["cpu"], record_shapes=(mode == "on+shapes")) as prof:
        chain(n)
    elapsed = time.perf_counter() - t0
    return elapsed, prof.profile_data.n_events


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results",
                                                       "profiler_overhead.json"))
    args = parser.parse_args(argv)
    modes = ["off", "null-sink", "null-sink+inputs", "on", "on+shapes"]
    for mode in modes:                       # warm-up: imports, caches, interning
        run(args.iterations, mode)
    times = {m: [] for m in modes}
    events = {}
    for _ in range(args.repeats):            # interleaved so drift hits every mode alike
        for mode in modes:
            t, n = run(args.iterations, mode)
            times[mode].append(t)
            events[mode] = n
    base = statistics.median(times["off"])
    n_recorded = events["on"]
    engine_only = {"on": statistics.median(times["null-sink"]),
                   "on+shapes": statistics.median(times["null-sink+inputs"])}
    rows = []
    for mode in modes:
        med = statistics.median(times[mode])
        rows.append({
            "mode": mode, "median_s": med, "ratio_vs_off": med / base,
            "events": events[mode],
            # Above "off", per range the engine reports (whether or not a profiler listens).
            "overhead_us_per_event": (med - base) / n_recorded * 1e6,
            # Above the engine's cost with do-nothing callbacks: the profiler's own share.
            "profiler_share_us_per_event": ((med - engine_only[mode]) / n_recorded * 1e6
                                            if mode in engine_only else None),
            "runs_s": times[mode],
        })
    print(f"chain of {args.iterations} iterations (16 x float32, forward + backward), "
          f"median of {args.repeats}")
    print(f"{'mode':<22}{'median ms':>11}{'x off':>8}{'events':>8}{'us/range':>10}{'profiler us/range':>19}")
    for r in rows:
        share = r["profiler_share_us_per_event"]
        print(f"{r['mode']:<22}{r['median_s'] * 1e3:>11.2f}{r['ratio_vs_off']:>8.2f}{r['events']:>8}"
              f"{r['overhead_us_per_event']:>10.3f}{'' if share is None else f'{share:.3f}':>19}")
    result = {"benchmark": "profiler_overhead", "iterations": args.iterations, "repeats": args.repeats,
              "python": platform.python_version(), "machine": platform.machine(), "rows": rows,
              "target": "profiled <= 1.3x unprofiled"}
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    main()
