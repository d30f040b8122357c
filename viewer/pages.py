"""Page layouts: functions from a :class:`~viewer.model.ProfileView` to Dash components.

Each page is built with its data in place (grid rows, figures, graph elements), so opening a
page costs one callback round trip. Interactions are callbacks in :mod:`viewer.app`; the
component ids they use are the constants in this module. Text from a profile is passed to
components as plain strings (rendered as text, never as HTML).
"""
from __future__ import annotations

import dash_ag_grid as dag
import dash_cytoscape as cyto
from dash import dcc, html

from . import figures
from .graph import EDGE_LEGEND, build_graph, steps_of
from gradtrace.profiler import columns as C
from gradtrace.profiler.format import format_time
from gradtrace.profiler.gpu import KERNEL_WAIT_US, utilization_series

from .model import GROUPINGS, PHASES, PhaseSplit, ProfileView

PAGES = [  # (path, tab label)
    ("/", "Overview"),
    ("/operators", "Operators"),
    ("/forward-backward", "Forward + backward"),
    ("/timeline", "Timeline"),
    ("/graph", "Autograd graph"),
    ("/memory", "Memory"),
    ("/compare", "Compare"),
]
GRAPH_CONFIG = {"displaylogo": False, "modeBarButtonsToRemove": ["lasso2d", "select2d"]}
TIME_FMT = {"function": "gtTime(params.value)"}
PCT_FMT = {"function": "gtPct(params.value)"}
BYTES_FMT = {"function": "gtBytes(params.value)"}
INT_FMT = {"function": "gtInt(params.value)"}
# Column kind (profiler.columns) -> the grid's value formatter (viewer/assets, same units).
KIND_FMT = {"time": TIME_FMT, "percent": PCT_FMT, "bytes": BYTES_FMT, "count": INT_FMT,
            "flops": {"function": "gtFlops(params.value)"}}
_TEXT_WIDTH = {"name": (200, 2), "module": (140, 1), "input_shapes": (160, 1), "stack": (220, 2),
               "call_site": (220, 2), "backward_names": (180, 1), "device": (90, 0), "scope": (135, 0)}


# --------------------------------------------------------------------------- small pieces


def card(title: str, value, sub: str | None = None) -> html.Div:
    return html.Div(className="gt-card", children=[
        html.Div(title, className="gt-card-title"),
        html.Div(value, className="gt-card-value"),
        html.Div(sub or "", className="gt-card-sub"),
    ])


def section(title: str, *children, note: str | None = None, **kwargs) -> html.Div:
    head = [html.H3(title)]
    if note:
        head.append(html.Div(note, className="gt-note"))
    return html.Div(className="gt-section", children=head + list(children), **kwargs)


def radio(id_, options: dict, value, disabled=()) -> dcc.RadioItems:
    return dcc.RadioItems(
        id=id_, value=value, inline=True, className="gt-radio",
        options=[{"label": label, "value": v, "disabled": v in disabled} for v, label in options.items()])


def control(label: str, component) -> html.Div:
    return html.Div(className="gt-control", children=[html.Label(label), component])


def row_data(rows: list[dict]) -> list[dict]:
    """Rows for a grid: ``id`` as a string (AG Grid's row ids are strings)."""
    return [dict(r, id=str(r["id"])) for r in rows]


def fit_height(n_rows: int, most: int) -> int:
    """Grid height in px: the rows plus header and filter row, at most ``most``."""
    return min(most, 36 + 34 + 30 * max(n_rows, 3) + 18)


def grid(id_, rows, columns, height: int = 520, **kwargs) -> dag.AgGrid:
    options = {"animateRows": False, "tooltipShowDelay": 300, "enableCellTextSelection": True,
               "suppressDragLeaveHidesColumns": True, "rowHeight": 30, "headerHeight": 36,
               "floatingFiltersHeight": 34}
    options.update(kwargs.pop("options", {}))
    return dag.AgGrid(
        id=id_, rowData=row_data(rows), columnDefs=columns,
        defaultColDef={"sortable": True, "resizable": True, "filter": True, "floatingFilter": True,
                       "minWidth": 90},
        dashGridOptions=options, getRowId="params.data.id",
        style={"height": f"{height}px", "width": "100%"}, className="ag-theme-quartz gt-grid", **kwargs)


def num_col(field, header, fmt=TIME_FMT, width=115, **kw) -> dict:
    # Wide enough for the header and the sort/filter icons.
    col = {"field": field, "headerName": header, "type": "numericColumn", "filter": "agNumberColumnFilter",
           "valueFormatter": fmt, "width": max(width, 8 * len(header) + 56), "headerTooltip": header}
    col.update(kw)
    return col


