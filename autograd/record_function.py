"""RecordFunction: the callbacks every forward op, backward node and user range reports to.

The engine calls :func:`begin`/:func:`end` only after one check of ``STATE.on``; with no
callback registered an op pays that one attribute read and allocates nothing. With callbacks,
each range is one :class:`RecordFunction` object (``__slots__``) handed to ``start`` and
``end``.

A profiler does not need an object per range, only the range's fields once it has closed, so it
registers a *range sink* (:func:`add_range_sink`) instead: while a sink is the only listener,
a range is one plain list (``ROW_*`` below) built by :func:`begin` and handed to the sink by
:func:`end`. That is the cheapest thing Python can do per range (one list, two clock reads, no
attribute writes), which is what keeps a profiled run near an unprofiled one.

Correlation is exact: a forward op's record carries the ``sequence_nr`` of the node it created
(-1 when it created none) and a backward node's record carries the node's own ``sequence_nr``
and the id of the thread that created it (``fwd_thread_id``). The pair
(``sequence_nr``, ``fwd_thread_id``) names exactly one forward record. A backward record also
carries its ``node``, so that a profiler can record the graph's edges (``node.next_edges``).
"""
from __future__ import annotations

import enum
import functools
import random
import threading
from time import perf_counter_ns as _perf

from . import backend
from .grad_mode import STATE as _THREAD, current_thread_id
from .hooks import RemovableHandle, register

__all__ = [
    "RecordScope", "RecordFunction", "add_global_callback", "add_thread_local_callback",
    "add_memory_callback", "add_range_sink", "record_function", "current_thread_id",
    "has_callbacks", "STATE",
]


class RecordScope(enum.IntEnum):
    FUNCTION = 0            # a forward op ("mul", "matmul") or a composite ("mean")
    BACKWARD_FUNCTION = 1   # an autograd node run by the engine ("MulBackward0")
    USER_SCOPE = 2          # record_function("..."), module forwards, optimizer steps, steps


FUNCTION = RecordScope.FUNCTION
BACKWARD_FUNCTION = RecordScope.BACKWARD_FUNCTION
USER_SCOPE = RecordScope.USER_SCOPE
_N_SCOPES = len(RecordScope)

# A sink's row: ``row[0]`` is the sink's ``end`` (so that :func:`end` needs no lookup), then
# the range's fields. ``ROW_CTX`` is what the sink's ``start`` returned (None without one);
# ``ROW_START`` is the clock (``time.perf_counter_ns``) as the range opened, read last so the
# bookkeeping before it is not inside the range; ``ROW_END`` is 0 until :func:`end` writes the
# closing time there, just before the sink gets the row (so a sink can be a C method such as
# ``list.extend``, with no Python frame per range).
(ROW_SCOPE, ROW_NAME, ROW_SEQ, ROW_FWD_TID, ROW_TID, ROW_INPUTS, ROW_DEVICE, ROW_STREAM,
 ROW_NODE, ROW_CTX, ROW_START, ROW_END) = range(1, 13)


class _Flags:
    """``on``: some range callback exists (in any thread); ``memory``: a memory callback exists."""

    __slots__ = ("on", "memory")

    def __init__(self):
        self.on = False
        self.memory = False


STATE = _Flags()


class RecordFunction:
    """One range: what the callbacks see. Built only when a callback wants this scope."""

    __slots__ = ("name", "scope", "sequence_nr", "fwd_thread_id", "thread_id", "inputs",
                 "device", "stream", "node", "_active", "_ctx", "_sinks", "_start_ns")

    def __repr__(self):
        return (f"RecordFunction(name={self.name!r}, scope={RecordScope(self.scope).name}, "
                f"sequence_nr={self.sequence_nr}, thread_id={self.thread_id}, "
                f"fwd_thread_id={self.fwd_thread_id})")


