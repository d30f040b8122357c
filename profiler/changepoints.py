"""Change points of a run history: where a series of runs' times moves to a new level.

The fit is airspeed velocity's (asv ``step_detect``) idea, implemented here: the series is
cut into segments, each with a constant level (its median), minimising

    Σ |log y_i - level of i's segment| + γ · (number of segments),

by dynamic programming over the segments' ends, pruned as PELT prunes (a start that cannot
begin the best last segment now never will).

Why this and not ``ruptures``' PELT: ``benchmarks/changepoints.py`` measured both on 270
synthetic histories (60 runs, 1-5% run-to-run noise, 0-2 shifts of 5-20%, 5% of runs slowed
1.3-2x by a one-off). With the same L1 cost, penalty and minimum segment the two find the same
change points, as they must (one objective, solved exactly): recall 0.73, 0.02 false alarms
per history, 1% of histories without a change flagged; and they took about the same time
(20-50 ms for 60 runs, ~1 s for 500, within this shared machine's noise). ruptures' ``l2``
cost (a change in mean) found more shifts (0.84) but raised ~3 false alarms per history:
one-off slow runs move a mean. So ruptures would add a compiled dependency for the same
answer; this module is its L1 case in a few dozen lines.

* Times are fitted as logarithms, so a shift is relative (10% slower reads the same at 1 ms
  and at 1 s) and the penalty does not depend on the unit.
* γ = ``beta`` · σ · log n, σ the noise of the series estimated robustly (the median absolute
  difference of successive runs, which a level shift hardly moves): quiet series get small
  penalties, noisy ones large. ``beta`` = 3 and a minimum segment of 4 runs were chosen on
  the benchmark: with 3-run segments, two slow runs out of three became a "level" (0.11
  false alarms per history); with 4, 0.02; beta 4 only lost recall (0.66).
* A segment has at least :data:`MIN_SEGMENT` runs, so a burst of slow runs is not a level.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["ChangePoint", "change_points", "noise_scale", "MIN_SEGMENT", "BETA"]

MIN_SEGMENT = 4
BETA = 3.0


@dataclass(frozen=True)
class ChangePoint:
    """A new level from run ``index`` on.

    Attributes:
        index: the first run of the new level (0-based, in the series' order).
        before, after: the median of the segment before and after (the series' unit).
        ratio: after / before.
    """

    index: int
    before: float
    after: float
    ratio: float

    def to_dict(self) -> dict:
        return {"index": self.index, "before": self.before, "after": self.after, "ratio": self.ratio}


def noise_scale(x: np.ndarray) -> float:
    """σ of a series' noise: 1.4826 · median |x[i+1] - x[i]| / √2 (a normal's σ from the MAD of
    differences; a level shift changes one difference, not the median). Never 0."""
    if len(x) < 2:
        return 1e-9
    sigma = 1.4826 * float(np.median(np.abs(np.diff(x)))) / math.sqrt(2.0)
    return max(sigma, 1e-9)


def _l1_cost(x: np.ndarray) -> float:
    return float(np.abs(x - np.median(x)).sum())


def _segment_ends(x: np.ndarray, gamma: float, min_size: int) -> list[int]:
    """Ends of the optimal segments (the last is len(x)): optimal partitioning with pruning."""
    n = len(x)
    best = np.full(n + 1, np.inf)
    best[0] = -gamma
    last = np.zeros(n + 1, dtype=np.int64)
    candidates = [0]
    for t in range(min_size, n + 1):
        ready = [s for s in candidates if t - s >= min_size]
        costs = [best[s] + _l1_cost(x[s:t]) for s in ready]
        k = int(np.argmin(costs))
        best[t], last[t] = costs[k] + gamma, ready[k]
        # PELT: with an L1 cost, a start whose cost so far already exceeds the optimum is
        # never the best start again.
        keep = {s for s, c in zip(ready, costs) if c <= best[t]}
        candidates = [s for s in candidates if s in keep or t - s < min_size] + [t - min_size + 1]
    ends, t = [], n
    while t > 0:
        ends.append(t)
        t = int(last[t])
    return ends[::-1]


def change_points(values, beta: float = BETA, min_size: int = MIN_SEGMENT) -> list[ChangePoint]:
    """Where the level of a series of positive times changes.

    Args:
        values: the runs' times (e.g. median step times), in run order; positive.
        beta: the penalty's scale (see the module docstring); larger finds fewer changes.
        min_size: fewest runs in a level.
    Returns:
        The change points, in order; [] for a series shorter than two levels.
    Raises:
        ValueError: a value that is not a positive finite number.
    """
    y = np.asarray(values, dtype=np.float64)
    if y.size and not (np.isfinite(y).all() and (y > 0).all()):
        raise ValueError("change_points needs positive finite times")
    if len(y) < 2 * min_size:
        return []
    x = np.log(y)
    gamma = beta * noise_scale(x) * math.log(len(x))
    ends = _segment_ends(x, gamma, min_size)
    starts = [0] + ends[:-1]
    out = []
    for k in range(1, len(ends)):
        before = float(np.median(y[starts[k - 1]:ends[k - 1]]))
        after = float(np.median(y[starts[k]:ends[k]]))
        out.append(ChangePoint(starts[k], before, after, after / before))
    return out
