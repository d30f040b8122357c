"""The Modules page: forward + backward time per ``nn.Module``, as the module tree.

The tree and its numbers are the profiler's (:mod:`profiler.module_tree`, the same as
``gradtrace table --group-by module``); this module draws them: an icicle of each module's
total time (a module's bar spans its children's) and an indented grid with the tree's columns
(:data:`profiler.columns.MODULE_TREE_COLUMNS`). Figure builders are pure functions.
"""
from __future__ import annotations

import plotly.graph_objects as go
from dash import Dash, Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

from gradtrace.profiler import columns as C
from gradtrace.profiler.format import format_time
from gradtrace.profiler.module_tree import ModuleNode, flatten, module_tree

from .figures import FONT, esc
from .model import ProfileView
from .cache import cached
from .components import GRAPH_CONFIG, control, grid, grid_column, profile_layout, radio, section

__all__ = ["PATH", "TITLE", "layout", "page", "tree_rows", "tree_columns", "icicle_figure", "register_callbacks"]

PATH = "/modules"
TITLE = "Modules"
ALL = "all (Σ self time)"
PHASES = {"forward_backward": "Fwd+Bwd", "forward": "Forward", "backward": "Backward"}
_INDENT = "\u2003"          # an em space per level: HTML collapses plain spaces


def _tree(view: ProfileView) -> list[ModuleNode]:
    # Once per profile: the page and its callbacks read one tree.
    return cached(view, "module_tree", lambda: module_tree(view.data))


def tree_rows(roots: list[ModuleNode], whole_us: float) -> list[dict]:
    """Grid rows in tree order: the node's fields, ``module`` indented, the share of the whole.

    Args:
        roots: :func:`profiler.module_tree.module_tree`.
        whole_us: the profile's Σ self CPU time (the 100% of "Fwd+Bwd CPU %").
    """
    rows = []
    for k, node in enumerate(flatten(roots)):
        row = node.to_dict(nested=False)
        row.update(id=k, module=_INDENT * node.depth + node.name, path=" > ".join(node.path),
                   forward_backward_cpu_time_total_percent=(
                       100.0 * node.forward_backward_cpu_time_total / whole_us if whole_us else 0.0))
        rows.append(row)
    return rows


def tree_columns(has_cuda: bool) -> list[dict]:
    """Grid columns of the module tree; not sortable, so the rows stay in tree order."""
    cols = []
    for spec in C.select(C.MODULE_TREE_COLUMNS, {"", "module"} | ({"cuda"} if has_cuda else set())):
        col = grid_column(spec)
        col["sortable"] = False
        if spec.id == "module":
            col.update(pinned="left", minWidth=240, flex=2, tooltipField="path")
        if spec.id == "forward_backward_cpu_time_total":
            col["cellClass"] = "gt-sorted"
        cols.append(col)
    return cols


