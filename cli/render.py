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

from gradtrace.profiler.format import format_time, pick_time_unit, shorten

__all__ = ["PLAIN_BOX", "WIDTH", "make_console", "plain_width", "emit", "short_site", "shorten", "is_plain",
           "spec_table", "fit_columns", "header_lines", "diff_table", "bench_table", "sort_metric"]

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


def plain_width() -> int:
    """Width of plain output (a pipe, a file): ``$COLUMNS`` when set, else :data:`WIDTH`."""
    try:
        return max(40, int(os.environ["COLUMNS"]))
    except (KeyError, ValueError):
        return WIDTH


def make_console(file=None, stderr: bool = False) -> tuple[Console, bool]:
    """A console as wide as the terminal (plain output: :func:`plain_width`), and whether it
    is plain; tables take ``console.width`` as the width to fit.

    Returns:
        (console, plain): plain consoles have no colour system and no highlighting.
    """
    stream = file if file is not None else (sys.stderr if stderr else sys.stdout)
    plain = is_plain(stream)
    if plain:
        return Console(file=stream, width=plain_width(), color_system=None, highlight=False,
                       emoji=False, markup=False), True
    return Console(file=stream, highlight=False, markup=False), False


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
    from gradtrace.profiler.metrics import sort_keys  # noqa: PLC0415 - keep module import cheap

    return sort_keys().get(sort_by or "self_cpu_time_total", "self_cpu_time_total")


# Which columns a narrow terminal leaves out first (the per-call averages, then the inclusive
# memory and shares, ...; ``--json`` always has every column), and which may be left out so
# that every header fits on one line (a script greps for torch's "Self CPU %"), are the column
# specs' ``drop`` and ``secondary`` (profiler.columns, from profiler.metrics for the metrics).
# With one-line headers, the name column keeps at least this many characters (when its
# names are that long): a greppable header is not worth unreadable op names.
_ONE_LINE_NAME = 32
# The narrowest a text column is squeezed to before numeric columns are left out.
_MIN_TEXT = {"name": 14, "module": 12, "call_site": 34, "input_shapes": 18, "stack": 34,
             "backward_names": 16, "device": 6, "scope": 6}


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


def _column_cells(spec, rows, totals, one_line: bool = False) -> tuple[str, list[str]]:
    """Header (with the unit of a time column; broken into lines unless ``one_line``) and
    cell texts of a column."""
    from gradtrace.profiler import columns as C  # noqa: PLC0415 - keep module import cheap

    if spec.kind == "time":
        values = [C.value(r, spec, totals) for r in rows]
        unit = pick_time_unit(values)
        header = f"{spec.header} ({unit})" if one_line else header_lines(spec.header, unit)
        return header, [format_time(v, unit, suffix=False) for v in values]
    header, texts = C.cells(spec, rows, totals)
    if spec.id in ("stack", "call_site"):
        texts = ["\n".join(short_site(f) for f in t.split("\n")) for t in texts]
    return (header if spec.kind == "text" or one_line else header_lines(header)), texts


def _natural(header: str, texts: list[str]) -> int:
    """The widest line of a column, header included."""
    return max((len(line) for t in [header, *texts] for line in t.split("\n")), default=0)


def _min_text(spec, header: str, natural: int, name_floor: int = 0) -> int:
    least = max(_MIN_TEXT.get(spec.id, 12), max(len(w) for w in header.split("\n")))
    if spec.id in ("name", "module"):
        least = max(least, name_floor)
    return min(natural, least)


def _need(cols, name_floor: int = 0) -> int:
    """Characters a table of these columns needs with its text columns at their minimum:
    each column takes its width plus 2 (padding and the divider), less 2 for the last."""
    numbers = sum(c[3] + 2 for c in cols if c[0].kind != "text")
    texts = sum(_min_text(c[0], c[1], c[3], name_floor) + 2 for c in cols if c[0].kind == "text")
    return numbers + texts - 2


def fit_columns(columns: list, width: int = WIDTH, name_floor: int = 0) -> tuple[list, list, dict]:
    """Fit columns in ``width`` characters: text columns shrink (down to a minimum), then
    numeric columns are left out in :func:`profiler.columns.drop_order` until the rest fit.

    Args:
        columns: (spec, header, cells, natural width) tuples.
        name_floor: the name (or module) column is not squeezed below this (nor below its
            natural width's minimum, :data:`_MIN_TEXT`) before columns are left out.
    Returns:
        (kept, left out, spec id -> width of each text column), in their original order.
    """
    from gradtrace.profiler.columns import drop_order  # noqa: PLC0415 - keep module import cheap

    def need(cols) -> int:
        return _need(cols, name_floor)

    kept = list(columns)
    for drop in drop_order():
        if need(kept) <= width:
            break
        kept = [c for c in kept if c[0].id != drop]
    # Each text column starts at its minimum (when the numbers leave room for the minimums;
    # else at 4) and what is left is shared out, a character at a time, among those that
    # want more, up to their natural width.
    texts = [c for c in kept if c[0].kind == "text"]
    floor = need(kept) <= width
    widths = {c[0].id: min(c[3], _min_text(c[0], c[1], c[3], name_floor) if floor else 4) for c in texts}
    room = width - sum(c[3] + 2 for c in kept if c[0].kind != "text") - 2 * len(texts) + 2
    room -= sum(widths.values())
    wanting = [c for c in texts if widths[c[0].id] < c[3]]
    while room > 0 and wanting:
        for c in list(wanting):
            if room <= 0:
                break
            widths[c[0].id] += 1
            room -= 1
            if widths[c[0].id] >= c[3]:
                wanting.remove(c)
    return kept, [c for c in columns if c not in kept], widths


