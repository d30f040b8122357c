"""The Kernels page: a profile's GPU activity by kernel, copy kind and collective.

The tables are the profiler's (:mod:`profiler.kernels`: ``kernel_table``, ``memcpy_table``,
``collective_table``, the same rows as ``gradtrace gpu --kernels``); this module shapes them
for dash-ag-grid. Kernel names are shown readable (``readable_kernel_name``: no return type,
no parameter list); the full name is in the tooltip and is what the search and the Name
filter match.
"""
from __future__ import annotations

import dataclasses

from dash import Dash, Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

from gradtrace.profiler.kernels import collective_table, kernel_table, memcpy_table, readable_kernel_name

from .model import ProfileView
from .cache import cached
from .components import (INT_FMT, PCT_FMT, TIME_FMT, control, fit_height, grid, num_col, profile_layout,
                         search_filters_grid, section)

__all__ = ["PATH", "TITLE", "layout", "GROUPINGS", "page", "kernel_rows", "kernel_columns", "register_callbacks"]

PATH = "/kernels"
TITLE = "Kernels"
# Besides the kernel name, what a row may be keyed by (kernel_table's arguments).
GROUPINGS = {"op": " + launching op", "launch": " + grid/block"}
NUM_FMT = {"function": "gtNum(params.value)"}                        # "—" for null
NULLABLE_PCT_FMT = {"function": "params.value == null ? '—' : gtPct(params.value)"}
NULLABLE_BYTES_FMT = {"function": "params.value == null ? '—' : gtBytes(params.value)"}
DEVICE_COL = {"field": "device", "headerName": "Device", "width": 100}
# The name column is as wide as its longest readable name (about 8 px a character in the
# grid's font, and the cell's padding), within these bounds, and takes any width left (flex; so it is not pinned:
# AG Grid does not flex a pinned column): no name is cut while there is empty space beside it.
_NAME_PX = (260, 600)


def _kernels(view: ProfileView, by_op: bool, by_launch: bool) -> list[dict]:
    # Once per profile and grouping.
    return cached(view, ("kernel_rows", by_op, by_launch),
                  lambda: kernel_rows(kernel_table(view.data, by_op=by_op, by_launch=by_launch)))


def kernel_rows(rows) -> list[dict]:
    """Grid rows of :func:`profiler.kernels.kernel_table` rows: their fields, ``name`` readable
    and ``full_name`` the trace's, Tensor Cores as yes/no (— for copies), an ``id``."""
    out = []
    for k, r in enumerate(rows):
        row = dataclasses.asdict(r)
        row.update(id=k, full_name=r.name, name=readable_kernel_name(r.name),
                   tensor_cores="—" if r.tensor_cores is None else ("yes" if r.tensor_cores else "no"),
                   # Shown only when the rows are keyed by them: "—" is a kernel with no
                   # launching op in the trace (a CUDA-graph replay), or no launch shape.
                   op=r.op or "—", grid=r.grid or "—", block=r.block or "—")
        out.append(row)
    return out


def _name_column(rows: list[dict], header: str = "Name") -> dict:
    longest = max((len(r["name"]) for r in rows), default=0)
    width = min(max(_NAME_PX[0], 8 * longest + 36), _NAME_PX[1])
    return {"field": "name", "headerName": header, "flex": 1, "minWidth": width,
            "tooltipField": "full_name", "filter": "agTextColumnFilter",
            # The search box and the column's filter match the full name, not the shown one.
            "getQuickFilterText": {"function": "params.data.full_name"},
            "filterValueGetter": {"function": "params.data.full_name"}}


