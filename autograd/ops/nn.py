"""Neural-network primitives: linear, conv2d (im2col + matmul), softmax and log_softmax, gelu.

Everything else in ``autograd.nn.functional`` is a composite of primitives. These few are
primitives for speed or numerics, each with a ``NOTE`` saying which.
"""
from __future__ import annotations

import math

import numpy

from .. import backend
from ..backend import matmul
from ..dispatch import SELF_ADJOINT, TensorF, defop, linear_in
from ..promotion import torch_name
from .._tensor import Tensor
from . import conv_arrays
from .shape import _pad_fwd, ones_vector


# --------------------------------------------------------------------------- linear

# NOTE: a primitive for speed: ``x @ W.T + b`` in one node, the bias added in place, and the
# weight gradient as a single GEMM over the flattened batch (no transposed copies).
def _linear_fwd(xp, x, weight, bias=None):
    if x.ndim > 2 and x.flags.c_contiguous:
        # One GEMM over all rows: matmul of a stacked (N, T, in) input runs one small GEMM
        # per leading index (35% slower at (16, 64, 128) @ (128, 384)).
        out = matmul(xp, x.reshape(_rows(x), x.shape[-1]), weight.T)
        out = out.reshape(*x.shape[:-1], weight.shape[0])
    else:
        out = matmul(xp, x, weight.T)
    if bias is not None:
        out += bias
    return out


def _linear_grad_input(F, g, out, x, weight, bias):
    if g.ndim > 2:   # one GEMM over all rows, as the forward
        g2 = F.reshape(g, shape=(_rows(g), g.shape[-1]))
        return F.reshape(F.matmul(g2, weight), shape=(*g.shape[:-1], weight.shape[1]))
    return F.matmul(g, weight)


def _rows(a) -> int:
    rows = 1
    for s in a.shape[:-1]:
        rows *= s
    return rows


def _linear_grad_weight(F, g, out, x, weight, bias):
    if g.ndim == 2:   # (batch, features): g.T @ x as it is, no reshapes
        return F.matmul(F.transpose(g, dim0=0, dim1=1), x)
    # Explicit row counts, not -1: a zero-size input (no features, or no rows) has no -1 to
    # infer, and its weight gradient is zeros.
    rows = _rows(x)
    g2 = F.reshape(g, shape=(rows, g.shape[-1]))
    x2 = F.reshape(x, shape=(rows, x.shape[-1]))
    return F.matmul(F.transpose(g2, dim0=0, dim1=1), x2)


def _check_linear(x, weight, bias=None):
    if getattr(weight, "ndim", 0) != 2:
        raise RuntimeError(f"linear: weight must be 2-D (out_features, in_features), got shape "
                           f"{list(getattr(weight, 'shape', ()))}")
    if getattr(x, "ndim", 0) < 1 or x.shape[-1] != weight.shape[1]:
        raise RuntimeError(f"linear: input has {x.shape[-1] if getattr(x, 'ndim', 0) else 0} "
                           f"features (shape {list(getattr(x, 'shape', ()))}), weight expects "
                           f"{weight.shape[1]} (weight shape {list(weight.shape)})")
    if bias is not None and tuple(bias.shape) not in ((weight.shape[0],), ()):
        raise RuntimeError(f"linear: bias has shape {list(bias.shape)}, expected "
                           f"[{weight.shape[0]}] for weight of shape {list(weight.shape)}")


# With a bias AddmmBackward0, without MmBackward0, as PyTorch's 2-D linear (for more dims
# PyTorch adds a view node over these; one node here).
for _name, _node in (("linear", "AddmmBackward0"), ("linear.mm", "MmBackward0")):
    defop(_name, _linear_fwd,
          (_linear_grad_input,
           _linear_grad_weight,
           lambda F, g, out, x, weight, bias: g),
          jvp=(lambda F, t, out, x, weight, bias: F.linear(t, weight, None),
               lambda F, t, out, x, weight, bias: F.linear(x, t, None),
               lambda F, t, out, x, weight, bias: t),
          check=_check_linear, node_name=_node)


# --------------------------------------------------------------------------- im2col / col2im


def conv_out_size(size, k, stride, padding, dilation):
    return (size + 2 * padding - dilation * (k - 1) - 1) // stride + 1


def _im2col_fwd(xp, x, kernel, stride, dilation):
    """(N, C, H, W) -> (N, C, kh, kw, Ho, Wo): every kernel tap's strided view, copied once."""
    return conv_arrays.im2col(xp, x, kernel, stride, dilation)


def _col2im_fwd(xp, cols, shape, kernel, stride, dilation):
    """The adjoint of im2col: each tap's values added back at the positions it read."""
    return conv_arrays.col2im(xp, cols, shape, kernel, stride, dilation)


defop("im2col", _im2col_fwd,
      (lambda F, g, out, x, kernel, stride, dilation: F.col2im(
          g, shape=x.shape, kernel=kernel, stride=stride, dilation=dilation),),
      jvp=linear_in(0), meta=(0,))
