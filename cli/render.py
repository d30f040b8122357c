"""Rich renderables built from library results, as pure functions.

Each ``*_table`` function takes what the library returns (``key_averages()`` rows, a
``forward_backward_summary()``, a diff) and returns a :class:`rich.table.Table`; printing is the
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
from typing import Iterable, Sequence

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from gradtrace.profiler.table import format_memory

__all__ = ["PLAIN_BOX", "WIDTH", "make_console", "emit", "short_site", "is_plain", "pick_time_unit", "format_time",
           "key_averages_table", "forward_backward_table", "module_table", "diff_table",
           "bench_table", "sort_metric"]

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

_UNIT_SCALE = {"s": 1e6, "ms": 1e3, "us": 1.0}     # microseconds per unit
# Sort keys of key_averages rows -> the attribute that measures them (PyTorch's names).
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


def pick_time_unit(values_us: Iterable[float]) -> str:
    """The unit that keeps the column's largest value between 1 and 1000 (us at least)."""
    top = max((abs(v) for v in values_us), default=0.0)
    if top >= 1e6:
        return "s"
    if top >= 1e3:
        return "ms"
    return "us"


def format_time(us: float, unit: str) -> str:
    """Microseconds as a bare number in ``unit`` with three decimals."""
    return f"{us / _UNIT_SCALE[unit]:.3f}"


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


def _percent(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.2f}%" if whole else "0.00%"


def sort_metric(sort_by: str | None) -> str:
    """The row attribute a sort key measures (``self_cpu_time_total`` when none is given)."""
    from gradtrace.profiler.aggregate import SORT_KEYS  # noqa: PLC0415 - keep module import cheap

    return SORT_KEYS.get(sort_by or "self_cpu_time_total", "self_cpu_time_total")


def key_averages_table(rows: Sequence, *, self_cpu_total_us: float, self_cuda_total_us: float = 0.0,
                       has_cuda: bool = False, has_memory: bool = False, sort_by: str | None = None,
                       title: str | None = None, plain: bool = False, shapes: bool = False,
                       stacks: bool = False, devices: Sequence[str] | None = None,
                       footer: Sequence[str] = ()):
    """The operator table for ``key_averages()`` rows, already sorted and cut.

    Args:
        rows: :class:`profiler.FunctionEventAvg` rows (times in microseconds).
        self_cpu_total_us, self_cuda_total_us: the 100% of the percentage columns.
        has_cuda: add the CUDA columns; has_memory: add the self memory columns.
        sort_by: the sort key, used to pick the rows to highlight.
        shapes / stacks: add an Input Shapes / Source Location column (the per-call average
            and memory columns then make room for it, to stay within 100 columns).
        devices: one device label per row (``--device-rows``), shown in a Device column.
        footer: lines shown under the table (totals).
    Returns:
        A rich renderable: the table, then the footer lines.
    """
    wide_extra = shapes or stacks
    table = _table(title, plain)
    _name_column(table, max_width=24 if wide_extra else 36)
    if devices is not None:
        table.add_column("Device", no_wrap=True)
    cells: list[list[str]] = [[r.key] + ([devices[i]] if devices is not None else [])
                              for i, r in enumerate(rows)]

    def add_percent(header: str, attr: str, whole: float):
        _num_column(table, header, "%")
        for c, r in zip(cells, rows):
            c.append(_percent(getattr(r, attr), whole))

    def add_times(header: str, attr: str):
        unit = pick_time_unit(getattr(r, attr) for r in rows)
        _num_column(table, header, unit)
        for c, r in zip(cells, rows):
            c.append(format_time(getattr(r, attr), unit))

    add_percent("Self CPU", "self_cpu_time_total", self_cpu_total_us)
    add_times("Self CPU", "self_cpu_time_total")
    add_times("CPU total", "cpu_time_total")
    if has_cuda:
        add_percent("Self CUDA", "self_cuda_time_total", self_cuda_total_us)
        add_times("Self CUDA", "self_cuda_time_total")
        add_times("CUDA total", "cuda_time_total")
    elif not wide_extra:
        add_times("CPU avg", "cpu_time")
    if has_memory and not (wide_extra and has_cuda):
        _num_column(table, "Self CPU", "Mem")
        for c, r in zip(cells, rows):
            c.append(format_memory(r.self_cpu_memory_usage))
        if has_cuda and not wide_extra:
            _num_column(table, "Self CUDA", "Mem")
            for c, r in zip(cells, rows):
                c.append(format_memory(r.self_cuda_memory_usage))
    _num_column(table, "Calls")
    for c, r in zip(cells, rows):
        c.append(str(r.count))
    if shapes:
        table.add_column("Input Shapes", overflow="fold", min_width=16)
        for c, r in zip(cells, rows):
            c.append(str(r.input_shapes) if r.input_shapes is not None else "[]")
    if stacks:
        table.add_column("Source Location", overflow="fold", min_width=16)
        for c, r in zip(cells, rows):
            c.append("\n".join(short_site(f) for f in r.stack))
    metric = sort_metric(sort_by)
    styles = _row_styles([float(getattr(r, metric)) for r in rows], plain)
    for c, style in zip(cells, styles):
        table.add_row(*c, style=style or None)
    if not footer:
        return table
    return Group(table, Text("\n".join(footer), style="" if plain else "dim"))


