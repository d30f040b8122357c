"""What the topics share: a pair argument (``kernel_size=3`` or ``(3, 2)``) and constant
(no-grad) tensors built on an input's device.
"""
from __future__ import annotations

import numpy

from ... import backend
from ...dtypes import is_floating
from ..._tensor import Tensor


def _pair(v, name, op):
    if isinstance(v, int):
        return (v, v)
    v = tuple(int(a) for a in v)
    if len(v) != 2:
        raise ValueError(f"{op}: {name} must be an int or a pair, got {v}")
    return v


def _const(array, like):
    """A constant (no-grad) tensor from a host array, on ``like``'s device and dtype."""
    arr = numpy.asarray(array, dtype=like.dtype if is_floating(like.dtype) else None)
    return Tensor._make(backend.to_device(arr, like.device), False, None, 0, [0], like.device)


def _int_like(t):
    # A zero-size int64 tensor on t's device: _const's dtype/device template for indices.
    return Tensor._make(t.device.xp.zeros(0, dtype=numpy.int64), False, None, 0, [0], t.device)
