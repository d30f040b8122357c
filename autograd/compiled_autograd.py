"""Compiled autograd: capture the backward graph once as a flat program, replay it after.

Every forward builds a new graph, but a training loop builds the same graph each step. On the
first ``backward`` of a structure (a cache miss), the graph is walked the way the engine would
run it and recorded as a flat list of :class:`Step` s: a node's backward rules, a hook call, a
saved-tensor unpack, a gradient sum, an accumulate-grad, each with the registers it reads and
writes. Small passes (below) put hooks and accumulations where the eager engine runs them, the
program is turned into straight-line Python, and the next backward of a graph with the same
structure replays it: no ready heap, no dependency counts, no input buffers, the rules called
directly with ``ArrayF``. Saved tensors and leaves are *inputs* of the program, read from the
new graph's nodes at replay, never constants.

The cache key is a flat list built by one walk over the new graph (node classes, edges, input
shapes/dtypes/devices/streams, which hooks exist, which saved tensors have unpack hooks);
comparing it with a cached key is one C-level list comparison. A miss logs why on
``logging.getLogger("gradtrace.autograd.compiled_autograd")`` at DEBUG.

On a CUDA device the replayed program is captured once into a CUDA graph (stream capture) with
static input and output buffers and replayed with one launch; programs that hold something
that cannot be captured (a Python hook, a custom Function, an unpack hook, a host sync) fall
back to plain replay, and the log says so.

Usage::

    with autograd.compiled_autograd.enable():
        loss.backward()             # or loss.backward(compiled=True) without the context

Supported: ``backward(tensors, grad_tensors, retain_graph)`` with every hook kind, custom
Functions, checkpointing and saved-tensor hooks. ``create_graph=True`` and ``inputs=`` raise a
clear error; ``autograd.grad`` always runs eagerly; anomaly mode and graphs whose nodes ran on
different streams run eagerly (logged).
"""
from __future__ import annotations

import logging
import threading

from . import engine as _engine
from . import record_function as _rf
from .backend import Stream, current_stream
from .dispatch import ArrayF, Meta, OpNode, _fill_missing
from .grad_mode import STATE as _THREAD
from .node import ERR_FREED, AccumulateGrad, GraphRoot, SavedVariable
from .ops.shape import sum_to_shape
from .tensor import Tensor

__all__ = ["enable", "disable", "is_enabled", "run_backward", "reset", "stats", "Step",
           "Program", "PASSES", "capture", "log"]

log = logging.getLogger("gradtrace.autograd.compiled_autograd")

_RF = _rf.STATE
_BACKWARD = int(_rf.RecordScope.BACKWARD_FUNCTION)
_USER = int(_rf.RecordScope.USER_SCOPE)

# Read by engine.backward: > 0 while some enable() context is open.
enabled_depth = 0
_cuda_graphs = [True]           # stack of the cuda_graphs choice of open enable() contexts
_lock = threading.RLock()       # the cache is shared by threads


# --------------------------------------------------------------------------- enable / disable


class enable:
    """Context manager: every ``backward()`` inside it runs compiled.

    Args:
        cuda_graphs: on a CUDA device, capture the replayed program into a CUDA graph from its
            second run on (default True). Ignored on the CPU.
    """

    def __init__(self, cuda_graphs: bool = True):
        self.cuda_graphs = bool(cuda_graphs)

    def __enter__(self):
        global enabled_depth
        with _lock:
            enabled_depth += 1
            _cuda_graphs.append(self.cuda_graphs)
        return self

    def __exit__(self, *exc):
        global enabled_depth
        with _lock:
            enabled_depth -= 1
            _cuda_graphs.pop()
        return False


class disable:
    """Context manager: backward runs eagerly inside it, even within :class:`enable`."""

    def __enter__(self):
        global enabled_depth
        with _lock:
            self._saved, enabled_depth = enabled_depth, 0
        return self

    def __exit__(self, *exc):
        global enabled_depth
        with _lock:
            enabled_depth = self._saved
        return False


def is_enabled() -> bool:
    return enabled_depth > 0


# --------------------------------------------------------------------------- statistics


_STATS_ZERO = {"captures": 0, "hits": 0, "misses": 0, "eager_fallbacks": 0,
               "cudagraph_captures": 0, "cudagraph_replays": 0, "cudagraph_fallbacks": 0}
_stats = dict(_STATS_ZERO)
_last = {"miss_reason": None, "fallback_reason": None, "program": None}


def stats() -> dict:
    """Counters since the last :func:`reset`, plus the last miss/fallback reason."""
    out = dict(_stats)
    out["last_miss_reason"] = _last["miss_reason"]
    out["last_fallback_reason"] = _last["fallback_reason"]
    out["cache_size"] = sum(len(v) for v in _cache.values())
    return out


def last_program() -> "Program | None":
    """The program of the last compiled backward (for inspection and tests)."""
    return _last["program"]


def reset() -> None:
    """Forget every cached program and zero the counters."""
    with _lock:
        _cache.clear()
        _stats.update(_STATS_ZERO)
        _last.update(miss_reason=None, fallback_reason=None, program=None)


# --------------------------------------------------------------------------- the cache key

# The key is a flat list, so comparing two keys is one C-level list comparison. Layout:
#   root edges: child index, input_nr, ... then _SEP
#   per node (in walk order): class, input_metadata, number of edges, (child index, input_nr)
#   per edge ((-1, 0) for None), node hook signature (None without hooks), then by kind:
#     op node:      attrs given?, number of saved values, per saved value: True (plain saved
#                   tensor), False (saved tensor with unpack hook) or the value's class
#     accumulate:   leaf hook signature (None without hooks)
#     other nodes:  nothing more
_SEP = "|"
_OP, _ACC, _GENERIC = 0, 1, 2
_kinds: dict = {}