def text_table(headers: list[str], rows: list[list], class_name: str = "gt-table") -> html.Table:
    """A small static table (values rendered as text)."""
    return html.Table(className=class_name, children=[
        html.Thead(html.Tr([html.Th(h) for h in headers])),
        html.Tbody([html.Tr([html.Td(str(c)) for c in r]) for r in rows]),
    ])


def empty_page(message: str) -> html.Div:
    return html.Div(className="gt-empty", children=[
        html.H2("No profile loaded"), html.P(message),
        html.P(["Start the dashboard on a file with ", html.Code("gradtrace view FILE.gtprof"),
                ", or open one with the ", html.B("Open profile…"), " button above."]),
    ])


# --------------------------------------------------------------------------- overview


def overview_page(view: ProfileView) -> html.Div:
    s = view.summary()
    has_cuda = view.data.has_device_time
    steps = view.step_phases()
    # With step ranges, CPU shares are of the steps' wall time, so "other" is the time
    # outside ops (data loading, Python); without them, of the self time of all ranges.
    cpu_split = (PhaseSplit(*(sum(st[p] for st in steps) for p in PHASES)) if steps
                 else view.phase_split("cpu"))
    cuda_split = view.phase_split("cuda")
    splits = {"CPU": cpu_split.as_dict()}
    if has_cuda:
        splits["CUDA"] = cuda_split.as_dict()
    cards = [
        card("Device", s["devices"], f"activities: {s['activities']}"),
        card("Steps", s["steps"], f"{s['threads']} thread(s)"),
        card("Duration", format_time(s["duration_ns"] / 1e3), "first event start → last event end"),
        card("Events", f"{s['events']:,}", f"{s['memory_records']:,} memory records"),
        card("Self CPU total", format_time(cpu_split.total / 1e3), "Σ self CPU over all ranges"),
        card("Self CUDA total", format_time(cuda_split.total / 1e3) if has_cuda else "—",
             "device time of top-level ops" if has_cuda else "no CUDA activity recorded"),
        card("Options", html.Span(s["options"], className="gt-card-small"),
             f"gradtrace {s['version']}" + (" · synthetic" if s["synthetic"] else "")),
    ]
    split_rows = []
    for clock, split in (("CPU", cpu_split), ("CUDA", cuda_split)):
        if clock == "CUDA" and not has_cuda:
            continue
        total = max(split.total, 1)
        split_rows += [[clock, phase, format_time(ns / 1e3), f"{100 * ns / total:.1f}%"]
                       for phase, ns in split.as_dict().items()]
    top_cpu = view.top_ops(10, "cpu")
    charts = [dcc.Graph(id="ov-top-cpu", figure=figures.top_ops_figure(top_cpu, "cpu"), config=GRAPH_CONFIG)]
    if has_cuda:
        charts.append(dcc.Graph(id="ov-top-cuda", figure=figures.top_ops_figure(view.top_ops(10, "cuda"), "cuda"),
                                config=GRAPH_CONFIG))
    return html.Div(id="page-overview", children=[
        html.Div(view.biggest_cost_sentence(), id="ov-sentence", className="gt-callout"),
        html.Div(cards, className="gt-cards", id="ov-cards"),
        *gpu_overview(view),
        html.Div(className="gt-row", children=[
            html.Div(className="gt-col-wide", children=[
                section("Step time by phase",
                        dcc.Graph(id="ov-phase", figure=figures.phase_split_figure(splits), config=GRAPH_CONFIG),
                        note=("Share of the steps' wall time: self time of forward ops, backward "
                              "nodes and optimizer scopes; 'other' is the rest of the steps (time "
                              "outside ops)." if steps else
                              "Self time of the ranges in each phase: forward ops, backward nodes, "
                              "optimizer scopes; 'other' is time no phase claims."))]),
            html.Div(className="gt-col-narrow", children=[
                section("CPU vs CUDA", text_table(["clock", "phase", "time", "share"], split_rows))]),
        ]),
        section("Time per step", dcc.Graph(id="ov-steps", figure=figures.step_phase_figure(steps),
                                           config=GRAPH_CONFIG),
                note="Each bar is one ProfilerStep#N, from one step() call to the next: forward, "
                     "backward and optimizer self time, and 'other', the rest of the step (data "
                     "loading, Python between ops).", id="ov-steps-section") if steps else
        html.Div("No ProfilerStep ranges: call prof.step() (profiler.current().step() under "
                 "gradtrace run) once per training step to see time per step.", className="gt-note",
                 id="ov-steps-section"),
        section("Top 10 ops by self time", *charts, id="ov-top"),
    ])


# --------------------------------------------------------------------------- overview: GPU


