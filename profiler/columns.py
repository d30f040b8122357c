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

from .format import (format_bytes, format_flops_column, format_interval, format_p_value, format_percent,
                     format_ratio, format_time)

if TYPE_CHECKING:  # pragma: no cover
    from .data import ProfileData

__all__ = ["ColumnSpec", "COLUMNS", "OPERATOR_COLUMNS", "FORWARD_BACKWARD_COLUMNS", "MODULE_COLUMNS",
           "MODULE_TREE_COLUMNS", "MEMORY_COLUMNS", "STAT_COLUMNS", "STAT_OP_COLUMNS", "MEMORY_KIND_COLUMNS", "KINDS", "operator_columns", "value", "row_values", "cells"]

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
    """

    id: str
    header: str
    kind: str
    needs: str = ""

    @property
    def field(self) -> str:
        """The row attribute read for this column (a percentage reads the time it is a share of)."""
        return self.id[:-len(PERCENT_SUFFIX)] if self.kind == "percent" else self.id

    @property
    def clock(self) -> str | None:
        """"cpu" or "cuda" for time, percent and memory columns; None otherwise."""
        if "cuda" in self.id:
            return "cuda"
        if "cpu" in self.id:
            return "cpu"
        return None


def _spec(*args) -> ColumnSpec:
    return ColumnSpec(*args)


COLUMNS: dict[str, ColumnSpec] = {c.id: c for c in (
    # key_averages() rows, in PyTorch's table() order.
    _spec("name", "Name", "text"),
    _spec("device", "Device", "text", "device"),
    _spec("module", "Module", "text", "module"),
    _spec("scope", "Scope", "text", "scope"),
    _spec("self_cpu_time_total_percent", "Self CPU %", "percent"),
    _spec("self_cpu_time_total", "Self CPU", "time"),
    _spec("cpu_time_total_percent", "CPU total %", "percent"),
    _spec("cpu_time_total", "CPU total", "time"),
    _spec("cpu_time", "CPU time avg", "time"),
    _spec("self_cuda_time_total", "Self CUDA", "time", "cuda"),
    _spec("self_cuda_time_total_percent", "Self CUDA %", "percent", "cuda"),
    _spec("cuda_time_total", "CUDA total", "time", "cuda"),
    _spec("cuda_time", "CUDA time avg", "time", "cuda"),
    _spec("cpu_memory_usage", "CPU Mem", "bytes", "memory"),
    _spec("self_cpu_memory_usage", "Self CPU Mem", "bytes", "memory"),
    _spec("cuda_memory_usage", "CUDA Mem", "bytes", "cuda_memory"),
    _spec("self_cuda_memory_usage", "Self CUDA Mem", "bytes", "cuda_memory"),
    _spec("count", "# of Calls", "count"),
    _spec("input_shapes", "Input Shapes", "text", "shapes"),
    _spec("stack", "Source Location", "text", "stack"),
    _spec("flops", "Total FLOPs", "flops", "flops"),
    # forward_backward_summary() rows: a forward op and the backward nodes it caused.
    _spec("call_site", "Call Site", "text", "stack"),
    _spec("backward_self_cpu_time_total", "Bwd Self CPU", "time"),
    _spec("backward_cpu_time_total", "Bwd CPU total", "time"),
    _spec("forward_backward_self_cpu_time_total", "Fwd+Bwd Self CPU", "time"),
    _spec("forward_backward_cpu_time_total", "Fwd+Bwd CPU total", "time"),
    _spec("backward_self_cuda_time_total", "Bwd Self CUDA", "time", "cuda"),
    _spec("backward_cuda_time_total", "Bwd CUDA total", "time", "cuda"),
    _spec("forward_backward_self_cuda_time_total", "Fwd+Bwd Self CUDA", "time", "cuda"),
    _spec("forward_backward_cuda_time_total", "Fwd+Bwd CUDA total", "time", "cuda"),
    _spec("backward_count", "# Bwd Calls", "count"),
    _spec("backward_names", "Backward Nodes", "text"),
    # module_summary() rows: self time split by the phase it ran in.
    _spec("forward_self_cpu_time_total", "Fwd Self CPU", "time"),
    # module_tree() nodes: forward and backward time of a module, self and with its children.
    _spec("forward_cpu_time_total", "Fwd CPU total", "time"),
    _spec("forward_backward_cpu_time_total_percent", "Fwd+Bwd CPU %", "percent"),
    _spec("forward_self_cuda_time_total", "Fwd Self CUDA", "time", "cuda"),
    _spec("forward_cuda_time_total", "Fwd CUDA total", "time", "cuda"),
    # profiler.memory rows: bytes allocated inside an op or module, split by kind (torch's
    # memory-profiler categories), and per kind on a device: allocated, freed, at the peak.
    _spec("allocated", "Allocated", "bytes", "memory"),
    _spec("freed", "Freed", "bytes", "memory"),
    _spec("net", "Net", "bytes", "memory"),
    _spec("allocations", "# of Allocations", "count", "memory"),
    _spec("parameter", "Parameter", "bytes", "memory_kinds"),
    _spec("optimizer_state", "Optimizer state", "bytes", "memory_kinds"),
    _spec("gradient", "Gradient", "bytes", "memory_kinds"),
    _spec("activation", "Activation", "bytes", "memory_kinds"),
    _spec("input", "Input", "bytes", "memory_kinds"),
    _spec("autograd_detail", "Autograd detail", "bytes", "memory_kinds"),
    _spec("temporary", "Temporary", "bytes", "memory_kinds"),
    _spec("unknown", "Unknown", "bytes", "memory_kinds"),
    _spec("memory_device", "Device", "text", "memory"),
    _spec("kind", "Kind", "text", "memory_kinds"),
    _spec("at_peak", "At peak", "bytes", "memory_kinds"),
    _spec("max_live", "Max live", "bytes", "memory_kinds"),
    # profiler.stats rows (the statistical diff): per-step medians in A and B, the ratio of
    # medians with its bootstrap interval, the Benjamini-Hochberg adjusted p-value, the verdict.
    _spec("median_a", "Median/step A", "time"),
    _spec("median_b", "Median/step B", "time"),
    _spec("share_percent", "Share of step", "percent"),
    _spec("ratio", "Ratio B/A", "ratio"),
    _spec("ci", "95% CI", "interval"),
    _spec("q_value", "p (BH)", "p_value"),
    _spec("verdict", "Verdict", "text"),
)}

OPERATOR_COLUMNS = ("name", "device", "module", "scope",
                    "self_cpu_time_total_percent", "self_cpu_time_total", "cpu_time_total_percent",
                    "cpu_time_total", "cpu_time", "self_cuda_time_total", "self_cuda_time_total_percent",
                    "cuda_time_total", "cuda_time", "cpu_memory_usage", "self_cpu_memory_usage",
                    "cuda_memory_usage", "self_cuda_memory_usage", "count", "input_shapes", "stack",
                    "flops")
FORWARD_BACKWARD_COLUMNS = ("name", "call_site", "count",
                            "self_cpu_time_total", "cpu_time_total", "backward_self_cpu_time_total",
                            "backward_cpu_time_total", "forward_backward_self_cpu_time_total",
                            "forward_backward_cpu_time_total",
                            "self_cuda_time_total", "cuda_time_total", "backward_self_cuda_time_total",
                            "backward_cuda_time_total", "forward_backward_self_cuda_time_total",
                            "forward_backward_cuda_time_total",
                            "backward_count", "backward_names")
# Memory by op (or module): totals, then one column per kind (those that occur are shown).
MEMORY_COLUMNS = ("name", "allocated", "freed", "net", "allocations", "parameter", "optimizer_state",
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
    return [COLUMNS[i] for i in ids if COLUMNS[i].needs in have]


def operator_columns(data: "ProfileData", *, shapes: bool = False, stack: bool = False,
                     module: bool = False, device: bool = False, scope: bool = False) -> list[ColumnSpec]:
    """The operator-table columns for a profile and a grouping (PyTorch's set and order).

    Returns:
        ColumnSpecs, from "Name" to "Total FLOPs".
    """
    return select(OPERATOR_COLUMNS, available(data, shapes=shapes, stack=stack, module=module,
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
