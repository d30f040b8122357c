"""The Dash app: :func:`create_app` (a factory, callbacks on the app) and :func:`serve`.

Profiles live on the server, in a small registry keyed by an opaque id; the browser holds
only that id (``dcc.Store``). Pages are rendered by one callback on the URL path, with their
data in place; interactions are callbacks registered with ``app.callback`` in
:func:`_register_callbacks`. The app serves no endpoint of its own: nothing reads a path
that came from the browser, uploads are parsed from memory (see :mod:`viewer.loading`).
"""
from __future__ import annotations

import ipaddress
import sys
import threading
import uuid
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Callable

import numpy as np
from dash import ClientsideFunction, Dash, Input, Output, State, callback_context, dcc, html, no_update
from dash.exceptions import PreventUpdate

from gradtrace.profiler import ProfileData
from gradtrace.profiler.memory import kind_key, kind_label, kind_summary, live_by_kind, memory_table

from . import figures, history_page, kernels_page, modules_page, pages, ranks_page
from .compare import compare_tables, metric_options
from .graph import build_graph, node_details, steps_of
from .loading import DEFAULT_MAX_UPLOAD_MB, UploadError, decode_upload, load_path
from gradtrace.profiler.format import format_bytes, format_time

from .model import ProfileView
from .timeline import TimelineIndex
from .timeline_figure import BAR_BUDGET, timeline_figure

__all__ = ["create_app", "serve"]

ASSETS = Path(__file__).with_name("assets")
MAIN = "main"
# The pages of pages.py, with Modules after "Forward + backward" and Ranks last.
PAGES = [p for base in pages.PAGES
         for p in ([base, modules_page.PAGE] if base[0] == "/forward-backward" else [base])] + [ranks_page.PAGE]
PAGES.insert(len(PAGES) - 1, kernels_page.PAGE)     # Kernels: the GPU activity, before Ranks
PAGES.insert(len(PAGES) - 1, history_page.PAGE)   # History before Ranks, which stays last


class _Registry:
    """Loaded profiles by id, with per-profile caches (timeline index, graph steps).
    Uploads beyond ``capacity`` push out the oldest upload (the startup profile stays)."""

    def __init__(self, capacity: int = 4):
        self._views: OrderedDict[str, ProfileView] = OrderedDict()
        self._timelines: dict[str, TimelineIndex] = {}
        self._lock = threading.Lock()
        self.capacity = capacity
        self.ranks: dict | None = None     # summary of a run folder (gradtrace view RUN_DIR)
        self.history = None                # the run store of the History page (a path), if any

    def add(self, view: ProfileView, key: str | None = None) -> str:
        key = key or f"u{uuid.uuid4().hex}"
        with self._lock:
            self._views[key] = view
            uploads = [k for k in self._views if k != MAIN]
            while len(uploads) > self.capacity:
                old = uploads.pop(0)
                self._views.pop(old, None)
                self._timelines.pop(old, None)
        return key

    def get(self, key) -> ProfileView | None:
        if not isinstance(key, str):
            return None
        with self._lock:
            return self._views.get(key)

    def timeline(self, key: str) -> TimelineIndex | None:
        view = self.get(key)
        if view is None:
            return None
        with self._lock:
            index = self._timelines.get(key)
        if index is None:
            index = TimelineIndex(view)
            with self._lock:
                self._timelines[key] = index
        return index


