"""The one specification of the table columns: id, header, kind, and the data each needs.

``key_averages().table()``, ``gradtrace table`` (rich and plain, and ``--json``), the
dashboard's operator grid and ``profiler.diff`` all take their columns from here, so a column
has one id and one header everywhere:

* **id** is the row attribute that holds the value — PyTorch's ``FunctionEventAvg`` field
  (``self_cpu_time_total``, ``cpu_time``, ``count``...). A percentage has no field in PyTorch;
  its id is the field it is a share of plus ``_percent`` (``self_cpu_time_total_percent``).
* **header** is PyTorch's ``table()`` header ("Self CPU %", "CPU time avg", "# of Calls"...).
* **kind** says how a value reads: time (microseconds), percent, bytes, count, flops or text.
* **needs** names what a profile must have for the column to be shown (CUDA time, memory...).

Percentages are of the table's 100%: Σ self CPU (or CUDA) time over the events averaged,
``KeyAverages.self_cpu_time_total``, so a ``Self CPU %`` column sums to 100.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import metrics as _metrics

from .format import (format_bytes, format_flops_column, format_interval, format_p_value, format_percent,
                     format_ratio, format_time)

if TYPE_CHECKING:  # pragma: no cover
    from .data import ProfileData

__all__ = ["ColumnSpec", "COLUMNS", "OPERATOR_COLUMNS", "FORWARD_BACKWARD_COLUMNS", "MODULE_COLUMNS",
           "MODULE_TREE_COLUMNS", "MEMORY_BY_OP_COLUMNS", "STAT_COLUMNS", "STAT_OP_COLUMNS", "MEMORY_KIND_COLUMNS",
           "KINDS", "operator_columns", "value", "row_values", "cells", "drop_order", "one_line_drops"]

KINDS = ("text", "time", "percent", "bytes", "count", "flops", "ratio", "interval", "p_value")
PERCENT_SUFFIX = "_percent"


@dataclass(frozen=True)
class ColumnSpec:
    """One column.

    Attributes:
        id: the row attribute (a PyTorch field name), or ``<field>_percent`` for a share.
        header: PyTorch's header text.
        kind: one of :data:`KINDS`.
        needs: what the profile must hold for the column to show: "" (always), "cuda",
            "memory", "memory_kinds", "cuda_memory", "shapes", "stack", "flops", "module",
            "device", "scope".
        clock: "cpu" or "cuda" for a column of one side of the machine, None otherwise.
        drop: a narrow terminal leaves the column out in ascending ``drop`` (None: never).
        secondary: may be left out so that every header fits on one line.
    """

    id: str
    header: str
    kind: str
    needs: str = ""
    clock: str | None = None
    drop: int | None = None
    secondary: bool = False

    @property
    def field(self) -> str:
        """The row attribute read for this column (a percentage reads the time it is a share of)."""
        return self.id[:-len(PERCENT_SUFFIX)] if self.kind == "percent" else self.id


def _spec(*args, **kwargs) -> ColumnSpec:
    return ColumnSpec(*args, **kwargs)


def _metric_spec(m: "_metrics.Metric") -> ColumnSpec:
    return ColumnSpec(m.name, m.header, m.kind, m.needs, m.clock, m.drop, m.secondary)


_CPU, _CUDA = {"clock": "cpu"}, {"clock": "cuda"}
# Every column that is not a per-op metric's (those come from profiler.metrics).
_OTHER_COLUMNS: tuple[ColumnSpec, ...] = (
    # key_averages() rows: the keys, before the metrics.
    _spec("name", "Name", "text"),
    _spec("device", "Device", "text", "device"),
    _spec("module", "Module", "text", "module"),
    _spec("scope", "Scope", "text", "scope"),
    _spec("input_shapes", "Input Shapes", "text", "shapes"),
    _spec("stack", "Source Location", "text", "stack"),
    # forward_backward_summary() rows: a forward op and the backward nodes it caused (their
    # time columns are made from the metrics with ``forward_backward``).
    _spec("call_site", "Call Site", "text", "stack"),
    _spec("backward_count", "# Bwd Calls", "count", drop=8, secondary=True),
    _spec("backward_names", "Backward Nodes", "text"),
    # module_summary() rows: self time split by the phase it ran in.
    _spec("forward_self_cpu_time_total", "Fwd Self CPU", "time", **_CPU),
    # module_tree() nodes: forward and backward time of a module, self and with its children.
    _spec("forward_cpu_time_total", "Fwd CPU total", "time", **_CPU),
    _spec("forward_backward_cpu_time_total_percent", "Fwd+Bwd CPU %", "percent", **_CPU),
    _spec("forward_self_cuda_time_total", "Fwd Self CUDA", "time", "cuda", **_CUDA),
    _spec("forward_cuda_time_total", "Fwd CUDA total", "time", "cuda", **_CUDA),
    # profiler.memory rows: bytes allocated inside an op or module, split by kind (torch's
    # memory-profiler categories), and per kind on a device: allocated, freed, at the peak.
    _spec("allocated", "Allocated", "bytes", "memory"),
    _spec("freed", "Freed", "bytes", "memory", drop=21),
    _spec("net", "Net", "bytes", "memory", drop=17),
    _spec("allocations", "# of Allocations", "count", "memory", drop=15, secondary=True),
    _spec("parameter", "Parameter", "bytes", "memory_kinds"),
    _spec("optimizer_state", "Optimizer state", "bytes", "memory_kinds"),
    _spec("gradient", "Gradient", "bytes", "memory_kinds"),
    _spec("activation", "Activation", "bytes", "memory_kinds"),
    _spec("input", "Input", "bytes", "memory_kinds", drop=19, secondary=True),
    _spec("autograd_detail", "Autograd detail", "bytes", "memory_kinds", drop=20, secondary=True),
    _spec("temporary", "Temporary", "bytes", "memory_kinds"),
    _spec("unknown", "Unknown", "bytes", "memory_kinds", drop=18, secondary=True),
    _spec("memory_device", "Device", "text", "memory"),
    _spec("kind", "Kind", "text", "memory_kinds"),
    _spec("at_peak", "At peak", "bytes", "memory_kinds"),
    _spec("max_live", "Max live", "bytes", "memory_kinds", drop=16, secondary=True),
    # profiler.stats rows (the statistical diff): per-step medians in A and B, the ratio of
    # medians with its bootstrap interval, the Benjamini-Hochberg adjusted p-value, the verdict.
    _spec("median_a", "Median/step A", "time"),
    _spec("median_b", "Median/step B", "time"),
    _spec("share_percent", "Share of step", "percent"),
    _spec("ratio", "Ratio B/A", "ratio"),
    _spec("ci", "95% CI", "interval"),
    _spec("q_value", "p (BH)", "p_value"),
    _spec("verdict", "Verdict", "text"),
)
# The backward columns of a forward+backward table that narrow terminals leave out before the
# main times (the per-call averages and memory go first; see each metric's ``drop``).
_BACKWARD_DROP = {"backward_self_cpu_time_total": 9, "backward_self_cuda_time_total": 10}


def _forward_backward_specs() -> list[ColumnSpec]:
    """The backward and forward+backward time columns: "Bwd " and "Fwd+Bwd " before the
    forward metric's header, on its clock."""
    out = []
    for field in _metrics.forward_backward_fields():
        for prefix, title in (("forward_backward_", "Fwd+Bwd "), ("backward_", "Bwd ")):
            if field.startswith(prefix):
                m = _metrics.metric(field[len(prefix):])
                out.append(ColumnSpec(field, title + m.header, m.kind, m.needs, m.clock,
                                      _BACKWARD_DROP.get(field)))
                break
    return out


