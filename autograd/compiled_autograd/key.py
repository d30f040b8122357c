"""The cache key of a backward graph: its structure, in one place.

The key is one flat list: first the root edges (a tuple), then each node's fields in walk
order, in the order of :data:`NODE_FIELDS`. Flat, because a key is built for every compiled
backward: one append per value costs far less than a tuple per node and per field, and
comparing two keys is then one C-level list comparison whose items are mostly the same
objects (classes, small ints, None), which it compares by identity. :func:`build_key` writes
it, :func:`parse_key` reads the fields back by name (for :func:`explain_miss` and capture).

A forward run under ``enable()`` builds a second form of the key as it makes the nodes, so
that a backward whose graph was seen before need not walk it at all (:class:`Recording`,
at the end of this module).
"""
from __future__ import annotations

from itertools import chain
from operator import attrgetter

from ..dispatch import OpNode
from ..node import ERR_FREED, GRAPH_EPOCH, SAVED_HOOKS_EPOCH, AccumulateGrad, SavedVariable

__all__ = ["NODE_FIELDS", "OP", "ACC", "GENERIC", "kind_of", "build_key", "parse_key",
           "explain_miss", "node_hook_sig", "leaf_hook_sig", "Recording", "DEFAULT_LIMIT"]

#: The fields of one node's entry, in the order build_key writes them:
#:   class     the node's class (an op's node class says which op)
#:   metadata  its input_metadata: (shape, dtype, device, stream) per input
#:   edges     (child index, input_nr) per next edge, flattened; (-1, 0) for None. Written
#:             as the number of edges, then per edge the child index when input_nr is 0 (the
#:             common case), ``-1 - index`` followed by input_nr otherwise, None for None
#:   hooks     :func:`node_hook_sig`, None without hooks
#:   saved     op nodes: (no attrs given?, then, only when the node saved a tensor, what each
#:             saved position holds: True for a plain saved tensor, False for one with an
#:             unpack hook, None for anything else). Written as one value: ``not attrs`` for
#:             a node that saved no tensor, else the tuple with ``not attrs`` first. What a
#:             non-tensor position holds (a number, a Meta, None) is read from the new node
#:             at replay, so it needs no place in the key.
#:             AccumulateGrad: :func:`leaf_hook_sig`; other nodes: nothing written, None
NODE_FIELDS = ("class", "metadata", "edges", "hooks", "saved")

OP, ACC, GENERIC = 0, 1, 2
_kinds: dict = {}


def kind_of(cls) -> int:
    """OP (a table op's node), ACC (AccumulateGrad) or GENERIC (anything else)."""
    k = _kinds.get(cls)
    if k is None:
        k = _kinds[cls] = (ACC if issubclass(cls, AccumulateGrad)
                           else OP if issubclass(cls, OpNode) else GENERIC)
    return k


def node_hook_sig(ex):
    """Which node hooks exist: (pre hooks, tensor pre hooks per output, retain_grad, post)."""
    if ex is None:
        return None
    tph = ex.tensor_pre_hooks
    sig = (len(ex.pre_hooks) if ex.pre_hooks else 0,
           tuple((nr, len(t)) for nr, t in tph.items() if t) if tph else (),
           tuple(ex.retains_grad_hooks) if ex.retains_grad_hooks else (),
           len(ex.post_hooks) if ex.post_hooks else 0)
    return None if sig == (0, (), (), 0) else sig


def leaf_hook_sig(extra):
    """Which hooks a leaf has: (tensor hooks, post-accumulate-grad hooks), None for none."""
    if not extra:
        return None
    hooks, post = extra.get("hooks"), extra.get("post_acc_hooks")
    sig = (len(hooks) if hooks else 0, len(post) if post else 0)
    return None if sig == (0, 0) else sig