def _kind(cls) -> int:
    k = _kinds.get(cls)
    if k is None:
        k = _kinds[cls] = (_ACC if issubclass(cls, AccumulateGrad)
                           else _OP if issubclass(cls, OpNode) else _GENERIC)
    return k


def _node_hook_sig(ex):
    """Which node hooks exist: (pre hooks, tensor pre hooks per output, retains_grad, post)."""
    tph = ex.tensor_pre_hooks
    sig = (len(ex.pre_hooks) if ex.pre_hooks else 0,
           tuple((nr, len(t)) for nr, t in tph.items() if t) if tph else (),
           tuple(ex.retains_grad_hooks) if ex.retains_grad_hooks else (),
           len(ex.post_hooks) if ex.post_hooks else 0)
    return None if sig == (0, (), (), 0) else sig


def _leaf_hook_sig(extra):
    hooks, post = extra.get("hooks"), extra.get("post_acc_hooks")
    sig = (len(hooks) if hooks else 0, len(post) if post else 0)
    return None if sig == (0, 0) else sig


def _walk(root_edges):
    """One pass over the graph: the nodes in a canonical order and the structural key.

    The order depends only on the structure, so two graphs with equal keys list corresponding
    nodes at the same positions and a program can address the new graph's nodes by index.
    """
    nodes = []
    index = {}
    key = []
    push = key.append
    stack = []
    for node, nr in root_edges:
        j = index.get(node)
        if j is None:
            j = index[node] = len(nodes)
            nodes.append(node)
            stack.append(node)
        push(j)
        push(nr)
    push(_SEP)
    kinds = _kinds
    SV = SavedVariable
    while stack:
        node = stack.pop()
        cls = node.__class__
        edges = node.next_edges
        push(cls)
        push(node.input_metadata)
        push(len(edges))
        for e in edges:
            if e is None:
                push(-1)
                push(0)
                continue
            child = e[0]
            j = index.get(child)
            if j is None:
                j = index[child] = len(nodes)
                nodes.append(child)
                stack.append(child)
            push(j)
            push(e[1])
        ex = node._extra
        push(None if ex is None else _node_hook_sig(ex))
        kind = kinds.get(cls)
        if kind is None:
            kind = _kind(cls)
        if kind == _OP:
            saved = node._saved
            if saved is None:
                raise RuntimeError(ERR_FREED)
            push(not node._attrs)
            push(len(saved))
            for s in saved:
                c = s.__class__
                push(s._unpack_hook is None if c is SV else c)
        elif kind == _ACC:
            extra = node.variable._extra
            push(_leaf_hook_sig(extra) if extra else None)
    return nodes, key


def _parse_key(key):
    """Split a key into (root part, per-node fields) for explaining a miss."""
    sep = key.index(_SEP)
    root, rest = key[:sep], key[sep + 1:]
    fields = []
    i = 0
    while i < len(rest):
        cls, meta, n = rest[i], rest[i + 1], rest[i + 2]
        i += 3
        edges = tuple(rest[i:i + 2 * n])
        i += 2 * n
        hooks = rest[i]
        i += 1
        kind = _kind(cls)
        saved = None
        if kind == _OP:
            m = rest[i + 1]
            saved = tuple(rest[i:i + 2 + m])
            i += 2 + m
        elif kind == _ACC:
            saved = rest[i]
            i += 1
        fields.append({"class": cls, "metadata": meta, "edges": edges, "hooks": hooks,
                       "saved": saved})
    return root, fields


def _describe_meta(meta) -> str:
    return ", ".join(f"{str(m[1])}{list(m[0])} on {m[2]}" for m in meta)


def explain_miss(old_key, new_key) -> str:
    """Why ``new_key`` differs from ``old_key``, in words (the first difference)."""
    old_root, old = _parse_key(old_key)
    new_root, new = _parse_key(new_key)
    if len(old) != len(new):
        return f"graph changed: {len(old)} nodes before, {len(new)} now"
    if old_root != new_root:
        return "the roots of backward changed"
    for i, (a, b) in enumerate(zip(old, new)):
        name = b["class"].__name__
        if a["class"] is not b["class"]:
            return f"node {i} changed kind: {a['class'].__name__} -> {name}"
        if a["metadata"] != b["metadata"]:
            sa, sb = [m[0] for m in a["metadata"]], [m[0] for m in b["metadata"]]
            what = "shape changed" if sa != sb else "dtype/device/stream changed"
            return (f"{what} at node {i} ({name}): {_describe_meta(a['metadata'])} -> "
                    f"{_describe_meta(b['metadata'])}")
        if a["edges"] != b["edges"]:
            return f"edges changed at node {i} ({name})"
        if a["hooks"] != b["hooks"]:
            return f"hooks changed at node {i} ({name}): {a['hooks']} -> {b['hooks']}"
        if a["saved"] != b["saved"]:
            what = "leaf hooks" if _kind(b["class"]) == _ACC else "saved tensors / their hooks"
            return f"{what} changed at node {i} ({name}): {a['saved']} -> {b['saved']}"
    return "unknown difference"


# --------------------------------------------------------------------------- the program


class Step:
    """One instruction of a compiled backward.

    Attributes:
        kind: "root", "unpack", "tensor_pre_hook", "retain_grad", "pre_hook", "call",
            "post_hook", "sum", "accumulate_grad", "post_acc_hook" or "release".
        node: index of the node it belongs to (in the walk order), -1 for the root.
        reads: registers it reads.
        writes: registers it writes.
        arg: kind-specific data (an output number, a saved-value position...).
    """

    __slots__ = ("kind", "node", "reads", "writes", "arg", "pure")

    #: Steps without side effects: removable when nobody reads what they write.
    PURE = frozenset({"root", "sum", "call"})

    def __init__(self, kind, node, reads=(), writes=(), arg=None, pure=None):
        self.kind = kind
        self.node = node
        self.reads = tuple(reads)
        self.writes = tuple(writes)
        self.arg = arg
        self.pure = kind in self.PURE if pure is None else pure

    def __repr__(self):
        w = ", ".join(f"v{r}" for r in self.writes)
        r = ", ".join("None" if x is None else f"v{x}" for x in self.reads)
        return f"{w + ' = ' if w else ''}{self.kind}[n{self.node}]({r})"