def gpu_summary(view: ProfileView) -> dict | None:
    """``profiler``'s GPU summary of the profile (computed once per view), or None for a
    profile without device work (the Overview is then the CPU one)."""
    if "_gpu_summary" not in view.__dict__:
        summary = view.data.gpu_summary() if view.data.has_device_time else None
        view.__dict__["_gpu_summary"] = summary if summary and summary["devices"] and summary["steps"] else None
    return view.__dict__["_gpu_summary"]


def _gpu_utilization(view: ProfileView, device: str) -> dict:
    # Once per device of the view, as the summary.
    cache = view.__dict__.setdefault("_gpu_utilization", {})
    if device not in cache:
        cache[device] = utilization_series(view.data, device)
    return cache[device]


def _pct_text(value) -> str:
    """A percentage for a card; "—" where the profile cannot define it (null, never 0)."""
    return "—" if value is None else f"{value:.1f}%"


def gpu_cards(device: dict) -> list:
    """The four TensorBoard GPU figures of one device over all steps."""
    return [
        card("GPU utilization", _pct_text(device["gpu_utilization_pct"]), "steps' time with a kernel running"),
        card("SM efficiency", _pct_text(device["sm_efficiency_pct"]), "blocks per SM, capped at 1, over time"),
        card("Achieved occupancy", _pct_text(device["achieved_occupancy_pct"]),
             "est. occupancy, weighted by kernel time"),
        card("Tensor Cores", _pct_text(device["tensor_core_pct"]), "share of kernel time on Tensor Cores"),
    ]


def recommendation_box(rec: dict) -> html.Div:
    """One recommendation: the figure that triggered it, its value against the threshold, and
    the advice."""
    where = f" · {rec['device']}" if rec.get("device") else ""
    return html.Div(className="gt-callout gt-recommendation", children=[
        html.B(rec["rule"].replace("_", " ").capitalize().replace("gpu", "GPU") + where),
        html.Div(f"{rec['figure']}: {rec['value']:.1f} (threshold {rec['threshold']:g})", className="gt-note"),
        html.Div(rec["advice"]),
    ])


def gpu_overview(view: ProfileView) -> list:
    """The Overview's GPU sections (none for a CPU-only profile): per device, the summary cards,
    the step time breakdown by priority, idle time by cause, utilization over time; then the
    recommendations. Every number is :func:`profiler.gpu.gpu_summary`'s."""
    summary = gpu_summary(view)
    if summary is None:
        return []
    out = []
    origin = view.time_origin_ns
    several = len(summary["devices"]) > 1
    for k, (name, dev) in enumerate(summary["devices"].items()):
        suffix = f"-{k}" if k else ""
        series = _gpu_utilization(view, name)
        temporal = dev["temporal"]
        whole = sum(temporal.values()) or 1.0
        temporal_rows = [[label, format_time(temporal[key]), f"{100 * temporal[key] / whole:.1f}%"]
                         for key, label in (("compute_us", "computation"), ("non_compute_us", "memcpy, memset, "
                                            "communication"), ("idle_us", "idle"))]
        out += [
            section(f"GPU · {name}", html.Div(gpu_cards(dev), className="gt-cards"), id=f"ov-gpu{suffix}",
                    note="Over all steps (device-aligned, as TensorBoard's profiler plugin takes them); "
                         "— where the trace does not define a figure (e.g. no launch arguments)."),
            html.Div(className="gt-row", children=[
                html.Div(className="gt-col-wide", children=[section(
                    "Step time breakdown" + (f" · {name}" if several else ""),
                    dcc.Graph(id=f"ov-gpu-steps{suffix}", config=GRAPH_CONFIG,
                              figure=figures.gpu_step_breakdown_figure(dev["steps"], dev["step_breakdown_us"])),
                    note="Each step's time by what ran, highest priority first: a kernel, a copy, a "
                         "memset, communication, a CUDA runtime call, the DataLoader, other CPU work; "
                         "each takes only time no category before it took (TensorBoard's breakdown).")]),
                html.Div(className="gt-col-narrow", children=[section(
                    "Idle time by cause",
                    dcc.Graph(id=f"ov-gpu-idle{suffix}", config=GRAPH_CONFIG,
                              figure=figures.idle_breakdown_figure(dev["idle_breakdown"], name)),
                    text_table(["device time", "time", "share"], temporal_rows),
                    note="Gaps between a stream's kernels: host wait (launched after the previous one "
                         f"ended), kernel wait (shorter than {KERNEL_WAIT_US} us: launch overhead), other "
                         "(HTA); summed over streams, so more than the device's idle time when streams "
                         "idle together.")]),
            ]),
            section("GPU utilization over time" + (f" · {name}" if several else ""),
                    dcc.Graph(id=f"ov-gpu-util{suffix}", config=GRAPH_CONFIG, figure=figures.gpu_utilization_figure(
                        (series["start_ns"] - origin) / 1e6, (series["end_ns"] - origin) / 1e6,
                        series["utilization_pct"], series["bucket_us"], name)),
                    note="The share of each time bucket with a kernel running, over the whole profile "
                         "(TensorBoard's utilization over time; buckets of a power of ten microseconds)."),
        ]
    recs = summary.get("recommendations") or []
    out.append(section("Recommendations", *([recommendation_box(r) for r in recs] or [
        html.Div("No rule fired: nothing in this profile crosses a threshold.", className="gt-note")]),
        id="ov-recommendations",
        note="Each rule, the figure that triggered it and its threshold (profiler.gpu_summary()['recommendations'])."))
    return out


