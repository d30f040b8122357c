"""Reductions over dims (scans, sorting and order statistics are in ``scans.py``)."""
from __future__ import annotations

import math

import numpy

from .. import backend
from ..dispatch import (FLOATING, OPS, SELF_ADJOINT, apply_op, defcomposite, defop, expose,
                        linear_in)
from ..promotion import torch_name


def norm_dims(dim, ndim: int):
    """``dim`` (None, int or sequence, negatives allowed) as a sorted tuple of axes, or None."""
    if dim is None:
        return None
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    out = []
    # A 0-d tensor accepts dim 0 and -1, as PyTorch's: there is no axis to reduce.
    for d in dims:
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[{-max(ndim, 1)}, {max(ndim, 1) - 1}], but got {d})")
        if ndim:
            out.append(d % ndim)
    return tuple(sorted(set(out)))


def kept_shape(shape, dim) -> tuple:
    """The shape a reduction over ``dim`` gives with keepdim=True."""
    dims = norm_dims(dim, len(shape))
    if dims is None:
        return (1,) * len(shape)
    return tuple(1 if i in dims else s for i, s in enumerate(shape))


def _int_acc(x):
    """The accumulator dtype of sum, prod and their scans: PyTorch's int64 for every integer
    and bool input, where NumPy accumulates unsigned integers in uint64; None otherwise."""
    return numpy.int64 if x.dtype.kind == "u" else None


def _sum_fwd(xp, x, dim=None, keepdim=False):
    # The method, not xp.sum (the same reduction without NumPy's Python wrapper: 1 us less).
    return x.sum(axis=norm_dims(dim, x.ndim), keepdims=keepdim, dtype=_int_acc(x))


def _sum_vjp(F, g, out, x, dim=None, keepdim=False):
    if not keepdim and dim is not None:
        g = F.reshape(g, shape=kept_shape(x.shape, dim))
    return F.expand(g, shape=x.shape)


# Over all dims SumBackward0, over some (``sum.dim_IntList``) SumBackward1, as PyTorch's.
_SUM = defop("sum", _sum_fwd, (_sum_vjp,), jvp=linear_in(0), meta=(0,))
_SUM_DIM = defop("sum.dim", _sum_fwd, (_sum_vjp,), jvp=linear_in(0), meta=(0,),
                 node_name="SumBackward1")


@expose(public="sum", methods="sum")
def sum(x, dim=None, keepdim=False, *, dtype=None):  # noqa: A001 - PyTorch's name
    """Sum over ``dim`` (an int or a tuple; all dims by default); ``dtype``: ``x`` is cast to
    it first (a recorded cast, so the gradient reaches ``x`` in its own dtype), as PyTorch's."""
    if dtype is not None:
        x = x.to(dtype=dtype)
    return apply_op(_SUM if dim is None else _SUM_DIM, (x,), {"dim": dim, "keepdim": keepdim})


# NOTE: a primitive for PyTorch's node (MeanBackward0 over all dims, MeanBackward1 over
# some) and one node instead of two; its value is PyTorch's, sum / n (the composite's
# sum * (1/n) could differ in the last bit).
def require_floating(x, message) -> None:
    """PyTorch's refusal of an integer or bool input to a floating reduction (``message`` with
    ``{}`` for PyTorch's dtype name), where NumPy would answer in float64 or, for a norm,
    truncate back to the integers."""
    if x.dtype.kind not in "fc":
        raise RuntimeError(message.format(torch_name(x.dtype)))


def _mean_fwd(xp, x, dim=None, keepdim=False):
    require_floating(x, "mean(): could not infer output dtype. Input dtype must be either a "
                        "floating point or complex dtype. Got: {}")
    total = _sum_fwd(xp, x, dim, keepdim)
    n = _count(x.shape, dim)
    return total / n if n else total + xp.nan   # PyTorch: the mean of nothing is NaN


def _mean_vjp(F, g, out, x, dim=None, keepdim=False):
    # PyTorch's _safe_size: a zero-size reduction divides by 1.
    return _sum_vjp(F, g, out, x, dim, keepdim) / max(_count(x.shape, dim), 1)


_MEAN = defop("mean", _mean_fwd, (_mean_vjp,), jvp=linear_in(0), meta=(0,))
_MEAN_DIM = defop("mean.dim", _mean_fwd, (_mean_vjp,), jvp=linear_in(0), meta=(0,),
                  node_name="MeanBackward1")