def build_key(root_edges):
    """One walk over the graph: the nodes in a canonical order and the structural key.

    The order (breadth first: a node is numbered when first reached, and entries follow the
    numbers) depends only on the structure, so two graphs with equal keys list corresponding
    nodes at the same positions, and the ``i``-th entry of the key describes ``nodes[i]``.

    This walk is the whole price of a cache hit before any step runs, so it is written for
    speed: locals for everything it calls, one ``+=`` of a tuple for the fixed fields, and
    nothing per saved position of a node that saved no tensor (the common case of an op with
    a number operand: what such positions hold is read at replay, so the key needs no more).

    Returns:
        (nodes, key)
    """
    nodes = []
    index = {}
    roots = []
    for node, nr in root_edges:
        j = index.get(node)
        if j is None:
            j = index[node] = len(nodes)
            nodes.append(node)
        roots.append((j, nr))
    key = [tuple(roots)]
    push = key.append
    get = index.get
    add = nodes.append
    kinds = _kinds
    hook_sig = node_hook_sig
    SV = SavedVariable
    for node in nodes:   # grows while walked: new nodes are appended
        cls = node.__class__
        edges = node.next_edges
        key += (cls, node.input_metadata, len(edges))   # class, metadata, edges...
        for e in edges:
            if e is None:
                push(None)
                continue
            child, nr = e
            j = get(child)
            if j is None:
                j = index[child] = len(nodes)
                add(child)
            if nr:
                push(-1 - j)
                push(nr)
            else:
                push(j)
        ex = node._extra                                # hooks
        push(ex and hook_sig(ex))
        kind = kinds.get(cls)                           # saved
        if kind is None:
            kind = kind_of(cls)
        if kind == OP:
            saved = node._saved
            if saved is None:
                raise RuntimeError(ERR_FREED)
            if node._saves_tensors:
                push((not node._attrs, *[s._unpack_hook is None if s.__class__ is SV else None
                                         for s in saved]))
            else:
                push(not node._attrs)
        elif kind == ACC:
            extra = node.variable._extra
            push(leaf_hook_sig(extra) if extra else None)
    return nodes, key


def _read_edges(key, i, cls):
    n = key[i]
    i += 1
    edges = []
    for _ in range(n):
        v = key[i]
        i += 1
        if v is None:
            edges += (-1, 0)
        elif v >= 0:
            edges += (v, 0)
        else:
            edges += (-1 - v, key[i])
            i += 1
    return tuple(edges), i


def _read_saved(key, i, cls):
    kind = kind_of(cls)
    if kind == OP:
        v = key[i]
        return ((v,) if v.__class__ is bool else v), i + 1
    if kind == ACC:
        return key[i], i + 1
    return None, i


# How parse_key reads each field of NODE_FIELDS back: (key, position, node class) ->
# (value, next position).
_READ = {
    "class": lambda key, i, cls: (key[i], i + 1),
    "metadata": lambda key, i, cls: (key[i], i + 1),
    "edges": _read_edges,
    "hooks": lambda key, i, cls: (key[i], i + 1),
    "saved": _read_saved,
}
assert tuple(_READ) == NODE_FIELDS


def parse_key(key):
    """(root edges, one dict per node keyed by :data:`NODE_FIELDS`)."""
    fields = []
    i = 1
    while i < len(key):
        cls = key[i]
        entry = {}
        for name, read in _READ.items():
            entry[name], i = read(key, i, cls)
        fields.append(entry)
    return key[0], fields


def _describe_meta(meta) -> str:
    return ", ".join(f"{str(m[1])}{list(m[0])} on {m[2]}" for m in meta)


def _metadata_change(a, b) -> str:
    sa, sb = [m[0] for m in a], [m[0] for m in b]
    what = "shape changed" if sa != sb else "dtype/device/stream changed"
    return f"{what}: {_describe_meta(a)} -> {_describe_meta(b)}"