class Program:
    """A captured backward: its steps plus what code generation needs to know about it."""

    def __init__(self, key, nodes_info, steps, n_regs, maybe_none, device, stream, root_meta):
        self.key = key
        self.nodes_info = nodes_info    # per node: dict(cls, kind, meta, edges, saved...)
        self.steps = steps
        self.n_regs = n_regs
        self.maybe_none = maybe_none    # registers that may hold None at run time
        self.device = device
        self.stream = stream
        self.root_meta = root_meta      # per root output: (shape, dtype) it must have
        self.variants: dict = {}        # (keep_graph, profiled) -> compiled function
        self.source: dict = {}          # same keys -> generated source (for the debug log)
        self.cuda_graph = None          # _CudaGraphRunner once captured
        self.cuda_graph_state = "untried"   # "untried", "ready", "unsupported: ..."
        self.runs = 0

    def __repr__(self):
        return f"<Program {len(self.steps)} steps, {self.n_regs} registers>"

    def listing(self) -> str:
        names = [info["cls"].__name__ for info in self.nodes_info]
        return "\n".join(f"{i:5d}  {s!r}" + (f"  # {names[s.node]}" if s.node >= 0 else "")
                         for i, s in enumerate(self.steps))


class _Unsupported(Exception):
    """The graph holds something compiled autograd does not handle; run it eagerly."""


def capture(nodes, key, root_edges):
    """Walk the graph as the engine would and record the program (before the passes).

    The walk follows the engine's schedule exactly (ready heap ordered by -sequence_nr), so
    gradient sums happen in the same order with the same operands as in eager mode. What the
    passes then move is recorded where a tracer naturally meets it: unpack hooks in a
    prologue (saved tensors are program inputs), tensor and node pre-hooks as soon as their
    node's gradients are complete, accumulate-grads and their post hooks at the end.
    """
    import heapq  # noqa: PLC0415

    index = {node: i for i, node in enumerate(nodes)}
    n = len(nodes)
    info = []
    deps = [0] * n
    stream = None
    for node in nodes:
        cls = node.__class__
        kind = _kind(cls)
        meta = node.input_metadata
        if kind == _ACC and node._extra is not None and _node_hook_sig(node._extra):
            raise _Unsupported("a node hook registered on an AccumulateGrad node")
        for m in meta:
            if stream is None:
                stream = m[3]
            elif m[3] is not stream and m[3] != stream:
                raise _Unsupported("nodes ran on different streams")
        edges = tuple(None if e is None else (index[e[0]], e[1]) for e in node.next_edges)
        for e in edges:
            if e is not None:
                deps[e[0]] += 1
        entry = {"cls": cls, "kind": kind, "meta": meta, "edges": edges,
                 "name": node.name(), "hooks": _node_hook_sig(node._extra) if node._extra else None}
        if kind == _OP:
            op = cls.op
            entry["op"] = op
            entry["attrs"] = bool(node._attrs)
            entry["saved"] = tuple(
                ("sv" if s._unpack_hook is None else "hooked") if s.__class__ is SavedVariable
                else ("none" if s is None else "value") for s in node._saved)
            entry["has_sv"] = any(k in ("sv", "hooked") for k in entry["saved"])
        elif kind == _ACC:
            extra = node.variable._extra
            entry["leaf_hooks"] = _leaf_hook_sig(extra) if extra else None
        info.append(entry)
    root_targets = []
    for node, nr in root_edges:
        j = index[node]
        root_targets.append((j, nr))
        deps[j] += 1
        meta = node.input_metadata
        for m in meta:
            if stream is None:
                stream = m[3]
    device = stream.device if stream is not None else None

    n_regs = [0]
    maybe_none = set()

    def reg(none=False):
        r = n_regs[0]
        n_regs[0] += 1
        if none:
            maybe_none.add(r)
        return r

    prologue, main, deferred = [], [], []
    buffers = [None] * n

    def contribute(j, slot, r):
        buf = buffers[j]
        if buf is None:
            buf = buffers[j] = [None] * len(info[j]["meta"])
        prev = buf[slot]
        if prev is None:
            buf[slot] = r
        else:
            out = reg(prev in maybe_none and r in maybe_none)
            main.append(Step("sum", j, (prev, r), (out,), slot))
            buf[slot] = out

    def on_ready(j):
        # Hooks on the node's incoming gradients, recorded as soon as they are complete.
        entry = info[j]
        buf = buffers[j]
        if entry["kind"] == _ACC:
            leaf = entry["leaf_hooks"]
            if leaf and leaf[0] and buf[0] is not None:
                r = reg(buf[0] in maybe_none)
                main.append(Step("tensor_pre_hook", j, (buf[0],), (r,), 0))
                buf[0] = r
            return
        hooks = entry["hooks"]
        if hooks is None:
            return
        pre, tensor_pre, retains, _post = hooks
        for nr, _count in tensor_pre:
            if buf[nr] is not None:
                r = reg(buf[nr] in maybe_none)
                main.append(Step("tensor_pre_hook", j, (buf[nr],), (r,), nr))
                buf[nr] = r
        for nr in retains:
            if buf[nr] is not None:
                main.append(Step("retain_grad", j, (buf[nr],), (), nr))
        if pre:
            outs = tuple(reg(True) for _ in buf)
            main.append(Step("pre_hook", j, tuple(buf), outs))
            buffers[j] = list(outs)

    def finish(j, outs):
        # Outputs flow along the node's edges in edge order, as the engine's loop does.
        for i, e in enumerate(info[j]["edges"]):
            if e is None:
                continue
            c, slot = e
            r = outs[i] if i < len(outs) else None
            if r is not None:
                contribute(c, slot, r)
            deps[c] -= 1
            if deps[c] == 0:
                on_ready(c)
                push(ready, (-nodes[c].sequence_nr, tiebreak(), c))

    ready = []
    push, pop = heapq.heappush, heapq.heappop
    counter = iter(range(1 << 62))
    tiebreak = counter.__next__

    # The root: the gradients given to backward, one register per root edge.
    root_regs = []
    for i, (j, slot) in enumerate(root_targets):
        r = reg()
        root_regs.append(r)
        main.append(Step("root", -1, (), (r,), i))
    root_meta = [info[j]["meta"][slot][:2] for j, slot in root_targets]
    for i, (j, slot) in enumerate(root_targets):
        contribute(j, slot, root_regs[i])
        deps[j] -= 1
        if deps[j] == 0:
            on_ready(j)
            push(ready, (-nodes[j].sequence_nr, tiebreak(), j))

    while ready:
        j = pop(ready)[2]
        entry = info[j]
        buf = buffers[j]
        kind = entry["kind"]
        if kind == _ACC:
            g = buf[0]
            deferred.append(Step("accumulate_grad", j, (g,) if g is not None else ()))
            leaf = entry["leaf_hooks"]
            if leaf and leaf[1] and g is not None:
                deferred.append(Step("post_acc_hook", j, (g,)))
            continue
        grads = tuple(buf)
        reads = grads
        if kind == _OP:
            unpacked = []
            for p, what in enumerate(entry["saved"]):
                if what == "hooked":
                    r = reg()
                    prologue.append(Step("unpack", j, (), (r,), p))
                    unpacked.append(r)
            reads = grads + tuple(unpacked)
            none_out = False
        else:
            none_out = True
        outs = tuple(reg(none_out) if e is not None else None for e in entry["edges"])
        main.append(Step("call", j, reads, tuple(r for r in outs if r is not None),
                         (len(grads), outs), pure=kind == _OP))
        if entry["hooks"] and entry["hooks"][3]:
            new = tuple(reg(True) if r is not None else None for r in outs)
            main.append(Step("post_hook", j, tuple(r for r in outs if r is not None) + grads,
                             tuple(r for r in new if r is not None), (outs, grads, new)))
            outs = new
        finish(j, outs)

    steps = prologue + main + [s for s in deferred if s.kind == "accumulate_grad"] + \
        [s for s in deferred if s.kind == "post_acc_hook"]
    return Program(key, info, steps, n_regs[0], maybe_none, device, stream, root_meta)


