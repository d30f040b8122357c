"""Rich renderables built from library results, as pure functions.

:func:`spec_table` renders rows the library returns (``key_averages()``,
``forward_backward_summary()``, ``module_summary()``) with the columns of
:mod:`profiler.columns`; :func:`diff_table` renders a ``profiler.diff``; printing is the
caller's business. Nothing here imports the engine: only :mod:`profiler` (for formatting helpers
and types) and :mod:`rich`, so a saved profile can be shown on a machine without CuPy.

Two looks, chosen by the caller through ``plain``:

* rich (a terminal): a light box, right-aligned numbers, the heaviest rows highlighted;
* plain (stdout is not a terminal, or ``NO_COLOR`` is set): no colour, no box drawing — an
  ASCII line under the header, so the text pastes cleanly into an issue or a log.

Every time column picks its own unit (s, ms or us, from the column's largest value) and says it
in the header, so cells hold bare numbers that line up.
"""
from __future__ import annotations

import os
import sys
from typing import Sequence

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from gradtrace.profiler.format import format_time, pick_time_unit

__all__ = ["PLAIN_BOX", "WIDTH", "make_console", "emit", "short_site", "is_plain", "spec_table",
           "fit_columns", "header_lines", "diff_table", "bench_table", "sort_metric"]

WIDTH = 100

# An ASCII rule under the header and nothing else: no box-drawing characters.
PLAIN_BOX = box.Box(
    "    \n"
    "    \n"
    " -- \n"
    "    \n"
    "    \n"
    " -- \n"
    "    \n"
    "    \n",
    ascii=True,
)

_HIGHLIGHT = ("bold red", "yellow", "yellow")


def is_plain(file=None) -> bool:
    """True when output should carry no colour and no box drawing (not a tty, or NO_COLOR)."""
    if os.environ.get("NO_COLOR"):
        return True
    stream = file if file is not None else sys.stdout
    try:
        return not stream.isatty()
    except (AttributeError, ValueError):
        return True


def make_console(file=None, stderr: bool = False) -> tuple[Console, bool]:
    """A console at most :data:`WIDTH` columns wide, and whether it is plain.

    Returns:
        (console, plain): plain consoles have no colour system and no highlighting.
    """
    stream = file if file is not None else (sys.stderr if stderr else sys.stdout)
    plain = is_plain(stream)
    if plain:
        return Console(file=stream, width=WIDTH, color_system=None, highlight=False,
                       emoji=False, markup=False), True
    probe = Console(file=stream)
    return Console(file=stream, width=min(probe.width, WIDTH), highlight=False, markup=False), False


def emit(console: Console, renderable, plain: bool) -> None:
    """Print ``renderable``; plain output loses the padding rich leaves at line ends."""
    if not plain:
        console.print(renderable)
        return
    with console.capture() as capture:
        console.print(renderable)
    text = "\n".join(line.rstrip() for line in capture.get().split("\n"))
    console.file.write(text)
    console.file.flush()


def short_site(frame: str) -> str:
    """``/long/path/train.py(12): step`` -> ``train.py(12): step`` (the table is 100 columns)."""
    head, sep, rest = frame.partition("(")
    if not sep:
        return frame
    return head.replace("\\", "/").rsplit("/", 1)[-1] + sep + rest


def _table(title: str | None, plain: bool, caption: str | None = None) -> Table:
    return Table(title=title, caption=caption, box=PLAIN_BOX if plain else box.SIMPLE_HEAD,
                 show_edge=False, pad_edge=False, padding=(0, 1), collapse_padding=True, header_style="" if plain else "bold",
                 title_style="" if plain else "bold", caption_style="" if plain else "dim",
                 title_justify="left", caption_justify="left", expand=False)


def _name_column(table: Table, header: str = "Name", max_width: int = 36) -> None:
    table.add_column(header, justify="left", no_wrap=True, overflow="ellipsis",
                     max_width=max_width, min_width=8)


def _num_column(table: Table, header: str, unit: str | None = None) -> None:
    """A right-aligned number column; its unit goes on a second header line."""
    table.add_column(f"{header}\n{unit}" if unit else header, justify="right", no_wrap=True)


def _row_styles(values: Sequence[float], plain: bool) -> list[str]:
    """Highlight the heaviest rows (by ``values``): the top one red, the next two yellow."""
    styles = [""] * len(values)
    if plain:
        return styles
    order = sorted(range(len(values)), key=lambda i: values[i], reverse=True)
    for rank, i in enumerate(order[:len(_HIGHLIGHT)]):
        if values[i] > 0:
            styles[i] = _HIGHLIGHT[rank]
    return styles


