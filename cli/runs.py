"""``gradtrace runs add|list|trend|compare``: a history of runs in SQLite (:mod:`profiler.history`).

``add`` stores each profile's per-step summaries (not the trace); ``list`` shows the runs;
``trend`` one series across them with its change points; ``compare`` the statistical diff of
two stored runs, the same verdicts as ``gradtrace diff`` of their profiles (and the same
``--fail-on-regression`` gate).
"""
from __future__ import annotations

import json
import sys

from .errors import CLIError, load_profile

__all__ = ["cmd_runs_add", "cmd_runs_list", "cmd_runs_trend", "cmd_runs_compare", "parse_tags",
           "runs_table", "trend_table", "compare_table"]


def _store(args, create: bool = False):
    from gradtrace.profiler.history import HistoryError, RunStore  # noqa: PLC0415

    from gradtrace.profiler.history import DEFAULT_STORE  # noqa: PLC0415

    try:
        return RunStore(args.store or DEFAULT_STORE, create=create)
    except HistoryError as exc:
        raise CLIError(str(exc)) from None


def parse_tags(items: list[str] | None) -> dict[str, str]:
    """``["commit=abc", "branch=main"]`` -> a dict; a CLIError for an item without ``=``."""
    tags = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CLIError(f"--tag {item!r}: give KEY=VALUE, e.g. --tag commit=abc123")
        tags[key.strip()] = value.strip()
    return tags


def _dump(obj) -> None:
    sys.stdout.write(json.dumps(obj, indent=1, default=str) + "\n")


# --------------------------------------------------------------------------- add, list


def cmd_runs_add(args) -> int:
    from gradtrace.profiler.stats import min_steps, significance_possible  # noqa: PLC0415

    from .render import make_console  # noqa: PLC0415

    tags = parse_tags(args.tag)
    profiles = [(path, load_profile(path)) for path in args.files]   # all readable before any is added
    console, _ = make_console()
    from gradtrace.profiler.history import HistoryError  # noqa: PLC0415

    with _store(args, create=True) as store:
        for path, data in profiles:
            try:
                run_id = store.add(data, path, tags)
            except HistoryError as exc:
                raise CLIError(str(exc)) from None
            n = store.resolve(run_id).n_steps
            console.print(f"added #{run_id} {path} ({n} steps) to {store.path}", soft_wrap=True, highlight=False)
            if not significance_possible(n, n):
                print(f"warning: {path}: {n} ProfilerStep ranges; runs compare needs at least {min_steps()} "
                      "per run for a verdict", file=sys.stderr)
    return 0


def runs_table(runs: list, plain: bool = False, width: int | None = None):
    """The rich table of ``runs list``."""
    from gradtrace.profiler.format import format_time  # noqa: PLC0415

    from .render import _table  # noqa: PLC0415

    table = _table(None, plain)
    for header, justify in (("Id", "right"), ("Added (UTC)", "left"), ("Steps", "right"),
                            ("Step median", "right"), ("Tags", "left"), ("Source", "left")):
        table.add_column(header, justify=justify, no_wrap=header != "Source", overflow="fold")
    for r in runs:
        median = "-" if r.step_median_us is None else format_time(r.step_median_us)
        tags = " ".join(f"{k}={v}" for k, v in sorted(r.tags.items()))
        table.add_row(str(r.id), r.added_at.replace("+00:00", ""), str(r.n_steps), median, tags, r.source)
    return table


def cmd_runs_list(args) -> int:
    from .render import emit, make_console  # noqa: PLC0415

    with _store(args) as store:
        runs = store.runs()
    if args.json:
        _dump([r.to_dict() for r in runs])
        return 0
    console, plain = make_console()
    emit(console, runs_table(runs, plain, console.width), plain)
    return 0


# --------------------------------------------------------------------------- trend


def _series(args) -> tuple[str, str]:
    from gradtrace.profiler.stats import STEP_ROW  # noqa: PLC0415

    for kind in ("op", "module", "kernel", "phase"):
        name = getattr(args, kind, None)
        if name:
            return kind, name
    return "step", STEP_ROW


