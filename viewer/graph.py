"""The autograd graph of one training step: forward ops, backward nodes and AccumulateGrad,
with the edges the engine had, grouped by module.

* **Edges** (solid, grey): the backward graph as recorded (profile schema 2: the nodes and edges
  tables): a node's gradient flows into the next node. A profile without them (schema 1, a
  torch trace) shows no edges between nodes, and says so.
* **created** (dashed, red): the forward op created that backward node — exact, matched on
  (sequence_nr, thread).
* **Groups**: the ranges that enclose the forward ops — ``nn.Module`` ranges and composite ops
  (``linear`` ran ``matmul`` and ``add``) — are Cytoscape compound nodes; a backward node
  goes with its forward op, an AccumulateGrad with the first node that feeds it. A collapsed
  group is one node, edges rerouted to it.

The layout is computed here and handed to Cytoscape as ``preset`` (the browser only draws,
which stays fast for thousands of nodes): it reads top to bottom in forward order — a row per
rank, where a node's rank is one more than that of the nodes whose outputs its forward op
consumed (the backward edges reversed); a backward node sits to the right of its forward op,
an AccumulateGrad (the parameter) one row above the node that feeds it. Across, the group
boxes are nested blocks: what overlaps in rank stands side by side, and rows move apart
where boxes close and open, so that no two boxes overlap (Cytoscape's own compound layouts,
cose-bilkent or klay, would run in the browser on every change). Groups too large to read
are collapsed at first, deepest first, until the step fits in about :data:`READABLE_UNITS`
nodes; a search opens the groups around the nodes it finds.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from gradtrace.profiler import Scope

from .model import ProfileView

__all__ = ["Step", "AutogradGraph", "steps_of", "build_graph", "colour_scale", "node_details",
           "EDGE_LEGEND", "READABLE_UNITS"]

# Layout sizes (px, as the stylesheet draws them): node widths, the distance from a forward
# op to its backward node, a row's height and the step between ranks, the gaps between
# blocks side by side and bands one under another, a box's padding and its title's height.
NODE_W, COLLAPSED_W, ACCUMULATE_W, PAIR_DX = 150, 190, 170, 170
ROW_H, ROW_STEP, BLOCK_GAP = 40, 78, 40
BOX_PAD, BOX_TITLE = 14, 22
ACC_RISE = ROW_STEP / 2       # an AccumulateGrad is drawn this much above the node feeding it
READABLE_UNITS = 90
EDGE_LEGEND = (
    "Read top to bottom in forward order. Solid grey arrows: the backward graph as the engine "
    "ran it (a node's gradient flows into the next node). Dashed red: the forward op that created "
    "the backward node, matched exactly by (sequence_nr, thread). Boxes group what ran inside a "
    "module or composite op: click a box's title to collapse or expand it."
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
    """Cytoscape elements of one step, plus what the page says about them.

    Attributes:
        elements: nodes (with preset positions), group boxes and edges.
        n_nodes: nodes drawn (a collapsed group counts once; group boxes do not count).
        n_total: forward ops and backward nodes of the step.
        n_edges: edges drawn.
        note: a line for the page (what is collapsed, what the profile lacks).
        groups: keys of every group of the step (for expand/collapse).
        collapsed: keys of the groups drawn collapsed.
        has_edges: whether the profile recorded the backward graph's edges.
    """

    elements: list[dict]
    n_nodes: int
    n_total: int
    n_edges: int
    note: str
    groups: list[str]
    collapsed: list[str]
    has_edges: bool


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


def _metric(view: ProfileView, colour_by: str, clock: str) -> np.ndarray:
    a = view.data.analysis
    if clock == "cuda":
        return a.self_cuda_ns if colour_by == "self" else a.cuda_total_ns
    return a.self_cpu_ns if colour_by == "self" else a.cpu_total_ns


# --------------------------------------------------------------------------- what one step holds


@dataclass
class _Step:
    """The events of a step's graph and how they connect (event indices throughout)."""

    fwd: np.ndarray                  # forward ops that created a backward node
    bwd: np.ndarray                  # outermost backward nodes
    fwd_of: dict                     # backward event -> its drawn forward op
    edges: list                      # (backward event, next backward event), deduplicated
    node_id: dict                    # backward event -> graph node id
    chain: dict                      # drawn event -> enclosing group events, outermost first
    has_edges: bool