# --------------------------------------------------------------------------- operators


def grid_column(spec) -> dict:
    """An AG Grid column for a :class:`profiler.columns.ColumnSpec`: field = its id, header =
    its (PyTorch) header, the formatter of its kind."""
    if spec.kind == "text":
        min_width, flex = _TEXT_WIDTH.get(spec.id, (140, 1))
        col = {"field": spec.id, "headerName": spec.header, "minWidth": min_width, "filter": "agTextColumnFilter",
               "tooltipField": spec.id}
        if flex:
            col["flex"] = flex
        else:
            col["width"] = min_width
        if spec.id == "name":
            col["pinned"] = "left"
        return col
    return num_col(spec.id, spec.header, KIND_FMT[spec.kind])


def operator_columns(view: ProfileView, group_by: str, device: str, metric: str) -> list[dict]:
    """The grid's columns: the profiler's operator columns for this grouping
    (``KeyAverages.columns``); ``device`` hides the other clock's, ``metric`` ("self" or
    "total") picks the sorted column."""
    has_cuda = view.data.has_device_time
    shown = {"cpu": device in ("cpu", "both"), "cuda": has_cuda and device in ("cuda", "both")}
    clock = "cuda" if (device == "cuda" and has_cuda) else "cpu"
    sort_field = f"self_{clock}_time_total" if metric == "self" else f"{clock}_time_total"
    cols = []
    for spec in view.key_averages(group_by).columns(scope=True):
        col = grid_column(spec)
        col["hide"] = spec.clock is not None and not shown[spec.clock]
        # Every column states its sort, so switching views clears a sort the user clicked.
        col["sort"] = "desc" if spec.id == sort_field else None
        col["cellClass"] = "gt-sorted" if spec.id == sort_field else ""
        cols.append(col)
    return cols


def operator_rows(view: ProfileView, group_by: str, per_step: bool = False) -> list[dict]:
    return view.rows(group_by, per_step)


def per_step_toggle(id_: str) -> dcc.Checklist:
    """The switch that shows ``ProfilerStep#N`` rows one per step instead of merged into
    ``ProfilerStep#*`` (``gradtrace table --per-step``)."""
    return dcc.Checklist(id=id_, options=[{"label": " one row per ProfilerStep#N", "value": "per_step"}],
                         value=[], className="gt-radio", inline=True)


def operators_page(view: ProfileView) -> html.Div:
    has_cuda = view.data.has_device_time
    meta = view.data.metadata
    disabled_groupings = []
    if not (meta.get("record_shapes") or (view.data.analysis.shapes_id >= 0).any()):
        disabled_groupings.append("shape")
    if not (view.data.analysis.stack_id >= 0).any():
        disabled_groupings.append("call_site")
    columns = operator_columns(view, "name", "cpu", "self")
    return html.Div(id="page-operators", children=[
        html.Div(className="gt-toolbar", children=[
            control("Group by", radio("ops-group", GROUPINGS, "name", disabled_groupings)),
            control("Time", radio("ops-metric", {"self": "Self", "total": "Total"}, "self")),
            control("Device", radio("ops-device", {"cpu": "CPU", "cuda": "CUDA", "both": "Both"}, "cpu",
                                    () if has_cuda else ("cuda", "both"))),
            control("Search", dcc.Input(id="ops-search", type="search", placeholder="filter rows…",
                                        debounce=True, className="gt-input")),
            control("Steps", per_step_toggle("ops-steps")),
        ]),
        html.Div(f"{len(view.rows('name'))} ops · {view.data.n_events:,} events · click a row for its "
                 f"calls, shapes, stacks and forward/backward counterparts", className="gt-note",
                 id="ops-caption"),
        grid("ops-grid", operator_rows(view, "name"), columns,
             height=fit_height(max(len(view.rows(g)) for g in ("name", "shape")), 480)),
        html.Div(id="ops-details", className="gt-details",
                 children=html.Div("Click a row to see its calls.", className="gt-note")),
    ])