def spec_table(rows: Sequence, specs: list, totals: dict | None = None, *, title: str | None = None,
               plain: bool = False, highlight: str | None = None, footer: Sequence[str] = (),
               fit: bool = True, width: int | None = None):
    """Rows as a rich table with one column per :class:`profiler.columns.ColumnSpec`.

    Headers are the spec's (PyTorch's) headers, each on one line when the width allows it
    (secondary columns are left out first, see :func:`profiler.columns.one_line_drops`), else broken into
    lines; each time column picks its own unit from its largest value and states it in the
    header (``Self CPU (ms)``), so cells are bare numbers.
    Text cells too long for their column are shortened by :func:`shorten` (never wrapped
    mid-word).

    Args:
        rows: row objects with the specs' fields (times in microseconds).
        specs: the columns, from :mod:`profiler.columns`.
        totals: field -> the 100% of its percentage column (us).
        highlight: the field whose largest values are highlighted.
        footer: lines shown under the table.
        fit: fit the table in ``width`` (:func:`fit_columns`); a line under the table names
            the columns left out.
        width: characters available (the console's width; default :data:`WIDTH`).
    Returns:
        A rich renderable: the table, then the footer lines.
    """
    from gradtrace.profiler import columns as C  # noqa: PLC0415 - keep module import cheap

    totals = totals or {}
    width = width or WIDTH

    def build(one_line: bool) -> list:
        cols = []
        for spec in specs:
            header, texts = _column_cells(spec, rows, totals, one_line)
            cols.append((spec, header, texts, _natural(header, texts)))
        return cols

    columns = build(one_line=True)
    if fit:
        # One-line headers must leave the names readable: secondary columns go to keep the
        # name column at least _ONE_LINE_NAME wide.
        kept, left_out, text_widths = fit_columns(columns, width, _ONE_LINE_NAME)
        wrapped = fit_columns(build(one_line=False), width)
        # Headers stay on one line (torch's names, greppable) unless that leaves out a main
        # column (not a secondary one) that wrapped names would keep.
        kept_wrapped = {c[0].id for c in wrapped[0]}
        secondary = C.one_line_drops()
        if _need(kept, _ONE_LINE_NAME) > width or any(c[0].id not in secondary and c[0].id in kept_wrapped
                                      for c in left_out):
            kept, left_out, text_widths = wrapped
        columns = kept
    else:
        left_out, text_widths = [], {c[0].id: c[3] for c in columns if c[0].kind == "text"}
    table = _table(title, plain)
    cells = []
    for spec, header, texts, _ in columns:
        if spec.kind == "text":
            w = text_widths[spec.id]
            table.add_column(header, justify="left", no_wrap=True, overflow="crop", width=w)
            cells.append([shorten(t, w, plain) for t in texts])
        else:
            table.add_column(header, justify="right", no_wrap=True)
            cells.append(texts)
    values = [float(getattr(r, highlight)) for r in rows] if highlight else [0.0] * len(rows)
    for k, style in enumerate(_row_styles(values, plain)):
        table.add_row(*[c[k] for c in cells], style=style or None)
    notes = list(footer)
    if left_out and rows:
        notes.append("left out to fit: " + ", ".join(c[0].header for c in left_out) + " (--json has every column)")
    if not notes:
        return table
    return Group(table, Text("\n".join(notes), style="" if plain else "dim"))


