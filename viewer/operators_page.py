"""The Operators page: ``key_averages()`` in a grid, grouped by name, input shape, module or
stack (``group_by_stack_n=1``), and one row's calls, shapes, stacks and forward/backward
counterparts on click.
"""
from __future__ import annotations

from dash import Dash, Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

from gradtrace.profiler import columns as C
from gradtrace.profiler.format import format_time

from .components import (INT_FMT, clip_stack, control, fit_height, grid, grid_column, num_col, per_step_toggle,
                         profile_layout, radio, row_data, search_filters_grid, text_table)
from .model import GROUPINGS, ProfileView

__all__ = ["PATH", "TITLE", "layout", "register_callbacks", "page", "operator_columns", "operator_rows",
           "operator_details"]

PATH = "/operators"
TITLE = "Operators"


def layout(ctx) -> html.Div:
    """The page for :class:`viewer.registry.PageContext` ``ctx`` (built once per profile: it
    depends on nothing else; requests share it)."""
    return profile_layout(ctx, PATH, page)


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



def page(view: ProfileView) -> html.Div:
    has_cuda = view.data.has_device_time
    meta = view.data.metadata
    disabled_groupings = []
    if not (meta.get("record_shapes") or (view.data.analysis.shapes_id >= 0).any()):
        disabled_groupings.append("shape")
    if not (view.data.analysis.stack_id >= 0).any():
        disabled_groupings.append("stack")
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
                    html.Div(f"{s['count']} calls", className="gt-note"), html.Pre(clip_stack(s["text"]))])
                    for s in d["stacks"]]) if d["stacks"] else
                html.Div("not recorded (profile with with_stack=True)", className="gt-note"),
            ]),
        ]),
        html.H4("Calls"),
        grid("ops-calls-grid", calls, calls_cols, height=fit_height(len(calls), 300)),
    ]



def register_callbacks(app: Dash, registry) -> None:
    """The grouping, clock and sort switches, the search box and a row's details."""
    @app.callback(Output("ops-grid", "rowData"), Output("ops-grid", "columnDefs"),
                  Input("ops-group", "value"), Input("ops-metric", "value"), Input("ops-device", "value"),
                  Input("ops-steps", "value"), State("profile-key", "data"), prevent_initial_call=True)
    def operators_table(group_by, metric, device, steps, key):
        view = registry.get(key)
        if view is None:
            raise PreventUpdate
        cols = operator_columns(view, group_by, device, metric)
        return row_data(operator_rows(view, group_by, "per_step" in (steps or []))), cols

    search_filters_grid(app, "ops-search", "ops-grid")

    @app.callback(Output("ops-details", "children"), Input("ops-grid", "cellClicked"),
                  State("ops-group", "value"), State("ops-steps", "value"), State("profile-key", "data"),
                  prevent_initial_call=True)
    def operators_row_clicked(cell, group_by, steps, key):
        view = registry.get(key)
        if view is None or not cell or cell.get("rowId") is None:
            raise PreventUpdate
        return operator_details(view, group_by, int(cell["rowId"]), "per_step" in (steps or []))
