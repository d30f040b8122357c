"""Small Dash pieces every page builds with: cards, sections, controls, grids, tables.

Text from a profile is passed to components as plain strings (rendered as text, never as HTML).
"""
from __future__ import annotations

import dash_ag_grid as dag
from dash import Input, Output, State, dcc, html

from .cache import cached

__all__ = ["GRAPH_CONFIG", "TIME_FMT", "PCT_FMT", "BYTES_FMT", "INT_FMT", "KIND_FMT", "card", "section", "radio",
           "control", "row_data", "fit_height", "grid", "num_col", "text_table", "empty_page", "error_box",
           "grid_column", "per_step_toggle", "clip_stack", "profile_layout", "search_filters_grid"]

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



def error_box(message: str) -> html.Div:
    return html.Div(message, className="gt-error", role="alert")


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



def per_step_toggle(id_: str) -> dcc.Checklist:
    """The switch that shows ``ProfilerStep#N`` rows one per step instead of merged into
    ``ProfilerStep#*`` (``gradtrace table --per-step``)."""
    return dcc.Checklist(id=id_, options=[{"label": " one row per ProfilerStep#N", "value": "per_step"}],
                         value=[], className="gt-radio", inline=True)



def clip_stack(text: str, frames: int = 10) -> str:
    lines = text.split("\n")
    if len(lines) <= frames:
        return text
    return "\n".join(lines[:frames] + [f"… {len(lines) - frames} more frames"])


def profile_layout(ctx, path: str, page) -> html.Div:
    """The layout of a page drawn from its profile alone: ``page(ctx.view)``, built once per
    profile (cached under ``("layout", path)``) and shared by every request.

    Args:
        ctx: the :class:`viewer.registry.PageContext` of the request.
        path: the page's PATH (its cache key).
        page: ``ProfileView -> html.Div``, the page builder.
    """
    return cached(ctx.view, ("layout", path), lambda: page(ctx.view))


def search_filters_grid(app, search_id: str, grid_id: str) -> None:
    """Register the callback that makes the text box ``search_id`` the quick filter of the
    grid ``grid_id`` (AG Grid's ``quickFilterText``: the rows with the text in any column)."""
    @app.callback(Output(grid_id, "dashGridOptions"), Input(search_id, "value"),
                  State(grid_id, "dashGridOptions"), prevent_initial_call=True)
    def quick_filter(text, options):
        options = dict(options or {})
        options["quickFilterText"] = text or ""
        return options
