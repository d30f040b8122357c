"""Change points in a run history: an asv-style L1 step fit against ruptures' PELT, measured.

``gradtrace runs trend`` marks where a series of runs (the median step time of each, or an
op's) changes level. Two maintained ideas were candidates:

* **asv-style step fit** (airspeed velocity's ``step_detect``): a piecewise-constant fit that
  minimises Σ |y - level of its segment| + γ · (segments); the L1 loss makes one slow run
  (a noisy CI machine) cost little, so it does not open a segment. Implemented here from the
  idea (dynamic programming over segment ends, with PELT's pruning), not from asv's code.
* **ruptures** (``pip install ruptures``): ``Pelt`` with a cost model (``l1``: the same loss;
  ``l2``: squared, a change in mean) and a penalty.

Both get the same penalty, scaled by a robust estimate of the noise (σ from the median
absolute difference of successive runs) and log n, on log-times, so a shift is relative.
Synthetic histories: 60 runs, log-normal run-to-run noise of 1-5%, 0-2 level shifts of 5-20%
at random places, and 5% of runs slowed 1.3-2x by a one-off (a busy machine). A detection
within 2 runs of a true change counts; anything else is a false alarm.

Usage: python benchmarks/changepoints.py [--trials N] [--grid MIN:BETA,...] [--quick] [--json PATH]
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _results import RESULTS_DIR, write_json  # noqa: E402

from gradtrace.profiler import changepoints  # noqa: E402

NOISES = (0.01, 0.03, 0.05)
SHIFTS = (0.05, 0.10, 0.20)
TOLERANCE = 2


def history(rng, n: int, noise: float, shift: float, n_changes: int) -> tuple[np.ndarray, list[int]]:
    """Run times: level 1 with ``n_changes`` shifts of ±``shift``, noise and one-off slow runs."""
    cps = sorted(rng.choice(np.arange(8, n - 8, 8), size=n_changes, replace=False).tolist()) if n_changes else []
    level = np.ones(n)
    for cp in cps:
        level[cp:] *= 1 + shift * rng.choice((-1, 1))
    y = level * rng.lognormal(0.0, noise, n)
    outliers = rng.random(n) < 0.05
    y[outliers] *= rng.uniform(1.3, 2.0, outliers.sum())
    return y, cps


def ruptures_pelt(model: str):
    import ruptures as rpt  # noqa: PLC0415

    def detect(y: np.ndarray, beta: float, min_size: int) -> list[int]:
        x = np.log(y)
        sigma = changepoints.noise_scale(x)
        pen = beta * (sigma if model == "l1" else sigma ** 2) * math.log(len(x))
        return rpt.Pelt(model=model, min_size=min_size, jump=1).fit(x).predict(pen=pen)[:-1]
    return detect


def asv_style(y: np.ndarray, beta: float, min_size: int) -> list[int]:
    return [c.index for c in changepoints.change_points(y, beta=beta, min_size=min_size)]


def score(detect, beta: float, min_size: int, trials: int, n: int = 60) -> dict:
    """Recall (true changes found), false alarms per history, and time per history."""
    rng = np.random.default_rng(0)
    found = total = false = 0
    quiet_false = quiet = 0
    seconds = 0.0
    for noise in NOISES:
        for shift in SHIFTS:
            for t in range(trials):
                n_changes = t % 3
                y, cps = history(rng, n, noise, shift, n_changes)
                t0 = time.perf_counter()
                got = detect(y, beta, min_size)
                seconds += time.perf_counter() - t0
                hit = [any(abs(g - c) <= TOLERANCE for g in got) for c in cps]
                found += sum(hit)
                total += len(cps)
                fa = sum(not any(abs(g - c) <= TOLERANCE for c in cps) for g in got)
                false += fa
                if not cps:
                    quiet += 1
                    quiet_false += fa > 0
    runs = len(NOISES) * len(SHIFTS) * trials
    return {"recall": found / max(total, 1), "false_alarms_per_history": false / runs,
            "histories_without_change_flagged": quiet_false / max(quiet, 1),
            "ms_per_history": 1e3 * seconds / runs}


def speed(detect, beta: float, min_size: int, n: int) -> float:
    rng = np.random.default_rng(1)
    y, _ = history(rng, n, 0.03, 0.1, 2)
    t0 = time.perf_counter()
    detect(y, beta, min_size)
    return 1e3 * (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=30, help="histories per (noise, shift) cell")
    ap.add_argument("--json", default=os.path.join(RESULTS_DIR, "changepoints.json"))
    ap.add_argument("--grid", default="3:3,4:3,4:4,5:3", help="min_size:beta pairs, comma separated")
    ap.add_argument("--quick", action="store_true", help="5 histories per cell, the chosen settings only")
    args = ap.parse_args()
    if args.quick:
        args.trials, args.grid = 5, f"{changepoints.MIN_SEGMENT}:{changepoints.BETA:g}"
    args.grid = [(int(m), float(b)) for m, b in (p.split(":") for p in args.grid.split(","))]
    methods = {"asv-style L1 step fit": asv_style}
    try:
        methods["ruptures Pelt l1"] = ruptures_pelt("l1")
        methods["ruptures Pelt l2"] = ruptures_pelt("l2")
    except ImportError:
        print("ruptures is not installed: pip install ruptures to compare with it")
    rows = []
    print(f"{'method':<24} {'min':>3} {'beta':>5} {'recall':>7} {'false/hist':>10} {'quiet flagged':>13} "
          f"{'ms/hist':>8} {'ms n=500':>9}")
    for name, detect in methods.items():
        for min_size, beta in args.grid:
            r = score(detect, beta, min_size, args.trials)
            r.update(method=name, beta=beta, min_size=min_size, ms_n500=speed(detect, beta, min_size, 500))
            rows.append(r)
            print(f"{name:<24} {min_size:>3} {beta:>5.1f} {r['recall']:>7.2f} {r['false_alarms_per_history']:>10.2f} "
                  f"{r['histories_without_change_flagged']:>13.2f} {r['ms_per_history']:>8.2f} {r['ms_n500']:>9.1f}")
    write_json(args.json, {"benchmark": "changepoints", "trials": args.trials, "noises": NOISES,
                           "shifts": SHIFTS, "tolerance": TOLERANCE, "rows": rows})


if __name__ == "__main__":
    main()
