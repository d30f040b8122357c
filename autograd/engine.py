"""The backward engine: a graph task with dependency counts, input buffers and a ready queue.

``backward`` and ``grad`` build a :class:`GraphTask` from the roots, count for every reachable
node how many edges point at it (:func:`_compute_dependencies`; with inputs asked for, only
nodes that lead to one, pruned by ``topological_nr``), and run nodes from a
:class:`ReadyQueue` keyed by ``-sequence_nr``: among the nodes whose inputs are complete, the
one created last runs first, and AccumulateGrad (the highest sequence_nr) before everything
else. Everything is iterative, so a graph 100,000 nodes deep needs no recursion.

The loop (:func:`_run`) reads like PyTorch's evaluate_function: tensor pre-hooks on the
incoming gradients, then :func:`call_function` (node pre-hooks, the node, post-hooks), then
per next edge the gradient validated and conformed (PyTorch's validate_outputs), the
dependency count, the input buffer and the ready queue. How a node is called is one parameter
(:data:`EAGER`): compiled autograd runs this same loop with a recorder in its place.

One deviation from PyTorch, for speed: validate_outputs runs inside call_function there; here
the edge loop checks each gradient as it passes it on, where the edge and the metadata it is
checked against are already in hand. A separate pass over the outputs measured 0.25-0.4 us per
node, about 15% of a backward node on a chain of small ops. The check, its conform and its
errors are the same; call_function still validates first when post-hooks run, so that they
see conformed gradients, as in PyTorch.

A normal backward flows raw arrays between nodes and computes with ``ArrayF``; with
``create_graph=True`` it flows tensors and computes with ``TensorF``, so the gradients have
history of their own.
"""
from __future__ import annotations

import heapq
import itertools
import sys
import threading

import numpy

from . import memory as _memory
from . import record_function as _rf
from .anomaly_mode import annotate, check_nan
from .backend import array_module, current_stream
from .dispatch import OPS, ArrayF, TensorF, _gradient_edge, apply_op
from .grad_mode import STATE as _THREAD, enable_grad, no_grad
from .node import GRAPH_EPOCH, AccumulateGrad, GraphRoot
from .ops.shape import sum_to_shape
from . import _tensor
from ._tensor import Tensor

__all__ = ["backward", "grad", "GraphTask"]

_RF = _rf.STATE
_BACKWARD = int(_rf.RecordScope.BACKWARD_FUNCTION)
MAX_REENTRANT_DEPTH = 60
# NumPy's scalar types (what its ufuncs return for 0-d arrays): never a gradient buffer.
_NUMPY_SCALARS = frozenset(t for t in numpy.sctypeDict.values() if issubclass(t, numpy.generic))


def _array(a):
    """``a``, or the 0-d array of a NumPy scalar (the sum of two 0-d arrays is one)."""
    return numpy.asarray(a) if a.__class__ in _NUMPY_SCALARS else a


# set_multithreading_enabled(False) serializes backward calls from different threads.
_multithreading = True
_serial_lock = threading.RLock()

# Gradients consumed on a stream other than the one that produced them, kept alive until an
# event recorded on the consuming stream has completed (CuPy has no record_stream).
_keep_alive: list = []
_keep_alive_lock = threading.Lock()


def set_multithreading_enabled(mode: bool) -> None:
    """When False, backward calls from different threads run one at a time."""
    global _multithreading
    _multithreading = bool(mode)


def is_multithreading_enabled() -> bool:
    return _multithreading


class GraphTask:
    """One call of backward/grad: what to run, what to keep, and where results go."""

    __slots__ = ("keep_graph", "create_graph", "dependencies", "needed", "captures",
                 "min_topo_nr", "accumulate", "accumulate_into", "buffers", "waits",
                 "keep_alive", "ops", "F", "F_dev")

    def __init__(self, keep_graph: bool, create_graph: bool, accumulate: bool):
        self.keep_graph = keep_graph
        self.create_graph = create_graph
        self.accumulate = accumulate          # False for autograd.grad: never touch .grad
        self.dependencies: dict = {}          # node -> edges into it not yet passed on
        self.needed = None                    # set of nodes to run, when inputs are given
        self.captures: dict = {}              # (node, input_nr) -> slot index for grad()
        self.min_topo_nr = 0                  # nodes below it cannot lead to an input
        self.accumulate_into = None           # backward(inputs=...): leaves allowed to change
        # Input buffers of the nodes still waiting for gradients; a node takes its finished
        # buffer into the ready queue, so it leaves this dict when its count reaches zero.
        self.buffers: dict = {}
        self.waits: dict = {}                 # node -> [(stream, event, grad, slot)] to wait for
        self.keep_alive: list = []            # (consuming stream, gradients) across streams
        self.ops = _THREAD.ops                # the flags of the thread that runs the task
        # What the rules compute with (:func:`namespace`), kept for the device it was last
        # asked for: in a backward on one device that is one identity test per node.
        self.F = self.F_dev = None


