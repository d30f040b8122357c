"""Text for times, bytes, percentages and FLOPs, and shortened names: the one place the
units are spelled and names are cut.

Every table (``table()``, the CLI, the dashboard, ``profiler.diff``) formats through here, so a
time or a size reads the same wherever it is shown.

* Times are given in **microseconds** (the unit of ``key_averages()`` rows) and printed with
  three decimals in s, ms or us, PyTorch's spelling: ``1.500ms``.
* Sizes are **binary** multiples written ``B``, ``KB``, ``MB``, ``GB`` (1 KB = 1024 bytes):
  ``1.50 MB``. PyTorch's table writes ``Kb``/``Mb`` for the same binary multiples, which reads
  as kilobits; we keep its numbers and fix the spelling. The dashboard's grid formatter
  (``viewer/assets/dashAgGridFunctions.js``, ``gtBytes``) uses the same rule.
"""
from __future__ import annotations

from collections.abc import Iterable

__all__ = ["TIME_UNITS", "pick_time_unit", "format_time", "format_bytes", "format_percent",
           "format_flops_column", "format_ratio", "format_interval", "format_p_value", "shorten"]

TIME_UNITS = ("s", "ms", "us")
_US_PER_UNIT = {"s": 1e6, "ms": 1e3, "us": 1.0}
_BYTE_UNITS = (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10))


def pick_time_unit(values_us: Iterable[float]) -> str:
    """The unit that keeps the largest of ``values_us`` below 1000 (us at least).

    Args:
        values_us: times in microseconds (one value for a cell, a whole column for a column).
    Returns:
        "s", "ms" or "us".
    """
    top = max((abs(v) for v in values_us), default=0.0)
    return "s" if top >= 1e6 else "ms" if top >= 1e3 else "us"


def format_time(us: float, unit: str | None = None, suffix: bool = True) -> str:
    """Microseconds as PyTorch prints them: ``998.500us``, ``2.000ms``, ``1.250s``.

    Args:
        us: the time in microseconds.
        unit: "s", "ms" or "us"; None picks one for this value alone.
        suffix: False leaves the unit out (a column that states it in its header).
    Returns:
        The text, three decimals.
    Raises:
        ValueError: an unknown unit.
    """
    if unit is None:
        unit = pick_time_unit((us,))
    if unit not in _US_PER_UNIT:
        raise ValueError(f"time_unit must be one of {TIME_UNITS} or None, got {unit!r}")
    return f"{us / _US_PER_UNIT[unit]:.3f}" + (unit if suffix else "")


def format_bytes(nbytes: float) -> str:
    """Bytes as ``512 B``, ``2.00 KB``, ``-3.00 MB``, ``5.00 GB`` (binary multiples)."""
    for suffix, scale in _BYTE_UNITS:
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.2f} {suffix}"
    return f"{int(nbytes)} B"


def format_percent(part: float, whole: float) -> str:
    """``part`` as a percentage of ``whole`` with two decimals (``0.00%`` when whole is 0)."""
    return f"{(100.0 * part / whole) if whole else 0.0:.2f}%"


def format_flops_column(values: list[int]) -> tuple[str, list[str]]:
    """One scale for a whole FLOPs column, as PyTorch: header ``Total MFLOPs``, cells ``--`` for 0.

    Returns:
        (header, cells).
    """
    top = max((abs(v) for v in values), default=0)
    prefixes = ["", "K", "M", "G", "T", "P"]
    k = 0
    while k + 1 < len(prefixes) and top >= 1000 ** (k + 1):
        k += 1
    if k == 0:
        return "Total FLOPs", [str(int(v)) if v else "--" for v in values]
    scale = 1000 ** k
    return f"Total {prefixes[k]}FLOPs", [f"{v / scale:.3f}" if v else "--" for v in values]


def format_ratio(ratio: float | None) -> str:
    """A ratio B/A as ``1.052x`` (three decimals); ``-`` when there is none (A is 0)."""
    return "-" if ratio is None else f"{ratio:.3f}x"


def format_interval(interval: tuple[float | None, float | None] | None) -> str:
    """A confidence interval of a ratio as ``0.981-1.104``; ``-`` when the row was not tested."""
    if interval is None or interval[0] is None or interval[1] is None:
        return "-"
    return f"{interval[0]:.3f}-{interval[1]:.3f}"


def format_p_value(p: float | None) -> str:
    """A p-value with three decimals, ``<0.001`` below that; ``-`` when not tested."""
    if p is None:
        return "-"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def shorten(text: str, width: int, plain: bool = False) -> str:
    """``text`` cut to ``width`` characters with an ellipsis in the middle, keeping both ends
    (``aten::empty_…strided``, ``record_torch…py(32): main``): the one way a table or the
    timeline shortens a name; a multi-line text is shortened line by line. Plain output writes
    the ellipsis as ``...`` (ASCII only). Full names are in ``--json`` and the dashboard's
    hover and details."""
    mark = "..." if plain else "…"
    lines = []
    for line in text.split("\n"):
        if len(line) > width:
            if width <= len(mark):
                line = line[:width]
            else:
                head = (width - len(mark) + 1) // 2
                tail = width - len(mark) - head
                line = line[:head] + mark + (line[-tail:] if tail else "")
        lines.append(line)
    return "\n".join(lines)