# How to say that a field changed, for each field of NODE_FIELDS.
_CHANGED = {
    "class": lambda a, b: f"changed kind: {a.__name__} -> {b.__name__}",
    "metadata": _metadata_change,
    "edges": lambda a, b: "edges changed",
    "hooks": lambda a, b: f"hooks changed: {a} -> {b}",
    "saved": lambda a, b: f"saved tensors / their hooks or leaf hooks changed: {a} -> {b}",
}
assert tuple(_CHANGED) == NODE_FIELDS


def explain_miss(old_key, new_key) -> str:
    """Why ``new_key`` differs from ``old_key``, in words (the first difference)."""
    old_root, old = parse_key(old_key)
    new_root, new = parse_key(new_key)
    if len(old) != len(new):
        return f"graph changed: {len(old)} nodes before, {len(new)} now"
    if old_root != new_root:
        return "the roots of backward changed"
    for i, (a, b) in enumerate(zip(old, new)):
        for field in NODE_FIELDS:
            if a[field] != b[field]:
                return (f"node {i} ({b['class'].__name__}) "
                        f"{_CHANGED[field](a[field], b[field])}")
    return "unknown difference"


# ---------------------------------------- the key recorded with the forward
#
# The cache key built while the forward runs, for forwards under :class:`enable`.
#
# Walking a new graph to key it (:func:`build_key`) costs, per node, about a tenth of what
# the eager engine spends on that node: on a long chain of cheap ops that walk is a large part
# of a compiled backward. While an ``enable()`` context is open on a thread, the table ops of
# that thread hand every node they make to its :class:`Recording` (one slot read in
# ``dispatch._record`` when none is open), which appends the node's entry to a key as it is
# made: its class, input metadata, edges (as positions in the recording), whether attributes
# were given and what each saved position holds. At backward the key is then mostly built; what is
# left is what can change after a node is made, checked over the recording in C-level passes:
#
# - node hooks (``register_hook``, ``register_prehook``, tensor hooks, ``retain_grad``) on any
#   recorded node: the recorded key is not used, the backward walks the graph instead;
# - saved tensors already freed: walk instead (the walk raises the eager error);
# - unpack hooks of saved tensors: added to the key at backward, looked for only when
#   ``node.SAVED_HOOKS_EPOCH`` moved since the recording began (what each saved position
#   holds is recorded with the node);
# - the hooks of the leaves (few nodes): added to the key at backward;
# - a root node that gained an edge (``add_next_edge``): walk instead.
#
# The first two are passes over every recorded node, and on a long graph they
# cost more than the key comparison itself: they run only when ``node.GRAPH_EPOCH`` moved
# since the first node was recorded, which every hook registration and the start of every
# backward (eager or compiled, in any thread) does. (A ``release_variables()`` called by hand
# on a recorded node moves nothing: its replay then raises the freed-graph error where it
# reads the node's saved values, see ``compiled_autograd._replay``.)
#
# A node whose child was not made under this recording (a custom Function's node, a node of an
# earlier graph) breaks the recording: that backward walks. Leaves (AccumulateGrad) are
# recorded when an op first uses them. The recording holds its nodes until the next compiled
# backward on the thread, the end of the outermost ``enable()``, or ``limit`` nodes (twice the
# largest recorded graph seen, so a forward-only loop under ``enable()`` does not keep graphs
# alive); then it is dropped.


#: Nodes a recording may hold before any recorded graph has been seen.
DEFAULT_LIMIT = 100_000

_get_extra = attrgetter("_extra")
_get_saved = attrgetter("_saved")
_get_variable = attrgetter("variable")


