"""The Overview page: where the time goes, in a sentence, cards and charts.

With device activity, the GPU sections (TensorBoard's figures: utilization, SM efficiency,
occupancy, Tensor Cores; the step breakdown and idle time; recommendations) come first.
"""
from __future__ import annotations

import numpy as np

from dash import Dash, dcc, html

from gradtrace.profiler.format import format_time
from gradtrace.profiler.gpu import KERNEL_WAIT_US

from . import figures
from .cache import cached
from .components import GRAPH_CONFIG, card, profile_layout, section, text_table
from .model import PHASES, PhaseSplit, ProfileView

__all__ = ["PATH", "TITLE", "layout", "register_callbacks", "page", "gpu_summary", "gpu_cards",
           "recommendation_box"]

PATH = "/"
TITLE = "Overview"


def layout(ctx) -> html.Div:
    """The page for :class:`viewer.registry.PageContext` ``ctx`` (built once per profile: it
    depends on nothing else; requests share it)."""
    return profile_layout(ctx, PATH, page)


def register_callbacks(app: Dash, registry) -> None:
    """None: the Overview has no interaction beyond its charts' own."""


def page(view: ProfileView) -> html.Div:
    s = view.summary()
    has_cuda = view.data.has_device_time
    steps = view.step_phases()
    # With step ranges, CPU shares are of the steps' wall time, so "other" is the time
    # outside ops (data loading, Python); without them, of the self time of all ranges.
    cpu_split = (PhaseSplit(*(sum(st[p] for st in steps) for p in PHASES)) if steps
                 else view.phase_split("cpu"))
    cuda_split = view.phase_split("cuda")
    splits = {"CPU": cpu_split.as_dict()}
    if has_cuda:
        splits["CUDA"] = cuda_split.as_dict()
    cards = [
        card("Device", s["devices"], f"activities: {s['activities']}"),
        # With step ranges the count is the value (a long run has tens of thousands: the
        # sentence would wrap over three lines of the card's large type).
        card("Steps", f"{s['n_steps']:,}", f"ProfilerStep ranges · {s['threads']} thread(s)") if s["n_steps"]
        else card("Steps", s["steps"], f"{s['threads']} thread(s)"),
        card("Duration", format_time(s["duration_ns"] / 1e3), "first event start → last event end"),
        card("Events", f"{s['events']:,}", f"{s['memory_records']:,} memory records"),
        card("Self CPU total", format_time(cpu_split.total / 1e3), "Σ self CPU over all ranges"),
        card("Self CUDA total", format_time(cuda_split.total / 1e3) if has_cuda else "—",
             "device time of top-level ops" if has_cuda else "no CUDA activity recorded"),
        card("Options", html.Span(s["options"], className="gt-card-small"),
             f"gradtrace {s['version']}" + (" · synthetic" if s["synthetic"] else "")),
    ]
    split_rows = []
    for clock, split in (("CPU", cpu_split), ("CUDA", cuda_split)):
        if clock == "CUDA" and not has_cuda:
            continue
        total = max(split.total, 1)
        split_rows += [[clock, phase, format_time(ns / 1e3), f"{100 * ns / total:.1f}%"]
                       for phase, ns in split.as_dict().items()]
    top_cpu = view.top_ops(10, "cpu")
    charts = [dcc.Graph(id="ov-top-cpu", figure=figures.top_ops_figure(top_cpu, "cpu"), config=GRAPH_CONFIG)]
    if has_cuda:
        charts.append(dcc.Graph(id="ov-top-cuda", figure=figures.top_ops_figure(view.top_ops(10, "cuda"), "cuda"),
                                config=GRAPH_CONFIG))
    return html.Div(id="page-overview", children=[
        html.Div(view.biggest_cost_sentence(), id="ov-sentence", className="gt-callout"),
        html.Div(cards, className="gt-cards", id="ov-cards"),
        *gpu_overview(view),
        html.Div(className="gt-row", children=[
            html.Div(className="gt-col-wide", children=[
                section("Step time by phase",
                        dcc.Graph(id="ov-phase", figure=figures.phase_split_figure(splits), config=GRAPH_CONFIG),
                        note=("Share of the steps' wall time: self time of forward ops, backward "
                              "nodes and optimizer scopes; 'other' is the rest of the steps (time "
                              "outside ops)." if steps else
                              "Self time of the ranges in each phase: forward ops, backward nodes, "
                              "optimizer scopes; 'other' is time no phase claims."))]),
            html.Div(className="gt-col-narrow", children=[
                section("CPU vs CUDA", text_table(["clock", "phase", "time", "share"], split_rows))]),
        ]),
        section("Time per step", dcc.Graph(id="ov-steps", figure=figures.step_phase_figure(steps),
                                           config=GRAPH_CONFIG),
                note=f"Each bar is one ProfilerStep#N (beyond {figures.MAX_STEP_BARS:,} steps, the mean of "
                     "consecutive steps), "
                     "from one step() call to the next: forward, "
                     "backward and optimizer self time, and 'other', the rest of the step (data "
                     "loading, Python between ops).", id="ov-steps-section") if steps else
        html.Div("No ProfilerStep ranges: call prof.step() (profiler.current().step() under "
                 "gradtrace run) once per training step to see time per step.", className="gt-note",
                 id="ov-steps-section"),
        section("Top 10 ops by self time", *charts, id="ov-top"),
    ])