def operator_details(view: ProfileView, group_by: str, row_id: int, per_step: bool = False) -> list:
    d = view.row_details(group_by, row_id, per_step=per_step)
    if not d["n_calls"]:
        return [html.Div("No events for this row.", className="gt-note")]
    counter = d["counterparts"]
    counter_title = ("Backward nodes its calls created" if counter and counter[0]["relation"] == "backward node"
                     else "Forward ops these nodes belong to")
    calls_cols = [num_col("start_ms", "Start (ms)", {"function": "gtMs(params.value)"}, 110),
                  num_col("cpu_time_total", C.COLUMNS["cpu_time_total"].header),
                  num_col("self_cpu_time_total", C.COLUMNS["self_cpu_time_total"].header),
                  num_col("cuda_time_total", C.COLUMNS["cuda_time_total"].header),
                  num_col("thread", "Thread", INT_FMT, 90), num_col("sequence_nr", "sequence_nr", INT_FMT, 120),
                  {"field": "shapes", "headerName": "Input shapes", "flex": 1, "minWidth": 140}]
    calls = [dict(c, id=c["event"]) for c in d["calls"]]
    return [
        html.H3(["Calls of ", html.Span(d["name"], className="gt-mono", id="ops-details-name")]),
        html.Div(f"{d['n_calls']:,} calls; the {len(calls)} longest are listed.", className="gt-note"),
        html.Div(className="gt-row", children=[
            html.Div(className="gt-col-half", children=[
                html.H4(counter_title if counter else "Forward/backward counterparts"),
                text_table(["name", "calls", "CPU total", "CUDA total"],
                           [[c["name"], c["count"], format_time(c["cpu_time_total"]), format_time(c["cuda_time_total"])]
                            for c in counter]) if counter else
                html.Div("None: this op created no backward node, or it ran outside autograd.",
                         className="gt-note"),
                html.H4("Input shapes"),
                text_table(["shapes", "calls"], [[s["text"], s["count"]] for s in d["shapes"]])
                if d["shapes"] else html.Div("not recorded (profile with record_shapes=True)", className="gt-note"),
            ]),
            html.Div(className="gt-col-half", children=[
                html.H4("Stacks"),
                html.Div([html.Div(className="gt-stack", children=[
                    html.Div(f"{s['count']} calls", className="gt-note"), html.Pre(_clip_stack(s["text"]))])
                    for s in d["stacks"]]) if d["stacks"] else
                html.Div("not recorded (profile with with_stack=True)", className="gt-note"),
            ]),
        ]),
        html.H4("Calls"),
        grid("ops-calls-grid", calls, calls_cols, height=fit_height(len(calls), 300)),
    ]


def _clip_stack(text: str, frames: int = 10) -> str:
    lines = text.split("\n")
    if len(lines) <= frames:
        return text
    return "\n".join(lines[:frames] + [f"… {len(lines) - frames} more frames"])


# --------------------------------------------------------------------------- forward + backward


def fwdbwd_columns(view: ProfileView, clock: str, with_sites: bool) -> list[dict]:
    """The forward+backward grid's columns (``ForwardBackwardSummary.columns``), the other
    clock's hidden, sorted by forward+backward time."""
    sort_field = f"forward_backward_{clock}_time_total"
    cols = []
    for spec in view.fwdbwd_summary.columns():
        if spec.id == "call_site" and not with_sites:
            continue
        col = grid_column(spec)
        col["hide"] = spec.clock is not None and spec.clock != clock
        col["sort"] = "desc" if spec.id == sort_field else None
        col["cellClass"] = "gt-sorted" if spec.id == sort_field else ""
        cols.append(col)
    return cols


def fwdbwd_page(view: ProfileView) -> html.Div:
    has_sites = any(r["call_site"] for r in view.fwdbwd_rows("call_site"))
    by = "call_site" if has_sites else "name"
    rows = view.fwdbwd_rows(by)
    has_cuda = view.data.has_device_time
    return html.Div(id="page-fwdbwd", children=[
        html.Div(className="gt-toolbar", children=[
            control("One row per", radio("fb-by", {"name": "forward op", "call_site": "op and call site"}, by,
                                         () if has_sites else ("call_site",))),
            control("Clock", radio("fb-clock", {"cpu": "CPU", "cuda": "CUDA"}, "cpu", () if has_cuda else ("cuda",))),
            control("Top N", dcc.Slider(id="fb-topn", min=5, max=40, step=5, value=15,
                                        marks={k: str(k) for k in (5, 10, 20, 30, 40)}, className="gt-slider")),
        ]),
        html.Div("Each forward op with the backward nodes it created (matched exactly by sequence_nr "
                 "and thread; a composite op is also charged for its parts' nodes). Fwd+Bwd is what "
                 "the op really costs a training step.", className="gt-note"),
        dcc.Graph(id="fb-figure", figure=figures.fwdbwd_figure(rows, 15, "cpu"), config=GRAPH_CONFIG),
        grid("fb-grid", rows, fwdbwd_columns(view, "cpu", by == "call_site"),
             height=fit_height(len(view.fwdbwd_rows("call_site")), 420)),
    ])


