"""Thread-local engine state: grad mode, inference mode, the sequence counter, thread ids.

Everything per thread lives on one ``threading.local`` object, ``STATE``; what an op reads is on
``STATE.ops``, a plain object (see :class:`OpState`), so an op pays one thread-local lookup.
"""
from __future__ import annotations

import functools
import itertools
import threading

from . import backend

__all__ = [
    "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode",
    "is_inference_mode_enabled", "current_thread_id", "native_thread_ids",
]

_thread_ids = itertools.count(1).__next__
_thread_ids_lock = threading.Lock()
# Logical thread id -> the ids the OS level names the thread that took it by: the kernel's
# (threading.get_native_id, gettid) and pthread_self (threading.get_ident), which is what
# CUPTI's API records carry on Linux, truncated to their 32 bits (seen on an H200: gettid
# matched none of them). Noted once per thread, as it takes its id, so that a profiler reading
# records that name OS threads can put them on the logical threads its events carry.
_native_ids: dict[int, tuple[int, int, int]] = {}


class OpState:
    """The per-thread values every op and every backward node reads, on one plain object.

    Reading an attribute of a ``threading.local`` costs about 40 ns (a per-thread dict found
    behind a C getattr), several times a slot read, and an op used to read six of them. The
    dispatcher and the engine read ``STATE.ops`` once and everything else from here.

    ``slow`` is precomputed: True while inference mode, a forward-AD level or anomaly mode is
    on in this thread, the modes an op must take the general path for. The properties of
    :class:`_ThreadState` that change those modes recompute it, so ``STATE.anomaly = True``
    (and every other writer) keeps it right. RecordFunction's ``on`` is process-wide, not per
    thread, and is checked beside it.

    So write a mode through ``STATE.<name>``, never ``STATE.ops.<name>`` (which would leave
    ``slow`` stale); only ``grad_enabled``, which ``slow`` does not depend on, is written
    directly, by the grad-mode context managers.
    """

    __slots__ = ("grad_enabled", "inference", "fw_level", "anomaly", "slow", "next_seq",
                 "thread_id", "cpu_stream", "ca_recording", "autocast")

    def refresh(self) -> None:
        self.slow = bool(self.inference or self.fw_level or self.anomaly)


def _mirrored(name: str, recompute: bool):
    """A ``_ThreadState`` attribute that lives on the thread's :class:`OpState`."""

    def get(self):
        return getattr(self.ops, name)

    if recompute:
        def set(self, value):
            ops = self.ops
            setattr(ops, name, value)
            ops.refresh()
    else:
        def set(self, value):
            setattr(self.ops, name, value)

    return property(get, set, doc=f"this thread's ``{name}`` (stored on ``STATE.ops``)")


class _ThreadState(threading.local):
    """Per-thread state; ``__init__`` runs once in each thread on first use.

    The values ops read (grad mode, inference mode, forward-AD level, anomaly mode) are
    properties over ``self.ops`` (an :class:`OpState`), so readers and writers
    elsewhere keep using ``STATE.<name>``; the rest are plain per-thread attributes.
    """

    grad_enabled = _mirrored("grad_enabled", recompute=False)
    inference = _mirrored("inference", recompute=True)
    fw_level = _mirrored("fw_level", recompute=True)
    anomaly = _mirrored("anomaly", recompute=True)

    def __init__(self):
        ops = self.ops = OpState()
        ops.grad_enabled = True
        ops.inference = False
        # Forward-mode AD: the dual level in force (0: none).
        ops.fw_level = 0
        # Anomaly mode: record forward stacks on new nodes; check backward outputs for NaN.
        ops.anomaly = False
        ops.refresh()
        # Compiled autograd's Recording while an enable() context is open here, else None:
        # the table ops hand it each node they make (its key is then built with the forward).
        ops.ca_recording = None
        # Autocast: None while it is off for every device type in this thread, else the
        # thread's AutocastState (see autocast_mode; apply_op tests it before its input loop).
        ops.autocast = None
        # sequence_nr counter: restarts at 0 in every thread, like at::sequence_number.
        # Fixed for the thread's life, so kept both here and on ``ops``.
        self.next_seq = ops.next_seq = itertools.count().__next__
        with _thread_ids_lock:
            # Logical thread id from 1, as RecordFunction shows them (0 means "none").
            self.thread_id = ops.thread_id = _thread_ids()
            ident = threading.get_ident()
            _native_ids[self.thread_id] = (threading.get_native_id(), ident, ident & 0xFFFF_FFFF)
        self.backward_depth = 0   # reentrant backward depth in this thread
        self.anomaly_check_nan = True
        self.current_node = None   # the node the engine is running (anomaly: parent of new nodes)
        # Default saved-tensor hooks: a stack of (pack, unpack); the innermost applies.
        self.saved_hooks = []
        # The stream CPU ops run on (a no-op object, replaceable: tests count events with it),
        # as this thread's slot in backend, which set_current_stream writes.
        ops.cpu_stream = backend.cpu_stream_slot()


STATE = _ThreadState()


def current_thread_id() -> int:
    """The logical id (from 1) of the calling thread."""
    return STATE.thread_id


def native_thread_ids() -> dict[int, tuple[int, ...]]:
    """``{logical thread id: (gettid, pthread_self, pthread_self's low 32 bits)}`` of every
    thread that has taken a logical id (an OS id may repeat once its thread has ended: the
    later logical id is the live one)."""
    with _thread_ids_lock:
        return dict(_native_ids)


def is_grad_enabled() -> bool:
    return STATE.grad_enabled


def is_inference_mode_enabled() -> bool:
    return STATE.inference


class _Mode:
    """Base of the grad-mode context managers; each also works as a decorator."""

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(*self._args):
                return fn(*args, **kwargs)

        return wrapper

    _args: tuple = ()


class set_grad_enabled(_Mode):
    """Turn graph recording on or off (context manager, decorator, or plain call)."""

    def __init__(self, mode: bool):
        self._args = (bool(mode),)
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = bool(mode)

    def __call__(self, fn):
        # Used as a decorator: the mode was set when this object was built; undo that.
        STATE.grad_enabled = self._prev
        return super().__call__(fn)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        STATE.grad_enabled = self._prev
        return False


class no_grad(_Mode):
    """Ops inside record no graph: results have ``requires_grad=False``."""

    # Grad mode is not part of OpState.slow, so these write ``STATE.ops`` directly.
    def __enter__(self):
        ops = STATE.ops
        self._prev = ops.grad_enabled
        ops.grad_enabled = False
        return self

    def __exit__(self, *exc):
        STATE.ops.grad_enabled = self._prev
        return False


class enable_grad(_Mode):
    """Re-enable graph recording inside a ``no_grad`` block."""

    def __enter__(self):
        ops = STATE.ops
        self._prev = ops.grad_enabled
        ops.grad_enabled = True
        return self

    def __exit__(self, *exc):
        STATE.ops.grad_enabled = self._prev
        return False


class inference_mode(_Mode):
    """Like ``no_grad``, and tensors made by ops inside are inference tensors: saving one for
    backward in a graph recorded later raises, since no version was kept for it."""

    def __init__(self, mode: bool = True):
        self._args = (bool(mode),)
        self._mode = bool(mode)

    def __enter__(self):
        self._prev = (STATE.grad_enabled, STATE.inference)
        if self._mode:
            STATE.grad_enabled = False
            STATE.inference = True
        return self

    def __exit__(self, *exc):
        STATE.grad_enabled, STATE.inference = self._prev
        return False