_cache: list = [None, None]


def _tables() -> tuple[dict, tuple, tuple]:
    """(every column by id, the operator table's ids, the forward+backward table's ids), made
    from the metrics once (again when the metric registry is replaced)."""
    if _cache[0] is not _metrics.METRICS:
        entries = _metrics.METRICS
        specs = {c.id: c for c in _OTHER_COLUMNS}
        specs.update((m.name, _metric_spec(m)) for m in entries)
        specs.update((c.id, c) for c in _forward_backward_specs())
        # PyTorch's table() order: the keys, the metrics, the grouping's text columns after
        # "# of Calls", then the rest (Total FLOPs last).
        operator = ["name", "device", "module", "scope"]
        for m in entries:
            operator.append(m.name)
            if m.name == "count":
                operator += ["input_shapes", "stack"]
        forward_backward = ["name", "call_site", "count", *_metrics.forward_backward_fields(), "backward_count",
                            "backward_names"]
        _cache[1] = (specs, tuple(operator), tuple(forward_backward))
        _cache[0] = entries
    return _cache[1]


def __getattr__(name: str):
    # COLUMNS and the metric tables follow profiler.metrics.METRICS (see _tables).
    if name == "COLUMNS":
        return _tables()[0]
    if name == "OPERATOR_COLUMNS":
        return _tables()[1]
    if name == "FORWARD_BACKWARD_COLUMNS":
        return _tables()[2]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def drop_order() -> tuple[str, ...]:
    """Column ids in the order a narrow terminal leaves them out."""
    specs = [c for c in _tables()[0].values() if c.drop is not None]
    return tuple(c.id for c in sorted(specs, key=lambda c: c.drop))


