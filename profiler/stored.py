"""The analyses a version-5 profile file keeps beside its columns, so that reopening one
recomputes nothing: what :func:`analysis.analyze` costs most (the nesting: parents and depths,
the self/total times that follow from it, forward/backward pairing, inherited shapes and
stacks, memory attribution), the operator tables of the default ``key_averages`` calls and
the forward + backward table.

Stored per event (``analysis`` table): parent, depth, self CPU, CUDA total, self CUDA,
forward event, backward ancestor, shapes and stack ids after inheritance; FLOPs and the four
memory sums only when not all zero; per memory record its event; the partially overlapping
pairs; three counters. CPU total is ``end - start``, computed on use.

A file's stored analysis is checked against its columns without recomputing it, in one
vectorised pass over row windows (see :func:`check_analysis`): every index in range, every
parent starting no later than its child and on the same thread, depth = parent's depth + 1, self times within
[0, total], forward events are forward ops of the backward event's pairing key, id columns
inside the string table, stored table rows consistent with the per-event sums. The tables,
counters and flags are checked when the file is opened; the per-event arrays then too, or,
with ``profiler.load(defer_checks=True)``, on their first use (:class:`LazyAnalysis`). A file
whose analysis breaks one of these is refused; one whose analysis is absent (or comes from a
version 1-4 file) is analysed on first use, as before.
"""
from __future__ import annotations

import dataclasses
import json

import numpy as np

from . import metrics as _metrics
from .aggregate import ForwardBackwardRow, ForwardBackwardSummary, FunctionEventAvg, KeyAverages, key_averages
from .analysis import EventAnalysis
from .gpu import SUMMARY_SHAPE, SUMMARY_VERSION, has_shape
from .records import Scope
from .validate import ProfileFormatError, parse_shapes

__all__ = ["write_analysis", "read_analysis", "analysis_views", "StoredAnalysis"]

# Per-event arrays: name -> dtype, stored always / only when some value is non-zero.
_ALWAYS = {"parent": np.int32, "depth": np.int32, "self_cpu_ns": np.int64, "forward_event": np.int32,
           "backward_ancestor": np.int32, "shapes_id": np.int32, "stack_id": np.int32}
_WHEN_SET = {"cuda_total_ns": np.int64, "self_cuda_ns": np.int64, "flops": np.int64,
             "self_cpu_memory": np.int64, "cpu_memory": np.int64, "self_cuda_memory": np.int64,
             "cuda_memory": np.int64}
# The operator tables kept, by name: the CLI's default (steps merged) and the library's (per
# step) always; by input shape (``table --group-by shape``, with or without ``--per-step``)
# when shapes were recorded; by device (``table --device-rows``).
_SUMMARIES = {"merged": {"merge_steps": True}, "per_step": {"merge_steps": False},
              "shape_merged": {"group_by_input_shape": True, "merge_steps": True},
              "shape_per_step": {"group_by_input_shape": True, "merge_steps": False},
              "device_merged": {"group_by_device": True, "merge_steps": True}}
# The tables by input shape: kept only when shapes were recorded.
_BY_SHAPE = {"shape_merged", "shape_per_step"}
_REQUIRED = {"merged", "per_step"}


def summary_name(group_by_input_shape: bool, group_by_device: bool, merge_steps: bool) -> str | None:
    """The stored table of a ``key_averages`` grouping (stack and module groupings: none)."""
    wanted = {"group_by_input_shape": group_by_input_shape, "group_by_device": group_by_device,
              "merge_steps": merge_steps}
    for name, grouping in _SUMMARIES.items():
        if {k: grouping.get(k, False) for k in wanted} == wanted:
            return name
    return None
_COUNTERS = ("cpu_clock_skew", "cuda_clock_skew", "unlinked_backward")
# A stored table names the row fields its values are (``fields``: the metrics of
# profiler.metrics when it was written); a file written before tables named them holds these,
# in this order. A table that lacks a metric of today's registry is not used: the rows are
# computed from the stored per-event analysis instead. Never edit (old files must load).
_FIELDS_UNNAMED = _metrics.FIELD_ORDER_V5
_FORWARD_BACKWARD_UNNAMED = ("self_cpu_time_total", "cpu_time_total", "self_cuda_time_total", "cuda_time_total",
                             "backward_self_cpu_time_total", "backward_cpu_time_total",
                             "backward_self_cuda_time_total", "backward_cuda_time_total")


