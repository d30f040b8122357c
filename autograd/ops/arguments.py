"""What the public wrappers share: calling a primitive by name, and checking a dim.

The wrappers (``shape_api``, ``elementwise_api``, ``indexing_api``, ``reduction_api``,
``linalg_api``, ``casts``) sit beside the op family whose arguments they check; these helpers
are the few they all use, kept here so that no wrapper module has to import another for them.
"""
from __future__ import annotations

import builtins

from ..dispatch import OPS, apply_op
from .reduction import norm_dims


def _call(name, *inputs, **attrs):
    """Apply the primitive ``name`` to ``inputs`` with attributes ``attrs``."""
    return apply_op(OPS[name], inputs, attrs or None)


def _ndim(x) -> int:
    return x.ndim if hasattr(x, "ndim") else 0


def _dim(dim, ndim, op) -> int:
    """One dim, negatives allowed, checked against ``ndim``."""
    if not isinstance(dim, int):
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__}")
    if not -builtins.max(ndim, 1) <= dim < builtins.max(ndim, 1):
        raise IndexError(f"{op}: dimension {dim} is out of range for a tensor of {ndim} dims")
    return dim % builtins.max(ndim, 1)


def _broadcast_shapes(a, b):
    n = builtins.max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    return tuple(builtins.max(x, y) for x, y in zip(a, b))


def _reduction_dim(dim, ndim) -> int:
    """One dim, checked with PyTorch's IndexError text (a 0-d tensor takes 0 and -1)."""
    if not isinstance(dim, int):
        raise TypeError(f"dim must be an int, got {type(dim).__name__}")
    dims = norm_dims(dim, ndim)
    return dims[0] if dims else 0
