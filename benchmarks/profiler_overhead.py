"""Profiler collection overhead on a chain of tiny ops.

``y = y * 1.0001 + 0.0001`` for 2,000 iterations on a 16-element float32 tensor with
requires_grad, forward then backward (about 8,000 recorded ranges: 4,000 forward ops, 4,000
backward nodes). Median of 7 runs each: profiling off, on (cpu), and on with record_shapes.
The profiled time runs from entering ``profile()`` to leaving it (start, the recording,
stop). The rows become the profile's columns on its first read, as torch.profiler builds
its events on first read; that read is timed apart ("first read") and shown added to the
profiled time too ("x off with read"), so no part of the profiler's work goes unmeasured.
Two reference rows register a do-nothing range sink (without / with input descriptions), the
lane the profiler uses, to split the cost between the engine's RecordFunction machinery
(building each range's row) and the profiler's own work (keeping the rows, the stop).
Target (issue 17): profiled <= 1.3x unprofiled, with and without record_shapes.
Two more rows (issue 31) split the chain into 10 steps of a tenth of the iterations each,
calling ``prof.step()`` after each: "steps" as is, "steps+journal" with the profile written
step by step (``prof.journal(path)``, what ``gradtrace run`` does): their difference is the
journal's cost, reported per step.

Usage: python benchmarks/profiler_overhead.py [--iterations N] [--repeats R] [--json PATH]
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gradtrace import autograd  # noqa: E402
from gradtrace import profiler  # noqa: E402
from gradtrace.autograd import record_function as rf  # noqa: E402

STEPS = 10


def chain(n: int) -> None:
    x = autograd.full((16,), 0.5, requires_grad=True)
    y = x
    for _ in range(n):
        y = y * 1.0001 + 0.0001
    y.sum().backward()


def run(n: int, mode: str) -> tuple[float, int, float]:
    """Seconds for one forward+backward of the chain, the number of recorded events, and the
    seconds of the profile's first read (0 when nothing was profiled)."""
    if mode == "off":
        t0 = time.perf_counter()
        chain(n)
        return time.perf_counter() - t0, 0, 0.0
    if mode.startswith("null-sink"):
        # The engine's own RecordFunction cost (a row per range, input descriptions) with a
        # sink that drops the rows: what is left above it is the profiler's share.
        handle = rf.add_range_sink(lambda row: None, needs_inputs=mode.endswith("+inputs"))
        t0 = time.perf_counter()
        chain(n)
        elapsed = time.perf_counter() - t0
        handle.remove()
        return elapsed, 0, 0.0
    if mode.startswith("steps"):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            with profiler.profile(activities=["cpu"]) as prof:
                if mode == "steps+journal":
                    prof.journal(os.path.join(tmp, "journal.gtprof"))
                for _ in range(STEPS):
                    chain(n // STEPS)
                    prof.step()
            t1 = time.perf_counter()
        return t1 - t0, prof.profile_data.n_events, 0.0
    t0 = time.perf_counter()
    with profiler.profile(activities=["cpu"], record_shapes=(mode == "on+shapes")) as prof:
        chain(n)
    t1 = time.perf_counter()
    data = prof.profile_data
    return t1 - t0, data.n_events, time.perf_counter() - t1


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results",
                                                       "profiler_overhead.json"))
    args = parser.parse_args(argv)
    modes = ["off", "null-sink", "null-sink+inputs", "on", "on+shapes", "steps", "steps+journal"]
    for mode in modes:                       # warm-up: imports, caches, interning
        run(args.iterations, mode)
    times = {m: [] for m in modes}
    reads = {m: [] for m in modes}
    events = {}
    for _ in range(args.repeats):            # interleaved so drift hits every mode alike
        for mode in modes:
            # The previous mode's garbage (a profile is many small objects, some in cycles) is
            # collected here, untimed: otherwise a gen-2 collection of it lands in the next
            # mode's time (measured: "off" after "steps+journal" 75-90 ms instead of 24).
            gc.collect()
            t, n, r = run(args.iterations, mode)
            times[mode].append(t)
            reads[mode].append(r)
            events[mode] = n
    base = statistics.median(times["off"])
    n_recorded = events["on"]
    engine_only = {"on": statistics.median(times["null-sink"]),
                   "on+shapes": statistics.median(times["null-sink+inputs"])}
    rows = []
    for mode in modes:
        med = statistics.median(times[mode])
        read = statistics.median(reads[mode])
        rows.append({
            "mode": mode, "median_s": med, "ratio_vs_off": med / base,
            "first_read_s": read, "ratio_with_read": (med + read) / base,
            "events": events[mode],
            # Above "off", per range the engine reports (whether or not a profiler listens).
            "overhead_us_per_event": (med - base) / n_recorded * 1e6,
            # Above the engine's cost with do-nothing callbacks: the profiler's own share.
            "profiler_share_us_per_event": ((med - engine_only[mode]) / n_recorded * 1e6
                                            if mode in engine_only else None),
            "runs_s": times[mode], "first_read_runs_s": reads[mode],
        })
    print(f"chain of {args.iterations} iterations (16 x float32, forward + backward), "
          f"median of {args.repeats}")
    print(f"{'mode':<22}{'median ms':>11}{'x off':>8}{'first read ms':>15}{'x off with read':>17}"
          f"{'events':>8}{'us/range':>10}{'profiler us/range':>19}")
    for r in rows:
        share = r["profiler_share_us_per_event"]
        read = f"{r['first_read_s'] * 1e3:.2f}" if r["events"] else ""
        with_read = f"{r['ratio_with_read']:.2f}" if r["events"] else ""
        print(f"{r['mode']:<22}{r['median_s'] * 1e3:>11.2f}{r['ratio_vs_off']:>8.2f}{read:>15}"
              f"{with_read:>17}{r['events']:>8}"
              f"{r['overhead_us_per_event']:>10.3f}{'' if share is None else f'{share:.3f}':>19}")
    journal_ms = (statistics.median(times["steps+journal"]) - statistics.median(times["steps"])) * 1e3
    print(f"journal: {journal_ms / STEPS:.3f} ms per step ({events['steps'] // STEPS} events per step)")
    result = {"benchmark": "profiler_overhead", "journal_ms_per_step": journal_ms / STEPS, "iterations": args.iterations, "repeats": args.repeats,
              "python": platform.python_version(), "machine": platform.machine(), "rows": rows,
              "target": "profiled <= 1.3x unprofiled (first read reported apart)"}
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    main()