def _collect(view: ProfileView, step: Step) -> _Step:
    data, a, cols = view.data, view.data.analysis, view.data.event_columns
    start, end, scope = cols["start_ns"], cols["end_ns"], cols["scope"]
    n = data.n_events
    in_win = (cols["thread_id"] == step.thread) & (start >= step.start_ns) & (end <= step.end_ns)
    fwd = np.flatnonzero(in_win & (scope == Scope.FUNCTION) & (a.backward_ancestor < 0) & (cols["sequence_nr"] >= 0))
    is_fwd = np.zeros(n, bool)
    is_fwd[fwd] = True
    outer_bwd = (scope == Scope.BACKWARD_FUNCTION) & (a.backward_ancestor == np.arange(n))
    linked = outer_bwd & (a.forward_event >= 0) & is_fwd[np.maximum(a.forward_event, 0)]
    bwd = np.flatnonzero(linked | (outer_bwd & in_win))
    fwd_of = {int(b): int(a.forward_event[b]) for b in bwd.tolist() if linked[b]}
    # The recorded graph, restricted to the step's nodes.
    nodes, graph = data.node_columns, data.edge_columns
    node_of_event = np.full(n, -1, np.int64)
    node_of_event[nodes["event"]] = nodes["node_id"]
    ids = node_of_event[bwd]
    event_of_node = np.full(int(nodes["node_id"].max()) + 1 if len(nodes["node_id"]) else 0, -1, np.int64)
    event_of_node[ids[ids >= 0][::-1]] = bwd[ids >= 0][::-1]     # a node run twice: its first run
    edges = []
    if len(event_of_node) and len(graph["node_id"]):
        src, dst = event_of_node[graph["node_id"]], event_of_node[graph["next_node_id"]]
        keep = (src >= 0) & (dst >= 0)
        edges = sorted(set(zip(src[keep].tolist(), dst[keep].tolist())))
    chain = _group_chains(view, fwd, is_fwd, step)
    for b in bwd.tolist():
        chain[b] = chain[fwd_of[b]] if b in fwd_of else ()
    # An AccumulateGrad (a parameter) goes with the first node that feeds it.
    for src, dst in edges:
        if dst not in fwd_of and not chain[dst] and chain[src]:
            chain[dst] = chain[src]
    return _Step(fwd, bwd, fwd_of, edges, {int(b): int(node_of_event[b]) for b in bwd.tolist()},
                 chain, bool(len(nodes["event"])))


def _group_chains(view, fwd, is_fwd, step: Step) -> dict:
    """For each forward op, the ranges that enclose it and group it: ``nn.Module`` ranges and
    composite ops (forward ops that created no node themselves), outermost first."""
    data, a, cols = view.data, view.data.analysis, view.data.event_columns
    module_names = {i for i, s in enumerate(data.strings) if s.startswith("nn.Module:")}
    chain: dict[int, tuple] = {}
    for f in fwd.tolist():
        groups = []
        p = int(a.parent[f])
        while p >= 0 and int(cols["start_ns"][p]) >= step.start_ns:
            sc = int(cols["scope"][p])
            if (sc == Scope.FUNCTION and not is_fwd[p]) or (sc == Scope.USER_SCOPE and int(cols["name_id"][p]) in module_names):
                groups.append(p)
            p = int(a.parent[p])
        chain[f] = tuple(reversed(groups))
    return chain


def _group_keys(view, st: _Step) -> dict[int, str]:
    """A key per group event that names the same group in every step: the labels of its
    enclosing groups and its own, each with its rank among same-named siblings."""
    keys: dict[int, str] = {}
    seen: dict[tuple, int] = {}
    for g in sorted({g for c in st.chain.values() for g in c}):
        parents = next(c[:c.index(g)] for c in st.chain.values() if g in c)
        parent_key = keys[parents[-1]] if parents else ""
        label = _group_label(view, g)
        k = seen.get((parent_key, label), 0)
        seen[(parent_key, label)] = k + 1
        keys[g] = f"{parent_key}/{label}#{k}"
    return keys


def _group_label(view, g: int) -> str:
    name = view.data.name_of(g)
    return name.split(":", 1)[1].strip() if name.startswith("nn.Module:") else name


# --------------------------------------------------------------------------- building