def _forward_backward_stored() -> tuple[str, ...]:
    """The forward + backward fields a file keeps: the forward op's and its backward nodes'
    (their sums are computed on reading)."""
    return tuple(f for f in _metrics.forward_backward_row_fields() if not f.startswith("forward_backward_"))


def _table_entry(writer, columns: dict, rows: int) -> dict:
    entries = []
    for name, values in columns.items():
        values = np.ascontiguousarray(values)
        entries.append(dict(writer.put(values), name=name, dtype=values.dtype.str))
    return {"rows": rows, "columns": entries}


def _summary(ka) -> dict:
    fields = _metrics.row_fields()
    rows = [[r.key, [getattr(r, f) for f in fields], r.input_shapes, r.scope, r.device] for r in ka]
    return {"rows": rows, "self_cpu_ns": ka._self_cpu_ns, "self_cuda_ns": ka._self_cuda_ns, "fields": list(fields)}


def write_analysis(data, writer, read_back=None) -> dict:
    """Write ``data.analysis`` (computing it if needed) and the default tables; returns the
    footer's ``analysis`` entry.

    Args:
        read_back: the file being written, read back (``mapped.save(release_memory=True)``):
            its ``analysis(data, entry)`` puts views of the per-event arrays just written in
            place of the computed ones (freeing those), and ``release()`` hands back the pages
            each table read before the next one runs.
    """
    a = data.analysis
    n = data.n_events
    fb_fields = _forward_backward_stored()
    per_event = {name: getattr(a, name).astype(dt, copy=False) for name, dt in _ALWAYS.items()}
    per_event.update({name: getattr(a, name).astype(dt, copy=False) for name, dt in _WHEN_SET.items()
                      if getattr(a, name).any()})
    entry = {
        "events": _table_entry(writer, per_event, n),
        "memory": _table_entry(writer, {"memory_event": a.memory_event.astype(np.int32)}, data.n_memory_records),
        # (first, second) of each pair, flat.
        "overlaps": _table_entry(writer, {"pair": np.asarray(a.partial_overlaps, np.int64).reshape(-1)},
                                 2 * len(a.partial_overlaps)),
        "counters": {k: int(getattr(a, k)) for k in _COUNTERS},
    }
    del per_event, a                    # the computed arrays: only data.analysis holds them now
    release = read_back.release if read_back is not None else (lambda: None)
    if read_back is not None:
        read_back.analysis(data, entry)
    summaries = {}
    for name, grouping in _SUMMARIES.items():
        if name not in _BY_SHAPE or data.metadata.get("record_shapes") or data.metadata.get("with_flops"):
            summaries[name] = _summary(data.key_averages(**grouping))
            release()
    entry["summaries"] = summaries
    entry["forward_backward"] = [[r.name, r.call_site, r.count, r.backward_count, r.backward_names,
                                  [getattr(r, f) for f in fb_fields]] for r in data.forward_backward_summary()]
    release()
    entry.update(forward_backward_fields=list(fb_fields), has_device_time=bool(data.has_device_time),
                 has_cuda_memory=bool(data.has_cuda_memory))
    if data.has_device_time:
        # The GPU figures (gradtrace gpu, the Overview's GPU section) take seconds at millions
        # of kernels; as JSON they are ~700 bytes per step.
        summary = json.loads(json.dumps(data.gpu_summary()))
        release()
        if has_shape(summary, SUMMARY_SHAPE):
            entry["gpu_summary"] = dict(writer.put(json.dumps(summary).encode("ascii")), version=SUMMARY_VERSION)
    return entry


def analysis_views(mf, entry: dict, analysis: EventAnalysis) -> EventAnalysis:
    """``analysis`` with the per-event arrays that ``entry`` (written by :func:`write_analysis`)
    stores replaced by views of the mapped file ``mf``."""
    n, n_mem = len(analysis.parent), len(analysis.memory_event)
    views = _read_arrays(mf, entry["events"], "events", n, {**_ALWAYS, **_WHEN_SET})
    views["memory_event"] = _read_arrays(mf, entry["memory"], "memory", n_mem, {"memory_event": np.int32})["memory_event"]
    return dataclasses.replace(analysis, **views)


# --------------------------------------------------------------------------- reading