# --------------------------------------------------------------------------- passes
#
# Each pass takes the step list and returns a new one. They mirror the passes of PyTorch's
# compiled autograd: a tracer meets hooks and accumulations where it meets them; the passes
# move them to where the eager engine runs them.


def _last_writer(steps):
    pos = {}
    for i, s in enumerate(steps):
        for r in s.writes:
            pos[r] = i
    return pos


def _insert_after(steps, moved, anchor_of):
    """Rebuild ``steps`` without ``moved``, each moved step placed right after the step at
    position ``anchor_of(step)`` (-1: at the very start); moved steps keep their order."""
    moved_ids = {id(s) for s in moved}
    after: dict = {}
    for s in moved:
        after.setdefault(anchor_of(s), []).append(s)
    out = list(after.get(-1, ()))
    for i, s in enumerate(steps):
        if id(s) not in moved_ids:
            out.append(s)
        out.extend(after.get(i, ()))
    return out


def reorder_accumulate_grad(steps):
    """Accumulate-grad as soon as its gradient is ready: right after the last write of the
    register it reads (the engine pops AccumulateGrad first among ready nodes)."""
    moved = [s for s in steps if s.kind == "accumulate_grad"]
    rest = [s for s in steps if s.kind != "accumulate_grad"]
    pos = _last_writer(rest)

    def ready_at(r, node):
        # The leaf's own tensor hooks run when the engine pops it: look through them to
        # the write that made the gradient complete.
        i = pos[r]
        while rest[i].kind in _PRE_KINDS and rest[i].node == node:
            i = pos[rest[i].reads[0]]
        return i

    return _insert_after(rest + moved, moved,
                         lambda s: max((ready_at(r, s.node) for r in s.reads), default=-1))


def reorder_post_acc_grad_hooks(steps):
    """Post-accumulate-grad hooks right after the accumulate-grad of their leaf."""
    moved = [s for s in steps if s.kind == "post_acc_hook"]
    acc_at = {s.node: i for i, s in enumerate(steps) if s.kind == "accumulate_grad"}
    return _insert_after(steps, moved, lambda s: acc_at[s.node])


_PRE_KINDS = ("tensor_pre_hook", "retain_grad", "pre_hook")


def reorder_pre_hooks(steps):
    """Tensor pre-hooks, retain_grad and node pre-hooks right before the node they belong to
    (its call, or its accumulate-grad), where the engine runs them when it pops the node."""
    moved = [s for s in steps if s.kind in _PRE_KINDS]
    rest = [s for s in steps if s.kind not in _PRE_KINDS]
    target = {}
    for i, s in enumerate(rest):
        if s.kind in ("call", "accumulate_grad"):
            target[s.node] = i
    return _insert_after(rest, moved, lambda s: target[s.node] - 1)


def delay_unpack_hooks(steps):
    """Saved-tensor unpack hooks just before their first use (not in the prologue)."""
    moved = [s for s in steps if s.kind == "unpack"]
    rest = [s for s in steps if s.kind != "unpack"]
    first = {}
    for i, s in enumerate(rest):
        for r in s.reads:
            first.setdefault(r, i)
    return _insert_after(rest, moved, lambda s: first.get(s.writes[0], len(rest)) - 1)


