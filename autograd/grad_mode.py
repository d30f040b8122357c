"""Thread-local engine state: grad mode, inference mode, the sequence counter, thread ids.

Everything per thread lives on one ``threading.local`` object so an op reads it with a single
attribute lookup.
"""
from __future__ import annotations

import functools
import itertools
import threading

__all__ = [
    "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode",
    "is_inference_mode_enabled", "current_thread_id",
]

_thread_ids = itertools.count(1).__next__
_thread_ids_lock = threading.Lock()


class _ThreadState(threading.local):
    """Per-thread state; ``__init__`` runs once in each thread on first use."""

    def __init__(self):
        self.grad_enabled = True
        self.inference = False
        # sequence_nr counter: restarts at 0 in every thread, like at::sequence_number.
        self.next_seq = itertools.count().__next__
        with _thread_ids_lock:
            # Logical thread id from 1, as RecordFunction shows them (0 means "none").
            self.thread_id = _thread_ids()
        self.backward_depth = 0   # reentrant backward depth in this thread
        # Forward-mode AD: the dual level in force (0: none). Read by every op, hence here.
        self.fw_level = 0
        # Anomaly mode: record forward stacks on new nodes; check backward outputs for NaN.
        self.anomaly = False
        self.anomaly_check_nan = True
        self.current_node = None   # the node the engine is running (anomaly: parent of new nodes)
        # Default saved-tensor hooks: a stack of (pack, unpack); the innermost applies.
        self.saved_hooks = []
        # The stream CPU ops run on: a no-op object, replaceable (tests count events with it).
        from .backend import CPU_STREAM  # noqa: PLC0415 - backend imports nothing of ours

        self.cpu_stream = CPU_STREAM


STATE = _ThreadState()


def current_thread_id() -> int:
    """The logical id (from 1) of the calling thread."""
    return STATE.thread_id


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

    def __enter__(self):
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = False
        return self

    def __exit__(self, *exc):
        STATE.grad_enabled = self._prev
        return False


class enable_grad(_Mode):
    """Re-enable graph recording inside a ``no_grad`` block."""

    def __enter__(self):
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = True
        return self

    def __exit__(self, *exc):
        STATE.grad_enabled = self._prev
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
