"""Anomaly detection: forward stacks on nodes, NaN checks on backward outputs.

Under ``detect_anomaly()`` every node made keeps the Python stack of the forward call that
made it (and, when made during a backward, the node that was running: its parent). When a
node raises in backward, the error gets that stack as a note; when it returns NaN, the engine
raises ``RuntimeError("Function 'MulBackward0' returned nan values in its 0th output.")`` with
the same note.
"""
from __future__ import annotations

import functools
import os
import traceback
import warnings

from .dtypes import BFLOAT16
from .grad_mode import STATE

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled",
           "is_anomaly_check_nan_enabled"]


def is_anomaly_enabled() -> bool:
    return STATE.anomaly


def is_anomaly_check_nan_enabled() -> bool:
    return STATE.anomaly_check_nan


class detect_anomaly:
    """Context manager (and decorator) turning anomaly detection on for this thread."""

    def __init__(self, check_nan: bool = True):
        self.check_nan = bool(check_nan)

    def __enter__(self):
        self._prev = (STATE.anomaly, STATE.anomaly_check_nan)
        STATE.anomaly, STATE.anomaly_check_nan = True, self.check_nan
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime "
                      "and should only be enabled for debugging.", stacklevel=2)
        return self

    def __exit__(self, *exc):
        STATE.anomaly, STATE.anomaly_check_nan = self._prev
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly(self.check_nan):
                return fn(*args, **kwargs)

        return wrapper


class set_detect_anomaly:
    """Turn anomaly detection on or off (plain call or context manager)."""

    def __init__(self, mode: bool, check_nan: bool = True):
        self._prev = (STATE.anomaly, STATE.anomaly_check_nan)
        STATE.anomaly, STATE.anomaly_check_nan = bool(mode), bool(check_nan)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        STATE.anomaly, STATE.anomaly_check_nan = self._prev
        return False


def record_trace(node, state) -> None:
    """Store the forward stack (without gradtrace's own frames) and the parent node."""
    ex = node._extras()
    frames = [f for f in traceback.extract_stack()[:-1]
              if not os.path.abspath(f.filename).startswith(_PACKAGE_DIR)]
    ex.anomaly_trace = "".join(traceback.format_list(frames))
    ex.anomaly_parent = state.current_node


def forward_trace(node) -> str:
    """The note attached to errors of ``node``: where its forward op was called, and the
    chain of parent nodes for nodes made by a backward."""
    parts = []
    seen = 0
    while node is not None and seen < 16:
        ex = node._extra
        trace = ex.anomaly_trace if ex is not None else None
        if trace is None:
            if seen == 0:
                return ""
            break
        head = ("Traceback of forward call that caused the error" if seen == 0 else
                f"Traceback of forward call that induced the previous calculation ({node.name()})")
        parts.append(f"{head} ({node.name()}):\n{trace}")
        node = ex.anomaly_parent
        seen += 1
    return "\n".join(parts)


def annotate(exc: BaseException, node) -> None:
    """Add the forward stack of ``node`` to an error raised while it ran (once)."""
    if getattr(exc, "_gradtrace_annotated", False):
        return
    note = forward_trace(node)
    if note:
        exc.add_note(f"Error detected in {node.name()}. {note}")
        exc._gradtrace_annotated = True


def check_nan(node, outputs, xp_of) -> None:
    """Raise when a backward output holds NaN, naming the node and the output index."""
    for i, g in enumerate(outputs):
        if g is None:
            continue
        data = g._data if hasattr(g, "grad_fn") else g     # a Tensor, an array or a scalar
        floating = data.dtype.kind in "fc" or data.dtype is BFLOAT16
        if floating and bool(xp_of(data).isnan(data).any()):
            err = RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.")
            annotate(err, node)
            raise err