def create_app(profile_or_path: ProfileData | str | Path | None = None, *, compare=None,
               max_upload_mb: float = DEFAULT_MAX_UPLOAD_MB, title: str = "gradtrace", ranks: dict | None = None,
               store=None) -> Dash:
    """Build the dashboard for a profile.

    Args:
        profile_or_path: a :class:`profiler.ProfileData`, a path to a ``.gtprof`` file, or
            None (the page then asks for an upload). A file that cannot be read gives an
            error message in the page.
        compare: optionally a second profile (or path) preloaded on the Compare page.
        max_upload_mb: largest file accepted by the upload buttons.
        title: browser tab title.
        ranks: a run folder's :func:`profiler.ranks.summarize_run` for the Ranks page
            (:func:`viewer.ranks_page.open_run`); without it the page shows the open profile.
        store: the run store (a path) of the History page (:mod:`viewer.history_page`).
    Returns:
        The ``dash.Dash`` app (``app.server`` is the Flask server).
    """
    registry = _Registry()
    registry.ranks = ranks
    registry.history = store
    startup_error = None
    if profile_or_path is not None:
        try:
            view = _as_view(profile_or_path)
            registry.add(view, MAIN)
        except UploadError as exc:
            startup_error = str(exc)
    compare_key = None
    if compare is not None:
        try:
            compare_key = registry.add(_as_view(compare))
        except UploadError as exc:
            startup_error = str(exc)

    app = Dash(__name__, assets_folder=str(ASSETS), serve_locally=True, title=title,
               suppress_callback_exceptions=True, update_title=None)
    max_bytes = int(max_upload_mb * 1e6)
    # An upload arrives base64-encoded in a callback body: cap requests a little above that.
    app.server.config["MAX_CONTENT_LENGTH"] = max_bytes * 4 // 3 + (1 << 20)
    app.layout = _layout(app, registry.get(MAIN), startup_error, max_upload_mb, compare_key)
    _register_callbacks(app, registry, max_bytes, max_upload_mb)
    return app


def _as_view(profile_or_path) -> ProfileView:
    if isinstance(profile_or_path, ProfileView):
        return profile_or_path
    if isinstance(profile_or_path, ProfileData):
        profile_or_path.analysis  # noqa: B018 - analyse up front
        return ProfileView(profile_or_path, "profile")
    path = Path(profile_or_path)
    return ProfileView(load_path(path), path.name)


def _layout(app: Dash, view: ProfileView | None, error: str | None, max_upload_mb: float, compare_key):
    nav = [dcc.Link(label, href=app.get_relative_path(path), id=f"nav-{path.strip('/') or 'overview'}",
                    className="gt-tab") for path, label in PAGES]
    return html.Div(className="gt-app", children=[
        dcc.Location(id="url"),
        dcc.Store(id="profile-key", data=MAIN if view is not None else None),
        dcc.Store(id="compare-key", data=compare_key),
        html.Header(className="gt-header", children=[
            html.Div(className="gt-brand", children=[html.Span("gradtrace", className="gt-logo"),
                                                     html.Span("profile viewer", className="gt-sub")]),
            html.Div(view.label if view else "no profile", id="profile-label", className="gt-profile-label"),
            html.Span(f"Open profile… reads files up to {max_upload_mb:g} MB; for a bigger one, "
                      "run gradtrace view FILE", className="gt-sub", id="open-limit"),
            dcc.Upload(id="open-upload", max_size=int(max_upload_mb * 1e6), multiple=False,
                       className="gt-open", children=html.Button("Open profile…", className="gt-button")),
        ]),
        html.Nav(nav, className="gt-nav", id="gt-nav"),
        html.Div(_error_box(error) if error else None, id="open-error", className="gt-error-slot"),
        dcc.Loading(html.Main(id="page", className="gt-page"), type="dot", delay_show=400),
    ])


def _error_box(message: str) -> html.Div:
    return html.Div(message, className="gt-error", role="alert")


# --------------------------------------------------------------------------- callbacks


