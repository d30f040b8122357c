"""The autograd graph of one training step, derived from a profile, with a layered layout.

A profile records time ranges, not tensor edges, so the graph shows what the ranges prove:

* **nests** (solid, grey): a composite forward op ran the op below it (``linear`` ran
  ``matmul`` and ``add``);
* **next** (solid): execution order — the next forward op of the same parent, and the next
  backward node the engine ran;
* **created** (dashed, red): the forward op created that backward node — exact, matched on
  (sequence_nr, thread).

Positions are computed here (a layered layout: one layer per forward nesting depth, then the
backward nodes, then what they ran; left to right in execution order, a backward node under
the forward op that created it) and passed to Cytoscape as a ``preset`` layout: the browser
then only draws, which stays fast for thousands of nodes where ``dagre`` would not finish.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from gradtrace.profiler import Scope

from .model import ProfileView

__all__ = ["Step", "AutogradGraph", "steps_of", "build_graph", "colour_scale", "EDGE_LEGEND"]

X_GAP, Y_GAP = 130, 120
EDGE_LEGEND = (
    "The profile records time ranges, not tensor edges. Solid grey: a composite op ran the op "
    "below it. Solid blue: execution order (next forward op; next backward node the engine ran). "
    "Dashed red: the forward op created that backward node — exact, matched by (sequence_nr, thread)."
)


@dataclass(frozen=True)
class Step:
    """A time window of one thread that holds one training iteration."""

    label: str
    thread: int
    start_ns: int
    end_ns: int


def steps_of(view: ProfileView, limit: int = 500) -> list[Step]:
    """Training iterations: ``ProfilerStep#N`` ranges when the profile has them, otherwise
    windows that each end where a backward pass is followed by a new forward op."""
    data, cols = view.data, view.data.event_columns
    out = []
    ranges = data.step_ranges()
    if ranges:
        step_ids = {i for i, s in enumerate(data.strings) if s.startswith("ProfilerStep#")}
        pick = np.flatnonzero(np.isin(cols["name_id"], list(step_ids)) & (cols["scope"] == Scope.USER_SCOPE))
        for i in pick[:limit].tolist():
            out.append(Step(f"{data.name_of(i)} (thread {int(cols['thread_id'][i])})",
                            int(cols["thread_id"][i]), int(cols["start_ns"][i]), int(cols["end_ns"][i])))
        return out
    a = data.analysis
    phase = view.phase
    for thread in view.threads:
        top = np.flatnonzero((a.parent < 0) & (cols["thread_id"] == thread))
        if not len(top):
            continue
        # An iteration ends where a run of backward-phase ranges ends; whatever follows the
        # last backward pass joins the last iteration.
        is_bwd = phase[top] == 1
        ends = np.flatnonzero(is_bwd & ~np.r_[is_bwd[1:], False])
        if not len(ends):
            ends = np.array([len(top) - 1])
        ends[-1] = len(top) - 1
        first = 0
        for n, last in enumerate(ends.tolist()):
            out.append(Step(f"iteration {n} (thread {thread})", thread, int(cols["start_ns"][top[first]]),
                            int(cols["end_ns"][top[first:last + 1]].max())))
            first = last + 1
            if len(out) >= limit:
                return out
    return out


@dataclass
class AutogradGraph:
    """Nodes and edges as Cytoscape elements, plus counts for the page."""

    elements: list[dict]
    n_nodes: int
    n_total: int
    n_edges: int
    note: str


PALETTE = ["#fff7bc", "#fee391", "#fec44f", "#fe9929", "#ec7014", "#cc4c02", "#8c2d04"]
DARK = {"#ec7014", "#cc4c02", "#8c2d04"}  # palette entries that need white labels


def colour_scale(values: np.ndarray) -> list[str]:
    """Colours from pale yellow (least) to dark brown (most) on a log scale between the
    smallest and largest positive value (times span decades); zero is the palest."""
    v = np.asarray(values, dtype=np.float64)
    if not len(v):
        return []
    pos = v[v > 0]
    if not len(pos):
        return [PALETTE[0]] * len(v)
    lo, hi = np.log(pos.min()), np.log(pos.max())
    frac = np.where(v > 0, (np.log(np.maximum(v, 1e-300)) - lo) / max(hi - lo, 1e-12), 0.0)
    k = np.clip((frac * (len(PALETTE) - 1)).round().astype(np.int64), 0, len(PALETTE) - 1)
    return [PALETTE[i] for i in k]


def build_graph(view: ProfileView, step: Step, clock: str = "cpu", max_nodes: int = 400,
                show_backward_ops: bool = False, top_level_only: bool = False) -> AutogradGraph:
    """The graph of ``step``: forward ops, backward nodes (and optionally the ops they ran).

    Args:
        clock: "cpu" or "cuda": which self time colours the nodes.
        max_nodes: above this, only the most expensive forward ops (forward + backward
            cost) and their backward nodes are kept.
        show_backward_ops: also show ops that ran inside backward nodes.
        top_level_only: collapse composite ops (hide the ops they ran).
    """
    data, a, cols = view.data, view.data.analysis, view.data.event_columns
    start, end = cols["start_ns"], cols["end_ns"]
    scope = cols["scope"]
    in_win = (cols["thread_id"] == step.thread) & (start >= step.start_ns) & (end <= step.end_ns)
    fwd = np.flatnonzero(in_win & (scope == Scope.FUNCTION) & (a.backward_ancestor < 0) & (view.phase == 0))
    if top_level_only and len(fwd):
        fwd_set = np.zeros(data.n_events, bool)
        fwd_set[fwd] = True
        fwd = fwd[~fwd_set[np.maximum(a.parent[fwd], 0)] | (a.parent[fwd] < 0)]
    is_fwd = np.zeros(data.n_events, bool)
    is_fwd[fwd] = True
    linked = np.flatnonzero(a.forward_event >= 0)
    # A backward node belongs to the forward op that created it or, when that op is hidden
    # (collapsed composites), to the nearest shown op that ran it.
    owner_of = _shown_owner(a.forward_event, a.parent, is_fwd)
    bwd_linked = linked[owner_of[linked] >= 0] if len(linked) else linked
    bwd_in_win = np.flatnonzero(in_win & (scope == Scope.BACKWARD_FUNCTION))
    bwd = np.union1d(bwd_linked, bwd_in_win)
    # Only outermost backward nodes (a node run inside another node's range is its op).
    bwd = bwd[a.backward_ancestor[bwd] == bwd]
    inner = np.zeros(0, np.int64)
    if show_backward_ops:
        inner = np.flatnonzero(np.isin(a.backward_ancestor, bwd) & (scope == Scope.FUNCTION))
    n_total = len(fwd) + len(bwd) + len(inner)
    note = ""
    if n_total > max_nodes:
        fwd, bwd, inner, note = _top_cost_subgraph(view, fwd, bwd, inner, max_nodes, clock, owner_of)
    nodes = np.concatenate([fwd, bwd, inner]).astype(np.int64)
    kinds = ["forward"] * len(fwd) + ["backward"] * len(bwd) + ["backward op"] * len(inner)
    pos = _layered_positions(view, fwd, bwd, inner, owner_of)
    self_time = (a.self_cpu_ns if clock == "cpu" else a.self_cuda_ns)[nodes]
    colours = colour_scale(self_time)
    elements = []
    for k, (ev, kind) in enumerate(zip(nodes.tolist(), kinds)):
        name = data.name_of(ev)
        shape = "round-rectangle" if kind == "forward" else ("diamond" if name == "AccumulateGrad" else "ellipse")
        if kind == "backward op":
            shape = "rectangle"
        elements.append({
            "data": {"id": f"e{ev}", "label": name, "event": ev, "kind": kind, "colour": colours[k],
                     "text_colour": "#ffffff" if colours[k] in DARK else "#111827",
                     "shape": shape, "self_us": round(float(self_time[k]) / 1e3, 3)},
            "position": {"x": pos[ev][0], "y": pos[ev][1]},
        })
    edges = _edges(view, fwd, bwd, inner, owner_of)
    for src, dst, kind in edges:
        elements.append({"data": {"id": f"{kind}-{src}-{dst}", "source": f"e{src}", "target": f"e{dst}",
                                  "kind": kind}, "classes": kind})
    return AutogradGraph(elements, len(nodes), n_total, len(edges), note)


def _shown_owner(forward_event: np.ndarray, parent: np.ndarray, shown: np.ndarray) -> np.ndarray:
    """For each event: its forward op, or that op's nearest shown ancestor (-1: none)."""
    owner = forward_event.copy()
    todo = np.flatnonzero(owner >= 0)
    while len(todo):
        ok = shown[owner[todo]]
        rest = todo[~ok]
        owner[rest] = parent[owner[rest]]
        todo = rest[owner[rest] >= 0]
    return owner


