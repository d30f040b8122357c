"""``table``, ``export``, ``view`` and ``diff``: load a saved profile, call the library, render.

None of these import the engine; they read the profile file (DESIGN §1, STYLE 9).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from .errors import CLIError, check_output_path, load_profile

__all__ = ["cmd_table", "cmd_export", "cmd_view", "cmd_diff", "profile_tables", "table_json"]

GROUPS = ("name", "shape", "stack", "module", "forward-op")


def _check_sort(sort_by: str | None) -> None:
    from gradtrace.profiler.aggregate import SORT_KEYS  # noqa: PLC0415

    if sort_by is not None and sort_by not in SORT_KEYS:
        raise CLIError(f"unknown sort key {sort_by!r}; use one of: {', '.join(sorted(SORT_KEYS))}")


def _check_group(data, group_by: str, stack_n: int) -> None:
    if group_by not in GROUPS:
        raise CLIError(f"unknown group {group_by!r}; use one of: {', '.join(GROUPS)}")
    if group_by == "shape" and not (data.metadata.get("record_shapes") or data.metadata.get("with_flops")):
        raise CLIError("this profile has no input shapes; record it with --record-shapes "
                       "(profiler.profile(record_shapes=True)) to group by shape")
    if group_by == "stack":
        if not data.metadata.get("with_stack"):
            raise CLIError("this profile has no call stacks; record it with --with-stack "
                           "(profiler.profile(with_stack=True)) to group by stack")
        if stack_n < 1:
            raise CLIError(f"--stack-n must be at least 1, got {stack_n}")
    if group_by == "module" and not any(s.startswith("nn.Module:") for s in data.strings):
        raise CLIError("this profile has no nn.Module ranges; record it with --with-modules "
                       "(profiler.profile(with_modules=True)) to group by module")


def _footer(data, key_avgs) -> list[str]:
    from gradtrace.profiler.table import table_footer  # noqa: PLC0415

    lines = table_footer(data, key_avgs.self_cpu_time_total, key_avgs.self_cuda_time_total)
    meta = data.metadata
    steps = meta.get("steps")
    lines.append(f"{data.n_events:,} events"
                 + (f", steps {steps[0]}-{steps[1]}" if steps and steps[1] > steps[0] else "")
                 + f", devices {', '.join(meta.get('devices') or ['cpu'])}")
    return lines


def _rows(data, sort_by: str | None, limit: int, group_by: str, stack_n: int, device_rows: bool):
    """The library's rows for a table: (rows sorted and cut, their columns, totals, the
    key_averages behind them or None, the field to highlight)."""
    from gradtrace.profiler import columns  # noqa: PLC0415
    from gradtrace.profiler.aggregate import sort_rows  # noqa: PLC0415

    if group_by == "forward-op":
        summary = data.forward_backward_summary()
        return _sorted_fb_rows(summary, sort_by, limit), summary.columns(), {}, None, (
            "forward_backward_cuda_time_total" if _wants_cuda(sort_by) else "forward_backward_cpu_time_total")
    if group_by == "module":
        return _module_tree_rows(data, limit)
    sort_key = sort_by or ("self_cuda_time_total" if data.has_device_time else "self_cpu_time_total")
    key_avgs = data.key_averages(group_by_input_shape=group_by == "shape",
                                 group_by_stack_n=stack_n if group_by == "stack" else 0,
                                 group_by_device=device_rows, merge_steps=True)
    from gradtrace.cli.render import sort_metric  # noqa: PLC0415

    return (sort_rows(key_avgs, sort_key, limit), key_avgs.columns(), key_avgs.totals, key_avgs,
            sort_metric(sort_key))


def _module_tree_rows(data, limit: int):
    """The module tree in tree order (cut after ``limit`` nodes), its columns and totals."""
    from gradtrace.profiler import columns  # noqa: PLC0415
    from gradtrace.profiler.module_tree import flatten, module_tree  # noqa: PLC0415

    nodes = flatten(module_tree(data))
    specs = columns.select(columns.MODULE_TREE_COLUMNS, columns.available(data, module=True))
    totals = {"forward_backward_cpu_time_total": data.total_average().self_cpu_time_total}
    return (nodes[:limit] if limit and limit > 0 else nodes), specs, totals, None, "forward_backward_cpu_time_total"


def _module_footer(data, limit: int) -> list[str]:
    from gradtrace.profiler.module_tree import flatten, module_tree  # noqa: PLC0415

    n = len(flatten(module_tree(data)))
    lines = ["Fwd: the module's forward ops; Bwd: the backward nodes they created (by sequence_nr); "
             "Self: outside child modules; total: with them. Fwd+Bwd CPU % is of the profile's "
             "self CPU time, (no module) included."]
    if limit and 0 < limit < n:
        lines.append(f"{n - limit} more modules below (--limit 0 shows the whole tree)")
    return lines


def _wants_cuda(sort_by: str | None) -> bool:
    return bool(sort_by) and ("cuda" in sort_by or "device" in sort_by)


def profile_tables(data, *, sort_by: str | None = None, limit: int = 20, group_by: str = "name",
                   stack_n: int = 3, device_rows: bool = False, plain: bool = False, title: str | None = None):
    """The rich renderable for ``gradtrace table`` (pure: profile in, table out).

    The rows, their grouping and their columns are the profiler's (``key_averages``,
    ``module_summary``, ``forward_backward_summary`` and :mod:`profiler.columns`); this only
    sorts, cuts and renders them.

    Raises:
        CLIError: unknown sort key or group, or a group the profile lacks data for.
    """
    from . import render  # noqa: PLC0415

    _check_sort(sort_by)
    _check_group(data, group_by, stack_n)
    rows, specs, totals, key_avgs, highlight = _rows(data, sort_by, limit, group_by, stack_n, device_rows)
    default_title = {"forward-op": "Forward + backward cost per forward op",
                     "module": "Forward + backward time per nn.Module (the module tree)"}.get(group_by)
    footer = _footer(data, key_avgs) if key_avgs is not None else ()
    if group_by == "module":
        footer = _module_footer(data, limit)
    return render.spec_table(rows, specs, totals, title=title or default_title, plain=plain,
                             highlight=highlight, footer=footer)


def _sorted_fb_rows(summary, sort_by: str | None, limit: int):
    rows = list(summary)
    if sort_by:
        if _wants_cuda(sort_by):
            rows.sort(key=lambda r: r.forward_backward_cuda_time_total, reverse=True)
        elif sort_by == "count":
            rows.sort(key=lambda r: r.count, reverse=True)
    return rows[:limit] if limit and limit > 0 else rows


def table_json(data, *, sort_by: str | None = None, limit: int = 20, group_by: str = "name",
               stack_n: int = 3, device_rows: bool = False) -> list[dict]:
    """The rows of ``gradtrace table --json``: every field of the rows, keyed by column id
    (PyTorch's field names, percentages as ``<field>_percent``), times in microseconds."""
    from gradtrace.profiler import columns  # noqa: PLC0415

    _check_sort(sort_by)
    _check_group(data, group_by, stack_n)
    if group_by == "module":
        return _module_tree_json(data)
    rows, specs, totals, _, _ = _rows(data, sort_by, limit, group_by, stack_n, device_rows)
    shares = [s for s in specs if s.kind == "percent"]
    return [dict(r.to_dict(), **columns.row_values(r, shares, totals)) for r in rows]


def _module_tree_json(data) -> list[dict]:
    """The whole module tree as nested rows (``children``), with the share of each node."""
    from gradtrace.profiler.module_tree import module_tree  # noqa: PLC0415

    whole = data.total_average().self_cpu_time_total

    def share(d: dict) -> dict:
        d["forward_backward_cpu_time_total_percent"] = (
            100.0 * d["forward_backward_cpu_time_total"] / whole if whole else 0.0)
        for c in d["children"]:
            share(c)
        return d

    return [share(root.to_dict()) for root in module_tree(data)]


def _json_default(o):
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)