# --------------------------------------------------------------------------- overview: GPU


def gpu_summary(view: ProfileView) -> dict | None:
    """``profiler``'s GPU summary of the profile (computed once per view), or None for a
    profile without device work (the Overview is then the CPU one)."""
    def build():
        summary = view.data.gpu_summary() if view.data.has_device_time else None
        return summary if summary and summary["devices"] and summary["steps"] else None
    return cached(view, "gpu_summary", build)



def _pct_text(value) -> str:
    """A percentage for a card; "—" where the profile cannot define it (null, never 0)."""
    return "—" if value is None else f"{value:.1f}%"


def gpu_cards(device: dict) -> list:
    """The four TensorBoard GPU figures of one device over all steps."""
    return [
        card("GPU utilization", _pct_text(device["gpu_utilization_pct"]), "steps' time with a kernel running"),
        card("SM efficiency", _pct_text(device["sm_efficiency_pct"]), "blocks per SM, capped at 1, over time"),
        card("Achieved occupancy", _pct_text(device["achieved_occupancy_pct"]),
             "est. occupancy, weighted by kernel time"),
        card("Tensor Cores", _pct_text(device["tensor_core_pct"]), "share of kernel time on Tensor Cores"),
    ]


def recommendation_box(rec: dict) -> html.Div:
    """One recommendation: the figure that triggered it, its value against the threshold, and
    the advice."""
    where = f" · {rec['device']}" if rec.get("device") else ""
    return html.Div(className="gt-callout gt-recommendation", children=[
        html.B(rec["rule"].replace("_", " ").capitalize().replace("gpu", "GPU") + where),
        html.Div(f"{rec['figure']}: {rec['value']:.1f} (threshold {rec['threshold']:g})", className="gt-note"),
        html.Div(rec["advice"]),
    ])


def gpu_overview(view: ProfileView) -> list:
    """The Overview's GPU sections (none for a CPU-only profile): per device, the summary cards,
    the step time breakdown by priority, idle time by cause, utilization over time; then the
    recommendations. Every number is :func:`profiler.gpu.gpu_summary`'s."""
    summary = gpu_summary(view)
    if summary is None:
        return []
    out = []
    origin = view.time_origin_ns
    several = len(summary["devices"]) > 1
    for k, (name, dev) in enumerate(summary["devices"].items()):
        suffix = f"-{k}" if k else ""
        series = dev["utilization"]
        temporal = dev["temporal"]
        whole = sum(temporal.values()) or 1.0
        temporal_rows = [[label, format_time(temporal[key]), f"{100 * temporal[key] / whole:.1f}%"]
                         for key, label in (("compute_us", "computation"), ("non_compute_us", "memcpy, memset, "
                                            "communication"), ("idle_us", "idle"))]
        out += [
            section(f"GPU · {name}", html.Div(gpu_cards(dev), className="gt-cards"), id=f"ov-gpu{suffix}",
                    note="Over all steps (device-aligned, as TensorBoard's profiler plugin takes them); "
                         "a dash (—) marks a figure the trace does not define (e.g. without launch arguments)."),
            html.Div(className="gt-row", children=[
                html.Div(className="gt-col-wide", children=[section(
                    "Step time breakdown" + (f" · {name}" if several else ""),
                    dcc.Graph(id=f"ov-gpu-steps{suffix}", config=GRAPH_CONFIG,
                              figure=figures.gpu_step_breakdown_figure(dev["steps"], dev["step_breakdown_us"])),
                    note="Each step's time by what ran, highest priority first: a kernel, a copy, a "
                         "memset, communication, a CUDA runtime call, the DataLoader, other CPU work; "
                         "each takes only time no category before it took (TensorBoard's breakdown).")]),
                html.Div(className="gt-col-narrow", children=[section(
                    "Idle time by cause",
                    dcc.Graph(id=f"ov-gpu-idle{suffix}", config=GRAPH_CONFIG,
                              figure=figures.idle_breakdown_figure(dev["idle_breakdown"], name)),
                    text_table(["device time", "time", "share"], temporal_rows),
                    note="Gaps between a stream's kernels: host wait (launched after the previous one "
                         f"ended), kernel wait (shorter than {KERNEL_WAIT_US} us: launch overhead), other "
                         "(HTA); summed over streams, so more than the device's idle time when streams "
                         "idle together.")]),
            ]),
            section("GPU utilization over time" + (f" · {name}" if several else ""),
                    dcc.Graph(id=f"ov-gpu-util{suffix}", config=GRAPH_CONFIG, figure=figures.gpu_utilization_figure(
                        (np.asarray(series["start_ns"], np.int64) - origin) / 1e6,
                        (np.asarray(series["end_ns"], np.int64) - origin) / 1e6,
                        np.asarray(series["utilization_pct"], np.float64), series["bucket_us"], name)),
                    note="The share of each time bucket with a kernel running, over the whole profile "
                         "(TensorBoard's utilization over time; buckets of a power of ten microseconds)."),
        ]
    recs = summary.get("recommendations") or []
    out.append(section("Recommendations", *([recommendation_box(r) for r in recs] or [
        html.Div("No rule fired: nothing in this profile crosses a threshold.", className="gt-note")]),
        id="ov-recommendations",
        note="Each rule, the figure that triggered it and its threshold (profiler.gpu_summary()['recommendations'])."))
    return out


# --------------------------------------------------------------------------- operators