def _top_cost_subgraph(view, fwd, bwd, inner, max_nodes, clock, owner_of):
    """Keep the most expensive forward ops (own self time + self time of their nodes) and
    the backward nodes they created; unlinked nodes (AccumulateGrad) by their own cost."""
    a = view.data.analysis
    self_ns = a.self_cpu_ns if clock == "cpu" else a.self_cuda_ns
    cost = {int(e): int(self_ns[e]) for e in fwd}
    owner = {}
    for b in bwd.tolist():
        f = int(owner_of[b])
        if f in cost:
            cost[f] += int(self_ns[b])
            owner[b] = f
    ranked = sorted(cost, key=lambda e: -cost[e])
    keep_fwd: set[int] = set()
    budget = max_nodes
    nodes_per_fwd = {f: 1 for f in cost}
    for b, f in owner.items():
        nodes_per_fwd[f] += 1
    for f in ranked:
        if nodes_per_fwd[f] > budget:
            break
        keep_fwd.add(f)
        budget -= nodes_per_fwd[f]
    unowned = [b for b in bwd.tolist() if b not in owner]
    unowned.sort(key=lambda b: -int(self_ns[b]))
    keep_bwd = {b for b, f in owner.items() if f in keep_fwd} | set(unowned[:max(budget, 0)])
    new_fwd = np.array(sorted(keep_fwd), dtype=np.int64)
    new_bwd = np.array(sorted(keep_bwd), dtype=np.int64)
    new_inner = inner[np.isin(a.backward_ancestor[inner], new_bwd)] if len(inner) else inner
    kept = len(new_fwd) + len(new_bwd) + len(new_inner)
    total = len(fwd) + len(bwd) + len(inner)
    note = (f"Showing the {kept} most expensive of {total} nodes (forward ops ranked by their own "
            f"plus their backward nodes' self {clock.upper()} time). Raise the node limit to see more.")
    return new_fwd, new_bwd, new_inner, note


