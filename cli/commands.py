"""``table``, ``export``, ``view`` and ``diff``: load a saved profile, call the library, render.

None of these import the engine; they read the profile file (DESIGN §1, STYLE 9).
"""
from __future__ import annotations

import json
import sys

from .errors import CLIError, check_output_path, load_profile

__all__ = ["cmd_table", "cmd_export", "cmd_view", "cmd_diff", "profile_tables", "table_json",
           "memory_tables", "memory_json"]

# The groupings of `gradtrace table --group-by` (main.py builds the option from this).
GROUPS = ("name", "shape", "stack", "module", "forward-op")


FORWARD_OP_EXPLAINED = ("Self: the op's own time and that of the backward nodes it created itself; over "
                        "all rows it adds up to at most the profile total. Total: with the ops inside "
                        "it and their backward nodes (cross_entropy includes its log_softmax), so rows overlap, as CPU "
                        "total does.")


def sort_field(sort_by: str | None, group_by: str = "name") -> str | None:
    """The row field a ``--sort`` key orders by, for a table grouping (one spelling everywhere:
    PyTorch's ``sort_by`` names, :func:`profiler.metrics.sort_keys`).

    Raises:
        CLIError: a key that is not a column of these rows.
    """
    from gradtrace.profiler.metrics import sort_keys  # noqa: PLC0415

    if sort_by is None:
        return None
    keys = sort_keys()
    if group_by == "forward-op":
        field = keys.get(sort_by, sort_by)
        fields = forward_op_sort_fields()
        if field not in fields:
            raise CLIError(f"unknown sort key {sort_by!r} for forward-op rows; use one of: {', '.join(fields)}")
        return field
    if sort_by not in keys:
        raise CLIError(f"unknown sort key {sort_by!r}; use one of: {', '.join(sorted(keys))}")
    return keys[sort_by]


def forward_op_sort_fields() -> tuple[str, ...]:
    """What ``--group-by forward-op`` (and ``diff --by forward-op``) rows can be sorted by: the
    table's spellings of the fields these rows have, and their own fields."""
    from gradtrace.profiler.metrics import forward_backward_row_fields  # noqa: PLC0415

    return ("count", *forward_backward_row_fields(), "backward_count")


def _check_sort(sort_by: str | None, group_by: str = "name") -> None:
    sort_field(sort_by, group_by)


def check_sort_data(data, sort_by: str | None) -> None:
    """A sort key the profile has no data for orders rows arbitrarily: refuse it, naming the
    option that records that data (the metric's ``needs``, :data:`profiler.metrics.NEEDS`).

    Raises:
        CLIError: e.g. ``--sort flops`` on a profile recorded without ``--with-flops``.
    """
    from gradtrace.profiler.columns import COLUMNS  # noqa: PLC0415
    from gradtrace.profiler.metrics import NEEDS, sort_keys  # noqa: PLC0415

    field = sort_keys().get(sort_by or "", sort_by or "")
    spec = COLUMNS.get(field)
    need = NEEDS.get(spec.needs) if spec is not None else None
    chain = []
    while need is not None:
        chain.insert(0, need)
        need = NEEDS.get(need.requires)
    for need in chain:
        if not need.met(data):
            raise CLIError(f"--sort {sort_by}: this profile has no {need.what}; record it {need.how}")


def _has_modules(data) -> bool:
    """True when some event is an ``nn.Module: ...`` range (the name alone can be interned
    by a collector that then dropped the ranges)."""
    import numpy as np  # noqa: PLC0415

    ids = [i for i, s in enumerate(data.strings) if s.startswith("nn.Module:")]
    return bool(ids) and bool(np.isin(data.event_columns["name_id"], ids).any())


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
    if group_by == "module" and not _has_modules(data):
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