def build_graph(view: ProfileView, step: Step, clock: str = "cpu", colour_by: str = "self",
                collapsed: list[str] | None = None, reveal: str | None = None) -> AutogradGraph:
    """The graph of ``step`` as Cytoscape elements with positions.

    Args:
        clock: "cpu" or "cuda": which time colours the nodes.
        colour_by: "self" or "total" time.
        collapsed: keys of the groups to draw collapsed; None: collapse deepest-first until
            about :data:`READABLE_UNITS` nodes remain (the first view).
        reveal: a search (part of a node's name, any case): the groups around every node
            that matches are expanded, so that the search can show it.
    Returns:
        An :class:`AutogradGraph`.
    """
    st = _collect(view, step)
    keys = _group_keys(view, st)
    depth = {g: len(next(c[:c.index(g)] for c in st.chain.values() if g in c)) for g in keys}
    items = np.concatenate([st.fwd, st.bwd]).astype(np.int64).tolist()
    if collapsed is None:
        collapsed_set = _auto_collapse(st, items, keys, depth)
    else:
        collapsed_set = set(collapsed) & set(keys.values())
    if reveal and reveal.strip():
        collapsed_set -= _groups_around_matches(view, st, items, keys, reveal)
    # The drawn element of each item: itself, or the outermost collapsed group around it.
    element_of: dict[int, str] = {}
    collapsed_group_of: dict[int, int] = {}
    for ev in items:
        outer = next((g for g in st.chain[ev] if keys[g] in collapsed_set), None)
        element_of[ev] = f"e{ev}" if outer is None else f"g{outer}"
        if outer is not None:
            collapsed_group_of[ev] = outer
    pos = _layout(view, st, items, element_of)
    metric = _metric(view, colour_by, clock)
    values: dict[str, float] = {}
    members: dict[str, list[int]] = {}
    for ev in items:
        values[element_of[ev]] = values.get(element_of[ev], 0.0) + float(metric[ev])
        members.setdefault(element_of[ev], []).append(ev)
    drawn = list(values)
    colours = dict(zip(drawn, colour_scale(np.array([values[d] for d in drawn]))))
    elements = _group_boxes(view, st, items, keys, collapsed_set, collapsed_group_of)
    for el in drawn:
        ev = members[el][0]
        colour = colours[el]
        data = {"id": el, "colour": colour, "text_colour": "#ffffff" if colour in DARK else "#111827",
                "time_us": round(values[el] / 1e3, 3),
                "parent": _parent_box(st.chain[ev], keys, collapsed_set, stop=collapsed_group_of.get(ev))}
        if el.startswith("g"):
            g = collapsed_group_of[ev]
            names = sorted({view.data.name_of(m) for m in members[el]})
            data.update(label=f"{_group_label(view, g)} ▸ {len(members[el])}", kind="collapsed", key=keys[g],
                        event=g, members=" ".join(names))
        else:
            data.update(label=_node_label(view, st, ev), event=ev, kind=_kind(view, st, ev))
        if data["parent"] is None:
            del data["parent"]
        elements.append({"data": data, "position": {"x": pos[el][0], "y": pos[el][1]}, "classes": data["kind"]})
    n_edges = 0
    seen = set()
    for src, dst in st.edges:
        pair = (element_of[src], element_of[dst])
        if pair[0] != pair[1] and pair not in seen:
            seen.add(pair)
            elements.append({"data": {"id": f"flow-{pair[0]}-{pair[1]}", "source": pair[0], "target": pair[1],
                                      "kind": "flow"}, "classes": "flow"})
    for b, f in st.fwd_of.items():
        if element_of[f] != element_of[b]:
            pair = (element_of[f], element_of[b])
            if pair not in seen:
                seen.add(pair)
                elements.append({"data": {"id": f"created-{pair[0]}-{pair[1]}", "source": pair[0],
                                          "target": pair[1], "kind": "created"}, "classes": "created"})
    n_edges = len(seen)
    notes = []
    if not st.has_edges:
        notes.append("This profile has no recorded graph edges (profile schema 1 or a torch trace): "
                     "nodes are placed in execution order and only forward→backward links are drawn.")
    if collapsed_set:
        notes.append(f"{len(collapsed_set)} of {len(keys)} groups collapsed (click a box to expand; "
                     "“Expand all” shows every node).")
    return AutogradGraph(elements, len(drawn), len(items), n_edges, " ".join(notes),
                         sorted(keys.values()), sorted(collapsed_set), st.has_edges)


def _groups_around_matches(view, st: _Step, items, keys: dict, query: str) -> set[str]:
    """Keys of the groups that enclose a node whose label contains ``query`` (any case)."""
    q = query.strip().lower()
    out: set[str] = set()
    for ev in items:
        if q in _node_label(view, st, ev).lower():
            out.update(keys[g] for g in st.chain[ev])
    return out


