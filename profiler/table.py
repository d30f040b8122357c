"""Plain-text tables in the layout PyTorch's profiler prints.

Every column is as wide as its widest cell (header included), cells are right-aligned and
columns are separated by two spaces, so headers and values can never drift apart. Dashed lines
frame the header and close the body; a footer follows.
"""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Column", "render", "format_time_ns", "format_memory", "format_percent",
           "format_flops_column", "TIME_UNITS", "truncate"]

TIME_UNITS = ("s", "ms", "us")
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


def format_time_ns(ns: float, unit: str | None = None) -> str:
    """Format nanoseconds as PyTorch does: three decimals in s, ms or us (auto when None)."""
    us = ns / 1000.0
    if unit is None:
        unit = "s" if abs(us) >= 1e6 else "ms" if abs(us) >= 1e3 else "us"
    if unit == "s":
        return f"{us / 1e6:.3f}s"
    if unit == "ms":
        return f"{us / 1e3:.3f}ms"
    if unit == "us":
        return f"{us:.3f}us"
    raise ValueError(f"time_unit must be one of {TIME_UNITS} or None, got {unit!r}")


def format_memory(nbytes: int) -> str:
    """Bytes as ``1.50 Mb`` / ``12.00 Kb`` / ``512 b`` (binary multiples, PyTorch's spelling)."""
    kb = 1024
    for limit, suffix in ((kb ** 3, "Gb"), (kb ** 2, "Mb"), (kb, "Kb")):
        if abs(nbytes) >= limit:
            return f"{nbytes / limit:.2f} {suffix}"
    return f"{int(nbytes)} b"


def format_percent(part: float, whole: float) -> str:
    return f"{(100.0 * part / whole) if whole else 0.0:.2f}%"


def format_flops_column(values: list[int]) -> tuple[str, list[str]]:
    """Pick one scale for the whole column (like PyTorch): header ``Total MFLOPs`` etc."""
    top = max((abs(v) for v in values), default=0)
    prefixes = ["", "K", "M", "G", "T", "P"]
    k = 0
    while k + 1 < len(prefixes) and top >= 1000 ** (k + 1):
        k += 1
    if k == 0:
        return "Total FLOPs", [str(int(v)) if v else "--" for v in values]
    scale = 1000 ** k
    return f"Total {prefixes[k]}FLOPs", [f"{v / scale:.3f}" if v else "--" for v in values]


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