def trend_table(result: dict, plain: bool = False):
    """The rich table of ``runs trend``: one row per run, a change point marked where a level starts."""
    from rich.console import Group  # noqa: PLC0415
    from rich.text import Text  # noqa: PLC0415

    from gradtrace.profiler.format import format_ratio, format_time  # noqa: PLC0415

    from .render import _table  # noqa: PLC0415

    starts = {c["index"]: c for c in result["change_points"]}
    table = _table(f"{result['kind']} {result['name']} ({result['clock']}): median per step, per run", plain)
    for header, justify in (("Id", "right"), ("Added (UTC)", "left"), ("Tags", "left"),
                            ("Median", "right"), ("Change point", "left")):
        table.add_column(header, justify=justify, no_wrap=True)
    for i, r in enumerate(result["runs"]):
        cp = starts.get(i)
        mark = f"new level {format_ratio(cp['ratio'])}" if cp else ""
        style = None if plain or not cp else ("red" if cp["ratio"] > 1 else "green")
        tags = " ".join(f"{k}={v}" for k, v in sorted(r["tags"].items()))
        table.add_row(str(r["id"]), r["added_at"].replace("+00:00", ""), tags, format_time(r["median_us"]),
                      mark, style=style)
    n = len(result["change_points"])
    note = (f"{n} change point{'s' if n != 1 else ''} (an L1 step fit of the medians, profiler.changepoints)"
            if result["runs"] else "no stored run has this series")
    return Group(table, Text(note, style="" if plain else "dim"))


def cmd_runs_trend(args) -> int:
    from gradtrace.profiler.history import trend  # noqa: PLC0415

    from .render import emit, make_console  # noqa: PLC0415

    kind, name = _series(args)
    with _store(args) as store:
        known = store.series_names(kind) if kind != "step" else [name]
        if kind == "module" and name not in known and f"nn.Module: {name}" in known:
            name = f"nn.Module: {name}"      # --module Linear_0 for the range nn.Module: Linear_0
        if name not in known:
            hint = f"; e.g. {', '.join(known[:5])}" if known else ""
            raise CLIError(f"no {kind} named {name!r} in {store.path}{hint}")
        result = trend(store, kind, name, args.clock)
    if args.json:
        _dump(result)
        return 0
    console, plain = make_console()
    emit(console, trend_table(result, plain), plain)
    return 0


# --------------------------------------------------------------------------- compare


def compare_table(rows: list, title: str, plain: bool = False, width: int | None = None, limit: int = 0):
    """The statistical diff of two stored runs: the step, phases, then modules, kernels and ops
    by the size of the change, through the column specs of :mod:`profiler.columns`."""
    from gradtrace.profiler import columns  # noqa: PLC0415
    from gradtrace.profiler.stats import for_display  # noqa: PLC0415

    from .render import spec_table  # noqa: PLC0415

    specs = [columns.COLUMNS[c] for c in columns.STAT_COLUMNS]
    return spec_table(for_display(rows, limit), specs, {"share": 1.0}, title=title, plain=plain, width=width)


def cmd_runs_compare(args) -> int:
    from gradtrace.profiler.stats import compare, regressions, significance_possible  # noqa: PLC0415

    from .commands import gate_status  # noqa: PLC0415
    from .render import emit, make_console  # noqa: PLC0415

    if not 0.0 <= args.min_share < 100.0:
        raise CLIError(f"--min-share {args.min_share:g}: give a percentage of the step, 0 to below 100")
    with _store(args) as store:
        from gradtrace.profiler.history import HistoryError  # noqa: PLC0415

        try:
            ra, rb = store.resolve(args.a), store.resolve(args.b)
        except HistoryError as exc:
            raise CLIError(str(exc)) from None
        clock = args.clock
        for r in (ra, rb):
            if clock not in r.clocks:
                raise CLIError(f"run {r.label()} has no {clock} times (it was recorded without a GPU)")
        sa, sb = store.samples(ra, clock), store.samples(rb, clock)
    rows = compare(sa, sb, min_share=args.min_share / 100.0)
    gate = args.fail_on_regression
    if gate is not None and not significance_possible(sa.n_steps, sb.n_steps):
        raise CLIError(f"runs {ra.label()} ({sa.n_steps} steps) and {rb.label()} ({sb.n_steps}): "
                       "too few steps for --fail-on-regression")
    if args.json:
        _dump({"a": ra.to_dict(), "b": rb.to_dict(), "rows": [r.to_dict() for r in rows]})
    else:
        console, plain = make_console()
        title = f"A = {ra.label()} ({ra.source}), B = {rb.label()} ({rb.source}); self {clock.upper()} time"
        emit(console, compare_table(rows, title, plain, console.width, args.limit), plain)
    return 0 if gate is None else gate_status(regressions(rows, gate), gate, "gradtrace runs compare")
