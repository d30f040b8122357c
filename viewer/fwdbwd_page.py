"""The Forward + backward page: each forward op with the backward nodes it created, and the
sum, per op or per op and call site (``forward_backward_summary()``).
"""
from __future__ import annotations

from dash import Dash, Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

from . import figures
from .components import GRAPH_CONFIG, control, fit_height, grid, grid_column, profile_layout, radio, row_data
from .model import ProfileView

__all__ = ["PATH", "TITLE", "layout", "register_callbacks", "page", "fwdbwd_columns"]

PATH = "/forward-backward"
TITLE = "Forward + backward"


def layout(ctx) -> html.Div:
    """The page for :class:`viewer.registry.PageContext` ``ctx`` (built once per profile: it
    depends on nothing else; requests share it)."""
    return profile_layout(ctx, PATH, page)


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


def page(view: ProfileView) -> html.Div:
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



def register_callbacks(app: Dash, registry) -> None:
    """One row per op or per call site, the clock and how many bars."""
    @app.callback(Output("fb-grid", "rowData"), Output("fb-grid", "columnDefs"), Output("fb-figure", "figure"),
                  Input("fb-by", "value"), Input("fb-clock", "value"), Input("fb-topn", "value"),
                  State("profile-key", "data"), prevent_initial_call=True)
    def fwdbwd(by, clock, top_n, key):
        view = registry.get(key)
        if view is None:
            raise PreventUpdate
        rows = view.fwdbwd_rows(by)
        return (row_data(rows), fwdbwd_columns(view, clock, by == "call_site"),
                figures.fwdbwd_figure(rows, top_n or 15, clock))