def sort_metric(sort_by: str | None) -> str:
    """The row attribute a sort key measures (``self_cpu_time_total`` when none is given)."""
    from gradtrace.profiler.aggregate import SORT_KEYS  # noqa: PLC0415 - keep module import cheap

    return SORT_KEYS.get(sort_by or "self_cpu_time_total", "self_cpu_time_total")


# Left out first when a table would be wider than WIDTH (the per-call averages, then the
# inclusive memory and shares, ...); ``--json`` always has every column.
_DROP_ORDER = ("cuda_time", "cpu_time", "cuda_memory_usage", "cpu_memory_usage", "cpu_time_total_percent",
               "self_cuda_memory_usage", "self_cpu_memory_usage", "cuda_time_total",
               "backward_self_cpu_time_total", "backward_self_cuda_time_total", "self_cuda_time_total",
               "cuda_time_total", "self_cpu_time_total", "backward_count")
_WIDE_TEXT = {"input_shapes": 16, "stack": 16, "backward_names": 14}
_NAME_WIDTH = {"name": 36, "module": 30, "device": 7, "call_site": 26, "scope": 10}


def header_lines(header: str, unit: str | None = None, width: int = 9) -> str:
    """A column header broken at spaces into lines of about ``width`` characters; a time
    column's unit goes in parentheses on the last line (``"CPU time\navg (ms)"``)."""
    lines: list[str] = []
    for word in header.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    if unit:
        if len(lines[-1]) + len(unit) + 3 <= width:
            lines[-1] += f" ({unit})"
        else:
            lines.append(f"({unit})")
    return "\n".join(lines)


def _column_cells(spec, rows, totals) -> tuple[str, list[str]]:
    """Header (broken into lines, with the unit of a time column) and cell texts of a column."""
    from gradtrace.profiler import columns as C  # noqa: PLC0415 - keep module import cheap

    if spec.kind == "time":
        values = [C.value(r, spec, totals) for r in rows]
        unit = pick_time_unit(values)
        return header_lines(spec.header, unit), [format_time(v, unit, suffix=False) for v in values]
    header, texts = C.cells(spec, rows, totals)
    if spec.id in ("stack", "call_site"):
        texts = ["\n".join(short_site(f) for f in t.split("\n")) for t in texts]
    return (header if spec.kind == "text" else header_lines(header)), texts


def _max_width(spec, wide: bool) -> int | None:
    if spec.id in _WIDE_TEXT:
        return None
    if spec.kind == "text":
        return 24 if spec.id == "name" and wide else _NAME_WIDTH.get(spec.id, 16)
    return None


def _width(spec, header: str, texts: list[str], wide: bool) -> int:
    """Characters the column takes, its padding included."""
    if spec.id in _WIDE_TEXT:
        return _WIDE_TEXT[spec.id] + 2
    longest = max((len(line) for t in [header, *texts] for line in t.split("\n")), default=0)
    cap = _max_width(spec, wide)
    return (min(longest, cap) if cap else longest) + 2


def fit_columns(columns: list, width: int = WIDTH) -> tuple[list, list]:
    """Leave columns out, in :data:`_DROP_ORDER`, until the rest fit in ``width`` characters.

    Args:
        columns: (spec, header, cells, width) tuples.
    Returns:
        (kept, left out), both in their original order.
    """
    kept = list(columns)
    for drop in _DROP_ORDER:
        if sum(c[3] for c in kept) <= width:
            break
        kept = [c for c in kept if c[0].id != drop]
    return kept, [c for c in columns if c not in kept]


def spec_table(rows: Sequence, specs: list, totals: dict | None = None, *, title: str | None = None,
               plain: bool = False, highlight: str | None = None, footer: Sequence[str] = (),
               fit: bool = True):
    """Rows as a rich table with one column per :class:`profiler.columns.ColumnSpec`.

    Headers are the spec's (PyTorch's) headers, broken into lines; each time column picks its
    own unit from its largest value and states it in the header, so cells are bare numbers.

    Args:
        rows: row objects with the specs' fields (times in microseconds).
        specs: the columns, from :mod:`profiler.columns`.
        totals: field -> the 100% of its percentage column (us).
        highlight: the field whose largest values are highlighted.
        footer: lines shown under the table.
        fit: leave columns out (:func:`fit_columns`) so the table fits in :data:`WIDTH`; a
            line under the table names them.
    Returns:
        A rich renderable: the table, then the footer lines.
    """
    totals = totals or {}
    wide = any(s.id in _WIDE_TEXT for s in specs)
    columns = []
    for spec in specs:
        header, texts = _column_cells(spec, rows, totals)
        columns.append((spec, header, texts, _width(spec, header, texts, wide)))
    columns, left_out = fit_columns(columns) if fit else (columns, [])
    table = _table(title, plain)
    for spec, header, _, _ in columns:
        cap = _max_width(spec, wide)
        if spec.id in _WIDE_TEXT:
            table.add_column(header, overflow="fold", min_width=_WIDE_TEXT[spec.id])
        elif spec.kind == "text":
            table.add_column(header, justify="left", no_wrap=True, overflow="ellipsis", max_width=cap,
                             min_width=min(cap, 7))
        else:
            table.add_column(header, justify="right", no_wrap=True)
    values = [float(getattr(r, highlight)) for r in rows] if highlight else [0.0] * len(rows)
    for k, style in enumerate(_row_styles(values, plain)):
        table.add_row(*[c[2][k] for c in columns], style=style or None)
    notes = list(footer)
    if left_out and rows:
        notes.append("left out to fit: " + ", ".join(c[0].header for c in left_out) + " (--json has every column)")
    if not notes:
        return table
    return Group(table, Text("\n".join(notes), style="" if plain else "dim"))