def _kind(view, st: _Step, ev: int) -> str:
    if int(view.data.event_columns["scope"][ev]) == Scope.FUNCTION:
        return "forward"
    return "accumulate" if view.data.name_of(ev) == "AccumulateGrad" else "backward"


def _node_label(view, st: _Step, ev: int) -> str:
    name = view.data.name_of(ev)
    if name == "AccumulateGrad" and st.node_id.get(ev, -1) >= 0:
        return f"AccumulateGrad #{st.node_id[ev]}"     # the leaf's id: the same in every step
    return name


def _parent_box(chain: tuple, keys: dict, collapsed: set, stop=None) -> str | None:
    """The innermost expanded group box around an element (None: top level)."""
    parent = None
    for g in chain:
        if g == stop or keys[g] in collapsed:
            break
        parent = f"g{g}"
    return parent


def _group_boxes(view, st: _Step, items, keys, collapsed, collapsed_group_of) -> list[dict]:
    """Compound nodes for the expanded groups that hold something drawn."""
    boxes: dict[int, dict] = {}
    for ev in items:
        stop = collapsed_group_of.get(ev)
        parent = None
        for g in st.chain[ev]:
            if g == stop or keys[g] in collapsed:
                break
            if g not in boxes:
                # "members" empty: Cytoscape merges new data into an element of the same id,
                # and this box may have been drawn as the collapsed group, with members.
                data = {"id": f"g{g}", "label": _group_label(view, g), "kind": "group", "key": keys[g], "event": g,
                        "members": ""}
                if parent is not None:
                    data["parent"] = parent
                boxes[g] = {"data": data, "classes": "group"}
            parent = f"g{g}"
    return [boxes[g] for g in sorted(boxes)]


def _auto_collapse(st: _Step, items, keys: dict, depth: dict) -> set[str]:
    """Keys to collapse for a readable first view: the deepest group level at which the step
    has at most READABLE_UNITS drawn nodes (nothing, if it already has)."""
    if not keys:
        return set()
    max_depth = max(depth.values())
    for d in range(max_depth + 1, -1, -1):
        chosen = {g for g, k in depth.items() if k == d}
        units = {next((f"g{g}" for g in st.chain[ev] if g in chosen), f"e{ev}") for ev in items}
        if len(units) <= READABLE_UNITS or d == 0:
            return {keys[g] for g in chosen}
    return set()


def _layout(view, st: _Step, items, element_of) -> dict[str, tuple[float, float]]:
    """Positions: a row per forward rank, a forward op with its backward node to the right,
    an AccumulateGrad above the node that feeds it; rows centred, ordered by group then by
    the mean position of the row above."""
    cols = view.data.event_columns
    # A slot: a forward op with its backward node, a collapsed group, or a lone backward node.
    slot_of = {}
    for ev in items:
        el = element_of[ev]
        if el.startswith("e") and ev in st.fwd_of:
            f = st.fwd_of[ev]
            slot_of[ev] = f"e{f}" if element_of[f] == f"e{f}" else el
        else:
            slot_of[ev] = el
    first_ev: dict[str, int] = {}
    for ev in sorted(items, key=lambda e: int(cols["start_ns"][e])):
        first_ev.setdefault(slot_of[ev], ev)
    slots = list(first_ev)               # in start order
    paired = {slot_of[b] for b in st.fwd_of if element_of[b] != slot_of[b]}
    accumulate = {slot_of[ev] for ev in items if view.data.name_of(ev) == "AccumulateGrad" and slot_of[ev].startswith("e")}
    # Forward order: the next node of a backward edge ran its forward op earlier.
    before: dict[str, set] = {s: set() for s in slots}
    feeders: dict[str, set] = {s: set() for s in slots}
    for src, dst in st.edges:
        a_, b_ = slot_of[src], slot_of[dst]
        if a_ == b_:
            continue
        if b_ in accumulate:
            feeders[b_].add(a_)
        else:
            before[a_].add(b_)
    rank = _ranks([s for s in slots if s not in accumulate], before) if st.has_edges else \
        {s: k for k, s in enumerate(s for s in slots if s not in accumulate)}
    # Each slot sits in the innermost expanded group box around it (as its element's
    # Cytoscape parent): the boxes are laid out as blocks, so that no two overlap.
    box_of = {s: _box_chain(st.chain.get(first_ev[s], ()), element_of[first_ev[s]]) for s in slots}
    width_of = {s: _slot_width(view, s, s in paired, element_of) for s in slots}
    # An AccumulateGrad (a parameter) rides with the node that feeds it: to its right, half a
    # row up, in the same box; one fed from another box stands alone in its feeder's row.
    attached: dict[str, list] = {}
    for s in sorted(accumulate, key=lambda s: int(cols["start_ns"][first_ev[s]])):
        fed = sorted((f for f in feeders[s] if f in rank and f not in accumulate), key=lambda f: rank[f])
        rank[s] = rank[fed[0]] if fed else 0
        if fed and box_of[fed[0]] == box_of[s]:
            attached.setdefault(fed[0], []).append(s)
    placed = [s for s in slots if not any(s in a for a in attached.values())]
    extent = {s: width_of[s] + sum(BLOCK_GAP / 2 + width_of[a] for a in attached.get(s, ())) for s in placed}
    corner = _place_blocks(placed, rank, box_of, extent,
                           start_of={s: int(cols["start_ns"][first_ev[s]]) for s in placed},
                           risen={rank[s] for s in attached})
    for s, accs in attached.items():
        left, top = corner[s]
        x = left + width_of[s] + BLOCK_GAP / 2
        for a in accs:
            corner[a] = (x, top - ACC_RISE)
            x += width_of[a] + BLOCK_GAP / 2
    pos: dict[str, tuple[float, float]] = {}
    for ev in items:
        s, el = slot_of[ev], element_of[ev]
        left, top = corner[s]
        y = top + ROW_H / 2
        if el != s:                      # a backward node beside its forward op
            x = left + NODE_W / 2 + PAIR_DX
        elif s in paired:
            x = left + NODE_W / 2        # a forward op with its backward node beside it
        else:
            x = left + width_of[s] / 2
        pos[el] = (round(x, 1), round(y, 1))
    return pos