class _Callback:
    """A registered callback's or sink's functions, scopes and wants (a sink: sampling_prob 1,
    ``start(scope, stream)`` and ``end(row)``)."""

    __slots__ = ("start", "end", "scopes", "needs_inputs", "sampling_prob")

    def __init__(self, start, end, scopes, needs_inputs, sampling_prob):
        if start is None and end is None:
            raise ValueError("a RecordFunction callback needs a start or an end function")
        if not 0.0 <= sampling_prob <= 1.0:
            raise ValueError(f"sampling_prob must be in [0, 1], got {sampling_prob}")
        self.start = start
        self.end = end
        self.scopes = frozenset(RecordScope(s) for s in scopes) if scopes is not None else None
        self.needs_inputs = bool(needs_inputs)
        self.sampling_prob = float(sampling_prob)

    def wants(self, scope: int) -> bool:
        return self.scopes is None or scope in self.scopes


_lock = threading.Lock()
_global: dict[int, _Callback] = {}
_global_by_scope: list[tuple] = [()] * _N_SCOPES   # rebuilt on every (un)registration
_thread_local_count = 0                             # registrations alive in any thread
_memory: dict[int, object] = {}
_sinks: dict[int, _Callback] = {}
_sinks_by_scope: list[tuple] = [()] * _N_SCOPES
# The common case precomputed per scope, rebuilt with the flags: when no thread-local callback
# exists anywhere and every global callback for the scope reports every range (sampling_prob
# 1.0), ``_fast[scope]`` is ``(callbacks, needs_inputs)`` and begin() needs no list, no random
# draw and no thread-local read. Otherwise it is None and begin() takes the general path.
# The list is replaced, never mutated, so a reader in another thread sees one whole version.
_fast: list = [None] * _N_SCOPES
# Per scope, ``(end, start, needs_inputs)`` of the one sink when it is the scope's only
# listener (no callback, no other sink): begin() then builds the row and nothing else.
_lean: list = [None] * _N_SCOPES


class _ThreadCallbacks(threading.local):
    def __init__(self):
        self.table: dict[int, _Callback] = {}
        self.by_scope: list[tuple] = [()] * _N_SCOPES


_local = _ThreadCallbacks()


def _refresh_flags() -> None:
    """Recompute the flags and the fast tables (callers hold ``_lock``)."""
    global _fast, _lean, _sinks_by_scope
    _sinks_by_scope = [tuple(sk for sk in _sinks.values() if sk.wants(s)) for s in range(_N_SCOPES)]
    fast = [None] * _N_SCOPES
    lean = [None] * _N_SCOPES
    if not _thread_local_count:
        for s in range(_N_SCOPES):
            cbs, sinks = _global_by_scope[s], _sinks_by_scope[s]
            if sinks:
                if not cbs and len(sinks) == 1:
                    lean[s] = (sinks[0].end, sinks[0].start, sinks[0].needs_inputs)
            elif cbs and all(cb.sampling_prob >= 1.0 for cb in cbs):
                fast[s] = (cbs, any(cb.needs_inputs for cb in cbs))
    _fast = fast
    _lean = lean
    STATE.on = bool(_global) or bool(_sinks) or _thread_local_count > 0
    STATE.memory = bool(_memory)


def _rebuild_global() -> None:
    global _global_by_scope
    _global_by_scope = [tuple(cb for cb in _global.values() if cb.wants(s)) for s in range(_N_SCOPES)]
    _refresh_flags()


def add_global_callback(start=None, end=None, *, scopes=None, needs_inputs=False,
                        sampling_prob=1.0) -> RemovableHandle:
    """Call ``start(rec) -> ctx`` when a range opens and ``end(rec, ctx)`` when it closes,
    in every thread.

    Args:
        scopes: iterable of :class:`RecordScope` to receive (default: all).
        needs_inputs: fill ``rec.inputs`` with ``(shape, dtype)`` of each input.
        sampling_prob: probability that a given range is reported to this callback.
    Returns:
        A handle whose ``remove()`` unregisters the callback.
    """
    return _add(_global, _Callback(start, end, scopes, needs_inputs, sampling_prob), _rebuild_global)