def diff_table(result, *, limit: int | None = None, plain: bool = False, title: str | None = None):
    """The rows of :func:`profiler.diff` (a ``ProfileDiff``): regressions red, improvements green.

    Columns: name (and call site), calls in A and B, then the sort metric in A and B, its change
    (B - A) and relative change; the CPU total's relative change when the sort metric is a self
    time. A row is red when B is slower on the sort metric, green when faster.

    Returns:
        A rich renderable: the table, then the totals.
    """
    rows = list(result)
    if limit is not None and limit > 0:
        rows = rows[:limit]
    metric = result.sort_by if result.sort_by in result.metrics else next(iter(result.metrics))
    label = result.metrics[metric]
    from gradtrace.profiler.columns import COLUMNS  # noqa: PLC0415 - keep module import cheap

    calls = COLUMNS["count"].header
    table = _table(title, plain)
    _name_column(table, max_width=28)
    with_sites = any(r.call_site for r in rows)
    if with_sites:
        table.add_column(COLUMNS["call_site"].header, no_wrap=True, overflow="ellipsis", max_width=24)
    unit = pick_time_unit([r.a.get(metric, 0.0) for r in rows] + [r.b.get(metric, 0.0) for r in rows])
    delta_unit = pick_time_unit(r.delta(metric) for r in rows)
    headers = [header_lines(f"{calls} A"), header_lines(f"{calls} B"), header_lines(f"{label} A", unit),
               header_lines(f"{label} B", unit), header_lines("Change", delta_unit), "Change\n%"]
    second = None
    if metric.startswith("self_") and metric[len("self_"):] in result.metrics:
        second = metric[len("self_"):]
        headers.append(header_lines(result.metrics[second] + " change %"))
    for header in headers:
        table.add_column(header, justify="right", no_wrap=True)
    for r in rows:
        delta = r.delta(metric)
        cells = [r.name] + ([short_site(r.call_site or "")] if with_sites else [])
        cells += [str(r.count_a) if r.status != "only_b" else "-",
                  str(r.count_b) if r.status != "only_a" else "-",
                  format_time(r.a.get(metric, 0.0), unit, suffix=False),
                  format_time(r.b.get(metric, 0.0), unit, suffix=False),
                  ("+" if delta > 0 else "") + format_time(delta, delta_unit, suffix=False),
                  r.relative_text(metric)]
        if second:
            cells.append(r.relative_text(second))
        style = None
        if not plain and delta:
            style = "red" if delta > 0 else "green"
        table.add_row(*cells, style=style)
    footer = result.footer()[:-1]
    footer.append(f"{len(result)} rows, sorted by the size of the change in {result.sort_by}; "
                  "red: B slower, green: B faster")
    return Group(table, Text("\n".join(footer), style="" if plain else "dim"))


def bench_table(results: Sequence[dict], *, plain: bool = False, title: str | None = None) -> Table:
    """One row per benchmark script: status, wall time and (when kept) its JSON results file."""
    table = _table(title, plain)
    _name_column(table, "Benchmark")
    table.add_column("Status", no_wrap=True)
    _num_column(table, "Time", "s")
    with_json = any(r.get("json") for r in results)
    if with_json:
        table.add_column("Results", overflow="fold")
    for r in results:
        ok = r["returncode"] == 0
        style = "" if plain else ("green" if ok else "red")
        cells = [r["name"], Text("ok" if ok else f"failed ({r['returncode']})", style=style),
                 f"{r['seconds']:.1f}"]
        table.add_row(*cells, *([r.get("json") or ""] if with_json else []))
    return table


def stack(*renderables) -> Group:
    """Renderables one under the other, skipping None."""
    return Group(*[r for r in renderables if r is not None])