def kernel_columns(rows: list[dict], by_op: bool, by_launch: bool, several_devices: bool) -> list[dict]:
    """Columns of the kernel grid (the launching op, grid and block only when grouped by them)."""
    cols = [_name_column(rows)]
    if several_devices:
        cols.append(DEVICE_COL)
    if by_op:
        cols.append({"field": "op", "headerName": "Launching op", "width": 200, "tooltipField": "op",
                     "filter": "agTextColumnFilter"})
    if by_launch:
        cols += [{"field": "grid", "headerName": "Grid", "width": 110}, {"field": "block", "headerName": "Block",
                                                                         "width": 110}]
    cols += [num_col("count", "Calls", INT_FMT, 90),
             num_col("kernel_time_total", "Total", TIME_FMT, 115, sort="desc", cellClass="gt-sorted"),
             num_col("kernel_time_total_percent", "Total %", PCT_FMT, 100),
             num_col("kernel_time_avg", "Mean", TIME_FMT, 110), num_col("kernel_time_min", "Min", TIME_FMT, 110),
             num_col("kernel_time_max", "Max", TIME_FMT, 110), num_col("kernel_time_std", "Std", TIME_FMT, 110),
             num_col("blocks_per_sm", "Mean blocks per SM", NUM_FMT, 150),
             num_col("occupancy_pct", "Mean est. occupancy %", NULLABLE_PCT_FMT, 170),
             {"field": "tensor_cores", "headerName": "Tensor Cores", "width": 125},
             {"field": "kind", "headerName": "Kind", "width": 150, "headerTooltip": "HTA's kernel type"}]
    return cols


def _memcpy_section(view: ProfileView):
    rows = [dict(r, id=k, host_memory=r["host_memory"] or "—")
            for k, r in enumerate(cached(view, "memcpy_rows", lambda: memcpy_table(view.data)))]
    if not rows:
        return html.Div("No memcpy or memset in this profile.", className="gt-note", id="kn-memcpy")
    cols = [{"field": "kind", "headerName": "Kind", "minWidth": 120, "flex": 1},
            {"field": "host_memory", "headerName": "Host memory", "width": 130},
            *([DEVICE_COL] if len({r["device"] for r in rows}) > 1 else []),
            num_col("count", "Calls", INT_FMT, 90),
            num_col("time_total_us", "Total", TIME_FMT, 115, sort="desc", cellClass="gt-sorted"),
            num_col("bytes", "Bytes", NULLABLE_BYTES_FMT, 115),
            num_col("bandwidth_gbps", "GB/s", NUM_FMT, 100, headerTooltip="bytes / time (1 GB = 1e9 bytes)")]
    return section("Memcpy and memset by kind", grid("kn-memcpy-grid", rows, cols, height=fit_height(len(rows), 300)),
                   note="Copies by direction (HtoD: host to device...) and the host memory they read or "
                        "write (pageable or pinned); GB/s = bytes / time, where the trace gives sizes.",
                   id="kn-memcpy")


def _collective_section(view: ProfileView):
    table = cached(view, "collective_rows", lambda: collective_table(view.data))
    # NCCL's algorithm and protocol in one column ("RING / SIMPLE"): the grid keeps its numbers
    # in view beside a full kernel name.
    rows = [dict(r, id=k, full_name=r["name"], name=readable_kernel_name(r["name"]),
                 nccl=" / ".join(x for x in (r["algorithm"], r["protocol"]) if x) or "—")
            for k, r in enumerate(table)]
    if not rows:
        return html.Div("No collective (NCCL) kernel in this profile.", className="gt-note", id="kn-collectives")
    cols = [_name_column(rows, "Kernel"), {"field": "collective", "headerName": "Collective", "width": 120},
            {"field": "nccl", "headerName": "Algorithm / protocol", "width": 170},
            *([DEVICE_COL] if len({r["device"] for r in rows}) > 1 else []),
            num_col("count", "Calls", INT_FMT, 90),
            num_col("latency_total_us", "Total", TIME_FMT, 115, sort="desc", cellClass="gt-sorted"),
            num_col("latency_avg_us", "Mean", TIME_FMT, 110), num_col("latency_max_us", "Max", TIME_FMT, 110),
            num_col("bytes", "Bytes", NULLABLE_BYTES_FMT, 115,
                    headerTooltip="message bytes of the calls whose size the trace recorded (Sized of Calls)"),
            num_col("sized", "Sized", INT_FMT, 90),
            num_col("bus_bandwidth_gbps", "Bus GB/s", NUM_FMT, 115,
                    headerTooltip="bytes / mean latency × nccl-tests' factor for the collective and world size")]
    return section("Collectives", grid("kn-collective-grid", rows, cols, height=fit_height(len(rows), 300)),
                   note="NCCL kernels by name: the collective, NCCL's algorithm and protocol (read from the "
                        "name); the collective and the message bytes from the communication op around the launch, "
                        "bus bandwidth as nccl-tests defines it "
                        "(— where the trace lacks the sizes or the world size).",
                   id="kn-collectives")