class StoredAnalysis:
    """What a file kept: the per-event analysis and the default tables' rows."""

    def __init__(self, analysis, summaries: dict, flags: dict, forward_backward: tuple | None,
                 gpu_summary: "StoredGpuSummary | None" = None, release=None):
        """Args:
            summaries: the stored tables that hold every metric of today's registry.
            forward_backward: (fields, rows) of the forward + backward table, None when it
                lacks one of today's fields.
            gpu_summary: the stored ``ProfileData.gpu_summary()``, None when the file has
                none of today's version.
            release: hands the pages of the file read so far back to the kernel
                (``MappedFile.release``); None when nothing is mapped.
        """
        self.release = release
        self.analysis, self.summaries, self.flags = analysis, summaries, flags
        self.forward_backward = forward_backward
        self.gpu_summary = gpu_summary


class StoredGpuSummary:
    """The GPU summary a file kept, as JSON bytes: parsed and checked against
    :data:`profiler.gpu.SUMMARY_SHAPE` on each use (a fresh dict for each caller)."""

    def __init__(self, path, raw):
        self._path, self._raw = path, raw
        self._checked = False

    def get(self) -> dict:
        """The summary.

        Raises:
            ProfileFormatError: the bytes are not a summary of today's shape.
        """
        try:
            value = json.loads(bytes(self._raw).decode("ascii"))
        except (ValueError, RecursionError):
            raise _bad(self._path, "has an unreadable GPU summary") from None
        # The bytes are a read-only map: once checked, every later parse is the same value.
        if not self._checked and not has_shape(value, SUMMARY_SHAPE):
            raise _bad(self._path, "has a malformed GPU summary")
        self._checked = True
        return value


def stored_forward_backward(data, table: tuple) -> ForwardBackwardSummary:
    fields, rows = table
    return ForwardBackwardSummary(
        [ForwardBackwardRow(name=name, call_site=site, count=count, backward_count=b_count,
                            backward_names=list(names), **dict(zip(fields, times)))
         for name, site, count, b_count, names, times in rows], data)


def _field_names(path, names, unnamed: tuple, what: str) -> tuple[str, ...]:
    """The fields a stored table says its values are (``unnamed`` when it names none)."""
    if names is None:
        return unnamed
    if not isinstance(names, list) or not all(type(f) is str for f in names) or len(set(names)) != len(names):
        raise _bad(path, f"has a {what} with malformed field names")
    return tuple(names)


def _check_forward_backward(path, rows, n_events: int, fields: tuple) -> tuple | None:
    """The stored forward + backward rows: types and ranges (counts within the profile).

    Returns:
        (fields, rows), or None when the table lacks a field of today's registry.
    """
    if not isinstance(rows, list) or not all(
            type(r) is list and len(r) == 6 and type(r[0]) is str and (r[1] is None or type(r[1]) is str)
            and type(r[2]) is int and type(r[3]) is int and type(r[4]) is list
            and all(type(x) is str for x in r[4]) and type(r[5]) is list and len(r[5]) == len(fields)
            for r in rows):
        raise _bad(path, "has a malformed forward + backward table")
    if any(r[2] < 1 or r[3] < 0 for r in rows) or sum(r[2] for r in rows) > n_events:
        raise _bad(path, "has a forward + backward table with invalid counts")
    try:
        times = np.array([r[5] for r in rows], dtype=np.float64).reshape(len(rows), len(fields))
    except (TypeError, ValueError, OverflowError):
        raise _bad(path, "has a forward + backward row with a value that is not a number") from None
    if not np.all(np.isfinite(times)) or np.any(times < 0):
        raise _bad(path, "has a forward + backward row with a value out of range")
    return (fields, rows) if set(_forward_backward_stored()) <= set(fields) else None


class StoredKeyAverages(KeyAverages):
    """Rows read from the file; which events each row averages (``events_of``, the dashboard's
    drill-down) is found on first use, by grouping the events as ``key_averages`` does."""

    def __init__(self, rows, data, grouping: dict, self_cpu_ns: int, self_cuda_ns: int):
        super().__init__(rows, data, None, None, grouping, self_cpu_ns, self_cuda_ns)

    def _grouped(self):
        if "_computed" not in self.__dict__:
            self.__dict__["_computed"] = key_averages(self._data, **self._grouping)
        return self.__dict__["_computed"]

    _indices = property(lambda self: self._grouped()._indices, lambda self, v: None)
    _group = property(lambda self: self._grouped()._group, lambda self, v: None)


def stored_key_averages(data, summary: dict, name: str) -> StoredKeyAverages:
    fields = summary.get("fields", _FIELDS_UNNAMED)
    keep = [k for k, f in enumerate(fields) if f in set(_metrics.row_fields())]
    rows = [FunctionEventAvg(key, **{fields[k]: values[k] for k in keep}, input_shapes=shapes, scope=scope,
                             device=device)
            for key, values, shapes, scope, device in summary["rows"]]
    grouping = {"group_by_input_shape": False, "group_by_stack_n": 0, "group_by_module": False,
                "group_by_device": False, **_SUMMARIES[name]}
    return StoredKeyAverages(rows, data, grouping, summary["self_cpu_ns"], summary["self_cuda_ns"])


