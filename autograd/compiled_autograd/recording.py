"""The cache key built while the forward runs, for forwards under :class:`enable`.

Walking a new graph to key it (:func:`.key.build_key`) costs, per node, about a tenth of what
the eager engine spends on that node: on a long chain of cheap ops that walk is a large part
of a compiled backward. While an ``enable()`` context is open on a thread, the table ops of
that thread hand every node they make to its :class:`Recording` (one slot read in
``dispatch._record`` when none is open), which appends the node's entry to a key as it is
made: its class, input metadata, edges (as positions in the recording), whether attributes
were given and whether it saved a tensor. At backward the key is then mostly built; what is
left is what can change after a node is made, checked over the recording in C-level passes:

- node hooks (``register_hook``, ``register_prehook``, tensor hooks, ``retain_grad``) on any
  recorded node: the recorded key is not used, the backward walks the graph instead;
- unpack hooks of saved tensors, and the hooks of the leaves (few nodes each): added to the
  key at backward;
- saved tensors already freed: walk instead (the walk raises the eager error);
- a root node that gained an edge (``add_next_edge``): walk instead.

A node whose child was not made under this recording (a custom Function's node, a node of an
earlier graph) breaks the recording: that backward walks. Leaves (AccumulateGrad) are
recorded when an op first uses them. The recording holds its nodes until the next compiled
backward on the thread, the end of the outermost ``enable()``, or ``limit`` nodes (twice the
largest recorded graph seen, so a forward-only loop under ``enable()`` does not keep graphs
alive); then it is dropped.
"""
from __future__ import annotations

from operator import attrgetter

from ..node import AccumulateGrad, SavedVariable
from .key import leaf_hook_sig

__all__ = ["Recording", "DEFAULT_LIMIT"]

#: Nodes a recording may hold before any recorded graph has been seen.
DEFAULT_LIMIT = 100_000

_extra = attrgetter("_extra")
_saved = attrgetter("_saved")


class Recording:
    """The nodes one thread's table ops made under ``enable()``, and their key so far.

    Attributes:
        nodes: op nodes in creation order (position ``i`` is ``i`` in the key's edges).
        leaves: AccumulateGrad nodes in order of first use (position ``k`` is ``-1 - k``).
        key: per op node: class, input_metadata, number of edges, one value per edge (a
            position, ``(position, input_nr)`` for input_nr > 0, None), ``not attrs``, saves
            a tensor; a leaf's (AccumulateGrad, input_metadata) is written where it is
            first used.
    """

    __slots__ = ("nodes", "index", "leaves", "leaf_index", "key", "at", "sv_nodes", "broken",
                 "limit")

    def __init__(self, limit: int = DEFAULT_LIMIT):
        self.nodes: list = []
        self.index: dict = {}
        self.leaves: list = []
        self.leaf_index: dict = {}
        self.key: list = []
        self.at: list = []         # where each op node's entry starts in key
        self.sv_nodes: list = []   # positions of the nodes that saved a tensor
        self.broken = False
        self.limit = limit

    def add(self, node) -> None:
        """Record one node made by a table op (called by ``dispatch._record``).

        Runs once per op of a forward under ``enable()``: locals for everything, one ``+=``
        per group of fixed fields, and one test (``limit``, -1 once dropped) before any work.
        """
        nodes = self.nodes
        i = len(nodes)
        if i >= self.limit:
            self.drop()
            return
        index = self.index
        key = self.key
        edges = node.next_edges
        self.at.append(len(key))
        key += (node.__class__, node.input_metadata, len(edges))
        for e in edges:
            if e is None:
                key.append(None)
                continue
            j = index.get(e[0])
            if j is None:
                j = self._leaf(e[0], key)
                if j is None:
                    return
            key.append((j, e[1]) if e[1] else j)
        tensors = node._saves_tensors
        key += (not node._attrs, tensors)
        if tensors:
            self.sv_nodes.append(i)
        index[node] = i
        nodes.append(node)

    def _leaf(self, child, key):
        """The key position of a child that is not a recorded op node: a leaf, recorded when
        first used; None (and the recording dropped) for a node made elsewhere."""
        k = self.leaf_index.get(child)
        if k is None:
            if not isinstance(child, AccumulateGrad):
                self.drop()
                return None
            k = self.leaf_index[child] = len(self.leaves)
            self.leaves.append(child)
            key += (AccumulateGrad, child.input_metadata)
        return -1 - k

    def drop(self) -> None:
        """Stop recording and let go of the nodes (this recording can key nothing now)."""
        if self.broken:
            return
        self.broken = True
        self.limit = -1
        self.nodes, self.index, self.leaves, self.leaf_index = [], {}, [], {}
        self.key, self.at, self.sv_nodes = [], [], []

    def finish(self, root_edges):
        """The recorded key of the graph below ``root_edges``, completed with what can change
        after a node is made.

        Returns:
            (nodes, key): every recorded node (op nodes, then leaves) and the key; or None
            when the graph must be walked instead (see the module docstring for when).
        """
        if self.broken:
            return None
        nodes = self.nodes
        index = self.index
        key = self.key
        roots = []
        for node, nr in root_edges:
            j = index.get(node)
            if j is None or len(node.next_edges) != key[self.at[j] + 2]:
                return None
            roots.append((j, nr))
        leaves = self.leaves
        if any(map(_extra, nodes)) or any(map(_extra, leaves)) or None in map(_saved, nodes):
            return None
        sv = SavedVariable
        tail = [tuple(roots)]
        for i in self.sv_nodes:
            tail.append(tuple([s._unpack_hook is None if s.__class__ is sv else None
                               for s in nodes[i]._saved]))
        for leaf in leaves:
            extra = leaf.variable._extra
            tail.append(leaf_hook_sig(extra) if extra else None)
        return nodes + leaves, [key, tail]