defop("col2im", _col2im_fwd,
      (lambda F, g, out, cols, shape, kernel, stride, dilation: F.im2col(
          g, kernel=kernel, stride=stride, dilation=dilation),), jvp=linear_in(0))


# --------------------------------------------------------------------------- conv2d


def _pads(padding):
    ph, pw = padding
    return (pw, pw, ph, ph)


def _check_conv2d(x, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                  groups=1):
    xs, ws = list(getattr(x, "shape", ())), list(getattr(weight, "shape", ()))
    if len(xs) != 4:
        raise RuntimeError(f"conv2d: expected a 4-D input (N, C, H, W), got shape {xs}")
    if len(ws) != 4:
        raise RuntimeError(f"conv2d: expected a 4-D weight (out, in/groups, kH, kW), got shape {ws}")
    if ws[0] % groups:
        raise RuntimeError(f"conv2d: weight has {ws[0]} output channels, not divisible by "
                           f"groups={groups}")
    if xs[1] != ws[1] * groups:
        raise RuntimeError(f"conv2d: input has {xs[1]} channels, weight expects "
                           f"{ws[1] * groups} (weight shape {ws}, groups={groups})")
    if bias is not None and list(bias.shape) != [ws[0]]:
        raise RuntimeError(f"conv2d: bias has shape {list(bias.shape)}, expected [{ws[0]}]")
    for d, name in ((0, "height"), (1, "width")):
        if conv_out_size(xs[2 + d], ws[2 + d], stride[d], padding[d], dilation[d]) < 1:
            raise RuntimeError(f"conv2d: input {name} {xs[2 + d]} (padding {padding[d]}) is "
                               f"smaller than the dilated kernel {dilation[d] * (ws[2 + d] - 1) + 1}")


# NOTE: a primitive for speed: im2col and a batched GEMM (chunked to stay in cache, see
# conv_arrays.py) instead of kH*kW multiply-adds. The rules reuse the im2col/col2im pair, so
# double backward works; the backward on arrays runs conv_arrays' kernels (``joint``).
def _conv2d_fwd(xp, x, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                groups=1):
    return conv_arrays.forward(xp, x, weight, bias, stride, padding, dilation, groups)


def _conv2d_joint(F, g, out, x, weight, bias, stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                  groups=1, needs=()):
    xp = F.xp
    return (conv_arrays.input_grad(xp, g, weight, x.shape, stride, padding, dilation, groups)
            if needs[0] else None,
            conv_arrays.weight_grad(xp, g, x, weight.shape, stride, padding, dilation, groups)
            if needs[1] else None,
            g.sum(axis=(0, 2, 3)) if needs[2] else None)


def _conv2d_grad_input(F, g, out, x, weight, bias, stride=(1, 1), padding=(0, 0),
                       dilation=(1, 1), groups=1):
    return conv2d_input_grad(F, g, weight, x.shape, stride, padding, dilation, groups)