def _add(table: dict, entry, refresh) -> RemovableHandle:
    """Put ``entry`` in ``table`` and ``refresh`` what begin() reads, now and when the handle
    is removed."""
    def removed():
        with _lock:
            refresh()

    with _lock:
        handle = RemovableHandle(table, on_remove=removed)
        table[handle.id] = entry
        refresh()
    return handle


def add_range_sink(end, *, start=None, scopes=None, needs_inputs=False) -> RemovableHandle:
    """Hand every range, in every thread, to ``end(row)`` once it closes, as one list.

    The row is ``[end, scope, name, sequence_nr, fwd_thread_id, thread_id, inputs, device,
    stream, node, ctx, start_ns, end_ns]`` (indices ``ROW_*``), the sink's to keep. This is the
    profiler's lane: while one sink is the only listener no RecordFunction object is made (see
    the module's docstring).

    Args:
        start: optional ``start(scope, stream) -> ctx``, called as a range opens (before its
            clock is read), for what must happen then: a CUDA start event, the caller's stack.
        scopes: iterable of :class:`RecordScope` to receive (default: all).
        needs_inputs: fill the row's inputs with ``(shape, dtype)`` of each input.
    Returns:
        A handle whose ``remove()`` unregisters the sink.
    """
    if end is None:
        raise ValueError("a range sink needs an end function")
    return _add(_sinks, _Callback(start, end, scopes, needs_inputs, 1.0), _refresh_flags)


def add_thread_local_callback(start=None, end=None, *, scopes=None, needs_inputs=False,
                              sampling_prob=1.0) -> RemovableHandle:
    """Like :func:`add_global_callback` but only for ranges run by the calling thread."""
    global _thread_local_count
    cb = _Callback(start, end, scopes, needs_inputs, sampling_prob)
    local = _local
    handle = RemovableHandle(local.table, on_remove=lambda: _on_local_removed(local))
    local.table[handle.id] = cb
    local.by_scope = [tuple(c for c in local.table.values() if c.wants(s)) for s in range(_N_SCOPES)]
    with _lock:
        _thread_local_count += 1
        _refresh_flags()
    return handle


def _on_local_removed(local) -> None:
    global _thread_local_count
    local.by_scope = [tuple(c for c in local.table.values() if c.wants(s)) for s in range(_N_SCOPES)]
    with _lock:
        _thread_local_count -= 1
        _refresh_flags()


def has_callbacks() -> bool:
    return STATE.on


_SCALAR = ((), "Scalar")
# One object per distinct description (bounded: cleared when it grows past _MAX_DESCRIPTIONS),
# so that a profiler can tell descriptions apart by id() instead of hashing nested tuples per
# range (equal ones made across a clearing are two objects, which it interns by value).
# Looked up by the inputs' raw shapes and dtypes (``_descriptions``): building the description
# itself, with dtype names, only on a miss (``_by_value`` makes equal ones one object).
_descriptions: dict = {}
_by_value: dict = {}
_MAX_DESCRIPTIONS = 1 << 16


def _describe_inputs(inputs) -> tuple:
    """(shape, dtype name) for each input: arrays and tensors by their shape, scalars as
    ``()``. A tuple, and the same tuple object for equal descriptions (see ``_descriptions``).

    Runs once per recorded op when shapes are asked for, so the common inputs (tensors,
    arrays, Python floats and ints) take plain attribute reads into a flat key of shapes,
    dtypes and scalar classes, and one dict lookup finds the description.
    """
    key = []
    for x in inputs:
        cls = x.__class__
        if cls is float or cls is int:   # the scalar operand of ``y * 2.0``: no lookups
            key.append(cls)
            continue
        try:
            data = x._data               # a tensor's array
        except AttributeError:
            data = x
        try:
            key.append(data.shape)
            key.append(data.dtype)
        except AttributeError:           # a list of tensors, None, a string: described apart
            return _intern(tuple(e for x in inputs for e in _describe_one(x)))
    key = tuple(key)
    known = _descriptions.get(key)
    if known is None:
        if len(_descriptions) >= _MAX_DESCRIPTIONS:
            _descriptions.clear()
            _by_value.clear()
        known = _descriptions[key] = _intern(tuple(e for x in inputs for e in _describe_one(x)))
    return known


