"""Events, per-name averages and the forward+backward summary, with their tables.

Attribute names and units follow PyTorch's ``FunctionEvent``/``FunctionEventAvg``: times are
floats in **microseconds** (``cpu_time_total``, ``self_cuda_time_total``...), memory in bytes.
Aggregation is vectorised: events are grouped with ``np.unique`` and summed with
``np.bincount``; Python objects are only made for the resulting rows.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .records import Scope
from .table import (Column, format_flops_column, format_memory, format_percent, format_time_ns,
                    render, truncate)

if TYPE_CHECKING:  # pragma: no cover
    from .data import ProfileData

__all__ = ["FunctionEvent", "EventList", "FunctionEventAvg", "KeyAverages",
           "ForwardBackwardRow", "ForwardBackwardSummary", "SORT_KEYS"]

# sort_by name -> row attribute (PyTorch's names plus the newer "device" spellings).
SORT_KEYS = {
    "cpu_time": "cpu_time", "cuda_time": "cuda_time", "device_time": "cuda_time",
    "cpu_time_total": "cpu_time_total", "cuda_time_total": "cuda_time_total",
    "device_time_total": "cuda_time_total",
    "self_cpu_time_total": "self_cpu_time_total", "self_cuda_time_total": "self_cuda_time_total",
    "self_device_time_total": "self_cuda_time_total",
    "cpu_memory_usage": "cpu_memory_usage", "self_cpu_memory_usage": "self_cpu_memory_usage",
    "cuda_memory_usage": "cuda_memory_usage", "self_cuda_memory_usage": "self_cuda_memory_usage",
    "device_memory_usage": "cuda_memory_usage", "self_device_memory_usage": "self_cuda_memory_usage",
    "count": "count", "flops": "flops",
}

_ROW_FIELDS = ("key", "count", "cpu_time_total", "self_cpu_time_total", "cuda_time_total",
               "self_cuda_time_total", "cpu_time", "cuda_time", "cpu_memory_usage",
               "self_cpu_memory_usage", "cuda_memory_usage", "self_cuda_memory_usage", "flops",
               "input_shapes", "stack")


class FunctionEventAvg:
    """One row of :meth:`ProfileData.key_averages`: the sums over a group of events.

    Attributes (times in microseconds): key, count, cpu_time_total, self_cpu_time_total,
    cuda_time_total, self_cuda_time_total, cpu_time and cuda_time (averages per call),
    cpu_memory_usage, self_cpu_memory_usage, cuda_memory_usage, self_cuda_memory_usage
    (bytes), flops, input_shapes (list of shapes or None), stack (list of frames), scope.
    """

    __slots__ = _ROW_FIELDS + ("scope",)

    def __init__(self, key: str, **values):
        self.key = key
        self.count = 0
        for name in _ROW_FIELDS[2:]:
            setattr(self, name, 0)
        self.input_shapes = None
        self.stack = []
        self.scope = None
        for name, value in values.items():
            setattr(self, name, value)

    @property
    def name(self) -> str:
        return self.key

    # Newer PyTorch spells CUDA as "device"; both read the same numbers.
    device_time_total = property(lambda self: self.cuda_time_total)
    self_device_time_total = property(lambda self: self.self_cuda_time_total)
    device_time = property(lambda self: self.cuda_time)

    def to_dict(self) -> dict:
        """Plain-dict form (times in microseconds), for data frames and JSON."""
        d = {name: getattr(self, name) for name in _ROW_FIELDS}
        d["name"] = d.pop("key")
        d["scope"] = Scope(self.scope).name if self.scope is not None else None
        return d

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key!r} count={self.count} "
                f"self_cpu_time_total={self.self_cpu_time_total:.3f}us "
                f"cpu_time_total={self.cpu_time_total:.3f}us "
                f"self_cuda_time_total={self.self_cuda_time_total:.3f}us>")


class FunctionEvent:
    """A view of one event of a profile (made on demand; the profile stores columns)."""

    __slots__ = ("_data", "id")

    def __init__(self, data: "ProfileData", index: int):
        self._data = data
        self.id = int(index)

    def _col(self, name):
        return self._data.event_columns[name][self.id]

    name = key = property(lambda self: self._data.strings[int(self._col("name_id"))])
    scope = property(lambda self: Scope(int(self._col("scope"))))
    thread = property(lambda self: int(self._col("thread_id")))
    sequence_nr = property(lambda self: int(self._col("sequence_nr")))
    fwd_thread = property(lambda self: int(self._col("fwd_thread_id")))
    start_ns = property(lambda self: int(self._col("start_ns")))
    end_ns = property(lambda self: int(self._col("end_ns")))
    device = property(lambda self: self._data.strings[int(self._col("device_id"))])
    stream = property(lambda self: int(self._col("stream")))
    count = property(lambda self: 1)
    cpu_time_total = property(lambda self: self._data.analysis.cpu_total_ns[self.id] / 1e3)
    self_cpu_time_total = property(lambda self: self._data.analysis.self_cpu_ns[self.id] / 1e3)
    cuda_time_total = property(lambda self: self._data.analysis.cuda_total_ns[self.id] / 1e3)
    self_cuda_time_total = property(lambda self: self._data.analysis.self_cuda_ns[self.id] / 1e3)
    cpu_time = cpu_time_total
    cuda_time = cuda_time_total
    device_time_total = cuda_time_total
    self_device_time_total = self_cuda_time_total
    cpu_memory_usage = property(lambda self: int(self._data.analysis.cpu_memory[self.id]))
    self_cpu_memory_usage = property(lambda self: int(self._data.analysis.self_cpu_memory[self.id]))
    cuda_memory_usage = property(lambda self: int(self._data.analysis.cuda_memory[self.id]))
    self_cuda_memory_usage = property(lambda self: int(self._data.analysis.self_cuda_memory[self.id]))
    flops = property(lambda self: int(self._data.analysis.flops[self.id]))
    input_shapes = property(lambda self: self._data.input_shapes_of(int(self._data.analysis.shapes_id[self.id])))
    stack = property(lambda self: self._data.stack_of(int(self._data.analysis.stack_id[self.id])))

    @property
    def time_range(self) -> tuple[float, float]:
        """(start, end) in microseconds, like PyTorch's ``Interval``."""
        return (self.start_ns / 1e3, self.end_ns / 1e3)

    @property
    def cpu_parent(self) -> "FunctionEvent | None":
        p = int(self._data.analysis.parent[self.id])
        return FunctionEvent(self._data, p) if p >= 0 else None

    @property
    def cpu_children(self) -> list["FunctionEvent"]:
        return [FunctionEvent(self._data, int(c)) for c in self._data.children_of(self.id)]

    @property
    def forward_event(self) -> "FunctionEvent | None":
        """For a backward event, the forward op whose node it ran."""
        f = int(self._data.analysis.forward_event[self.id])
        return FunctionEvent(self._data, f) if f >= 0 else None

    def to_dict(self) -> dict:
        a = self._data.analysis
        return {
            "id": self.id, "name": self.name, "scope": self.scope.name, "thread": self.thread,
            "start_ns": self.start_ns, "end_ns": self.end_ns,
            "sequence_nr": self.sequence_nr, "fwd_thread": self.fwd_thread,
            "device": self.device, "stream": self.stream,
            "parent": int(a.parent[self.id]), "forward_event": int(a.forward_event[self.id]),
            "cpu_time_total": self.cpu_time_total, "self_cpu_time_total": self.self_cpu_time_total,
            "cuda_time_total": self.cuda_time_total, "self_cuda_time_total": self.self_cuda_time_total,
            "cpu_memory_usage": self.cpu_memory_usage, "self_cpu_memory_usage": self.self_cpu_memory_usage,
            "cuda_memory_usage": self.cuda_memory_usage,
            "self_cuda_memory_usage": self.self_cuda_memory_usage,
            "flops": self.flops, "input_shapes": self.input_shapes, "stack": self.stack,
        }

    def __eq__(self, other):
        return isinstance(other, FunctionEvent) and other._data is self._data and other.id == self.id

    def __hash__(self):
        return hash((id(self._data), self.id))

    def __repr__(self):
        return (f"<FunctionEvent id={self.id} name={self.name!r} scope={self.scope.name} "
                f"thread={self.thread} cpu_time_total={self.cpu_time_total:.3f}us>")


