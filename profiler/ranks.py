"""A run folder of ranks analysed together: per rank and step, where the time went.

A run folder holds one profile per rank: ``rank0.gtprof``, ``rank1.gtprof`` ... (``gradtrace
run --nproc``), or torch.profiler traces (``*.json``, ``*.json.gz``), one per rank, the rank
read from the trace's ``distributedInfo.rank``, else from the file name (``rank1``,
``rank_1``, ``rank-1``).

For one step of one rank (a ``ProfilerStep#N`` range; the whole profile when there is none):

* **communication**: time a collective was in flight. gradtrace profiles: from launch to
  completion (``distributed_collectives`` in the metadata) and the host's communication
  ranges; torch traces with GPU work: the collective kernels (NCCL...) on the device; torch
  traces without: the host's communication ops. A communication range or kernel is one whose
  name says so (:data:`COMMUNICATION`: nccl, all_reduce, reduce_scatter, all_gather,
  broadcast of a backend, all_to_all, ``record_param_comms``, ``{backend}:wait``);
* **compute**: on the host, time inside forward ops and backward nodes outside communication
  ranges; on the device (torch traces with GPU work), HTA's computation kernels (memcpys and
  memsets are not compute, as in HTA's temporal breakdown: they are **memory**, the time
  they run with neither computation nor communication beside them; 0 on the host);
* **exposed communication**: on the host, the part of the step spent inside communication
  ranges; on the device, collective time with no compute kernel running beside it;
* **hidden** = communication − exposed (overlapped with compute);
* **idle**: the rest of the step (host: Python between ops, data loading, the optimizer's own
  code; device: nothing running: HTA's idle time). On the device, compute + exposed + memory +
  idle = step; the figures are :func:`profiler.gpu.device_figures`' (docs/gpu-analysis.md).

Steps are compared across ranks by their number; the slowest rank of each step is the one
the others wait for (a straggler). Per-step durations need no common clock; step starts are
put on one (see :func:`common_clock`) to show which rank started late.
Pure functions over loaded profiles; nothing here imports the engine.
"""
from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .data import load
from .gpu import all_devices, covered_ns, device_figures
from .kernel_names import COMMUNICATION_OP
from .rank_import import PARALLEL_MIN_BYTES, import_run, trace_rank
from .records import Scope
from .torch_trace import is_torch_trace

__all__ = ["load_run", "run_files", "is_run_dir", "RunFolderError", "rank_steps", "summarize_run", "common_clock",
           "merge", "overlap_ns", "intersect", "RUN_FILE", "COMMUNICATION", "RankColumn", "RANK_COLUMNS",
           "STEP_COLUMNS", "rank_table", "step_table"]

RUN_FILE = re.compile(r"^rank(\d+)\.gtprof$")
TRACE_FILE = re.compile(r"\.json(\.gz)?$", re.IGNORECASE)
COMMUNICATION = COMMUNICATION_OP    # defined with the other name rules in kernel_names


class RunFolderError(ValueError):
    """A folder that is not one run's ranks; the message (one line) names the files at fault
    and what to give instead."""


# What counts as a profile in a folder: anything else there (logs, a README) is left alone.
PROFILE_FILE = re.compile(r"\.(gtprof|json|json\.gz)$", re.IGNORECASE)
_WHAT_TO_GIVE = ("give one profile file, or a folder holding only one run's ranks: rank0.gtprof, "
                 "rank1.gtprof, ... (gradtrace run --nproc) or one torch trace per rank")


def _names(paths, most: int = 6) -> str:
    """File names for a one-line message: the first ``most``, then how many more."""
    names = [p.name for p in paths]
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def _refuse(run_dir, problems: list[str]):
    raise RunFolderError(f"{run_dir}: not one run's ranks: {'; '.join(problems)}; {_WHAT_TO_GIVE}")


