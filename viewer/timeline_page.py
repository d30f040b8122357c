"""The Timeline page: lanes per thread and stream, level-of-detail shapes (:mod:`viewer.timeline`),
zoom to a step, forward → backward links, a range's details on click.
"""
from __future__ import annotations

import numpy as np
from dash import Dash, Input, Output, State, dcc, html, no_update
from dash.exceptions import PreventUpdate

from gradtrace.profiler.format import format_time

from . import figures
from .cache import cached
from .components import GRAPH_CONFIG, control, profile_layout, text_table
from .graph import node_details
from .graph_page import steps
from .model import ProfileView
from .timeline import TimelineIndex
from .timeline_figure import BAR_BUDGET, timeline_figure

__all__ = ["PATH", "TITLE", "layout", "register_callbacks", "page", "index_of"]

PATH = "/timeline"
TITLE = "Timeline"


def index_of(view: ProfileView) -> TimelineIndex:
    """The profile's timeline index (built once per profile)."""
    return cached(view, "timeline_index", lambda: TimelineIndex(view))


def layout(ctx) -> html.Div:
    """The page for :class:`viewer.registry.PageContext` ``ctx`` (built once per profile: it
    depends on nothing else; requests share it)."""
    return profile_layout(ctx, PATH, page)


def page(view: ProfileView) -> html.Div:
    """The page: the whole profile drawn, the step and link pickers."""
    index = index_of(view)
    fig, status = _timeline_figure(index, None, None, None)
    cols = view.data.event_columns
    fwd_names = np.unique(cols["name_id"][(cols["scope"] == 0) & (cols["sequence_nr"] >= 0)])
    options = [{"label": view.data.strings[int(n)], "value": int(n)} for n in fwd_names]
    step_options = [{"label": s.label, "value": k} for k, s in enumerate(steps(view))]
    return _page(fig, status, options, step_options)


def _page(figure, status: str, link_options: list[dict], step_options: list[dict] = ()) -> html.Div:
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



def register_callbacks(app: Dash, registry) -> None:
    """Zoom, pan, reset, a step, a link op and a click, all in one callback (one figure)."""
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

        index = (index_of(registry.get(key)) if registry.get(key) is not None else None)
        if index is None:
            raise PreventUpdate
        prop = ctx.triggered[0]["prop_id"] if ctx.triggered else ""
        window = window if isinstance(window, dict) else {}
        rng = window.get("range")
        x_range = tuple(rng) if isinstance(rng, list) and len(rng) == 2 else None
        revision = str(window.get("revision", "timeline"))
        if prop == "tl-graph.relayoutData":
            new = _relayout_range(relayout)
            if new is None and not (isinstance(relayout, dict) and relayout.get("autosize")):
                raise PreventUpdate
            # The graph's first draw reports an autosize: answered with the figure for the
            # current state, not skipped. A link or step chosen while the page was loading
            # sent its own request first, and Dash drops that answer once the same callback
            # is asked again: skipping this one lost the choice.
            if new is not None:
                x_range = None if new == "auto" else new
        elif prop == "tl-reset.n_clicks":
            x_range, revision = None, f"reset-{reset}"
        elif prop == "tl-step.value":
            found = steps(index.view)
            if step is None or not 0 <= int(step) < len(found):
                raise PreventUpdate
            # The step's range with a little margin on both sides.
            s = found[int(step)]
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
            text_table(["field", "value"], [
                ["scope", d["scope"]], ["start", f"{start_ms:.4f} ms"], ["thread", d["thread"]],
                ["sequence_nr", d["sequence_nr"]], ["input shapes", d["input_shapes"]],
                ["self CPU", format_time(d["self_cpu_us"])], ["CPU total", format_time(d["cpu_total_us"])],
                ["forward op", d["forward_op"] or "—"],
                ["backward nodes it created", ", ".join(d["backward_nodes"]) or "—"]], "gt-table gt-kv")]