class EventList(Sequence):
    """The events of a profile (or a subset), in start-time order; items are :class:`FunctionEvent`."""

    def __init__(self, data: "ProfileData", indices: np.ndarray | None = None):
        self._data = data
        self._indices = (np.arange(data.n_events) if indices is None
                         else np.asarray(indices, dtype=np.int64))

    def __len__(self):
        return len(self._indices)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return EventList(self._data, self._indices[i])
        return FunctionEvent(self._data, int(self._indices[i]))

    @property
    def indices(self) -> np.ndarray:
        return self._indices

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0) -> "KeyAverages":
        return key_averages(self._data, group_by_input_shape, group_by_stack_n, self._indices)

    def total_average(self) -> FunctionEventAvg:
        return total_average(self._data, self._indices)

    def table(self, sort_by: str | None = None, row_limit: int = 100, max_name_column_width: int = 55,
              header: str | None = None, top_level_events_only: bool = False,
              time_unit: str | None = None) -> str:
        """One row per event (use ``key_averages().table()`` for one row per name)."""
        idx = self._indices
        if top_level_events_only:
            idx = idx[self._data.analysis.parent[idx] < 0]
        rows = [FunctionEvent(self._data, int(i)) for i in idx]
        self_cpu_ns = int(self._data.analysis.self_cpu_ns[self._indices].sum())
        self_cuda_ns = int(self._data.analysis.self_cuda_ns[self._indices].sum())
        return build_table(self._data, rows, self_cpu_ns, self_cuda_ns, sort_by, row_limit,
                           max_name_column_width, header, time_unit, shapes=False, stack_n=0)

    def to_dicts(self) -> list[dict]:
        return [FunctionEvent(self._data, int(i)).to_dict() for i in self._indices]


