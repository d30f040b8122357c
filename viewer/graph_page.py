"""The Autograd graph page: one training step's forward ops and backward nodes (dash-cytoscape),
grouped by module, coloured by time; a node's details on click.
"""
from __future__ import annotations

import dash_cytoscape as cyto
from dash import ClientsideFunction, Dash, Input, Output, State, callback_context, dcc, html
from dash.exceptions import PreventUpdate

from gradtrace.profiler.format import format_time

from .cache import cached
from .components import clip_stack, control, profile_layout, radio, text_table
from .graph import EDGE_LEGEND, Step, build_graph, node_details, steps_of
from .model import ProfileView

__all__ = ["PATH", "TITLE", "layout", "register_callbacks", "page", "steps", "node_details_panel"]

PATH = "/graph"
TITLE = "Autograd graph"


def steps(view: ProfileView) -> list[Step]:
    """The profile's training steps (found once per profile; the Timeline zooms to them too)."""
    return cached(view, "graph_steps", lambda: steps_of(view))


def layout(ctx) -> html.Div:
    """The page for :class:`viewer.registry.PageContext` ``ctx`` (built once per profile: it
    depends on nothing else; requests share it)."""
    return profile_layout(ctx, PATH, page)


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


def page(view: ProfileView) -> html.Div:
    found = steps(view)
    options = [{"label": s.label, "value": k} for k, s in enumerate(found)]
    has_cuda = view.data.has_device_time
    g = build_graph(view, found[0]) if found else None
    return html.Div(id="page-graph", children=[
        html.Div(className="gt-toolbar", children=[
            control("Step", dcc.Dropdown(id="gr-step", options=options, value=0 if found else None,
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
            html.Pre(clip_stack("\n".join(d["stack"]), 14)) if d["stack"] else html.Div("not recorded", className="gt-note")]



def register_callbacks(app: Dash, registry) -> None:
    """Step, clock, colour, groups, search; a node's details; the view fitting (client side)."""
    @app.callback(Output("gr-cyto", "elements"), Output("gr-status", "children"), Output("gr-collapsed", "data"),
                  Input("gr-step", "value"), Input("gr-clock", "value"), Input("gr-colour-by", "value"),
                  Input("gr-expand", "n_clicks"), Input("gr-fit", "n_clicks"), Input("gr-cyto", "tapNodeData"),
                  Input("gr-search", "value"),
                  State("gr-collapsed", "data"), State("profile-key", "data"), prevent_initial_call=True)
    def graph_elements(step, clock, colour_by, _expand, _fit, tapped, search, collapsed, key):
        view = registry.get(key)
        found = steps(view) if view is not None else []
        if not found or step is None or not 0 <= int(step) < len(found):
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
        g = build_graph(view, found[int(step)], clock or "cpu", colour_by or "self", collapsed, reveal)
        if props == {"gr-search.value"} and sorted(g.collapsed) == sorted(collapsed or []):
            raise PreventUpdate                  # nothing to open: the marks are enough
        return g.elements, _graph_status(g), g.collapsed

    @app.callback(Output("gr-details", "children"), Input("gr-cyto", "tapNodeData"),
                  State("profile-key", "data"), prevent_initial_call=True)
    def graph_node(node, key):
        view = registry.get(key)
        if view is None or not node or "event" not in node or node.get("kind") in ("group", "collapsed"):
            raise PreventUpdate
        event = int(node["event"])
        if not 0 <= event < view.data.n_events:
            raise PreventUpdate
        return node_details_panel(node_details(view, event))

    app.clientside_callback(ClientsideFunction("gradtrace", "graphView"), Output("gr-cyto", "className"),
                            Input("gr-cyto", "elements"))
    app.clientside_callback(ClientsideFunction("gradtrace", "graphSearch"), Output("gr-search-status", "children"),
                            Input("gr-search", "value"), Input("gr-cyto", "elements"), prevent_initial_call=True)
