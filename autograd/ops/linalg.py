"""Matrix products."""
from __future__ import annotations

from ..dispatch import defop


def _check_matmul(a, b):
    if getattr(a, "ndim", 0) == 0 or getattr(b, "ndim", 0) == 0:
        raise RuntimeError("matmul: both arguments need at least 1 dimension, got shapes "
                           f"{list(getattr(a, 'shape', ()))} and {list(getattr(b, 'shape', ()))}")
    k_a = a.shape[-1]
    k_b = b.shape[-2] if b.ndim > 1 else b.shape[0]
    if k_a != k_b:
        raise RuntimeError(f"matmul: shapes {list(a.shape)} and {list(b.shape)} cannot be "
                           f"multiplied ({k_a} != {k_b})")


def _grad_a(F, g, out, a, b):
    if a.ndim == 1 and b.ndim == 1:
        return g * b
    if b.ndim == 1:   # (..., n) @ (n,) -> (...)
        return F.reshape(g, shape=tuple(g.shape) + (1,)) * b
    if a.ndim == 1:   # (n,) @ (..., n, m) -> (..., m); the engine sums (..., 1, n) to (n,)
        return F.matmul(F.reshape(g, shape=tuple(g.shape[:-1]) + (1, g.shape[-1])),
                        F.transpose(b, dim0=-1, dim1=-2))
    return F.matmul(g, F.transpose(b, dim0=-1, dim1=-2))


def _grad_b(F, g, out, a, b):
    if a.ndim == 1 and b.ndim == 1:
        return g * a
    if a.ndim == 1:   # outer product of a with each row of g
        return F.reshape(a, shape=(a.shape[0], 1)) * F.reshape(
            g, shape=tuple(g.shape[:-1]) + (1, g.shape[-1]))
    if b.ndim == 1:   # (..., n) @ (n,): the engine sums the leading dims
        return a * F.reshape(g, shape=tuple(g.shape) + (1,))
    return F.matmul(F.transpose(a, dim0=-1, dim1=-2), g)


defop("matmul", lambda xp, a, b: xp.matmul(a, b), (_grad_a, _grad_b), check=_check_matmul,
      node_name="MmBackward0")