@expose(public="mean", methods="mean")
def mean(x, dim=None, keepdim=False, *, dtype=None):
    """Mean over ``dim`` (an int or a tuple; all dims by default); ``dtype`` as :func:`sum`'s
    (the mean of an integer tensor with ``dtype=float32`` works, as PyTorch's)."""
    if dtype is not None:
        x = x.to(dtype=dtype)
    return apply_op(_MEAN if dim is None else _MEAN_DIM, (x,), {"dim": dim, "keepdim": keepdim})


# NOTE: a primitive for PyTorch's node (NansumBackward0) and its rule, ``g * ~isnan(x)``: a
# product, so an inf or NaN gradient reaches a NaN entry as NaN (a select would give 0).
def _nansum_fwd(xp, x, dim=None, keepdim=False):
    return xp.nansum(x, axis=norm_dims(dim, x.ndim), keepdims=keepdim, dtype=_int_acc(x))


def _nansum_vjp(F, g, out, x, dim=None, keepdim=False):
    return _sum_vjp(F, g, out, x, dim, keepdim) * F.to_dtype(~F.isnan(x), dtype=g.dtype)


defop("nansum", _nansum_fwd, (_nansum_vjp,),
      jvp=(lambda F, t, out, x, dim=None, keepdim=False: _nansum_fwd_like(F, t, x, dim, keepdim),))


def _nansum_fwd_like(F, t, x, dim, keepdim):
    return F.sum(F.where(F.isnan(x), 0.0, t), dim=dim, keepdim=keepdim)


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
def _evenly_vjp(F, g, out, x, dim=None, keepdim=False):
    """PyTorch's evenly_distribute_backward: ``g / count`` at each entry equal to the result
    (a NaN result: at each NaN), filled in, so the other entries get 0 whatever ``g`` is."""
    hit = (x == out) | (F.isnan(x) & F.isnan(out))
    share = g / F.sum(F.to_dtype(hit, dtype=g.dtype))
    return F.where(hit, share, 0.0)


# max()/min() over all of a tensor: PyTorch's MaxBackward1/MinBackward1, whose rule shares the
# gradient among ties as amax's does, but with a fill rather than a product (an inf gradient
# gives the other entries 0, where amax's gives NaN) and to a NaN result's NaN entries.
defop("max.full", _amax_fwd, (_evenly_vjp,), jvp=(_extreme_jvp,), node_name="MaxBackward1")
defop("min.full", _amin_fwd, (_evenly_vjp,), jvp=(_extreme_jvp,), node_name="MinBackward1")


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


# An integer input gives the default float, as PyTorch's (FLOATING promotion).
defop("logsumexp", _logsumexp_fwd,
      (lambda F, g, out, x, dim=None, keepdim=False:
       _kept(F, g, x.shape, dim, keepdim) * F.exp(x - _kept(F, out, x.shape, dim, keepdim)),),
      jvp=(lambda F, t, out, x, dim=None, keepdim=False: _reduce_like(
          F, t * F.exp(x - _kept(F, out, x.shape, dim, keepdim)), dim, keepdim),),
      promote=FLOATING)


def _moved(xp, x, dims):
    """x with the reduced dims moved last and flattened into one: (kept dims..., n)."""
    axes = norm_dims(dims, x.ndim)
    axes = tuple(range(x.ndim)) if axes is None else axes
    rest = [i for i in range(x.ndim) if i not in axes]
    moved = xp.transpose(x, rest + list(axes))
    n = 1
    for i in axes:
        n *= x.shape[i]
    # An explicit n, not -1: a zero-size input has no -1 to infer.
    return moved.reshape(moved.shape[:len(rest)] + (n,)), rest + list(axes)


def _unmoved(xp, flat, shape, order):
    """The inverse of :func:`_moved` for an array of the flattened layout."""
    res = flat.reshape(tuple(shape[i] for i in order))
    return xp.transpose(res, [order.index(i) for i in range(len(shape))])


