"""Plotly figure builders: pure functions from plain data to ``go.Figure``.

Names that come from a profile (op names, call sites) are escaped before they reach a figure:
plotly renders a small subset of HTML in text and hover labels, and a profile is untrusted
input. :func:`esc` is the one place that does it.
"""
from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

from gradtrace.profiler.format import format_bytes, format_time

from .model import PHASES

__all__ = ["esc", "phase_split_figure", "top_ops_figure", "fwdbwd_figure",
           "memory_figure", "memory_kinds_figure", "memory_by_op_figure", "diff_figure",
           "downsample_steps", "downsample_indices", "KIND_COLOURS", "gpu_step_breakdown_figure",
           "gpu_utilization_figure", "idle_breakdown_figure", "step_bars", "MAX_STEP_BARS"]

# Legends go above the plot on the left: the plot toolbar (modebar) sits on the right.
LEGEND = dict(orientation="h", y=1.02, x=0, xanchor="left", yanchor="bottom")
PHASE_COLOURS = {"forward": "#3b82f6", "backward": "#f97316", "optimizer": "#a855f7", "other": "#cbd5e1"}
FONT = dict(family="Inter, system-ui, -apple-system, Segoe UI, Roboto, sans-serif", size=12, color="#1f2937")


def esc(text) -> str:
    """Profile text made inert for plotly's label renderer (``<``, ``>``, ``&``, quotes)."""
    return html.escape(str(text), quote=True)


def _base_layout(fig: go.Figure, height: int, **kwargs) -> go.Figure:
    fig.update_layout(template="plotly_white", height=height, font=FONT,
                      margin=dict(l=10, r=20, t=36, b=30), **kwargs)
    return fig


def phase_split_figure(splits: dict[str, dict[str, int]]) -> go.Figure:
    """Horizontal stacked bars: one bar per clock ("CPU", "CUDA"), one segment per phase.

    Args:
        splits: clock label -> {phase: ns}.
    """
    fig = go.Figure()
    labels = list(splits)
    for phase in PHASES:
        ms = [splits[c].get(phase, 0) / 1e6 for c in labels]
        totals = [max(sum(splits[c].values()), 1) for c in labels]
        pct = [100 * splits[c].get(phase, 0) / t for c, t in zip(labels, totals)]
        fig.add_trace(go.Bar(
            y=labels, x=ms, name=phase, orientation="h", marker_color=PHASE_COLOURS[phase],
            text=[f"{phase} {p:.0f}%" if p >= 6 else "" for p in pct], textposition="inside",
            insidetextanchor="middle",
            hovertemplate=[f"{phase}: {m:.3f} ms ({p:.1f}%)<extra>{c}</extra>"
                           for m, p, c in zip(ms, pct, labels)]))
    fig.update_layout(barmode="stack", legend=dict(orientation="h", y=-0.3, traceorder="normal"))
    fig.update_xaxes(title_text="self time (ms)")
    return _base_layout(fig, 90 + 50 * len(labels), title=dict(text="Where step time goes", font_size=14))


# Most bars in the per-step chart: beyond, consecutive steps share a bar (their mean), so a
# profile of tens of thousands of steps still draws a few hundred shapes per category. 200 bars
# are 4-5 pixels each on a page-wide chart, wide enough to point at; 500 (1-2 pixels) took the
# browser 0.6 s more to draw the Overview of a 10M-event trace (8 categories a bar).
MAX_STEP_BARS = 200


