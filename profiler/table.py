"""Plain-text tables in the layout PyTorch's profiler prints.

The columns come from :mod:`profiler.columns` and the cells' text from :mod:`profiler.format`;
this module lays them out. Every column is as wide as its widest cell (header included), cells are right-aligned and
columns are separated by two spaces, so headers and values can never drift apart. Dashed lines
frame the header and close the body; a footer follows.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import columns as _columns
from . import metrics as _metrics
from .format import format_time

if TYPE_CHECKING:  # pragma: no cover
    from .data import ProfileData

__all__ = ["Column", "render", "truncate", "plain_table", "operator_table"]

_SEP = "  "


@dataclass
class Column:
    """One column: header text, one cell per row, and an optional minimum width.

    A cell may hold several lines (``"\\n"``): a stack's frames are printed under each other,
    the other cells of that row staying empty on the extra lines.
    """

    header: str
    cells: list[str] = field(default_factory=list)
    min_width: int = 12


def truncate(text: str, width: int) -> str:
    """Cut ``text`` to ``width`` characters, ending with ``...`` when cut."""
    if len(text) <= width:
        return text
    return text[: max(width - 3, 0)] + "..."


def render(columns: list[Column], header: str | None = None, footer: list[str] = ()) -> str:
    """Lay out ``columns`` as text: optional header line, dashed frame, rows, footer lines."""
    widths = []
    for col in columns:
        cell_width = max((len(line) for cell in col.cells for line in cell.split("\n")), default=0)
        widths.append(max(col.min_width, len(col.header), cell_width))
    separator = _SEP.join("-" * w for w in widths)
    lines = []
    if header:
        lines += ["=" * len(separator), header]
    lines += [separator, _SEP.join(c.header.rjust(w) for c, w in zip(columns, widths)), separator]
    n_rows = len(columns[0].cells) if columns else 0
    for r in range(n_rows):
        parts = [col.cells[r].split("\n") for col in columns]
        for k in range(max(len(p) for p in parts)):
            cells = [(p[k] if k < len(p) else "").rjust(w) for p, w in zip(parts, widths)]
            lines.append(_SEP.join(cells).rstrip())
    lines.append(separator)
    lines += list(footer)
    return "\n".join(lines) + "\n"


def plain_table(rows, specs: list, totals: dict[str, float], max_name_column_width: int = 55,
                header: str | None = None, time_unit: str | None = None, footer: list[str] = ()) -> str:
    """Rows as text, one column per :class:`~profiler.columns.ColumnSpec`.

    Args:
        rows: row objects with the specs' fields.
        totals: field -> the 100% of its percentage column (us).
        max_name_column_width: longer names are cut with ``...``.
        time_unit: "s", "ms", "us" or None (per cell).
    """
    cols = []
    for spec in specs:
        title, cells = _columns.cells(spec, rows, totals, time_unit)
        if spec.id == "name":
            width = max(4, min(max_name_column_width, max((len(c) for c in cells), default=0)))
            cols.append(Column(title, [truncate(c, max_name_column_width) for c in cells], min_width=width))
        elif spec.id == "input_shapes":
            cols.append(Column(title, [truncate(c, 80) for c in cells]))
        else:
            cols.append(Column(title, cells))
    return render(cols, header=header, footer=footer)


def operator_table(data: "ProfileData", rows, specs: list, self_cpu_ns: int, self_cuda_ns: int,
                   max_name_column_width: int = 55, header: str | None = None,
                   time_unit: str | None = None) -> str:
    """PyTorch's ``key_averages().table()``: rows (sorted and cut already), then the footer.

    Args:
        self_cpu_ns, self_cuda_ns: Σ self time of the events averaged: the 100% of the
            percentage columns, printed in the footer.
    """
    totals = _metrics.percent_totals(self_cpu_ns / 1e3, self_cuda_ns / 1e3)
    return plain_table(rows, specs, totals, max_name_column_width, header, time_unit,
                       footer=table_footer(data, self_cpu_ns / 1e3, self_cuda_ns / 1e3, time_unit))


def table_footer(data: "ProfileData", self_cpu_us: float, self_cuda_us: float,
                 time_unit: str | None = None) -> list[str]:
    """The lines under an operator table: the totals, and what the analysis had to repair."""
    lines = [f"Self CPU time total: {format_time(self_cpu_us, time_unit)}"]
    if data.has_device_time:
        lines.append(f"Self CUDA time total: {format_time(self_cuda_us, time_unit)}")
    a = data.analysis
    if len(a.partial_overlaps):
        lines.append(f"Partially overlapping ranges (not nested): {len(a.partial_overlaps)} "
                     f"pair(s), see analysis.partial_overlaps")
    if a.cpu_clock_skew or a.cuda_clock_skew:
        lines.append(f"Negative self times clamped to 0 (clock skew): "
                     f"CPU {a.cpu_clock_skew}, CUDA {a.cuda_clock_skew}")
    return lines