def _rows(data, sort_by: str | None, limit: int, group_by: str, stack_n: int, device_rows: bool,
          per_step: bool = False, tree_nodes: list | None = None):
    """The library's rows for a table: (rows sorted and cut, their columns, totals, the
    key_averages behind them or None, the field to highlight); ``tree_nodes``: the module
    tree's nodes when the caller has them (a tree of a 10M-event profile takes a second)."""
    from gradtrace.profiler.aggregate import sort_rows  # noqa: PLC0415

    if group_by == "forward-op":
        summary = data.forward_backward_summary()
        field = sort_field(sort_by, group_by) or "forward_backward_self_cpu_time_total"
        rows = sorted(summary, key=lambda r: getattr(r, field), reverse=True)
        return (rows[:limit] if limit and limit > 0 else rows), summary.columns(), {}, None, field
    if group_by == "module":
        return _module_tree_rows(data, limit, tree_nodes)
    sort_key = sort_by or ("self_cuda_time_total" if data.has_device_time else "self_cpu_time_total")
    key_avgs = data.key_averages(group_by_input_shape=group_by == "shape",
                                 group_by_stack_n=stack_n if group_by == "stack" else 0,
                                 group_by_device=device_rows, merge_steps=not per_step)
    from gradtrace.cli.render import sort_metric  # noqa: PLC0415

    return (sort_rows(key_avgs, sort_key, limit), key_avgs.columns(), key_avgs.totals, key_avgs,
            sort_metric(sort_key))


def _module_tree_rows(data, limit: int, nodes: list | None = None):
    """The module tree in tree order (cut after ``limit`` nodes), its columns and totals."""
    from gradtrace.profiler import columns  # noqa: PLC0415
    from gradtrace.profiler.module_tree import flatten, module_tree  # noqa: PLC0415

    nodes = flatten(module_tree(data)) if nodes is None else nodes
    specs = columns.select(columns.MODULE_TREE_COLUMNS, columns.available(data, module=True))
    totals = {"forward_backward_cpu_time_total": data.total_average().self_cpu_time_total}
    return (nodes[:limit] if limit and limit > 0 else nodes), specs, totals, None, "forward_backward_cpu_time_total"


def _module_footer(n: int, limit: int) -> list[str]:
    """The module table's footer, for a tree of ``n`` nodes cut after ``limit``."""
    lines = ["Fwd: the module's forward ops; Bwd: the backward nodes they created (by sequence_nr); "
             "Self: outside child modules; total: with them. Fwd+Bwd CPU % is of the profile's "
             "self CPU time, (no module) included."]
    if limit and 0 < limit < n:
        lines.append(f"{n - limit} more modules below (--limit 0 shows the whole tree)")
    return lines


def profile_tables(data, *, sort_by: str | None = None, limit: int = 20, group_by: str = "name",
                   stack_n: int = 3, device_rows: bool = False, per_step: bool = False,
                   plain: bool = False, title: str | None = None, width: int | None = None):
    """The rich renderable for ``gradtrace table`` (pure: profile in, table out).

    The rows, their grouping and their columns are the profiler's (``key_averages``,
    ``module_summary``, ``forward_backward_summary`` and :mod:`profiler.columns`); this only
    sorts, cuts and renders them.

    Raises:
        CLIError: unknown sort key or group, or a group the profile lacks data for.
    """
    from . import render  # noqa: PLC0415

    _check_sort(sort_by, group_by)
    check_sort_data(data, sort_by)
    _check_group(data, group_by, stack_n)
    # The module tree whole: its rows are cut after ``limit``, its footer counts the rest.
    tree_nodes = None
    if group_by == "module":
        from gradtrace.profiler.module_tree import flatten, module_tree  # noqa: PLC0415

        tree_nodes = flatten(module_tree(data))
    rows, specs, totals, key_avgs, highlight = _rows(data, sort_by, limit, group_by, stack_n, device_rows,
                                                     per_step, tree_nodes)
    default_title = {"forward-op": "Forward + backward cost per forward op",
                     "module": "Forward + backward time per nn.Module (the module tree)"}.get(group_by)
    footer = _footer(data, key_avgs) if key_avgs is not None else (
        [FORWARD_OP_EXPLAINED] if group_by == "forward-op" else ())
    if group_by == "module":
        footer = _module_footer(len(tree_nodes), limit)
    return render.spec_table(rows, specs, totals, title=title or default_title, plain=plain,
                             highlight=highlight, footer=footer, width=width)