def dead_step_elimination(steps):
    """Drop pure steps whose results nobody reads (a dead node call keeps its release)."""
    live = set()
    out = []
    for s in reversed(steps):
        if not s.pure or any(r in live for r in s.writes):
            out.append(s)
            live.update(r for r in s.reads if r is not None)
        elif s.kind == "call":
            out.append(Step("release", s.node))
    out.reverse()
    return out


PASSES = (reorder_accumulate_grad, reorder_post_acc_grad_hooks, reorder_pre_hooks,
          delay_unpack_hooks, dead_step_elimination)


def run_passes(program: Program) -> Program:
    steps = program.steps
    for p in PASSES:
        steps = p(steps)
    program.steps = steps
    return program


# --------------------------------------------------------------------------- run-time helpers
# Called by the generated code for the rare steps; the common ones are inlined.


class _Task:
    """What the engine's hook helpers read of a graph task."""

    __slots__ = ()
    create_graph = False
    accumulate = True
    accumulate_into = None


_TASK = _Task()


def _add(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def _fix(g, shape, dtype, name, i):
    """The engine's output validation for one gradient whose shape or dtype is off."""
    if g.shape != shape:
        if not _engine._expandable(shape, g.shape):
            raise RuntimeError(
                f"function {name} returned an invalid gradient at index {i} - got "
                f"{list(g.shape)} but expected shape compatible with {list(shape)}")
        g = sum_to_shape(_engine._xp_of(g), g, shape)
    if g.dtype != dtype:
        g = g.astype(dtype)
    return g


def _tensor_hooks(table, g, dev, name):
    if g is None or not table:
        return g
    t = Tensor._make(g, False, None, 0, [0], dev)
    for fn in tuple(table.values()):
        new = fn(t)
        if new is not None:
            t = _engine._check_hook_result(new, t, f"hook registered on a tensor of {name}")
    return t.data


def _node_tensor_hooks(node, nr, g):
    return _tensor_hooks(node._extra.tensor_pre_hooks.get(nr), g, node.input_metadata[nr][2],
                         node.name())


def _leaf_tensor_hooks(node, g):
    extra = node.variable._extra
    return _tensor_hooks(extra.get("hooks") if extra else None, g, node.input_metadata[0][2],
                         node.name())


def _retain(node, nr, g):
    if g is not None:
        t = node._extra.retains_grad_hooks.get(nr)
        if t is not None:
            _engine._accumulate_into_tensor(t, g, False)


def _pre(node, grads):
    if not node._extra or not node._extra.pre_hooks:
        return grads
    return _engine._node_pre_hooks(_TASK, node, grads)


def _post(node, outs, grads):
    if not node._extra or not node._extra.post_hooks:
        return outs
    return _engine._post_hooks(_TASK, node, list(outs), grads)


def _generic(node, grads, F):
    """Run a node that is not a table op (a custom Function...): apply, then validate."""
    outs = node.apply(grads, F)
    n = len(node.next_edges)
    if outs:
        outs = _engine.validate_outputs(_TASK, node, outs)
        return outs
    return [None] * n


def _accumulate(node, g):
    if g is not None:
        _engine._accumulate_into_tensor(node.variable, g, False)


def _post_acc(node, g):
    if g is not None:
        var = node.variable
        extra = var._extra
        hooks = extra.get("post_acc_hooks") if extra else None
        if hooks:
            for fn in tuple(hooks.values()):
                fn(var)


def _unpack(node, p):
    return node._saved[p]._run_unpack_hook(node).data


def _multi_out(out):
    if out is not None and out.__class__ is not tuple:
        out = tuple(out)
    return out


# --------------------------------------------------------------------------- code generation


def _liveness(steps):
    """For each step, the registers whose last use it is (to free them right after)."""
    last = {}
    for i, s in enumerate(steps):
        for r in s.writes:
            last[r] = i
        for r in s.reads:
            if r is not None:
                last[r] = i
    frees = [[] for _ in steps]
    for r, i in last.items():
        frees[i].append(r)
    return frees


def generate(program: Program, keep_graph: bool, profiled: bool, graph_mode: bool = False):
    """Straight-line Python for the program; returns (source, namespace).

    The function is ``run(N, G)`` with ``N`` the new graph's nodes in walk order and ``G``
    the root gradients. With ``graph_mode`` (CUDA graph capture) it is ``run(N, G, I, O, K)``:
    saved arrays come from the static inputs ``I``, the gradients to accumulate go to ``O``
    and every register is kept alive in ``K`` (the captured graph owns that memory).
    """
    info = program.nodes_info
    ns = {"_add": _add, "_fix": _fix, "_generic": _generic, "_pre": _pre, "_post": _post,
          "_retain": _retain, "_ntens": _node_tensor_hooks, "_ltens": _leaf_tensor_hooks,
          "_acc": _accumulate, "_pacc": _post_acc, "_unpack": _unpack,
          "_fill": _fill_missing, "_multi": _multi_out, "_begin": _rf.begin, "_end": _rf.end,
          "_BW": _BACKWARD, "F": ArrayF(program.device.xp) if program.device else None,
          "_STREAM": program.stream}
    lines = ["def run(N, G, I=None, O=None, K=None):" if graph_mode else "def run(N, G):"]
    emit = lines.append
    maybe_none = program.maybe_none
    frees = _liveness(program.steps) if not graph_mode else None
    consts: dict = {}
    n_inputs = [0]

    def const(value, prefix):
        try:
            ident = (prefix, value, type(value))   # equal shapes/dtypes share one name
            hash(ident)
        except TypeError:
            ident = (prefix, id(value))
        name = consts.get(ident)
        if name is None:
            name = f"{prefix}{len(consts)}"
            consts[ident] = name
            ns[name] = value
        return name

    # Registers become local names; a name is reused once its register is dead, so the
    # function has few locals (Python compiles that much faster).
    names: dict = {}
    pool: list = []

    def v(r):
        if r is None:
            return "None"
        name = names.get(r)
        if name is None:
            name = names[r] = pool.pop() if pool else f"v{len(names)}"
        return name

    def validate(r, shape, dtype, name, i, indent="    "):
        s, d = const(shape, "S"), const(dtype, "D")
        guard = f"{v(r)} is not None and (" if r in maybe_none else "("
        emit(f"{indent}if {guard}{v(r)}.shape != {s} or {v(r)}.dtype != {d}): "
             f"{v(r)} = _fix({v(r)}, {s}, {d}, {name!r}, {i})")

    def keep(regs, indent="    "):
        if graph_mode and regs:
            emit(f"{indent}K.extend(({', '.join(v(r) for r in regs)},))")

    def begin_record(j, indent="    "):
        if not profiled:
            return indent
        entry = info[j]
        meta = entry["meta"]
        dev = str(meta[0][2]) if meta else "cpu"
        st = const(meta[0][3], "T") if meta else "None"
        emit(f"{indent}_r = _begin(_BW, {entry['name']!r}, _n.sequence_nr, _n.thread_id, "
             f"None, {dev!r}, {st})")
        emit(f"{indent}try:")
        return indent + "    "

    def end_record(indent="    "):
        if profiled:
            emit(f"{indent}finally:")
            emit(f"{indent}    _end(_r)")

    current = -1
    for k, s in enumerate(program.steps):
        kind = s.kind
        j = s.node
        if j >= 0 and j != current and kind != "sum":
            emit(f"    _n = N[{j}]  # {info[j]['name']}")
            current = j
        if kind == "root":
            r = s.writes[0]
            emit(f"    {v(r)} = G[{s.arg}]")
            shape, dtype = program.root_meta[s.arg]
            validate(r, shape, dtype, "GraphRoot", s.arg)
        elif kind == "sum":
            a, b = s.reads
            out = s.writes[0]
            if a in maybe_none or b in maybe_none:
                emit(f"    {v(out)} = _add({v(a)}, {v(b)})")
            else:
                emit(f"    {v(out)} = {v(a)} + {v(b)}")
        elif kind == "unpack":
            if graph_mode:
                raise _Unsupported("an unpack hook")
            emit(f"    {v(s.writes[0])} = _unpack(_n, {s.arg})")
        elif kind == "tensor_pre_hook":
            if graph_mode:
                raise _Unsupported("a tensor hook")
            fn = "_ltens(_n, " if info[j]["kind"] == _ACC else f"_ntens(_n, {s.arg}, "
            emit(f"    {v(s.writes[0])} = {fn}{v(s.reads[0])})")
        elif kind == "retain_grad":
            if graph_mode:
                raise _Unsupported("retain_grad")
            emit(f"    _retain(_n, {s.arg}, {v(s.reads[0])})")
        elif kind == "pre_hook":
            if graph_mode:
                raise _Unsupported("a node pre-hook")
            lhs = ", ".join(v(r) for r in s.writes)
            emit(f"    {lhs}, = _pre(_n, [{', '.join(v(r) for r in s.reads)}])")
        elif kind == "post_hook":
            if graph_mode:
                raise _Unsupported("a node post-hook")
            outs, grads, new = s.arg
            lhs = ", ".join("_" if r is None else v(r) for r in new)
            emit(f"    {lhs}, = _post(_n, [{', '.join(v(r) for r in outs)}], "
                 f"[{', '.join(v(r) for r in grads)}])")
        elif kind == "call":
            _gen_call(program, s, emit, v, const, validate, keep, begin_record, end_record,
                      keep_graph, graph_mode, n_inputs)
        elif kind == "release":
            if not keep_graph and not graph_mode:
                emit("    _n.release_variables()")
        elif kind == "accumulate_grad":
            g = v(s.reads[0]) if s.reads else "None"
            if graph_mode:
                emit(f"    O.append({g})")
            else:
                ind = begin_record(j)
                emit(f"{ind}_acc(_n, {g})")
                end_record()
        elif kind == "post_acc_hook":
            if graph_mode:
                raise _Unsupported("a post-accumulate-grad hook")
            emit(f"    _pacc(_n, {v(s.reads[0])})")
        else:  # pragma: no cover - every kind is handled above
            raise AssertionError(kind)
        if frees is not None and frees[k]:
            dead = [v(r) for r in frees[k]]
            emit(f"    del {', '.join(dead)}")
            pool.extend(dead)
            for r in frees[k]:
                del names[r]
    emit("    return None")
    return "\n".join(lines) + "\n", ns, n_inputs[0]


def _gen_call(program, s, emit, v, const, validate, keep, begin_record, end_record,
              keep_graph, graph_mode, n_inputs):
    j = s.node
    entry = program.nodes_info[j]
    n_grads, outs = s.arg
    grads = s.reads[:n_grads]
    hooked = list(s.reads[n_grads:])
    name = entry["name"]
    edges = entry["edges"]
    if entry["kind"] == _GENERIC:
        if graph_mode:
            raise _Unsupported(f"a custom node ({name})")
        ind = begin_record(j)
        lhs = ", ".join("_" if r is None else v(r) for r in outs)
        emit(f"{ind}{lhs}, = _generic(_n, [{', '.join(v(r) for r in grads)}], F)")
        end_record()
        if not keep_graph:
            emit("    _n.release_variables()")
        return
    op = entry["op"]
    saved = entry["saved"]
    # Arguments of every rule: out, then the inputs (a saved tensor is unpacked once).
    ind = begin_record(j)
    if any(what in ("value", "sv") for what in saved):
        emit(f"{ind}_s = _n._saved")
    args = []
    for p, what in enumerate(saved):
        if what == "none":
            args.append("None")
        elif what == "value":
            args.append(f"_s[{p}]")
        elif what == "hooked":
            args.append(v(hooked.pop(0)))
        elif graph_mode:
            args.append(f"I[{n_inputs[0]}]")
            n_inputs[0] += 1
        else:
            emit(f"{ind}a{p} = _s[{p}].unpack_data(_n)")
            args.append(f"a{p}")
    if op.nout == 1:
        g = v(grads[0])
    else:
        emit(f"{ind}_g = _fill(_n, ({', '.join(v(r) for r in grads)},), F)")
        g = "_g"
        if saved and saved[0] != "none":   # a multi-output op saves a tuple of its outputs
            emit(f"{ind}_o0 = _multi({args[0]})")
            args[0] = "_o0"
    kw = ", **_n._attrs" if entry["attrs"] else ""
    argstr = ", ".join(args)
    for i, e in enumerate(edges):
        if e is None:
            continue
        rule = op.vjp[i]
        r = outs[i]
        if rule is None:
            emit(f"{ind}{v(r)} = None")
            continue
        emit(f"{ind}{v(r)} = {const(rule, 'R')}(F, {g}, {argstr}{kw})")
        meta = program.nodes_info[e[0]]["meta"][e[1]]
        validate(r, meta[0], meta[1], name, i, ind)
    end_record()
    keep([r for r in outs if r is not None])
    temps = [a for a in args if a.startswith("a")]
    if temps:
        emit(f"    del {', '.join(temps)}")
    if not keep_graph and not graph_mode:
        if entry["has_sv"]:
            emit("    _n.release_variables()")
        else:
            emit("    _n._saved = None")


def _compile(program: Program, keep_graph: bool, profiled: bool):
    variant = (keep_graph, profiled)
    fn = program.variants.get(variant)
    if fn is None:
        src, ns, _ = generate(program, keep_graph, profiled)
        code = compile(src, f"<compiled_autograd {len(program.steps)} steps>", "exec")
        exec(code, ns)  # noqa: S102 - our own generated code
        fn = program.variants[variant] = ns["run"]
        program.source[variant] = src
        if log.isEnabledFor(logging.DEBUG):
            log.debug("compiled autograd program (keep_graph=%s, profiled=%s), %d steps:\n%s",
                      keep_graph, profiled, len(program.steps), program.listing())
    return fn


# --------------------------------------------------------------------------- CUDA graphs


class _CudaGraphRunner:
    """One CUDA graph of a program: static inputs, the graph, static outputs.

    Saved arrays are copied into the static inputs before each launch (their addresses are
    baked into the graph); the gradients for the leaves come out in static buffers and are
    accumulated into ``.grad`` after the launch. Non-array saved values (Python scalars) and
    op attributes are baked into the kernels, so they are compared before each launch.
    """

    def __init__(self, program, nodes, grads):
        src, ns, n_inputs = generate(program, True, False, graph_mode=True)
        exec(compile(src, "<compiled_autograd cuda graph>", "exec"), ns)  # noqa: S102
        self.body = ns["run"]
        self.program = program
        self.acc_nodes = [s.node for s in program.steps if s.kind == "accumulate_grad"]
        inputs, consts = _gather(program, nodes)
        if len(inputs) != n_inputs:  # pragma: no cover - generator and gather disagree
            raise _Unsupported("internal: input count mismatch")
        self.consts = consts
        # Capture on a side stream (the legacy default stream cannot be captured), ordered
        # against the program's stream with events.
        self.main = program.stream
        self.side = side = Stream(program.device)
        side.wait_event(self.main.record_event())
        with side:
            # Static buffers: copies of this run's inputs, kept for the graph's lifetime.
            self.static_in = [x.copy() for x in inputs]
            self.static_grads = [g.copy() for g in grads]
            # Warm-up on the side stream so its memory pool holds the blocks the capture
            # will ask for (no cudaMalloc may happen while capturing).
            self.body(nodes, self.static_grads, self.static_in, [], [])
        side.synchronize()
        self.keep = []
        self.outputs = []
        native = side.native
        native.begin_capture()
        try:
            with side:
                self.body(nodes, self.static_grads, self.static_in, self.outputs, self.keep)
        except BaseException:
            try:
                native.end_capture()
            except Exception:  # noqa: BLE001 - the capture is already broken
                pass
            raise
        self.graph = native.end_capture()

    def run(self, nodes, grads, keep_graph):
        inputs, consts = _gather(self.program, nodes)
        if consts != self.consts:
            return False
        side = self.side
        side.wait_event(self.main.record_event())
        with side:
            for dst, src in zip(self.static_grads, grads):
                dst[...] = src
            for dst, src in zip(self.static_in, inputs):
                dst[...] = src
            self.graph.launch(side.native)
        self.main.wait_event(side.record_event())
        with self.main:
            for j, g in zip(self.acc_nodes, self.outputs):
                _accumulate(nodes[j], g)
        if not keep_graph:
            for node in nodes:
                node.release_variables()
        return True


def _gather(program, nodes):
    """The saved arrays of every op node (graph inputs) and the values baked into kernels."""
    inputs, consts = [], []
    for s in program.steps:
        if s.kind != "call":
            continue
        node = nodes[s.node]
        entry = program.nodes_info[s.node]
        for p, what in enumerate(entry["saved"]):
            if what == "sv":
                inputs.append(node._saved[p].unpack_data(node))
            elif what == "value":
                value = node._saved[p]
                # A Meta (shape and dtype of an input the rule does not read) has no value
                # equality; compare what it stands for.
                consts.append((value.shape, value.dtype) if type(value) is Meta else value)
        if entry["attrs"]:
            consts.append(node._attrs)
    return inputs, consts


def _try_cuda_graph(program, nodes, grads, keep_graph) -> bool:
    """Replay with the program's CUDA graph (capturing it on first use); False: plain replay."""
    state = program.cuda_graph_state
    if state.startswith("unsupported"):
        return False
    try:
        if program.cuda_graph is None:
            program.cuda_graph = _CudaGraphRunner(program, nodes, grads)
            program.cuda_graph_state = "ready"
            _stats["cudagraph_captures"] += 1
            log.debug("captured a CUDA graph of %d steps", len(program.steps))
        ok = program.cuda_graph.run(nodes, grads, keep_graph)
    except _Unsupported as exc:
        program.cuda_graph_state = f"unsupported: {exc}"
        _stats["cudagraph_fallbacks"] += 1
        log.debug("CUDA graph not used, plain replay instead: the program holds %s", exc)
        return False
    except Exception as exc:  # noqa: BLE001 - e.g. a host sync inside the capture
        program.cuda_graph = None
        program.cuda_graph_state = f"unsupported: capture failed ({type(exc).__name__}: {exc})"
        _stats["cudagraph_fallbacks"] += 1
        log.debug("CUDA graph capture failed (%s: %s); plain replay instead",
                  type(exc).__name__, exc)
        return False
    if not ok:
        log.debug("CUDA graph not replayed: a scalar or attribute baked into it changed; "
                  "plain replay")
        _stats["cudagraph_fallbacks"] += 1
        return False
    _stats["cudagraph_replays"] += 1
    return True


# --------------------------------------------------------------------------- cache and entry

_cache: dict = {}        # (number of nodes, key length) -> [Program, ...] most recent first
_MAX_PER_BUCKET = 8


def _lookup(nodes, key):
    bucket = _cache.get((len(nodes), len(key)))
    if bucket:
        for i, prog in enumerate(bucket):
            if prog.key == key:
                if i:
                    bucket.insert(0, bucket.pop(i))
                return prog, None
    # A miss: say why, against the most recent program of any shape.
    reason = "first backward of this graph structure"
    prev = bucket[0] if bucket else _last["program"]
    if prev is not None:
        try:
            reason = explain_miss(prev.key, key)
        except Exception as exc:  # noqa: BLE001 - an explanation must never fail backward
            reason = f"structure changed ({exc})"
    return None, reason


def run_backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
                 inputs=None, cuda_graphs=None) -> None:
    """``backward`` through a compiled program; same arguments as :func:`autograd.backward`.

    Raises:
        NotImplementedError: for ``create_graph=True`` or ``inputs=`` (not supported).
    """
    if create_graph:
        raise NotImplementedError(
            "compiled autograd does not support create_graph=True (a differentiable "
            "backward); run this backward eagerly (outside compiled_autograd.enable())")
    if inputs is not None:
        raise NotImplementedError(
            "compiled autograd does not support backward(inputs=...); run this backward "
            "eagerly (outside compiled_autograd.enable())")
    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    if grad_tensors is not None:
        grad_tensors = [grad_tensors] if isinstance(grad_tensors, Tensor) else list(grad_tensors)
        if len(grad_tensors) != len(tensors):
            raise RuntimeError(f"got {len(grad_tensors)} gradients for {len(tensors)} tensors")
    keep = bool(retain_graph)
    edges, grads = _engine._make_root_edges(tensors, grad_tensors, False)
    if cuda_graphs is None:
        cuda_graphs = _cuda_graphs[-1]
    if _THREAD.anomaly:
        return _eager(edges, grads, keep, "anomaly detection is on")
    with _lock:
        nodes, key = _walk(edges)
        prog, reason = _lookup(nodes, key)
        if prog is None:
            _stats["misses"] += 1
            _last["miss_reason"] = reason
            log.debug("cache miss: %s", reason)
            try:
                prog = run_passes(capture(nodes, key, edges))
            except _Unsupported as exc:
                return _eager(edges, grads, keep, str(exc))
            _stats["captures"] += 1
            bucket = _cache.setdefault((len(nodes), len(key)), [])
            bucket.insert(0, prog)
            del bucket[_MAX_PER_BUCKET:]
        else:
            _stats["hits"] += 1
        _last["program"] = prog
        profiled = _RF.on
        fn = None
        use_graph = (cuda_graphs and prog.device is not None and prog.device.type == "cuda"
                     and prog.runs > 0)
        if not use_graph:
            fn = _compile(prog, keep, profiled)
        prog.runs += 1
    _execute(prog, fn, nodes, grads, keep, profiled, use_graph)