def _register_callbacks(app: Dash, registry: _Registry, max_bytes: int, max_upload_mb: float) -> None:
    route = {app.get_relative_path(path).rstrip("/") or "/": path for path, _ in PAGES}

    @app.callback(Output("page", "children"), Input("url", "pathname"), Input("profile-key", "data"),
                  State("compare-key", "data"))
    def render_page(pathname, key, compare_key):
        path = route.get((pathname or "/").rstrip("/") or "/", "/")
        view = registry.get(key)
        if view is None:
            return pages.empty_page("Open a profile to start.")
        if path == "/operators":
            return pages.operators_page(view)
        if path == "/forward-backward":
            return pages.fwdbwd_page(view)
        if path == "/timeline":
            return _timeline_page(registry, key)
        if path == "/graph":
            return pages.graph_page(view)
        if path == "/memory":
            return _memory_page(view)
        if path == modules_page.PATH:
            return modules_page.page(view)
        if path == kernels_page.PATH:
            return kernels_page.page(view)
        if path == ranks_page.PATH:
            return ranks_page.page(registry.ranks or ranks_page.summary_of(view), single=registry.ranks is None)
        if path == history_page.PATH:
            return history_page.page(registry.history)
        if path == "/compare":
            b = registry.get(compare_key)
            return pages.compare_page(view, max_upload_mb, b.label if b else None)
        return pages.overview_page(view)

    nav_outputs = [Output(f"nav-{p.strip('/') or 'overview'}", "className") for p, _ in PAGES]

    @app.callback(nav_outputs, Input("url", "pathname"))
    def highlight_tab(pathname):
        path = route.get((pathname or "/").rstrip("/") or "/", "/")
        return ["gt-tab gt-tab-active" if p == path else "gt-tab" for p, _ in PAGES]

    @app.callback(Output("profile-key", "data"), Output("profile-label", "children"),
                  Output("open-error", "children"), Input("open-upload", "contents"),
                  State("open-upload", "filename"), prevent_initial_call=True)
    def open_profile(contents, filename):
        if contents is None:
            raise PreventUpdate     # no file chosen yet
        try:
            data = decode_upload(contents, filename, max_bytes)
        except UploadError as exc:
            return no_update, no_update, _error_box(str(exc))
        view = ProfileView(data, Path(str(filename or "upload")).name)
        return registry.add(view), view.label, None

    # ---------------------------------------------------------------- operators

    @app.callback(Output("ops-grid", "rowData"), Output("ops-grid", "columnDefs"),
                  Input("ops-group", "value"), Input("ops-metric", "value"), Input("ops-device", "value"),
                  Input("ops-steps", "value"), State("profile-key", "data"), prevent_initial_call=True)
    def operators_table(group_by, metric, device, steps, key):
        view = registry.get(key)
        if view is None:
            raise PreventUpdate
        cols = pages.operator_columns(view, group_by, device, metric)
        return pages.row_data(pages.operator_rows(view, group_by, "per_step" in (steps or []))), cols

    @app.callback(Output("ops-grid", "dashGridOptions"), Input("ops-search", "value"),
                  State("ops-grid", "dashGridOptions"), prevent_initial_call=True)
    def operators_search(text, options):
        options = dict(options or {})
        options["quickFilterText"] = text or ""
        return options

    @app.callback(Output("ops-details", "children"), Input("ops-grid", "cellClicked"),
                  State("ops-group", "value"), State("ops-steps", "value"), State("profile-key", "data"),
                  prevent_initial_call=True)
    def operator_details(cell, group_by, steps, key):
        view = registry.get(key)
        if view is None or not cell or cell.get("rowId") is None:
            raise PreventUpdate
        return pages.operator_details(view, group_by, int(cell["rowId"]), "per_step" in (steps or []))

    # ---------------------------------------------------------------- forward + backward

    @app.callback(Output("fb-grid", "rowData"), Output("fb-grid", "columnDefs"), Output("fb-figure", "figure"),
                  Input("fb-by", "value"), Input("fb-clock", "value"), Input("fb-topn", "value"),
                  State("profile-key", "data"), prevent_initial_call=True)
    def fwdbwd(by, clock, top_n, key):
        view = registry.get(key)
        if view is None:
            raise PreventUpdate
        rows = view.fwdbwd_rows(by)
        return (pages.row_data(rows), pages.fwdbwd_columns(view, clock, by == "call_site"),
                figures.fwdbwd_figure(rows, top_n or 15, clock))

    # ---------------------------------------------------------------- timeline

    @app.callback(Output("tl-graph", "figure"), Output("tl-status", "children"), Output("tl-details", "children"),
                  Output("tl-window", "data"),
                  Input("tl-graph", "relayoutData"), Input("tl-graph", "clickData"), Input("tl-link-op", "value"),
                  Input("tl-reset", "n_clicks"), Input("tl-step", "value"), State("tl-window", "data"),
                  State("profile-key", "data"), prevent_initial_call=True)
    def timeline_update(relayout, click, link_op, reset, step, window, key):
        # The visible window lives in a small store: the browser never sends the figure back.
        # With it, the figure's ``uirevision``: plotly keeps the user's zoom while it stays the
        # same, so it changes whenever the server moves the window (a step, a reset).
        from dash import ctx  # noqa: PLC0415

        index = registry.timeline(key)
        if index is None:
            raise PreventUpdate
        prop = ctx.triggered[0]["prop_id"] if ctx.triggered else ""
        window = window if isinstance(window, dict) else {}
        rng = window.get("range")
        x_range = tuple(rng) if isinstance(rng, list) and len(rng) == 2 else None
        revision = str(window.get("revision", "timeline"))
        if prop == "tl-graph.relayoutData":
            new = _relayout_range(relayout)
            if new is None:
                raise PreventUpdate
            x_range = None if new == "auto" else new
        elif prop == "tl-reset.n_clicks":
            x_range, revision = None, f"reset-{reset}"
        elif prop == "tl-step.value":
            steps = _steps(index.view)
            if step is None or not 0 <= int(step) < len(steps):
                raise PreventUpdate
            # The step's range with a little margin on both sides.
            s = steps[int(step)]
            lo, hi = s.start_ns - index.view.time_origin_ns, s.end_ns - index.view.time_origin_ns
            pad = (hi - lo) * 0.01
            x_range, revision = (lo - pad, hi + pad), f"step-{step}"
        details = no_update
        selected = _clicked_event(click)
        if prop == "tl-graph.clickData":
            if selected is None:
                raise PreventUpdate
            details = _timeline_details(registry.get(key), selected)
        fig, status = _timeline_figure(index, x_range, link_op, selected)
        fig.update_layout(uirevision=revision)
        return fig, status, details, {"range": list(x_range) if x_range else None, "revision": revision}

    # ---------------------------------------------------------------- autograd graph

    @app.callback(Output("gr-cyto", "elements"), Output("gr-status", "children"), Output("gr-collapsed", "data"),
                  Input("gr-step", "value"), Input("gr-clock", "value"), Input("gr-colour-by", "value"),
                  Input("gr-expand", "n_clicks"), Input("gr-fit", "n_clicks"), Input("gr-cyto", "tapNodeData"),
                  Input("gr-search", "value"),
                  State("gr-collapsed", "data"), State("profile-key", "data"), prevent_initial_call=True)
    def graph_elements(step, clock, colour_by, _expand, _fit, tapped, search, collapsed, key):
        view = registry.get(key)
        steps = _steps(view) if view is not None else []
        if not steps or step is None or not 0 <= int(step) < len(steps):
            raise PreventUpdate
        # Several inputs can change in one call (leaving the search box for a button).
        props = {t["prop_id"] for t in callback_context.triggered or ()}
        prop = next((p for p in ("gr-cyto.tapNodeData", "gr-expand.n_clicks", "gr-fit.n_clicks", "gr-step.value")
                     if p in props), next(iter(props), ""))
        collapsed = list(collapsed or [])
        if prop == "gr-cyto.tapNodeData":
            # A click on a group's box or on a collapsed group toggles it; on a node, the
            # details callback answers.
            if not tapped or tapped.get("kind") not in ("group", "collapsed"):
                raise PreventUpdate
            k = str(tapped.get("key", ""))
            collapsed = [c for c in collapsed if c != k] if k in collapsed else collapsed + [k]
        elif prop == "gr-expand.n_clicks":
            collapsed = []
        elif prop in ("gr-fit.n_clicks", "gr-step.value"):
            collapsed = None                     # the readable first view
        # A search expands the groups around what it finds (graphSearch then marks it).
        reveal = search if "gr-search.value" in props else None
        g = build_graph(view, steps[int(step)], clock or "cpu", colour_by or "self", collapsed, reveal)
        if props == {"gr-search.value"} and sorted(g.collapsed) == sorted(collapsed or []):
            raise PreventUpdate                  # nothing to open: the marks are enough
        return g.elements, pages._graph_status(g), g.collapsed

    @app.callback(Output("gr-details", "children"), Input("gr-cyto", "tapNodeData"),
                  State("profile-key", "data"), prevent_initial_call=True)
    def graph_node(node, key):
        view = registry.get(key)
        if view is None or not node or "event" not in node or node.get("kind") in ("group", "collapsed"):
            raise PreventUpdate
        event = int(node["event"])
        if not 0 <= event < view.data.n_events:
            raise PreventUpdate
        return pages.node_details_panel(node_details(view, event))

    app.clientside_callback(ClientsideFunction("gradtrace", "graphView"), Output("gr-cyto", "className"),
                            Input("gr-cyto", "elements"))
    app.clientside_callback(ClientsideFunction("gradtrace", "graphSearch"), Output("gr-search-status", "children"),
                            Input("gr-search", "value"), Input("gr-cyto", "elements"), prevent_initial_call=True)

    _register_compare(app, registry, max_bytes)
    modules_page.register_callbacks(app, registry.get)
    kernels_page.register_callbacks(app, registry.get)
    history_page.register_callbacks(app, lambda: registry.history)