def conv2d_input_grad(F, g, weight, x_shape, stride, padding, dilation, groups):
    """Gradient of conv2d's input (also conv_transpose2d's forward): W^T g, then col2im."""
    n, o, ho, wo = g.shape
    _, cg, kh, kw = weight.shape
    c = cg * groups
    gm = F.reshape(g, shape=(n, groups, o // groups, ho * wo))
    wm = F.reshape(weight, shape=(groups, o // groups, cg * kh * kw))
    cols = F.matmul(F.transpose(wm, dim0=-1, dim1=-2), gm)
    cols = F.reshape(cols, shape=(n, c, kh, kw, ho, wo))
    ph, pw = padding
    padded = (n, c, x_shape[2] + 2 * ph, x_shape[3] + 2 * pw)
    dx = F.col2im(cols, shape=padded, kernel=(kh, kw), stride=stride, dilation=dilation)
    if padding != (0, 0):
        dx = F.index(dx, key=(slice(None), slice(None), slice(ph, ph + x_shape[2]),
                              slice(pw, pw + x_shape[3])))
    return dx


def _conv2d_grad_weight(F, g, out, x, weight, bias, stride=(1, 1), padding=(0, 0),
                        dilation=(1, 1), groups=1):
    n, o, ho, wo = g.shape
    _, cg, kh, kw = weight.shape
    if padding != (0, 0):
        x = F.pad(x, pad=_pads(padding))
    cols = F.im2col(x, kernel=(kh, kw), stride=stride, dilation=dilation)
    cols = F.reshape(cols, shape=(n, groups, cg * kh * kw, ho * wo))
    gm = F.reshape(g, shape=(n, groups, o // groups, ho * wo))
    gw = F.sum(F.matmul(gm, F.transpose(cols, dim0=-1, dim1=-2)), dim=0)
    return F.reshape(gw, shape=tuple(weight.shape))


# Bilinear in (x, weight) plus the bias: each tangent goes through the convolution in its
# input's place (without the bias), the bias's is broadcast over the batch and the image.
def _conv2d_jvp_input(F, t, out, x, weight, bias, stride=(1, 1), padding=(0, 0),
                      dilation=(1, 1), groups=1):
    return F.conv2d(t, weight, None, stride=stride, padding=padding, dilation=dilation,
                    groups=groups)


def _conv2d_jvp_weight(F, t, out, x, weight, bias, stride=(1, 1), padding=(0, 0),
                       dilation=(1, 1), groups=1):
    return F.conv2d(x, t, None, stride=stride, padding=padding, dilation=dilation,
                    groups=groups)


defop("conv2d", _conv2d_fwd,
      (_conv2d_grad_input, _conv2d_grad_weight,
       lambda F, g, out, x, weight, bias, stride=(1, 1), padding=(0, 0), dilation=(1, 1),
       groups=1: F.sum(g, dim=(0, 2, 3))),
      jvp=(_conv2d_jvp_input, _conv2d_jvp_weight,
           lambda F, t, out, x, weight, bias, stride=(1, 1), padding=(0, 0), dilation=(1, 1),
           groups=1: F.reshape(t, shape=(1, t.shape[0], 1, 1))),
      check=_check_conv2d, joint=_conv2d_joint, node_name="ConvolutionBackward0")


# --------------------------------------------------------------------------- softmax


# Row reductions for the fused ops below. xp.sum over short contiguous rows runs one inner
# loop per row: a GEMV with a vector of ones (and a batched dot for sums of products) does
# the same float32 accumulation 3-6x faster ((1024, 128): 0.038 ms against 0.009 ms). Rows
# longer than _GEMV_ROWS keep xp.sum's pairwise summation.
_GEMV_ROWS = 4096


def _rows_of(a, dims):
    """``a`` as a (rows, n) view over its trailing ``dims`` (any order, negative allowed), and
    the shape of a per-row result kept to ``a``'s rank; None when that is no view, or rows
    longer than _GEMV_ROWS. Plain loops and array methods: on small arrays this is most of
    the cost of a row reduction."""
    nd = a.ndim
    k = len(dims)
    if not k or k > nd or a.dtype.kind != "f" or not a.flags.c_contiguous or not a.size:
        return None
    lead = nd - k
    if k == 1:   # the common case, without building lists
        if dims[0] != -1 and dims[0] != lead:
            return None
    elif sorted(d % nd for d in dims) != list(range(lead, nd)):
        return None
    shape = a.shape
    rows = 1
    for s in shape[:lead]:
        rows *= s
    n = a.size // rows
    if n > _GEMV_ROWS:
        return None
    return a.reshape(rows, n), shape[:lead] + (1,) * k


def row_sum(xp, a, dims=(-1,)):
    """``xp.sum(a, axis=dims, keepdims=True)`` over trailing ``dims``."""
    rows = _rows_of(a, dims)
    if rows is None:
        return xp.sum(a, axis=dims, keepdims=True)
    r, kept = rows
    return matmul(xp, r, ones_vector(xp, r.shape[1], a.dtype)).reshape(kept)


def row_dot(xp, a, b, dims=(-1,)):
    """``xp.sum(a * b, axis=dims, keepdims=True)`` over trailing ``dims`` (same shapes)."""
    ra = rb = None
    if a.shape == b.shape and a.dtype == b.dtype:
        ra, rb = _rows_of(a, dims), _rows_of(b, dims)
    if ra is None or rb is None:
        return xp.sum(a * b, axis=dims, keepdims=True)
    (ra, kept), (rb, _) = ra, rb
    return matmul(xp, ra[:, None, :], rb[:, :, None]).reshape(kept)


# NOTE: softmax and log_softmax are primitives for numerics (the max is subtracted before exp,
# so large logits never overflow) and speed (one node, and the rules reuse the output).
def _minus_row_max(xp, x, dim):
    """(``x`` minus its max along ``dim``, that max): a row all -inf (a fully masked
    attention row) or holding +inf gives NaN silently, as PyTorch's softmax does, where NumPy
    warns."""
    m = xp.max(x, axis=dim, keepdims=True)
    with numpy.errstate(invalid="ignore"):
        return x - m, m


def _floating_rows(x, op):
    """PyTorch's NotImplementedError for an integer input of softmax or log_softmax (its
    kernels exist for floating dtypes only), where NumPy's in-place exp would fail on a cast."""
    if x.dtype.kind not in "fc":
        raise NotImplementedError(f"{op}: not implemented for '{torch_name(x.dtype)}' (a "
                                  "floating point input is needed), as in PyTorch")


def _softmax_fwd(xp, x, dim, safe=False):
    _floating_rows(x, "softmax")
    if x.ndim == 0:   # dim 0 or -1 of a 0-d tensor, as PyTorch's: a row of one entry
        return _softmax_fwd(xp, x.reshape(1), 0, safe).reshape(())
    if x.shape[dim] == 0:   # nothing to normalise (and no max to take): an empty result
        return x.copy()
    e, m = _minus_row_max(xp, x, dim)
    xp.exp(e, out=e)
    e /= row_sum(xp, e, (dim,))
    return _zero_empty_rows(xp, e, m) if safe else e


def _zero_empty_rows(xp, e, m):
    """``e`` with the rows whose max ``m`` is -inf (every entry -inf: an attention row with
    nothing to attend to) at 0 instead of NaN, as PyTorch's _safe_softmax (which its
    scaled_dot_product_attention uses): their gradient is then 0 too, by softmax's rule."""
    empty = m == -xp.inf
    if xp is not numpy or empty.any():      # (no host sync on a GPU: always the copy)
        xp.copyto(e, e.dtype.type(0), where=empty)
    return e


def _log_softmax_fwd(xp, x, dim):
    _floating_rows(x, "log_softmax")
    if x.ndim == 0:   # as softmax's
        return _log_softmax_fwd(xp, x.reshape(1), 0).reshape(())
    if x.shape[dim] == 0:
        return x.copy()
    shifted, _ = _minus_row_max(xp, x, dim)
    shifted -= xp.log(row_sum(xp, xp.exp(shifted), (dim,)))
    return shifted


# softmax's Jacobian, diag(out) - out outᵀ, is symmetric: the reverse rule is the forward one.
def _softmax_vjp(F, g, out, x, dim):
    return out * (g - F.sum(g * out, dim=dim, keepdim=True))


defop("softmax", _softmax_fwd, (_softmax_vjp,), jvp=SELF_ADJOINT)
# scaled_dot_product_attention's softmax under a mask: softmax, with fully masked rows at 0.
defop("_safe_softmax", lambda xp, x, dim: _softmax_fwd(xp, x, dim, safe=True), (_softmax_vjp,),
      jvp=SELF_ADJOINT, node_name="SafeSoftmaxBackward0")


def _scaled_softmax_fwd(xp, x, scale=1.0, causal=False):
    """softmax(x * scale) over the last dim, with the future (column > row) at -inf when
    ``causal``: attention's weights in one pass of temporaries, computed in place. A row all
    -inf gives 0s, as scaled_dot_product_attention's safe softmax does."""
    if xp is numpy and x.size:
        out = _softmax_by_one_shift(x, scale, causal)
        if out is not None:
            return out
    out = x * scale
    if causal:
        out += _causal_mask(xp, out, 0.0)
    if out.shape[-1] == 0:
        return out
    out, m = _minus_row_max(xp, out, -1)
    xp.exp(out, out=out)
    out /= row_sum(xp, out)
    return _zero_empty_rows(xp, out, m)


def _causal_mask(xp, out, value):
    """(rows, cols) of ``value``, -inf in the future (column > row), in ``out``'s dtype."""
    rows, cols = out.shape[-2:]
    future = xp.triu(xp.ones((rows, cols), dtype=bool), 1)
    return xp.where(future, -xp.inf, value).astype(out.dtype)


# exp(-40): a row whose exps, shifted by the largest score of the whole input, sum to this or
# more has its own max within 40 + ln(columns) of that shift; only its probabilities below
# about 1e-17 of its largest can differ from the per-row shift's (flushed towards zero).
_ONE_SHIFT_FLOOR = math.exp(-40.0)


def _softmax_by_one_shift(x, scale, causal):
    """scaled_softmax of a NumPy array with one shift for all rows, the largest scaled score
    (an upper bound of each row's max): a contiguous reduction and a scalar folded into the
    mask or subtracted at full speed, where NumPy's max over rows of 64 and the subtraction
    of a per-row max cost as much as the rest of the softmax together. None when the shift
    is not finite or a row's exps sum below the floor: the caller shifts row by row."""
    out = x * scale
    shift = out.max()
    if not numpy.isfinite(shift):
        return None
    if causal:
        out += _causal_mask(numpy, out, -shift)
    else:
        out -= shift
    numpy.exp(out, out=out)
    sums = row_sum(numpy, out)
    if (sums < _ONE_SHIFT_FLOOR).any():
        return None
    out /= sums
    return out


def _scaled_softmax_vjp(F, g, out, x, scale=1.0, causal=False):
    if F is TensorF:
        return out * (g - F.sum(g * out, dim=-1, keepdim=True)) * scale
    d = g - row_dot(F.xp, g, out)
    d *= out
    d *= scale
    return d


# NOTE: a primitive for speed: scaled_dot_product_attention's scale, causal mask and softmax
# in one node (PyTorch's attention kernels fuse them too), where the composite made three
# nodes (mul, masked_fill, softmax) and three score-sized temporaries each way. Its Jacobian,
# scale (diag(out) - out outᵀ), is symmetric.
defop("scaled_softmax", _scaled_softmax_fwd, (_scaled_softmax_vjp,), jvp=SELF_ADJOINT)
def _log_softmax_vjp(F, g, out, x, dim):
    if F is TensorF or g.dtype != out.dtype or not g.ndim:   # (F.sum takes a 0-d g's dim 0)
        return g - F.exp(out) * F.sum(g, dim=dim, keepdim=True)
    # The same arithmetic on arrays in one temporary, with array methods: on a small batch
    # the calls, not the arithmetic, were the cost.
    d = F.xp.exp(out)
    d *= g.sum(axis=dim, keepdims=True)
    return F.xp.subtract(g, d, out=d)


defop("log_softmax", _log_softmax_fwd, (_log_softmax_vjp,),
      jvp=(lambda F, t, out, x, dim: t - F.sum(F.exp(out) * t, dim=dim, keepdim=True),))


# --------------------------------------------------------------------------- gelu

_SQRT_HALF = 0.7071067811865476
_INV_SQRT_2PI = 0.3989422804014327
_TANH_K = 0.7978845608028654     # sqrt(2 / pi)
_TANH_C = 0.044715


def _horner(x2, coeffs):
    acc = x2 * coeffs[0]
    acc += coeffs[1]
    for c in coeffs[2:]:
        acc *= x2
        acc += c
    return acc


# Phi(x) = (1 + tanh(x S(x^2))) / 2, S a polynomial fitted to atanh(erf(x / sqrt 2)) / x on
# [0, 5.6] (least squares weighted by Phi's sensitivity, sech^2 / 2, with Lawson's
# reweighting towards the minimax): Phi within 3e-8 in float64, 1e-7 evaluated in float32.
# S(0) = sqrt(2 / pi), the tanh form's slope. Highest powers first, for Horner's scheme.
_PHI_TANH_S = (1.7562902344836477e-09, -1.322667007050788e-07, 3.9647779670909035e-06,
               -5.5306340370819666e-05, -3.2594694683133466e-05, 0.03633308436909832,
               0.7978849414976521)


def _gelu_cdf(xp, x, approximate, x2=None):
    """The factor GELU multiplies ``x`` by: Phi(x) = (1 + erf(x / sqrt 2)) / 2, or the tanh
    form's (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) / 2. ``x2``: ``x * x`` when the caller
    has it.

    Both forms are (1 + tanh(x S(x^2))) / 2, with the tanh form's S or, for a float32 NumPy
    array, the fitted one above: NumPy's tanh is vectorized, where scipy.special.erf's
    float32 loop calls its double routine (30x PyTorch's vectorized erf), and 20 passes
    where Eigen's rational erf took 25. Past the fit S keeps growing (its leading terms are
    positive), so tanh saturates to +-1; where x^2 or S overflows to inf the same holds,
    silently; -inf gives NaN, as PyTorch's gelu."""
    if approximate == "tanh":
        coeffs = (_TANH_C * _TANH_K, _TANH_K)
    elif xp is numpy and x.dtype == numpy.float32:
        coeffs = _PHI_TANH_S
    else:
        cdf = backend.special(xp).erf(x * _SQRT_HALF).astype(x.dtype, copy=False)
        cdf += 1.0
        cdf *= 0.5
        return cdf
    with numpy.errstate(over="ignore", invalid="ignore"):
        cdf = _horner(x * x if x2 is None else x2, coeffs)
        cdf *= x
        xp.tanh(cdf, out=cdf)
    cdf += 1.0
    cdf *= 0.5
    return cdf


def _gelu_fwd(xp, x, approximate="none"):
    if x.ndim == 0:   # NumPy's ufuncs give a 0-d input's temporaries as scalars: no in place
        return _gelu_fwd(xp, x.reshape(1), approximate).reshape(())
    out = _gelu_cdf(xp, x, approximate)
    out *= x
    return out


def _gelu_backward_fwd(xp, grad, x, approximate="none"):
    """``grad * gelu'(x)``: Phi(x) + x phi(x), or the tanh form's derivative (PyTorch's
    gelu_backward)."""
    if x.ndim == 0:   # as _gelu_fwd's (grad's shape is the result's)
        t = _gelu_backward_fwd(xp, grad.reshape(1) if grad.ndim == 0 else grad, x.reshape(1),
                               approximate)
        return t.reshape(grad.shape)
    if approximate == "tanh":
        x2 = x * x
        u = x2 * (_TANH_C * _TANH_K)
        u += _TANH_K
        u *= x
        t = xp.tanh(u)
        du = x2 * (3 * _TANH_C * _TANH_K)    # u' = k (1 + 3 c x^2)
        du += _TANH_K
        du *= x
        du *= 0.5
        sech2 = t * t
        xp.subtract(1.0, sech2, out=sech2)
        du *= sech2                           # x (1 - t^2) u' / 2
        t += 1.0
        t *= 0.5
        t += du
    else:
        t = x * x
        cdf = _gelu_cdf(xp, x, approximate, t)
        t *= -0.5
        xp.exp(t, out=t)
        t *= _INV_SQRT_2PI
        t *= x                                 # x phi(x)
        t += cdf
    if t.shape != grad.shape:
        return t * grad
    t *= grad
    return t


def _gelu_second(F, x, approximate):
    """gelu''(x), from primitives (so that it is differentiable again)."""
    if approximate == "tanh":
        x2 = x * x
        t = F.tanh((x2 * _TANH_C + 1.0) * x * _TANH_K)
        du = (x2 * (3 * _TANH_C) + 1.0) * _TANH_K
        # d/dx [(1 + t)/2 + x (1 - t^2) u'/2] = (1 - t^2) (u' - x t u'^2 + x u''/2), u'' = 6kcx
        return (1.0 - t * t) * (du - x * t * du * du + x2 * (3 * _TANH_C * _TANH_K))
    return F.exp(x * x * -0.5) * _INV_SQRT_2PI * (2.0 - x * x)


def _check_gelu(x, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


# NOTE: gelu is a primitive for speed: one node whose backward is one op (gelu_backward, as
# PyTorch's; like PyTorch's it saves the input, not the output, so that an in-place op on the
# output, such as an in-place dropout, leaves the backward valid), where the composite x * 0.5 * (1 + erf(x / sqrt 2)) made five nodes and six
# temporaries each way. The float32 CPU forward uses the rational erf above (scipy's float32
# erf was 44-55% of a training step's self CPU time).
defop("gelu", _gelu_fwd,
      (lambda F, g, out, x, approximate="none": F.gelu_backward(g, x, approximate=approximate),),
      jvp=SELF_ADJOINT, check=_check_gelu, public="gelu",
      doc="GELU: ``x * Phi(x)`` with the exact erf (``approximate='none'``, the default) or "
          "the tanh form (torch.nn.functional.gelu).")
# Linear in grad, elementwise in x: both Jacobians are diagonal.
defop("gelu_backward", _gelu_backward_fwd,
      (lambda F, g, out, grad, x, approximate="none": F.gelu_backward(g, x, approximate=approximate),
       lambda F, g, out, grad, x, approximate="none": g * grad * _gelu_second(F, x, approximate)),
      jvp=SELF_ADJOINT)


# --------------------------------------------------------------------------- layer_norm


def _ln_dims(x, normalized_shape):
    """The normalized (last) dims and how many elements each normalized group holds."""
    k = len(normalized_shape)
    n = 1
    for s in x.shape[x.ndim - k:]:
        n *= s
    return tuple(range(x.ndim - k, x.ndim)), max(n, 1)


def _ln_moments(xp, x, dims, n, eps):
    """(x - mean, 1 / sqrt(var + eps)) of arrays, with the composite's arithmetic (mean as
    sum * 1/n, rsqrt as 1 / sqrt): the same values."""
    centered = x - row_sum(xp, x, dims) * (1.0 / n)
    var = row_dot(xp, centered, centered, dims) * (1.0 / n)
    return centered, 1 / xp.sqrt(var + eps)


def _layer_norm_fwd(xp, input, weight=None, bias=None, normalized_shape=(), eps=1e-5):  # noqa: A002
    dims, n = _ln_dims(input, normalized_shape)
    out, rstd = _ln_moments(xp, input, dims, n, eps)
    out *= rstd
    for param, op in ((weight, xp.multiply), (bias, xp.add)):
        if param is not None:   # in place unless the parameter's dtype promotes the result
            out = op(out, param, out=out if param.dtype == out.dtype else None)
    return out


def _ln_stats(F, input, normalized_shape, eps):  # noqa: A002
    """(xhat, rstd, dims, n), recomputed from the input: with primitives when the backward is
    differentiable (and in forward mode), on arrays in place otherwise.

    (PyTorch's native_layer_norm returns mean and rstd as extra outputs for its backward;
    here a node that saves several outputs keeps them as plain arrays, which compiled
    autograd's CUDA graphs would bake in as constants, so the statistics are recomputed:
    two reductions.)"""
    dims, n = _ln_dims(input, normalized_shape)
    if F is TensorF:
        xc = input - F.sum(input, dim=dims, keepdim=True) * (1.0 / n)
        rstd = F.rsqrt(F.sum(xc * xc, dim=dims, keepdim=True) * (1.0 / n) + eps)
        return xc * rstd, rstd, dims, n
    xhat, rstd = _ln_moments(F.xp, input, dims, n, eps)
    xhat *= rstd
    return xhat, rstd, dims, n


def _ln_project(F, d, xhat, rstd, dims, n):
    """rstd (d - mean(d) - xhat mean(d xhat)): the normalization's Jacobian (symmetric) on d."""
    mean_d = F.sum(d, dim=dims, keepdim=True) * (1.0 / n)
    mean_dx = F.sum(d * xhat, dim=dims, keepdim=True) * (1.0 / n)
    return (d - mean_d - xhat * mean_dx) * rstd


def _ln_grad_input(F, g, out, input, weight, bias, normalized_shape=(), eps=1e-5):  # noqa: A002
    # The rules serve the differentiable backward (and decide what is saved); a backward on
    # arrays runs _ln_joint.
    xhat, rstd, dims, n = _ln_stats(F, input, normalized_shape, eps)
    return _ln_project(F, g if weight is None else g * weight, xhat, rstd, dims, n)


def _ln_by_normalized(F, g, out, input, weight, bias, normalized_shape=(), eps=1e-5):  # noqa: A002
    # weight's gradient (and its tangent's contribution): g * xhat, summed by the engine.
    return g * _ln_stats(F, input, normalized_shape, eps)[0]


def _ln_joint(F, g, out, input, weight, bias, normalized_shape=(), eps=1e-5, *, needs):  # noqa: A002
    """The gradients on arrays in one call: the statistics (x - mean, 1 / std) once for the
    input's and the weight's, with xhat = xc rstd left unformed (a pass fewer)."""
    grads = [None, None, g if needs[2] else None]
    if not (needs[0] or needs[1]):
        return grads
    xp = F.xp
    dims, n = _ln_dims(input, normalized_shape)
    xc, rstd = _ln_moments(xp, input, dims, n, eps)
    if needs[0]:
        # _ln_project's arithmetic in place on temporaries: rstd (d - mean(d) - xc rstd^2
        # mean(d xc)).
        d = g if weight is None else g * weight
        mean_d = row_sum(xp, d, dims) * (1.0 / n)
        k = row_dot(xp, d, xc, dims) * (1.0 / n)
        k *= rstd
        k *= rstd
        d = d - mean_d if weight is None else xp.subtract(d, mean_d, out=d)
        d -= xc * k
        d *= rstd
        grads[0] = d
    if needs[1]:
        if xc.shape == g.shape and xc.dtype == g.dtype:
            xc *= g              # the input's gradient is done with it
        else:
            xc = g * xc
        # sum over the rows of rstd g xc: one GEMV with rstd where xhat = xc rstd was a pass
        rows = rstd.size
        if xc.size and xc.flags.c_contiguous:
            grads[1] = matmul(xp, rstd.reshape(rows), xc.reshape(rows, xc.size // rows)).reshape(
                normalized_shape)
        else:
            xc *= rstd
            grads[1] = xc        # summed to the weight's shape by the engine
    return grads


def _ln_jvp_input(F, t, out, input, weight, bias, normalized_shape=(), eps=1e-5):  # noqa: A002
    xhat, rstd, dims, n = _ln_stats(F, input, normalized_shape, eps)
    dx = _ln_project(F, t, xhat, rstd, dims, n)
    return dx if weight is None else dx * weight


# NOTE: layer_norm is a primitive for speed, as PyTorch's native_layer_norm: one node, the
# forward in place on one temporary, and one backward call for all inputs (the statistics
# once, the projection of the gradient fused) where the composite made eleven nodes each way.
defop("layer_norm", _layer_norm_fwd,
      (_ln_grad_input, _ln_by_normalized,
       lambda F, g, out, input, weight, bias, normalized_shape=(), eps=1e-5: g),
      jvp=(_ln_jvp_input, _ln_by_normalized,
           lambda F, t, out, input, weight, bias, normalized_shape=(), eps=1e-5: t),
      joint=_ln_joint, node_name="NativeLayerNormBackward0")


# --------------------------------------------------------------------------- nll_loss


def _nll_picks(xp, dtype, target, ignore_index, reduction):
    """d loss / d input for a (N, C) input, as (rows, columns, coefficients, valid): -1 (over
    the valid count for "mean") at each row's target class, to be taken where ``valid`` (a
    row whose target is ``ignore_index`` has no entry); every other entry is 0."""
    valid = target != ignore_index
    coef = -valid.astype(dtype)
    if reduction == "mean":
        coef /= valid.sum()
    return xp.arange(target.shape[0]), xp.where(valid, target, 0), coef, valid


def _nll_fwd(xp, input, target, ignore_index=-100, reduction="mean"):  # noqa: A002
    valid = target != ignore_index
    picked = input[xp.arange(input.shape[0]), xp.where(valid, target, 0)]
    losses = picked * -valid.astype(input.dtype)
    if reduction == "none":
        return losses
    total = losses.sum()
    if reduction == "mean":
        total = total / valid.sum()
    return xp.asarray(total, dtype=input.dtype)


def _nll_grad(F, g, out, input, target, ignore_index=-100, reduction="mean"):  # noqa: A002
    t = target._data if isinstance(target, Tensor) else target
    xp = backend.array_module(t)
    if not isinstance(g, Tensor):
        w = _nll_grad_all_valid(g, input, t, ignore_index, reduction)
        if w is not None:
            return w
    rows, cols, coef, valid = _nll_picks(xp, input.dtype, t, ignore_index, reduction)
    w = xp.zeros(input.shape, dtype=input.dtype)
    if isinstance(g, Tensor):   # create_graph: the gradient is linear in g, g * w records it
        w[rows, cols] = xp.where(valid, coef, 0)
        w = Tensor._make(w, False, None, 0, [0], g.device)
        return (F.reshape(g, shape=(input.shape[0], 1)) if reduction == "none" else g) * w
    # As PyTorch's nll_loss_backward: g times the coefficient at each valid row's target only
    # (no pass over all N x C entries); every other entry is 0 whatever g is (inf, NaN), and
    # so is all of it when every row is ignored (a "mean" over no rows).
    w[rows, cols] = xp.where(valid, coef * g, 0)
    return w


def _all_valid_coef(input, t, ignore_index, reduction):  # noqa: A002
    """NLL's coefficient at each row's target when the input is (N, C) (an array or its Meta),
    the targets ``t`` a NumPy array, the loss reduced and no target ``ignore_index`` (the
    common case): _nll_picks's -1 (over the count) rounded once to the input's dtype, so the
    values are the same bit for bit. None otherwise; NumPy only: counting the valid rows on
    the host would be a device sync (and no CUDA graph) for CuPy."""
    if (t.__class__ is not numpy.ndarray or reduction == "none" or input.ndim != 2
            or t.shape != (input.shape[0],) or not t.shape[0]):
        return None
    n = t.shape[0]
    if numpy.count_nonzero(t != ignore_index) != n:
        return None
    return input.dtype.type(-1.0 / n if reduction == "mean" else -1.0)


def _nll_grad_all_valid(g, input, t, ignore_index, reduction):  # noqa: A002
    """_nll_grad's array result in the common case (:func:`_all_valid_coef`), in a third of
    the calls; None otherwise."""
    coef = _all_valid_coef(input, t, ignore_index, reduction)
    if coef is None:
        return None
    w = numpy.zeros(input.shape, dtype=input.dtype)
    w[numpy.arange(t.shape[0]), t] = coef * g
    return w


def nll_log_softmax_grad(g, logp, target, ignore_index=-100, reduction="mean", dim=1):
    """The gradient of ``nll_loss(log_softmax(x, dim), target)`` with respect to ``x``, from the
    loss's gradient ``g``: NllLossBackward0's rule then LogSoftmaxBackward0's, fused (compiled
    autograd calls this where the first feeds only the second: ``OpDef.fusions``). None where the fusion does not
    apply (not NumPy, an ignored target, ``reduction="none"``, not (N, C) over the classes, a
    zero ``g``); the caller then runs the two rules.

    The values are the two rules' bit for bit. NLL's gradient ``w`` is ``s`` (``g`` times the
    coefficient, rounded to the input's dtype) at each row's target and 0 elsewhere, so each
    row of ``w`` sums to ``s`` exactly, and log_softmax's rule, ``w - exp(logp) * rowsum(w)``,
    is ``0 - exp(logp) * s`` with ``s`` added at the targets (``(0 - d) + s`` is ``s - d``).
    That is two passes over the (N, C) array where the rules made an (N, C) array of zeros,
    scattered into it, summed its rows and subtracted. A zero ``g`` is left to the rules: their
    row sum of a -0.0 ``s`` is +0.0, which the sign of a zero product would tell apart.
    """
    coef = (_all_valid_coef(logp, target, ignore_index, reduction)
            if logp.__class__ is numpy.ndarray and dim in (1, -1) else None)
    if coef is None or g.ndim:
        return None
    # NumPy scalars, not 0-d arrays (a third of this function's time): the same roundings.
    s = logp.dtype.type(coef * g[()])
    if not s:
        return None
    d = numpy.exp(logp)
    d *= s
    numpy.subtract(0, d, out=d)
    d[numpy.arange(target.shape[0]), target] += s
    return d


# NOTE: a primitive for speed, as PyTorch's nll_loss_forward: the (N, C) class-index loss in
# one node whose backward writes the coefficients at the targets, where the composite made
# seven (where, gather, squeeze, mul, neg, sum, div). Linear in the input.
_NLL = defop("nll_loss_forward", _nll_fwd, (_nll_grad, None), jvp=linear_in(0), meta=(0,),
      node_name="NllLossBackward0")
# cross_entropy's backward in one call under compiled autograd: (out, input, target) are the
# NLL rule's arguments and (out, x) log_softmax's.
_NLL.fusions["log_softmax"] = (
    lambda g, nll_args, nll_attrs, lsm_args, lsm_attrs:
    nll_log_softmax_grad(g, lsm_args[0], nll_args[2], dim=lsm_attrs["dim"], **nll_attrs))
