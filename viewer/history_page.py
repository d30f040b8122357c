"""The History page: a series across the stored runs, its change points, and any two runs compared.

The runs are those of a run store (:mod:`profiler.history`, filled by ``gradtrace runs add``);
``gradtrace view FILE --store PATH`` names it, else ``./gradtrace-runs/runs.sqlite`` is used
when it exists. The trend, the change points and the statistical diff are the profiler's
(:func:`profiler.history.trend`, :func:`profiler.stats.compare`); this module draws them.
Comparing takes two clicks: a point of the trend becomes run A, the next one run B, and the
diff of B against A appears under the chart (the two dropdowns do the same).

Every callback reads the store afresh (a SQLite connection per request: the file may grow
while the page is open, and connections do not cross threads), and a store that cannot be
read becomes a message in the page, never an error response.
"""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import plotly.graph_objects as go
from dash import Dash, Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

from gradtrace.profiler import stats
from gradtrace.profiler.format import format_ratio, format_time
from gradtrace.profiler.history import HistoryError, RunStore, trend

from .compare import stat_columns, stat_rows
from .figures import FONT, esc
from .components import GRAPH_CONFIG, control, grid, radio, section

__all__ = ["PATH", "TITLE", "layout", "page", "trend_figure", "series_options", "register_callbacks"]

PATH = "/history"
TITLE = "History"
STEP = json.dumps(["step", stats.STEP_ROW])


def _open(store_path) -> RunStore:
    if store_path is None:
        raise HistoryError("no run store: add runs with gradtrace runs add FILE, then start the "
                           "dashboard with gradtrace view FILE --store gradtrace-runs/runs.sqlite")
    try:
        return RunStore(store_path, create=False)
    except sqlite3.Error as exc:
        raise HistoryError(f"{store_path}: cannot read the run store ({exc})") from None


def series_options(store: RunStore) -> list[dict]:
    """Dropdown options: the step time, the phases, then every op, module and kernel stored."""
    options = [{"label": "step time", "value": STEP}]
    options += [{"label": f"phase: {p}", "value": json.dumps(["phase", p])} for p in ("forward", "backward",
                                                                                       "optimizer", "other")]
    for kind in ("op", "module", "kernel"):
        options += [{"label": f"{kind}: {name}", "value": json.dumps([kind, name])} for name in store.series_names(kind)]
    return options


def trend_figure(result: dict, selected: tuple = ()) -> go.Figure:
    """Median per step of each run (x: the runs in order), each level as a line, change points
    marked, the runs picked as A and B ringed.

    Args:
        result: :func:`profiler.history.trend`.
        selected: run ids picked (A, then B).
    """
    runs = result["runs"]
    x = list(range(len(runs)))
    y = [r["median_us"] / 1e3 for r in runs]
    labels = [f"#{r['id']} " + " ".join(f"{k}={v}" for k, v in sorted(r["tags"].items())) for r in runs]
    fig = go.Figure(go.Scatter(
        x=x, y=y, mode="lines+markers", customdata=[r["id"] for r in runs], name="median per step",
        line={"color": "#94a3b8", "width": 1}, marker={"size": 9, "color": "#2563eb"},
        hovertemplate=[f"{esc(lbl)}<br>{format_time(r['median_us'])} per step<extra></extra>"
                       for lbl, r in zip(labels, runs)]))
    bounds = [0] + [c["index"] for c in result["change_points"]] + [len(runs)]
    levels = [runs[bounds[0]]["median_us"] if runs else 0.0] + [c["after"] for c in result["change_points"]]
    if result["change_points"]:
        levels[0] = result["change_points"][0]["before"]
    for k in range(len(bounds) - 1):
        if bounds[k + 1] > bounds[k]:
            fig.add_trace(go.Scatter(x=[bounds[k] - 0.4, bounds[k + 1] - 0.6], y=[levels[k] / 1e3] * 2,
                                     mode="lines", line={"color": "#f59e0b", "width": 3}, hoverinfo="skip",
                                     name="level", showlegend=k == 0))
    for c in result["change_points"]:
        fig.add_vline(x=c["index"] - 0.5, line_dash="dash", line_color="#dc2626" if c["ratio"] > 1 else "#16a34a",
                      annotation_text=format_ratio(c["ratio"]), annotation_position="top")
    ring = {rid: name for rid, name in zip(selected, ("A", "B")) if rid is not None}
    picked = [i for i, r in enumerate(runs) if r["id"] in ring]
    if picked:
        fig.add_trace(go.Scatter(x=picked, y=[y[i] for i in picked], mode="markers+text",
                                 text=[ring[runs[i]["id"]] for i in picked], textposition="top center",
                                 marker={"size": 16, "color": "rgba(0,0,0,0)", "line": {"color": "#111827", "width": 2}},
                                 hoverinfo="skip", name="picked", showlegend=False))
    fig.update_xaxes(tickvals=x, ticktext=[f"#{r['id']}" for r in runs], title_text="run")
    fig.update_yaxes(title_text="median per step (ms)", rangemode="tozero")
    fig.update_layout(height=340, margin={"l": 60, "r": 20, "t": 40, "b": 50}, font=FONT,
                      title={"text": f"{esc(result['kind'])} {esc(result['name'])} ({result['clock']})", "font_size": 14},
                      clickmode="event", legend={"orientation": "h", "y": -0.25})
    return fig


def layout(ctx) -> html.Div:
    """The page for :class:`viewer.registry.PageContext` ``ctx`` (its run store, not the
    profile; read on every visit, as runs are added while the server runs)."""
    return page(ctx.registry.history)