def _layered_positions(view, fwd, bwd, inner, owner_of) -> dict[int, tuple[float, float]]:
    """Layer = forward nesting depth, then backward nodes, then the ops they ran; order in a
    layer = execution order; a backward node sits under the forward op that created it."""
    a, cols = view.data.analysis, view.data.event_columns
    pos: dict[int, tuple[float, float]] = {}
    fwd_layers = 0
    if len(fwd):
        # Layer of a forward op = how many shown forward ops enclose it (user scopes such
        # as nn.Module ranges do not count).
        shown = set(fwd.tolist())
        order = fwd[np.argsort(cols["start_ns"][fwd], kind="stable")]
        layer: dict[int, int] = {}
        for x, ev in enumerate(order.tolist()):
            p = int(a.parent[ev])
            while p >= 0 and p not in shown:
                p = int(a.parent[p])
            layer[ev] = layer[p] + 1 if p >= 0 else 0
            pos[ev] = (x * X_GAP, layer[ev] * Y_GAP)
        fwd_layers = max(layer.values()) + 1
    bwd_y = (fwd_layers + 0.5) * Y_GAP
    occupied: set[tuple[int, int]] = set()
    order = bwd[np.argsort(cols["start_ns"][bwd], kind="stable")] if len(bwd) else bwd
    last_x = len(fwd) * X_GAP
    for ev in order.tolist():
        f = int(owner_of[ev])
        if f in pos:
            x = pos[f][0]
            row = 0
        else:  # no forward op in view (AccumulateGrad): next to the node that ran before it
            x = last_x - X_GAP // 2
            row = 1
        while (int(x), row) in occupied:
            row += 1
        occupied.add((int(x), row))
        pos[ev] = (x, bwd_y + row * Y_GAP * 0.75)
        last_x = x
    max_bwd_row = max((r for _, r in occupied), default=0)
    inner_y = bwd_y + (max_bwd_row + 1.2) * Y_GAP * 0.75
    if len(inner):
        order = inner[np.argsort(cols["start_ns"][inner], kind="stable")]
        used: dict[int, int] = {}
        for ev in order.tolist():
            owner = int(a.backward_ancestor[ev])
            ox = pos.get(owner, (0, 0))[0]
            k = used.get(owner, 0)
            used[owner] = k + 1
            pos[ev] = (ox + k * 24, inner_y + k * Y_GAP * 0.5)
    return pos