def _box_chain(chain: tuple, element: str) -> tuple:
    """The expanded group boxes around a slot, outermost first: its chain, cut at the
    collapsed group that the slot is (``element`` "g<event>")."""
    if element.startswith("g"):
        g = int(element[1:])
        return chain[:chain.index(g)] if g in chain else chain
    return chain


def _slot_width(view, s: str, paired: bool, element_of) -> float:
    if paired:
        return NODE_W + PAIR_DX
    if s.startswith("g"):
        return COLLAPSED_W
    return ACCUMULATE_W if view.data.name_of(int(s[1:])) == "AccumulateGrad" else NODE_W


@dataclass
class _Block:
    """A slot (``children`` None) or a group box being laid out: its rank range, the start
    time of its first op (the order of ties), its width and its children."""

    key: object
    r0: int
    r1: int
    start: int
    w: float = 0.0
    children: list | None = None


def _place_blocks(slots, rank, box_of, width_of, start_of, risen=frozenset()) -> dict[str, tuple[float, float]]:
    """Top-left corners of the slots: a row per rank, top to bottom, and nested blocks across.

    Inside a box, children (slots and child boxes) whose rank ranges overlap form a band and
    stand side by side; bands follow one another down. A box is as wide as its widest band
    plus padding, and the space between two rows grows by the padding and titles of the
    boxes that end above it and begin below it: so sibling boxes never overlap, every box
    holds exactly its own nodes, and a node always sits below the nodes of earlier ranks.
    ``risen``: ranks whose row has AccumulateGrads drawn half a row up (the gap above grows).
    """
    root = _Block(None, 0, 0, 0, children=[])
    boxes: dict[tuple, _Block] = {(): root}
    for s in slots:
        chain = box_of[s]
        for d in range(1, len(chain) + 1):
            if chain[:d] not in boxes:
                box = boxes[chain[:d]] = _Block(chain[d - 1], 0, 0, 0, children=[])
                boxes[chain[:d - 1]].children.append(box)
        boxes[chain].children.append(_Block(s, rank[s], rank[s], start_of[s], w=width_of[s]))
    _measure(root)
    y_of = _row_tops(slots, rank, box_of, boxes, risen)
    corner: dict[str, tuple[float, float]] = {}
    _assign(root, 0.0, y_of, corner)
    return corner


