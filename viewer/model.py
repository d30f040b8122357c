"""What the dashboard shows, computed from a :class:`profiler.ProfileData` without Dash.

Every function here is pure over a profile's columns and its analysis (``data.analysis``):
the pages call them and hand the results to figure builders (:mod:`viewer.figures`) and
grids. Results that several callbacks need are cached on a :class:`ProfileView`, one per
loaded profile. Times are integer nanoseconds internally and microseconds (floats) in rows
for the grids, like ``key_averages()``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from gradtrace.profiler import ProfileData, Scope, columns
from gradtrace.profiler.format import format_time
from gradtrace.profiler.memory import memory_table
# One definition of a step's phases, shared with the statistical diff.
from gradtrace.profiler.phases import BACKWARD as _BACKWARD
from gradtrace.profiler.phases import FORWARD as _FORWARD
from gradtrace.profiler.phases import NO_PHASE as _NO_PHASE
from gradtrace.profiler.phases import OPTIMIZER as _OPTIMIZER
from gradtrace.profiler.phases import PHASES, phase_of_events

from .cache import AnalysisCache

__all__ = ["ProfileView", "GROUPINGS", "grouping", "PHASES", "phase_of_events", "group_rows", "step_phase_sums"]

SCOPE_LABELS = {int(Scope.FUNCTION): "op", int(Scope.BACKWARD_FUNCTION): "backward node",
                int(Scope.USER_SCOPE): "user scope"}
# Operators page: how rows are keyed, besides the op name, and the key_averages() arguments
# that group them so (a call site is the innermost stack frame).
# "stack" is the CLI's name (gradtrace table --group-by stack) and PyTorch's (group_by_stack_n).
GROUPINGS = {"name": "Name", "shape": "Input shape", "module": "Module", "stack": "Stack (call site)"}
_KEY_AVERAGES_ARGS = {"name": {}, "shape": {"group_by_input_shape": True},
                      "module": {"group_by_module": True}, "stack": {"group_by_stack_n": 1}}
# Names a grouping had before, still accepted.
_GROUPING_ALIASES = {"call_site": "stack"}


def grouping(value: str) -> str:
    """The Operators grouping ``value`` names (an old name such as "call_site" accepted).

    Raises:
        ValueError: not a grouping.
    """
    value = _GROUPING_ALIASES.get(value, value)
    if value not in GROUPINGS:
        raise ValueError(f"group_by={value!r}: expected one of {', '.join(GROUPINGS)}")
    return value


def group_rows(key_averages) -> list[dict]:
    """Grid rows for ``key_averages()`` rows: each field under its column id (PyTorch's field
    names, percentages as ``<field>_percent``; times in us, memory in bytes), plus ``id`` (the
    row's index, for drill-down) and the scope as a label."""
    specs = key_averages.columns(scope=True)
    totals = key_averages.totals
    rows = []
    for k, r in enumerate(key_averages):
        row = columns.row_values(r, specs, totals)
        row["id"] = k
        row["scope"] = SCOPE_LABELS.get(r.scope, "?")
        row["input_shapes"] = json.dumps(r.input_shapes) if r.input_shapes is not None else ""
        row["stack"] = "\n".join(r.stack)
        rows.append(row)
    return rows


# --------------------------------------------------------------------------- the view


@dataclass(frozen=True)
class PhaseSplit:
    """Step time split into phases, in ns, for one clock (CPU or CUDA)."""

    forward: int
    backward: int
    optimizer: int
    other: int

    @property
    def total(self) -> int:
        return self.forward + self.backward + self.optimizer + self.other

    def as_dict(self) -> dict[str, int]:
        return {p: getattr(self, p) for p in PHASES}


def step_phase_sums(starts, ends, ev_start, phase, self_ns, by_slices: bool | None = None) -> np.ndarray:
    """Σ ``self_ns`` per (step, phase) of the events in each step: an event counts in the last
    step starting at or before it, if it starts before that step ends.

    Args:
        starts, ends: the steps, in start order; ev_start, phase, self_ns: per event.
        by_slices: None: when events are stored in start order (they are), each step's
            events are one slice, summed from running totals with no search per event;
            False: a step found for each event (any order).
    Returns:
        int64 array (steps, 3): forward, backward, optimizer.
    """
    if by_slices is None:
        by_slices = bool(np.all(starts[1:] >= starts[:-1]) and np.all(ev_start[1:] >= ev_start[:-1]))
    if by_slices:
        lo = np.searchsorted(ev_start, starts, side="left")
        hi = np.minimum(np.searchsorted(ev_start, ends, side="left"), np.append(lo[1:], len(ev_start)))
        hi = np.maximum(hi, lo)
        out = np.empty((len(starts), 3), dtype=np.int64)
        for code in (_FORWARD, _BACKWARD, _OPTIMIZER):
            total = np.concatenate([[0], np.cumsum(np.where(phase == code, self_ns, 0), dtype=np.int64)])
            out[:, code] = total[hi] - total[lo]
        return out
    k = np.searchsorted(starts, ev_start, side="right") - 1
    pick = (k >= 0) & (ev_start < ends[np.maximum(k, 0)]) & (phase >= 0)
    # Sums of integers below 2**53: exact in the float weights.
    return np.rint(np.bincount(k[pick] * 3 + phase[pick], weights=self_ns[pick],
                               minlength=3 * len(starts))).astype(np.int64).reshape(-1, 3)


class ProfileView:
    """One loaded profile and the derived tables the pages need (computed once each).

    Args:
        data: the profile.
        label: what to call it in the page (a file name).
    """

    def __init__(self, data: ProfileData, label: str = "profile"):
        self.data = data
        self.label = label
        # Every analysis of this profile, computed once and shared by all requests.
        self.cache = AnalysisCache()

    # ------------------------------------------------------------ basics

    @property
    def phase(self) -> np.ndarray:
        return self.cache.get("phase", lambda: phase_of_events(self.data))

    @property
    def threads(self) -> list[int]:
        return self.cache.get("threads", lambda: sorted(
            int(t) for t in np.unique(self.data.event_columns["thread_id"])))

    @property
    def time_origin_ns(self) -> int:
        """Start of the profile: the timeline's zero."""
        return self.cache.get("time_origin_ns", self._time_origin_ns)

    def _time_origin_ns(self) -> int:
        cols = self.data.event_columns
        starts = [int(cols["start_ns"].min())] if self.data.n_events else []
        if self.data.n_memory_records:
            starts.append(int(self.data.memory_columns["time_ns"].min()))
        meta_start = self.data.metadata.get("start_time_ns")
        if isinstance(meta_start, int):
            starts.append(meta_start)
        return min(starts) if starts else 0

    @property
    def span_ns(self) -> int:
        """Wall time from the first event's start to the last event's end."""
        return self.cache.get("span_ns", self._span_ns)

    def _span_ns(self) -> int:
        cols = self.data.event_columns
        if not self.data.n_events:
            return 0
        return int(cols["end_ns"].max() - cols["start_ns"].min())

    def summary(self) -> dict:
        """Run metadata for the Overview page."""
        return self.cache.get("summary", self._summary)

    def _summary(self) -> dict:
        meta = self.data.metadata
        steps = self.data.step_ranges()
        devices = meta.get("devices") or sorted({self.data.strings[int(d)] for d in
                                                 np.unique(self.data.event_columns["device_id"])})
        meta_steps = meta.get("steps")
        if steps:
            step_text = f"{len(steps):,} ProfilerStep ranges"
        elif isinstance(meta_steps, list) and len(meta_steps) == 2:
            step_text = f"steps {meta_steps[0]}–{meta_steps[1]}"
        else:
            step_text = "no ProfilerStep ranges"
        options = [k for k in ("record_shapes", "profile_memory", "with_stack", "with_flops",
                               "with_modules") if meta.get(k)]
        return {
            "label": self.label,
            "devices": ", ".join(str(d) for d in devices) or "cpu",
            "activities": ", ".join(str(a) for a in meta.get("activities", ["cpu"])),
            "steps": step_text,
            "n_steps": len(steps),
            "duration_ns": self.span_ns,
            "events": self.data.n_events,
            "memory_records": self.data.n_memory_records,
            "threads": len(self.threads),
            "options": ", ".join(options) or "none",
            "version": str(meta.get("gradtrace_version", "?")),
            "synthetic": bool(meta.get("synthetic")),
        }

    # ------------------------------------------------------------ overview

    def phase_split(self, clock: str = "cpu") -> PhaseSplit:
        """Self time per phase (Σ self time of the events in it), plus "other": time inside
        ProfilerStep ranges (or, without them, top-level time) that no phase claims."""
        return self.cache.get(("phase_split", clock), lambda: self._phase_split(clock))

    def _phase_split(self, clock: str) -> PhaseSplit:
        a = self.data.analysis
        self_ns = a.self_cpu_ns if clock == "cpu" else a.self_cuda_ns
        # One pass for the four sums (integers below 2**53: exact in the float weights).
        sums = np.bincount(self.phase.astype(np.intp) - _NO_PHASE, weights=self_ns, minlength=4)
        per = [int(round(sums[p - _NO_PHASE])) for p in (_FORWARD, _BACKWARD, _OPTIMIZER)]
        other = int(round(sums[0]))
        return PhaseSplit(per[0], per[1], per[2], max(other, 0))

    def step_phases(self) -> list[dict]:
        """Each ``ProfilerStep#N`` range split by phase (CPU, ns): the self time of the events
        that start inside it, per phase, and ``other``: the rest of the step's wall time (data
        loading, Python between ops), so the four add up to the step's duration.

        Returns:
            One dict per step, in order: ``step`` (its name), ``duration`` and each phase of
            :data:`PHASES`. Empty when the profile has no step ranges.
        """
        return self.cache.get("step_phases", self._step_phases)

    def _step_phases(self) -> list[dict]:
        steps = self.data.step_ranges()
        if not steps:
            return []
        cols, a = self.data.event_columns, self.data.analysis
        starts = np.array([s for _, s, _ in steps], dtype=np.int64)
        ends = np.array([e for _, _, e in steps], dtype=np.int64)
        sums = step_phase_sums(starts, ends, cols["start_ns"], self.phase, a.self_cpu_ns)
        per_phase = {p: sums[:, code] for p, code in (("forward", _FORWARD), ("backward", _BACKWARD),
                                                       ("optimizer", _OPTIMIZER))}
        duration = ends - starts
        other = np.maximum(0, duration - per_phase["forward"] - per_phase["backward"] - per_phase["optimizer"])
        # The rows built from whole columns (tens of thousands of steps: a loop of dicts per
        # step took most of the Overview's time).
        return [{"step": name, "duration": d, "forward": f, "backward": b, "optimizer": o, "other": x}
                for (name, _, _), d, f, b, o, x in zip(steps, duration.tolist(), per_phase["forward"].tolist(),
                                                       per_phase["backward"].tolist(),
                                                       per_phase["optimizer"].tolist(), other.tolist())]

    def top_ops(self, n: int = 10, clock: str = "cpu") -> list[dict]:
        """The ``n`` op names with the most self time (user scopes excluded: their self time
        is the gaps between ops, not an op)."""
        key = f"self_{clock}_time_total"
        rows = [r for r in self.rows("name") if r["scope"] != SCOPE_LABELS[int(Scope.USER_SCOPE)]]
        return sorted(rows, key=lambda r: r[key], reverse=True)[:n]

    def biggest_cost_sentence(self) -> str:
        """One plain sentence naming where most of the time goes."""
        clock = "cuda" if self.data.has_device_time else "cpu"
        split = self.phase_split(clock)
        top = self.top_ops(1, clock)
        total = split.total
        if not total or not top:
            return "This profile has no timed ops."
        phase_name, phase_ns = max(split.as_dict().items(), key=lambda kv: kv[1])
        op = top[0]
        op_ns = op[f"self_{clock}_time_total"] * 1e3
        device = "GPU" if clock == "cuda" else "CPU"
        fb = self.fwdbwd_rows("name")
        fb_text = ""
        if fb:
            best = fb[0]
            fb_text = (f" Counting the backward it causes, {best['name']!r} costs the most: "
                       f"{format_time(best['forward_backward_cpu_time_total'])} forward + backward CPU time.")
        return (f"The biggest cost is the {phase_name} phase ({100 * phase_ns / total:.0f}% of {device} "
                f"time); the op with the most self {device} time is {op['name']!r} "
                f"({100 * op_ns / total:.0f}%, {op['count']:,} calls).{fb_text}")

    # ------------------------------------------------------------ operators

    def key_averages(self, group_by: str = "name", per_step: bool = False):
        """The profiler's ``key_averages()`` for an Operators grouping (cached); the
        ``ProfilerStep#N`` rows merged into one ``ProfilerStep#*`` row unless ``per_step``,
        as in ``gradtrace table``."""
        group_by = grouping(group_by)
        return self.cache.get(("key_averages", group_by, bool(per_step)), lambda: self.data.key_averages(
            merge_steps=not per_step, **_KEY_AVERAGES_ARGS[group_by]))

    def rows(self, group_by: str = "name", per_step: bool = False) -> list[dict]:
        """Grid rows for a grouping (see :func:`group_rows`)."""
        group_by = grouping(group_by)
        return self.cache.get(("rows", group_by, bool(per_step)),
                              lambda: group_rows(self.key_averages(group_by, per_step)))

    def events_of_row(self, group_by: str, row_id: int, per_step: bool = False) -> np.ndarray:
        return self.key_averages(group_by, per_step).events_of(int(row_id))

    def row_details(self, group_by: str, row_id: int, call_limit: int = 200, per_step: bool = False) -> dict:
        """Calls, shapes, stacks and forward/backward counterparts of one Operators row."""
        data, a, cols = self.data, self.data.analysis, self.data.event_columns
        idx = self.events_of_row(group_by, row_id, per_step)
        if not len(idx):
            return {"name": "", "calls": [], "shapes": [], "stacks": [], "counterparts": [], "n_calls": 0}
        name = data.name_of(int(idx[0]))
        longest = idx[np.argsort(-a.cpu_total_ns[idx], kind="stable")[:call_limit]]
        origin = self.time_origin_ns
        calls = [{
            "event": int(i), "start_ms": (int(cols["start_ns"][i]) - origin) / 1e6,
            "cpu_time_total": a.cpu_total_ns[i] / 1e3, "self_cpu_time_total": a.self_cpu_ns[i] / 1e3,
            "cuda_time_total": a.cuda_total_ns[i] / 1e3, "thread": int(cols["thread_id"][i]),
            "sequence_nr": int(cols["sequence_nr"][i]),
            "shapes": _json_or_blank(data.input_shapes_of(int(a.shapes_id[i]))),
        } for i in longest.tolist()]
        shapes = _count_strings(a.shapes_id[idx], lambda s: _json_or_blank(data.input_shapes_of(s)))
        stacks = _count_strings(a.stack_id[idx], lambda s: "\n".join(data.stack_of(s)))
        counterparts = self._counterparts(idx)
        return {"name": name, "calls": calls, "shapes": shapes, "stacks": stacks,
                "counterparts": counterparts, "n_calls": int(len(idx))}

    def _counterparts(self, idx: np.ndarray) -> list[dict]:
        """Backward nodes created by these forward events, or forward ops of these backward
        events, grouped by name with counts and CPU time."""
        data, a, cols = self.data, self.data.analysis, self.data.event_columns
        bwd_mask = a.forward_event[idx] >= 0
        if bwd_mask.any():  # backward events: their forward ops
            other = a.forward_event[idx[bwd_mask]]
            relation = "forward op"
        else:
            linked = np.flatnonzero(a.forward_event >= 0)
            other = linked[np.isin(a.forward_event[linked], idx)]
            relation = "backward node"
        if not len(other):
            return []
        names, inv = np.unique(cols["name_id"][other], return_inverse=True)
        inv = inv.reshape(-1)
        cnt = np.bincount(inv, minlength=len(names))
        cpu = np.bincount(inv, weights=a.cpu_total_ns[other], minlength=len(names))
        cuda = np.bincount(inv, weights=a.cuda_total_ns[other], minlength=len(names))
        out = [{"relation": relation, "name": data.strings[int(nm)], "count": int(c),
                "cpu_time_total": float(t) / 1e3, "cuda_time_total": float(u) / 1e3}
               for nm, c, t, u in zip(names, cnt, cpu, cuda)]
        return sorted(out, key=lambda r: -r["cpu_time_total"])

    # ------------------------------------------------------------ forward + backward

    @property
    def fwdbwd_summary(self):
        """The profiler's ``forward_backward_summary()`` (computed once)."""
        return self.cache.get("fwdbwd_summary", self.data.forward_backward_summary)

    def fwdbwd_rows(self, by: str = "call_site") -> list[dict]:
        """One row per forward op (``by="name"``) or per op and call site (``"call_site"``):
        forward cost, cost of the backward nodes it caused, and the sum (us), under the column
        ids of ``profiler.columns.FORWARD_BACKWARD_COLUMNS``."""
        return self.cache.get(("fwdbwd_rows", by), lambda: self._fwdbwd_rows(by))

    def _fwdbwd_rows(self, by: str) -> list[dict]:
        summed = [c for c in columns.FORWARD_BACKWARD_COLUMNS if columns.COLUMNS[c].kind in ("time", "count")]
        merged: dict[tuple, dict] = {}
        for r in self.cache.get("fwdbwd_dicts", self.fwdbwd_summary.to_dicts):
            key = (r["name"], r["call_site"] if by == "call_site" else None)
            m = merged.setdefault(key, dict({c: 0 for c in summed}, name=r["name"], call_site=key[1] or "",
                                            backward_names=set()))
            for c in summed:
                m[c] += r[c]
            m["backward_names"].update(r["backward_names"])
        rows = []
        for i, m in enumerate(merged.values()):
            m["id"] = i
            m["backward_names"] = ", ".join(sorted(m["backward_names"]))
            rows.append(m)
        rows.sort(key=lambda r: r["forward_backward_cpu_time_total"], reverse=True)
        return rows

    # ------------------------------------------------------------ memory

    def memory_by_op(self) -> list[dict]:
        """Per op name: bytes its own allocations took (children not included), split by kind,
        how much of that was freed before the profile ended (wherever the free happened: a
        tensor is usually freed outside the op that made it), what was still held (net), and
        the number of allocations (:func:`profiler.memory.memory_table`)."""
        return self.cache.get("memory_by_op", lambda: memory_table(self.data, "op"))

    def memory_devices(self) -> list[str]:
        dev = self.data.memory_columns["device_id"]
        return [self.data.strings[int(d)] for d in np.unique(dev)]


def _json_or_blank(value) -> str:
    return json.dumps(value) if value is not None else ""


def _count_strings(ids: np.ndarray, to_text, limit: int = 20) -> list[dict]:
    uniq, cnt = np.unique(ids, return_counts=True)
    order = np.argsort(-cnt, kind="stable")[:limit]
    return [{"text": to_text(int(uniq[k])), "count": int(cnt[k])} for k in order if uniq[k] >= 0]