def icicle_figure(roots: list[ModuleNode], whole_us: float, phase: str = "forward_backward",
                  clock: str = "cpu") -> go.Figure:
    """An icicle of module time: the whole profile on top, then the top-level modules (and the
    time of no module), each module's box spanning its children's.

    Args:
        roots: :func:`profiler.module_tree.module_tree`.
        whole_us: the profile's Σ self time on that clock (the top box).
        phase: "forward_backward", "forward" or "backward".
        clock: "cpu" or "cuda".
    """
    field = f"{phase}_{clock}_time_total"
    nodes = flatten(roots)
    # Integer nanoseconds, each box at least its children's sum: with branchvalues="total"
    # plotly drops a subtree whose children add up to more than the box (float rounding).
    ns = {}
    for node in reversed(nodes):
        ns[id(node)] = max(round(getattr(node, field) * 1e3), sum(ns[id(c)] for c in node.children))
    whole_ns = max(round(whole_us * 1e3), sum(ns[id(r)] for r in roots))
    ids, labels, parents, values, hover = [ALL], [ALL], [""], [whole_ns], [f"{ALL}<br>{format_time(whole_us)}"]
    top = max(whole_us, 1e-12)
    for node in nodes:
        value = getattr(node, field)
        ids.append(" > ".join(node.path))
        labels.append(esc(node.name))
        parents.append(" > ".join(node.path[:-1]) if node.depth else ALL)
        values.append(ns[id(node)])
        hover.append(f"<b>{esc(' > '.join(node.path))}</b><br>{PHASES[phase]} {clock.upper()} total: "
                     f"{format_time(value)} ({100 * value / top:.1f}%)<br>"
                     f"forward {format_time(getattr(node, f'forward_{clock}_time_total'))} · backward "
                     f"{format_time(getattr(node, f'backward_{clock}_time_total'))}<br>{node.count} calls")
    fig = go.Figure(go.Icicle(ids=ids, labels=labels, parents=parents, values=values, branchvalues="total",
                              hovertext=hover, hoverinfo="text", textinfo="label+percent root",
                              tiling=dict(orientation="v"), root=dict(color="#e2e8f0"),
                              marker=dict(colorscale="Blues")))
    fig.update_layout(template="plotly_white", font=FONT, height=420, margin=dict(l=6, r=6, t=36, b=6),
                      title=dict(text=f"{PHASES[phase]} {clock.upper()} time by module (click a box to zoom)",
                                 font_size=14))
    return fig


def _whole(view: ProfileView, clock: str) -> float:
    avg = view.data.total_average()
    return avg.self_cuda_time_total if clock == "cuda" else avg.self_cpu_time_total


def layout(ctx) -> html.Div:
    """The page for :class:`viewer.registry.PageContext` ``ctx`` (built once per profile: it
    depends on nothing else; requests share it)."""
    return profile_layout(ctx, PATH, page)


def page(view: ProfileView) -> html.Div:
    """The Modules page of a profile (a note when it has no module ranges)."""
    roots = _tree(view)
    if not roots:
        return html.Div(id="page-modules", children=[html.Div(
            "This profile has no nn.Module ranges. Record it with profile(with_modules=True) "
            "(gradtrace demo/run --with-modules), or export a torch trace with with_modules=True.",
            className="gt-callout")])
    has_cuda = view.data.has_device_time
    rows = tree_rows(roots, _whole(view, "cpu"))
    return html.Div(id="page-modules", children=[
        html.Div(className="gt-toolbar", children=[
            control("Time", radio("mod-phase", PHASES, "forward_backward")),
            control("Clock", radio("mod-clock", {"cpu": "CPU", "cuda": "CUDA"}, "cpu", () if has_cuda else ("cuda",))),
        ]),
        html.Div("Each module call is charged its forward ops and the backward nodes they created "
                 "(matched by sequence_nr and thread), each op once, to the innermost module around it. "
                 "Self: outside child modules; total: with them. (no module) is the rest: the loss "
                 "outside a module, the optimizer, AccumulateGrad.", className="gt-note"),
        dcc.Graph(id="mod-figure", figure=icicle_figure(roots, _whole(view, "cpu")), config=GRAPH_CONFIG),
        section("Module tree", grid("mod-grid", rows, tree_columns(has_cuda), height=min(620, 110 + 30 * len(rows))),
                note=f"{len(rows)} modules; calls with the same path from the root are one row "
                     "(# of Calls). Same numbers as gradtrace table --group-by module."),
    ])


def register_callbacks(app: Dash, registry) -> None:
    """The page's one interaction: the icicle's phase and clock (``registry``: the app's
    :class:`viewer.registry.Registry`)."""
    @app.callback(Output("mod-figure", "figure"), Input("mod-phase", "value"), Input("mod-clock", "value"),
                  State("profile-key", "data"), prevent_initial_call=True)
    def modules_figure(phase, clock, key):
        view = registry.get(key)
        if view is None or phase not in PHASES or clock not in ("cpu", "cuda"):
            raise PreventUpdate
        return icicle_figure(_tree(view), _whole(view, clock), phase, clock)
