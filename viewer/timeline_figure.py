"""The timeline figure: ranges as horizontal bars stacked by nesting depth, one row per
(thread, depth) and per device stream, names drawn where they fit.

Bars, not line segments: a plotly bar (``base`` = start, ``x`` = duration) is a hover and click
target over its whole area, where a thick line is one only near its points. Bars are SVG, so the
window query's budget is kept to a few thousand ranges drawn one by one; shorter ranges are
merged into runs (one WebGL line trace, as before) that split again when zoomed in.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from gradtrace.profiler.format import shorten

from .figures import esc
from .timeline import KINDS, MERGED_COLOUR, TimelineIndex, Window

__all__ = ["timeline_figure", "row_labels", "fitted_names", "BAR_BUDGET"]

BAR_BUDGET = 4_000      # ranges drawn one by one per window (SVG bars)
_MIN_TEXT_PX = 10       # a name smaller than this would not be read: not drawn
# Names are fitted to their bars on the server, where the plot's pixel width is not known:
# it is taken as a laptop screen's plot (a wider one leaves them room to spare), with an
# average character of the 12 px label font.
_PLOT_PX = 1100
_CHAR_PX = 7.0
_MIN_CHARS = 4          # "ad…d" still tells a name; fewer characters draw nothing


def fitted_names(names: list[str], duration_ms: np.ndarray, span_ms: float) -> list[str]:
    """Each bar's label: its name when it fits the bar's width at the label font, shortened
    in the middle (:func:`~gradtrace.profiler.format.shorten`, as the tables do) when at
    least a few characters fit, else nothing. Without this, plotly shrinks a long name to fit
    and then hides it as too small, so a wide bar with a long name showed no name at all.

    Args:
        names: the full names (the hover keeps them).
        duration_ms: each bar's duration.
        span_ms: the visible time span the plot's width shows.
    """
    px_per_ms = _PLOT_PX / max(span_ms, 1e-9)
    fit = ((np.asarray(duration_ms) * px_per_ms - 8) / _CHAR_PX).astype(np.int64)
    return [name if len(name) <= n else (shorten(name, int(n)) if n >= _MIN_CHARS else "")
            for name, n in zip(names, fit.tolist())]


def row_labels(index: TimelineIndex) -> list[str]:
    """One label per row: ``thread 1 · depth 0`` for CPU rows, the lane's name for a stream."""
    labels = [""] * index.n_rows
    for lane in index.lanes:
        for d in range(lane.rows):
            labels[lane.first_row + d] = f"{lane.label} · depth {d}" if lane.label.startswith("thread") else lane.label
    return labels


