"""Reductions over dims."""
from __future__ import annotations

from ..dispatch import defcomposite, defop


def norm_dims(dim, ndim: int):
    """``dim`` (None, int or sequence, negatives allowed) as a sorted tuple of axes, or None."""
    if dim is None:
        return None
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    out = []
    for d in dims:
        if not -ndim <= d < max(ndim, 1):
            raise IndexError(f"dimension {d} is out of range for a tensor of {ndim} dims")
        out.append(d % max(ndim, 1))
    return tuple(sorted(set(out)))


def kept_shape(shape, dim) -> tuple:
    """The shape a reduction over ``dim`` gives with keepdim=True."""
    dims = norm_dims(dim, len(shape))
    if dims is None:
        return (1,) * len(shape)
    return tuple(1 if i in dims else s for i, s in enumerate(shape))


def _sum_fwd(xp, x, dim=None, keepdim=False):
    return xp.sum(x, axis=norm_dims(dim, x.ndim), keepdims=keepdim)


def _sum_vjp(F, g, out, x, dim=None, keepdim=False):
    if not keepdim and dim is not None:
        g = F.reshape(g, shape=kept_shape(x.shape, dim))
    return F.expand(g, shape=x.shape)


defop("sum", _sum_fwd, (_sum_vjp,), meta=(0,))


@defcomposite("mean")
def mean(x, dim=None, keepdim=False):
    """Mean over ``dim`` (all dims by default)."""
    dims = norm_dims(dim, x.ndim)
    count = 1
    for i, s in enumerate(x.shape):
        if dims is None or i in dims:
            count *= s
    return x.sum(dim=dim, keepdim=keepdim) * (1.0 / max(count, 1))