def _steps(view: ProfileView):
    if "_graph_steps" not in view.__dict__:
        view.__dict__["_graph_steps"] = steps_of(view)
    return view.__dict__["_graph_steps"]


def _relayout_range(relayout):
    """(x0_ns, x1_ns), "auto" for a reset, or None when the x range did not change."""
    if not relayout:
        return None
    if relayout.get("xaxis.autorange"):  # double-click or the modebar's reset
        return "auto"
    if "xaxis.range[0]" in relayout and "xaxis.range[1]" in relayout:
        lo, hi = relayout["xaxis.range[0]"], relayout["xaxis.range[1]"]
    elif isinstance(relayout.get("xaxis.range"), list):
        lo, hi = relayout["xaxis.range"][:2]
    else:
        return None
    try:
        return float(lo) * 1e6, float(hi) * 1e6
    except (TypeError, ValueError):
        return None


def _clicked_event(click) -> int | None:
    try:
        ev = int(click["points"][0]["customdata"])
    except (KeyError, TypeError, IndexError, ValueError):
        return None
    return ev if ev >= 0 else None


def _timeline_page(registry: _Registry, key: str):
    index = registry.timeline(key)
    view = index.view
    fig, status = _timeline_figure(index, None, None, None)
    cols = view.data.event_columns
    fwd_names = np.unique(cols["name_id"][(cols["scope"] == 0) & (cols["sequence_nr"] >= 0)])
    options = [{"label": view.data.strings[int(n)], "value": int(n)} for n in fwd_names]
    steps = [{"label": s.label, "value": k} for k, s in enumerate(_steps(view))]
    return pages.timeline_page(view, fig, status, options, steps)