def _row_tops(slots, rank, box_of, boxes, risen) -> dict[int, float]:
    """The top of each rank's row: a row step apart, plus room for the boxes that close
    under a row (their padding) and open above the next (padding and title), and for the
    AccumulateGrads drawn half a row above the rows in ``risen``."""
    opens: dict[int, int] = {}
    closes: dict[int, int] = {}
    for s in slots:
        chain, r = box_of[s], rank[s]
        prefixes = [boxes[chain[:d]] for d in range(1, len(chain) + 1)]
        opens[r] = max(opens.get(r, 0), sum(b.r0 == r for b in prefixes))
        closes[r] = max(closes.get(r, 0), sum(b.r1 == r for b in prefixes))
    y_of, y, prev = {}, 0.0, None
    for r in sorted(opens):
        if prev is not None:
            y += ROW_STEP + closes[prev] * BOX_PAD + opens[r] * (BOX_PAD + BOX_TITLE) + (ACC_RISE if r in risen else 0)
        y_of[r] = y
        prev = r
    return y_of


def _measure(block: _Block) -> None:
    """Width and rank range of a box from its children (measured first)."""
    for c in block.children:
        if c.children is not None:
            _measure(c)
    kids = sorted(block.children, key=lambda c: (c.r0, c.start))
    if not kids:    # a step with no node to place (a torch trace's step of kernels only)
        return
    block.r0, block.r1 = min(c.r0 for c in kids), max(c.r1 for c in kids)
    block.start = min(c.start for c in kids)
    block.children = kids
    inner_w = max(_band_width(band) for band in _bands(kids))
    block.w = inner_w + (0.0 if block.key is None else 2 * BOX_PAD)


def _bands(kids: list) -> list[list]:
    """Children (sorted by first rank) grouped into runs whose rank ranges overlap."""
    bands, last = [], None
    for c in kids:
        if bands and c.r0 <= last:
            bands[-1].append(c)
            last = max(last, c.r1)
        else:
            bands.append([c])
            last = c.r1
    return bands


def _band_width(band: list) -> float:
    return sum(c.w for c in band) + BLOCK_GAP * (len(band) - 1)


def _assign(block: _Block, left: float, y_of: dict, corner: dict) -> None:
    """Place a measured box's children from its left edge; record the slots' corners."""
    pad = 0.0 if block.key is None else BOX_PAD
    inner_w = block.w - 2 * pad
    for band in _bands(block.children):
        x = left + pad + (inner_w - _band_width(band)) / 2          # centred in the box
        for c in band:
            if c.children is None:
                corner[c.key] = (x, y_of[c.r0])
            else:
                _assign(c, x, y_of, corner)
            x += c.w + BLOCK_GAP


def _ranks(slots: list[str], before: dict[str, set]) -> dict[str, int]:
    """Longest-path ranks (Kahn's order); a cycle, which a collapsed group can make, is
    broken at its earliest slot."""
    indeg = {s: 0 for s in slots}
    after: dict[str, list] = {s: [] for s in slots}
    for s in slots:
        for p in before[s]:
            if p in indeg:
                indeg[s] += 1
                after[p].append(s)
    rank = {s: 0 for s in slots}
    ready = [s for s in slots if indeg[s] == 0]
    done = set()
    order = list(slots)                  # slots are in start order: the earliest breaks a cycle
    while len(done) < len(slots):
        if not ready:
            ready = [next(s for s in order if s not in done)]
        s = ready.pop()
        if s in done:
            continue
        done.add(s)
        for t in after[s]:
            rank[t] = max(rank[t], rank[s] + 1)
            indeg[t] -= 1
            if indeg[t] == 0:
                ready.append(t)
    return rank

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
        **_graph_neighbours(data, i),
        "stack": data.stack_of(int(a.stack_id[i])),
        # The profile format has no records of hooks or saved tensors.
        "hooks": "not recorded in this profile",
        "saved_tensors": "not recorded in this profile",
    }


def _graph_neighbours(data, event: int) -> dict:
    """The recorded graph around a backward event: its node id, the nodes its gradient flows
    into, and the nodes whose gradients flow into it (names; empty without a graph)."""
    nodes, edges = data.node_columns, data.edge_columns
    at = np.flatnonzero(nodes["event"] == event)
    if not len(at):
        return {"node_id": None, "next_nodes": [], "fed_by": []}
    nid = int(nodes["node_id"][at[0]])
    first = {}
    for e, n in zip(nodes["event"].tolist(), nodes["node_id"].tolist()):
        first.setdefault(n, e)
    nxt = edges["next_node_id"][edges["node_id"] == nid].tolist()
    prev = edges["node_id"][edges["next_node_id"] == nid].tolist()
    return {"node_id": nid, "next_nodes": [data.name_of(first[n]) for n in nxt][:20],
            "fed_by": [data.name_of(first[n]) for n in prev][:20]}