def table_json(data, *, sort_by: str | None = None, limit: int = 20, group_by: str = "name",
               stack_n: int = 3, device_rows: bool = False, per_step: bool = False) -> list[dict]:
    """The rows of ``gradtrace table --json``: every field of the rows, keyed by column id
    (PyTorch's field names, percentages as ``<field>_percent``), times in microseconds."""
    from gradtrace.profiler import columns  # noqa: PLC0415

    _check_sort(sort_by, group_by)
    check_sort_data(data, sort_by)
    _check_group(data, group_by, stack_n)
    if group_by == "module":
        return _module_tree_json(data)
    rows, specs, totals, _, _ = _rows(data, sort_by, limit, group_by, stack_n, device_rows, per_step)
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


# --------------------------------------------------------------------------- table --memory


def _memory_rows(data, group_by: str, limit: int):
    """Rows of ``table --memory``: (kind rows per device, op or module rows cut to ``limit``,
    their columns, the peak of each device as a line).

    Raises:
        CLIError: no memory records; a grouping other than name or module; modules not recorded.
    """
    from types import SimpleNamespace  # noqa: PLC0415

    from gradtrace.profiler import columns  # noqa: PLC0415
    from gradtrace.profiler.format import format_bytes  # noqa: PLC0415
    from gradtrace.profiler.memory import kind_summary, memory_table  # noqa: PLC0415

    if not data.n_memory_records:
        raise CLIError("--memory: this profile has no memory records; record it with --memory "
                       "(profiler.profile(profile_memory=True))")
    if group_by not in ("name", "module"):
        raise CLIError(f"--memory groups by name or module, not {group_by!r}")
    _check_group(data, group_by, 0)
    mem = data.memory_columns
    kinds, peaks = [], []
    for dev in sorted(set(mem["device_id"].tolist())):
        device = data.strings[int(dev)]
        rows, peak = kind_summary(mem, data.memory_kinds, dev)
        total = int(mem["total_allocated"][peak])
        ev = int(data.analysis.memory_event[peak])
        where = f" inside {data.name_of(ev)}" if ev >= 0 else ""
        peaks.append(f"peak on {device}: {format_bytes(total)}{where}")
        kinds += [SimpleNamespace(**dict(vars(r), memory_device=device, kind=r.label)) for r in rows]
    rows = memory_table(data, "module" if group_by == "module" else "op")
    shown = [k for k in columns.MEMORY_BY_OP_COLUMNS if rows and k in rows[0]]
    specs = [columns.COLUMNS[k] for k in shown]
    if group_by == "module":
        specs[0] = columns.COLUMNS["module"]
        rows = [dict(r, module=r["name"]) for r in rows]
    rows = [SimpleNamespace(**r) for r in rows]
    return kinds, (rows[:limit] if limit else rows), specs, peaks


def memory_tables(data, *, limit: int = 20, group_by: str = "name", plain: bool = False,
                  width: int | None = None):
    """The rich renderable for ``gradtrace table --memory``: bytes by kind per device (what
    was allocated, freed, held at the peak), then bytes allocated inside each op (or module),
    split by kind. A profile without kinds (older files, torch traces) shows the totals only.
    """
    from rich.console import Group  # noqa: PLC0415

    from gradtrace.profiler import columns  # noqa: PLC0415

    from . import render  # noqa: PLC0415

    kinds, rows, specs, peaks = _memory_rows(data, group_by, limit)
    have = columns.available(data)
    parts = []
    if "memory_kinds" in have:
        kind_specs = columns.select(columns.MEMORY_KIND_COLUMNS, have)
        note = "At peak: bytes of the kind alive when the device's total peaked"
        if any(k.kind == "unknown" for k in kinds):
            note += "; unknown: allocated before the profile, of no known kind"
        parts.append(render.spec_table(kinds, kind_specs, title="Memory by kind", plain=plain, width=width,
                                       footer=peaks + [note]))
    else:
        peaks.append("this profile has no memory kinds (an older gradtrace, or a torch trace)")
    what = "module" if group_by == "module" else "op"
    parts.append(render.spec_table(
        rows, specs, title=f"Memory by {what} (allocated inside it, by kind)", plain=plain, width=width,
        highlight="allocated", footer=([] if "memory_kinds" in have else peaks)
        + ["Freed: of those bytes, freed before the profile ended (wherever); Net: still held"]))
    return Group(*parts)