class KeyAverages(list):
    """``list`` of :class:`FunctionEventAvg` with ``table()`` and ``to_dicts()``.

    Attributes:
        self_cpu_time_total, self_cuda_time_total: Σ self time (us) over the events averaged,
            the 100% of the table's percentage columns.
    """

    def __init__(self, rows, data, indices, group_by_input_shape, group_by_stack_n,
                 self_cpu_ns: int, self_cuda_ns: int):
        super().__init__(rows)
        self._data = data
        self._indices = indices
        self._group_by_input_shape = group_by_input_shape
        self._group_by_stack_n = group_by_stack_n
        self._self_cpu_ns = self_cpu_ns
        self._self_cuda_ns = self_cuda_ns
        self.self_cpu_time_total = self_cpu_ns / 1e3
        self.self_cuda_time_total = self_cuda_ns / 1e3

    def table(self, sort_by: str | None = None, row_limit: int = 100, max_name_column_width: int = 55,
              header: str | None = None, top_level_events_only: bool = False,
              time_unit: str | None = None) -> str:
        """Render like PyTorch's ``key_averages().table()``.

        Args:
            sort_by: a key of :data:`SORT_KEYS` (descending), or None for first-seen order.
            row_limit: at most this many rows (<= 0: all).
            max_name_column_width: names longer than this are cut with ``...``.
            header: a title line printed above the table.
            top_level_events_only: average only events without a parent.
            time_unit: "s", "ms" or "us" for every time cell; None picks per cell.
        Returns:
            The table text, ending with the "Self CPU time total" footer.
        """
        rows = list(self)
        if top_level_events_only:
            top = self._indices[self._data.analysis.parent[self._indices] < 0]
            rows = list(key_averages(self._data, self._group_by_input_shape,
                                     self._group_by_stack_n, top))
        return build_table(self._data, rows, self._self_cpu_ns, self._self_cuda_ns, sort_by,
                           row_limit, max_name_column_width, header, time_unit,
                           shapes=self._group_by_input_shape, stack_n=self._group_by_stack_n)

    def to_dicts(self) -> list[dict]:
        """Rows as plain dicts (times in microseconds) — a data-frame without pandas."""
        return [row.to_dict() for row in self]


# --------------------------------------------------------------------------- grouping