def page(store_path) -> html.Div:
    """The page: series and clock pickers, the trend, run A and B pickers, the diff."""
    try:
        store = _open(store_path)
    except HistoryError as exc:
        return html.Div(id="page-history", children=[html.Div(str(exc), className="gt-note", id="hist-empty")])
    with store:
        runs = store.runs()
        options = series_options(store)
    if not runs:
        return html.Div(id="page-history", children=[html.Div(
            f"{store_path}: no runs yet; add some with gradtrace runs add FILE --store {store_path}",
            className="gt-note", id="hist-empty")])
    run_options = [{"label": r.label(), "value": r.id} for r in runs]
    clocks = {"cpu": "CPU"} | ({"cuda": "CUDA"} if any("cuda" in r.clocks for r in runs) else {})
    return html.Div(id="page-history", children=[
        html.Div(className="gt-toolbar", children=[
            control("Series", dcc.Dropdown(id="hist-series", options=options, value=STEP, clearable=False,
                                           className="gt-dropdown", style={"minWidth": "320px"})),
            control("Clock", radio("hist-clock", clocks, "cpu")),
        ]),
        html.Div(f"{len(runs)} runs in {store_path}", className="gt-note", id="hist-source"),
        dcc.Graph(id="hist-trend", config=GRAPH_CONFIG),
        html.Div(id="hist-cps", className="gt-note"),
        section("Compare two runs",
                html.Div(className="gt-toolbar", children=[
                    control("Run A", dcc.Dropdown(id="hist-a", options=run_options, value=None,
                                                  className="gt-dropdown", style={"minWidth": "240px"})),
                    control("Run B", dcc.Dropdown(id="hist-b", options=run_options, value=None,
                                                  className="gt-dropdown", style={"minWidth": "240px"})),
                ]),
                dcc.Loading(html.Div(id="hist-diff"), delay_show=300),
                note="Click a point of the trend for run A, another for run B (or pick them here)."),
    ])


def _trend_body(store_path, series: str, clock: str, selected: tuple):
    kind, name = json.loads(series)
    with _open(store_path) as store:
        result = trend(store, kind, name, clock)
    cps = result["change_points"]
    text = ("no change point" if not cps else "change points: " + "; ".join(
        f"from run #{c['run_id']}: {format_time(c['before'])} → {format_time(c['after'])} ({format_ratio(c['ratio'])})"
        for c in cps))
    if not result["runs"]:
        text = f"no stored run has {kind} {name!r} on the {clock} clock"
    return trend_figure(result, selected), text


def _diff_body(store_path, a: int, b: int, clock: str):
    with _open(store_path) as store:
        ra, rb = store.resolve(a), store.resolve(b)
        missing = [r.label() for r in (ra, rb) if clock not in r.clocks]
        if missing:
            return html.Div(f"{', '.join(missing)}: no {clock} times stored", className="gt-note")
        rows = stats.compare(store.samples(ra, clock), store.samples(rb, clock))
    grid_rows = stat_rows(rows)
    flagged = [r for r in rows if r.verdict in ("slower", "faster")]
    return [html.Div(f"B = {rb.label()} against A = {ra.label()}: {len(flagged)} of "
                     f"{sum(r.tested for r in rows)} tested rows changed (self {clock.upper()} time per step)",
                     className="gt-note", id="hist-diff-caption"),
            grid("hist-diff-grid", grid_rows, stat_columns(), height=420)]


def _error(text: str) -> html.Div:
    return html.Div(text, className="gt-error")


def register_callbacks(app: Dash, registry) -> None:
    """The page's callbacks; ``registry.history`` is the run store's path (or None)."""

    @app.callback(Output("hist-trend", "figure"), Output("hist-cps", "children"), Input("hist-series", "value"),
                  Input("hist-clock", "value"), Input("hist-a", "value"), Input("hist-b", "value"))
    def draw_trend(series, clock, a, b):
        if not isinstance(series, str) or clock not in ("cpu", "cuda"):
            raise PreventUpdate
        try:
            return _trend_body(registry.history, series, clock, (a, b))
        except (HistoryError, ValueError, sqlite3.Error) as exc:
            return go.Figure(), _error(str(exc))

    @app.callback(Output("hist-a", "value"), Output("hist-b", "value"), Input("hist-trend", "clickData"),
                  State("hist-a", "value"), State("hist-b", "value"), prevent_initial_call=True)
    def pick(click, a, b):
        # First click: A; second: B; a third starts again with A.
        try:
            run_id = int(click["points"][0]["customdata"])
        except (TypeError, KeyError, IndexError, ValueError):
            raise PreventUpdate from None
        if a is None or b is not None:
            return run_id, None
        return a, run_id

    @app.callback(Output("hist-diff", "children"), Input("hist-a", "value"), Input("hist-b", "value"),
                  Input("hist-clock", "value"))
    def diff(a, b, clock):
        if a is None or b is None:
            return html.Div("Pick run A and run B.", className="gt-note")
        if clock not in ("cpu", "cuda"):
            raise PreventUpdate
        try:
            return _diff_body(registry.history, a, b, clock)
        except (HistoryError, ValueError, sqlite3.Error) as exc:
            return _error(str(exc))


def default_store() -> Path | None:
    """``./gradtrace-runs/runs.sqlite`` when it exists (what ``gradtrace runs add`` writes by default)."""
    from gradtrace.profiler.history import DEFAULT_STORE  # noqa: PLC0415

    path = Path(DEFAULT_STORE)
    return path if path.is_file() else None