def memory_json(data, *, limit: int = 20, group_by: str = "name") -> dict:
    """``gradtrace table --memory --json``: ``by_kind`` (per device and kind) and ``rows``
    (per op or module: totals and bytes per kind), sizes in bytes."""
    kinds, rows, _, _ = _memory_rows(data, group_by, limit)
    return {"by_kind": [vars(k) for k in kinds], "rows": [vars(r) for r in rows]}


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
    _check_sort(args.sort, args.group_by)
    from gradtrace.profiler.ranks import is_run_dir  # noqa: PLC0415

    if is_run_dir(args.file):
        from .ranks import cmd_rank_table  # noqa: PLC0415 - a run folder: --nproc ranks or torch traces

        return cmd_rank_table(args)
    data = load_profile(args.file)
    if getattr(args, "memory", False):
        return _cmd_memory_table(args, data)
    opts = dict(sort_by=args.sort, limit=args.limit, group_by=args.group_by,
                stack_n=args.stack_n, device_rows=args.device_rows, per_step=args.per_step)
    if args.json:
        rows = table_json(data, **opts)
        sys.stdout.write(json.dumps(rows, indent=1, default=_json_default) + "\n")
        return 0
    console, plain = make_console()
    emit(console, profile_tables(data, plain=plain, width=console.width, **opts), plain)
    if args.group_by == "forward-op" and data.metadata.get("source") == "torch_trace":
        # A torch trace pairs backward with forward ops by sequence number, not one to one.
        from gradtrace.profiler.torch_trace import forward_backward_pairing  # noqa: PLC0415

        console.print(forward_backward_pairing(data).summary(), soft_wrap=True)
    return 0


def _cmd_memory_table(args, data) -> int:
    from .render import emit, make_console  # noqa: PLC0415

    if args.sort:
        raise CLIError("--memory rows are sorted by bytes allocated; --sort applies to the time table")
    if args.json:
        out = memory_json(data, limit=args.limit, group_by=args.group_by)
        sys.stdout.write(json.dumps(out, indent=1, default=_json_default) + "\n")
        return 0
    console, plain = make_console()
    emit(console, memory_tables(data, limit=args.limit, group_by=args.group_by, plain=plain,
                                width=console.width), plain)
    return 0


# --------------------------------------------------------------------------- export


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
    kwargs = {}
    if method == "export_stacks" and args.metric:
        kwargs["metric"] = args.metric
    if not out.parent.is_dir():
        raise CLIError(f"{out}: the folder {out.parent} does not exist; create it first or write elsewhere")
    try:
        getattr(data, method)(str(out), **kwargs)
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
    if not 0 < args.port < 65536:
        raise CLIError(f"--port {args.port}: give a port between 1 and 65535")
    from gradtrace.profiler.ranks import RunFolderError, is_run_dir, run_files  # noqa: PLC0415

    data = None
    if is_run_dir(args.file):   # a run folder of ranks: the dashboard's Ranks page
        try:
            run_files(args.file)    # the folder's files make one run; serve loads them once
        except (FileNotFoundError, RunFolderError) as exc:
            raise CLIError(str(exc)) from None
    else:
        # Loaded here to fail fast with one line before the server starts, and handed to the
        # server: a second load of a 10M-event profile would cost as much again.
        data = load_profile(args.file)
    if args.compare:
        load_profile(args.compare)
    store = _history_store(getattr(args, "store", None))
    open_browser = None
    if not args.no_browser:
        import webbrowser  # noqa: PLC0415

        open_browser = webbrowser.open
    try:
        viewer.serve(args.file, host=args.host, port=args.port, compare=args.compare, store=store,
                     verbose=args.verbose, on_listening=open_browser, data=data)
    except RunFolderError as exc:     # found on loading: ranks missing or repeated in the traces
        raise CLIError(str(exc)) from None
    except OSError as exc:
        raise CLIError(f"cannot listen on {args.host}:{args.port} ({exc.strerror or exc}); "
                       "try another --port") from None
    except KeyboardInterrupt:
        return 0
    return 0