# --------------------------------------------------------------------------- timeline


def timeline_page(view: ProfileView, figure, status: str, link_options: list[dict],
                  step_options: list[dict] = ()) -> html.Div:
    return html.Div(id="page-timeline", children=[
        dcc.Store(id="tl-window"),
        html.Div(className="gt-toolbar", children=[
            control("Zoom to step", dcc.Dropdown(id="tl-step", options=list(step_options), placeholder="a step",
                                                 clearable=False, className="gt-dropdown")),
            control("Forward → backward links for", dcc.Dropdown(
                id="tl-link-op", options=link_options, placeholder="an op (or click a range)",
                clearable=True, className="gt-dropdown")),
            html.Button("Reset zoom", id="tl-reset", className="gt-button"),
        ]),
        html.Div(status, id="tl-status", className="gt-note"),
        # The plot fills the window's height: rows stay tall enough for their names.
        dcc.Graph(id="tl-graph", figure=figure, config=dict(GRAPH_CONFIG, scrollZoom=True, responsive=True),
                  className="gt-timeline", style={"height": "calc(100vh - 250px)", "minHeight": "480px"}),
        html.Div(id="tl-details", className="gt-details",
                 children=html.Div("Drag to zoom, scroll to zoom, shift-drag to pan; click a range to see "
                                   "its details and its forward/backward counterpart.", className="gt-note")),
    ])


# --------------------------------------------------------------------------- graph


GRAPH_STYLESHEET = [
    {"selector": "node", "style": {
        "label": "data(label)", "background-color": "data(colour)", "shape": "round-rectangle",
        "width": 150, "height": 30, "font-size": 12, "text-valign": "center", "text-halign": "center",
        "text-wrap": "ellipsis", "text-max-width": 146, "border-width": 1, "border-color": "#475569",
        "color": "data(text_colour)", "font-family": "Inter, system-ui, sans-serif"}},
    {"selector": "node.backward", "style": {"shape": "ellipse", "border-color": "#c2410c"}},
    {"selector": "node.accumulate", "style": {"shape": "diamond", "width": 170, "height": 36, "font-size": 11,
                                              "text-max-width": 130}},
    {"selector": "node.collapsed", "style": {"shape": "round-rectangle", "border-width": 2, "border-style": "double",
                                             "border-color": "#1e293b", "font-weight": 600, "width": 190,
                                             "text-max-width": 184}},
    {"selector": "node.group", "style": {
        "background-color": "#f1f5f9", "background-opacity": 0.55, "border-color": "#94a3b8",
        "border-style": "dashed", "shape": "round-rectangle", "label": "data(label)", "color": "#334155",
        "text-valign": "top", "text-halign": "center", "font-size": 12, "font-weight": 600, "padding": 10,
        "text-wrap": "none", "text-max-width": 1000}},
    {"selector": "node:selected", "style": {"border-width": 3, "border-color": "#111827"}},
    {"selector": "node.found", "style": {"border-width": 4, "border-color": "#2563eb", "underlay-color": "#93c5fd",
                                         "underlay-opacity": 0.6, "underlay-padding": 6}},
    {"selector": "edge", "style": {"width": 1.4, "curve-style": "bezier", "target-arrow-shape": "triangle",
                                   "arrow-scale": 0.8}},
    {"selector": ".flow", "style": {"line-color": "#64748b", "target-arrow-color": "#64748b"}},
    {"selector": ".created", "style": {"line-color": "#dc2626", "target-arrow-color": "#dc2626",
                                       "line-style": "dashed", "width": 1.2, "curve-style": "straight"}},
]


