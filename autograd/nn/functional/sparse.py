"""Lookups by integer index: ``embedding`` and ``one_hot``.
"""
from __future__ import annotations

from ...ops import _call
from ..._tensor import Tensor


def embedding(input, weight, padding_idx=None):  # noqa: A002
    """Rows of ``weight`` at the integer ``input``; the ``padding_idx`` row gets no gradient."""
    idx = input._data if isinstance(input, Tensor) else input
    if getattr(idx, "dtype", None) is None or idx.dtype.kind not in "iu":
        raise TypeError(f"embedding: indices must be an integer tensor, got "
                        f"{getattr(idx, 'dtype', type(input).__name__)}")
    n = weight.shape[0]
    if idx.size:
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= n:
            raise IndexError(f"embedding: index {hi if hi >= n else lo} is out of range for "
                             f"a weight of {n} rows")
    if padding_idx is not None and padding_idx < 0:
        padding_idx += n
    return _call("embedding", weight, input, padding_idx=padding_idx)


def one_hot(t, num_classes: int = -1):
    """Integer classes as a one-hot int64 tensor (no gradient)."""
    xp = t.device.xp
    if num_classes < 0:
        num_classes = int(t._data.max()) + 1
    out = (t._data[..., None] == xp.arange(num_classes)).astype("int64")
    return Tensor._make(out, False, None, 0, [0], t.device)