def layout(ctx) -> html.Div:
    """The page for :class:`viewer.registry.PageContext` ``ctx`` (built once per profile: it
    depends on nothing else; requests share it)."""
    return profile_layout(ctx, PATH, page)


def page(view: ProfileView) -> html.Div:
    """The Kernels page of a profile (a note when it has no GPU activity)."""
    rows = _kernels(view, False, False)
    if not rows:
        return html.Div(id="page-kernels", children=[html.Div(
            "This profile has no GPU activity: no kernel, memcpy or memset ran on a device. Profile a "
            "GPU run with the CUDA activity (torch.profiler's ProfilerActivity.CUDA, or gradtrace on a "
            "GPU) to see its kernels.", className="gt-callout", id="kn-empty")])
    several = len({r["device"] for r in rows}) > 1
    return html.Div(id="page-kernels", children=[
        html.Div(className="gt-toolbar", children=[
            control("Rows per kernel name", dcc.Checklist(
                id="kn-group", options=[{"label": label, "value": v} for v, label in GROUPINGS.items()],
                value=[], inline=True, className="gt-radio")),
            control("Search", dcc.Input(id="kn-search", type="search", placeholder="kernel or op name…",
                                        debounce=True, className="gt-input")),
        ]),
        html.Div(f"{len(rows)} kernel names · {sum(r['count'] for r in rows):,} calls · hover a name for the "
                 "full one; the search matches full names", className="gt-note", id="kn-caption"),
        grid("kn-grid", rows, kernel_columns(rows, False, False, several), height=fit_height(len(rows), 520)),
        html.Div("Mean blocks per SM and est. occupancy: CUPTI's launch-time estimates, weighted by kernel "
                 "time; Tensor Cores: the name is on TensorBoard's list of Tensor Core kernels; Kind: HTA's "
                 "kernel type.", className="gt-note"),
        _memcpy_section(view),
        _collective_section(view),
    ])


def register_callbacks(app: Dash, registry) -> None:
    """The page's interactions: the grouping toggles and the search box (``registry``: the
    app's :class:`viewer.registry.Registry`)."""
    @app.callback(Output("kn-grid", "rowData"), Output("kn-grid", "columnDefs"), Output("kn-caption", "children"),
                  Input("kn-group", "value"), State("profile-key", "data"), prevent_initial_call=True)
    def kernels_grouped(group, key):
        view = registry.get(key)
        if view is None:
            raise PreventUpdate
        group = group if isinstance(group, list) else []
        by_op, by_launch = "op" in group, "launch" in group
        rows = _kernels(view, by_op, by_launch)
        several = len({r["device"] for r in rows}) > 1
        what = "kernel names" + "".join(label for v, label in GROUPINGS.items() if v in group)
        caption = (f"{len(rows)} rows ({what}) · {sum(r['count'] for r in rows):,} calls · hover a name for the "
                   "full one; the search matches full names")
        return ([dict(r, id=str(r["id"])) for r in rows], kernel_columns(rows, by_op, by_launch, several), caption)

    search_filters_grid(app, "kn-search", "kn-grid")