class Recording:
    """The nodes one thread's table ops made under ``enable()``, and their key so far.

    Attributes:
        nodes: op nodes in creation order (position ``i`` is ``i`` in the key's edges).
        leaves: AccumulateGrad nodes in order of first use (position ``k`` is ``-1 - k``).
        key: per op node: class, input_metadata, number of edges, one value per edge (a
            position, ``(position, input_nr)`` for input_nr > 0, None), ``not attrs``, and
            the class of each saved position (False for a node that saved no tensor); a
            leaf's (AccumulateGrad, input_metadata) is written where it is first used.
    """

    __slots__ = ("nodes", "index", "leaves", "leaf_index", "key", "at", "sv_nodes", "broken",
                 "limit", "epoch", "hooks_epoch", "leaf_sigs")

    def __init__(self, limit: int = DEFAULT_LIMIT):
        self.nodes: list = []
        self.index: dict = {}
        self.leaves: list = []
        self.leaf_index: dict = {}
        self.key: list = []
        self.at: list = []         # where each op node's entry starts in key
        self.sv_nodes: list = []   # the nodes that saved a tensor
        self.broken = False
        self.limit = limit
        self.epoch = None          # node.GRAPH_EPOCH when the first node was recorded
        self.hooks_epoch = SAVED_HOOKS_EPOCH[0]   # before any of its nodes saved a tensor
        # Per leaf, its hooks when first used (leaf_hook_sig; False: its AccumulateGrad node
        # has hooks of its own); valid while node.GRAPH_EPOCH has not moved since.
        self.leaf_sigs: list = []

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
        if not i:
            self.epoch = GRAPH_EPOCH[0]
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
        if node._saves_tensors:
            # What each saved position holds, by class (a SavedVariable, a number, a Meta,
            # None): read while the node is new, where finish() would visit each again.
            key += (not node._attrs, tuple(map(type, node._saved)))
            self.sv_nodes.append(node)
        else:
            key += (not node._attrs, False)
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
            extra = child.variable._extra
            self.leaf_sigs.append(False if child._extra is not None else
                                  leaf_hook_sig(extra) if extra else None)
        return -1 - k

    def drop(self) -> None:
        """Stop recording and let go of the nodes (this recording can key nothing now)."""
        if self.broken:
            return
        self.broken = True
        self.limit = -1
        self.nodes, self.index, self.leaves, self.leaf_index = [], {}, [], {}
        self.key, self.at, self.sv_nodes, self.leaf_sigs = [], [], [], []

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
        # Hooks or released saves on the recorded nodes, and the leaves' hooks: looked for
        # only where node.GRAPH_EPOCH moved since the first node was recorded (a hook
        # registered, a backward run); else these passes over every node, most of this
        # function's cost, are skipped and the leaves' hooks are those seen at their first use.
        # A node's _saved is a non-empty list until released (None): all() tests each by
        # truth, in C, where ``None in`` would compare each list with None.
        if self.epoch == GRAPH_EPOCH[0]:
            sigs = self.leaf_sigs
            if False in sigs:   # an AccumulateGrad node with hooks of its own
                return None
        else:
            if (any(map(_get_extra, nodes)) or not all(map(_get_saved, nodes))
                    or any(map(_get_extra, leaves))):
                return None
            extras = list(map(_get_extra, map(_get_variable, leaves)))
            sigs = [leaf_hook_sig(e) if e else None for e in extras] if any(extras) else None
        # Which saved tensors have an unpack hook: none unless node.SAVED_HOOKS_EPOCH moved
        # since this recording began (None); else, per saved tensor of the nodes that saved
        # one (their positions are in the key), whether it has one, unless none has (None).
        hooked = None
        if self.hooks_epoch != SAVED_HOOKS_EPOCH[0]:
            sv = SavedVariable
            try:
                hooked = [s._unpack_hook is not None
                          for s in chain.from_iterable(map(_get_saved, self.sv_nodes))
                          if s.__class__ is sv]
            except TypeError:   # a _saved of None: released by hand (see above); walk
                return None
            if True not in hooked:
                hooked = None
        tail = [tuple(roots), hooked, list(sigs) if sigs and any(sigs) else None]  # None: no hook
        return nodes + leaves, [key, tail]