def graph_page(view: ProfileView) -> html.Div:
    steps = view.__dict__.setdefault("_graph_steps", steps_of(view))
    options = [{"label": s.label, "value": k} for k, s in enumerate(steps)]
    has_cuda = view.data.has_device_time
    g = build_graph(view, steps[0]) if steps else None
    return html.Div(id="page-graph", children=[
        html.Div(className="gt-toolbar", children=[
            control("Step", dcc.Dropdown(id="gr-step", options=options, value=0 if steps else None,
                                         clearable=False, className="gt-dropdown")),
            control("Colour by", radio("gr-colour-by", {"self": "self time", "total": "total time"}, "self")),
            control("Clock", radio("gr-clock", {"cpu": "CPU", "cuda": "CUDA"}, "cpu",
                                   () if has_cuda else ("cuda",))),
            control("Groups", html.Div([
                html.Button("Expand all", id="gr-expand", className="gt-button", n_clicks=0),
                html.Button("Collapse to fit", id="gr-fit", className="gt-button", n_clicks=0,
                            style={"marginLeft": "6px"})])),
            control("Find a node", dcc.Input(id="gr-search", type="search", placeholder="name, e.g. MmBackward0",
                                             debounce=True, className="gt-input")),
            html.Div(id="gr-search-status", className="gt-note"),
        ]),
        html.Div(EDGE_LEGEND, className="gt-note"),
        html.Div(_graph_status(g), id="gr-status", className="gt-note gt-warn"),
        dcc.Store(id="gr-collapsed", data=g.collapsed if g else []),
        html.Div(className="gt-row", children=[
            html.Div(className="gt-col-wide", children=[
                cyto.Cytoscape(id="gr-cyto", elements=g.elements if g else [],
                               layout={"name": "preset", "fit": False, "animate": False},
                               stylesheet=GRAPH_STYLESHEET, minZoom=0.05, maxZoom=3, boxSelectionEnabled=False,
                               style={"width": "100%", "height": "calc(100vh - 300px)", "minHeight": "520px"},
                               className="gt-cyto"),
                html.Div(className="gt-legend", children=[
                    html.Span("■", style={"color": "#fff7bc"}), " less time … ",
                    html.Span("■", style={"color": "#8c2d04"}), " more  ·  rounded box: forward op · ellipse: "
                    "backward node · diamond: AccumulateGrad (the leaf's id) · double border: a collapsed group"]),
            ]),
            html.Div(id="gr-details", className="gt-col-narrow gt-details",
                     children=html.Div("Click a node for its details.", className="gt-note")),
        ]),
    ])


def _graph_status(g) -> str:
    if g is None:
        return "No training step in this profile."
    return f"{g.n_nodes} nodes shown ({g.n_total} ops and nodes in the step), {g.n_edges} edges. {g.note}"


def node_details_panel(d: dict) -> list:
    rows = [["scope", d["scope"]], ["sequence_nr", d["sequence_nr"]], ["thread", d["thread"]],
            ["forward thread", d["fwd_thread"] or "—"], ["device", d["device"]],
            ["input shapes", d["input_shapes"]], ["dtypes", d["dtypes"]],
            ["self CPU", format_time(d["self_cpu_us"])], ["CPU total", format_time(d["cpu_total_us"])],
            ["self CUDA", format_time(d["self_cuda_us"])], ["CUDA total", format_time(d["cuda_total_us"])]]
    if d["forward_op"]:
        rows.append(["created by forward op", d["forward_op"]])
    if d["backward_nodes"]:
        rows.append(["created backward node", ", ".join(d["backward_nodes"])])
    if d.get("node_id") is not None:
        rows.append(["graph node id", d["node_id"]])
        rows.append(["gradient flows into", ", ".join(d["next_nodes"]) or "— (a leaf)"])
        rows.append(["gradient comes from", ", ".join(d["fed_by"]) or "— (the root)"])
    rows += [["hooks", d["hooks"]], ["saved tensors", d["saved_tensors"]]]
    return [html.H3(d["name"], className="gt-mono", id="gr-details-name"),
            text_table(["field", "value"], rows, "gt-table gt-kv"),
            html.H4("Stack"),
            html.Pre(_clip_stack("\n".join(d["stack"]), 14)) if d["stack"] else html.Div("not recorded", className="gt-note")]


# --------------------------------------------------------------------------- memory


def _memory_grid_columns(rows: list[dict], first: str) -> list[dict]:
    """Columns of a memory-by-op (or module) grid: the totals, then one per kind that occurs."""
    cols = [{"field": "name", "headerName": first, "pinned": "left", "flex": 2, "minWidth": 180},
            num_col("allocated", "Allocated", BYTES_FMT, 120, sort="desc", cellClass="gt-sorted"),
            num_col("freed", "Freed", BYTES_FMT, 110), num_col("net", "Net (held at end)", BYTES_FMT, 140),
            num_col("allocations", "# Allocations", INT_FMT, 120)]
    fixed = {"name", "allocated", "freed", "net", "allocations", "id"}
    kinds = [k for k in (rows[0] if rows else {}) if k not in fixed]
    return cols + [num_col(k, k.replace("_", " ").capitalize(), BYTES_FMT, 110) for k in kinds]