# The compiled_autograd module once loaded (it imports this module, and puts itself here:
# enable() can only have been called after that).
COMPILED_AUTOGRAD: list = [None]


def make_root_edges(tensors, grad_tensors, create_graph):
    """Validate roots and their gradients; returns (edges, grads)."""
    edges, grads = [], []
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"backward: element {i} of tensors is a {type(t).__name__}, not a Tensor")
        if not t.requires_grad:
            raise RuntimeError(
                f"element {i} of tensors does not require grad and does not have a grad_fn")
        g = grad_tensors[i] if grad_tensors is not None else None
        if g is None:   # the implicit 1 of a scalar output: its shape and device by making
            data = t._data
            if data.size != 1:
                raise RuntimeError(
                    f"grad can be implicitly created only for scalar outputs; element {i} has "
                    f"shape {list(t.shape)}: pass gradient= with that shape")
            # empty + fill: xp.ones is a Python function costing 2.5x this, once per backward
            ones = t._device.xp.empty(data.shape, data.dtype)
            ones.fill(1)
            edges.append(_gradient_edge(t))
            grads.append(Tensor._make(ones, False, None, 0, [0], t._device) if create_graph
                         else ones)
            continue
        if not isinstance(g, Tensor):
            g = Tensor._make(t._device.xp.asarray(g, dtype=t._data.dtype), False, None, 0, [0],
                             t._device)
        if g.shape != t.shape:
            raise RuntimeError(
                f"mismatch in shape: grad_output[{i}] has a shape of {list(g.shape)} and "
                f"output[{i}] has a shape of {list(t.shape)}")
        if g._device is not t._device:
            raise RuntimeError(f"grad_output[{i}] is on {g._device} but output[{i}] is on {t._device}")
        edges.append(_gradient_edge(t))
        grads.append(g if create_graph else g._data)
    return edges, grads


