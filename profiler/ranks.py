"""A run folder of ranks (``rank0.gtprof``, ``rank1.gtprof`` ... from ``gradtrace run --nproc``)
analysed together: per rank and step, where the time went.

For one step of one rank (a ``ProfilerStep#N`` range; the whole profile when there is none):

* **compute**: time inside forward ops and backward nodes, minus the communication ranges
  nested in them (DDP launches and waits from inside AccumulateGrad);
* **communication**: time a collective was in flight, from its launch to its completion
  (``distributed_collectives`` in the profile's metadata), union over collectives;
* **exposed communication**: the part of it the host spent inside communication ranges
  (``record_param_comms`` launches and ``{backend}:wait`` waits), not computing;
* **hidden** = communication − exposed: in flight while the host computed;
* **idle**: the rest of the step (Python between ops, data loading, the optimizer's own code).

Steps are compared across ranks by their number; the slowest rank of each step is the one
the others wait for (a straggler). Per-step durations need no common clock; all ranks of one
machine share ``perf_counter_ns`` (CLOCK_MONOTONIC) anyway.
Pure functions over loaded profiles; nothing here imports the engine.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from .data import load
from .records import Scope

__all__ = ["load_run", "rank_steps", "summarize_run", "merge", "overlap_ns", "RUN_FILE"]

RUN_FILE = re.compile(r"^rank(\d+)\.gtprof$")


def load_run(run_dir) -> dict:
    """``{rank: ProfileData}`` for the ``rank{R}.gtprof`` files of a run folder."""
    found = {}
    for path in Path(run_dir).iterdir():
        m = RUN_FILE.match(path.name)
        if m:
            found[int(m.group(1))] = load(path)
    if not found:
        raise FileNotFoundError(f"{run_dir}: no rank*.gtprof files (gradtrace run --nproc N writes them)")
    return dict(sorted(found.items()))


def merge(intervals) -> list:
    """Sorted, non-overlapping ``[start, end]`` covering the given intervals."""
    out = []
    for s, e in sorted((int(s), int(e)) for s, e in intervals if e > s):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def overlap_ns(a: list, b: list) -> int:
    """Total length of the intersection of two merged interval lists."""
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def _length(a: list) -> int:
    return sum(e - s for s, e in a)


def rank_steps(data) -> list[dict]:
    """Per step of one rank's profile: step, compute, communication, exposed, hidden, idle (ns).

    Returns:
        One dict per step: ``step`` (its name), ``start_ns``, ``step_ns``, ``compute_ns``,
        ``communication_ns``, ``exposed_ns``, ``hidden_ns``, ``idle_ns``.
    """
    cols = data.event_columns
    names = data.strings
    starts, ends, scope = cols["start_ns"], cols["end_ns"], cols["scope"]
    comm_ids = [i for i, s in enumerate(names) if s == "record_param_comms" or s.endswith(":wait")]
    is_comm = np.isin(cols["name_id"], comm_ids) & (scope == Scope.USER_SCOPE)
    is_op = (scope == Scope.FUNCTION) | (scope == Scope.BACKWARD_FUNCTION)
    comm = merge(zip(starts[is_comm], ends[is_comm]))
    ops = merge(zip(starts[is_op], ends[is_op]))
    entries = data.metadata.get("distributed_collectives") or []
    in_flight = merge([(e["start_ns"], e["completed_ns"]) for e in entries
                       if e.get("completed_ns", -1) >= 0] + [tuple(c) for c in comm])
    steps = data.step_ranges() or [("all", int(data.metadata.get("start_time_ns", starts.min() if len(starts) else 0)),
                                    int(data.metadata.get("end_time_ns", ends.max() if len(ends) else 0)))]
    rows = []
    for name, s, e in steps:
        window = [[s, e]]
        exposed = overlap_ns(comm, window)
        flight = overlap_ns(in_flight, window)
        compute = overlap_ns(ops, window) - overlap_ns(ops, merge((max(a, s), min(b, e)) for a, b in comm))
        step_ns = e - s
        rows.append({"step": name, "start_ns": s, "step_ns": step_ns, "compute_ns": compute,
                     "communication_ns": flight, "exposed_ns": exposed,
                     "hidden_ns": max(flight - exposed, 0),
                     "idle_ns": max(step_ns - compute - exposed, 0)})
    return rows


def summarize_run(profiles: dict) -> dict:
    """Per-rank means over steps, and the slowest rank of each step.

    Args:
        profiles: ``{rank: ProfileData}`` (see :func:`load_run`).
    Returns:
        ``{"ranks": [{"rank", "steps", "step_ns", "compute_ns", "communication_ns",
        "exposed_ns", "hidden_ns", "idle_ns", "hidden_share", "slowest_in"}],
        "steps": [{"step", "slowest_rank", "step_ns", "spread_ns"}]}``; times are means in ns,
        ``hidden_share`` is hidden / communication (None without communication), and
        ``slowest_in`` counts the steps in which that rank was the slowest.
    """
    per_rank = {rank: rank_steps(data) for rank, data in profiles.items()}
    by_step: dict = {}
    for rank, rows in per_rank.items():
        for row in rows:
            by_step.setdefault(row["step"], {})[rank] = row["step_ns"]
    steps = []
    slowest_count = dict.fromkeys(per_rank, 0)
    for step, times in by_step.items():
        slowest = max(times, key=times.get)
        slowest_count[slowest] += 1
        steps.append({"step": step, "slowest_rank": slowest, "step_ns": times[slowest],
                      "spread_ns": times[slowest] - min(times.values())})
    ranks = []
    keys = ("step_ns", "compute_ns", "communication_ns", "exposed_ns", "hidden_ns", "idle_ns")
    for rank, rows in per_rank.items():
        mean = {k: (sum(r[k] for r in rows) / len(rows) if rows else 0.0) for k in keys}
        share = mean["hidden_ns"] / mean["communication_ns"] if mean["communication_ns"] else None
        ranks.append({"rank": rank, "steps": len(rows), **mean, "hidden_share": share,
                      "slowest_in": slowest_count[rank]})
    return {"ranks": ranks, "steps": steps}