def _prod_others_fwd(xp, x, dim=None):
    """For each element, the product of the other elements of its reduction (exact with zeros)."""
    flat, order = _moved(xp, x, dim)
    if flat.shape[-1] == 0:   # empty groups: nothing to multiply, an empty result
        return x.copy()
    ones = xp.ones(flat.shape[:-1] + (1,), x.dtype)
    left = xp.cumprod(xp.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    right = xp.flip(xp.cumprod(xp.flip(xp.concatenate([flat[..., 1:], ones], axis=-1), -1),
                               axis=-1), -1)
    return _unmoved(xp, left * right, x.shape, order)


def _prod_others_vjp(F, g, out, x, dim=None):
    """d prod_others(x)_i / d x_j = prod of x over the group without i and j (j != i), which is
    prod_others of x with x_i set to 1, read at j: an (n, n) table per group, built from
    prod_others itself so that every further derivative is exact, zeros included. (Only a
    double backward of prod comes here, so the n*n memory is paid only there.)"""
    ndim = len(x.shape)
    axes = norm_dims(dim, ndim)
    axes = tuple(range(ndim)) if axes is None else axes
    rest = [i for i in range(ndim) if i not in axes]
    order = rest + list(axes)
    n = 1
    for i in axes:
        n *= x.shape[i]
    lead = tuple(x.shape[i] for i in rest)
    flat = F.reshape(F.permute(x, dims=tuple(order)), shape=lead + (n,))
    gflat = F.reshape(F.permute(g, dims=tuple(order)), shape=lead + (n, 1))
    eye = _eye(x, n)
    # rows[..., i, :] = the group with its i-th entry replaced by 1
    rows = F.where(eye, 1.0, F.reshape(flat, shape=lead + (1, n)))
    table = F.where(eye, 0.0, F.prod_others(rows, dim=-1))
    grad = F.sum(gflat * table, dim=-2)
    moved = F.reshape(grad, shape=tuple(x.shape[i] for i in order))
    return F.permute(moved, dims=tuple(order.index(i) for i in range(ndim)))


def _xp_of(x):
    """The array module of ``x``'s device (``x``: an array, or a tensor under create_graph)."""
    return x.device.xp if hasattr(x, "requires_grad") else backend.array_module(x)


def _eye(x, n):
    """A boolean identity on ``x``'s device."""
    return _xp_of(x).eye(n, dtype=bool)


def _prod_fwd(xp, x, dim=None, keepdim=False):
    return xp.prod(x, axis=norm_dims(dim, x.ndim), keepdims=keepdim, dtype=_int_acc(x))


def _prod_vjp(F, g, out, x, dim=None, keepdim=False):
    """PyTorch's prod_backward: ``g * (out / x)`` while the input holds no zero (so an inf
    entry's own gradient is inf / inf = NaN, as PyTorch's), else ``g`` times the product of
    the others; over all dims, two zeros or more give 0 whatever ``g`` is (PyTorch's
    ``zeros_like`` outside grad mode; under create_graph it takes the product of the others,
    whose derivative is the Hessian). Selects, not a branch: no device sync."""
    g = _kept(F, g, x.shape, dim, keepdim)
    zero = x == 0
    zeros = F.sum(F.to_dtype(zero, dtype=g.dtype))
    quotient = g * (_kept(F, out, x.shape, dim, keepdim) / F.where(zero, 1.0, x))
    grad = F.where(zeros == 0, quotient, g * F.prod_others(x, dim=dim))
    if dim is None and not hasattr(x, "requires_grad"):   # arrays: not under create_graph
        grad = F.where(zeros > 1, 0.0, grad)
    return grad


def _prod_jvp(F, t, out, x, dim=None, keepdim=False):
    return _reduce_like(F, t * F.prod_others(x, dim=dim), dim, keepdim)


# Over all dims ProdBackward0, over some (``prod.dim_int``) ProdBackward1, as PyTorch's.
_PROD = defop("prod", _prod_fwd, (_prod_vjp,), jvp=(_prod_jvp,))
_PROD_DIM = defop("prod.dim", _prod_fwd, (_prod_vjp,), jvp=(_prod_jvp,),
                  node_name="ProdBackward1")
# Its Jacobian (the products without two entries) is symmetric, so the reverse rule serves
# forward mode too.
defop("prod_others", _prod_others_fwd, (_prod_others_vjp,), jvp=SELF_ADJOINT)


def _count(shape, dim) -> int:
    dims = norm_dims(dim, len(shape))
    n = 1
    for i, s in enumerate(shape):
        if dims is None or i in dims:
            n *= s
    return n


def _divisor(n: int, correction) -> float:
    """1 / (N - correction), or inf when N <= correction (PyTorch's 0/0 = nan, x/0 = inf)."""
    d = n - correction
    return 1.0 / d if d > 0 else math.inf


def _correction(unbiased, correction):
    """PyTorch's: ``correction`` wins; else ``unbiased`` (default True) is 1, False 0."""
    if correction is not None:
        return correction
    return 1 if unbiased is None or unbiased else 0


# NOTE: var and std are primitives for PyTorch's nodes (VarBackward0, StdBackward0) and one
# node instead of five; the forward is the composite's arithmetic, the sum of squared
# deviations times 1 / (N - correction).
def _var_fwd(xp, x, dim=None, correction=1, keepdim=False):
    require_floating(x, "std and var only support floating point and complex dtypes")
    c = x - _mean_fwd(xp, x, dim, True)
    ss = xp.sum(c * c, axis=norm_dims(dim, x.ndim), keepdims=keepdim)
    return ss * _divisor(_count(x.shape, dim), correction)


def _var_vjp(F, g, out, x, dim=None, correction=1, keepdim=False):
    """PyTorch's var_backward: 2 / (N - correction) * g * (x - mean)."""
    scale = 2.0 * _divisor(_count(x.shape, dim), correction)
    return _kept(F, g, x.shape, dim, keepdim) * (x - F.mean(x, dim=dim, keepdim=True)) * scale


def _std_vjp(F, g, out, x, dim=None, correction=1, keepdim=False):
    """PyTorch's std_backward: var's rule at g / (2 std), zero where std is 0 (a constant
    group), where the plain quotient would give NaN."""
    scaled = _safe_recip_scale(F, _kept(F, g, x.shape, dim, keepdim),
                               _kept(F, out, x.shape, dim, keepdim), 1)
    return scaled * (x - F.mean(x, dim=dim, keepdim=True)) * _divisor(_count(x.shape, dim), correction)


def _reduction_jvp(vjp):
    """Forward-mode rule of a reduction from its reverse rule: each entry's partial
    derivative (the rule at g = 1) times its tangent, summed over the reduced dims."""

    def jvp(F, t, out, x, *args, dim=None, keepdim=False, **kwargs):
        ones = F.zeros_like(out) + 1.0
        return _reduce_like(F, vjp(F, ones, out, x, *args, dim=dim, keepdim=keepdim, **kwargs)
                            * t, dim, keepdim)

    return jvp


defop("var", _var_fwd, (_var_vjp,), jvp=(_reduction_jvp(_var_vjp),))
defop("std", lambda xp, x, dim=None, correction=1, keepdim=False:
      xp.sqrt(_var_fwd(xp, x, dim, correction, keepdim)), (_std_vjp,),
      jvp=(_reduction_jvp(_std_vjp),))


@expose(public="var", methods="var")
def var(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance over ``dim``; ``correction`` (or ``unbiased``: 1 or 0) is subtracted from N."""
    norm_dims(dim, x.ndim)
    return apply_op(OPS["var"], (x,), {"dim": dim, "correction": _correction(unbiased, correction),
                                       "keepdim": keepdim})


@expose(public="std", methods="std")
def std(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Standard deviation over ``dim``: the square root of :func:`var`."""
    norm_dims(dim, x.ndim)
    return apply_op(OPS["std"], (x,), {"dim": dim, "correction": _correction(unbiased, correction),
                                       "keepdim": keepdim})


# --------------------------------------------------------------------------- vector norms


def _vector_norm_fwd(xp, x, ord=2, dim=None, keepdim=False):  # noqa: A002 - PyTorch's names
    require_floating(x, "linalg.vector_norm: Expected a floating point or complex tensor as "
                        "input. Got {}")
    axes = norm_dims(dim, x.ndim)
    a = xp.abs(x)
    if ord == 2:
        out = xp.sqrt(xp.sum(x * x, axis=axes, keepdims=keepdim))
    elif ord == 1:
        out = xp.sum(a, axis=axes, keepdims=keepdim)
    elif ord == math.inf:
        out = xp.max(a, axis=axes, keepdims=keepdim)
    elif ord == -math.inf:
        out = xp.min(a, axis=axes, keepdims=keepdim)
    elif ord == 0:
        out = xp.sum(x != 0, axis=axes, keepdims=keepdim)
    else:
        out = xp.sum(a ** ord, axis=axes, keepdims=keepdim) ** (1.0 / ord)
    return xp.asarray(out, dtype=x.dtype)


def _safe_recip_scale(F, g, n, power):
    """``g / n**power``, 0 where ``n == 0`` (PyTorch masks the same); the division never sees
    a 0, so no inf reaches a second derivative."""
    zero = n == 0
    safe = F.where(zero, 1.0, n)
    return F.where(zero, 0.0, g / (safe if power == 1 else safe ** power))


def _vector_norm_vjp(F, g, out, x, ord=2, dim=None, keepdim=False):  # noqa: A002
    """PyTorch's norm_backward: zero gradient where the norm is 0; ties of the inf-norm share
    the gradient evenly."""
    g = _kept(F, g, x.shape, dim, keepdim)
    n = _kept(F, out, x.shape, dim, keepdim)
    if ord == 0:
        return F.zeros_like(x)
    if ord == 1:
        return F.sign(x) * g
    if ord == 2:
        # g times the masked quotient (not a masked product): an inf or NaN gradient at a
        # zero norm gives NaN, as PyTorch's ``grad * (self / norm).masked_fill_(norm == 0, 0)``.
        return g * (x * _safe_recip_scale(F, 1.0, n, 1))
    a = F.abs(x)
    if ord in (math.inf, -math.inf):
        # PyTorch's: the entries equal to the norm, or NaN, share g (sign(NaN) is 0, so a NaN
        # norm gives 0 to every entry rather than 0 / 0).
        hit = F.to_dtype((a == n) | F.isnan(a), dtype=x.dtype)
        return F.sign(x) * (g / F.sum(hit, dim=dim, keepdim=True) * hit)
    if ord < 1:
        zero = x == 0
        scaled = F.where(zero, 0.0, F.sign(x) * F.where(zero, 1.0, a) ** (ord - 1))
        return scaled * g * n ** (1 - ord)
    scaled = F.sign(x) * a ** (ord - 1) if ord < 2 else x * a ** (ord - 2)
    return scaled * _safe_recip_scale(F, g, n, ord - 1)


defop("linalg_vector_norm", _vector_norm_fwd, (_vector_norm_vjp,),
      jvp=(_reduction_jvp(_vector_norm_vjp),),
      node_name="LinalgVectorNormBackward0")


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """``torch.linalg.vector_norm``: the ``ord``-norm of ``x`` over ``dim`` (all dims by
    default) for any real ``ord`` (inf, -inf and 0 included)."""
    if dtype is not None:
        x = x.to(dtype=dtype)
    if isinstance(dim, list):
        dim = tuple(dim)
    norm_dims(dim, x.ndim)
    return apply_op(OPS["linalg_vector_norm"], (x,), {"ord": float(ord), "dim": dim, "keepdim": keepdim})


@defcomposite("norm", public="norm", methods="norm")
def norm(x, p="fro", dim=None, keepdim=False, dtype=None):
    """Vector p-norm over ``dim`` (all dims by default); ``p`` any real, inf or "fro" (2)."""
    if p == "fro" or p is None:
        p = 2
    if isinstance(p, str):
        raise RuntimeError(f"norm: only vector norms (a number or 'fro') are supported, got {p!r}")
    return vector_norm(x, p, dim, keepdim, dtype=dtype)


# PyTorch's dist: the p-norm of the difference, one node (DistBackward0) whose rule is the
# vector norm's (norm_backward) on ``a - b``.
def _dist_fwd(xp, a, b, p=2.0):
    for v in (a, b):
        require_floating(v, "norm(): input dtype should be either floating point or complex. "
                            "Got {} instead.")
    return _vector_norm_fwd(xp, a - b, p)


def _dist_vjp(F, g, out, a, b, p=2.0):
    return _vector_norm_vjp(F, g, out, a - b, p)


defop("dist", _dist_fwd,
      (_dist_vjp, lambda F, g, out, a, b, p=2.0: -_dist_vjp(F, g, out, a, b, p)),
      jvp=(lambda F, t, out, a, b, p=2.0: _reduction_jvp(_dist_t)(F, t, out, a, b, p=p),
           lambda F, t, out, a, b, p=2.0: -_reduction_jvp(_dist_t)(F, t, out, a, b, p=p)))


def _dist_t(F, g, out, a, b, p=2.0, dim=None, keepdim=False):
    return _vector_norm_vjp(F, g, out, a - b, p)


# --------------------------------------------------------------------------- logical reductions
# Not differentiable: booleans (all, any) and a count (count_nonzero, int64), as PyTorch's.


def _logical(fn):
    return lambda xp, x, dim=None, keepdim=False: fn(x, axis=norm_dims(dim, x.ndim),
                                                     keepdims=keepdim)


defop("all", lambda xp, x, dim=None, keepdim=False: _logical(xp.all)(xp, x, dim, keepdim),
      public="all", methods="all")
defop("any", lambda xp, x, dim=None, keepdim=False: _logical(xp.any)(xp, x, dim, keepdim),
      public="any", methods="any")
defop("count_nonzero", lambda xp, x, dim=None: xp.asarray(
    xp.count_nonzero(x, axis=norm_dims(dim, x.ndim)), dtype="int64"),
      public="count_nonzero", methods="count_nonzero")