def _bad(path, what: str):
    return ProfileFormatError(path, f"corrupted profile: the stored analysis {what}")


def _check_summary(path, summary, n_events: int) -> dict:
    """A stored table: its shape and value ranges, vectorised (one row per distinct name,
    thousands in a long run). Its totals are compared with the per-event arrays when those
    are checked (:func:`check_analysis`)."""
    if not isinstance(summary, dict) or not isinstance(summary.get("rows"), list):
        raise _bad(path, "has a malformed table")
    for key in ("self_cpu_ns", "self_cuda_ns"):
        if type(summary.get(key)) is not int or summary[key] < 0:
            raise _bad(path, f"table has an invalid {key}")
    rows = summary["rows"]
    fields = _field_names(path, summary.get("fields"), _FIELDS_UNNAMED, "table")
    if "count" not in fields:
        raise _bad(path, "has a table without its counts")
    if fields is not _FIELDS_UNNAMED:
        summary = dict(summary, fields=fields)
    if not all(type(r) is list and len(r) == 5 and type(r[0]) is str and type(r[1]) is list
               and len(r[1]) == len(fields) and (r[4] is None or type(r[4]) is str) for r in rows):
        raise _bad(path, "has a malformed table row")
    try:
        values = np.array([r[1] for r in rows], dtype=np.float64).reshape(len(rows), len(fields))
    except (TypeError, ValueError, OverflowError):
        raise _bad(path, "has a table row with a value that is not a number") from None
    count = fields.index("count")
    counts = [r[1][count] for r in rows]
    if not all(type(c) is int for c in counts) or (len(rows) and values[:, count].min() < 1):
        raise _bad(path, "has a table row with an invalid count")
    if sum(counts) != n_events:
        raise _bad(path, f"table counts {sum(counts)} events, the profile has {n_events}")
    # Times are sums of non-negative durations; memory sums may be negative.
    time_fields = {m.name for m in _metrics.row_metrics() if m.kind == "time"}
    times = [k for k, f in enumerate(fields) if f in time_fields]
    if not np.all(np.isfinite(values)) or np.any(values[:, times] < 0):
        raise _bad(path, "has a table row with a value out of range")
    scopes = {int(s) for s in Scope}
    if not all(type(r[3]) is int and r[3] in scopes for r in rows):
        raise _bad(path, "has a table row with an unknown scope")
    seen: set = set()
    for shapes in (r[2] for r in rows):
        if shapes is None:
            continue
        text = json.dumps(shapes) if type(shapes) is list else "x"
        if text not in seen and parse_shapes(text) is None:
            raise _bad(path, "has a table row with invalid input shapes")
        seen.add(text)
    return summary


def _read_arrays(mf, entry, name: str, rows: int, allowed: dict) -> dict:
    if not isinstance(entry, dict) or not isinstance(entry.get("columns"), list) or entry.get("rows") != rows:
        raise _bad(mf.path, f"{name} table is malformed or does not have {rows} rows")
    out = {}
    for info in entry["columns"]:
        col = info.get("name") if isinstance(info, dict) else None
        if not isinstance(col, str) or col not in allowed or col in out:
            raise _bad(mf.path, f"{name} table has an unknown or repeated column {str(col)[:30]!r}")
        out[col] = mf.column(info, f"stored {name} column {col!r}", np.dtype(allowed[col]), rows)
    return out


