"""Forward and backward time per ``nn.Module`` instance, as the module hierarchy.

PyTorch's profiler shows module ranges but not what a module costs in backward
(pytorch/pytorch#144778). Here each module call's cost is the time of the events charged to it
by :func:`profiler.modules.module_owner` — its forward ops, and the backward nodes those ops
created (linked by sequence_nr and thread), with the ops they ran — so every event is charged
once, to the innermost module call around it (or to none).

The tree: a module call's parent is the innermost module call around it. Calls merge into
one node when they have the same path from the root:

* torch traces name instances (``nn.Module: Linear_0``): a node is an instance under its
  parent node (``Sequential_0 > Linear_1``);
* gradtrace profiles name classes (``nn.Module: Linear``): the k-th call of a class inside one
  call of its parent is the node ``Linear #k`` (numbered when the parent calls the class more
  than once), so two sibling ``Linear`` layers stay apart and step 2's calls join step 1's.

Per node (times in microseconds): ``forward_self`` (its own calls' forward time outside its
child modules), ``backward_self`` (the same for backward), and the ``*_total`` = self + the
children's totals. Hence Σ self over the tree = Σ total over the roots, and adding the time
of no module (``(no module)``: the optimizer, the loss outside a module, code between ops)
gives the profile's Σ self time, which no total exceeds.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .modules import NO_MODULE, module_event_mask, module_label, module_owner

if TYPE_CHECKING:  # pragma: no cover
    from .data import ProfileData

__all__ = ["ModuleNode", "module_tree", "flatten", "TIME_FIELDS"]

# (field, clock, phase, self?) for every time a node carries; phase "" is forward + backward.
TIME_FIELDS = tuple(
    (f"{phase}{'self_' if self_ else ''}{clock}_time_total", clock, phase, self_)
    for clock in ("cpu", "cuda")
    for phase, self_ in (("forward_", True), ("forward_", False), ("backward_", True),
                         ("backward_", False), ("forward_backward_", False), ("", True)))


class ModuleNode:
    """One module of the tree (times in microseconds).

    Attributes:
        name: the instance ("Linear_1") or class with its call number ("Linear #2").
        module: ``name`` indented by depth (the tree's first table column).
        path: names from the root down to this node.
        depth: 0 for a root.
        count: calls merged into this node (PyTorch's "# of Calls").
        forward_self_cpu_time_total, forward_cpu_time_total, backward_self_cpu_time_total,
        backward_cpu_time_total, forward_backward_cpu_time_total, self_cpu_time_total
        (forward + backward self) and the same with ``cuda``.
        children: child nodes, in order of first call.
    """

    def __init__(self, name: str, path: tuple, depth: int):
        self.name, self.path, self.depth = name, path, depth
        self.count = 0
        self.call_number = 0
        self.children: list[ModuleNode] = []
        for field, *_ in TIME_FIELDS:
            setattr(self, field, 0.0)

    @property
    def module(self) -> str:
        return "  " * self.depth + self.name

    @property
    def key(self) -> str:
        return " > ".join(self.path)

    def to_dict(self, nested: bool = True) -> dict:
        """The node's fields (``module`` is its name); ``children`` nested unless ``nested`` is False."""
        d = {"module": self.name, "path": list(self.path), "depth": self.depth, "count": self.count}
        d.update({field: getattr(self, field) for field, *_ in TIME_FIELDS})
        if nested:
            d["children"] = [c.to_dict() for c in self.children]
        return d

    def __repr__(self):
        return f"<ModuleNode {self.key!r} forward_backward_cpu_time_total={self.forward_backward_cpu_time_total:.3f}us>"


def module_tree(data: "ProfileData") -> list[ModuleNode]:
    """The module hierarchy of a profile with its forward and backward cost.

    Args:
        data: a profile recorded with ``with_modules`` (or a torch trace with module ranges).
    Returns:
        The root nodes in order of first call, then a ``(no module)`` node (depth 0, no
        children, count 0) with the time charged to no module when there is any; empty when
        the profile has no module ranges.
    """
    a = data.analysis
    is_module = module_event_mask(data)
    in_bwd = a.backward_ancestor >= 0
    # Module calls made while a backward node runs (recomputation) are charged to the
    # forward op's module; they are not calls of their own.
    calls = np.flatnonzero(is_module & ~in_bwd)
    if len(calls) == 0:
        return []
    owner = module_owner(data)
    node_of_call = _nodes_of_calls(data, calls, owner)
    nodes, parent_of = node_of_call.nodes, node_of_call.parent
    n_nodes = len(nodes)
    node_of_event = np.full(data.n_events, -1, dtype=np.int64)
    node_of_event[calls] = node_of_call.index
    charged = np.where(owner >= 0, node_of_event[np.maximum(owner, 0)], -1)
    for k in node_of_call.index.tolist():
        nodes[k].count += 1
    # Self times per node and phase (index n_nodes collects the events of no module).
    slot = np.where(charged >= 0, charged, n_nodes)
    per_node = {}
    for clock, values in (("cpu", a.self_cpu_ns), ("cuda", a.self_cuda_ns)):
        for phase, mask in (("forward_", ~in_bwd), ("backward_", in_bwd)):
            sums = np.bincount(slot[mask], weights=values[mask], minlength=n_nodes + 1) / 1e3
            per_node[phase, clock] = sums
    for k, node in enumerate(nodes):
        for (phase, clock), sums in per_node.items():
            setattr(node, f"{phase}self_{clock}_time_total", float(sums[k]))
            setattr(node, f"{phase}{clock}_time_total", float(sums[k]))
    # Totals bottom-up: a child is always created after its parent.
    for k in range(n_nodes - 1, -1, -1):
        p = parent_of[k]
        if p >= 0:
            for phase in ("forward_", "backward_"):
                for clock in ("cpu", "cuda"):
                    field = f"{phase}{clock}_time_total"
                    setattr(nodes[p], field, getattr(nodes[p], field) + getattr(nodes[k], field))
    for node in nodes:
        _fill_sums(node)
    roots = [nodes[k] for k in range(n_nodes) if parent_of[k] < 0]
    rest = ModuleNode(NO_MODULE, (NO_MODULE,), 0)
    for (phase, clock), sums in per_node.items():
        setattr(rest, f"{phase}self_{clock}_time_total", float(sums[n_nodes]))
        setattr(rest, f"{phase}{clock}_time_total", float(sums[n_nodes]))
    _fill_sums(rest)
    if rest.forward_backward_cpu_time_total or rest.forward_backward_cuda_time_total:
        roots.append(rest)
    return roots


def _fill_sums(node: ModuleNode) -> None:
    for clock in ("cpu", "cuda"):
        setattr(node, f"forward_backward_{clock}_time_total",
                getattr(node, f"forward_{clock}_time_total") + getattr(node, f"backward_{clock}_time_total"))
        setattr(node, f"self_{clock}_time_total",
                getattr(node, f"forward_self_{clock}_time_total") + getattr(node, f"backward_self_{clock}_time_total"))


class _Calls:
    """Nodes made from module calls: ``nodes``, ``parent`` (node -> parent node, -1 for a
    root) and ``index`` (call -> node)."""

    def __init__(self):
        self.nodes: list[ModuleNode] = []
        self.parent: list[int] = []
        self.index = np.zeros(0, dtype=np.int64)


def _nodes_of_calls(data: "ProfileData", calls: np.ndarray, owner: np.ndarray) -> _Calls:
    """Merge module calls (event indices, in start order) into tree nodes."""
    parent_of_event = data.analysis.parent     # bound once: read once per call below
    by_instance = data.metadata.get("source") == "torch_trace"
    name_id = data.event_columns["name_id"]
    label = {int(s): module_label(data.strings[int(s)]) for s in np.unique(name_id[calls])}
    out = _Calls()
    node_of: dict[int, int] = {}            # call event -> node
    node_key: dict[tuple, int] = {}         # (parent node, label, call number) -> node
    seen_in_call: dict[tuple, int] = {}     # (parent call, label) -> calls so far
    index = np.empty(len(calls), dtype=np.int64)
    for i, ev in enumerate(calls.tolist()):
        p_ev = int(parent_of_event[ev])
        parent_call = int(owner[p_ev]) if p_ev >= 0 else -1
        parent_node = node_of.get(parent_call, -1)
        if parent_node < 0:
            parent_call = -1    # a root, or inside a call made in backward: merge across calls
        name = label[int(name_id[ev])]
        number = 0
        if not by_instance and parent_call >= 0:
            number = seen_in_call.get((parent_call, name), 0)
            seen_in_call[parent_call, name] = number + 1
        key = (parent_node, name, number)
        k = node_key.get(key)
        if k is None:
            k = node_key[key] = len(out.nodes)
            parent = out.nodes[parent_node] if parent_node >= 0 else None
            node = ModuleNode(name, (parent.path if parent else ()) + (name,), parent.depth + 1 if parent else 0)
            node.call_number = number
            out.nodes.append(node)
            out.parent.append(parent_node)
            if parent is not None:
                parent.children.append(node)
        node_of[ev] = k
        index[i] = k
    out.index = index
    _number_repeated(out.nodes)
    return out


def _number_repeated(nodes: list[ModuleNode]) -> None:
    """Name ``Linear #1``, ``Linear #2`` where a parent calls one class more than once."""
    for node in nodes:
        names = [c.name for c in node.children]
        repeated = {n for n in names if names.count(n) > 1}
        for c in node.children:
            if c.name in repeated:
                _rename(c, f"{c.name} #{c.call_number + 1}")


def _rename(node: ModuleNode, name: str) -> None:
    depth = node.depth
    node.name = name
    stack = [node]
    while stack:
        n = stack.pop()
        n.path = n.path[:depth] + (name,) + n.path[depth + 1:]
        stack.extend(n.children)


def flatten(roots: list[ModuleNode]) -> list[ModuleNode]:
    """The nodes in tree order (each node followed by its subtree), for tables."""
    out, stack = [], list(reversed(roots))
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(reversed(node.children))
    return out