def step_bars(steps: list[dict]):
    """The bars of a per-step chart: one per step up to :data:`MAX_STEP_BARS`, else each the
    mean of as many consecutive steps as it takes.

    Args:
        steps: dicts with the step's name (``"ProfilerStep#N"``) under ``"step"``, in order.
    Returns:
        (x labels as an object array, ``mean(values)`` giving each bar's mean of per-step
        values, steps per bar, the hover text naming a bar's steps).
    """
    names = [s["step"].rsplit("#", 1)[-1] for s in steps]
    per_bar = -(-len(steps) // MAX_STEP_BARS) if steps else 1
    first = np.arange(0, len(steps), per_bar)
    count = np.diff(np.r_[first, len(steps)]).astype(np.float64)
    if per_bar == 1:
        x = np.array(names, dtype=object)
        what = "step %{x}"
    else:
        x = np.array([f"{names[a]}–{names[a + int(c) - 1]}" for a, c in zip(first.tolist(), count.tolist())],
                     dtype=object)
        what = f"steps %{{x}} (mean of {per_bar})"

    def mean(values) -> np.ndarray:
        return np.add.reduceat(np.asarray(values, dtype=np.float64), first) / count if len(first) else np.zeros(0)

    return x, mean, per_bar, what


def step_phase_figure(steps: list[dict]) -> go.Figure:
    """One stacked bar per training step (``ProfilerStep#N``): forward, backward, optimizer
    and other (step time outside ops), so each bar is the step's wall time. With more than
    :data:`MAX_STEP_BARS` steps, each bar is the mean of as many consecutive steps as it takes.

    Args:
        steps: :meth:`ProfileView.step_phases` rows (ns).
    """
    fig = go.Figure()
    x, mean, per_bar, what = step_bars(steps)
    duration = np.maximum(mean([s["duration"] for s in steps]), 1)
    # Arrays and one hover template per trace: plotly checks a Python list item by item, which
    # took seconds for the ~70,000 steps of a 10M-event profile.
    for phase in PHASES:
        ns = mean([s[phase] for s in steps])
        fig.add_trace(go.Bar(
            x=x, y=ns / 1e6, customdata=100 * ns / duration, name=phase, marker_color=PHASE_COLOURS[phase],
            hovertemplate=f"{what}<br>{phase}: %{{y:.3f}} ms (%{{customdata:.1f}}% of the step)<extra></extra>"))
    fig.update_layout(barmode="stack", bargap=0.15 if len(steps) < 50 else 0.0,
                      legend=dict(LEGEND, traceorder="normal"))
    if len(steps) >= 50:    # bars under a pixel wide: their white outline would wash the colours out
        fig.update_traces(marker_line_width=0)
    fig.update_xaxes(title_text="step (ProfilerStep#N)" if per_bar == 1 else
                     f"steps (ProfilerStep#N), {per_bar} a bar", type="category", nticks=min(len(x), 20))
    fig.update_yaxes(title_text="wall time (ms)", rangemode="tozero")
    return _base_layout(fig, 300)


def top_ops_figure(rows: list[dict], clock: str = "cpu") -> go.Figure:
    """Horizontal bars of the top ops by self time (rows from ``ProfileView.top_ops``)."""
    key = f"self_{clock}_time_total"
    pct_key = key + "_percent"
    rows = list(reversed(rows))
    fig = go.Figure(go.Bar(
        y=[f"{esc(r['name'])}" for r in rows], x=[r[key] / 1e3 for r in rows], orientation="h",
        marker_color="#2563eb" if clock == "cpu" else "#16a34a",
        text=[f"{r[pct_key]:.1f}%" for r in rows], textposition="outside", cliponaxis=False,
        hovertemplate=[f"{esc(r['name'])}<br>self {clock.upper()}: {format_time(r[key])} "
                       f"({r[pct_key]:.1f}%)<br>{r['count']:,} calls<extra></extra>" for r in rows]))
    fig.update_xaxes(title_text=f"self {clock.upper()} time (ms)")
    fig.update_yaxes(automargin=True)
    return _base_layout(fig, 120 + 26 * len(rows),
                        title=dict(text=f"Top {len(rows)} ops by self {clock.upper()} time", font_size=14))


def fwdbwd_figure(rows: list[dict], top_n: int = 15, clock: str = "cpu") -> go.Figure:
    """Stacked bars (forward, backward) for the ``top_n`` forward ops by forward+backward time."""
    f_key, b_key, t_key = (f"{clock}_time_total", f"backward_{clock}_time_total",
                           f"forward_backward_{clock}_time_total")
    rows = sorted(rows, key=lambda r: -r[t_key])[:top_n]
    labels = [esc(r["name"] + (f" @ {_short_site(r['call_site'])}" if r.get("call_site") else "")) for r in rows]
    fig = go.Figure()
    for key, name, colour in ((f_key, "forward", PHASE_COLOURS["forward"]), (b_key, "backward it caused", PHASE_COLOURS["backward"])):
        fig.add_trace(go.Bar(
            x=labels, y=[r[key] / 1e3 for r in rows], name=name, marker_color=colour,
            hovertemplate=[f"{lab}<br>{name}: {format_time(r[key])}<extra></extra>" for lab, r in zip(labels, rows)]))
    fig.update_layout(barmode="stack", legend=LEGEND)
    fig.update_yaxes(title_text=f"{clock.upper()} time (ms)")
    fig.update_xaxes(tickangle=-30, automargin=True)
    fig = _base_layout(fig, 420, title=dict(text=f"Forward + backward cost, top {len(rows)}", font_size=14,
                                            y=0.98, yanchor="top"))
    fig.update_layout(margin_t=64)      # the title on the first line, the legend under it
    return fig


def _short_site(site: str, width: int = 40) -> str:
    site = site.rsplit("/", 1)[-1]
    return site if len(site) <= width else "…" + site[-width:]


def downsample_steps(t: np.ndarray, y: np.ndarray, max_points: int = 4000) -> tuple[np.ndarray, np.ndarray]:
    """Thin a step series to about ``max_points`` points, keeping each bin's min and max
    (so peaks survive)."""
    keep = downsample_indices(y, max_points)
    return t[keep], y[keep]


def downsample_indices(y: np.ndarray, max_points: int = 4000) -> np.ndarray:
    """The points of a step series that :func:`downsample_steps` keeps (all of a short one);
    several series thinned by one of them (stacked kinds, by their total) stay aligned."""
    n = len(y)
    if n <= max_points:
        return np.arange(n)
    bins = max_points // 2
    edges = np.linspace(0, n, bins + 1).astype(np.int64)
    keep = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        if hi <= lo:
            continue
        seg = y[lo:hi]
        keep += sorted({lo + int(np.argmin(seg)), lo + int(np.argmax(seg))})
    return np.array(keep, dtype=np.int64)


def memory_figure(series: dict[str, tuple[np.ndarray, np.ndarray]],
                  peaks: dict[str, tuple[float, int, str]]) -> go.Figure:
    """Allocated bytes over time per device, peaks marked.

    Args:
        series: device -> (time_ms, allocated bytes), already thinned.
        peaks: device -> (time_ms, bytes, op name at the peak).
    """
    fig = go.Figure()
    colours = ["#2563eb", "#16a34a", "#f97316", "#a855f7"]
    for k, (device, (t, y)) in enumerate(series.items()):
        colour = colours[k % len(colours)]
        fig.add_trace(go.Scattergl(x=t, y=y / (1 << 20), mode="lines", name=esc(device),
                                   line=dict(color=colour, width=1.5, shape="hv"),
                                   hovertemplate="%{x:.3f} ms<br>%{y:.3f} MB<extra>" + esc(device) + "</extra>"))
        if device in peaks:
            pt, pb, pop = peaks[device]
            fig.add_trace(go.Scatter(x=[pt], y=[pb / (1 << 20)], mode="markers+text", name=f"peak {esc(device)}",
                                     marker=dict(size=11, color="#dc2626", symbol="triangle-down"),
                                     text=[f"peak {format_bytes(pb)}"], textposition="top center",
                                     hovertemplate=f"peak {format_bytes(pb)} at {pt:.3f} ms<br>in {esc(pop) or '(no op)'}<extra></extra>"))
    fig.update_xaxes(title_text="time since profile start (ms)")
    fig.update_yaxes(title_text="allocated (MB)", rangemode="tozero")
    fig.update_layout(legend=LEGEND)
    return _base_layout(fig, 380)


# One colour per memory kind (profiler.memory.kind_key), the same in every chart.
KIND_COLOURS = {"parameter": "#2563eb", "optimizer_state": "#a855f7", "gradient": "#f97316",
                "activation": "#16a34a", "input": "#0ea5e9", "autograd_detail": "#eab308",
                "temporary": "#94a3b8", "unknown": "#e2e8f0"}


def memory_kinds_figure(t: np.ndarray, by_kind: dict[str, tuple[str, np.ndarray]],
                        peak: tuple[float, int, str], device: str) -> go.Figure:
    """Live bytes over time on one device, stacked by kind (torch's memory timeline), the
    peak marked.

    Args:
        t: time of each point (ms), already thinned.
        by_kind: kind key -> (label, live bytes at each point), bottom of the stack first.
        peak: (time ms, total bytes, op name at the peak).
        device: the device's name ("cpu", "cuda:0").
    """
    fig = go.Figure()
    for key, (label, y) in by_kind.items():
        colour = KIND_COLOURS.get(key, "#64748b")
        fig.add_trace(go.Scatter(
            x=t, y=y / (1 << 20), mode="lines", name=esc(label), stackgroup="kinds",
            line=dict(width=0.5, color=colour, shape="hv"), fillcolor=colour,
            hovertemplate="%{x:.3f} ms<br>" + esc(label) + " %{y:.3f} MB<extra>" + esc(device) + "</extra>"))
    pt, pb, pop = peak
    fig.add_trace(go.Scatter(x=[pt], y=[pb / (1 << 20)], mode="markers+text", name="peak",
                             marker=dict(size=11, color="#dc2626", symbol="triangle-down"),
                             text=[f"peak {format_bytes(pb)}"], textposition="top center",
                             hovertemplate=f"peak {format_bytes(pb)} at {pt:.3f} ms<br>in {esc(pop) or '(no op)'}"
                                           "<extra></extra>"))
    fig.update_xaxes(title_text="time since profile start (ms)")
    fig.update_yaxes(title_text=f"allocated on {esc(device)} (MB)", rangemode="tozero")
    fig.update_layout(legend=LEGEND, hovermode="x unified")
    _base_layout(fig, 400)
    fig.update_layout(margin_t=48)      # room for the legend above the plot
    return fig


def memory_by_op_figure(rows: list[dict], top_n: int = 15) -> go.Figure:
    rows = rows[:top_n][::-1]
    fig = go.Figure(go.Bar(
        y=[esc(r["name"]) for r in rows], x=[r["allocated"] / (1 << 20) for r in rows], orientation="h",
        marker_color="#0ea5e9",
        hovertemplate=[f"{esc(r['name'])}<br>allocated {format_bytes(r['allocated'])} in {r['allocations']} "
                       f"allocations<br>freed {format_bytes(r['freed'])}<extra></extra>" for r in rows]))
    fig.update_xaxes(title_text="allocated inside the op (MB)")
    fig.update_yaxes(automargin=True)
    return _base_layout(fig, 120 + 24 * len(rows), title=dict(text="Memory allocated by op", font_size=14))


def diff_figure(rows: list[dict], value_key: str = "delta", label_key: str = "name", top_n: int = 15,
                unit: str = "us", label: str = "") -> go.Figure:
    """Diverging bars of the largest changes (positive: B is slower)."""
    rows = sorted(rows, key=lambda r: -abs(r.get(value_key) or 0))[:top_n][::-1]
    vals = [(r.get(value_key) or 0) for r in rows]
    fig = go.Figure(go.Bar(
        y=[esc(r.get(label_key, "")) for r in rows], x=[v / 1e3 if unit == "us" else v for v in vals],
        orientation="h", marker_color=["#dc2626" if v > 0 else "#16a34a" for v in vals],
        hovertemplate=[f"{esc(r.get(label_key, ''))}: {v:+.3f} {unit}<extra></extra>" for r, v in zip(rows, vals)]))
    fig.update_xaxes(title_text="change B − A (ms)" if unit == "us" else f"change B − A ({unit})", zeroline=True,
                     zerolinecolor="#6b7280")
    fig.update_yaxes(automargin=True)
    title = f"Largest changes of {label} (red: B slower)" if label else "Largest changes (red: B slower)"
    return _base_layout(fig, 140 + 24 * len(rows), title=dict(text=title, font_size=14))


# --------------------------------------------------------------------------- GPU (Overview)

# TensorBoard's overview categories (profiler.gpu.STEP_CATEGORIES), highest priority first,
# under the names its step-time breakdown uses.
STEP_CATEGORY_LABELS = {"kernel": "Kernel", "memcpy": "Memcpy", "memset": "Memset",
                        "communication": "Communication", "runtime": "Runtime", "dataloader": "DataLoader",
                        "cpu_exec": "CPU Exec", "other": "Other"}
STEP_CATEGORY_COLOURS = {"kernel": "#16a34a", "memcpy": "#0ea5e9", "memset": "#6366f1",
                         "communication": "#ef4444", "runtime": "#f59e0b", "dataloader": "#a855f7",
                         "cpu_exec": "#3b82f6", "other": "#cbd5e1"}
IDLE_LABELS = {"host_wait_us": "host wait", "kernel_wait_us": "kernel wait", "other_us": "other"}
IDLE_COLOURS = {"host_wait_us": "#f59e0b", "kernel_wait_us": "#6366f1", "other_us": "#94a3b8"}


def gpu_step_breakdown_figure(steps: list[dict], overall: dict[str, float]) -> go.Figure:
    """TensorBoard's step time breakdown: one stacked bar per step (each category takes only
    the time no higher-priority one took, so a bar is the step's time) and one for the mean
    step.

    Args:
        steps: ``[{"step": name, "step_breakdown_us": {category: us}}]``, in order.
        overall: ``{category: us}`` summed over the steps.
    """
    n = max(len(steps), 1)
    # Beyond MAX_STEP_BARS steps a bar is the mean of consecutive steps (18,000 steps of a
    # 10M-event trace drew 150,000 bars and hung the browser); then the mean step.
    bars, mean, per_bar, what = step_bars(steps)
    x = np.append(bars, "mean")
    categories = list(overall) or list(STEP_CATEGORY_LABELS)
    whole = np.append(mean([sum(s["step_breakdown_us"].values()) for s in steps]),
                      sum(overall.values()) / n) / 1e3
    fig = go.Figure()
    for cat in categories:
        label = STEP_CATEGORY_LABELS.get(cat, cat.replace("_", " "))
        ms = np.append(mean([s["step_breakdown_us"].get(cat, 0.0) for s in steps]), overall.get(cat, 0.0) / n) / 1e3
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(whole > 0, 100 * ms / whole, 0.0)
        # Arrays and one template per trace (plotly checks a list item by item).
        fig.add_trace(go.Bar(
            x=x, y=ms, customdata=share, name=label, marker_color=STEP_CATEGORY_COLOURS.get(cat, "#64748b"),
            hovertemplate=f"{what} (the last bar: the mean step)<br>{label}: %{{y:.3f}} ms "
                          f"(%{{customdata:.1f}}%)<extra></extra>"))
    fig.update_layout(barmode="stack", bargap=0.15 if len(steps) < 50 else 0.0,
                      legend=dict(LEGEND, traceorder="normal"))
    if len(steps) >= 50:    # bars under a pixel wide: their white outline would wash the colours out
        fig.update_traces(marker_line_width=0)
    fig.update_xaxes(title_text="step (ProfilerStep#N) and the mean step" if per_bar == 1 else
                     f"steps (ProfilerStep#N), {per_bar} a bar, and the mean step", type="category",
                     nticks=min(len(x), 21))
    fig.update_yaxes(title_text="step time (ms)", rangemode="tozero")
    _base_layout(fig, 320)
    fig.update_layout(margin_t=48)      # room for the legend above the plot
    return fig


def gpu_utilization_figure(start_ms: np.ndarray, end_ms: np.ndarray, pct: np.ndarray, bucket_us: float,
                           device: str) -> go.Figure:
    """GPU utilization over time: the kernels' busy share of each time bucket (a step line).

    Args:
        start_ms, end_ms: the buckets' bounds (ms since the profile's start).
        pct: utilization of each bucket (%).
        bucket_us: the bucket size, named in the axis title.
        device: the device's name.
    """
    x = np.append(np.asarray(start_ms, dtype=np.float64), end_ms[-1:] if len(end_ms) else [])
    y = np.append(np.asarray(pct, dtype=np.float64), pct[-1:] if len(pct) else [])
    fig = go.Figure(go.Scatter(x=x, y=y, mode="lines", line=dict(color="#16a34a", width=1.5, shape="hv"),
                               fill="tozeroy", fillcolor="rgba(22,163,74,0.15)", name=esc(device),
                               hovertemplate="%{x:.3f} ms<br>%{y:.1f}% busy<extra>" + esc(device) + "</extra>"))
    fig.update_xaxes(title_text=f"time since profile start (ms), buckets of {format_time(bucket_us)}")
    fig.update_yaxes(title_text="GPU utilization (%)", range=[0, 105])
    _base_layout(fig, 260)
    fig.update_layout(margin_t=16)      # the page's section names the figure
    return fig


def idle_breakdown_figure(idle: dict[str, float], device: str) -> go.Figure:
    """HTA's idle time by cause (host wait, kernel wait, other), summed over streams (ms)."""
    keys = [k for k in IDLE_LABELS if k in idle] + [k for k in idle if k not in IDLE_LABELS]
    labels = [IDLE_LABELS.get(k, k) for k in keys]
    ms = [idle[k] / 1e3 for k in keys]
    total = sum(ms)
    fig = go.Figure(go.Bar(
        y=labels, x=ms, orientation="h", marker_color=[IDLE_COLOURS.get(k, "#64748b") for k in keys],
        text=[f"{100 * m / total:.0f}%" if total else "" for m in ms], textposition="outside", cliponaxis=False,
        hovertemplate=[f"{lab}: {m:.3f} ms<extra>{esc(device)}</extra>" for lab, m in zip(labels, ms)]))
    # Room right of the longest bar for its share.
    fig.update_xaxes(title_text="idle time, summed over streams (ms)", range=[0, 1.2 * max(ms + [1e-3])])
    fig.update_yaxes(autorange="reversed", automargin=True)
    _base_layout(fig, 190)
    fig.update_layout(margin_t=16)      # the page's section names the figure
    return fig