def one_line_drops() -> frozenset[str]:
    """Column ids that may be left out so that every header fits on one line."""
    return frozenset(c.id for c in _tables()[0].values() if c.secondary)


# Memory by op (or module): totals, then one column per kind (those that occur are shown).
MEMORY_BY_OP_COLUMNS = ("name", "allocated", "freed", "net", "allocations", "parameter", "optimizer_state",
                  "gradient", "activation", "input", "autograd_detail", "temporary", "unknown")
# Memory by kind, per device: what each kind allocated and freed, held at the peak, at most.
MEMORY_KIND_COLUMNS = ("memory_device", "kind", "allocated", "freed", "at_peak", "max_live")
MODULE_COLUMNS = ("module", "self_cpu_time_total_percent", "self_cpu_time_total", "cpu_time_total",
                  "forward_self_cpu_time_total", "backward_self_cpu_time_total",
                  "self_cuda_time_total", "cuda_time_total", "count")
# The statistical diff's rows: step, phases, modules, kernels (``gradtrace diff``, Compare page).
STAT_COLUMNS = ("kind", "name", "median_a", "median_b", "share_percent", "ratio", "ci", "q_value", "verdict")
# What an op row of the diff shows besides its times (the p-values are in --json and the
# step/phase table).
STAT_OP_COLUMNS = ("ratio", "ci", "verdict")
# The module tree (``gradtrace table --group-by module``, the dashboard's Modules page); the
# percentage is of the profile's Σ self CPU time.
MODULE_TREE_COLUMNS = ("module", "forward_self_cpu_time_total", "forward_cpu_time_total",
                       "backward_self_cpu_time_total", "backward_cpu_time_total",
                       "forward_backward_cpu_time_total", "forward_backward_cpu_time_total_percent",
                       "forward_self_cuda_time_total", "forward_cuda_time_total",
                       "backward_self_cuda_time_total", "backward_cuda_time_total",
                       "forward_backward_cuda_time_total", "count")


