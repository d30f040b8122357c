"""Reductions over dims."""
from __future__ import annotations

from ..dispatch import defcomposite, defop, linear_in


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


defop("sum", _sum_fwd, (_sum_vjp,), jvp=linear_in(0), meta=(0,), public="sum", methods="sum")


@defcomposite("mean", public="mean", methods="mean")
def mean(x, dim=None, keepdim=False):
    """Mean over ``dim`` (all dims by default)."""
    dims = norm_dims(dim, x.ndim)
    count = 1
    for i, s in enumerate(x.shape):
        if dims is None or i in dims:
            count *= s
    return x.sum(dim=dim, keepdim=keepdim) * (1.0 / max(count, 1))


def _kept(F, t, shape, dim, keepdim):
    """A reduced result (or its gradient) reshaped so that it broadcasts against the input."""
    if keepdim or dim is None and t.ndim == len(shape):
        return t
    return F.reshape(t, shape=kept_shape(shape, dim))


def _one_dim(dim, ndim: int) -> int:
    if not isinstance(dim, int):
        raise TypeError(f"dim must be an int, got {type(dim).__name__}")
    return norm_dims(dim, ndim)[0]


def _reduce_like(F, values, dim, keepdim):
    """Sum ``values`` (the input's shape) over the reduced dims, as the reduction does."""
    return F.sum(values, dim=dim, keepdim=keepdim)


# amax/amin: the gradient is shared evenly among tied maxima (PyTorch's amax rule), and so is
# the tangent.
def _amax_fwd(xp, x, dim=None, keepdim=False):
    return xp.max(x, axis=norm_dims(dim, x.ndim), keepdims=keepdim)


def _amin_fwd(xp, x, dim=None, keepdim=False):
    return xp.min(x, axis=norm_dims(dim, x.ndim), keepdims=keepdim)


def _extreme_vjp(F, g, out, x, dim=None, keepdim=False):
    hit = F.to_dtype(x == _kept(F, out, x.shape, dim, keepdim), dtype=g.dtype)
    count = F.sum(hit, dim=dim, keepdim=True)
    return _kept(F, g, x.shape, dim, keepdim) * hit / count


def _extreme_jvp(F, t, out, x, dim=None, keepdim=False):
    hit = F.to_dtype(x == _kept(F, out, x.shape, dim, keepdim), dtype=t.dtype)
    count = F.sum(hit, dim=dim, keepdim=True)
    return _reduce_like(F, t * hit / count, dim, keepdim)


defop("amax", _amax_fwd, (_extreme_vjp,), jvp=(_extreme_jvp,), node_name="AmaxBackward0")
defop("amin", _amin_fwd, (_extreme_vjp,), jvp=(_extreme_jvp,), node_name="AminBackward0")


# max/min along one dim: values and indices (nout=2); the gradient goes to the index.
def _max_dim_fwd(xp, x, dim, keepdim=False):
    idx = xp.argmax(x, axis=dim, keepdims=True)
    vals = xp.take_along_axis(x, idx, axis=dim)
    if not keepdim:
        idx, vals = xp.squeeze(idx, axis=dim), xp.squeeze(vals, axis=dim)
    return vals, idx


def _min_dim_fwd(xp, x, dim, keepdim=False):
    idx = xp.argmin(x, axis=dim, keepdims=True)
    vals = xp.take_along_axis(x, idx, axis=dim)
    if not keepdim:
        idx, vals = xp.squeeze(idx, axis=dim), xp.squeeze(vals, axis=dim)
    return vals, idx


def _max_dim_vjp(F, g, out, x, dim, keepdim=False):
    kept = kept_shape(x.shape, dim)
    idx = out[1] if keepdim else out[1].reshape(kept)   # indices stay raw arrays
    return F.gather_backward(_kept(F, g[0], x.shape, dim, keepdim), idx, shape=x.shape, dim=dim)


def _max_dim_jvp(F, t, out, x, dim, keepdim=False):
    """Values: the tangent at the selected index; indices: none."""
    idx = out[1] if keepdim else F.reshape(out[1], shape=kept_shape(x.shape, dim))
    picked = F.gather(t, idx, dim=dim)
    return (picked if keepdim else F.reshape(picked, shape=out[0].shape)), None


defop("max", _max_dim_fwd, (_max_dim_vjp,), jvp=(_max_dim_jvp,), nout=2, meta=(0,))
defop("min", _min_dim_fwd, (_max_dim_vjp,), jvp=(_max_dim_jvp,), nout=2, meta=(0,))
defop("argmax", lambda xp, x, dim=None, keepdim=False: _arg(xp.argmax, x, dim, keepdim))
defop("argmin", lambda xp, x, dim=None, keepdim=False: _arg(xp.argmin, x, dim, keepdim))