def _timeline_figure(index: TimelineIndex, x_range, link_op, selected):
    view = index.view
    data, a, cols = view.data, view.data.analysis, view.data.event_columns
    lo, hi = (x_range if x_range else (None, None))
    window = index.query(lo, hi, budget=BAR_BUDGET)
    names = [data.strings[int(n)] for n in cols["name_id"][window.event]] if len(window.event) else []
    dur = (window.end - window.start) / 1e3
    lanes = index.lanes
    lane_of_row = np.zeros(max(index.n_rows, 1), dtype=np.int64)
    for k, lane in enumerate(lanes):
        lane_of_row[lane.first_row:lane.first_row + lane.rows] = k
    hover = []
    seq = cols["sequence_nr"][window.event] if len(window.event) else []
    for name, d, row, s, ev in zip(names, dur.tolist(), window.row.tolist(), seq, window.event.tolist()):
        extra = f"<br>sequence_nr {int(s)}" if s >= 0 else ""
        hover.append(f"<b>{figures.esc(name)}</b><br>{format_time(d)}<br>{figures.esc(lanes[lane_of_row[row]].label)}"
                     f"{extra}<br>event #{ev}")
    links, highlight = [], []
    row_of = index.event_row
    origin = view.time_origin_ns
    pairs = []
    if selected is not None:
        pairs += _pairs_for_events(a, np.array([selected]))
        highlight.append((cols["start_ns"][selected] - origin, cols["end_ns"][selected] - origin, row_of[selected]))
    if link_op is not None:
        w_lo, w_hi = window.x0 + origin, window.x1 + origin
        calls = np.flatnonzero((cols["name_id"] == int(link_op)) & (cols["start_ns"] < w_hi) & (cols["end_ns"] > w_lo))[:200]
        pairs += _pairs_for_events(a, calls)
        for e in calls.tolist():
            highlight.append((cols["start_ns"][e] - origin, cols["end_ns"][e] - origin, row_of[e]))
    for f, b in pairs[:300]:
        fx = (cols["start_ns"][f] + cols["end_ns"][f]) / 2 - origin
        bx = (cols["start_ns"][b] + cols["end_ns"][b]) / 2 - origin
        links.append((fx, row_of[f], bx, row_of[b]))
        highlight.append((cols["start_ns"][b] - origin, cols["end_ns"][b] - origin, row_of[b]))
    x_axis = (window.x0 / 1e6, window.x1 / 1e6) if x_range else None
    fig = timeline_figure(window, index, names, hover, links, x_axis, highlight)
    shown = len(window.start)
    status = (f"{window.n_in_window:,} of {len(index):,} ranges in view · {shown:,} drawn one by one, "
              f"{len(window.merged_start):,} merged segments ({int(window.merged_count.sum()):,} short ranges)")
    if window.notes:
        status += " · " + "; ".join(window.notes)
    if link_op is not None or selected is not None:
        status += f" · {len(links)} forward→backward link(s) drawn"
    return fig, status


