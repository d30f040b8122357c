"""The Compare page: profile A (the open one) against B (uploaded, or ``--compare B``):
``profiler.diff`` per op or call site, and the per-step statistical test.
"""
from __future__ import annotations

from pathlib import Path

from dash import Dash, Input, Output, State, dcc, html, no_update
from dash.exceptions import PreventUpdate

from . import figures
from .cache import cached
from .compare import VIEWS, compare_tables, metric_options
from .components import GRAPH_CONFIG, control, error_box, grid, per_step_toggle, radio
from .loading import UploadError, decode_upload
from .model import ProfileView

__all__ = ["PATH", "TITLE", "layout", "register_callbacks", "page", "compare_body"]

PATH = "/compare"
TITLE = "Compare"


def layout(ctx) -> html.Div:
    """The page for :class:`viewer.registry.PageContext` ``ctx``."""
    b = ctx.registry.get(ctx.compare_key)
    return page(ctx.view, ctx.registry.max_upload_mb, b.label if b else None)


def page(view: ProfileView, max_upload_mb: float, b_label: str | None) -> html.Div:
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


def compare_body(a: ProfileView, b: ProfileView, by: str, metric: str | None, per_step: bool = False) -> list:
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
                  config=GRAPH_CONFIG),
        grid("cmp-grid", rows, cols, height=440),
    ] + ([html.H3("Step, phases, modules, kernels: per-step test"),
          grid("cmp-stats-grid", comp_rows, comp_cols, height=320)] if comp_rows else [])



def register_callbacks(app: Dash, registry) -> None:
    """B's upload, the metric list of a view, the body."""
    @app.callback(Output("compare-key", "data"), Output("cmp-error", "children"),
                  Output("cmp-caption", "children"), Input("cmp-upload", "contents"),
                  State("cmp-upload", "filename"), State("profile-key", "data"), prevent_initial_call=True)
    def compare_upload(contents, filename, key):
        a = registry.get(key)
        if a is None or contents is None:
            raise PreventUpdate     # the page was just drawn (e.g. with --compare B): no upload yet
        try:
            data = decode_upload(contents, filename, registry.max_bytes)
        except UploadError as exc:
            return no_update, error_box(str(exc)), no_update
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
    def compare_redraw(compare_key, metric, by, steps, key):
        a, b = registry.get(key), registry.get(compare_key)
        if a is None or b is None:
            return html.Div("Upload profile B to compare it with A.", className="gt-note")
        if metric not in metric_options(by, True):
            raise PreventUpdate  # the metric list is being switched to the other view
        per_step = "per_step" in (steps or [])
        # Once per pair and view, kept with B (an upload): it goes when B does.
        return cached(b, ("diff_of", key, by, metric, per_step), lambda: compare_body(a, b, by, metric, per_step))