def cmd_table(args) -> int:
    from .render import emit, make_console  # noqa: PLC0415

    if args.group_by not in GROUPS:
        raise CLIError(f"unknown group {args.group_by!r}; use one of: {', '.join(GROUPS)}")
    _check_sort(args.sort)
    from gradtrace.profiler.ranks import is_run_dir  # noqa: PLC0415

    if is_run_dir(args.file):
        from .ranks import cmd_rank_table  # noqa: PLC0415 - a run folder: --nproc ranks or torch traces

        return cmd_rank_table(args)
    data = load_profile(args.file)
    opts = dict(sort_by=args.sort, limit=args.limit, group_by=args.group_by,
                stack_n=args.stack_n, device_rows=args.device_rows)
    if args.json:
        rows = table_json(data, **opts)
        sys.stdout.write(json.dumps(rows, indent=1, default=_json_default) + "\n")
        return 0
    console, plain = make_console()
    emit(console, profile_tables(data, plain=plain, **opts), plain)
    if args.group_by == "forward-op" and data.metadata.get("source") == "torch_trace":
        # A torch trace pairs backward with forward ops by sequence number, not one to one.
        from gradtrace.profiler.torch_trace import forward_backward_pairing  # noqa: PLC0415

        console.print(forward_backward_pairing(data).summary(), soft_wrap=True)
    return 0


# --------------------------------------------------------------------------- export