def _intern(description: tuple) -> tuple:
    """The one object of this description (both tables start over past _MAX_DESCRIPTIONS)."""
    known = _by_value.get(description)
    if known is None:
        if len(_by_value) >= _MAX_DESCRIPTIONS:
            _by_value.clear()
            _descriptions.clear()
        known = _by_value[description] = description
    return known


def _describe_one(x) -> list:
    """The description entries of one input: a tensor or array by its shape and dtype name, a
    scalar as ``()``, a list of tensors one entry each, anything else by its type's name."""
    data = getattr(x, "_data", x)
    if hasattr(data, "shape") and hasattr(data, "dtype"):
        return [(data.shape, str(data.dtype))]
    if isinstance(x, (bool, int, float, complex)):
        return [_SCALAR]
    if isinstance(x, (list, tuple)) and x and all(hasattr(getattr(t, "_data", t), "shape") for t in x):
        return [(getattr(t, "_data", t).shape, str(getattr(t, "_data", t).dtype)) for t in x]
    return [((), type(x).__name__)]


def begin(scope: int, name: str, sequence_nr: int = -1, fwd_thread_id: int = 0,
          inputs=None, device="cpu", stream=None, node=None):
    """Open a range; returns the record to pass to :func:`end`, or None if nobody listens.

    ``node``: the autograd node a BACKWARD_FUNCTION range runs (the profiler reads its
    ``next_edges`` once, when it stops); None for every other range.
    """
    lean = _lean[scope]
    if lean is not None:
        sink_end, sink_start, needs_inputs = lean
        return [sink_end, scope, name, sequence_nr, fwd_thread_id, _THREAD.thread_id,
                _describe_inputs(inputs) if needs_inputs and inputs is not None else None,
                device, stream, node, sink_start(scope, stream) if sink_start is not None else None,
                _perf(), 0]
    fast = _fast[scope]
    if fast is None:
        return _begin_general(scope, name, sequence_nr, fwd_thread_id, inputs, device, stream, node)
    cbs, needs_inputs = fast
    rec = _record(scope, name, sequence_nr, fwd_thread_id, inputs, device, stream, needs_inputs, node)
    if len(cbs) == 1:
        # One callback: its context is kept as it is, no pairs list.
        cb = cbs[0]
        rec._active = cb
        start = cb.start
        rec._ctx = start(rec) if start is not None else None
    else:
        rec._active = [(cb, cb.start(rec) if cb.start is not None else None) for cb in cbs]
    return rec


def _record(scope, name, sequence_nr, fwd_thread_id, inputs, device, stream, needs_inputs, node):
    """A new record's fields; the callbacks' contexts are filled in by the caller."""
    rec = RecordFunction()
    rec.name = name
    rec.scope = scope
    rec.sequence_nr = sequence_nr
    rec.fwd_thread_id = fwd_thread_id
    rec.thread_id = _THREAD.thread_id
    rec.inputs = _describe_inputs(inputs) if needs_inputs and inputs is not None else None
    rec.device = device
    rec.stream = stream
    rec.node = node
    rec._sinks = None
    return rec


def _begin_general(scope, name, sequence_nr, fwd_thread_id, inputs, device, stream, node):
    """begin() with thread-local callbacks, sampling, or sinks beside callbacks: which
    callbacks hear this range is decided per range; every sink of the scope hears it."""
    cbs = _global_by_scope[scope]
    if _thread_local_count:
        cbs = cbs + _local.by_scope[scope]
    sinks = _sinks_by_scope[scope]
    active = []
    needs_inputs = False
    for cb in cbs:
        if cb.sampling_prob >= 1.0 or random.random() < cb.sampling_prob:
            active.append(cb)
            needs_inputs = needs_inputs or cb.needs_inputs
    if not active and not sinks:
        return None
    needs_inputs = needs_inputs or any(sk.needs_inputs for sk in sinks)
    rec = _record(scope, name, sequence_nr, fwd_thread_id, inputs, device, stream, needs_inputs, node)
    if sinks:
        rec._sinks = [(sk, sk.start(scope, stream) if sk.start is not None else None) for sk in sinks]
    rec._active = [(cb, cb.start(rec) if cb.start is not None else None) for cb in active]
    rec._start_ns = _perf()
    return rec