def read_analysis(mf, entry, parts, window_rows: int, defer: bool = False) -> StoredAnalysis:
    """Read the stored analysis of a mapped file and check it against the checked columns.

    Args:
        defer: check the per-event arrays on first use of one (``ProfileData.analysis``)
            instead of now; the tables, counters and flags are checked now either way.
    """
    path = mf.path
    if not isinstance(entry, dict):
        raise _bad(path, "is malformed")
    events, memory = parts.event_columns, parts.memory_columns
    n, n_mem = len(events["start_ns"]), len(memory["time_ns"])
    per_event = _read_arrays(mf, entry.get("events"), "events", n, {**_ALWAYS, **_WHEN_SET})
    if set(_ALWAYS) - set(per_event):
        raise _bad(path, "lacks " + ", ".join(sorted(set(_ALWAYS) - set(per_event))))
    mem_event = _read_arrays(mf, entry.get("memory"), "memory", n_mem, {"memory_event": np.int32})["memory_event"]
    overlaps_entry = entry.get("overlaps")
    rows = overlaps_entry.get("rows") if isinstance(overlaps_entry, dict) else None
    if type(rows) is not int or rows % 2 or not 0 <= rows <= 2 * n:
        raise _bad(path, "overlaps table is malformed")
    pairs = _read_arrays(mf, overlaps_entry, "overlaps", rows, {"pair": np.int64}).get(
        "pair", np.zeros(0, np.int64)).reshape(-1, 2)
    if len(pairs) and (pairs.min() < 0 or pairs.max() >= n):
        raise _bad(path, "has an overlapping pair out of range")
    counters = entry.get("counters")
    if not isinstance(counters, dict) or not all(type(counters.get(k)) is int and 0 <= counters[k] <= n
                                                 for k in _COUNTERS):
        raise _bad(path, "has invalid counters")
    counters = {k: counters[k] for k in _COUNTERS}
    summaries = entry.get("summaries")
    if not isinstance(summaries, dict) or not _REQUIRED <= set(summaries) <= set(_SUMMARIES):
        raise _bad(path, "lacks its tables or has unknown ones")
    summaries = {k: _check_summary(path, v, n) for k, v in summaries.items()}
    # Tables written before a metric of today's registry existed cannot answer for it.
    current = set(_metrics.row_fields())
    usable = {k: v for k, v in summaries.items() if current <= set(v.get("fields", _FIELDS_UNNAMED))}
    flags = {k: entry.get(k) for k in ("has_device_time", "has_cuda_memory")}
    if not all(isinstance(v, bool) for v in flags.values()):
        raise _bad(path, "has invalid flags")
    # Arrays not stored are all zeros: a zero-stride view costs no memory.
    per_event.update({name: np.broadcast_to(np.zeros(1, np.int64), n) for name in _WHEN_SET if name not in per_event})

    def check():
        check_analysis(path, events, memory, len(parts.strings), per_event, mem_event, summaries,
                       flags, window_rows, mf.release)

    analysis = LazyAnalysis(check, events, per_event, mem_event, pairs, counters)
    if not defer:
        analysis.materialize()
    fb_fields = _field_names(path, entry.get("forward_backward_fields"), _FORWARD_BACKWARD_UNNAMED,
                             "forward + backward table")
    forward_backward = _check_forward_backward(path, entry.get("forward_backward"), n, fb_fields)
    return StoredAnalysis(analysis, usable, flags, forward_backward, _gpu_summary(mf, entry, defer), mf.release)


def _gpu_summary(mf, entry: dict, defer: bool) -> StoredGpuSummary | None:
    """The stored GPU summary (checked now, or on first use with ``defer``); None when the
    file has none, or one of another :data:`profiler.gpu.SUMMARY_VERSION` (recomputed then)."""
    info = entry.get("gpu_summary")
    if info is None:
        return None
    if not isinstance(info, dict) or type(info.get("version")) is not int:
        raise _bad(mf.path, "has a malformed GPU summary entry")
    if info["version"] != SUMMARY_VERSION:
        return None
    summary = StoredGpuSummary(mf.path, mf.blob(info, "stored GPU summary"))
    if not defer:
        summary.get()
    return summary


class LazyAnalysis:
    """A stored :class:`EventAnalysis` that is checked when first used.

    The counters and the overlapping pairs (small, checked on open) are plain attributes, so
    that a table's footer reads them without touching the per-event arrays; the first access
    to anything else runs :func:`check_analysis` over the arrays (raising
    ``ProfileFormatError`` if they cannot be this profile's analysis) and builds the
    EventAnalysis, with CPU total = end - start.
    """

    def __init__(self, check, events, per_event, memory_event, pairs, counters):
        self._check, self._events, self._per_event = check, events, per_event
        self._memory_event = memory_event
        self.partial_overlaps = pairs
        for k, v in counters.items():
            setattr(self, k, v)
        self._built = None

    def materialize(self) -> EventAnalysis:
        if self._built is None:
            self._check()
            events = self._events
            self._built = EventAnalysis(
                cpu_total_ns=events["end_ns"] - events["start_ns"], memory_event=self._memory_event,
                partial_overlaps=self.partial_overlaps, **self._per_event,
                **{k: getattr(self, k) for k in _COUNTERS})
        return self._built

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.materialize(), name)


