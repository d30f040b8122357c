"""The Ranks page: a run folder's ranks side by side (``gradtrace view RUN_DIR``).

The numbers are :func:`profiler.ranks.summarize_run`'s (the same as ``gradtrace table
RUN_DIR``): per rank, the mean step split into compute, exposed communication and idle, and
each step's time on each rank, so a straggler stands out. A single profile shows as one rank.
Figure builders are pure functions of the summary.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import plotly.graph_objects as go
from dash import Dash, dcc, html

from gradtrace.profiler.ranks import is_run_dir, load_run, rank_table, step_table, summarize_run

from .figures import FONT, MAX_STEP_BARS, esc, step_bars
from .model import ProfileView
from .cache import cached
from .components import GRAPH_CONFIG, section, text_table

__all__ = ["PATH", "TITLE", "layout", "register_callbacks",
           "is_run_dir", "open_run", "page", "step_figure", "breakdown_figure", "summary_of"]

PATH = "/ranks"
TITLE = "Ranks"
# The parts add up to the step (profiler.ranks): memcpy/memset time is neither compute nor idle
# on the device (HTA's definitions), 0 where the breakdown is the host's.
PARTS = (("compute_ns", "compute", "#3b82f6"), ("exposed_ns", "exposed communication", "#ef4444"),
         ("memory_ns", "memcpy/memset", "#a855f7"), ("idle_ns", "idle", "#cbd5e1"))


def open_run(run_dir) -> tuple[ProfileView, dict]:
    """The lowest rank's profile (for the other pages) and the run's summary.

    Raises:
        FileNotFoundError, profiler.ranks.RunFolderError: as :func:`profiler.ranks.load_run`.
    """
    profiles = load_run(run_dir)
    rank, data = next(iter(profiles.items()))
    data.analysis  # noqa: B018 - analyse up front
    return ProfileView(data, f"{Path(run_dir).name} (rank {rank} of {len(profiles)})"), summarize_run(profiles)


def summary_of(view: ProfileView) -> dict:
    """A one-rank summary of a single profile (its rank from the metadata, else 0)."""
    info = view.data.metadata.get("distributed_info") or {}
    rank = info.get("rank", view.data.metadata.get("rank", 0))
    return cached(view, "rank_summary", lambda: summarize_run({rank if isinstance(rank, int) else 0: view.data}))


def layout(ctx) -> html.Div:
    """The page for :class:`viewer.registry.PageContext` ``ctx``: the run folder's ranks, or the
    open profile as one rank (built once per profile; requests share it)."""
    run = ctx.registry.ranks       # fixed when the app is made: the page is built once per profile
    return cached(ctx.view, ("layout", PATH), lambda: page(run or summary_of(ctx.view), single=run is None))


def register_callbacks(app: Dash, registry) -> None:
    """None: the page is drawn once, with its data in place."""


# Rows of the "slowest rank per step" table: the steps with the largest spread (a long profile
# has tens of thousands of steps, which an HTML table cannot hold without hanging the browser).
STEP_TABLE_ROWS = 100


def step_figure(summary: dict) -> go.Figure:
    """Grouped bars: each step's time on each rank (ms); the slowest rank of a step outlined.
    Beyond ``MAX_STEP_BARS`` steps a bar is the mean of consecutive steps (no outline)."""
    if len(summary["steps"]) > MAX_STEP_BARS:
        return _averaged_step_figure(summary)
    # A step whose ranks took the same time has no straggler to outline.
    slowest = {s["step"]: s["slowest_rank"] for s in summary["steps"] if s["spread_ns"] > 0}
    steps = [s["step"] for s in summary["steps"]]
    labels = np.array([esc(s) for s in steps], dtype=object)
    fig = go.Figure()
    # Arrays and one hover template per rank: plotly checks Python lists item by item, seconds
    # for the tens of thousands of steps of a long profile. A step the rank lacks is NaN (no bar).
    for r in summary["ranks"]:
        rows = {t["step"]: t for t in summary["step_times"] if t["rank"] == r["rank"]}
        ms = np.array([rows[s]["step_ns"] / 1e6 if s in rows else np.nan for s in steps])
        start_ms = np.array([rows[s]["start_ns"] / 1e6 if s in rows else np.nan for s in steps])
        fig.add_trace(go.Bar(
            x=labels, y=ms, name=f"rank {r['rank']}", customdata=start_ms,
            marker_line_width=np.array([3 if slowest.get(s) == r["rank"] else 0 for s in steps]),
            marker_line_color="#111827",
            hovertemplate=f"rank {r['rank']} · %{{x}}<br>step %{{y:.3f}} ms<br>starts at %{{customdata:.3f}} ms"
                          "<extra></extra>"))
    _step_layout(fig, "Step time per rank (outlined: the slowest rank of the step)")
    return fig


def _averaged_step_figure(summary: dict) -> go.Figure:
    """:func:`step_figure` of a long profile: per rank, the mean of consecutive steps per bar."""
    x, mean, per_bar, what = step_bars(summary["steps"])
    steps = [s["step"] for s in summary["steps"]]
    fig = go.Figure()
    for r in summary["ranks"]:
        rows = {t["step"]: t["step_ns"] for t in summary["step_times"] if t["rank"] == r["rank"]}
        ms = mean([rows.get(s, np.nan) / 1e6 for s in steps])
        fig.add_trace(go.Bar(x=np.array([esc(v) for v in x], dtype=object), y=ms, name=f"rank {r['rank']}",
                             hovertemplate=f"rank {r['rank']} · {what}<br>step %{{y:.3f}} ms<extra></extra>"))
    _step_layout(fig, f"Step time per rank ({per_bar} consecutive steps a bar)")
    return fig


def _step_layout(fig: go.Figure, title: str) -> None:
    fig.update_layout(barmode="group", template="plotly_white", font=FONT, height=340,
                      margin=dict(l=10, r=20, t=36, b=30), legend=dict(orientation="h", y=-0.2),
                      title=dict(text=title, font_size=14))
    fig.update_yaxes(title_text="step time (ms)")


def breakdown_figure(summary: dict) -> go.Figure:
    """Stacked horizontal bars: each rank's mean step as compute, exposed communication,
    memcpy/memset and idle (a part that is 0 on every rank is left out)."""
    labels = [f"rank {r['rank']}" for r in summary["ranks"]]
    fig = go.Figure()
    for key, name, colour in PARTS:
        ms = [r.get(key, 0) / 1e6 for r in summary["ranks"]]
        if key == "memory_ns" and not any(ms):
            continue
        fig.add_trace(go.Bar(y=labels, x=ms, name=name, orientation="h", marker_color=colour,
                             hovertemplate=[f"{lab}: {name} {m:.3f} ms<extra></extra>" for lab, m in zip(labels, ms)]))
    fig.update_layout(barmode="stack", template="plotly_white", font=FONT, height=150 + 40 * len(labels),
                      margin=dict(l=10, r=20, t=36, b=30),
                      legend=dict(orientation="h", y=-0.6, traceorder="normal"),
                      title=dict(text="Mean step per rank", font_size=14))
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title_text="ms")
    return fig


def page(summary: dict, single: bool = False) -> html.Div:
    """The Ranks page of a run's summary (``single``: the summary of the one open profile)."""
    rank_cols, rank_rows = rank_table(summary)        # the rows of gradtrace table RUN_DIR
    step_cols, step_rows = step_table(summary)
    steps_note = ""
    if len(step_rows) > STEP_TABLE_ROWS:
        spread = [s["spread_ns"] for s in summary["steps"]]
        keep = sorted(sorted(range(len(spread)), key=lambda k: spread[k], reverse=True)[:STEP_TABLE_ROWS])
        steps_note = (f" The {STEP_TABLE_ROWS} steps of largest spread of {len(step_rows):,}, in step order "
                      "(gradtrace table RUN_DIR --json has every step).")
        step_rows = [step_rows[k] for k in keep]
    basis = set(summary.get("basis", {}).values())
    how = ("device kernels: communication is NCCL and other collective kernels, compute the other kernels"
           if basis == {"device"} else "host ranges: communication ranges (record_param_comms, collectives, "
           "waits) and the ops outside them")
    children = []
    if single:
        children.append(html.Div("One profile open: its steps as one rank. Open a run folder (one profile or "
                                 "torch trace per rank) with gradtrace view RUN_DIR to compare ranks.",
                                 className="gt-callout", id="rk-single"))
    children += [
        html.Div(className="gt-row", children=[
            html.Div(className="gt-col-half", children=[
                dcc.Graph(id="rk-steps", figure=step_figure(summary), config=GRAPH_CONFIG)]),
            html.Div(className="gt-col-half", children=[
                dcc.Graph(id="rk-breakdown", figure=breakdown_figure(summary), config=GRAPH_CONFIG)]),
        ]),
        section("Ranks (mean per step, ms)",
                text_table([c.header for c in rank_cols], rank_rows),
                note=f"From the {how}. Exposed: communication nothing else overlapped; hidden: overlapped "
                     f"with compute. Common clock: {summary.get('clock', '-')}.", id="rk-table"),
        section("Slowest rank per step",
                text_table([c.header for c in step_cols], step_rows),
                note="Spread: slowest minus fastest rank's step time; start spread: how far apart the "
                     "ranks started the step on the common clock." + steps_note, id="rk-slowest"),
    ]
    return html.Div(id="page-ranks", children=children)