def run_files(run_dir) -> list[Path]:
    """The profiles of a run folder: its ``rank{R}.gtprof`` files, or its torch traces (one
    per rank). Files that are not profiles (``*.gtprof``, ``*.json``, ``*.json.gz``) are
    ignored; a profile that is not one of the run's ranks is refused, never skipped.

    Raises:
        FileNotFoundError: the folder holds no profile.
        RunFolderError: its profiles are not one run's ranks: a ``.gtprof`` not named
            ``rank{R}.gtprof``, one rank in two files (``rank1``, ``rank01``), gradtrace
            profiles beside torch traces, a ``.json`` that is not a trace.
    """
    paths = sorted(p for p in Path(run_dir).iterdir() if p.is_file() and PROFILE_FILE.search(p.name))
    if not paths:
        raise FileNotFoundError(f"{run_dir}: no rank*.gtprof files (gradtrace run --nproc N writes them) "
                                "nor torch traces (*.json, *.json.gz)")
    native = [p for p in paths if p.name.lower().endswith(".gtprof")]
    traces = [p for p in paths if p not in native]
    if native and traces:
        _refuse(run_dir, [f"gradtrace profiles ({_names(native)}) beside torch traces ({_names(traces)})"])
    problems = []
    if native:
        odd = [p for p in native if not RUN_FILE.match(p.name)]
        if odd:
            problems.append(f"{_names(odd)} {'is' if len(odd) == 1 else 'are'} not named rank{{R}}.gtprof")
        by_rank: dict = {}
        for p in native:
            m = RUN_FILE.match(p.name)
            if m:
                by_rank.setdefault(int(m.group(1)), []).append(p)
        problems += [f"rank {r} in {_names(ps)}" for r, ps in by_rank.items() if len(ps) > 1]
    else:
        odd = [p for p in traces if not is_torch_trace(p)]
        if odd:
            problems.append(f"{_names(odd)} {'is' if len(odd) == 1 else 'are'} not a torch trace")
    if problems:
        _refuse(run_dir, problems)
    return native or traces


def is_run_dir(path) -> bool:
    """True for a folder with profiles in it (whether they make one run: :func:`run_files`)."""
    p = Path(path)
    return p.is_dir() and any(f.is_file() and PROFILE_FILE.search(f.name) for f in p.iterdir())


def load_run(run_dir, nproc: int | None = None) -> dict:
    """``{rank: ProfileData}`` for the profiles of a run folder (see :func:`run_files`).

    Args:
        nproc: processes importing the folder's torch traces (:mod:`.rank_import`); None:
            one per trace up to the cores, when the traces are large enough to gain from
            it. ``.gtprof`` profiles are mapped, not imported: they load in this process.
    Raises:
        FileNotFoundError: the folder holds no rank profile nor torch trace.
        RunFolderError: see :func:`run_files`; also traces whose rank is neither in
            ``distributedInfo`` nor in the file name, two traces of one rank, or a file that
            cannot be read.
    """
    paths = run_files(run_dir)
    if paths and not RUN_FILE.match(paths[0].name):
        if nproc is None:
            big = sum(p.stat().st_size for p in paths) >= PARALLEL_MIN_BYTES
            nproc = min(len(paths), os.cpu_count() or 1) if big else 1
        if nproc > 1:
            return _load_imported(paths, nproc)
    by_rank: dict = {}
    rankless = []
    for path in paths:
        try:
            data = load(path)
        except (OSError, ValueError) as exc:   # ProfileFormatError is a ValueError
            raise RunFolderError(f"{run_dir}: {path.name} cannot be read ({exc})") from None
        m = RUN_FILE.match(path.name)
        rank = int(m.group(1)) if m else trace_rank(data, path)
        if rank is None:
            rankless.append(path)
        else:
            by_rank.setdefault(rank, []).append((path, data))
    problems = [f"{_names(rankless)} {'has' if len(rankless) == 1 else 'have'} no rank (no "
                "distributedInfo.rank in the trace, no rankN in the name)"] if rankless else []
    problems += [f"rank {r} in {_names([p for p, _ in found])}" for r, found in by_rank.items() if len(found) > 1]
    if problems:
        _refuse(run_dir, problems)
    return {rank: found[0][1] for rank, found in sorted(by_rank.items())}


