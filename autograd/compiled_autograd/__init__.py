"""Compiled autograd: capture the backward graph once as a flat program, replay it after.

Every forward builds a new graph, but a training loop builds the same graph each step. On the
first ``backward`` of a structure (a cache miss), the engine itself runs the graph with a
recording call_function (:mod:`.recorder`) and so lists, as a flat list of :class:`Step` s,
what it does in the order it does it: a node's backward rules, a hook call, a saved-tensor
unpack, a gradient sum, an accumulate-grad, each with the registers it reads and writes. A
pass drops dead steps (:mod:`.passes`), the program is turned into straight-line Python
(:mod:`.codegen`), and the next backward of a graph with the same structure replays it: no ready heap, no dependency counts, no input buffers, the rules called
directly with ``ArrayF``. Saved tensors and leaves are *inputs* of the program, read from the
new graph's nodes at replay, never constants.

The cache key (:mod:`.key`, one schema for building, parsing and explaining it) is built by one
walk over the new graph (node classes, edges, input shapes/dtypes/devices/streams, which hooks
exist, which saved tensors have unpack hooks); comparing it with a cached key is one C-level
list comparison. A miss logs why on
``logging.getLogger("gradtrace.autograd.compiled_autograd")`` at DEBUG. When the forward too
ran under :class:`enable`, the key was built while the forward made the nodes
(:class:`.key.Recording`) and a backward whose recorded key was seen before skips the walk.

On a CUDA device the replayed program is captured once (:mod:`.cuda_graph`) into a CUDA graph (stream capture) with
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
import sys
import threading

from .. import engine as _engine
from .. import record_function as _rf
from ..backend import current_stream
from ..grad_mode import STATE as _THREAD
from ..dispatch import OpNode
from ..node import ERR_FREED
from .. import _tensor
from .._tensor import Tensor
from .recorder import capture
from .codegen import compile_program, generate
from .cuda_graph import gather, try_cuda_graph
from .key import NODE_FIELDS, build_key, explain_miss, parse_key
from .passes import PASSES, dead_step_elimination, run_passes
from .program import Program, SavedKind, Step, StepKind, Unsupported
from .key import DEFAULT_LIMIT, Recording

__all__ = ["enable", "disable", "is_enabled", "run_backward", "reset", "stats", "last_program",
           "explain_miss", "Step", "StepKind", "SavedKind", "Program", "Unsupported", "PASSES",
           "dead_step_elimination", "capture", "generate", "build_key", "parse_key",
           "NODE_FIELDS", "lookup", "lookup_recorded", "Recording", "gather", "log"]

log = logging.getLogger("gradtrace.autograd.compiled_autograd")

_USER = int(_rf.RecordScope.USER_SCOPE)
_RF = _rf.STATE

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
        self._prev: list = []   # the recordings open when entered (one per nested use)

    def __enter__(self):
        global enabled_depth
        with _lock:
            enabled_depth += 1
            _cuda_graphs.append(self.cuda_graphs)
        # This thread's table ops record the nodes they make from now on (an open outer
        # context's recording goes on).
        ops = _THREAD.ops
        self._prev.append(ops.ca_recording)
        if ops.ca_recording is None:
            ops.ca_recording = Recording(_recording_limit())
        return self

    def __exit__(self, *exc):
        global enabled_depth
        with _lock:
            enabled_depth -= 1
            _cuda_graphs.pop()
        _THREAD.ops.ca_recording = self._prev.pop()
        return False


class disable:
    """Context manager: backward runs eagerly inside it, even within :class:`enable`."""

    def __enter__(self):
        global enabled_depth
        with _lock:
            self._saved, enabled_depth = enabled_depth, 0
        ops = _THREAD.ops
        self._prev, ops.ca_recording = ops.ca_recording, None
        return self

    def __exit__(self, *exc):
        global enabled_depth
        with _lock:
            enabled_depth = self._saved
        _THREAD.ops.ca_recording = self._prev
        return False


def is_enabled() -> bool:
    return enabled_depth > 0


# --------------------------------------------------------------------------- statistics


_STATS_ZERO = {"captures": 0, "hits": 0, "recorded_hits": 0, "misses": 0, "eager_fallbacks": 0,
               "cudagraph_captures": 0, "cudagraph_replays": 0, "cudagraph_fallbacks": 0}
_stats = dict(_STATS_ZERO)
_last = {"miss_reason": None, "fallback_reason": None, "cudagraph_fallback_reason": None, "program": None}


def stats() -> dict:
    """Counters since the last :func:`reset`, plus the last miss/fallback reasons (an eager
    fallback's, and why a CUDA graph was not used: plain replay instead)."""
    out = dict(_stats)
    out["last_miss_reason"] = _last["miss_reason"]
    out["last_fallback_reason"] = _last["fallback_reason"]
    out["last_cudagraph_fallback_reason"] = _last["cudagraph_fallback_reason"]
    out["cache_size"] = sum(len(v) for v in _cache.values())
    return out


def last_program() -> "Program | None":
    """The program of the last compiled backward (for inspection and tests)."""
    return _last["program"]


def reset() -> None:
    """Forget every cached program and zero the counters."""
    with _lock:
        _cache.clear()
        _recorded.clear()
        _largest[0] = 0
        _stats.update(_STATS_ZERO)
        _last.update(miss_reason=None, fallback_reason=None, cudagraph_fallback_reason=None, program=None)


# --------------------------------------------------------------------------- cache and entry

_cache: dict = {}        # (number of nodes, key length) -> [Program, ...] most recent first
_MAX_PER_BUCKET = 8
_MAX_ORDERS = 4          # recording orders baked into one program (see _remember_recorded)
# Recorded keys (:class:`.key.Recording`): (number of recorded nodes, key length) ->
# [(key, Program, order), ...] most recent first. The order maps the program's node ``j``
# (the walk's order) to its position in the recording: an int names one of the orders baked
# into the program's code (``prog.orders[order][j]``), a tuple holds the positions themselves
# (for a program that has _MAX_ORDERS orders baked in already).
_recorded: dict = {}
_largest = [0]           # the most nodes a recorded key has had


def _recording_limit() -> int:
    """How many nodes a recording may hold: twice the largest recorded graph seen."""
    return 2 * _largest[0] if _largest[0] else DEFAULT_LIMIT


def lookup_recorded(nodes, key):
    """The program of a recorded key (:meth:`Recording.finish`) and its order (see _recorded);
    (None, None) when this recorded key was not seen."""
    bucket = _recorded.get((len(nodes), len(key[0])))
    if bucket:
        for i, (k, prog, order) in enumerate(bucket):
            if k == key:
                if i:
                    bucket.insert(0, bucket.pop(i))
                return prog, order
    return None, None


def _remember_recorded(nodes, key, walked, prog) -> None:
    """Let the next backward with this recorded key skip the walk to ``prog``."""
    pos = {node: p for p, node in enumerate(nodes)}
    order = tuple([pos.get(node) for node in walked])
    if None in order:   # pragma: no cover - a walked node is always recorded when finish passed
        return
    # Programs are generated per order (the recording's positions baked in as constants), so
    # that a recorded hit hands the recording's own node list to the program; a few orders
    # per program, so that a forward that makes its nodes in ever new orders does not
    # compile ever new code.
    if order in prog.orders:
        order = prog.orders.index(order)
    elif len(prog.orders) < _MAX_ORDERS:
        prog.orders.append(order)
        order = len(prog.orders) - 1
    bucket = _recorded.setdefault((len(nodes), len(key[0])), [])
    bucket.insert(0, (key, prog, order))
    del bucket[_MAX_PER_BUCKET:]
    _largest[0] = max(_largest[0], len(nodes))


def lookup(nodes, key):
    """The cached program of this key (moved to the front of its bucket), or None and why."""
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
    edges, grads = _engine.make_root_edges(tensors, grad_tensors, False)
    if cuda_graphs is None:
        cuda_graphs = _cuda_graphs[-1]
    ops = _THREAD.ops
    rec = ops.ca_recording
    if rec is not None:   # what this backward runs was recorded (if anything): start anew
        ops.ca_recording = Recording(_recording_limit())
    if _THREAD.anomaly:
        return _eager(edges, grads, keep, "anomaly detection is on")
    with _lock:
        # A forward under enable() recorded its key: no walk when that key was seen before.
        recorded = rec.finish(edges) if rec is not None else None
        del rec
        prog = order = None
        if recorded is not None:
            prog, order = lookup_recorded(*recorded)
        if prog is not None:
            nodes = recorded[0]   # in the recording's order
            if order.__class__ is tuple:   # not baked into the program: in the walk's order
                nodes, order = list(map(nodes.__getitem__, order)), None
            _stats["hits"] += 1
            _stats["recorded_hits"] += 1
        else:
            found = _walk_and_lookup(edges, grads, keep, recorded)
            if found is None:
                return None
            prog, nodes = found
        _last["program"] = prog
        profiled = _RF.on
        fn = None
        use_graph = (cuda_graphs and prog.device is not None and prog.device.type == "cuda"
                     and prog.runs > 0)
        if not use_graph:
            fn = compile_program(prog, keep, profiled, order)
        elif order is not None:   # a CUDA graph reads its inputs in the walk's order
            nodes = list(map(nodes.__getitem__, prog.orders[order]))
        prog.runs += 1
    _replay(prog, fn, nodes, grads, keep, profiled, use_graph)


def _walk_and_lookup(edges, grads, keep, recorded):
    """The program found by walking the graph (captured on a miss), and the walked nodes;
    None when the backward ran eagerly instead. Remembers the recorded key, if any."""
    nodes, key = build_key(edges)
    prog, reason = lookup(nodes, key)
    if prog is None:
        _stats["misses"] += 1
        _last["miss_reason"] = reason
        log.debug("cache miss: %s", reason)
        try:
            prog = run_passes(capture(nodes, key, edges))
        except Unsupported as exc:
            _eager(edges, grads, keep, str(exc))
            return None
        _stats["captures"] += 1
        bucket = _cache.setdefault((len(nodes), len(key)), [])
        bucket.insert(0, prog)
        del bucket[_MAX_PER_BUCKET:]
    else:
        _stats["hits"] += 1
    if recorded is not None:
        _remember_recorded(*recorded, nodes, prog)
    return prog, nodes


def _replay(prog, fn, nodes, grads, keep, profiled, use_graph) -> None:
    """Run the program (or its CUDA graph) inside the engine's backward_scope."""
    task = _engine.GraphTask(keep, False, accumulate=True)
    rec = None
    with _engine.backward_scope(task):
        try:
            if use_graph:
                if profiled:
                    # Per-node times do not exist inside a CUDA graph: one range, whose device
                    # time (CUDA events on the stream) is the graph's.
                    rec = _rf.begin(_USER, "CompiledAutograd (CUDA graph)", -1, 0, None,
                                    str(prog.device), prog.stream)
                if try_cuda_graph(prog, nodes, grads, keep, _stats):
                    return
                _last["cudagraph_fallback_reason"] = prog.cuda_graph_state
                if rec is not None:
                    _rf.end(rec)
                    rec = None
                fn = compile_program(prog, keep, profiled)
            if profiled:
                rec = _rf.begin(_USER, "CompiledAutograd", -1, 0, None,
                                str(prog.device) if prog.device else "cpu", prog.stream)
            stream = prog.stream
            if stream is not None and stream.device.type == "cuda" and \
                    stream != current_stream(stream.device):
                with stream:
                    fn(task, nodes, grads)
            else:
                fn(task, nodes, grads)
        except TypeError as exc:
            # A node released by hand (release_variables()) after its key was recorded: the
            # program met its _saved as None. The eager engine's error for it.
            if any(isinstance(n, OpNode) and n._saved is None for n in nodes):
                raise RuntimeError(ERR_FREED) from exc
            raise
        finally:
            if rec is not None:
                _rf.end(rec)


def _eager(edges, grads, keep, why) -> None:
    _stats["eager_fallbacks"] += 1
    _last["fallback_reason"] = why
    log.debug("running this backward eagerly: %s", why)
    task = _engine.GraphTask(keep, False, accumulate=True)
    _engine.execute(task, edges, grads)



# engine.backward delegates to run_backward while enabled_depth > 0 (see engine.COMPILED_AUTOGRAD).
_engine.COMPILED_AUTOGRAD[0] = sys.modules[__name__]
# Tensor.backward(compiled=True) calls run_backward (see _tensor.BACKWARD).
_tensor.BACKWARD[1] = run_backward