def _history_store(path: str | None):
    """The History page's run store: ``--store PATH`` (it must be one), else the default
    store when it exists, else None (the page then says how to make one)."""
    if path is None:
        from gradtrace.viewer.history_page import default_store  # noqa: PLC0415

        return default_store()
    from gradtrace.profiler.history import HistoryError, RunStore  # noqa: PLC0415

    try:
        RunStore(path, create=False).close()     # fail fast, one line, before the server starts
    except HistoryError as exc:
        raise CLIError(str(exc)) from None
    return path


# --------------------------------------------------------------------------- diff


def cmd_diff(args) -> int:
    from gradtrace import profiler  # noqa: PLC0415

    from .render import diff_table, emit, make_console  # noqa: PLC0415

    sort_field(args.sort, args.by)          # the table's spellings, checked the same way
    a = load_profile(args.a)
    b = load_profile(args.b)
    try:
        check_sort_data(a, args.sort)
    except CLIError:
        check_sort_data(b, args.sort)     # refused only when neither profile has the data
    by = "forward_backward" if args.by == "forward-op" else "name"
    gate = getattr(args, "fail_on_regression", None)
    min_share = getattr(args, "min_share", 1.0)
    if not 0.0 <= min_share < 100.0:
        raise CLIError(f"--min-share {min_share:g}: give a percentage of the step, 0 to below 100")
    if gate is not None and not 0.0 <= gate < 1000.0:
        raise CLIError(f"--fail-on-regression {gate:g}: give a slowdown in percent, 0 or more (5 = 5% slower)")
    try:
        result = profiler.diff(a, b, by=by, sort_by=args.sort, merge_steps=not args.per_step,
                               min_share=min_share / 100.0)
    except ValueError as exc:
        raise CLIError(f"{exc}") from None
    if gate is not None:
        _check_gate_input(result, args)
    if args.json:
        rows = result.rows()
        rows = rows[:args.limit] if args.limit and args.limit > 0 else rows
        rows += result.component_rows()
        sys.stdout.write(json.dumps(rows, indent=1, default=_json_default) + "\n")
    else:
        console, plain = make_console()
        console.print(f"A = {args.a}\nB = {args.b}", soft_wrap=True)
        emit(console, diff_table(result, limit=args.limit, plain=plain, width=console.width), plain)
    return 0 if gate is None else gate_status(result.regressions(gate), gate)


def _check_gate_input(result, args) -> None:
    """The gate cannot pass or fail runs that no test could judge: that is bad input (exit 2)."""
    from gradtrace.profiler.stats import min_steps, significance_possible  # noqa: PLC0415

    if not significance_possible(result.steps_a, result.steps_b):
        few = args.a if result.steps_a <= result.steps_b else args.b
        raise CLIError(f"{few}: {min(result.steps_a, result.steps_b)} ProfilerStep ranges; "
                       f"--fail-on-regression needs at least {min_steps()} steps in each profile "
                       "(call prof.step() once per training step)")


def gate_status(slower: list, threshold_pct: float, prog: str = "gradtrace diff") -> int:
    """The CI gate's exit status: 1 naming the regressions (``RowStats`` judged slower with
    their interval above 1 + PCT/100) in one line on stderr, else 0."""
    if not slower:
        return 0
    from gradtrace.profiler.format import format_interval, format_ratio  # noqa: PLC0415

    sys.stdout.flush()
    names = "; ".join(f"{r.kind} {r.name} {format_ratio(r.ratio)} (95% CI {format_interval(r.ci)})"
                      for r in slower)
    print(f"{prog}: regression over {threshold_pct:g}%: {names}", file=sys.stderr)
    return 1