def forward_backward_table(rows: Sequence, *, has_cuda: bool = False, title: str | None = None,
                           plain: bool = False) -> Table:
    """Forward + backward cost per forward op (rows of ``forward_backward_summary()``)."""
    table = _table(title, plain)
    _name_column(table, "Forward op", max_width=20)
    with_sites = any(r.call_site for r in rows)
    if with_sites:
        table.add_column("Call site", overflow="ellipsis", no_wrap=True, max_width=26)
    cells: list[list[str]] = [[r.name] + ([short_site(r.call_site or "")] if with_sites else []) for r in rows]
    _num_column(table, "Calls")
    for c, r in zip(cells, rows):
        c.append(str(r.count))
    device = "CUDA" if has_cuda else "CPU"
    pairs = ([("Fwd CUDA", "cuda_time_total"), ("Bwd CUDA", "backward_cuda_time_total"),
              ("Fwd+Bwd CUDA", "total_cuda_time")] if has_cuda else
             [("Fwd CPU", "cpu_time_total"), ("Bwd CPU", "backward_cpu_time_total"),
              ("Fwd+Bwd CPU", "total_cpu_time")])
    if has_cuda:   # CPU side too, but only the sum, to stay within 100 columns
        pairs.insert(0, ("Fwd+Bwd CPU", "total_cpu_time"))
    for header, attr in pairs:
        unit = pick_time_unit(getattr(r, attr) for r in rows)
        _num_column(table, header, unit)
        for c, r in zip(cells, rows):
            c.append(format_time(getattr(r, attr), unit))
    table.add_column("Backward nodes", overflow="fold", min_width=14)
    for c, r in zip(cells, rows):
        c.append(", ".join(r.backward_names))
    metric = "total_cuda_time" if device == "CUDA" else "total_cpu_time"
    styles = _row_styles([float(getattr(r, metric)) for r in rows], plain)
    for c, style in zip(cells, styles):
        table.add_row(*c, style=style or None)
    return table


def module_table(rows: Sequence[dict], *, has_cuda: bool = False, title: str | None = None,
                 plain: bool = False, self_cpu_total_us: float = 0.0) -> Table:
    """Time per ``nn.Module`` class (dicts from :func:`cli.analysis.module_rows`)."""
    table = _table(title, plain)
    _name_column(table, "Module")
    cells: list[list[str]] = [[r["module"]] for r in rows]
    _num_column(table, "Self CPU %")
    for c, r in zip(cells, rows):
        c.append(_percent(r["self_cpu_time_total"], self_cpu_total_us))
    attrs = [("Self CPU", "self_cpu_time_total"), ("CPU total", "cpu_time_total"),
             ("Fwd self CPU", "forward_self_cpu_time_total"), ("Bwd self CPU", "backward_self_cpu_time_total")]
    if has_cuda:
        attrs += [("Self CUDA", "self_cuda_time_total"), ("CUDA total", "cuda_time_total")]
    for header, attr in attrs:
        unit = pick_time_unit(r[attr] for r in rows)
        _num_column(table, header, unit)
        for c, r in zip(cells, rows):
            c.append(format_time(r[attr], unit))
    _num_column(table, "Calls")
    for c, r in zip(cells, rows):
        c.append(str(r["count"]))
    styles = _row_styles([r["self_cpu_time_total"] for r in rows], plain)
    for c, style in zip(cells, styles):
        table.add_row(*c, style=style or None)
    return table


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
    table = _table(title, plain)
    _name_column(table, max_width=28)
    with_sites = any(r.call_site for r in rows)
    if with_sites:
        table.add_column("Call site", no_wrap=True, overflow="ellipsis", max_width=24)
    _num_column(table, "Calls", "A")
    _num_column(table, "Calls", "B")
    unit = pick_time_unit([r.a.get(metric, 0.0) for r in rows] + [r.b.get(metric, 0.0) for r in rows])
    delta_unit = pick_time_unit(r.delta(metric) for r in rows)
    _num_column(table, f"{label} A", unit)
    _num_column(table, f"{label} B", unit)
    _num_column(table, "Change", delta_unit)
    _num_column(table, "Change", "%")
    second = None
    if metric.startswith("self_") and metric[len("self_"):] in result.metrics:
        second = metric[len("self_"):]
        _num_column(table, result.metrics[second], "change %")
    for r in rows:
        delta = r.delta(metric)
        cells = [r.name] + ([short_site(r.call_site or "")] if with_sites else [])
        cells += [str(r.count_a) if r.status != "only_b" else "-",
                  str(r.count_b) if r.status != "only_a" else "-",
                  format_time(r.a.get(metric, 0.0), unit), format_time(r.b.get(metric, 0.0), unit),
                  ("+" if delta > 0 else "") + format_time(delta, delta_unit), _relative(r, metric)]
        if second:
            cells.append(_relative(r, second))
        style = None
        if not plain and delta:
            style = "red" if delta > 0 else "green"
        table.add_row(*cells, style=style)
    footer = [f"Self CPU time total: A {_us(result.self_cpu_a)}, B {_us(result.self_cpu_b)} "
              f"({_signed_percent(result.self_cpu_b - result.self_cpu_a, result.self_cpu_a)})"]
    if result.has_cuda:
        footer.append(f"Self CUDA time total: A {_us(result.self_cuda_a)}, B {_us(result.self_cuda_b)} "
                      f"({_signed_percent(result.self_cuda_b - result.self_cuda_a, result.self_cuda_a)})")
    footer.append(f"{len(result)} rows, sorted by the size of the change in {result.sort_by}; "
                  "red: B slower, green: B faster")
    return Group(table, Text("\n".join(footer), style="" if plain else "dim"))


def _us(us: float) -> str:
    unit = pick_time_unit([us])
    return format_time(us, unit) + unit


def _relative(row, metric: str) -> str:
    if row.status == "only_b":
        return "new"
    if row.status == "only_a":
        return "gone"
    rel = row.relative(metric)
    return "n/a" if rel is None else f"{rel * 100:+.2f}%"


def _signed_percent(delta: float, base: float) -> str:
    if not base:
        return "n/a"
    return f"{100.0 * delta / base:+.2f}%"


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