def _edges(view, fwd, bwd, inner, owner_of) -> list[tuple[int, int, str]]:
    a, cols = view.data.analysis, view.data.event_columns
    shown = set(np.concatenate([fwd, bwd, inner]).tolist())
    edges = []
    # nests: nearest shown forward ancestor -> op.
    fwd_set = set(fwd.tolist())
    for ev in fwd.tolist():
        p = int(a.parent[ev])
        while p >= 0 and p not in fwd_set:
            p = int(a.parent[p])
        if p >= 0:
            edges.append((p, ev, "nests"))
    # next (forward): consecutive ops with the same shown parent.
    by_parent: dict[int, list[int]] = {}
    for ev in fwd[np.argsort(cols["start_ns"][fwd], kind="stable")].tolist():
        p = int(a.parent[ev])
        while p >= 0 and p not in fwd_set:
            p = int(a.parent[p])
        by_parent.setdefault(p, []).append(ev)
    for seq in by_parent.values():
        edges += [(x, y, "next") for x, y in zip(seq, seq[1:])]
    # next (backward): engine execution order.
    order = bwd[np.argsort(cols["start_ns"][bwd], kind="stable")].tolist()
    edges += [(x, y, "next") for x, y in zip(order, order[1:])]
    # created: exact forward -> backward pairs.
    for b in bwd.tolist():
        f = int(owner_of[b])
        if f in shown:
            edges.append((f, b, "created"))
    # ran: backward node -> ops inside it.
    for ev in inner.tolist():
        owner = int(a.backward_ancestor[ev])
        if owner in shown:
            edges.append((owner, ev, "nests"))
    return edges


def node_details(view: ProfileView, event: int) -> dict:
    """What the details panel shows for a clicked node."""
    data, a, cols = view.data, view.data.analysis, view.data.event_columns
    i = int(event)
    dtypes_id = int(cols["dtypes_id"][i])
    f = int(a.forward_event[i])
    created = np.flatnonzero(a.forward_event == i)
    return {
        "name": data.name_of(i),
        "scope": Scope(int(cols["scope"][i])).name,
        "sequence_nr": int(cols["sequence_nr"][i]),
        "thread": int(cols["thread_id"][i]),
        "fwd_thread": int(cols["fwd_thread_id"][i]),
        "device": data.strings[int(cols["device_id"][i])],
        "input_shapes": json.dumps(data.input_shapes_of(int(a.shapes_id[i]))) if a.shapes_id[i] >= 0 else "not recorded",
        "dtypes": data.strings[dtypes_id] if dtypes_id >= 0 else "not recorded",
        "self_cpu_us": a.self_cpu_ns[i] / 1e3, "cpu_total_us": a.cpu_total_ns[i] / 1e3,
        "self_cuda_us": a.self_cuda_ns[i] / 1e3, "cuda_total_us": a.cuda_total_ns[i] / 1e3,
        "forward_op": data.name_of(f) if f >= 0 else "",
        "backward_nodes": [data.name_of(int(c)) for c in created[:20]],
        "stack": data.stack_of(int(a.stack_id[i])),
        # The profile format (schema 1) has no records of hooks or saved tensors.
        "hooks": "not recorded in this profile",
        "saved_tensors": "not recorded in this profile",
    }