def end(rec) -> None:
    """Close a range opened by :func:`begin` (callbacks run in reverse order of start, then
    the sinks)."""
    if rec is None:
        return
    if rec.__class__ is list:      # a sink's row
        rec[ROW_END] = _perf()
        rec[0](rec)
        return
    active = rec._active
    if active.__class__ is _Callback:
        if active.end is not None:
            active.end(rec, rec._ctx)
        return
    for cb, ctx in reversed(active):
        if cb.end is not None:
            cb.end(rec, ctx)
    if rec._sinks:
        t_end = _perf()
        for sink, ctx in rec._sinks:
            sink.end([sink.end, rec.scope, rec.name, rec.sequence_nr, rec.fwd_thread_id,
                      rec.thread_id, rec.inputs if sink.needs_inputs else None, rec.device,
                      rec.stream, rec.node, ctx, rec._start_ns, t_end])


# --------------------------------------------------------------------------- memory callbacks


# ``fn(active)`` after every memory callback added or removed, ``active`` whether one is left:
# memory.py, which reports to these callbacks (and so imports this module), starts and stops
# tracking storage there, so that tracking costs nothing while nobody listens.
_memory_watchers: dict[int, object] = {}


def watch_memory_callbacks(fn) -> RemovableHandle:
    """Call ``fn(active: bool)`` whenever a memory callback is added or removed, with whether
    any is registered now."""
    return register(_memory_watchers, fn)


def add_memory_callback(fn) -> RemovableHandle:
    """Call ``fn(device_type, device_index, addr, nbytes, total_allocated, category)`` on every
    tensor storage allocation (``nbytes > 0``) and free (``nbytes < 0``), and when the kind of
    the allocation at ``addr`` becomes known (``nbytes == 0``, ``category`` a
    ``memory.Category``; 0 on allocations and frees)."""
    with _lock:
        handle = RemovableHandle(_memory, on_remove=_on_memory_changed)
        _memory[handle.id] = fn
    _on_memory_changed()
    return handle


def _on_memory_changed():
    with _lock:
        _refresh_flags()
    active = bool(_memory)
    for watcher in tuple(_memory_watchers.values()):
        watcher(active)


def report_memory(device_type: str, device_index: int, addr: int, nbytes: int, total: int,
                  category: int = 0) -> None:
    for fn in tuple(_memory.values()):
        fn(device_type, device_index, addr, nbytes, total, category)


# --------------------------------------------------------------------------- user ranges


class record_function:
    """A USER_SCOPE range: ``with record_function("data loading"):`` or as a decorator.

    ``device="cuda:0"`` also times the range on that GPU's current stream, so work the range
    issues directly (array code that does not go through ops, such as an optimizer's update)
    gets a CUDA time of its own instead of none.
    """

    __slots__ = ("name", "device", "_rec")

    def __init__(self, name: str, device=None):
        if not isinstance(name, str):
            raise TypeError(f"record_function name must be a str, got {type(name).__name__}")
        self.name = name
        self.device = device
        self._rec = None

    def __enter__(self):
        if STATE.on:
            dev = self.device
            if dev is None:
                self._rec = begin(USER_SCOPE, self.name)
            else:
                dev = backend.device(dev)
                self._rec = begin(USER_SCOPE, self.name, -1, 0, None, str(dev),
                                  backend.current_stream(dev) if dev.type == "cuda" else None)
        return self

    def __exit__(self, *exc):
        rec, self._rec = self._rec, None
        if rec is not None:
            end(rec)
        return False

    def __call__(self, fn):
        name, device = self.name, self.device

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with record_function(name, device):
                return fn(*args, **kwargs)

        return wrapper
