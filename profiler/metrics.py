"""The per-op metrics: one :class:`Metric` entry each, and everything generated from them.

A metric is a number per event that rows of ``key_averages()`` aggregate: CPU and CUDA time,
memory, FLOPs, the call count, and the shares of the table's total time. Its entry says, once,
what each reader needs to know about it:

* ``FunctionEvent`` and ``FunctionEventAvg`` get an attribute of its name (PyTorch's field
  name), ``to_dict()`` and ``--json`` a key;
* ``key_averages()`` and ``total_average()`` aggregate its per-event source (sum, max, mean);
* the operator table (Python, CLI, dashboard grid) gets a column with PyTorch's header, in
  the order of :data:`METRICS`, shown when the profile has what the metric ``needs``;
* ``sort_by``/``--sort`` accept its name (and the newer "device" spelling of a CUDA metric);
  the CLI refuses to sort by one the profile has no data for, naming the option that records it;
* a narrow terminal leaves its column out in the order of ``drop``;
* metrics with ``forward_backward`` get backward and forward+backward columns in
  ``forward_backward_summary()``;
* a version-5 profile file stores the rows' values under these names.

Adding a metric is one entry here (and its per-event array in :mod:`profiler.analysis` when
it is a new quantity); ``tests/profiler/test_metrics.py`` shows that nothing else changes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

__all__ = ["Metric", "Need", "METRICS", "NEEDS", "FIELD_ORDER_V5", "metric", "row_metric", "row_metrics",
           "row_fields", "event_fields", "sort_keys", "forward_backward_metrics", "forward_backward_fields",
           "forward_backward_row_fields", "percent_totals", "event_value", "group_reduce", "aggregate_values",
           "total_values"]

AGGREGATES = ("sum", "max", "mean", "count", "share")
CLOCKS = ("cpu", "cuda", None)


@dataclass(frozen=True)
class Metric:
    """One per-op metric.

    Attributes:
        name: the row attribute, PyTorch's ``FunctionEventAvg`` field (``self_cpu_time_total``);
            a share is named after the field it is a share of plus ``_percent``.
        header: PyTorch's ``table()`` header ("Self CPU", "# of Calls").
        kind: how a value reads: "time" (microseconds; the source is in nanoseconds), "bytes",
            "count", "flops" or "percent".
        clock: which side of the machine it measures, "cpu" or "cuda" (the dashboard's CPU/CUDA
            switch shows one or both), or None (a count, FLOPs).
        needs: what a profile must hold for its column to show and for sorting by it (a key
            of :data:`NEEDS`, or "" for always).
        source: the :class:`~profiler.analysis.EventAnalysis` array of its per-event values.
        aggregate: how a row combines its events: "sum", "max", "mean" (per call), "count"
            (the events themselves), "share" (a percentage column, no row field: ``of``'s
            value as a share of the Σ of ``whole`` over the events averaged).
        of, whole: for a share, the field it shows and the metric whose Σ over the events
            averaged is the 100% (self CPU or self CUDA time: the sums a table keeps).
        sortable: ``sort_by``/``--sort`` accept it.
        drop: narrow terminals leave the column out in ascending ``drop`` (None: never).
        secondary: may be left out to keep every header on one line (torch's headers greppable).
        inclusive: the value of an event includes its children's (CPU total), so nested ops'
            rows overlap; an exclusive one (self time) counts each nanosecond once.
        forward_backward: ``forward_backward_summary()`` rows carry it for the forward op,
            ``backward_<name>`` for its backward nodes and ``forward_backward_<name>``.
    """

    name: str
    header: str
    kind: str
    clock: str | None = None
    needs: str = ""
    source: str | None = None
    aggregate: str = "sum"
    of: str | None = None
    whole: str | None = None
    sortable: bool = True
    drop: int | None = None
    secondary: bool = False
    inclusive: bool = False
    forward_backward: bool = False

    def __post_init__(self):
        if self.aggregate not in AGGREGATES or self.clock not in CLOCKS:
            raise ValueError(f"metric {self.name!r}: aggregate {self.aggregate!r} / clock {self.clock!r}")
        if (self.aggregate == "share") != (self.kind == "percent"):
            raise ValueError(f"metric {self.name!r}: a share is the only percent")

    @property
    def aliases(self) -> tuple[str, ...]:
        """Other ``sort_by`` spellings: newer PyTorch says "device" where older says "cuda"."""
        return (self.name.replace("cuda", "device"),) if self.clock == "cuda" else ()


@dataclass(frozen=True)
class Need:
    """What a profile must hold for some metrics, and how to record it.

    Attributes:
        name: the key metrics name in ``needs``.
        what: the data, as a message says it ("FLOP estimates").
        how: how to record it, with the CLI flag and the ``profiler.profile`` argument.
        met: ``met(data)`` is true when a ProfileData holds the data.
        requires: a need checked first (GPU memory is memory).
    """

    name: str
    what: str
    how: str
    met: Callable[[object], bool]
    requires: str | None = None


NEEDS: dict[str, Need] = {n.name: n for n in (
    Need("cuda", "GPU (CUDA) times", "on a GPU with the cuda activity (the default when a GPU is usable; "
         "profiler.profile(activities=['cpu', 'cuda']))", lambda d: bool(d.has_device_time)),
    Need("memory", "memory records", "with --memory (profiler.profile(profile_memory=True))",
         lambda d: bool(d.n_memory_records)),
    Need("cuda_memory", "GPU memory records", "on a GPU with --memory (profiler.profile(profile_memory=True))",
         lambda d: bool(d.has_cuda_memory), requires="memory"),
    Need("flops", "FLOP estimates", "with --with-flops (profiler.profile(with_flops=True))",
         lambda d: bool(d.metadata.get("with_flops") or d.analysis.flops.any())),
)}


def _time(name, header, clock, source, **kw) -> Metric:
    return Metric(name, header, "time", clock, "cuda" if clock == "cuda" else "", source, **kw)


def _share(of, header, whole, clock, **kw) -> Metric:
    return Metric(of + "_percent", header, "percent", clock, "cuda" if clock == "cuda" else "",
                  aggregate="share", of=of, whole=whole, sortable=False, **kw)


def _memory(name, header, clock, source, **kw) -> Metric:
    return Metric(name, header, "bytes", clock, "cuda_memory" if clock == "cuda" else "memory", source, **kw)


# In PyTorch's table() order (the column order of the operator table).
METRICS: tuple[Metric, ...] = (
    _share("self_cpu_time_total", "Self CPU %", "self_cpu_time_total", "cpu"),
    _time("self_cpu_time_total", "Self CPU", "cpu", "self_cpu_ns", drop=14, forward_backward=True),
    _share("cpu_time_total", "CPU total %", "self_cpu_time_total", "cpu", drop=5, secondary=True),
    _time("cpu_time_total", "CPU total", "cpu", "cpu_total_ns", drop=13, inclusive=True, forward_backward=True),
    _time("cpu_time", "CPU time avg", "cpu", "cpu_total_ns", aggregate="mean", drop=2, secondary=True,
          inclusive=True),
    _time("self_cuda_time_total", "Self CUDA", "cuda", "self_cuda_ns", drop=12, forward_backward=True),
    _share("self_cuda_time_total", "Self CUDA %", "self_cuda_time_total", "cuda"),
    _time("cuda_time_total", "CUDA total", "cuda", "cuda_total_ns", drop=11, inclusive=True,
          forward_backward=True),
    _time("cuda_time", "CUDA time avg", "cuda", "cuda_total_ns", aggregate="mean", drop=1, secondary=True,
          inclusive=True),
    _memory("cpu_memory_usage", "CPU Mem", "cpu", "cpu_memory", drop=4, secondary=True, inclusive=True),
    _memory("self_cpu_memory_usage", "Self CPU Mem", "cpu", "self_cpu_memory", drop=7, secondary=True),
    _memory("cuda_memory_usage", "CUDA Mem", "cuda", "cuda_memory", drop=3, secondary=True, inclusive=True),
    _memory("self_cuda_memory_usage", "Self CUDA Mem", "cuda", "self_cuda_memory", drop=6, secondary=True),
    Metric("count", "# of Calls", "count", aggregate="count"),
    Metric("flops", "Total FLOPs", "flops", needs="flops", source="flops"),
)


# The order of the row fields in dicts (``to_dict()``, ``--json``) and in version-5 files, as it
# was before this registry; metrics added later follow it in the order of METRICS. Never edit:
# files written with this order must keep loading.
FIELD_ORDER_V5 = ("count", "cpu_time_total", "self_cpu_time_total", "cuda_time_total", "self_cuda_time_total",
                  "cpu_time", "cuda_time", "cpu_memory_usage", "self_cpu_memory_usage", "cuda_memory_usage",
                  "self_cuda_memory_usage", "flops")


@dataclass(frozen=True)
class _Derived:
    by_name: dict
    row_metrics: tuple
    row_fields: tuple
    sort_keys: dict
    forward_backward_fields: tuple


_cache: list = [None, None]


def _derived() -> _Derived:
    """What the readers need, computed from :data:`METRICS` once (again when the tuple is
    replaced: a test adds a metric by assigning a longer one)."""
    if _cache[0] is not METRICS:
        _cache[1] = _derive(METRICS)
        _cache[0] = METRICS
    return _cache[1]


def _derive(entries: tuple) -> _Derived:
    by_name = {m.name: m for m in entries}
    if len(by_name) != len(entries):
        raise ValueError("two metrics share a name")
    position = {name: k for k, name in enumerate(FIELD_ORDER_V5)}
    rows = sorted((m for m in entries if m.aggregate != "share"),
                  key=lambda m: position.get(m.name, len(position) + entries.index(m)))
    keys: dict[str, str] = {}
    for m in entries:
        if m.sortable:
            keys[m.name] = m.name
            keys.update(dict.fromkeys(m.aliases, m.name))
    fb = []
    for clock in ("cpu", "cuda"):
        own = [m.name for m in entries if m.forward_backward and m.clock == clock]
        fb += own + ["backward_" + f for f in own] + ["forward_backward_" + f for f in own]
    return _Derived(by_name, tuple(rows), tuple(m.name for m in rows), keys, tuple(fb))


def metric(name: str) -> Metric:
    """The metric of a row field or share column (KeyError: none)."""
    return _derived().by_name[name]


def row_metric(name: str) -> Metric | None:
    """The metric of a row field (None: not one; a share is a column, not a field)."""
    m = _derived().by_name.get(name)
    return m if m is not None and m.aggregate != "share" else None


def row_metrics() -> tuple[Metric, ...]:
    """The metrics that are row fields (all but the shares), in dict and file order."""
    return _derived().row_metrics


def row_fields() -> tuple[str, ...]:
    """The fields a ``key_averages()`` row holds a value of, in dict and file order."""
    return _derived().row_fields


def event_fields() -> tuple[str, ...]:
    """The fields one event's ``to_dict()`` holds (a count and a per-call mean are the
    event's own value; they are left out as PyTorch's ``FunctionEvent`` has none)."""
    return tuple(m.name for m in row_metrics() if m.aggregate in ("sum", "max"))


def sort_keys() -> dict[str, str]:
    """``sort_by``/``--sort`` spelling -> the row field it orders by."""
    return _derived().sort_keys


def forward_backward_metrics() -> tuple[Metric, ...]:
    """The metrics a ``forward_backward_summary()`` row carries for the forward op, its
    backward nodes and their sum."""
    return tuple(m for m in METRICS if m.forward_backward)


def forward_backward_row_fields() -> tuple[str, ...]:
    """The same fields, the forward op's first, then its backward nodes', then the sums
    (the order of a row's ``to_dict()`` and of a version-5 file)."""
    own = [m.name for m in forward_backward_metrics()]
    return (*own, *("backward_" + f for f in own), *("forward_backward_" + f for f in own))


def forward_backward_fields() -> tuple[str, ...]:
    """The time fields of a ``forward_backward_summary()`` row, per clock: the forward op's,
    its backward nodes' and their sum (``self_cpu_time_total``, ``cpu_time_total``,
    ``backward_self_cpu_time_total``... ``forward_backward_cuda_time_total``)."""
    return _derived().forward_backward_fields


def percent_totals(self_cpu_us: float, self_cuda_us: float) -> dict[str, float]:
    """Field -> the 100% of its share column (us): the Σ of the share's ``whole`` (self CPU or
    self CUDA time) over the events averaged, so a "Self CPU %" column sums to 100."""
    wholes = {"self_cpu_time_total": self_cpu_us, "self_cuda_time_total": self_cuda_us}
    return {m.of: wholes[m.whole] for m in METRICS if m.aggregate == "share"}


def _scaled(m: Metric, v):
    """A value in the row's unit: time in microseconds (float), the rest integers."""
    return v / 1e3 if m.kind == "time" else int(v)


def event_value(m: Metric, analysis, index: int):
    """The value of ``m`` for one event (a ``FunctionEvent`` attribute)."""
    if m.aggregate == "count":
        return 1
    return _scaled(m, getattr(analysis, m.source)[index])


def group_reduce(how: str, group: np.ndarray, n_groups: int, values: np.ndarray) -> np.ndarray:
    """Σ (``how="sum"``) or max of the integer ``values`` per group, as int64."""
    if how == "max":
        out = np.full(n_groups, np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(out, group, values.astype(np.int64, copy=False))
        out[out == np.iinfo(np.int64).min] = 0      # a group without events
        return out
    if values.ndim == 1 and len(values) and values.strides[0] == 0:
        # One value repeated without memory (a version-5 file's arrays that are all zeros).
        return np.bincount(group, minlength=n_groups).astype(np.int64) * int(values[0])
    return np.rint(np.bincount(group, weights=values, minlength=n_groups)).astype(np.int64)


def aggregate_values(analysis, idx: np.ndarray | None, group: np.ndarray, n_groups: int,
                     count: np.ndarray) -> dict[str, list]:
    """Every row metric of each group of events, in the rows' units.

    Args:
        analysis: the profile's :class:`~profiler.analysis.EventAnalysis`.
        idx: the events averaged (None: all, read without a gather).
        group: the group of each of those events; count: events per group.
    Returns:
        field -> one value per group (microseconds for times, integers otherwise).
    """
    sums: dict[tuple, np.ndarray] = {}
    out = {}
    for m in row_metrics():
        if m.aggregate == "count":
            out[m.name] = [int(c) for c in count]
            continue
        how = "max" if m.aggregate == "max" else "sum"
        if (m.source, how) not in sums:
            arr = getattr(analysis, m.source)
            sums[(m.source, how)] = group_reduce(how, group, n_groups, arr if idx is None else arr[idx])
        v = sums[(m.source, how)]
        if m.aggregate == "mean":
            out[m.name] = [x / 1e3 / int(c) if m.kind == "time" else int(x) // int(c) for x, c in zip(v, count)]
        else:
            out[m.name] = [_scaled(m, x) for x in v]
    return out


def total_values(analysis, idx: np.ndarray) -> dict[str, float | int]:
    """Every row metric over the events ``idx`` together (``total_average()``)."""
    c = len(idx)
    out = {}
    for m in row_metrics():
        if m.aggregate == "count":
            out[m.name] = c
            continue
        vals = getattr(analysis, m.source)[idx]
        if m.aggregate == "max":
            out[m.name] = _scaled(m, int(vals.max())) if c else _scaled(m, 0)
        elif m.aggregate == "mean":
            s = int(vals.sum())
            out[m.name] = (s / 1e3 / c if m.kind == "time" else s // c) if c else 0.0
        else:
            out[m.name] = _scaled(m, int(vals.sum()))
    return out