def _start_task(roots, root_grads, retain_graph, create_graph, accumulate):
    """The root edges, their gradients and a new GraphTask for backward() or grad()."""
    roots = [roots] if isinstance(roots, Tensor) else list(roots)
    if root_grads is not None:
        root_grads = [root_grads] if isinstance(root_grads, Tensor) else list(root_grads)
        if len(root_grads) != len(roots):
            raise RuntimeError(f"got {len(root_grads)} gradients for {len(roots)} outputs")
    keep = create_graph if retain_graph is None else bool(retain_graph)
    edges, grads = make_root_edges(roots, root_grads, create_graph)
    return edges, grads, GraphTask(keep, create_graph, accumulate)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Compute the gradients of ``tensors`` and accumulate them into the leaves' ``.grad``.

    Args:
        tensors: the outputs to differentiate (a Tensor or a sequence).
        grad_tensors: the gradient w.r.t. each output (None allowed for scalar outputs).
        retain_graph: keep saved tensors for another backward (default: ``create_graph``).
        create_graph: make the computed gradients differentiable.
        inputs: accumulate only into these tensors' ``.grad``.
    """
    # Compiled autograd (issue 9): inside compiled_autograd.enable(), delegate.
    ca = COMPILED_AUTOGRAD[0]
    if ca is not None and ca.enabled_depth:
        return ca.run_backward(tensors, grad_tensors, retain_graph, create_graph, inputs)
    edges, grads, task = _start_task(tensors, grad_tensors, retain_graph, create_graph,
                                     accumulate=True)
    if inputs is not None:
        inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
        if not inputs:
            raise RuntimeError("backward: inputs= was given but is empty")
        _set_inputs(task, inputs, "backward")
        task.accumulate_into = {id(t) for t in inputs}
    results = execute(task, edges, grads)
    # Non-leaf tensors named in inputs= get their gradient like retain_grad() would.
    if inputs is not None:
        for t, g in zip(inputs, results):
            if t.grad_fn is not None and g is not None:
                _accumulate_into_tensor(t, g, create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=False, materialize_grads=False):
    """Gradients of ``outputs`` w.r.t. ``inputs``, returned rather than accumulated.

    Only the nodes on a path from the outputs to the inputs run, and no ``.grad`` changes.
    """
    single = isinstance(inputs, Tensor)
    inputs = [inputs] if single else list(inputs)
    edges, grads, task = _start_task(outputs, grad_outputs, retain_graph, create_graph,
                                     accumulate=False)
    _set_inputs(task, inputs, "grad")
    results = execute(task, edges, grads)
    out = []
    for i, (t, g) in enumerate(zip(inputs, results)):
        if g is None:
            if materialize_grads:
                g = t._device.xp.zeros(t._data.shape, t._data.dtype)
            elif not allow_unused:
                raise RuntimeError(
                    f"one of the differentiated Tensors (input {i}, shape {list(t.shape)}) "
                    "appears to not have been used in the graph; set allow_unused=True if "
                    "this is the desired behavior")
        out.append(_as_tensor(g, t, create_graph) if g is not None else None)
    return tuple(out)


def _as_tensor(g, like, create_graph):
    if isinstance(g, Tensor):
        return g
    return Tensor._make(_array(g), False, None, 0, [0], like._device)


def _set_inputs(task, inputs, what):
    """Mark what grad()/backward(inputs=) needs: capture slots and the nodes on the way."""
    for i, t in enumerate(inputs):
        if not isinstance(t, Tensor):
            raise TypeError(f"{what}: input {i} is a {type(t).__name__}, not a Tensor")
        if not t.requires_grad:
            raise RuntimeError(
                f"{what}: input {i} (shape {list(t.shape)}) does not require grad")
        task.captures.setdefault(_gradient_edge(t), []).append(i)
    task.needed = set()
    task.min_topo_nr = min(node.topological_nr for node, _ in task.captures)


def _compute_dependencies(task, root) -> list:
    """Count incoming edges per reachable node; with inputs, keep only nodes that lead to one.

    ``root`` is the task's own GraphRoot, which no edge points at. When only some inputs are
    asked for (``grad``, ``backward(inputs=)``), a node whose ``topological_nr`` is below the
    smallest input node's cannot lead to any of them (every path down from it is shorter), so
    its children are not walked at all: PyTorch prunes with ``min_topo_nr`` the same way.

    Returns:
        The nodes walked, each once (a pruned node is among them, its children are not).
    """
    deps = task.dependencies
    min_topo = task.min_topo_nr
    # Every node reached through an edge gets a count, so the counts double as the "seen"
    # set: a child is new exactly when it has none yet. New nodes are appended to the list
    # being walked, so it ends holding every reachable node once.
    nodes = [root]
    append = nodes.append
    for node in nodes:
        if node.topological_nr < min_topo:
            continue
        for edge in node.next_edges:
            if edge is not None:
                child = edge[0]
                n = deps.get(child)
                if n is None:
                    deps[child] = 1
                    append(child)
                else:
                    deps[child] = n + 1
    if task.needed is None:
        return nodes
    targets = {edge[0] for edge in task.captures}
    needed = task.needed
    # A node is needed when it is a target or any child is needed: children first, so walk
    # the nodes in reverse topological order (a node before every node it points at).
    for node in _reverse_topological(nodes):
        if node in targets or any(e is not None and e[0] in needed for e in node.next_edges):
            needed.add(node)
    # Dependencies count only edges between needed nodes.
    task.dependencies = {}
    for node in needed:
        for edge in node.next_edges:
            if edge is not None and edge[0] in needed:
                task.dependencies[edge[0]] = task.dependencies.get(edge[0], 0) + 1
    return nodes


def _reverse_topological(nodes):
    """Nodes ordered so that every node comes after all nodes it points at (leaves first)."""
    nodes = set(nodes)
    indeg = {n: 0 for n in nodes}
    for n in nodes:
        for e in n.next_edges:
            if e is not None and e[0] in nodes:
                indeg[e[0]] += 1
    ready = [n for n in nodes if indeg[n] == 0]
    topo = []
    while ready:
        n = ready.pop()
        topo.append(n)
        for e in n.next_edges:
            if e is not None and e[0] in nodes:
                indeg[e[0]] -= 1
                if indeg[e[0]] == 0:
                    ready.append(e[0])
    topo.reverse()
    return topo


class backward_scope:
    """One graph task's run in this thread: the reentrant depth limit, the serial lock of
    ``set_multithreading_enabled(False)``, NumPy's floating-point warnings off and, at the
    end, the cross-stream keep-alive list. Every way of running a backward (the engine,
    compiled autograd's replay) runs in one.

    The rules' arithmetic at kinks and infinities (sqrt's ``g / (2 out)`` at 0 is inf, as
    PyTorch's) is theirs to define, not the user's to be warned about: PyTorch's backward is
    silent there, and a NumPy RuntimeWarning would point into the engine."""

    __slots__ = ("task", "depth", "lock", "quiet")

    def __init__(self, task):
        self.task = task

    def __enter__(self):
        depth = self.depth = _THREAD.backward_depth
        if depth >= MAX_REENTRANT_DEPTH:
            raise RuntimeError(
                f"backward: maximum reentrant backward depth ({MAX_REENTRANT_DEPTH}) exceeded; "
                "a custom Function's backward calls backward recursively without end")
        _THREAD.backward_depth = depth + 1
        GRAPH_EPOCH[0] += 1   # this run may release saved tensors (see node.GRAPH_EPOCH)
        self.lock = _serial_lock if not _multithreading else None
        if self.lock is not None:
            self.lock.acquire()
        self.quiet = numpy.errstate(all="ignore")   # last: nothing after it can raise
        self.quiet.__enter__()
        return self

    def __exit__(self, *exc):
        self.quiet.__exit__(*exc)
        _THREAD.backward_depth = self.depth
        if self.lock is not None:
            self.lock.release()
        if self.task.keep_alive or _keep_alive:
            _release_keep_alive(self.task)
        return False


def execute(task, root_edges, root_grads, calls=None):
    """Run a graph task from its root edges.

    Args:
        task: the GraphTask (what to keep, where results go).
        root_edges: ``(node, input_nr)`` of each root.
        root_grads: the gradient fed into each root edge.
        calls: how nodes are called, ``(tensor_pre_hooks, call_function, validate)``
            (default :data:`EAGER`); compiled autograd passes a recorder's and so captures
            its program along the engine's own schedule.

    Returns:
        The gradients captured for ``grad()``/``inputs=``, one per input slot.
    """
    root = GraphRoot(root_edges, root_grads)
    with backward_scope(task):
        _compute_dependencies(task, root)
        results = [None] * sum(len(v) for v in task.captures.values())
        if task.create_graph:
            with enable_grad():
                _run(task, root, results, calls or EAGER)
        else:
            _run(task, root, results, calls or EAGER)
    return results


class ReadyQueue:
    """Nodes whose gradients are complete, with their input buffers: the one created last
    (highest sequence_nr) comes out first, so AccumulateGrad comes before everything else."""

    __slots__ = ("heap", "tiebreak")

    def __init__(self):
        self.heap: list = []
        self.tiebreak = itertools.count().__next__

    def push(self, node, buf) -> None:
        heapq.heappush(self.heap, (-node.sequence_nr, self.tiebreak(), node, buf))

    def pop(self):
        """The next ``(node, grads)`` to run, or None when the graph task is done."""
        return heapq.heappop(self.heap)[2:] if self.heap else None


def _run(task, root, results, calls):
    """The engine's loop, as PyTorch's evaluate_function: take the next ready node, run the
    hooks on its incoming gradients, call it, then per next edge: one dependency fewer, the
    gradient into the input buffer (summed with what is there), and the next node into the
    ready queue once complete. (The edge loop stays in this function: a call per node costs
    as much as the loop itself on a chain of small ops.)

    When a node makes exactly one node ready while the queue is empty (a chain), that node is
    certainly the next to run: it is held in the local ``solo`` and skips the heap.
    """
    tensor_pre_hooks, call_function, validate = calls
    captures = task.captures
    keep = task.keep_graph
    deps = task.dependencies
    needed = task.needed
    buffers = task.buffers
    waits = task.waits
    ready = ReadyQueue()
    heap = ready.heap
    solo = (root, ())
    while True:
        if solo is not None:
            node, grads = solo
            solo = None
        else:
            item = ready.pop()
            if item is None:
                break
            node, grads = item
        if waits:
            pending = waits.pop(node, None)
            if pending is not None:
                _wait_for_producers(task, node, pending)
        if node._extra is not None or (node.__class__ is AccumulateGrad and node.variable._extra):
            grads = tensor_pre_hooks(task, node, grads)
        if captures and not _capture(task, node, grads, results):
            continue   # a grad() target: its gradient is the result, the node does not run
        outputs = call_function(task, node, grads)
        if not keep:
            node.release_variables()
        meta = node.input_metadata
        # Gradients are produced on the stream the node's forward op ran on (the root's
        # count as produced on each consumer's stream).
        producer = meta[0][3] if meta else None
        n_out = len(outputs)
        edges = node.next_edges
        if n_out and n_out != len(edges) and validate:
            raise _wrong_count(node, outputs)
        for i, edge in enumerate(edges):
            if edge is None:
                continue
            nxt = edge[0]
            if needed is not None and nxt not in needed:
                continue
            left = deps[nxt] - 1
            deps[nxt] = left
            buf = None
            if buffers:   # empty in a chain: only nodes fed by several edges wait there
                buf = buffers.pop(nxt, None) if left == 0 else buffers.get(nxt)
            if buf is None:
                buf = [None] * len(nxt.input_metadata)
                if left:
                    buffers[nxt] = buf
            g = outputs[i] if i < n_out else None
            if g is not None:
                slot = edge[1]
                m = nxt.input_metadata[slot]   # (shape, dtype, device, stream) it must have
                # validate_outputs: shapes and dtypes agree almost always (the identity test
                # answers most dtypes); a broadcast gradient is summed down, a dtype cast.
                # A rule on 0-d arrays may give a NumPy scalar (a ufunc's result): made an
                # array there, so that the next rule can write into it.
                if validate and (g.shape != m[0] or (g.dtype is not m[1] and g.dtype != m[1])
                                 or (not m[0] and g.__class__ in _NUMPY_SCALARS)):
                    g = conform(task, node, i, g, m[0], m[1])
                consumer = m[3]
                ps = producer if producer is not None else consumer
                if ps is consumer or ps == consumer:
                    prev = buf[slot]
                    buf[slot] = g if prev is None else _array(prev + g)
                else:
                    _add_across_streams(waits, nxt, buf, slot, g, ps, consumer)
            if left == 0:
                if solo is None and not heap:
                    solo = (nxt, buf)
                else:
                    if solo is not None:   # a second one: both go through the heap
                        ready.push(*solo)
                        solo = None
                    ready.push(nxt, buf)
        # Drop this frame's references to the gradients just handed on, so AccumulateGrad
        # can tell by reference count whether it may take a gradient's buffer over.
        item = grads = outputs = g = prev = None


def accumulation_stream(producer, consumer):
    """Where two gradients for the same input are summed: the consumer's stream when it is on
    the producer's device, else the producer's (PyTorch's InputBuffer rule, cases 2 and 4)."""
    return consumer if producer.device is consumer.device else producer


def _add_across_streams(waits, consumer, buf, slot, g, ps, cs) -> None:
    """Put gradient ``g`` (made on stream ``ps``) into ``consumer``'s buffer (read on ``cs``).

    Events are recorded only where two streams differ: the consumer waits for the producer
    (first gradient) or for the accumulation stream (after a sum), and the accumulation stream
    waits for each producer that is not itself.
    """
    acc = accumulation_stream(ps, cs)
    prev = buf[slot]
    entries = waits.setdefault(consumer, [])
    if prev is None:
        buf[slot] = g
        entries.append((cs, ps.record_event(), g, slot))
        return
    # Sum on the accumulation stream once both addends are ready there.
    if ps != acc:
        acc.wait_event(ps.record_event())
    # The first producer's event was meant for the consumer; the sum must wait for it too.
    for stream, event, _, s in entries:
        if s == slot and acc != cs:
            acc.wait_event(event)
    with acc:
        buf[slot] = _array(prev + g)
    if acc != cs:
        entries.append((cs, acc.record_event(), buf[slot], slot))


def _wait_for_producers(task, node, pending) -> None:
    """Make the node's stream wait for the events its inputs were produced under, and keep
    those gradients alive until the node's stream has used them."""
    for cs, event, _, _ in pending:
        cs.wait_event(event)
    stream = pending[0][0]
    if stream.native is not None:   # CPU streams run in order with the host: nothing to keep
        task.keep_alive.append((stream, [g for _, _, g, _ in pending]))


def _release_keep_alive(task) -> None:
    """At the end of a task, mark each consuming stream with an event; a gradient is dropped
    once its event has completed (checked at every later backward)."""
    with _keep_alive_lock:
        for stream, arrays in task.keep_alive:
            _keep_alive.append((stream.record_event(), arrays))
        _keep_alive[:] = [item for item in _keep_alive if not item[0].query()]


def _capture(task, node, grads, results) -> bool:
    """Record gradients flowing into grad()/inputs= targets; False when the node must not run."""
    hit = False
    for nr in range(len(grads)):
        slots = task.captures.get((node, nr))
        if slots is not None:
            for s in slots:
                results[s] = grads[nr]
            hit = True
    if not hit:
        return True
    if node.__class__ is AccumulateGrad:
        return task.accumulate_into is not None and id(node.variable) in task.accumulate_into
    # A non-leaf target still runs when needed nodes lie below it.
    return any(e is not None and e[0] in task.needed for e in node.next_edges)


def _wrap(g, meta_dev):
    if g is None or isinstance(g, Tensor):
        return g
    return Tensor._make(_array(g), False, None, 0, [0], meta_dev)


def call_tensor_pre_hooks(task, node, grads):
    """Hooks on the gradients flowing into a node: tensor hooks (``Tensor.register_hook``;
    a leaf's are kept on the tensor), then retain_grad, in PyTorch's order."""
    grads = list(grads)
    ex = node._extra
    for nr in range(len(grads)):
        if node.__class__ is AccumulateGrad:
            extra = node.variable._extra
            table = extra.get("hooks") if extra else None
        else:
            hooks = ex.tensor_pre_hooks if ex is not None else None
            table = hooks.get(nr) if hooks else None
        g = grads[nr]
        if table and g is not None:
            t = _wrap(g, node.input_metadata[nr][2])
            for fn in tuple(table.values()):
                new = fn(t)
                if new is not None:
                    t = _check_hook_result(new, t, f"hook registered on a tensor of {node.name()}")
            grads[nr] = t if task.create_graph else t._data
    if ex is not None and ex.retains_grad_hooks:
        for nr, t in ex.retains_grad_hooks.items():
            if grads[nr] is not None:
                _accumulate_into_tensor(t, grads[nr], task.create_graph)
    return grads


def _check_hook_result(new, old, what):
    if not isinstance(new, Tensor):
        raise RuntimeError(f"{what} returned a {type(new).__name__}, expected a Tensor or None")
    if new.shape != old.shape:
        raise RuntimeError(f"{what} returned a gradient of shape {list(new.shape)}, "
                           f"expected shape {list(old.shape)}")
    return new


def call_function(task, node, grads):
    """Call one node as PyTorch's call_function does: node pre-hooks, the node itself (on
    its forward op's stream), then post-hooks, on outputs validated against the inputs they
    flow to (:func:`validate_outputs`); the node inside its BACKWARD_FUNCTION record when
    profiled. Without post-hooks the outputs are validated by the engine's edge loop instead
    (see the module's docstring).

    Args:
        task: the graph task (``create_graph`` decides what the rules compute with).
        node: the node to run.
        grads: one gradient per node input (None where none arrived).

    Returns:
        One gradient per ``next_edges`` entry (empty for AccumulateGrad).
    """
    ex = node._extra
    if ex is not None and ex.pre_hooks:
        grads = call_pre_hooks(task, node, grads)
    ops = task.ops
    meta = node.input_metadata
    # The flags are read per node: a hook may turn the profiler or anomaly mode on.
    rec = None
    if _RF.on and node.__class__ is not GraphRoot:
        rec = _rf.begin(_BACKWARD, node.name(), node.sequence_nr, node.thread_id, None,
                        meta[0][2]._name if meta else "cpu", meta[0][3] if meta else None, node)
    try:
        if ops.anomaly or (ex is not None and ex.post_hooks):
            return _call_checked(task, node, grads, ops, ex)
        if meta and meta[0][3] is ops.cpu_stream.current and node.__class__ is not AccumulateGrad:
            # The common case, inlined: a table op's node on this thread's CPU stream.
            dev = meta[0][2]
            return node.apply(grads, task.F if dev is task.F_dev else namespace(task, dev))
        return apply_node(task, node, grads, ops)
    finally:
        if rec is not None:
            _rf.end(rec)


def _call_checked(task, node, grads, ops, ex):
    """call_function's second half in anomaly mode or with post-hooks: NaN checks and
    forward-stack notes on errors, post-hooks on validated outputs."""
    anomaly = ops.anomaly
    if anomaly:
        parent, _THREAD.current_node = _THREAD.current_node, node
    try:
        outputs = apply_node(task, node, grads, ops)
        post_hooks = ex is not None and ex.post_hooks
        if outputs and (post_hooks or anomaly):
            # Post-hooks and the NaN check see the gradients as they will be passed on.
            outputs = validate_outputs(task, node, outputs)
            if anomaly and _THREAD.anomaly_check_nan:
                check_nan(node, outputs, _xp_of)
        if post_hooks:
            outputs = call_post_hooks(task, node, outputs, grads)
    except BaseException as exc:
        if anomaly:
            annotate(exc, node)
        raise
    finally:
        if anomaly:
            _THREAD.current_node = parent
    return outputs


def apply_node(task, node, grads, ops):
    """The node's own work: AccumulateGrad accumulates, GraphRoot hands out the root
    gradients, any other node applies its rules with ``F`` on its forward op's stream."""
    cls = node.__class__
    if cls is AccumulateGrad:
        accumulate_grad(task, node, grads[0])
        return ()
    if cls is GraphRoot:
        return node.apply(grads, None)
    meta = node.input_metadata[0]
    F = task.F if meta[2] is task.F_dev else namespace(task, meta[2])
    # A node runs on the stream its forward op used (usually the current one already).
    stream = meta[3]
    if stream is ops.cpu_stream.current or stream.device.type == "cuda" and stream == current_stream(stream.device):
        return node.apply(grads, F)
    with stream:
        return node.apply(grads, F)


def namespace(task, dev):
    """What the rules of a node on ``dev`` compute with: autograd ops under ``create_graph``
    (so the gradients have history), else plain array functions of the device's module. Kept
    on the task for the next node."""
    task.F = TensorF if task.create_graph else ArrayF(dev.xp)
    task.F_dev = dev
    return task.F


def call_pre_hooks(task, node, grads):
    metas = node.input_metadata
    wrapped = tuple(_wrap(g, metas[i][2]) for i, g in enumerate(grads))
    for fn in tuple(node._extra.pre_hooks.values()):
        wrapped = _hook_result(fn(wrapped), wrapped, f"pre hook of {node.name()}")
    return [w if task.create_graph or w is None else w._data for w in wrapped]


def call_post_hooks(task, node, outputs, grads):
    metas = [e[0].input_metadata[e[1]][2] if e is not None else None for e in node.next_edges]
    grad_inputs = tuple(_wrap(g, metas[i]) for i, g in enumerate(outputs))
    grad_outputs = tuple(_wrap(g, node.input_metadata[i][2]) for i, g in enumerate(grads))
    for fn in tuple(node._extra.post_hooks.values()):
        grad_inputs = _hook_result(fn(grad_inputs, grad_outputs), grad_inputs,
                                   f"hook of {node.name()}")
    return [g if task.create_graph or g is None else g._data for g in grad_inputs]


def _hook_result(new, current, what):
    """A node hook's return value: None keeps ``current``; otherwise one gradient per entry,
    each checked like a tensor hook's."""
    if new is None:
        return current
    new = tuple(new)
    if len(new) != len(current):
        raise RuntimeError(f"{what} returned {len(new)} gradients, expected {len(current)}")
    return tuple(_check_hook_result(n, o, what) if n is not None and o is not None else n
                 for n, o in zip(new, current))


def validate_outputs(task, node, outputs):
    """Check each gradient against the input it flows to: a wrong count raises, a broadcast
    gradient is summed down and a dtype cast (:func:`conform`)."""
    edges = node.next_edges
    if len(outputs) != len(edges):
        raise _wrong_count(node, outputs)
    # Shapes and dtypes agree almost always (the identity test answers most dtypes), so this
    # loop only looks; at the first disagreement every output goes through conform(), which
    # returns one that already fits as it is.
    i = 0
    for g in outputs:
        if g is not None:
            edge = edges[i]
            if edge is not None:
                m = edge[0].input_metadata[edge[1]]   # (shape, dtype, device, stream) it must have
                if (g.shape != m[0] or (g.dtype is not m[1] and g.dtype != m[1])
                        or (not m[0] and g.__class__ in _NUMPY_SCALARS)):
                    return [_conformed(task, node, j, g, e)
                            for j, (g, e) in enumerate(zip(outputs, edges))]
        i += 1
    return outputs


def _conformed(task, node, i, g, edge):
    if g is None or edge is None:
        return g
    m = edge[0].input_metadata[edge[1]]
    return conform(task, node, i, g, m[0], m[1])


def _wrong_count(node, outputs) -> RuntimeError:
    return RuntimeError(f"function {node.name()} returned an incorrect number of gradients "
                        f"(expected {len(node.next_edges)}, got {len(outputs)})")


def conform(task, node, i, g, shape, dtype):
    """Output ``i`` of ``node`` as its input needs it: a broadcast gradient summed down to
    ``shape``, then cast to ``dtype``; a shape that cannot broadcast raises. A NumPy scalar
    becomes a 0-d array."""
    if g.__class__ in _NUMPY_SCALARS:
        g = numpy.asarray(g)
    gshape = g.shape
    if gshape != shape:
        if not _expandable(shape, gshape):
            raise RuntimeError(
                f"Function {node.name()} returned an invalid gradient at index "
                f"{_differentiable_index(node, i)} - got {list(gshape)} but expected shape "
                f"compatible with {list(shape)}")
        g = (apply_op(OPS["sum_to_size"], (g,), {"shape": shape}) if task.create_graph
             else sum_to_shape(_xp_of(g), g, shape))
    if g.dtype != dtype:
        g = (apply_op(OPS["to_dtype"], (g,), {"dtype": dtype}) if task.create_graph
             else g.astype(dtype))
    return g


def _differentiable_index(node, i) -> int:
    """Input ``i``'s place among the inputs that can take a gradient: PyTorch's nodes have
    edges for those only (ScatterBackward0's are self and src, so src is index 1), a table
    op's node has one per input (None for an index)."""
    rules = getattr(getattr(node, "op", None), "vjp", None)
    if not rules:
        return i
    return sum(1 for r in rules[:i] if r is not None)


def _xp_of(g):
    return array_module(getattr(g, "_data", g))


def _expandable(shape, target) -> bool:
    """Can an array of ``shape`` be broadcast to ``target``?"""
    if len(shape) > len(target):
        return False
    for s, t in zip(reversed(shape), reversed(target)):
        if s != t and s != 1:
            return False
    return True


def accumulate_grad(task, node, g):
    """AccumulateGrad: add ``g`` into the leaf's ``.grad`` and run its post-accumulate hooks."""
    if g is None or not task.accumulate:
        return
    if task.accumulate_into is not None and id(node.variable) not in task.accumulate_into:
        return
    var = node.variable
    _accumulate_into_tensor(var, g, task.create_graph)
    extra = var._extra
    if extra and extra.get("post_acc_hooks"):
        for fn in tuple(extra["post_acc_hooks"].values()):
            fn(var)


# References to a gradient array that nobody else holds, when _accumulate_into_tensor asks:
# the input-buffer list and the parameters of accumulate_grad and _accumulate_into_tensor.
_UNSHARED_REFCOUNT = 3


def _can_steal(g, unshared=_UNSHARED_REFCOUNT) -> bool:
    """May ``.grad`` take over this gradient's buffer instead of copying it (PyTorch steals
    when the gradient's use count is 1)? Only for a plain array that owns its memory, is
    writable, and that no other object refers to (a gradient sent to two leaves, or the
    user's own ``gradient=`` tensor, is copied)."""
    if g.__class__ is not numpy.ndarray or g.base is not None or not g.flags.writeable:
        return False
    # +2: this function's parameter and getrefcount's argument.
    return sys.getrefcount(g) <= unshared + 2


def _accumulate_into_tensor(t, g, create_graph, unshared=_UNSHARED_REFCOUNT):
    """``t.grad += g``, race-free across threads; the first gradient is copied, never aliased.

    ``unshared``: how many references to ``g`` the callers hold when nobody else does
    (_UNSHARED_REFCOUNT through accumulate_grad; compiled autograd's replays, which call this
    directly for a leaf without hooks, hold two: the register and this parameter)."""
    with AccumulateGrad._lock:
        old = t.grad
        if create_graph:
            new = g if isinstance(g, Tensor) else _wrap(g, t._device)
            t.grad = new if old is None else old + new
        elif old is None:
            data = g if _can_steal(g, unshared) else _array(
                (g._data if isinstance(g, Tensor) else g).copy())
            t.grad = Tensor._make(data, False, None, 0, [0], t._device)
        elif old.grad_fn is None and not old.requires_grad and getattr(
                old._data.flags, "writeable", True) and old._data.shape == t._data.shape:
            data = g._data if isinstance(g, Tensor) else g
            old._data += data
            old._vc[0] += 1
        else:
            data = g._data if isinstance(g, Tensor) else g
            with no_grad():
                t.grad = Tensor._make(_array(old._data + data), False, None, 0, [0], t._device)
        if _rf.STATE.memory:
            _memory.classify(t.grad._data, _memory.Category.GRADIENT, first_seen=True)


#: How the engine calls nodes: ``(tensor_pre_hooks, call_function, validate)``. Compiled
#: autograd runs the same loop with a recorder's pair in their place and ``validate`` False
#: (its outputs are placeholders; the program it records validates when it runs).
EAGER = (call_tensor_pre_hooks, call_function, True)


_tensor.BACKWARD[0] = backward   # what Tensor.backward calls (see _tensor.BACKWARD)