def _pairs_for_events(a, events: np.ndarray) -> list[tuple[int, int]]:
    """(forward, backward) pairs touching these events."""
    pairs = []
    events = np.asarray(events, dtype=np.int64)
    if not len(events):
        return pairs
    fwd_of = a.forward_event[events]
    for e, f in zip(events.tolist(), fwd_of.tolist()):
        if f >= 0:
            pairs.append((f, e))
    linked = np.flatnonzero(a.forward_event >= 0)
    hit = linked[np.isin(a.forward_event[linked], events)]
    pairs += [(int(a.forward_event[b]), int(b)) for b in hit.tolist()]
    return pairs


def _timeline_details(view: ProfileView, event: int):
    d = node_details(view, event)
    cols = view.data.event_columns
    start_ms = (int(cols["start_ns"][event]) - view.time_origin_ns) / 1e6
    return [html.H3(d["name"], className="gt-mono", id="tl-details-name"),
            pages.text_table(["field", "value"], [
                ["scope", d["scope"]], ["start", f"{start_ms:.4f} ms"], ["thread", d["thread"]],
                ["sequence_nr", d["sequence_nr"]], ["input shapes", d["input_shapes"]],
                ["self CPU", format_time(d["self_cpu_us"])], ["CPU total", format_time(d["cpu_total_us"])],
                ["forward op", d["forward_op"] or "—"],
                ["backward nodes it created", ", ".join(d["backward_nodes"]) or "—"]], "gt-table gt-kv")]