def _execute(prog, fn, nodes, grads, keep, profiled, use_graph) -> None:
    depth = _THREAD.backward_depth
    if depth >= _engine.MAX_REENTRANT_DEPTH:
        raise RuntimeError(
            f"backward: maximum reentrant backward depth ({_engine.MAX_REENTRANT_DEPTH}) "
            "exceeded; a custom Function's backward calls backward recursively without end")
    _THREAD.backward_depth = depth + 1
    lock = _engine._serial_lock if not _engine._multithreading else None
    if lock is not None:
        lock.acquire()
    rec = None
    try:
        if use_graph:
            if profiled:
                # Per-node times do not exist inside a CUDA graph: one range, whose device
                # time (CUDA events on the stream) is the graph's.
                rec = _rf.begin(_USER, "CompiledAutograd (CUDA graph)", -1, 0, None,
                                str(prog.device), prog.stream)
            if _try_cuda_graph(prog, nodes, grads, keep):
                return
            if rec is not None:
                _rf.end(rec)
                rec = None
            fn = _compile(prog, keep, profiled)
        if profiled:
            rec = _rf.begin(_USER, "CompiledAutograd", -1, 0, None,
                            str(prog.device) if prog.device else "cpu", prog.stream)
        stream = prog.stream
        if stream is not None and stream.device.type == "cuda" and \
                stream != current_stream(stream.device):
            with stream:
                fn(nodes, grads)
        else:
            fn(nodes, grads)
    finally:
        if rec is not None:
            _rf.end(rec)
        _THREAD.backward_depth = depth
        if lock is not None:
            lock.release()


def _eager(edges, grads, keep, why) -> None:
    _stats["eager_fallbacks"] += 1
    _last["fallback_reason"] = why
    log.debug("running this backward eagerly: %s", why)
    task = _engine.GraphTask(keep, False, accumulate=True)
    _engine.execute(task, edges, grads)


# Keep GraphRoot importable from here for readers of the program listing.
_ = GraphRoot