def diff_table(result, *, limit: int | None = None, plain: bool = False, title: str | None = None,
               width: int | None = None):
    """The rows of :func:`profiler.diff` (a ``ProfileDiff``): regressions red, improvements green.

    Columns: name (and call site), calls in A and B, then the sort metric in A and B, its change
    (B - A) and relative change; the CPU total's relative change when the sort metric is a self
    time. A row is red when B is slower on the sort metric, green when faster.

    Names too long for the ``width`` left by the numbers are shortened by :func:`shorten`.

    Returns:
        A rich renderable: the table, then the totals.
    """
    width = width or WIDTH
    rows = list(result)
    if limit is not None and limit > 0:
        rows = rows[:limit]
    metric = result.sort_by if result.sort_by in result.metrics else next(iter(result.metrics))
    label = result.metrics[metric]
    from gradtrace.profiler import columns as C  # noqa: PLC0415 - keep module import cheap
    from gradtrace.profiler.columns import COLUMNS, STAT_OP_COLUMNS  # noqa: PLC0415

    calls = COLUMNS["count"].header
    table = _table(title, plain)
    with_sites = any(r.call_site for r in rows)
    # The per-step test's columns (ratio, interval, p-value, verdict) when there are steps.
    stat_specs = [COLUMNS[c] for c in STAT_OP_COLUMNS] if result.steps_a and result.steps_b else []
    stat_cells = [C.cells(spec, rows, {}) for spec in stat_specs]
    stat_width = sum(max(len(h) if spec.kind == "text" else 6, *(len(t) for t in texts)) + 2
                     for spec, (h, texts) in zip(stat_specs, stat_cells)) if rows else 0
    # About 10 characters per number column; what is left goes to the name (and call site).
    room = max(14, width - (10 * 5 if stat_specs else 11 * (6 + metric.startswith("self_"))) - 2 - stat_width)
    name_w = min(max((len(r.name) for r in rows), default=4), room // 2 if with_sites else room)
    name_w = max(name_w, 4)
    site_w = max(9, room - name_w - 2)
    table.add_column("Name", justify="left", no_wrap=True, overflow="crop", width=name_w)
    if with_sites:
        site_w = min(site_w, max((len(short_site(r.call_site or "")) for r in rows), default=9))
        table.add_column(COLUMNS["call_site"].header, no_wrap=True, overflow="crop", width=max(site_w, 9))
    unit = pick_time_unit([r.a.get(metric, 0.0) for r in rows] + [r.b.get(metric, 0.0) for r in rows])
    delta_unit = pick_time_unit(r.delta(metric) for r in rows)
    headers = [header_lines(f"{calls} A"), header_lines(f"{calls} B"), header_lines(f"{label} A", unit),
               header_lines(f"{label} B", unit), header_lines("Change", delta_unit)]
    # With per-step statistics the ratio of medians takes the place of the relative changes.
    if not stat_specs:
        headers.append("Change\n%")
    second = None
    if not stat_specs and metric.startswith("self_") and metric[len("self_"):] in result.metrics:
        second = metric[len("self_"):]
        headers.append(header_lines(result.metrics[second] + " change %"))
    for header in headers:
        table.add_column(header, justify="right", no_wrap=True)
    for spec, (header, _) in zip(stat_specs, stat_cells):
        table.add_column(header if spec.kind == "text" else header_lines(header), no_wrap=True,
                         justify="left" if spec.kind == "text" else "right")
    for k, r in enumerate(rows):
        delta = r.delta(metric)
        cells = [shorten(r.name, name_w, plain)] + ([shorten(short_site(r.call_site or ""), max(site_w, 9), plain)]
                                             if with_sites else [])
        cells += [str(r.count_a) if r.status != "only_b" else "-",
                  str(r.count_b) if r.status != "only_a" else "-",
                  format_time(r.a.get(metric, 0.0), unit, suffix=False),
                  format_time(r.b.get(metric, 0.0), unit, suffix=False),
                  ("+" if delta > 0 else "") + format_time(delta, delta_unit, suffix=False)]
        if not stat_specs:
            cells.append(r.relative_text(metric))
        if second:
            cells.append(r.relative_text(second))
        cells += [texts[k] for _, texts in stat_cells]
        table.add_row(*cells, style=None if plain else _diff_style(r.verdict, delta))
    footer = result.footer()[:-1]
    footer.append(f"{len(result)} rows, sorted by the size of the change in {result.sort_by}; "
                  "red: B slower, green: B faster" + (" (by the verdict where a row was tested)" if stat_specs else ""))
    parts = [table, Text("\n".join(footer), style="" if plain else "dim")]
    if result.components:
        from gradtrace.profiler.stats import for_display  # noqa: PLC0415

        specs = [COLUMNS[c] for c in C.STAT_COLUMNS]
        shown = for_display(result.components, limit or 0)
        left = len(result.components) - len(shown)
        comp = spec_table(shown, specs, {"share": 1.0}, plain=plain, fit=True, width=width,
                          title="Step, phases, modules, kernels (per-step medians)",
                          footer=[f"{left} more module and kernel rows (--limit 0 shows all)"] if left else ())
        parts.insert(0, comp)
    return Group(*parts)


def _diff_style(verdict: str | None, delta: float) -> str | None:
    """Red when B is slower, green when faster: by the verdict for a tested row (unchanged: no
    colour, the change is within the noise), by the sign of the change otherwise."""
    if verdict in ("slower", "faster"):
        return "red" if verdict == "slower" else "green"
    if verdict is not None or not delta:
        return None
    return "red" if delta > 0 else "green"


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