def _memory_page(view: ProfileView):
    data = view.data
    mem = data.memory_columns
    series, peaks, peak_rows, kind_rows, kind_figs = {}, {}, [], [], []
    origin = view.time_origin_ns
    categorized = bool(data.metadata.get("memory_categories"))
    for dev in np.unique(mem["device_id"]).tolist():
        name = data.strings[int(dev)]
        live = live_by_kind(mem, data.memory_kinds, dev)
        t = (mem["time_ns"][live.rows] - origin) / 1e6
        y = live.total.astype(np.float64)
        k = int(np.argmax(y))
        ev = int(data.analysis.memory_event[live.rows[k]])
        op = data.name_of(ev) if ev >= 0 else ""
        peaks[name] = (float(t[k]), int(y[k]), op)
        peak_rows.append([name, format_bytes(y[k]), f"{t[k]:.3f} ms", op or "—"])
        series[name] = figures.downsample_steps(t, y)
        if categorized:
            keep = figures.downsample_indices(y)
            stacked = {kind_key(kind): (kind_label(kind), v[keep].astype(np.float64))
                       for kind, v in live.by_kind.items()}
            kind_figs.append((name, figures.memory_kinds_figure(t[keep], stacked, peaks[name], name)))
            rows, _ = kind_summary(mem, data.memory_kinds, dev)
            kind_rows += [[name, r.label, format_bytes(r.allocated), format_bytes(r.freed),
                           format_bytes(r.at_peak), format_bytes(r.max_live)] for r in rows]
    fig = figures.memory_figure(series, peaks) if series and not categorized else None
    by_module = memory_table(data, "module") if categorized and data.metadata.get("with_modules") else []
    return pages.memory_page(view, fig, view.memory_by_op(), peak_rows, kind_figs=kind_figs,
                             kind_rows=kind_rows, by_module_rows=by_module)


def _compare_body(a: ProfileView, b: ProfileView, by: str, metric: str | None, per_step: bool = False) -> list:
    rows, cols, sort_by, comp_rows, comp_cols = compare_tables(a.data, b.data, by, metric, merge_steps=not per_step)
    for r in rows:  # bar labels: one per row (forward ops repeat across call sites)
        site = (r.get("call_site") or "").rsplit("/", 1)[-1]
        r["label"] = f"{r['name']} @ {site}" if site else r["name"]
    label = metric_options(by, True).get(sort_by, sort_by)
    changed = sum(1 for r in rows if r.get(f"{sort_by}_delta"))
    return [
        html.Div(f"{len(rows)} rows ({changed} changed) · profiler.diff(A, B, by={by!r}) · sorted by the "
                 f"largest change of {label}", className="gt-note", id="cmp-source"),
        dcc.Graph(id="cmp-figure", figure=figures.diff_figure(rows, f"{sort_by}_delta", "label", label=label),
                  config=pages.GRAPH_CONFIG),
        pages.grid("cmp-grid", rows, cols, height=440),
    ] + ([html.H3("Step, phases, modules, kernels: per-step test"),
          pages.grid("cmp-stats-grid", comp_rows, comp_cols, height=320)] if comp_rows else [])


