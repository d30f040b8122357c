"""Shape primitives: reshape, transpose/permute, expand and its adjoint sum_to_size."""
from __future__ import annotations

from ..dispatch import defop


def _reshape_fwd(xp, x, shape):
    return xp.reshape(x, shape)


defop("reshape", _reshape_fwd, (lambda F, g, out, x, shape: F.reshape(g, shape=x.shape),),
      meta=(0,), view=True, node_name="ViewBackward0")
defop("transpose", lambda xp, x, dim0, dim1: xp.swapaxes(x, dim0, dim1),
      (lambda F, g, out, x, dim0, dim1: F.transpose(g, dim0=dim0, dim1=dim1),), view=True)


def _inverse(dims):
    inv = [0] * len(dims)
    for i, d in enumerate(dims):
        inv[d % len(dims)] = i
    return tuple(inv)


defop("permute", lambda xp, x, dims: xp.transpose(x, dims),
      (lambda F, g, out, x, dims: F.permute(g, dims=_inverse(dims)),), view=True)


def expand_shape(shape, target) -> tuple:
    """``target`` with -1 entries taken from ``shape`` (aligned from the right)."""
    target = tuple(target)
    lead = len(target) - len(shape)
    if lead < 0:
        raise ValueError(f"the number of sizes provided ({len(target)}) must be greater or "
                         f"equal to the number of dimensions in the tensor ({len(shape)})")
    return tuple(shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(target))


def _expand_fwd(xp, x, shape):
    return xp.broadcast_to(x, expand_shape(x.shape, shape))


def sum_to_shape(xp, x, shape):
    """Sum ``x`` down to ``shape``, which it was broadcast from."""
    shape = tuple(shape)
    if x.shape == shape:
        return x
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        i + lead for i, s in enumerate(shape) if s == 1 and x.shape[i + lead] != 1)
    return xp.reshape(xp.sum(x, axis=axes), shape) if axes else xp.reshape(x, shape)


defop("expand", _expand_fwd, (lambda F, g, out, x, shape: F.sum_to_size(g, shape=x.shape),),
      meta=(0,), view=True)
defop("sum_to_size", sum_to_shape,
      (lambda F, g, out, x, shape: F.expand(g, shape=x.shape),), meta=(0,),
      node_name="SumToSizeBackward0")
