"""The Memory page: live bytes over time per device (stacked by kind where recorded), the
peak and the op it was in, memory by op and by module.
"""
from __future__ import annotations

import numpy as np
from dash import Dash, dcc, html

from gradtrace.profiler.format import format_bytes
from gradtrace.profiler.memory import kind_key, kind_label, kind_summary, live_by_kind, memory_table

from . import figures
from .components import BYTES_FMT, GRAPH_CONFIG, INT_FMT, grid, num_col, profile_layout, section, text_table
from .model import ProfileView

__all__ = ["PATH", "TITLE", "layout", "register_callbacks", "page", "memory_page"]

PATH = "/memory"
TITLE = "Memory"


def layout(ctx) -> html.Div:
    """The page for :class:`viewer.registry.PageContext` ``ctx`` (built once per profile: it
    depends on nothing else; requests share it)."""
    return profile_layout(ctx, PATH, page)


def register_callbacks(app: Dash, registry) -> None:
    """None: the page is drawn once, with its data in place."""


def page(view: ProfileView) -> html.Div:
    """The page of a profile."""
    return memory_page(view, *_memory_data(view))


def _memory_data(view: ProfileView) -> tuple:
    """(figure, by-op rows, peak rows, kind figures, kind rows, by-module rows) of the page."""
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
            rows, _ = kind_summary(mem, data.memory_kinds, dev, live)
            kind_rows += [[name, r.label, format_bytes(r.allocated), format_bytes(r.freed),
                           format_bytes(r.at_peak), format_bytes(r.max_live)] for r in rows]
        del live, t, y        # a series per kind and record: gone before the tables below
    fig = figures.memory_figure(series, peaks) if series and not categorized else None
    by_module = memory_table(data, "module") if categorized and data.metadata.get("with_modules") else []
    return fig, view.memory_by_op(), peak_rows, kind_figs, kind_rows, by_module


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