def _exporter(name: str):
    """The profile-file method or profiler function for an export, or a CLIError if missing."""
    from gradtrace import profiler  # noqa: PLC0415

    fn = None
    try:
        import importlib  # noqa: PLC0415

        module = {"export_chrome_trace": "gradtrace.profiler.chrome_trace",
                  "export_stacks": "gradtrace.profiler.stacks",
                  "export_speedscope": "gradtrace.profiler.stacks"}[name]
        mod = importlib.import_module(module)
        fn = getattr(mod, name, None)
    except ImportError:
        pass
    if fn is None:
        fn = getattr(profiler, name, None)
    return fn


def cmd_export(args) -> int:
    from .render import make_console  # noqa: PLC0415

    if args.metric and not args.stacks:
        raise CLIError("--metric goes with --stacks; e.g. --stacks run.folded --metric self_cpu_time_total")
    data = load_profile(args.file)
    if args.chrome:
        out, method = check_output_path(args.chrome), "export_chrome_trace"
    elif args.stacks:
        out, method = check_output_path(args.stacks), "export_stacks"
    else:
        out, method = check_output_path(args.speedscope), "export_speedscope"
    bound = getattr(data, method, None)
    kwargs = {}
    if method == "export_stacks" and args.metric:
        kwargs["metric"] = args.metric
    if bound is None:
        fn = _exporter(method)
        if fn is None:
            raise CLIError(f"this gradtrace has no {method} (the exports of profiler issue 6 are "
                           "not installed); upgrade gradtrace")
        call = lambda: fn(data, str(out), **kwargs)  # noqa: E731
    else:
        call = lambda: bound(str(out), **kwargs)  # noqa: E731
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        call()
    except (ValueError, KeyError) as exc:
        raise CLIError(f"{method}: {exc}") from None
    except OSError as exc:
        raise CLIError(f"{out}: cannot write ({exc.strerror or exc})") from None
    console, _ = make_console()
    size = out.stat().st_size if out.exists() else 0
    console.print(f"wrote {out} ({size:,} bytes)")
    if args.chrome:
        console.print("open it in https://ui.perfetto.dev or chrome://tracing")
    elif args.speedscope:
        console.print("open it in https://www.speedscope.app")
    else:
        console.print("make a flame graph: flamegraph.pl " + str(out) + " > flame.svg")
    return 0


# --------------------------------------------------------------------------- view


def cmd_view(args) -> int:
    try:
        from gradtrace import viewer  # noqa: PLC0415
    except ImportError as exc:
        raise CLIError(f"the dashboard cannot start: {exc}; install gradtrace with its dependencies "
                       "(pip install -e .)") from None
    serve = getattr(viewer, "serve", None)
    if serve is None:
        raise CLIError("this gradtrace has no viewer.serve (the dashboard of issue 8 is not installed)")
    if not 0 < args.port < 65536:
        raise CLIError(f"--port {args.port}: give a port between 1 and 65535")
    from gradtrace.profiler.ranks import is_run_dir, load_run  # noqa: PLC0415

    if is_run_dir(args.file):   # a run folder of ranks: the dashboard's Ranks page
        try:
            load_run(args.file)
        except (FileNotFoundError, ValueError) as exc:
            raise CLIError(str(exc)) from None
    else:
        load_profile(args.file)  # fail fast, one line, before the server starts
    if args.compare:
        load_profile(args.compare)
    url = f"http://{'127.0.0.1' if args.host in ('0.0.0.0', '') else args.host}:{args.port}/"
    if not args.no_browser:
        import threading  # noqa: PLC0415
        import webbrowser  # noqa: PLC0415

        threading.Timer(1.0, lambda: webbrowser.open(url)).start()
    try:
        if args.compare:
            serve(args.file, host=args.host, port=args.port, compare=args.compare)
        else:
            serve(args.file, host=args.host, port=args.port)
    except OSError as exc:
        raise CLIError(f"cannot listen on {args.host}:{args.port} ({exc.strerror or exc}); "
                       "try another --port") from None
    except KeyboardInterrupt:
        return 0
    return 0


# --------------------------------------------------------------------------- diff


def cmd_diff(args) -> int:
    from gradtrace import profiler  # noqa: PLC0415

    from .render import diff_table, emit, make_console  # noqa: PLC0415

    diff = getattr(profiler, "diff", None)
    if diff is None:
        raise CLIError("this gradtrace has no profiler.diff; upgrade gradtrace")
    a = load_profile(args.a)
    b = load_profile(args.b)
    by = "forward_backward" if args.by == "forward-op" else "name"
    try:
        result = diff(a, b, by=by, sort_by=args.sort)
    except ValueError as exc:
        raise CLIError(f"{exc}") from None
    if args.json:
        rows = result.rows()
        rows = rows[:args.limit] if args.limit and args.limit > 0 else rows
        sys.stdout.write(json.dumps(rows, indent=1, default=_json_default) + "\n")
        return 0
    console, plain = make_console()
    console.print(f"A = {args.a}\nB = {args.b}", soft_wrap=True)
    emit(console, diff_table(result, limit=args.limit, plain=plain), plain)
    return 0
