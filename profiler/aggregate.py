"""Events, per-name averages and the forward+backward summary, with their tables.

Attribute names and units follow PyTorch's ``FunctionEvent``/``FunctionEventAvg``: times are
floats in **microseconds** (``cpu_time_total``, ``self_cuda_time_total``...), memory in bytes.
Aggregation is vectorised: events are grouped with ``np.unique`` and summed with
``np.bincount``; Python objects are only made for the resulting rows. Which numbers a row
holds, and how each is aggregated, is the metric registry's (:mod:`profiler.metrics`).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from . import metrics as _metrics
from . import columns as _columns
from . import table as _table
from .columns import available, operator_columns, select
from .records import Scope

if TYPE_CHECKING:  # pragma: no cover
    from .data import ProfileData

__all__ = ["FunctionEvent", "EventList", "FunctionEventAvg", "KeyAverages",
           "ForwardBackwardRow", "ForwardBackwardSummary", "STEP_PREFIX", "sort_rows", "group_rows"]

STEP_PREFIX = "ProfilerStep#"


class FunctionEventAvg:
    """One row of :meth:`ProfileData.key_averages`: the sums over a group of events.

    Attributes (times in microseconds): key; one per metric of :mod:`profiler.metrics`
    (count, cpu_time_total, self_cpu_time_total, cuda_time_total, self_cuda_time_total,
    cpu_time and cuda_time (averages per call), cpu_memory_usage, self_cpu_memory_usage,
    cuda_memory_usage, self_cuda_memory_usage (bytes), flops); input_shapes (list of shapes or
    None), stack (list of frames), scope; module and device (the nn.Module class and the
    device, when the rows are grouped by them).
    """

    def __init__(self, key: str, **values):
        self.key = key
        for name in _metrics.row_fields():
            setattr(self, name, 0)
        self.input_shapes = None
        self.stack = []
        self.scope = None
        self.module = None
        self.device = None
        for name, value in values.items():
            setattr(self, name, value)

    @property
    def name(self) -> str:
        return self.key

    def __getattr__(self, name):
        # Newer PyTorch spells CUDA as "device" (device_time_total): the same numbers.
        field = _metrics.sort_keys().get(name)
        if field is None or field == name or name.startswith("_"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(self, field)

    def to_dict(self) -> dict:
        """Plain-dict form (times in microseconds), for data frames and JSON."""
        d = {name: getattr(self, name) for name in _metrics.row_fields()}
        d.update(input_shapes=self.input_shapes, stack=self.stack, module=self.module, device=self.device,
                 name=self.key, scope=Scope(self.scope).name if self.scope is not None else None)
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
    input_shapes = property(lambda self: self._data.input_shapes_of(int(self._data.analysis.shapes_id[self.id])))
    stack = property(lambda self: self._data.stack_of(int(self._data.analysis.stack_id[self.id])))

    def __getattr__(self, name):
        # The metrics are read through the registry (profiler.metrics), so a new one needs no
        # property here: cpu_time_total, self_cuda_memory_usage, count (1), the "device"
        # spellings; each the event's own value, in the rows' units.
        m = None if name.startswith("_") else _metrics.row_metric(_metrics.sort_keys().get(name, name))
        if m is None:
            raise AttributeError(f"'FunctionEvent' object has no attribute {name!r}")
        return _metrics.event_value(m, self._data.analysis, self.id)

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
            **{f: _metrics.event_value(_metrics.row_metric(f), a, self.id) for f in _metrics.event_fields()},
            "input_shapes": self.input_shapes, "stack": self.stack,
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
        rows = sort_rows([FunctionEvent(self._data, int(i)) for i in idx], sort_by, row_limit)
        a = self._data.analysis
        self_cpu_ns = int(a.self_cpu_ns[self._indices].sum())
        self_cuda_ns = int(a.self_cuda_ns[self._indices].sum())
        return _table.operator_table(self._data, rows, operator_columns(self._data), self_cpu_ns,
                                     self_cuda_ns, max_name_column_width, header, time_unit)

    def to_dicts(self) -> list[dict]:
        return [FunctionEvent(self._data, int(i)).to_dict() for i in self._indices]


class KeyAverages(list):
    """``list`` of :class:`FunctionEventAvg` with ``table()``, ``to_dicts()`` and the grouping.

    Attributes:
        self_cpu_time_total, self_cuda_time_total: Σ self time (us) over the events averaged,
            the 100% of the table's percentage columns.
        group_by_input_shape, group_by_stack_n, group_by_module, group_by_device: how the
            rows were keyed besides the name.
    """

    def __init__(self, rows, data, indices, group, grouping: dict, self_cpu_ns: int, self_cuda_ns: int):
        super().__init__(rows)
        self._data = data
        self._indices = indices
        self._group = group
        self._grouping = grouping
        for name, v in grouping.items():
            setattr(self, name, v)
        self._self_cpu_ns = self_cpu_ns
        self._self_cuda_ns = self_cuda_ns
        self.self_cpu_time_total = self_cpu_ns / 1e3
        self.self_cuda_time_total = self_cuda_ns / 1e3

    @property
    def totals(self) -> dict[str, float]:
        """Field -> the 100% of its percentage column (us), for :func:`profiler.columns.value`."""
        return _metrics.percent_totals(self.self_cpu_time_total, self.self_cuda_time_total)

    def columns(self, scope: bool = False) -> list:
        """The operator columns for these rows (:func:`profiler.columns.operator_columns`).

        Args:
            scope: add the RecordFunction scope column (the dashboard shows it).
        """
        g = self._grouping
        return operator_columns(self._data, shapes=g["group_by_input_shape"], stack=g["group_by_stack_n"] > 0,
                                module=g["group_by_module"], device=g["group_by_device"], scope=scope)

    def events_of(self, row: int) -> np.ndarray:
        """Indices of the events averaged into ``self[row]``, in start order."""
        return self._indices[self._group == int(row)]

    def table(self, sort_by: str | None = None, row_limit: int = 100, max_name_column_width: int = 55,
              header: str | None = None, top_level_events_only: bool = False,
              time_unit: str | None = None) -> str:
        """Render like PyTorch's ``key_averages().table()``.

        Args:
            sort_by: a key of :func:`profiler.metrics.sort_keys` (descending), or None for
                first-seen order.
            row_limit: at most this many rows (<= 0: all).
            max_name_column_width: names longer than this are cut with ``...``.
            header: a title line printed above the table.
            top_level_events_only: average only events without a parent.
            time_unit: "s", "ms" or "us" for every time cell; None picks per cell.
        Returns:
            The table text, ending with the "Self CPU time total" footer.
        """
        rows = self
        if top_level_events_only:
            top = self._indices[self._data.analysis.parent[self._indices] < 0]
            rows = key_averages(self._data, indices=top, **self._grouping)
        return _table.operator_table(self._data, sort_rows(rows, sort_by, row_limit), self.columns(),
                                     self._self_cpu_ns, self._self_cuda_ns, max_name_column_width,
                                     header, time_unit)

    def to_dicts(self) -> list[dict]:
        """Rows as plain dicts (times in microseconds) — a data-frame without pandas."""
        return [row.to_dict() for row in self]


def sort_rows(rows, sort_by: str | None, limit: int | None = None) -> list:
    """Rows sorted descending by a PyTorch sort key (None keeps their order), cut to ``limit``.

    Raises:
        ValueError: ``sort_by`` is not a key of :func:`profiler.metrics.sort_keys`.
    """
    rows = list(rows)
    if sort_by is not None:
        keys = _metrics.sort_keys()
        if sort_by not in keys:
            raise ValueError(f"sort_by={sort_by!r} is not one of: {', '.join(sorted(keys))}")
        attr = keys[sort_by]
        rows.sort(key=lambda r: getattr(r, attr), reverse=True)
    if limit is not None and limit > 0:
        rows = rows[:limit]
    return rows


# --------------------------------------------------------------------------- grouping


# Integer keys spanning at most this many values (and at most 4x the rows) are grouped with a
# table of that span instead of a sort: O(n), where np.unique sorts (10M events: ~1.5 s each).
_TABLE_SPAN = 1 << 24


def _small_span(values: np.ndarray) -> tuple[int, int] | None:
    """(min, span) of integer ``values`` when a table of ``span`` entries is cheap; else None."""
    if len(values) == 0 or values.dtype.kind not in "iu":
        return None
    lo, hi = int(values.min()), int(values.max())
    span = hi - lo + 1
    return (lo, span) if span <= min(_TABLE_SPAN, 4 * len(values) + 1024) else None


def _unique(values: np.ndarray, return_index: bool = False):
    """``np.unique(values, return_index=..., return_inverse=True)``, the same arrays, without
    a sort when the values span a small range (string ids, dense ids: the common keys)."""
    small = _small_span(values)
    if small is None:
        out = np.unique(values, return_index=return_index, return_inverse=True)
        return (out[0], out[1], out[2].reshape(-1)) if return_index else (out[0], out[1].reshape(-1))
    lo, span = small
    offset = values.astype(np.int64) - lo
    present = np.zeros(span, dtype=bool)
    present[offset] = True
    slot = np.cumsum(present) - 1                # value - lo -> its rank among the present ones
    uniq = (np.flatnonzero(present) + lo).astype(values.dtype)
    inverse = slot[offset]
    if not return_index:
        return uniq, inverse
    first = np.full(len(uniq), len(values), dtype=np.int64)
    np.minimum.at(first, inverse, np.arange(len(values)))
    return uniq, first, inverse


def _dense(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    uniq, inv = _unique(values)
    return uniq, inv.astype(np.int64)


def _combine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Dense ids of the pairs (a[i], b[i]) (no overflow: both sides are made dense first)."""
    _, a_d = _dense(a)
    ub, b_d = _dense(b)
    return a_d * max(len(ub), 1) + b_d