def timeline_figure(window: Window, index: TimelineIndex, names: list[str], hover: list[str],
                    links=(), x_range=None, highlight=()) -> go.Figure:
    """The timeline of one window.

    Args:
        window: from :meth:`TimelineIndex.query` (ns from the profile start).
        index: for the rows and lanes.
        names: name of each individually drawn range (raw text), in ``window.start`` order.
        hover: hover text of each (already escaped).
        links: forward→backward arrows as (x0_ns, row0, x1_ns, row1).
        x_range: the visible range in ms, or None for the whole window.
        highlight: (start_ns, end_ns, row) of selected ranges, outlined on top.
    Returns:
        A figure whose height follows its container (the page sizes it).
    """
    fig = go.Figure()
    lo_ms, hi_ms = x_range if x_range else (window.x0 / 1e6, window.x1 / 1e6)
    labels = fitted_names(names, (window.end - window.start) / 1e6, hi_ms - lo_ms)
    for kind, (label, colour) in KINDS.items():
        pick = np.flatnonzero(window.kind == kind)
        if not len(pick):
            continue
        start = window.start[pick] / 1e6
        fig.add_trace(go.Bar(
            base=start, x=(window.end[pick] - window.start[pick]) / 1e6, y=window.row[pick], orientation="h",
            name=label, marker=dict(color=colour, line=dict(color="rgba(15,23,42,0.35)", width=0.5)),
            text=[esc(labels[k]) for k in pick.tolist()], textposition="inside", insidetextanchor="start", textangle=0,
            textfont=dict(color="#ffffff" if kind != 2 else "#0f172a"), cliponaxis=True,
            hovertext=[hover[k] for k in pick.tolist()], hoverinfo="text", width=0.82,
            # A plain list: dcc.Graph reads clickData's customdata from the figure's data.
            customdata=window.event[pick].tolist()))
    for kind in np.unique(window.merged_kind).tolist():
        pick = np.flatnonzero(window.merged_kind == kind)
        label, colour = KINDS.get(kind, ("ranges", MERGED_COLOUR))
        xs, ys = _segments(window.merged_start[pick], window.merged_end[pick], window.merged_row[pick])
        text = np.repeat(np.array([f"{c:,} {label}s merged at this zoom — zoom in to split"
                                   for c in window.merged_count[pick].tolist()], dtype=object), 3)
        fig.add_trace(go.Scattergl(
            x=xs, y=ys, mode="lines", name=f"{label} (merged, zoom in)", line=dict(color=colour, width=14),
            opacity=0.45, hovertext=text, hoverinfo="text", customdata=[-1] * len(xs)))
    if len(highlight):
        hs = np.array(highlight, dtype=np.float64)
        fig.add_trace(go.Bar(base=hs[:, 0] / 1e6, x=(hs[:, 1] - hs[:, 0]) / 1e6, y=hs[:, 2], orientation="h",
                             name="selected", width=0.92, hoverinfo="skip",
                             marker=dict(color="rgba(0,0,0,0)", line=dict(color="#dc2626", width=2.5))))
    if len(links):
        lx, ly = [], []
        for x0, r0, x1, r1 in links:
            lx += [x0 / 1e6, x1 / 1e6, None]
            ly += [r0, r1, None]
        fig.add_trace(go.Scatter(x=lx, y=ly, mode="lines+markers", name="forward → backward",
                                 line=dict(color="#dc2626", width=1.5, dash="dash"),
                                 marker=dict(size=8, symbol="arrow", angleref="previous", color="#dc2626"),
                                 hoverinfo="skip"))
    n_rows = max(index.n_rows, 1)
    labels = row_labels(index)
    fig.update_yaxes(autorange=False, range=[n_rows - 0.5, -0.5], fixedrange=True, tickmode="array",
                     tickvals=list(range(len(labels))), ticktext=[esc(t) for t in labels], showgrid=False,
                     zeroline=False, tickfont=dict(size=11))
    shapes = [dict(type="line", xref="paper", x0=0, x1=1, y0=lane.first_row - 0.5, y1=lane.first_row - 0.5,
                   line=dict(color="#94a3b8", width=1)) for lane in index.lanes[1:]]
    fig.update_xaxes(title_text="time since profile start (ms)", showgrid=True, gridcolor="#f1f5f9",
                     range=list(x_range) if x_range else [window.x0 / 1e6, window.x1 / 1e6])
    fig.update_layout(template="plotly_white", shapes=shapes, hovermode="closest", dragmode="zoom",
                      uirevision="timeline", barmode="overlay", bargap=0, autosize=True,
                      uniformtext=dict(minsize=_MIN_TEXT_PX, mode="hide"),
                      font=dict(family="Inter, system-ui, sans-serif", size=12),
                      margin=dict(l=10, r=20, t=36, b=40),
                      legend=dict(orientation="h", y=1.01, x=0, yanchor="bottom"), showlegend=True)
    return fig


def _segments(start_ns, end_ns, row) -> tuple[np.ndarray, np.ndarray]:
    """[start, end, NaN] triples (x in ms) for one WebGL line trace."""
    n = len(start_ns)
    xs = np.empty(3 * n, dtype=np.float64)
    xs[0::3] = np.asarray(start_ns, dtype=np.float64) / 1e6
    xs[1::3] = np.asarray(end_ns, dtype=np.float64) / 1e6
    xs[2::3] = np.nan
    ys = np.empty(3 * n, dtype=np.float64)
    ys[0::3] = row
    ys[1::3] = row
    ys[2::3] = np.nan
    return xs, ys