def _register_compare(app: Dash, registry: _Registry, max_bytes: int) -> None:
    @app.callback(Output("compare-key", "data"), Output("cmp-error", "children"),
                  Output("cmp-caption", "children"), Input("cmp-upload", "contents"),
                  State("cmp-upload", "filename"), State("profile-key", "data"), prevent_initial_call=True)
    def compare_upload(contents, filename, key):
        a = registry.get(key)
        if a is None or contents is None:
            raise PreventUpdate     # the page was just drawn (e.g. with --compare B): no upload yet
        try:
            data = decode_upload(contents, filename, max_bytes)
        except UploadError as exc:
            return no_update, _error_box(str(exc)), no_update
        b = ProfileView(data, Path(str(filename or "upload")).name)
        return registry.add(b), None, f"A = {a.label} · B = {b.label}"

    @app.callback(Output("cmp-metric", "options"), Output("cmp-metric", "value"), Input("cmp-by", "value"),
                  State("cmp-metric", "value"), State("profile-key", "data"), State("compare-key", "data"),
                  prevent_initial_call=True)
    def compare_metrics(by, metric, key, compare_key):
        a, b = registry.get(key), registry.get(compare_key)
        has_cuda = bool((a and a.data.has_device_time) or (b and b.data.has_device_time))
        options = metric_options(by, has_cuda)
        value = metric if metric in options else next(iter(options))
        return [{"label": v, "value": k} for k, v in options.items()], value

    @app.callback(Output("cmp-body", "children"), Input("compare-key", "data"), Input("cmp-metric", "value"),
                  Input("cmp-by", "value"), Input("cmp-steps", "value"), State("profile-key", "data"))
    def compare_body(compare_key, metric, by, steps, key):
        a, b = registry.get(key), registry.get(compare_key)
        if a is None or b is None:
            return html.Div("Upload profile B to compare it with A.", className="gt-note")
        if metric not in metric_options(by, True):
            raise PreventUpdate  # the metric list is being switched to the other view
        return _compare_body(a, b, by, metric, "per_step" in (steps or []))


# --------------------------------------------------------------------------- serve


def serve(path, host: str = "127.0.0.1", port: int = 8050, *, compare=None, store=None,
          max_upload_mb: float = DEFAULT_MAX_UPLOAD_MB, verbose: bool = False,
          on_listening: Callable[[str], object] | None = None) -> None:
    """Load ``path`` and serve the dashboard with waitress until interrupted.

    Binds to 127.0.0.1 unless ``host`` says otherwise; any other address prints a warning
    (the dashboard has no authentication: whoever reaches the port reads the profile).
    waitress is a production WSGI server: no development-server banner, and its request log
    (one line per request) is shown only when ``verbose``.

    Raises:
        viewer.UploadError: the file cannot be read (one line: file name and problem).
        OSError: the address cannot be bound (e.g. the port is in use); raised before
            anything is printed.

    Args:
        on_listening: called with the URL once the port is bound (e.g. to open a browser).
    """
    import logging  # noqa: PLC0415

    from waitress.server import create_server  # noqa: PLC0415 - only when serving

    ranks = None
    if ranks_page.is_run_dir(path):   # a run folder: rank profiles or torch traces, one per rank
        view, ranks = ranks_page.open_run(path)
    else:
        view = ProfileView(load_path(path), Path(path).name)
    app = create_app(view, compare=compare, max_upload_mb=max_upload_mb, ranks=ranks, store=store)
    wsgi = app.server
    if verbose:
        wsgi = _log_requests(app.server)
    logging.getLogger("waitress").setLevel(logging.INFO if verbose else logging.ERROR)
    server = create_server(wsgi, host=host, port=port, threads=4)   # binds now: OSError if busy
    if not _is_loopback(host):
        message = (f"gradtrace view: serving on {host}:{port}, reachable from other machines. The "
                   f"dashboard has no authentication; anyone who can connect can read this profile.")
        warnings.warn(message, stacklevel=2)
        print(f"WARNING: {message}", file=sys.stderr)
    url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}/"
    print(f"gradtrace view: {Path(path).name} on {url} (Ctrl-C to stop)", file=sys.stderr)
    if on_listening is not None:
        on_listening(url)
    try:
        server.run()
    finally:
        server.close()


def _log_requests(wsgi):
    """A WSGI app that prints one line per request (method, path, status) to stderr."""
    def logged(environ, start_response):
        def start(status, headers, exc_info=None):
            print(f"{environ.get('REQUEST_METHOD')} {environ.get('PATH_INFO')} {status}", file=sys.stderr)
            return start_response(status, headers, exc_info)
        return wsgi(environ, start)
    return logged


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