def _load_imported(traces: list, nproc: int) -> dict:
    """The traces imported in ``nproc`` processes to temporary profiles, which are mapped
    here (the maps outlive the files, removed at once)."""
    with tempfile.TemporaryDirectory(prefix="gradtrace-ranks-") as tmp:
        imported = import_run(traces, tmp, nproc)
        return {rank: load(path) for rank, (path, _, _) in imported.items()}


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


def intersect(a: list, b: list) -> list:
    """The intersection of two merged interval lists, merged."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            out.append([lo, hi])
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def _communication_names(names: list) -> np.ndarray:
    return np.array([COMMUNICATION.search(s) is not None for s in names] or [False])


def _device_mode(data) -> bool:
    """Torch traces with GPU work are broken down on the device; the rest on the host."""
    return data.metadata.get("source") == "torch_trace" and data.has_device_time


def _steps_of(data) -> list:
    cols = data.event_columns
    starts, ends = cols["start_ns"], cols["end_ns"]
    return data.step_ranges() or [("all", int(data.metadata.get("start_time_ns", starts.min() if len(starts) else 0)),
                                   int(data.metadata.get("end_time_ns", ends.max() if len(ends) else 0)))]


def rank_steps(data) -> list[dict]:
    """Per step of one rank's profile: step, compute, communication, exposed, hidden, idle (ns).

    Returns:
        One dict per step: ``step`` (its name), ``start_ns`` (on the profile's clock),
        ``step_ns``, ``compute_ns``, ``communication_ns``, ``exposed_ns``, ``hidden_ns``,
        ``memory_ns``, ``idle_ns``.
    """
    if _device_mode(data):
        return _device_steps(data)
    cols = data.event_columns
    starts, ends, scope = cols["start_ns"], cols["end_ns"], cols["scope"]
    is_comm = _communication_names(data.strings)[cols["name_id"]] & (ends > starts)
    is_op = (scope == Scope.FUNCTION) | (scope == Scope.BACKWARD_FUNCTION)
    entries = [e for e in data.metadata.get("distributed_collectives") or [] if e.get("completed_ns", -1) >= 0]
    steps = _steps_of(data)
    lo = np.array([s for _, s, _ in steps], dtype=np.int64)
    hi = np.array([e for _, _, e in steps], dtype=np.int64)
    # Each figure is the length of a union of intervals inside each step, read for all steps
    # at once (profiler.gpu's interval arithmetic): a 10M-event profile has ~20k steps and
    # millions of ops, which a walk over the merged list per step made quadratic.
    comm_s, comm_e = starts[is_comm], ends[is_comm]
    exposed = covered_ns(comm_s, comm_e, lo, hi)
    flight = covered_ns(np.concatenate([np.array([e["start_ns"] for e in entries], np.int64), comm_s]),
                        np.concatenate([np.array([e["completed_ns"] for e in entries], np.int64), comm_e]), lo, hi)
    # Compute: op time outside communication, |ops ∩ W| − |ops ∩ comm ∩ W| = |(ops ∪ comm) ∩ W| − |comm ∩ W|.
    compute = covered_ns(np.concatenate([starts[is_op], comm_s]), np.concatenate([ends[is_op], comm_e]),
                         lo, hi) - exposed
    rows = []
    for k, (name, s, e) in enumerate(steps):
        step_ns, flight_k, exposed_k, compute_k = e - s, round(flight[k]), round(exposed[k]), round(compute[k])
        rows.append({"step": name, "start_ns": s, "step_ns": step_ns, "compute_ns": compute_k,
                     "communication_ns": flight_k, "exposed_ns": exposed_k,
                     "hidden_ns": max(flight_k - exposed_k, 0), "memory_ns": 0,
                     "idle_ns": max(step_ns - compute_k - exposed_k, 0)})
    return rows


def _device_steps(data) -> list[dict]:
    """:func:`rank_steps` from the GPU work of a torch trace, clipped to each step's range
    (kernels launched late in a step and run after its end count in the next), with HTA's
    definitions (:mod:`profiler.gpu`): compute = computation kernels; communication = NCCL
    kernels, exposed where no computation kernel runs beside them; memory = memcpy/memset time
    under neither; idle = no activity at all. So compute + exposed + memory + idle = step."""
    steps = _steps_of(data)
    lo = np.array([s for _, s, _ in steps], dtype=np.int64)
    hi = np.array([e for _, _, e in steps], dtype=np.int64)
    figures = device_figures(data, all_devices(data), lo, hi)
    rows = []
    for (name, s, e), f in zip(steps, figures):
        t = f["temporal"]
        comm = round(1000 * (f["communication_us"] or 0.0))
        exposed = round(1000 * (f["exposed_communication_us"] or 0.0))
        compute = round(1000 * t["compute_us"])
        idle = round(1000 * t["idle_us"])
        rows.append({"step": name, "start_ns": s, "step_ns": e - s, "compute_ns": compute,
                     "communication_ns": comm, "exposed_ns": exposed, "hidden_ns": comm - exposed,
                     "memory_ns": (e - s) - compute - exposed - idle, "idle_ns": idle})
    return rows


def common_clock(profiles: dict) -> tuple[dict, str]:
    """Offsets that put every rank's times on one clock, and which clock that is.

    * gradtrace run folders: times from the moment every rank left the process group's start
      barrier (``distributed_info["start_barrier_ns"]``), on one machine or several; older
      folders without it: the ranks of one machine share ``perf_counter_ns``, no offset.
    * torch traces that all have a wall clock (``baseTimeNanoseconds``; the importer keeps it
      as ``wall_clock_base_ns``): times become wall-clock times, as exact as the machines'
      clocks agree.
    * otherwise: each rank's first ``ProfilerStep`` starts at the same moment.

    Returns:
        ({rank: ns to add to that rank's times}, a phrase naming the clock).
    """
    metas = {r: d.metadata for r, d in profiles.items()}
    if all(m.get("source") != "torch_trace" for m in metas.values()):
        barriers = {r: (m.get("distributed_info") or {}).get("start_barrier_ns") for r, m in metas.items()}
        if all(isinstance(b, int) and b > 0 for b in barriers.values()):
            return {r: -b for r, b in barriers.items()}, "the process group's start barrier"
        return dict.fromkeys(profiles, 0), "perf_counter_ns (shared by the ranks of one machine)"
    if all(isinstance(m.get("wall_clock_base_ns"), int) for m in metas.values()):
        return ({r: m["wall_clock_base_ns"] - int(m.get("start_time_ns", 0)) for r, m in metas.items()},
                "wall clock (each trace's baseTimeNanoseconds)")
    return ({r: -_steps_of(d)[0][1] for r, d in profiles.items()},
            "first ProfilerStep of each rank (the traces have no common clock)")


def summarize_run(profiles: dict) -> dict:
    """Per-rank means over steps, the slowest rank of each step, and every step of every rank.

    Args:
        profiles: ``{rank: ProfileData}`` (see :func:`load_run`).
    Returns:
        ``{"ranks": [{"rank", "steps", "step_ns", "compute_ns", "communication_ns",
        "exposed_ns", "hidden_ns", "idle_ns", "hidden_share", "slowest_in"}],
        "steps": [{"step", "slowest_rank", "step_ns", "spread_ns", "start_spread_ns"}],
        "step_times": [{"rank", "step", "start_ns", "step_ns", ...}], "clock": str,
        "basis": {rank: "host" or "device"}}``; times are means in ns, ``hidden_share`` is
        hidden / communication (None without communication), ``slowest_in`` counts the steps
        in which that rank was the slowest; in ``step_times``, ``start_ns`` is on the common
        clock (:func:`common_clock`), from the earliest step start of the run.
    """
    per_rank = {rank: rank_steps(data) for rank, data in profiles.items()}
    offsets, clock = common_clock(profiles)
    starts = [row["start_ns"] + offsets[rank] for rank, rows in per_rank.items() for row in rows]
    origin = min(starts) if starts else 0
    by_step: dict = {}
    step_times = []
    for rank, rows in per_rank.items():
        for row in rows:
            by_step.setdefault(row["step"], {})[rank] = row
            step_times.append(dict(row, rank=rank, start_ns=row["start_ns"] + offsets[rank] - origin))
    steps = []
    slowest_count = dict.fromkeys(per_rank, 0)
    for step, rows in by_step.items():
        times = {rank: row["step_ns"] for rank, row in rows.items()}
        slowest = max(times, key=times.get)
        slowest_count[slowest] += 1
        aligned = [row["start_ns"] + offsets[rank] for rank, row in rows.items()]
        steps.append({"step": step, "slowest_rank": slowest, "step_ns": times[slowest],
                      "spread_ns": times[slowest] - min(times.values()),
                      "start_spread_ns": max(aligned) - min(aligned)})
    ranks = []
    keys = ("step_ns", "compute_ns", "communication_ns", "exposed_ns", "hidden_ns", "memory_ns", "idle_ns")
    for rank, rows in per_rank.items():
        mean = {k: (sum(r[k] for r in rows) / len(rows) if rows else 0.0) for k in keys}
        share = mean["hidden_ns"] / mean["communication_ns"] if mean["communication_ns"] else None
        ranks.append({"rank": rank, "steps": len(rows), **mean, "hidden_share": share,
                      "slowest_in": slowest_count[rank]})
    basis = {rank: "device" if _device_mode(data) else "host" for rank, data in profiles.items()}
    return {"ranks": ranks, "steps": steps, "step_times": step_times, "clock": clock, "basis": basis}


# --------------------------------------------------------------------------- tables
# The two tables of a run's summary, as ``gradtrace table RUN_DIR`` and the dashboard's Ranks
# page both show them: one set of columns and one row builder, so the two cannot drift.


@dataclass(frozen=True)
class RankColumn:
    """One column of a ranks table: the summary field it shows and its header (times in ms)."""

    id: str
    header: str


RANK_COLUMNS = (
    RankColumn("rank", "Rank"), RankColumn("steps", "Steps"), RankColumn("step_ns", "Step"),
    RankColumn("compute_ns", "Compute"), RankColumn("communication_ns", "Communication"),
    RankColumn("exposed_ns", "Exposed comm"), RankColumn("hidden_ns", "Hidden comm"),
    RankColumn("hidden_share", "Hidden %"), RankColumn("idle_ns", "Idle"), RankColumn("slowest_in", "Slowest in"),
)
STEP_COLUMNS = (
    RankColumn("step", "Step"), RankColumn("slowest_rank", "Slowest rank"), RankColumn("step_ns", "Its step (ms)"),
    RankColumn("spread_ns", "Spread (ms)"), RankColumn("start_spread_ns", "Start spread (ms)"),
)


def _cell(field: str, value) -> str:
    if field == "hidden_share":
        return "-" if value is None else f"{100 * value:.1f}"
    if field.endswith("_ns"):
        return f"{(value or 0) / 1e6:.3f}"      # ms; a start spread is 0 without a common clock
    return str(value)


def rank_table(summary: dict) -> tuple[tuple[RankColumn, ...], list[list[str]]]:
    """Per rank, the mean step (ms) split as :func:`summarize_run` defines it.

    Returns:
        (columns, rows): each row the cells' text in column order.
    """
    return RANK_COLUMNS, [[_cell(c.id, r.get(c.id)) for c in RANK_COLUMNS] for r in summary["ranks"]]


def step_table(summary: dict) -> tuple[tuple[RankColumn, ...], list[list[str]]]:
    """Per step, the slowest rank, its step, the spread of step times and of step starts (ms).

    Returns:
        (columns, rows): each row the cells' text in column order.
    """
    return STEP_COLUMNS, [[_cell(c.id, s.get(c.id)) for c in STEP_COLUMNS] for s in summary["steps"]]