def group_rows(keys: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Rows grouped by integer key columns: (first row of each group, group of each row), the
    groups in the order of their keys (``np.unique(np.stack(keys), axis=1)``'s, without its
    sort of every row: each column is made dense, by a table where its values span little)."""
    if len(keys[0]) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    key = keys[0]
    for other in keys[1:]:
        key = _combine(key, other)
    _, first, group = _unique(key, return_index=True)
    return first, group


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
    return _metrics.group_reduce("sum", group, n_groups, values)


def _name_keys(data: "ProfileData", name_id: np.ndarray, merge_steps: bool) -> tuple[np.ndarray, list[str]]:
    """A key per event for its name, and the name of each key id used (strings by id)."""
    names = list(data.strings)
    if not merge_steps:
        return name_id.astype(np.int64), names
    # Every ProfilerStep#N name maps to one extra string id, "ProfilerStep#*" (a single
    # step keeps its own name).
    steps = np.array([s.startswith(STEP_PREFIX) for s in names] or [False])
    key = name_id.astype(np.int64)
    is_step = steps[key]
    if len(np.unique(key[is_step])) < 2:
        return key, names
    names.append(STEP_PREFIX + "*")
    return np.where(is_step, len(names) - 1, key), names


def key_averages(data: "ProfileData", group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                 indices: np.ndarray | None = None, group_by_module: bool = False,
                 group_by_device: bool = False, merge_steps: bool = False) -> KeyAverages:
    """Group events by name (and input shapes, top-N stack frames, nn.Module, device) and sum them.

    Args:
        group_by_input_shape, group_by_stack_n: as PyTorch's ``key_averages``.
        indices: average only these events (default: all).
        group_by_module: separate rows per nn.Module class (see :mod:`profiler.modules`).
        group_by_device: separate rows per device ("cpu", "cuda:0").
        merge_steps: one "ProfilerStep#*" row for all ``ProfilerStep#N`` ranges.
    Returns:
        Rows in order of first appearance.
    """
    a = data.analysis
    idx = np.arange(data.n_events) if indices is None else np.asarray(indices, dtype=np.int64)
    cols = data.event_columns
    name_key, names = _name_keys(data, cols["name_id"][idx], merge_steps)
    key = name_key
    if group_by_input_shape:
        key = _combine(key, a.shapes_id[idx])
    prefixes: list = []
    prefix_id = None
    if group_by_stack_n > 0:
        prefix_id, prefixes = _stack_prefix_ids(data, a.stack_id[idx], group_by_stack_n)
        key = _combine(key, prefix_id)
    module_id, module_labels = None, []
    if group_by_module:
        from .modules import module_of_events  # noqa: PLC0415 - modules imports analysis only

        module_all, module_labels = module_of_events(data)
        module_id = module_all[idx]
        key = _combine(key, module_id)
    if group_by_device:
        key = _combine(key, cols["device_id"][idx])
    _, first, group = _unique(key, return_index=True)
    n_groups = len(first)
    # Rows come in order of first appearance (events are stored in start order).
    rank = np.empty(n_groups, dtype=np.int64)
    appearance = np.argsort(first, kind="stable")
    rank[appearance] = np.arange(n_groups)
    group = rank[group]
    first = first[appearance]

    count = np.bincount(group, minlength=n_groups)
    # All events: the arrays themselves (a gather of every row would copy each one).
    values = _metrics.aggregate_values(a, None if indices is None else idx, group, n_groups, count)
    fields = list(values)
    rows = []
    for g in range(n_groups):
        ev = int(idx[first[g]])
        row = FunctionEventAvg(
            names[int(name_key[first[g]])],
            input_shapes=data.input_shapes_of(int(a.shapes_id[ev])),
            stack=prefixes[int(prefix_id[first[g]])] if prefix_id is not None else [],
            scope=int(cols["scope"][ev]),
            module=module_labels[int(module_id[first[g]])] if module_id is not None else None,
            device=data.strings[int(cols["device_id"][ev])] if group_by_device else None,
        )
        for f in fields:
            setattr(row, f, values[f][g])
        rows.append(row)
    grouping = {"group_by_input_shape": group_by_input_shape, "group_by_stack_n": group_by_stack_n,
                "group_by_module": group_by_module, "group_by_device": group_by_device,
                "merge_steps": merge_steps}
    return KeyAverages(rows, data, idx, group, grouping,
                       int(a.self_cpu_ns[idx].sum()), int(a.self_cuda_ns[idx].sum()))


def total_average(data: "ProfileData", indices: np.ndarray | None = None) -> FunctionEventAvg:
    """Sums over all events (like PyTorch's ``EventList.total_average()``; key "Total")."""
    idx = np.arange(data.n_events) if indices is None else np.asarray(indices, dtype=np.int64)
    return FunctionEventAvg("Total", **_metrics.total_values(data.analysis, idx))


# --------------------------------------------------------------------------- forward + backward


class ForwardBackwardRow:
    """Cost of one forward op (name, and call site when stacks were recorded) including the
    backward nodes its calls created. Times in microseconds.

    Attributes:
        name, call_site, count: the forward op, its innermost frame (or None), its calls.
        self_cpu_time_total, cpu_time_total, self_cuda_time_total, cuda_time_total: forward.
        backward_cpu_time_total, backward_cuda_time_total: total time of the backward nodes
            it caused, its parts' nodes included (a composite such as mean is charged for the
            SumBackward0 of its sum); backward_count, backward_names: those nodes.
        backward_self_cpu_time_total, backward_self_cuda_time_total: self time of the nodes
            the op created itself (not its parts'), so no node is counted for two rows.
        forward_backward_self_cpu_time_total (and _cuda_): self forward + self backward. Over
            all rows these add up to at most the profile's total: no time is counted twice.
        forward_backward_cpu_time_total (and _cuda_): forward total + backward total, what
            the op costs a training step with its parts; rows overlap (sum inside mean is in
            both), as CPU total does in the operator table.
    """

    def __init__(self, **values):
        for name, value in values.items():
            setattr(self, name, value)
        for field in _metrics.forward_backward_metrics():
            setattr(self, "forward_backward_" + field.name,
                    getattr(self, field.name) + getattr(self, "backward_" + field.name))

    key = property(lambda self: self.name)

    def to_dict(self) -> dict:
        fields = ("name", "call_site", "count", "backward_count", "backward_names",
                  *_metrics.forward_backward_row_fields())
        return {name: getattr(self, name) for name in fields}

    def __repr__(self):
        return (f"<ForwardBackwardRow {self.name!r} calls={self.count} "
                f"forward_backward_cpu_time_total={self.forward_backward_cpu_time_total:.3f}us>")


class ForwardBackwardSummary(list):
    """``list`` of :class:`ForwardBackwardRow`, sorted by forward+backward CPU time."""

    def __init__(self, rows, data):
        super().__init__(rows)
        self._data = data

    def columns(self) -> list:
        """The columns for these rows (:data:`profiler.columns.FORWARD_BACKWARD_COLUMNS`)."""
        return select(_columns.FORWARD_BACKWARD_COLUMNS, available(self._data, stack=any(r.call_site for r in self)))

    def table(self, row_limit: int = 100, max_name_column_width: int = 55,
              time_unit: str | None = None, header: str | None = None) -> str:
        rows = list(self)[:row_limit] if row_limit and row_limit > 0 else list(self)
        return _table.plain_table(rows, self.columns(), {}, max_name_column_width, header, time_unit)

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
    # Self backward time goes to the creating op only (the first pass), so it is never counted
    # for two rows.
    linked = np.flatnonzero(a.forward_event >= 0)
    pairs_b, pairs_g = [], []
    owner = a.forward_event[linked]
    direct_g = group_of_event[owner]
    direct_b, direct_g = linked[direct_g >= 0], direct_g[direct_g >= 0]
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

    # The forward op's own value, and its backward nodes': an inclusive metric (CPU total) of
    # every node it caused, its parts' included; an exclusive one (self time) of the nodes it
    # created itself.
    def dsum(arr):
        return _group_sums(direct_g, n_groups, arr[direct_b])

    times = {}
    for m in _metrics.forward_backward_metrics():
        arr, unit = getattr(a, m.source), 1e3 if m.kind == "time" else 1
        times[m.name] = fsum(arr) / unit
        times["backward_" + m.name] = (bsum(arr) if m.inclusive else dsum(arr)) / unit
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
            **{f: v[g] for f, v in times.items()},
        ))
    rows.sort(key=lambda r: r.forward_backward_cpu_time_total, reverse=True)
    return ForwardBackwardSummary(rows, data)