def _arg(fn, x, dim, keepdim):
    if dim is None:
        idx = fn(x.reshape(-1))
        return idx.reshape((1,) * x.ndim) if keepdim else idx
    return fn(x, axis=dim, keepdims=keepdim)


# NOTE: a primitive for numerics: exp(x - max) never overflows, and the rule reuses the output.
def _logsumexp_fwd(xp, x, dim=None, keepdim=False):
    axes = norm_dims(dim, x.ndim)
    m = xp.max(x, axis=axes, keepdims=True)
    m = xp.where(xp.isfinite(m), m, 0)
    out = xp.log(xp.sum(xp.exp(x - m), axis=axes, keepdims=True)) + m
    return out if keepdim else (xp.squeeze(out, axis=axes) if axes is not None else out.reshape(()))


defop("logsumexp", _logsumexp_fwd,
      (lambda F, g, out, x, dim=None, keepdim=False:
       _kept(F, g, x.shape, dim, keepdim) * F.exp(x - _kept(F, out, x.shape, dim, keepdim)),),
      jvp=(lambda F, t, out, x, dim=None, keepdim=False: _reduce_like(
          F, t * F.exp(x - _kept(F, out, x.shape, dim, keepdim)), dim, keepdim),))


def _moved(xp, x, dims):
    """x with the reduced dims moved last and flattened into one: (kept dims..., n)."""
    axes = norm_dims(dims, x.ndim) or tuple(range(x.ndim))
    rest = [i for i in range(x.ndim) if i not in axes]
    moved = xp.transpose(x, rest + list(axes))
    return moved.reshape(moved.shape[:len(rest)] + (-1,)), rest + list(axes)


def _prod_others_fwd(xp, x, dim=None):
    """For each element, the product of the other elements of its reduction (exact with zeros)."""
    flat, order = _moved(xp, x, dim)
    ones = xp.ones(flat.shape[:-1] + (1,), x.dtype)
    left = xp.cumprod(xp.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    right = xp.flip(xp.cumprod(xp.flip(xp.concatenate([flat[..., 1:], ones], axis=-1), -1),
                               axis=-1), -1)
    res = (left * right).reshape(tuple(x.shape[i] for i in order))
    return xp.transpose(res, [order.index(i) for i in range(x.ndim)])


defop("prod", lambda xp, x, dim=None, keepdim=False:
      xp.prod(x, axis=norm_dims(dim, x.ndim), keepdims=keepdim),
      (lambda F, g, out, x, dim=None, keepdim=False:
       _kept(F, g, x.shape, dim, keepdim) * F.prod_others(x, dim=dim),),
      jvp=(lambda F, t, out, x, dim=None, keepdim=False: _reduce_like(
          F, t * F.prod_others(x, dim=dim), dim, keepdim),))
# NOTE: prod_others has no rule of its own, so prod is differentiable once (not twice).
defop("prod_others", _prod_others_fwd)


def _count(shape, dim) -> int:
    dims = norm_dims(dim, len(shape))
    n = 1
    for i, s in enumerate(shape):
        if dims is None or i in dims:
            n *= s
    return n


@defcomposite("var", public="var", methods="var")
def var(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance over ``dim``; ``correction`` (or ``unbiased``: 1 or 0) is subtracted from N."""
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    centered = x - x.mean(dim=dim, keepdim=True)
    n = _count(x.shape, dim)
    return (centered * centered).sum(dim=dim, keepdim=keepdim) * (1.0 / max(n - correction, 0))


@defcomposite("std", public="std", methods="std")
def std(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Standard deviation: ``sqrt(var(...))``."""
    return var(x, dim, unbiased, keepdim, correction=correction).sqrt()


@defcomposite("norm", public="norm", methods="norm")
def norm(x, p=2, dim=None, keepdim=False):
    """Vector p-norm over ``dim`` (all dims by default); p in {2, 1, inf, -inf, other > 0}."""
    from . import _call  # noqa: PLC0415

    if p == 2 or p == "fro":
        return (x * x).sum(dim=dim, keepdim=keepdim).sqrt()
    a = _call("abs", x)
    if p == 1:
        return a.sum(dim=dim, keepdim=keepdim)
    if p == float("inf"):
        return _call("amax", a, dim=dim, keepdim=keepdim)
    if p == float("-inf"):
        return _call("amin", a, dim=dim, keepdim=keepdim)
    return (a ** p).sum(dim=dim, keepdim=keepdim) ** (1.0 / p)