def check_analysis(path, events, memory, n_strings, a: dict, memory_event, summaries, flags,
                   window_rows: int, release) -> None:
    """The invariants of a stored analysis, in windows of rows (see the module docstring).

    Raises:
        ProfileFormatError: the stored analysis cannot be the analysis of these columns.
    """
    n = len(events["start_ns"])
    scope, thread = events["scope"], events["thread_id"]
    sums = {"self_cpu": 0, "self_cuda": 0}
    has_dev = False
    for lo in range(0, n, window_rows):
        hi = min(lo + window_rows, n)
        idx = np.arange(lo, hi)
        parent, depth = a["parent"][lo:hi], a["depth"][lo:hi]
        if np.any((parent < -1) | (parent >= n) | (parent == idx)):
            raise _bad(path, "has a parent out of range")
        has = parent >= 0
        p = parent[has]
        # A parent starts no later than its child (not always at a lower row: of two ranges
        # with one start, a file need not list the outer first). Depths rule out cycles.
        if np.any(events["start_ns"][p] > events["start_ns"][lo:hi][has]):
            raise _bad(path, "has a parent that starts after its child")
        if np.any(thread[p] != thread[lo:hi][has]) or np.any(depth[~has] != 1) or \
                np.any(depth[has] != a["depth"][p] + 1):
            raise _bad(path, "has a nesting unlike its columns (thread or depth)")
        start, end = events["start_ns"][lo:hi], events["end_ns"][lo:hi]
        # (A child may end after its parent: ranges that overlap without nesting are kept.)
        self_cpu = a["self_cpu_ns"][lo:hi]
        if np.any((self_cpu < 0) | (self_cpu > end - start)):
            raise _bad(path, "has a self CPU time outside [0, total]")
        cuda_total, self_cuda = a["cuda_total_ns"][lo:hi], a["self_cuda_ns"][lo:hi]
        if np.any((self_cuda < 0) | (self_cuda > cuda_total)):
            raise _bad(path, "has a CUDA time out of range")
        d0, d1 = events["device_start_ns"][lo:hi], events["device_end_ns"][lo:hi]
        own = d0 >= 0
        has_dev = has_dev or bool(own.any())
        if np.any(cuda_total[own] != d1[own] - d0[own]) or np.any(self_cuda[~own] != 0):
            raise _bad(path, "has CUDA times unlike the device intervals")
        fwd = a["forward_event"][lo:hi]
        if np.any((fwd < -1) | (fwd >= n)):
            raise _bad(path, "has a forward event out of range")
        linked = fwd >= 0
        f = fwd[linked]
        if np.any(scope[lo:hi][linked] != Scope.BACKWARD_FUNCTION) or np.any(scope[f] != Scope.FUNCTION) or \
                np.any(events["sequence_nr"][f] != events["sequence_nr"][lo:hi][linked]) or \
                np.any(thread[f] != events["fwd_thread_id"][lo:hi][linked]):
            raise _bad(path, "pairs a backward event with an op of another key")
        anc = a["backward_ancestor"][lo:hi]
        if np.any((anc < -1) | (anc >= n)) or np.any(scope[anc[anc >= 0]] != Scope.BACKWARD_FUNCTION):
            raise _bad(path, "has a backward ancestor out of range")
        for name in ("shapes_id", "stack_id"):
            ids = a[name][lo:hi]
            if np.any((ids < -1) | (ids >= n_strings)):
                raise _bad(path, f"has a {name} outside the string table")
        # Inherited shapes come from a forward op's own shapes, which the columns' check parsed.
        inherited = a["shapes_id"][lo:hi]
        if np.any((inherited != events["shapes_id"][lo:hi]) & ~linked) or \
                np.any(inherited[linked] != events["shapes_id"][f]):
            raise _bad(path, "has input shapes unlike the columns")
        if np.any(a["flops"][lo:hi] < 0):
            raise _bad(path, "has a negative FLOP count")
        sums["self_cpu"] += int(self_cpu.sum())
        sums["self_cuda"] += int(self_cuda.sum())
        release()
    if np.any((memory_event < -1) | (memory_event >= n)):
        raise _bad(path, "attributes a memory record to an event out of range")
    if flags["has_device_time"] != has_dev:
        raise _bad(path, "says the profile has device time when its columns say otherwise")
    for name, summary in summaries.items():
        if summary["self_cpu_ns"] != sums["self_cpu"] or summary["self_cuda_ns"] != sums["self_cuda"]:
            raise _bad(path, f"{name} table's totals differ from its per-event times")
    release()