def _dense(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    uniq, inv = np.unique(values, return_inverse=True)
    return uniq, inv.reshape(-1).astype(np.int64)


def _combine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Dense ids of the pairs (a[i], b[i]) (no overflow: both sides are made dense first)."""
    _, a_d = _dense(a)
    ub, b_d = _dense(b)
    return a_d * max(len(ub), 1) + b_d


def _stack_prefix_ids(data: "ProfileData", stack_ids: np.ndarray, n: int) -> tuple[np.ndarray, list]:
    """Map each stack id to an id of its top-``n`` frames; also return those frame lists."""
    uniq, inv = _dense(stack_ids)
    prefix_of: dict[tuple, int] = {}
    prefixes: list[list[str]] = []
    mapped = np.empty(len(uniq), dtype=np.int64)
    for k, sid in enumerate(uniq.tolist()):
        frames = tuple(data.stack_of(int(sid))[:n])
        if frames not in prefix_of:
            prefix_of[frames] = len(prefixes)
            prefixes.append(list(frames))
        mapped[k] = prefix_of[frames]
    return mapped[inv], prefixes


def _group_sums(group: np.ndarray, n_groups: int, values: np.ndarray) -> np.ndarray:
    return np.rint(np.bincount(group, weights=values, minlength=n_groups)).astype(np.int64)


def key_averages(data: "ProfileData", group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                 indices: np.ndarray | None = None) -> KeyAverages:
    """Group events by name (and input shapes, and top-N stack frames) and sum them."""
    a = data.analysis
    idx = np.arange(data.n_events) if indices is None else np.asarray(indices, dtype=np.int64)
    cols = data.event_columns
    key = cols["name_id"][idx].astype(np.int64)
    if group_by_input_shape:
        key = _combine(key, a.shapes_id[idx])
    prefixes: list = []
    prefix_id = None
    if group_by_stack_n > 0:
        prefix_id, prefixes = _stack_prefix_ids(data, a.stack_id[idx], group_by_stack_n)
        key = _combine(key, prefix_id)
    _, first, group = np.unique(key, return_index=True, return_inverse=True)
    group = group.reshape(-1)
    n_groups = len(first)
    # Rows come in order of first appearance (events are stored in start order).
    rank = np.empty(n_groups, dtype=np.int64)
    appearance = np.argsort(first, kind="stable")
    rank[appearance] = np.arange(n_groups)
    group = rank[group]
    first = first[appearance]

    count = np.bincount(group, minlength=n_groups)
    sums = {name: _group_sums(group, n_groups, arr[idx]) for name, arr in (
        ("cpu_time_total", a.cpu_total_ns), ("self_cpu_time_total", a.self_cpu_ns),
        ("cuda_time_total", a.cuda_total_ns), ("self_cuda_time_total", a.self_cuda_ns),
        ("cpu_memory_usage", a.cpu_memory), ("self_cpu_memory_usage", a.self_cpu_memory),
        ("cuda_memory_usage", a.cuda_memory), ("self_cuda_memory_usage", a.self_cuda_memory),
        ("flops", a.flops))}
    rows = []
    for g in range(n_groups):
        ev = int(idx[first[g]])
        c = int(count[g])
        row = FunctionEventAvg(
            data.strings[int(cols["name_id"][ev])], count=c,
            cpu_time_total=sums["cpu_time_total"][g] / 1e3,
            self_cpu_time_total=sums["self_cpu_time_total"][g] / 1e3,
            cuda_time_total=sums["cuda_time_total"][g] / 1e3,
            self_cuda_time_total=sums["self_cuda_time_total"][g] / 1e3,
            cpu_time=sums["cpu_time_total"][g] / 1e3 / c,
            cuda_time=sums["cuda_time_total"][g] / 1e3 / c,
            cpu_memory_usage=int(sums["cpu_memory_usage"][g]),
            self_cpu_memory_usage=int(sums["self_cpu_memory_usage"][g]),
            cuda_memory_usage=int(sums["cuda_memory_usage"][g]),
            self_cuda_memory_usage=int(sums["self_cuda_memory_usage"][g]),
            flops=int(sums["flops"][g]),
            input_shapes=data.input_shapes_of(int(a.shapes_id[ev])),
            stack=prefixes[int(prefix_id[first[g]])] if prefix_id is not None else [],
            scope=int(cols["scope"][ev]),
        )
        rows.append(row)
    return KeyAverages(rows, data, idx, group_by_input_shape, group_by_stack_n,
                       int(a.self_cpu_ns[idx].sum()), int(a.self_cuda_ns[idx].sum()))


def total_average(data: "ProfileData", indices: np.ndarray | None = None) -> FunctionEventAvg:
    """Sums over all events (like PyTorch's ``EventList.total_average()``; key "Total")."""
    a = data.analysis
    idx = np.arange(data.n_events) if indices is None else np.asarray(indices, dtype=np.int64)
    c = len(idx)
    cpu = int(a.cpu_total_ns[idx].sum())
    cuda = int(a.cuda_total_ns[idx].sum())
    return FunctionEventAvg(
        "Total", count=c, cpu_time_total=cpu / 1e3, self_cpu_time_total=int(a.self_cpu_ns[idx].sum()) / 1e3,
        cuda_time_total=cuda / 1e3, self_cuda_time_total=int(a.self_cuda_ns[idx].sum()) / 1e3,
        cpu_time=cpu / 1e3 / c if c else 0.0, cuda_time=cuda / 1e3 / c if c else 0.0,
        cpu_memory_usage=int(a.cpu_memory[idx].sum()), self_cpu_memory_usage=int(a.self_cpu_memory[idx].sum()),
        cuda_memory_usage=int(a.cuda_memory[idx].sum()),
        self_cuda_memory_usage=int(a.self_cuda_memory[idx].sum()), flops=int(a.flops[idx].sum()))


# --------------------------------------------------------------------------- table


def _sorted_rows(rows, sort_by):
    if sort_by is None:
        return list(rows)
    if sort_by not in SORT_KEYS:
        raise ValueError(f"sort_by={sort_by!r} is not one of: {', '.join(sorted(SORT_KEYS))}")
    attr = SORT_KEYS[sort_by]
    return sorted(rows, key=lambda r: getattr(r, attr), reverse=True)


def _footer(data: "ProfileData", self_cpu_ns: int, self_cuda_ns: int, has_cuda: bool, time_unit):
    lines = [f"Self CPU time total: {format_time_ns(self_cpu_ns, time_unit)}"]
    if has_cuda:
        lines.append(f"Self CUDA time total: {format_time_ns(self_cuda_ns, time_unit)}")
    a = data.analysis
    if len(a.partial_overlaps):
        lines.append(f"Partially overlapping ranges (not nested): {len(a.partial_overlaps)} "
                     f"pair(s), see analysis.partial_overlaps")
    if a.cpu_clock_skew or a.cuda_clock_skew:
        lines.append(f"Negative self times clamped to 0 (clock skew): "
                     f"CPU {a.cpu_clock_skew}, CUDA {a.cuda_clock_skew}")
    return lines


def build_table(data: "ProfileData", rows, self_cpu_ns: int, self_cuda_ns: int, sort_by, row_limit,
                max_name_column_width, header, time_unit, shapes: bool, stack_n: int) -> str:
    """PyTorch's column set and order for averaged rows or single events."""
    rows = _sorted_rows(rows, sort_by)
    if row_limit is not None and row_limit > 0:
        rows = rows[:row_limit]
    has_cuda = data.has_device_time
    profile_memory = bool(data.metadata.get("profile_memory"))
    has_cuda_mem = profile_memory and (has_cuda or data.has_cuda_memory)
    to_ns = 1e3  # rows hold microseconds

    def times(attr):
        return [format_time_ns(getattr(r, attr) * to_ns, time_unit) for r in rows]

    def percents(attr, whole_ns):
        return [format_percent(getattr(r, attr) * to_ns, whole_ns) for r in rows]

    name_width = max(4, min(max_name_column_width, max((len(r.key) for r in rows), default=0)))
    cols = [Column("Name", [truncate(r.key, max_name_column_width) for r in rows], min_width=name_width),
            Column("Self CPU %", percents("self_cpu_time_total", self_cpu_ns)),
            Column("Self CPU", times("self_cpu_time_total")),
            Column("CPU total %", percents("cpu_time_total", self_cpu_ns)),
            Column("CPU total", times("cpu_time_total")),
            Column("CPU time avg", times("cpu_time"))]
    if has_cuda:
        cols += [Column("Self CUDA", times("self_cuda_time_total")),
                 Column("Self CUDA %", percents("self_cuda_time_total", self_cuda_ns)),
                 Column("CUDA total", times("cuda_time_total")),
                 Column("CUDA time avg", times("cuda_time"))]
    if profile_memory:
        cols += [Column("CPU Mem", [format_memory(r.cpu_memory_usage) for r in rows]),
                 Column("Self CPU Mem", [format_memory(r.self_cpu_memory_usage) for r in rows])]
        if has_cuda_mem:
            cols += [Column("CUDA Mem", [format_memory(r.cuda_memory_usage) for r in rows]),
                     Column("Self CUDA Mem", [format_memory(r.self_cuda_memory_usage) for r in rows])]
    cols.append(Column("# of Calls", [str(r.count) for r in rows]))
    if shapes:
        cols.append(Column("Input Shapes", [truncate(str(r.input_shapes) if r.input_shapes is not None
                                                     else "[]", 80) for r in rows]))
    if stack_n > 0:
        cols.append(Column("Source Location", ["\n".join(r.stack) for r in rows]))
    if data.metadata.get("with_flops"):
        flops_header, flops_cells = format_flops_column([r.flops for r in rows])
        cols.append(Column(flops_header, flops_cells))
    return render(cols, header=header, footer=_footer(data, self_cpu_ns, self_cuda_ns, has_cuda, time_unit))


# --------------------------------------------------------------------------- forward + backward


class ForwardBackwardRow:
    """Cost of one forward op (name, and call site when stacks were recorded) including the
    backward nodes its calls created. Times in microseconds."""

    __slots__ = ("name", "call_site", "count", "backward_count", "backward_names",
                 "self_cpu_time_total", "cpu_time_total", "self_cuda_time_total", "cuda_time_total",
                 "backward_self_cpu_time_total", "backward_cpu_time_total",
                 "backward_self_cuda_time_total", "backward_cuda_time_total")

    def __init__(self, **values):
        for name, value in values.items():
            setattr(self, name, value)

    @property
    def total_cpu_time(self) -> float:
        """Forward CPU total + backward CPU total (us)."""
        return self.cpu_time_total + self.backward_cpu_time_total

    @property
    def total_cuda_time(self) -> float:
        return self.cuda_time_total + self.backward_cuda_time_total

    def to_dict(self) -> dict:
        d = {name: getattr(self, name) for name in self.__slots__}
        d["total_cpu_time"] = self.total_cpu_time
        d["total_cuda_time"] = self.total_cuda_time
        return d

    def __repr__(self):
        return (f"<ForwardBackwardRow {self.name!r} calls={self.count} "
                f"total_cpu_time={self.total_cpu_time:.3f}us>")


class ForwardBackwardSummary(list):
    """``list`` of :class:`ForwardBackwardRow`, sorted by forward+backward CPU time."""

    def __init__(self, rows, data):
        super().__init__(rows)
        self._data = data

    def table(self, row_limit: int = 100, max_name_column_width: int = 55,
              time_unit: str | None = None, header: str | None = None) -> str:
        rows = list(self)[:row_limit] if row_limit and row_limit > 0 else list(self)
        has_cuda = self._data.has_device_time
        with_sites = any(r.call_site for r in rows)

        def times(attr):
            return [format_time_ns(getattr(r, attr) * 1e3, time_unit) for r in rows]

        name_width = max(4, min(max_name_column_width, max((len(r.name) for r in rows), default=0)))
        cols = [Column("Name", [truncate(r.name, max_name_column_width) for r in rows], min_width=name_width)]
        if with_sites:
            cols.append(Column("Call Site", [r.call_site or "" for r in rows]))
        cols += [Column("# of Calls", [str(r.count) for r in rows]),
                 Column("Fwd Self CPU", times("self_cpu_time_total")),
                 Column("Fwd CPU total", times("cpu_time_total")),
                 Column("Bwd Self CPU", times("backward_self_cpu_time_total")),
                 Column("Bwd CPU total", times("backward_cpu_time_total")),
                 Column("Fwd+Bwd CPU", times("total_cpu_time"))]
        if has_cuda:
            cols += [Column("Fwd Self CUDA", times("self_cuda_time_total")),
                     Column("Fwd CUDA total", times("cuda_time_total")),
                     Column("Bwd Self CUDA", times("backward_self_cuda_time_total")),
                     Column("Bwd CUDA total", times("backward_cuda_time_total")),
                     Column("Fwd+Bwd CUDA", times("total_cuda_time"))]
        cols += [Column("# Bwd Calls", [str(r.backward_count) for r in rows]),
                 Column("Backward Nodes", [", ".join(r.backward_names) for r in rows])]
        return render(cols, header=header)

    def to_dicts(self) -> list[dict]:
        return [row.to_dict() for row in self]


def forward_backward_summary(data: "ProfileData") -> ForwardBackwardSummary:
    """One row per forward op name (and call site): its forward cost, the cost of the backward
    nodes its calls created (directly or through the ops inside it), and the sum. Ops run
    inside backward nodes are not forward ops."""
    a = data.analysis
    cols = data.event_columns
    fwd = np.flatnonzero((cols["scope"] == Scope.FUNCTION) & (a.backward_ancestor < 0))
    if len(fwd) == 0:
        return ForwardBackwardSummary([], data)
    key = cols["name_id"][fwd].astype(np.int64)
    sites: list = []
    site_id = None
    if (a.stack_id[fwd] >= 0).any():
        site_id, sites = _stack_prefix_ids(data, a.stack_id[fwd], 1)
        key = _combine(key, site_id)
    _, first, group = np.unique(key, return_index=True, return_inverse=True)
    group = group.reshape(-1)
    n_groups = len(first)
    group_of_event = np.full(data.n_events, -1, dtype=np.int64)
    group_of_event[fwd] = group

    # A backward node counts for the forward op that created it and for every forward op
    # enclosing that one (a composite such as "mean" is charged for the nodes of its parts).
    linked = np.flatnonzero(a.forward_event >= 0)
    pairs_b, pairs_g = [], []
    owner = a.forward_event[linked]
    while len(linked):
        g = group_of_event[owner]
        pairs_b.append(linked[g >= 0])
        pairs_g.append(g[g >= 0])
        owner = a.parent[owner]
        linked, owner = linked[owner >= 0], owner[owner >= 0]
    bwd = np.concatenate(pairs_b) if pairs_b else np.zeros(0, np.int64)
    bwd_group = np.concatenate(pairs_g) if pairs_g else np.zeros(0, np.int64)

    def fsum(arr):
        return _group_sums(group, n_groups, arr[fwd])

    def bsum(arr):
        return _group_sums(bwd_group, n_groups, arr[bwd])

    f_self_cpu, f_cpu = fsum(a.self_cpu_ns), fsum(a.cpu_total_ns)
    f_self_cuda, f_cuda = fsum(a.self_cuda_ns), fsum(a.cuda_total_ns)
    b_self_cpu, b_cpu = bsum(a.self_cpu_ns), bsum(a.cpu_total_ns)
    b_self_cuda, b_cuda = bsum(a.self_cuda_ns), bsum(a.cuda_total_ns)
    f_count = np.bincount(group, minlength=n_groups)
    b_count = np.bincount(bwd_group, minlength=n_groups)
    names_by_group: list[set] = [set() for _ in range(n_groups)]
    for g, nid in set(zip(bwd_group.tolist(), cols["name_id"][bwd].tolist())):
        names_by_group[g].add(data.strings[nid])

    rows = []
    for g in range(n_groups):
        ev = int(fwd[first[g]])
        rows.append(ForwardBackwardRow(
            name=data.strings[int(cols["name_id"][ev])],
            call_site=(sites[int(site_id[first[g]])] or [None])[0] if site_id is not None else None,
            count=int(f_count[g]), backward_count=int(b_count[g]),
            backward_names=sorted(names_by_group[g]),
            self_cpu_time_total=f_self_cpu[g] / 1e3, cpu_time_total=f_cpu[g] / 1e3,
            self_cuda_time_total=f_self_cuda[g] / 1e3, cuda_time_total=f_cuda[g] / 1e3,
            backward_self_cpu_time_total=b_self_cpu[g] / 1e3, backward_cpu_time_total=b_cpu[g] / 1e3,
            backward_self_cuda_time_total=b_self_cuda[g] / 1e3, backward_cuda_time_total=b_cuda[g] / 1e3,
        ))
    rows.sort(key=lambda r: r.total_cpu_time, reverse=True)
    return ForwardBackwardSummary(rows, data)