def memory_page(view: ProfileView, figure, by_op_rows: list[dict], peak_rows: list[list],
                kind_figs: list | None = None, kind_rows: list[list] | None = None,
                by_module_rows: list[dict] | None = None) -> html.Div:
    """The Memory page.

    Args:
        view: the profile.
        figure: total allocated bytes over time per device (a profile without kinds), or None.
        by_op_rows: :meth:`ProfileView.memory_by_op`.
        peak_rows: [device, peak, at, inside op] per device.
        kind_figs: (device, live bytes stacked by kind) per device, for a profile with kinds.
        kind_rows: [device, kind, allocated, freed, at peak, max live] per device and kind.
        by_module_rows: ``profiler.memory.memory_table(data, "module")`` (modules recorded).
    """
    if not view.data.n_memory_records:
        return html.Div(id="page-memory", children=[
            html.Div("This profile has no memory records. Profile with profile_memory=True to see "
                     "allocations over time.", className="gt-callout")])
    rows = [dict(r, id=k) for k, r in enumerate(by_op_rows)]
    if kind_figs:
        over_time = section(
            "Allocated bytes over time, by kind",
            text_table(["device", "peak", "at", "inside op"], peak_rows),
            *[dcc.Graph(id="mem-figure" if k == 0 else f"mem-figure-{k}", figure=fig, config=GRAPH_CONFIG)
              for k, (_, fig) in enumerate(kind_figs)],
            text_table(["device", "kind", "allocated", "freed", "at the peak", "max live"], kind_rows,
                       "gt-table gt-mem-kinds"),
            note="Live tensor storage per device, stacked by what it holds (torch's memory-profiler "
                 "categories): parameters, optimizer state, gradients (.grad), activations (saved "
                 "for backward), temporaries (everything else); unknown: allocated before the "
                 "profile started. Thinned to min/max per bin on long profiles, so peaks are exact.")
    else:
        over_time = section(
            "Allocated bytes over time", text_table(["device", "peak", "at", "inside op"], peak_rows),
            dcc.Graph(id="mem-figure", figure=figure, config=GRAPH_CONFIG),
            note="The engine's running total after each allocation and free, per device (thinned "
                 "to min/max per bin on long profiles, so peaks are exact). This profile has no "
                 "memory kinds (recorded by an older gradtrace, or a torch trace).")
    # The grids take the page's width: one column per kind beside the totals.
    children = [over_time,
                section("Memory by op", grid("mem-grid", rows, _memory_grid_columns(rows, "Op"), height=380),
                        note="Bytes each op allocated itself (children not included), by kind; Freed: "
                             "how much of that was freed before the profile ended, wherever the free "
                             "happened; Net: what was still held.")]
    if by_module_rows:
        mod_rows = [dict(r, id=k) for k, r in enumerate(by_module_rows)]
        children.append(section("Memory by module", grid("mem-module-grid", mod_rows,
                                                         _memory_grid_columns(mod_rows, "Module"), height=260),
                                note="Bytes allocated inside each nn.Module class's forward and the "
                                     "backward nodes it created, by kind."))
    children.append(html.Div(className="gt-row", children=[html.Div(className="gt-col-half", children=[
        dcc.Graph(id="mem-by-op-figure", figure=figures.memory_by_op_figure(by_op_rows), config=GRAPH_CONFIG)])]))
    return html.Div(id="page-memory", children=children)


# --------------------------------------------------------------------------- compare


def compare_page(view: ProfileView, max_upload_mb: float, b_label: str | None) -> html.Div:
    from .compare import VIEWS, metric_options  # noqa: PLC0415

    metrics = metric_options("name", True)
    return html.Div(id="page-compare", children=[
        html.Div(className="gt-toolbar", children=[
            dcc.Upload(id="cmp-upload", max_size=int(max_upload_mb * 1e6), multiple=False,
                       className="gt-upload", children=html.Div([
                           "Drop profile B here or ", html.A("choose a file"),
                           f" (up to {max_upload_mb:g} MB; for bigger files run gradtrace diff A B)"])),
            control("Compare", radio("cmp-by", VIEWS, "name")),
            control("Sorted by change of", dcc.Dropdown(
                id="cmp-metric", options=[{"label": v, "value": k} for k, v in metrics.items()],
                value="self_cpu_time_total", clearable=False, className="gt-dropdown")),
            control("Steps", per_step_toggle("cmp-steps")),
        ]),
        html.Div(id="cmp-error", className="gt-error-slot"),
        html.Div(f"A = {view.label} · B = {b_label or '(none yet: upload one)'}", id="cmp-caption",
                 className="gt-note"),
        dcc.Loading(html.Div(id="cmp-body"), delay_show=300),
    ])