def available(data: "ProfileData", *, shapes: bool = False, stack: bool = False, module: bool = False,
              device: bool = False, scope: bool = False) -> set[str]:
    """What a profile (and a grouping) can show: the ``needs`` values that are met.

    Args:
        data: the profile.
        shapes, stack, module, device: the rows are grouped by input shapes / call stack /
            nn.Module / device, so they carry that key (PyTorch shows Input Shapes and Source
            Location only when grouped by them).
        scope: show the RecordFunction scope (the dashboard does).
    """
    have = {""}
    has_cuda = data.has_device_time
    if has_cuda:
        have.add("cuda")
    if data.metadata.get("profile_memory"):
        have.add("memory")
        if data.metadata.get("memory_categories"):
            have.add("memory_kinds")
        if has_cuda or data.has_cuda_memory:
            have.add("cuda_memory")
    if data.metadata.get("with_flops"):
        have.add("flops")
    for flag, name in ((shapes, "shapes"), (stack, "stack"), (module, "module"), (device, "device"),
                       (scope, "scope")):
        if flag:
            have.add(name)
    return have


def select(ids, have: set[str]) -> list[ColumnSpec]:
    """The columns of ``ids`` whose needs are in ``have``, in the order of ``ids``."""
    specs = _tables()[0]
    return [specs[i] for i in ids if specs[i].needs in have]


def operator_columns(data: "ProfileData", *, shapes: bool = False, stack: bool = False,
                     module: bool = False, device: bool = False, scope: bool = False) -> list[ColumnSpec]:
    """The operator-table columns for a profile and a grouping (PyTorch's set and order).

    Returns:
        ColumnSpecs, from "Name" to "Total FLOPs".
    """
    return select(_tables()[1], available(data, shapes=shapes, stack=stack, module=module,
                                              device=device, scope=scope))


def value(row, spec: ColumnSpec, totals: dict[str, float]):
    """The raw value of one cell: microseconds, a percentage (0-100), bytes, a count or text.

    Args:
        row: a row object (``FunctionEventAvg``, ``ForwardBackwardRow``, ``ModuleRow``).
        totals: field -> the 100% of its percentage column (microseconds).
    """
    v = getattr(row, spec.field)
    if spec.kind == "percent":
        whole = totals.get(spec.field, 0.0)
        return 100.0 * v / whole if whole else 0.0
    return v


def row_values(row, columns: list[ColumnSpec], totals: dict[str, float]) -> dict:
    """One row as a dict ``column id -> raw value`` (what ``--json`` and the grid carry)."""
    return {c.id: value(row, c, totals) for c in columns}


def _text(spec: ColumnSpec, v) -> str:
    if spec.id == "input_shapes":
        return str(v) if v is not None else "[]"
    if spec.id == "stack":
        return "\n".join(v)
    if spec.id == "backward_names":
        return ", ".join(v)
    return "" if v is None else str(v)


def cells(spec: ColumnSpec, rows, totals: dict[str, float], time_unit: str | None = None,
          suffix: bool = True) -> tuple[str, list[str]]:
    """The header and the text cells of one column.

    Args:
        time_unit: for time columns, "s", "ms", "us", or None to pick per cell.
        suffix: False writes times without their unit (the caller states it in the header).
    Returns:
        (header, cells); a FLOPs header names the column's scale ("Total MFLOPs").
    """
    values = [value(r, spec, totals) for r in rows]
    if spec.kind == "time":
        return spec.header, [format_time(v, time_unit, suffix) for v in values]
    if spec.kind == "percent":
        return spec.header, [format_percent(v, 100.0) for v in values]
    if spec.kind == "bytes":
        return spec.header, [format_bytes(v) for v in values]
    if spec.kind == "count":
        return spec.header, [str(int(v)) for v in values]
    if spec.kind == "flops":
        return format_flops_column([int(v) for v in values])
    if spec.kind == "ratio":
        return spec.header, [format_ratio(v) for v in values]
    if spec.kind == "interval":
        return spec.header, [format_interval(v) for v in values]
    if spec.kind == "p_value":
        return spec.header, [format_p_value(v) for v in values]
    return spec.header, [_text(spec, v) for v in values]
