"""The table of op cases: one list drives the forward check against NumPy, the float64
finite-difference gradient check, and CPU/GPU parity. A registered op without a case fails
``test_every_op_has_a_case``.

Each case: ``OpCase(op, fn, ref, inputs)``
- ``op``: the registered op (or composite) name the case covers;
- ``fn(*tensors)``: calls the op through the public API;
- ``ref(*arrays)``: the same computation in NumPy (None: no forward comparison, e.g. for ops
  whose only purpose is a backward);
- ``tol``: finite-difference step/tolerances when the defaults do not fit the case;
- ``inputs``: a function ``rng -> list`` of NumPy arrays (float64) or other values;
  ``grad=False`` for cases without a gradient (comparisons), ``nondiff`` lists input positions
  not differentiated (indices, masks);
- ``once_differentiable``: why the op's backward is not itself differentiable (empty: it is,
  and the second-derivative check runs; set, the check must fail, so the reason stays true).

Every case with ``grad`` is checked three ways: the gradient against finite differences, the
forward-mode tangent (dual tensors) against finite differences and reverse mode, and the
gradient's own derivative (``create_graph=True``) against finite differences of the gradient.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import itertools
import math

from gradtrace import autograd
import gradtrace.autograd as ag
from gradtrace.autograd.nn import functional as AF


@dataclass
class OpCase:
    op: str
    fn: Callable
    ref: Callable | None
    inputs: Callable
    grad: bool = True
    nondiff: tuple = ()
    name: str = ""
    covers: tuple = field(default_factory=tuple)   # further op names the case exercises
    tol: dict = field(default_factory=dict)        # check_grad overrides (eps, rtol, atol)
    once_differentiable: str = ""                  # why the backward has no derivative

    def __post_init__(self):
        self.name = self.name or self.op


def pos(*shape):
    """Positive values away from 0 (for log, sqrt, div)."""
    return lambda rng: rng.uniform(0.5, 2.0, shape)


def rnd(*shape):
    return lambda rng: rng.standard_normal(shape)


def away0(*shape):
    """Values away from 0 (relu's kink, comparisons' ties)."""
    return lambda rng: rng.choice([-1.0, 1.0], shape) * rng.uniform(0.2, 2.0, shape)


def invertible(*shape, negative=False):
    """Well-conditioned square matrices (the diagonal dominates); ``negative``: each with a
    negative determinant (its first row negated)."""
    def make(rng):
        m = rng.standard_normal(shape) + 4.0 * np.eye(shape[-1])
        if negative:
            m[..., 0, :] *= -1.0
        return m
    return make


def ins(*makers):
    return lambda rng: [m(rng) if callable(m) else m for m in makers]


CASES: list[OpCase] = [
    # elementwise arithmetic, with broadcasting and scalars
    OpCase("add", lambda a, b: a + b, np.add, ins(rnd(3, 4), rnd(4))),
    OpCase("add", lambda a, b: a + b, np.add, ins(rnd(2, 1, 3), rnd(4, 1)), name="add_broadcast"),
    OpCase("add", lambda a: a + 2.5, lambda a: a + 2.5, ins(rnd(3)), name="add_scalar"),
    OpCase("sub", lambda a, b: a - b, np.subtract, ins(rnd(3, 4), rnd(3, 1))),
    OpCase("rsub", lambda a: 1.0 - a, lambda a: 1.0 - a, ins(rnd(3)), name="rsub_scalar"),
    OpCase("add.alpha", lambda a, b: ag.add(a, b, alpha=-1.5), lambda a, b: a - 1.5 * b,
           ins(rnd(3, 4), rnd(4)), name="add_alpha"),
    OpCase("sub.alpha", lambda a, b: a.sub(b, alpha=2.5), lambda a, b: a - 2.5 * b,
           ins(rnd(3, 1), rnd(3, 4)), name="sub_alpha"),
    OpCase("rsub.Tensor", lambda a, b: ag.rsub(a, b, alpha=0.5), lambda a, b: b - 0.5 * a,
           ins(rnd(3, 4), rnd(4)), name="rsub_tensor_alpha"),
    OpCase("mul", lambda a, b: a * b, np.multiply, ins(rnd(3, 4), rnd(3, 4))),
    OpCase("mul", lambda a, b: a * b, np.multiply, ins(lambda rng: rng.standard_normal((5, 3)).T, rnd(3, 1)), name="mul_noncontig"),
    OpCase("div", lambda a, b: a / b, np.divide, ins(rnd(3, 4), pos(4))),
    OpCase("div", lambda a: 2.0 / a, lambda a: 2.0 / a, ins(pos(3)), name="rdiv_scalar"),
    OpCase("neg", lambda a: -a, np.negative, ins(rnd(3, 2))),
    OpCase("pow.Tensor_Tensor", lambda a, b: a ** b, np.power, ins(pos(3, 2), rnd(3, 2))),
    OpCase("pow", lambda a: a ** 3, lambda a: a ** 3, ins(rnd(4)), name="pow_scalar"),
    OpCase("pow.Scalar", lambda a: 2.0 ** a, lambda a: 2.0 ** a, ins(rnd(4)), name="rpow_scalar"),
    # unary math
    OpCase("exp", lambda a: a.exp(), np.exp, ins(rnd(3, 4))),
    OpCase("log", lambda a: a.log(), np.log, ins(pos(3, 4))),
    OpCase("sqrt", lambda a: a.sqrt(), np.sqrt, ins(pos(3, 4))),
    OpCase("tanh", lambda a: a.tanh(), np.tanh, ins(rnd(3, 4))),
    OpCase("relu", lambda a: a.relu(), lambda a: np.maximum(a, 0), ins(away0(3, 4))),
    # comparisons (no gradient)
    OpCase("eq", lambda a, b: a == b, np.equal, ins(away0(4), away0(4)), grad=False),
    OpCase("ne", lambda a, b: a != b, np.not_equal, ins(away0(4), away0(4)), grad=False),
    OpCase("lt", lambda a, b: a < b, np.less, ins(away0(4), away0(4)), grad=False),
    OpCase("le", lambda a, b: a <= b, np.less_equal, ins(away0(4), away0(4)), grad=False),
    OpCase("gt", lambda a, b: a > b, np.greater, ins(away0(4), away0(4)), grad=False),
    OpCase("ge", lambda a, b: a >= b, np.greater_equal, ins(away0(4), away0(4)), grad=False),
    # copies and casts
    OpCase("clone", lambda a: a.clone(), np.copy, ins(rnd(3))),
    OpCase("to_dtype", lambda a: a.to(dtype="float32").to(dtype="float64"),
           lambda a: a.astype(np.float32).astype(np.float64), ins(rnd(3)),
           tol={"eps": 1e-2, "rtol": 1e-3}),  # float32 in the middle: a bigger step
    OpCase("to_device", lambda a: a.to("cpu") * 1.0, lambda a: a * 1.0, ins(rnd(3))),
    OpCase("zero", lambda a: (a * 1.0).zero_() + a, lambda a: a, ins(rnd(3)), covers=("zeros_like",)),
    # reductions
    OpCase("sum", lambda a: a.sum(), np.sum, ins(rnd(3, 4))),
    OpCase("sum.dim", lambda a: a.sum(dim=1), lambda a: a.sum(axis=1), ins(rnd(3, 4)), name="sum_dim"),
    OpCase("sum.dim", lambda a: a.sum(dim=(0, -1), keepdim=True),
           lambda a: a.sum(axis=(0, 2), keepdims=True), ins(rnd(2, 3, 4)), name="sum_keepdim_neg"),
    OpCase("mean", lambda a: a.mean(), np.mean, ins(rnd(3, 4))),
    OpCase("mean.dim", lambda a: a.mean(dim=-1, keepdim=True), lambda a: a.mean(-1, keepdims=True),
           ins(rnd(3, 4)), name="mean_dim"),
    # shape
    OpCase("reshape", lambda a: a.reshape(4, 3), lambda a: a.reshape(4, 3), ins(rnd(3, 4))),
    OpCase("reshape", lambda a: a.view(-1), lambda a: a.reshape(-1), ins(rnd(3, 4)), name="view_infer"),
    OpCase("transpose", lambda a: a.transpose(0, 2), lambda a: a.swapaxes(0, 2), ins(rnd(2, 3, 4))),
    OpCase("permute", lambda a: a.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1), ins(rnd(2, 3, 4))),
    OpCase("expand", lambda a: a.expand(3, -1, 4), lambda a: np.broadcast_to(a, (3, 2, 4)),
           ins(rnd(2, 1))),
    OpCase("sum_to_size", lambda a: autograd.ops.apply_op(autograd.OPS["sum_to_size"], (a,),
                                                          {"shape": (3, 1)}),
           lambda a: a.sum(axis=(0, 2), keepdims=True).reshape(3, 1), ins(rnd(2, 3, 4))),
    # Leading axes only (a bias's gradient): one GEMV with ones instead of a sum.
    OpCase("sum_to_size", lambda a: autograd.ops.apply_op(autograd.OPS["sum_to_size"], (a,),
                                                          {"shape": (4,)}),
           lambda a: a.sum(axis=(0, 1)), ins(rnd(2, 3, 4)), name="sum_to_size_leading"),
    OpCase("sum_to_size", lambda a: autograd.ops.apply_op(autograd.OPS["sum_to_size"], (a,),
                                                          {"shape": (1, 1, 4)}),
           lambda a: a.sum(axis=(0, 1), keepdims=True), ins(rnd(2, 3, 4)),
           name="sum_to_size_leading_kept"),
    # matmul: 2-D, batched with broadcasting, 1-D on either side
    OpCase("matmul", lambda a, b: a @ b, np.matmul, ins(rnd(3, 4), rnd(4, 5))),
    OpCase("matmul.bmm", lambda a, b: a @ b, np.matmul, ins(rnd(2, 1, 3, 4), rnd(5, 4, 2)), name="matmul_batched"),
    OpCase("matmul.mv", lambda a, b: a @ b, np.matmul, ins(rnd(4), rnd(2, 4, 3)), name="matmul_1d_left"),
    OpCase("matmul.mv", lambda a, b: a @ b, np.matmul, ins(rnd(2, 3, 4), rnd(4)), name="matmul_1d_right"),
    OpCase("matmul.dot", lambda a, b: a @ b, np.matmul, ins(rnd(4), rnd(4)), name="matmul_dot"),
    # indexing: slices, ints, integer arrays with repeats, boolean masks
    # Basic keys are PyTorch's view ops (torch: a[1:, ::2] is two SliceBackward0, a[1, :, None]
    # SelectBackward0 then UnsqueezeBackward0, a[...] AliasBackward0).
    OpCase("slice", lambda a: a[1:, ::2], lambda a: a[1:, ::2], ins(rnd(4, 5)), name="getitem_slices"),
    OpCase("alias", lambda a: a[...] * 2.0, lambda a: a * 2.0, ins(rnd(3, 4)), name="getitem_ellipsis"),
    OpCase("index", lambda a: a[np.array([0, 2, 0])], lambda a: a[np.array([0, 2, 0])],
           ins(rnd(4, 3)), name="index_repeated", covers=("index_backward",)),
    OpCase("index", lambda a: a[np.array([-1, 3, 0, -1])], lambda a: a[np.array([-1, 3, 0, -1])],
           ins(rnd(4, 3)), name="index_negative_aliases"),
    OpCase("index", lambda a, m: a[m], lambda a, m: a[m],
           ins(rnd(3, 4), lambda rng: rng.uniform(size=(3, 4)) > 0.5), nondiff=(1,), name="index_mask"),
    OpCase("select", lambda a: a[1, :, None], lambda a: a[1, :, None], ins(rnd(3, 4)), name="getitem_int_none"),
    OpCase("select", lambda a: a.select(-1, -2), lambda a: a[..., -2], ins(rnd(3, 4))),
]


def make_inputs(case: OpCase, rng, device="cpu", requires_grad=True):
    """Tensors for a case: float64 arrays become tensors requiring grad (unless nondiff)."""
    raw = case.inputs(rng)
    tensors = []
    for i, x in enumerate(raw):
        if isinstance(x, np.ndarray) and x.dtype == np.float64 and i not in case.nondiff:
            tensors.append(autograd.tensor(x, device=device,
                                           requires_grad=requires_grad and case.grad))
        elif isinstance(x, np.ndarray) and i in case.nondiff:
            tensors.append(autograd.tensor(x, device=device))
        else:
            tensors.append(x)
    return raw, tensors


# --------------------------------------------------------------------------- issue 3: NumPy references


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _gelu_backward(g, a, approximate):
    return ag.ops.apply_op(ag.OPS["gelu_backward"], (g, a), {"approximate": approximate})


def _gelu_tanh_grad(g, a):
    k, c = np.sqrt(2 / np.pi), 0.044715
    t = np.tanh(k * (a + c * a ** 3))
    return g * (0.5 * (1 + t) + 0.5 * a * (1 - t * t) * k * (1 + 3 * c * a * a))


def _bools(*shape):
    return lambda rng: rng.uniform(size=shape) > 0.5


def _zero_mask(device="cpu"):
    m = np.ones((3, 4))
    m[1, 2] = 0.0
    return ag.tensor(m, dtype="float64", device=device)


def _lse(a, axes):
    m = a.max(axis=axes, keepdims=True)
    return np.log(np.exp(a - m).sum(axis=axes, keepdims=True)) + m


def _scatter_ref(out, idx, src):
    for i in range(idx.shape[0]):
        for j in range(idx.shape[1]):
            out[i, idx[i, j]] += src[i, j]
    return out


def _setitem_case(a, b):
    y = a * 1.0
    y[np.array([0, 2])] = b
    return y * a


def _setitem_ref(a, b):
    y = a.copy()
    y[[0, 2]] = b
    return y * a


def _setitem_mask_case(a):
    y = a * 1.0
    y[a > 0] = 0.0
    return y * a


def _embedding_bw_ref(g, idx, n, pad):
    out = np.zeros((n, g.shape[-1]))
    np.add.at(out, idx, g)
    out[pad] = 0
    return out


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def _conv2d_ref(x, w, b, stride, padding, dilation, groups):
    stride, padding, dilation = _pair(stride), _pair(padding), _pair(dilation)
    x = np.pad(x, [(0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2])
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    ho = (h - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (wd - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, ho, wo))
    og = o // groups
    for g in range(groups):
        xs = x[:, g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dilation[0]: i * dilation[0] + stride[0] * (ho - 1) + 1: stride[0],
                           j * dilation[1]: j * dilation[1] + stride[1] * (wo - 1) + 1: stride[1]]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, w[g * og:(g + 1) * og, :, i, j])
    if b is not None:
        out += b[None, :, None, None]
    return out


def _im2col_ref(x, k, s):
    from numpy.lib.stride_tricks import sliding_window_view
    win = sliding_window_view(x, k, axis=(2, 3))[:, :, ::s[0], ::s[1]]   # n c ho wo kh kw
    return np.ascontiguousarray(win.transpose(0, 1, 4, 5, 2, 3))


def _col2im_ref(c, shape, s):
    out = np.zeros(shape)
    kh, kw, ho, wo = c.shape[2:]
    for i in range(kh):
        for j in range(kw):
            for a in range(ho):
                for b in range(wo):
                    out[:, :, a * s[0] + i, b * s[1] + j] += c[:, :, i, j, a, b]
    return out


def _conv_t_ref(x, w, b, stride, padding, output_padding):
    n, cin, h, wd = x.shape
    _, cout, kh, kw = w.shape
    ho = (h - 1) * stride - 2 * padding + kh + output_padding
    wo = (wd - 1) * stride - 2 * padding + kw + output_padding
    full = np.zeros((n, cout, ho + 2 * padding + kh, wo + 2 * padding + kw))
    for i in range(h):
        for j in range(wd):
            full[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw] += np.einsum(
                "nc,cokl->nokl", x[:, :, i, j], w)
    return full[:, :, padding:padding + ho, padding:padding + wo] + b[None, :, None, None]


def _pool_ref(x, k, s, p, fn, fill):
    from numpy.lib.stride_tricks import sliding_window_view
    x = np.pad(x, [(0, 0), (0, 0), (p, p), (p, p)], constant_values=fill)
    win = sliding_window_view(x, (k, k), axis=(2, 3))[:, :, ::s, ::s]
    return fn(win, axis=(-2, -1))


def _avg_backward_ref(g, shape, k, s, p):
    """avg_pool2d_backward with count_include_pad=False, by its definition: each output's
    gradient over the count of real entries in its window, added to each of them."""
    out = np.zeros(shape)
    h, w = shape[2:]
    for i in range(g.shape[2]):
        for j in range(g.shape[3]):
            rows = [r for r in range(i * s - p, i * s - p + k) if 0 <= r < h]
            cols = [c for c in range(j * s - p, j * s - p + k) if 0 <= c < w]
            for r in rows:
                for c in cols:
                    out[:, :, r, c] += g[:, :, i, j] / (len(rows) * len(cols))
    return out


def _pool_dilated_ref(x, kernel, stride, dilation, ceil_mode=False):
    """max over dilated windows, padded on the bottom/right with -inf for ceil_mode's last
    window (no left padding: PyTorch's output size rule with padding 0)."""
    n, c, h, w = x.shape
    size = []
    for s, k, st in zip((h, w), kernel, stride):
        span = s - dilation * (k - 1) - 1
        out = (-(-span // st) if ceil_mode else span // st) + 1
        if ceil_mode and (out - 1) * st >= s:
            out -= 1
        size.append(out)
    out = np.full((n, c, *size), -np.inf)
    for i in range(size[0]):
        for j in range(size[1]):
            rows = [r for r in (i * stride[0] + a * dilation for a in range(kernel[0])) if r < h]
            cols = [c for c in (j * stride[1] + b * dilation for b in range(kernel[1])) if c < w]
            out[:, :, i, j] = x[:, :, rows][:, :, :, cols].max(axis=(2, 3))
    return out


def _adaptive_ref(x, oh, ow, reduce=np.mean):
    """PyTorch's adaptive pooling by its definition: output (i, j) reduces the window
    [floor(i*H/oh), ceil((i+1)*H/oh)) x [floor(j*W/ow), ceil((j+1)*W/ow)); (..., H, W) inputs."""
    h, w = x.shape[-2:]
    out = np.zeros(x.shape[:-2] + (oh, ow))
    for i in range(oh):
        for j in range(ow):
            h0, h1 = (i * h) // oh, -((-(i + 1) * h) // oh)
            w0, w1 = (j * w) // ow, -((-(j + 1) * w) // ow)
            out[..., i, j] = reduce(x[..., h0:h1, w0:w1], axis=(-2, -1))
    return out


def _adaptive_avg_backward_ref(g, shape):
    """The adjoint of :func:`_adaptive_ref` (mean): each output's gradient over its window's
    size, added over the window."""
    h, w = shape[-2:]
    oh, ow = g.shape[-2:]
    out = np.zeros(shape)
    for i in range(oh):
        for j in range(ow):
            h0, h1 = (i * h) // oh, -((-(i + 1) * h) // oh)
            w0, w1 = (j * w) // ow, -((-(j + 1) * w) // ow)
            out[..., h0:h1, w0:w1] += g[..., i:i + 1, j:j + 1] / ((h1 - h0) * (w1 - w0))
    return out


def _bn_ref(x, w, b):
    m = x.mean(axis=(0, 2, 3), keepdims=True)
    v = x.var(axis=(0, 2, 3), keepdims=True)
    return (x - m) / np.sqrt(v + 1e-5) * w[None, :, None, None] + b[None, :, None, None]


def _bn_eval_case(x):
    rm = ag.full((3,), 0.5, dtype="float64", device=x.device)
    rv = ag.full((3,), 2.0, dtype="float64", device=x.device)
    return AF.batch_norm(x, rm, rv, training=False)


def _ln_ref(x, axes):
    m = x.mean(axis=axes, keepdims=True)
    v = x.var(axis=axes, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-5)


def _gn_ref(x, g):
    n = x.shape[0]
    xr = x.reshape(n, g, -1)
    return _ln_ref(xr, (-1,)).reshape(x.shape)


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _ce_ref(x, t, weight=None, ignore=-100, smoothing=0.0, reduction="mean"):
    logp = np.log(_softmax(x, 1))
    c = x.shape[1]
    w = np.ones(c) if weight is None else weight
    valid = t != ignore
    ts = np.where(valid, t, 0)
    nll = -logp[np.arange(len(t)), ts] * w[ts] * valid
    smooth = -(logp * w).sum(1) / c * valid
    loss = (1 - smoothing) * nll + smoothing * smooth
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / (w[ts] * valid).sum()


def _nll_ref(x, t, ignore):
    valid = t != ignore
    ts = np.where(valid, t, 0)
    return -(x[np.arange(len(t)), ts] * valid).sum() / valid.sum()


def _sdpa_ref(q, k, v, causal, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.triu(np.ones(s.shape[-2:], bool), 1), -np.inf, s)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    with np.errstate(invalid="ignore"):
        weights = _softmax(s, -1)
    # torch (since 2.5): a query with every key masked attends to nothing: zeros, not NaN.
    return np.where(np.isneginf(s).all(-1, keepdims=True), 0.0, weights) @ v


CASES += [
    # --------------------------------------------------------------- issue 3: elementwise
    OpCase("log1p", lambda a: a.log1p(), np.log1p, ins(pos(3, 4))),
    OpCase("expm1", lambda a: a.expm1(), np.expm1, ins(rnd(3, 4))),
    OpCase("sin", lambda a: a.sin(), np.sin, ins(rnd(3, 4))),
    OpCase("cos", lambda a: a.cos(), np.cos, ins(rnd(3, 4))),
    OpCase("sigmoid", lambda a: a.sigmoid(), lambda a: 1 / (1 + np.exp(-a)), ins(rnd(3, 4))),
    OpCase("rsqrt", lambda a: a.rsqrt(), lambda a: 1 / np.sqrt(a), ins(pos(3, 4))),
    OpCase("reciprocal", lambda a: a.reciprocal(), np.reciprocal, ins(pos(3, 4))),
    OpCase("abs", lambda a: a.abs(), np.abs, ins(away0(3, 4))),
    OpCase("sign", lambda a: a.sign() * a, lambda a: np.sign(a) * a, ins(away0(5))),
    OpCase("erf", lambda a: a.erf(), lambda a: _erf(a), ins(lambda rng: rng.uniform(-4, 4, (40,)))),
    # torch.atan2(input, other) is np.arctan2; points kept away from the origin, where it is
    # not differentiable. The method with broadcasting, then the in-place variant.
    OpCase("atan2", lambda y, x: y.atan2(x), np.arctan2, ins(away0(3, 4), away0(4))),
    OpCase("atan2", lambda y, x: (y * 1.0).atan2_(x) * y, lambda y, x: np.arctan2(y, x) * y,
           ins(away0(3, 4), away0(3, 4)), name="atan2_inplace"),
    # hypot_ as PyTorch's: written into a non-leaf, recorded as HypotBackward0; x ≠ 0 keeps it
    # away from the origin, where hypot has no gradient.
    OpCase("hypot", lambda x, y: (x * 1.0).hypot_(y) * x, lambda x, y: np.hypot(x, y) * x,
           ins(away0(3, 4), rnd(4)), name="hypot_inplace"),
    OpCase("leaky_relu", lambda a: ag.leaky_relu(a, 0.1), lambda a: np.where(a > 0, a, 0.1 * a),
           ins(away0(3, 4))),
    OpCase("gelu", lambda a: AF.gelu(a), lambda a: a * 0.5 * (1 + _erf(a / np.sqrt(2))), ins(rnd(3, 4))),
    OpCase("gelu", lambda a: AF.gelu(a, approximate="tanh"),
           lambda a: 0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a ** 3))),
           ins(rnd(3, 4)), name="gelu_tanh"),
    # gelu's backward is itself an op (PyTorch's gelu_backward): its cases check the second
    # and third derivatives of gelu through it.
    OpCase("gelu_backward", lambda g, a: _gelu_backward(g, a, "none"),
           lambda g, a: g * (0.5 * (1 + _erf(a / np.sqrt(2))) + a * np.exp(-a * a / 2) / np.sqrt(2 * np.pi)),
           ins(rnd(3, 4), rnd(3, 4))),
    OpCase("gelu_backward", lambda g, a: _gelu_backward(g, a, "tanh"), _gelu_tanh_grad,
           ins(rnd(3, 4), rnd(4)), name="gelu_backward_tanh_broadcast"),
    OpCase("silu", lambda a: AF.silu(a), lambda a: a / (1 + np.exp(-a)), ins(rnd(3, 4))),
    OpCase("softplus", lambda a: AF.softplus(a), lambda a: np.log1p(np.exp(a)), ins(rnd(3, 4))),
    OpCase("softplus", lambda a: AF.softplus(a * 10, beta=2.0, threshold=5.0),
           lambda a: np.where(20 * a > 5.0, 10 * a, np.log1p(np.exp(20 * a)) / 2),
           ins(away0(6)), name="softplus_beta_threshold"),
    OpCase("clamp", lambda a: a.clamp(-0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5), ins(rnd(3, 4))),
    OpCase("clamp", lambda a: a.clamp(min=0.1), lambda a: np.maximum(a, 0.1), ins(rnd(3, 4)),
           name="clamp_min"),
    OpCase("clamp.Tensor", lambda a, lo: ag.clip(a, lo, 1.0), lambda a, lo: np.clip(a, lo, 1.0),
           ins(rnd(3, 4), rnd(4)), name="clip_tensor_bounds"),
    OpCase("clamp.Tensor", lambda a, lo, hi: a.clamp(lo, hi), lambda a, lo, hi: np.minimum(np.maximum(a, lo), hi),
           ins(rnd(3, 4), lambda rng: rng.uniform(-1.0, -0.1, (4,)), lambda rng: rng.uniform(0.1, 1.0, (3, 1))),
           name="clamp_tensor_both"),
    OpCase("clamp.Tensor", lambda a, hi: a.clamp(max=hi), lambda a, hi: np.minimum(a, hi),
           ins(rnd(3, 4), rnd(3, 4)), name="clamp_tensor_max"),
    OpCase("where", lambda c, a, b: ag.where(c, a, b), np.where,
           ins(lambda rng: rng.uniform(size=(3, 4)) > 0.5, rnd(3, 4), rnd(4)), nondiff=(0,)),
    OpCase("maximum", lambda a, b: ag.maximum(a, b), np.maximum, ins(rnd(3, 4), rnd(4))),
    OpCase("minimum", lambda a, b: ag.minimum(a, b), np.minimum, ins(rnd(3, 4), rnd(3, 1))),
    OpCase("masked_fill", lambda a, m: a.masked_fill(m, 0.5), lambda a, m: np.where(m, 0.5, a),
           ins(rnd(3, 4), lambda rng: rng.uniform(size=(4,)) > 0.5), nondiff=(1,)),
    # A 0-d tensor value gets the sum of the gradient at the filled positions.
    OpCase("masked_fill", lambda a, v, m: a.masked_fill(m, v) * a, lambda a, v, m: np.where(m, v, a) * a,
           ins(rnd(3, 4), lambda rng: np.float64(rng.standard_normal()) * np.ones(()), _bools(3, 4)),
           nondiff=(2,), name="masked_fill_tensor_value"),
    OpCase("masked_fill", lambda a, m: (a * 2.0).masked_fill_(m, -1.0) * a,
           lambda a, m: np.where(m, -1.0, 2 * a) * a,
           ins(rnd(3, 4), lambda rng: rng.uniform(size=(3, 4)) > 0.5), nondiff=(1,),
           name="masked_fill_inplace"),
    OpCase("logical_and", lambda a, b: a.logical_and(b), np.logical_and, ins(_bools(5), _bools(5)),
           nondiff=(0, 1), grad=False),
    OpCase("logical_or", lambda a, b: a.logical_or(b), np.logical_or, ins(_bools(5), _bools(5)),
           nondiff=(0, 1), grad=False),
    OpCase("logical_xor", lambda a, b: a.logical_xor(b), np.logical_xor, ins(_bools(5), _bools(5)),
           nondiff=(0, 1), grad=False),
    OpCase("logical_not", lambda a: a.logical_not(), np.logical_not, ins(_bools(5)), nondiff=(0,), grad=False),
    OpCase("isnan", lambda a: a.isnan(), np.isnan, ins(lambda rng: np.array([1.0, np.nan, -2.0])),
           grad=False),
    OpCase("fill", lambda a: (a * 1.0).fill_(2.0) * a, lambda a: 2.0 * a, ins(rnd(3, 4))),
    OpCase("copy", lambda a, b: (a * 1.0).copy_(b) * a, lambda a, b: b * a, ins(rnd(3, 4), rnd(4))),
    OpCase("relu", lambda a: (a * 1.0).relu_() * a, lambda a: np.maximum(a, 0) * a,
           ins(away0(3, 4)), name="relu_inplace"),
    OpCase("clamp", lambda a: (a * 1.0).clamp_(-0.5, 0.5) + a, lambda a: np.clip(a, -0.5, 0.5) + a,
           ins(rnd(3, 4)), name="clamp_inplace"),
    OpCase("zeros", lambda a: ag.ops.apply_op(ag.OPS["zeros"], (), {"shape": (2, 3), "dtype": np.dtype("float64"),
                                                                    "device": a.device}) + 1.0,
           lambda a: np.zeros((2, 3)) + 1.0, ins(rnd(1)), grad=False),
    # --------------------------------------------------------------- reductions
    OpCase("amax", lambda a: a.amax(dim=(0, -1)), lambda a: a.max(axis=(0, 2)), ins(rnd(2, 3, 4))),
    OpCase("max.full", lambda a: a.max(), np.max, ins(rnd(3, 4)), name="max_full"),
    OpCase("amin", lambda a: a.amin(dim=1, keepdim=True), lambda a: a.min(axis=1, keepdims=True),
           ins(rnd(3, 4))),
    OpCase("min.full", lambda a: a.min(), np.min, ins(rnd(3, 4)), name="min_full"),
    OpCase("max", lambda a: a.max(dim=-1).values, lambda a: a.max(axis=-1), ins(rnd(3, 4))),
    OpCase("max", lambda a: a.T.max(dim=0, keepdim=True).values, lambda a: a.T.max(axis=0, keepdims=True),
           ins(rnd(3, 4)), name="max_keepdim_noncontig"),
    OpCase("max", lambda a: a.max(dim=1).indices, lambda a: a.argmax(axis=1), ins(rnd(3, 4)),
           grad=False, name="max_indices"),
    OpCase("min", lambda a: a.min(dim=0).values, lambda a: a.min(axis=0), ins(rnd(3, 4))),
    OpCase("argmax", lambda a: a.argmax(dim=-1), lambda a: a.argmax(axis=-1), ins(rnd(3, 4)), grad=False),
    OpCase("argmax", lambda a: a.argmax(), lambda a: np.argmax(a), ins(rnd(3, 4)), grad=False,
           name="argmax_full"),
    OpCase("argmin", lambda a: a.argmin(dim=0, keepdim=True), lambda a: a.argmin(axis=0, keepdims=True),
           ins(rnd(3, 4)), grad=False),
    OpCase("logsumexp", lambda a: a.logsumexp(dim=1), lambda a: np.log(np.exp(a).sum(1)), ins(rnd(3, 4))),
    OpCase("logsumexp", lambda a: (a * 300).logsumexp(dim=(0, 1), keepdim=True),
           lambda a: _lse(300 * a, (0, 1)), ins(rnd(3, 4)), name="logsumexp_large"),
    OpCase("prod.dim", lambda a: a.prod(dim=1), lambda a: a.prod(axis=1), ins(rnd(3, 4)),
           covers=("prod_others",)),
    OpCase("prod", lambda a: a.prod(), lambda a: a.prod(), ins(rnd(3, 4))),
    OpCase("prod.dim", lambda a: (a * _zero_mask(a.device) * _zero_mask(a.device).T.reshape(3, 4)).prod(dim=1),
           lambda a: (a * _zero_mask().numpy() * _zero_mask().numpy().T.reshape(3, 4)).prod(axis=1),
           ins(rnd(3, 4)), name="prod_two_zeros"),
    OpCase("prod", lambda a: (a * _zero_mask(a.device)).prod(), lambda a: (a * _zero_mask().numpy()).prod(),
           ins(rnd(3, 4)), name="prod_with_zero"),
    OpCase("prod.dim", lambda a: a.prod(dim=(0, 2), keepdim=True), lambda a: a.prod(axis=(0, 2), keepdims=True),
           ins(rnd(2, 3, 2)), name="prod_dims"),
    OpCase("var", lambda a: a.var(dim=1), lambda a: a.var(axis=1, ddof=1), ins(rnd(3, 4))),
    OpCase("var", lambda a: a.var(unbiased=False), lambda a: a.var(), ins(rnd(3, 4)), name="var_biased"),
    OpCase("std", lambda a: a.std(dim=(0, 1), keepdim=True, correction=0),
           lambda a: a.std(axis=(0, 1), keepdims=True), ins(rnd(3, 4, 2))),
    OpCase("norm", lambda a: a.norm(), lambda a: np.linalg.norm(a.ravel()), ins(rnd(3, 4)),
           covers=("linalg_vector_norm",)),
    OpCase("norm", lambda a: ag.linalg.vector_norm(a, 0.5, dim=(0, 1)),
           lambda a: (np.abs(a) ** 0.5).sum((0, 1)) ** 2, ins(away0(3, 4, 2)), name="vector_norm_p05"),
    OpCase("norm", lambda a: ag.linalg.vector_norm(a, 1.5, dim=-1, keepdim=True),
           lambda a: (np.abs(a) ** 1.5).sum(-1, keepdims=True) ** (1 / 1.5), ins(away0(3, 4)),
           name="vector_norm_p15"),
    OpCase("norm", lambda a: ag.linalg.vector_norm(a, float("-inf"), dim=1), lambda a: np.abs(a).min(1),
           ins(rnd(3, 4)), name="vector_norm_neg_inf"),
    OpCase("norm", lambda a: a.norm(p=1, dim=1), lambda a: np.abs(a).sum(1), ins(away0(3, 4)), name="norm_l1"),
    OpCase("norm", lambda a: a.norm(p=3, dim=-1, keepdim=True),
           lambda a: (np.abs(a) ** 3).sum(-1, keepdims=True) ** (1 / 3), ins(away0(3, 4)), name="norm_p3"),
    OpCase("norm", lambda a: a.norm(p=float("inf"), dim=0), lambda a: np.abs(a).max(0), ins(rnd(3, 4)),
           name="norm_inf"),
    # --------------------------------------------------------------- shape
    OpCase("flatten", lambda a: a.flatten(1), lambda a: a.reshape(2, -1), ins(rnd(2, 3, 4))),
    OpCase("squeeze", lambda a: a.squeeze(), np.squeeze, ins(rnd(1, 3, 1, 2))),
    OpCase("squeeze.dim", lambda a: a.squeeze(-2), lambda a: a.squeeze(-2), ins(rnd(1, 3, 1, 2)), name="squeeze_dim"),
    OpCase("squeeze.dim", lambda a: a.squeeze(1), lambda a: a, ins(rnd(1, 3, 1, 2)), name="squeeze_dim_not_1"),
    OpCase("squeeze.dims", lambda a: a.squeeze((0, 1, -2)), lambda a: a.reshape(3, 2), ins(rnd(1, 3, 1, 2))),
    OpCase("t", lambda a: a.t() * 2.0, lambda a: a.T * 2.0, ins(rnd(3, 4))),
    OpCase("t", lambda a: a.t() * 2.0, lambda a: a * 2.0, ins(rnd(4)), name="t_1d"),
    OpCase("unsqueeze", lambda a: a.unsqueeze(-1), lambda a: a[..., None], ins(rnd(3, 4))),
    OpCase("repeat", lambda a: a.repeat(2, 1, 3), lambda a: np.tile(a, (2, 1, 3)), ins(rnd(2, 3))),
    OpCase("repeat", lambda a: a.repeat(3, 2), lambda a: np.tile(a, (3, 2)), ins(rnd(2, 3)), name="repeat_same_ndim"),
    OpCase("repeat", lambda a: a.repeat(2, 0), lambda a: np.tile(a, (2, 0)), ins(rnd(2, 3)), name="repeat_zero"),
    OpCase("cat", lambda a, b: ag.cat([a, b.T], -1), lambda a, b: np.concatenate([a, b.T], -1),
           ins(rnd(3, 2), rnd(4, 3))),
    OpCase("cat", lambda a: ag.cat([a] * 70, 0), lambda a: np.concatenate([a] * 70, 0), ins(rnd(2, 3)),
           name="cat_many_repeated"),
    OpCase("stack", lambda a, b: ag.stack([a, b], 1), lambda a, b: np.stack([a, b], 1),
           ins(rnd(3, 4), rnd(3, 4))),
    OpCase("stack", lambda a: ag.stack([a[i % 3] * (i + 1) for i in range(70)], -1),
           lambda a: np.stack([a[i % 3] * (i + 1) for i in range(70)], -1), ins(rnd(3, 2)),
           name="stack_70_through_cat"),
    # split/chunk/unbind: several views under one node (SplitBackward0, SplitWithSizesBackward0,
    # UnbindBackward0 in PyTorch); pieces weighted differently so a swapped gradient shows.
    OpCase("split", lambda a: ag.cat([p.flatten() * (i + 1) for i, p in enumerate(a.split(2, -1))]),
           lambda a: np.concatenate([p.ravel() * (i + 1) for i, p in enumerate(np.split(a, [2, 4], -1))]),
           ins(rnd(3, 5)), name="split_uneven_negative_dim"),
    # Only the middle piece used: the others' gradient is zeros (PyTorch: the same).
    OpCase("split", lambda a: a.split(2, 0)[1] * 3.0, lambda a: a[2:4] * 3.0, ins(rnd(5, 2)),
           name="split_one_piece_used"),
    OpCase("split_with_sizes", lambda a: ag.cat([p.flatten() * (i + 1) for i, p in enumerate(a.split([1, 3], 1))]),
           lambda a: np.concatenate([p.ravel() * (i + 1) for i, p in enumerate(np.split(a, [1], 1))]),
           ins(rnd(3, 4))),
    # An empty piece among them (PyTorch gives a (3, 0) view, and its gradient is empty).
    OpCase("split_with_sizes", lambda a: ag.cat([p.flatten() * (i + 1) for i, p in enumerate(a.split_with_sizes([0, 1, 3], 1))]),
           lambda a: np.concatenate([a[:, :1].ravel() * 2, a[:, 1:].ravel() * 3]),
           ins(rnd(3, 4)), name="split_with_sizes_empty_piece"),
    OpCase("chunk", lambda a: ag.cat([p.flatten() * (i + 1) for i, p in enumerate(a.chunk(3, -1))]),
           lambda a: np.concatenate([p.ravel() * (i + 1) for i, p in enumerate(np.array_split(a, [3, 6], -1))]),
           ins(rnd(2, 7))),
    OpCase("chunk", lambda a: a.chunk(3, -1)[2] - a.chunk(3, -1)[0][:, :1],
           lambda a: a[:, 6:] - a[:, :1], ins(rnd(2, 7)), name="chunk_first_and_last_used"),
    OpCase("narrow", lambda a: a.narrow(-1, 1, 2), lambda a: a[:, 1:3], ins(rnd(3, 4)), covers=("slice",)),
    OpCase("pad", lambda a: ag.pad(a, (1, 2, 0, 1), value=0.5),
           lambda a: np.pad(a, [(0, 0), (0, 1), (1, 2)], constant_values=0.5), ins(rnd(2, 3, 4))),
    OpCase("flip", lambda a: a.flip(0, -1), lambda a: a[::-1, ::-1], ins(rnd(3, 4))),
    OpCase("roll", lambda a: a.roll(1, 0), lambda a: np.roll(a, 1, 0), ins(rnd(3, 4))),
    OpCase("roll", lambda a: a.roll((2, -1), (0, 1)), lambda a: np.roll(a, (2, -1), (0, 1)), ins(rnd(3, 4)),
           name="roll_multi"),
    OpCase("tril", lambda a: a.tril(), np.tril, ins(rnd(4, 4))),
    OpCase("triu", lambda a: a.triu(1), lambda a: np.triu(a, 1), ins(rnd(2, 3, 4))),
    # --------------------------------------------------------------- indexing
    OpCase("gather", lambda a, i: a.gather(1, i), lambda a, i: np.take_along_axis(a, i, 1),
           ins(rnd(3, 4), lambda rng: np.array([[0, 0], [3, 1], [2, 2]])), nondiff=(1,),
           covers=("gather_backward",)),
    OpCase("gather_backward", lambda g, i: ag.ops.apply_op(ag.OPS["gather_backward"], (g, i),
                                                           {"shape": (3, 4), "dim": 1}),
           lambda g, i: _scatter_ref(np.zeros((3, 4)), i, g), ins(rnd(3, 2), lambda rng: np.array([[0, 0], [3, 1], [2, 2]])),
           nondiff=(1,)),
    OpCase("scatter_add", lambda a, i, s: a.scatter_add(1, i, s), lambda a, i, s: _scatter_ref(a.copy(), i, s),
           ins(rnd(3, 4), lambda rng: np.array([[0, 0], [3, 1], [2, 2]]), rnd(3, 2)), nondiff=(1,)),
    OpCase("index_select", lambda a, i: a.index_select(-1, i), lambda a, i: a[:, i],
           ins(rnd(3, 4), lambda rng: np.array([3, 0, 3])), nondiff=(1,)),
    OpCase("index_put", _setitem_case, lambda a, b: _setitem_ref(a, b), ins(rnd(4, 3), rnd(3))),
    OpCase("index_put", _setitem_mask_case, lambda a: np.where(a > 0, 0.0, a) * a, ins(away0(3, 4)),
           name="index_put_mask"),
    OpCase("embedding", lambda w, i: AF.embedding(i, w), lambda w, i: w[i],
           ins(rnd(5, 3), lambda rng: np.array([[0, 4, 4], [1, 0, 2]])), nondiff=(1,),
           covers=("embedding_backward",)),
    # The padding row gets no gradient, so the case zeroes its rows for the finite differences.
    OpCase("embedding", lambda w, i: AF.embedding(i, w, padding_idx=0) * (i != 0).unsqueeze(-1),
           lambda w, i: w[i] * (i != 0)[:, None],
           ins(rnd(5, 3), lambda rng: np.array([0, 4, 0, 2])), nondiff=(1,), name="embedding_padding_idx"),
    OpCase("embedding_backward", lambda g, i: ag.ops.apply_op(ag.OPS["embedding_backward"], (g, i),
                                                              {"num_weights": 5, "padding_idx": 4}),
           lambda g, i: _embedding_bw_ref(g, i, 5, 4), ins(rnd(4, 3), lambda rng: np.array([1, 4, 1, 2])),
           nondiff=(1,)),
    # --------------------------------------------------------------- linear algebra
    OpCase("bmm", lambda a, b: ag.bmm(a, b), np.matmul, ins(rnd(2, 3, 4), rnd(2, 4, 5))),
    OpCase("outer", lambda a, b: ag.outer(a, b), np.outer, ins(rnd(3), rnd(4))),
    OpCase("einsum", lambda a, b: ag.einsum("ij,jk->ik", a, b), lambda a, b: np.einsum("ij,jk->ik", a, b),
           ins(rnd(3, 4), rnd(4, 5))),
    OpCase("einsum", lambda a, b: ag.einsum("bhld,bhsd->bhls", a, b),
           lambda a, b: np.einsum("bhld,bhsd->bhls", a, b), ins(rnd(2, 2, 3, 4), rnd(2, 2, 5, 4)),
           name="einsum_attention"),
    OpCase("einsum", lambda a: ag.einsum("ij->j", a), lambda a: a.sum(0), ins(rnd(3, 4)), name="einsum_unary"),
    OpCase("einsum", lambda a, b: ag.einsum("ij,k->i", a, b), lambda a, b: np.einsum("ij,k->i", a, b),
           ins(rnd(3, 4), rnd(5)), name="einsum_summed_away"),
    OpCase("einsum", lambda a, b: ag.einsum("...ij,...jk", a, b), lambda a, b: np.einsum("...ij,...jk", a, b),
           ins(rnd(2, 3, 4), rnd(2, 4, 2)), name="einsum_ellipsis_implicit"),
    OpCase("einsum", lambda a, b, c: ag.einsum("ij,jk,kl->il", a, b, c),
           lambda a, b, c: np.einsum("ij,jk,kl->il", a, b, c), ins(rnd(2, 3), rnd(3, 4), rnd(4, 2)),
           name="einsum_three"),
    # --------------------------------------------------------------- nn.functional
    OpCase("linear", lambda x, w, b: AF.linear(x, w, b), lambda x, w, b: x @ w.T + b,
           ins(rnd(2, 3, 4), rnd(5, 4), rnd(5))),
    OpCase("linear", lambda x, w, b: AF.linear(x, w, b), lambda x, w, b: x @ w.T + b,
           ins(rnd(3, 4), rnd(5, 4), rnd(5)), name="linear_2d"),
    OpCase("linear.mm", lambda x, w: AF.linear(x, w), lambda x, w: x @ w.T, ins(rnd(4), rnd(5, 4)),
           name="linear_1d_nobias"),
    OpCase("linear.mm", lambda x, w: AF.linear(x.T, w), lambda x, w: x.T @ w.T, ins(rnd(4, 3), rnd(2, 4)),
           name="linear_noncontig"),
    OpCase("linear.mm", lambda x, w: AF.linear(x.transpose(0, 1), w),
           lambda x, w: x.transpose(1, 0, 2) @ w.T, ins(rnd(3, 2, 4), rnd(5, 4)),
           name="linear_3d_noncontig"),
    OpCase("conv2d", lambda x, w, b: AF.conv2d(x, w, b, stride=2, padding=1),
           lambda x, w, b: _conv2d_ref(x, w, b, 2, 1, 1, 1), ins(rnd(2, 3, 7, 6), rnd(4, 3, 3, 3), rnd(4)),
           covers=("im2col", "col2im")),
    OpCase("conv2d", lambda x, w: AF.conv2d(x, w, None, 1, (0, 2), 2, 2),
           lambda x, w: _conv2d_ref(x, w, None, 1, (0, 2), 2, 2), ins(rnd(1, 4, 6, 5), rnd(6, 2, 2, 3)),
           name="conv2d_groups_dilation"),
    OpCase("conv2d", lambda x, w: AF.conv2d(x, w, padding="same"),
           lambda x, w: _conv2d_ref(x, w, None, 1, 1, 1, 1), ins(rnd(1, 2, 5, 5), rnd(3, 2, 3, 3)),
           name="conv2d_same"),
    OpCase("im2col", lambda x: ag.ops.apply_op(ag.OPS["im2col"], (x,), {"kernel": (2, 2), "stride": (1, 2),
                                                                        "dilation": (1, 1)}),
           lambda x: _im2col_ref(x, (2, 2), (1, 2)), ins(rnd(1, 2, 4, 5))),
    OpCase("col2im", lambda c: ag.ops.apply_op(ag.OPS["col2im"], (c,), {"shape": (1, 2, 4, 5), "kernel": (2, 2),
                                                                        "stride": (1, 2), "dilation": (1, 1)}),
           lambda c: _col2im_ref(c, (1, 2, 4, 5), (1, 2)), ins(rnd(1, 2, 2, 2, 3, 2))),
    OpCase("conv1d", lambda x, w, b: AF.conv1d(x, w, b, padding=1),
           lambda x, w, b: _conv2d_ref(x[:, :, None], w[:, :, None], b, 1, (0, 1), 1, 1)[:, :, 0],
           ins(rnd(2, 3, 8), rnd(4, 3, 3), rnd(4))),
    OpCase("conv_transpose2d", lambda x, w, b: AF.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
           lambda x, w, b: _conv_t_ref(x, w, b, 2, 1, 1), ins(rnd(2, 3, 4, 3), rnd(3, 2, 3, 3), rnd(2))),
    OpCase("max_pool2d", lambda x: AF.max_pool2d(x, 2), lambda x: _pool_ref(x, 2, 2, 0, np.max, -np.inf),
           ins(rnd(2, 3, 4, 6)), covers=("max_pool2d_with_indices",)),
    OpCase("max_pool2d", lambda x: AF.max_pool2d(x, 3, 2, 1), lambda x: _pool_ref(x, 3, 2, 1, np.max, -np.inf),
           ins(rnd(1, 2, 5, 5)), name="max_pool2d_pad_overlap"),
    OpCase("max_pool2d", lambda x: AF.max_pool2d(x, (2, 3), (1, 2), 0, 2, ceil_mode=True),
           lambda x: _pool_dilated_ref(x, (2, 3), (1, 2), 2, ceil_mode=True),
           ins(rnd(1, 2, 6, 7)), name="max_pool2d_dilated_ceil"),
    # avg_pool2d's backward: each output's gradient over its window's divisor, spread over the
    # window (ceil_mode's last window, count_include_pad=False's divisor); differentiable.
    OpCase("avg_pool2d_backward",
           lambda g: ag.ops.apply_op(ag.OPS["avg_pool2d_backward"], (g,), {
               "shape": (1, 2, 5, 5), "kernel": (3, 3), "stride": (2, 2), "padding": (1, 1),
               "extra": (0, 0), "count_include_pad": False, "divisor_override": None}),
           lambda g: _avg_backward_ref(g, (1, 2, 5, 5), 3, 2, 1), ins(rnd(1, 2, 3, 3))),
    # The pooling's backward, itself differentiable (double backward: the gradient's entries
    # at the indices), with windows that overlap (summed) and that do not (assigned).
    OpCase("max_pool2d_with_indices_backward",
           lambda g: ag.ops.apply_op(ag.OPS["max_pool2d_with_indices_backward"],
                                     (g, np.array([[[[0, 5], [6, 6]]]])), {"shape": (1, 1, 3, 3)}),
           lambda g: np.bincount([0, 5, 6, 6], weights=g.ravel(), minlength=9).reshape(1, 1, 3, 3),
           ins(rnd(1, 1, 2, 2))),
    OpCase("max_pool2d_with_indices_backward",
           lambda g: ag.ops.apply_op(ag.OPS["max_pool2d_with_indices_backward"],
                                     (g, np.array([[[[0, 5], [6, 8]]]])),
                                     {"shape": (1, 1, 3, 3), "overlap": False}),
           lambda g: np.bincount([0, 5, 6, 8], weights=g.ravel(), minlength=9).reshape(1, 1, 3, 3),
           ins(rnd(1, 1, 2, 2)), name="max_pool2d_with_indices_backward_disjoint"),
    OpCase("avg_pool2d", lambda x: AF.avg_pool2d(x, 2, 1, 1), lambda x: _pool_ref(x, 2, 1, 1, np.mean, 0.0),
           ins(rnd(2, 3, 4, 5))),
    OpCase("adaptive_avg_pool2d", lambda x: AF.adaptive_avg_pool2d(x, (2, 3)),
           lambda x: _adaptive_ref(x, 2, 3), ins(rnd(2, 3, 4, 6)), covers=("_adaptive_avg_pool2d",)),
    OpCase("adaptive_avg_pool2d", lambda x: AF.adaptive_avg_pool2d(x, (3, 4)),
           lambda x: _adaptive_ref(x, 3, 4), ins(rnd(2, 5, 7)), name="adaptive_avg_pool2d_3d_overlapping"),
    OpCase("adaptive_avg_pool2d", lambda x: AF.adaptive_avg_pool2d(x, 1),
           lambda x: x.mean(axis=(2, 3), keepdims=True), ins(rnd(2, 3, 4, 5)), name="adaptive_avg_pool2d_to_one"),
    # The backward, itself differentiable (its adjoint is the pooling again).
    OpCase("_adaptive_avg_pool2d_backward",
           lambda g: ag.ops.apply_op(ag.OPS["_adaptive_avg_pool2d_backward"], (g,), {"shape": (1, 2, 5, 7)}),
           lambda g: _adaptive_avg_backward_ref(g, (1, 2, 5, 7)), ins(rnd(1, 2, 3, 4))),
    OpCase("adaptive_max_pool2d", lambda x: AF.adaptive_max_pool2d(x, (3, 4)),
           lambda x: _adaptive_ref(x, 3, 4, np.max), ins(rnd(2, 3, 5, 7)), name="adaptive_max_pool2d_overlapping"),
    OpCase("adaptive_max_pool2d", lambda x: AF.adaptive_max_pool2d(x, (2, 3)),
           lambda x: _adaptive_ref(x, 2, 3, np.max), ins(rnd(3, 4, 6)), name="adaptive_max_pool2d_3d"),
    OpCase("adaptive_max_pool2d_backward",
           lambda g: ag.ops.apply_op(ag.OPS["adaptive_max_pool2d_backward"],
                                     (g, np.array([[[[0, 4], [4, 8]]]])), {"shape": (1, 1, 3, 3)}),
           lambda g: np.bincount([0, 4, 4, 8], weights=g.ravel(), minlength=9).reshape(1, 1, 3, 3),
           ins(rnd(1, 1, 2, 2))),
    OpCase("adaptive_max_pool2d_backward",
           lambda g: ag.ops.apply_op(ag.OPS["adaptive_max_pool2d_backward"],
                                     (g, np.array([[[0, 4], [4, 8]]])), {"shape": (1, 3, 3)}),
           lambda g: np.bincount([0, 4, 4, 8], weights=g.ravel(), minlength=9).reshape(1, 3, 3),
           ins(rnd(1, 2, 2)), name="adaptive_max_pool2d_backward_3d"),
    OpCase("adaptive_max_pool1d", lambda x: AF.adaptive_max_pool1d(x, 3),
           lambda x: np.stack([x[..., 0:2].max(-1), x[..., 1:4].max(-1), x[..., 3:5].max(-1)], -1),
           ins(rnd(2, 3, 5))),
    OpCase("adaptive_avg_pool2d", lambda x: AF.adaptive_avg_pool2d(x, 3), lambda x: _adaptive_ref(x, 3, 3),
           ins(rnd(1, 2, 5, 7)), name="adaptive_avg_pool2d_uneven"),
    OpCase("batch_norm", lambda x, w, b: AF.batch_norm(x, None, None, w, b, training=True),
           lambda x, w, b: _bn_ref(x, w, b), ins(rnd(4, 3, 2, 2), rnd(3), rnd(3))),
    OpCase("batch_norm", _bn_eval_case, lambda x: (x - 0.5) / np.sqrt(2.0 + 1e-5), ins(rnd(4, 3, 2)),
           name="batch_norm_eval"),
    OpCase("layer_norm", lambda x, w, b: AF.layer_norm(x, (4,), w, b),
           lambda x, w, b: _ln_ref(x, (-1,)) * w + b, ins(rnd(2, 3, 4), rnd(4), rnd(4))),
    OpCase("layer_norm", lambda x: AF.layer_norm(x, (3, 4)), lambda x: _ln_ref(x, (-2, -1)), ins(rnd(2, 3, 4)),
           name="layer_norm_2d"),
    OpCase("layer_norm", lambda x, w: AF.layer_norm(x, (3, 4), w, eps=0.1),
           lambda x, w: (x - x.mean(axis=(-2, -1), keepdims=True))
           / np.sqrt(x.var(axis=(-2, -1), keepdims=True) + 0.1) * w,
           ins(rnd(2, 3, 4), rnd(3, 4)), name="layer_norm_2d_weight_eps"),
    OpCase("layer_norm", lambda x, b: AF.layer_norm(x, 4, None, b),
           lambda x, b: _ln_ref(x, (-1,)) + b, ins(rnd(3, 4), rnd(4)), name="layer_norm_bias_only"),
    OpCase("group_norm", lambda x, w, b: AF.group_norm(x, 2, w, b),
           lambda x, w, b: _gn_ref(x, 2) * w[:, None, None] + b[:, None, None], ins(rnd(2, 4, 3, 2), rnd(4), rnd(4))),
    OpCase("dropout", lambda x: AF.dropout(x, 0.4, generator=np.random.default_rng(7)),
           lambda x: x * (np.random.default_rng(7).random(x.shape) >= 0.4) / 0.6, ins(rnd(4, 5))),
    OpCase("dropout", lambda x: AF.dropout(x, 0.4, training=False) * 1.0, lambda x: x * 1.0, ins(rnd(4, 5)),
           name="dropout_eval"),
    OpCase("softmax", lambda x: x.softmax(-1), lambda x: _softmax(x, -1), ins(rnd(3, 4))),
    OpCase("softmax", lambda x: (x * 400).softmax(0), lambda x: _softmax(400 * x, 0), ins(rnd(3, 4)),
           name="softmax_large_logits"),
    OpCase("log_softmax", lambda x: x.T.log_softmax(1), lambda x: np.log(_softmax(x.T, 1)), ins(rnd(3, 4))),
    OpCase("cross_entropy", lambda x, t: AF.cross_entropy(x, t), lambda x, t: _ce_ref(x, t),
           ins(rnd(5, 4), lambda rng: np.array([0, 3, 3, 1, 2])), nondiff=(1,)),
    OpCase("cross_entropy", lambda x, t: AF.cross_entropy(x, t, ignore_index=1, label_smoothing=0.2),
           lambda x, t: _ce_ref(x, t, ignore=1, smoothing=0.2),
           ins(rnd(5, 4), lambda rng: np.array([0, 1, 3, 1, 2])), nondiff=(1,), name="cross_entropy_ignore_smooth"),
    OpCase("cross_entropy", lambda x, t, w: AF.cross_entropy(x, t, weight=w, reduction="sum"),
           lambda x, t, w: _ce_ref(x, t, weight=w, reduction="sum"),
           ins(rnd(5, 4), lambda rng: np.array([0, 3, 3, 1, 2]), pos(4)), nondiff=(1, 2),
           name="cross_entropy_weight_sum"),
    OpCase("cross_entropy", lambda x, t: AF.cross_entropy(x, t, reduction="none"),
           lambda x, t: _ce_ref(np.moveaxis(x, 1, -1).reshape(-1, 3), t.reshape(-1), reduction="none").reshape(t.shape),
           ins(rnd(2, 3, 4), lambda rng: np.array([[0, 2, 1, 1], [2, 2, 0, 1]])), nondiff=(1,),
           name="cross_entropy_spatial"),
    OpCase("cross_entropy", lambda x, p: AF.cross_entropy(x, p), lambda x, p: -(p * np.log(_softmax(x, 1))).sum(1).mean(),
           ins(rnd(3, 4), lambda rng: _softmax(rng.standard_normal((3, 4)), 1)), nondiff=(1,),
           name="cross_entropy_probs"),
    OpCase("nll_loss", lambda x, t: AF.nll_loss(x, t, ignore_index=2), lambda x, t: _nll_ref(x, t, 2),
           ins(rnd(5, 4), lambda rng: np.array([0, 2, 3, 1, 2])), nondiff=(1,)),
    OpCase("nll_loss_forward", lambda x, t: AF.nll_loss(x, t, reduction="none"),
           lambda x, t: -x[np.arange(len(t)), t], ins(rnd(5, 4), lambda rng: np.array([0, 2, 3, 1, 2])),
           nondiff=(1,), name="nll_loss_none"),
    OpCase("nll_loss_forward", lambda x, t: AF.nll_loss(x, t, ignore_index=0, reduction="sum"),
           lambda x, t: -(x[np.arange(len(t)), t] * (t != 0)).sum(),
           ins(rnd(5, 4), lambda rng: np.array([0, 2, 3, 0, 2])), nondiff=(1,), name="nll_loss_sum_ignore"),
    OpCase("mse_loss", lambda x, y: AF.mse_loss(x, y), lambda x, y: ((x - y) ** 2).mean(), ins(rnd(3, 4), rnd(3, 4))),
    OpCase("mse_loss", lambda x, y: AF.mse_loss(x, y, reduction="none"), lambda x, y: (x - y) ** 2,
           ins(rnd(3, 4), rnd(3, 4)), name="mse_loss_none"),
    OpCase("mse_loss", lambda x, y: AF.mse_loss(x, y, reduction="sum"), lambda x, y: ((x - y) ** 2).sum(),
           ins(rnd(3, 4), rnd(3, 4)), name="mse_loss_sum"),
    OpCase("binary_cross_entropy_with_logits",
           lambda x, t, w: AF.binary_cross_entropy_with_logits(x, t, weight=w, reduction="sum"),
           lambda x, t, w: (w * (np.logaddexp(0, x) - t * x)).sum(),
           ins(rnd(3, 4), lambda rng: rng.uniform(0, 1, (3, 4)), pos(4)), name="bce_logits_weight_sum"),
    OpCase("binary_cross_entropy_with_logits",
           lambda x, t: AF.binary_cross_entropy_with_logits(x, t, reduction="none"),
           lambda x, t: np.logaddexp(0, x) - t * x,
           ins(rnd(3, 4), lambda rng: rng.uniform(0, 1, (3, 4))), name="bce_logits_none"),
    OpCase("l1_loss", lambda x, y: AF.l1_loss(x, y, reduction="sum"), lambda x, y: np.abs(x - y).sum(),
           ins(rnd(3, 4), rnd(3, 4))),
    OpCase("binary_cross_entropy", lambda p, t: AF.binary_cross_entropy(p, t),
           lambda p, t: -(t * np.log(p) + (1 - t) * np.log(1 - p)).mean(),
           ins(lambda rng: rng.uniform(0.1, 0.9, (3, 4)), lambda rng: rng.uniform(0, 1, (3, 4)))),
    OpCase("binary_cross_entropy_with_logits",
           lambda x, t, pw: AF.binary_cross_entropy_with_logits(x, t, pos_weight=pw),
           lambda x, t, pw: -(pw * t * np.log(1 / (1 + np.exp(-x))) + (1 - t) * np.log(1 - 1 / (1 + np.exp(-x)))).mean(),
           ins(rnd(3, 4), lambda rng: rng.uniform(0, 1, (3, 4)), pos(4))),
    OpCase("scaled_dot_product_attention", lambda q, k, v: AF.scaled_dot_product_attention(q, k, v, is_causal=True),
           lambda q, k, v: _sdpa_ref(q, k, v, True), ins(rnd(2, 2, 4, 3), rnd(2, 2, 4, 3), rnd(2, 2, 4, 5))),
    OpCase("scaled_dot_product_attention", lambda q, k, v: AF.scaled_dot_product_attention(q, k, v, scale=0.3),
           lambda q, k, v: _softmax(q @ k.swapaxes(-1, -2) * 0.3, -1) @ v,
           ins(rnd(2, 5, 3), rnd(2, 4, 3), rnd(2, 4, 2)), name="sdpa_no_mask"),
    OpCase("scaled_softmax", lambda x: ag.ops.apply_op(ag.OPS["scaled_softmax"], (x,), {"scale": 0.5, "causal": True}),
           lambda x: _softmax(np.where(np.triu(np.ones((4, 4), bool), 1), -np.inf, 0.5 * x), -1),
           ins(rnd(2, 4, 4))),
    OpCase("scaled_dot_product_attention",
           lambda q, k, v, m: AF.scaled_dot_product_attention(q, k, v, attn_mask=m),
           lambda q, k, v, m: _sdpa_ref(q, k, v, False, m), ins(rnd(3, 4), rnd(5, 4), rnd(5, 2),
                                                               lambda rng: rng.uniform(size=(3, 5)) > 0.3),
           nondiff=(3,), name="sdpa_bool_mask"),
    OpCase("_safe_softmax",
           lambda q, k, v, m: AF.scaled_dot_product_attention(q, k, v, attn_mask=m),
           lambda q, k, v, m: _sdpa_ref(q, k, v, False, m), ins(rnd(3, 4), rnd(5, 4), rnd(5, 2),
                                                               lambda rng: np.array([[1, 0, 1, 1, 0], [0, 0, 0, 0, 0],
                                                                         [0, 1, 1, 0, 1]], bool)),
           nondiff=(3,), name="sdpa_query_with_every_key_masked"),
]


# --------------------------------------------------------------------------- issue 14: more ops


def _spd(a):
    """A symmetric positive-definite matrix from any square ``a``: a a^T + 3 I."""
    return a @ np.swapaxes(a, -1, -2) + 3.0 * np.eye(a.shape[-1])


def _spd_t(a):
    return a @ a.mT + ag.tensor(3.0 * np.eye(a.shape[-1]), device=a.device)


def _eig_features(lib, parts):
    """Eigen/singular values and the squares of the vectors (their signs are arbitrary), flat."""
    values = 0 if len(parts) == 2 else 1   # eigh: (L, V); svd: (U, S, Vh)
    cat = lib.cat if lib is ag else np.concatenate
    return cat([(x if i == values else x * x).flatten() for i, x in enumerate(parts)])


def _expm_ref(a):
    from scipy.linalg import expm  # noqa: PLC0415
    return expm(a)


def _unit(*shape):
    return lambda rng: rng.uniform(-0.9, 0.9, shape)


def _with_zero(a, dev="cpu"):
    m = np.ones(a.shape)
    m.flat[1] = 0.0
    return a * (ag.tensor(m, device=dev) if isinstance(a, ag.Tensor) else m)


def _with_zeros(a, dev="cpu"):
    """Zeros at positions 1 and 3 of dim 1 of the first row: a line with two zeros."""
    m = np.ones(a.shape)
    m[0, 1] = m[0, 3] = 0.0
    return a * (ag.tensor(m, device=dev) if isinstance(a, ag.Tensor) else m)


def _nan_at(device="cpu"):
    m = np.zeros((3, 4))
    m[1, 2] = np.nan
    return ag.tensor(m, device=device)


def _idx(values):
    return lambda rng: np.array(values)


def _np_lcse(a, axis):
    out = np.empty_like(a)
    for k in range(a.shape[axis]):
        out.take
        sl = np.take(a, range(k + 1), axis=axis)
        m = sl.max(axis=axis, keepdims=True)
        np.put_along_axis(out, np.full(tuple(1 if i == axis else s for i, s in enumerate(a.shape)), k),
                          np.log(np.exp(sl - m).sum(axis=axis, keepdims=True)) + m, axis)
    return out


def _np_scatter(a, i, s, dim):
    out = a.copy()
    np.put_along_axis(out, i, s[tuple(slice(0, n) for n in i.shape)], dim)
    return out


def _np_index_add(a, i, s):
    out = a.copy()
    np.add.at(out, (slice(None), i), s)
    return out


def _np_xlogy(x, y):
    return np.where(x == 0, 0.0, x * np.log(np.where(x == 0, 1.0, y)))


CASES += [
    # arithmetic with alpha/value, in-place variants
    OpCase("add", lambda a, b: ag.add(a, b, alpha=2.5), lambda a, b: a + 2.5 * b, ins(rnd(3, 4), rnd(4)),
           name="add_alpha"),
    OpCase("sub", lambda a, b: a.sub(b, alpha=-0.5), lambda a, b: a + 0.5 * b, ins(rnd(3, 4), rnd(3, 4)),
           name="sub_alpha"),
    OpCase("addcmul", lambda a, b, c: ag.addcmul(a, b, c, value=0.5), lambda a, b, c: a + 0.5 * b * c,
           ins(rnd(3, 4), rnd(3, 4), rnd(4))),
    OpCase("addcmul", lambda a, b, c: (a * 1.0).addcmul_(b, c, value=2.0), lambda a, b, c: a + 2.0 * b * c,
           ins(rnd(3, 4), rnd(3, 4), rnd(4)), name="addcmul_inplace"),
    OpCase("pow", lambda a: (a * 1.0).pow_(3), lambda a: a ** 3, ins(rnd(4)), name="pow_inplace"),
    OpCase("neg", lambda a: (a * 1.0).neg_(), lambda a: -a, ins(rnd(4)), name="neg_inplace"),
    OpCase("abs", lambda a: (a * 1.0).abs_(), np.abs, ins(away0(4)), name="abs_inplace"),
    OpCase("sqrt", lambda a: (a * 1.0).sqrt_(), np.sqrt, ins(pos(4)), name="sqrt_inplace"),
    OpCase("square", lambda a: a.square(), np.square, ins(rnd(3, 4))),
    # unary math
    OpCase("tan", lambda a: a.tan(), np.tan, ins(_unit(3, 4))),
    OpCase("atan", lambda a: ag.atan(a), np.arctan, ins(rnd(3, 4))),
    OpCase("asin", lambda a: a.asin(), np.arcsin, ins(_unit(3, 4))),
    OpCase("acos", lambda a: a.acos(), np.arccos, ins(_unit(3, 4))),
    OpCase("sinh", lambda a: a.sinh(), np.sinh, ins(rnd(3, 4))),
    OpCase("cosh", lambda a: a.cosh(), np.cosh, ins(rnd(3, 4))),
    OpCase("asinh", lambda a: a.asinh(), np.arcsinh, ins(rnd(3, 4))),
    OpCase("atanh", lambda a: a.atanh(), np.arctanh, ins(_unit(3, 4))),
    OpCase("log2", lambda a: a.log2(), np.log2, ins(pos(3, 4))),
    OpCase("log10", lambda a: a.log10(), np.log10, ins(pos(3, 4))),
    OpCase("exp2", lambda a: a.exp2(), np.exp2, ins(rnd(3, 4))),
    OpCase("erfc", lambda a: (a * 3).erfc(), lambda a: 1 - _erf(3 * a), ins(rnd(3, 4)),
           tol={"atol": 1e-5}),
    # rounding: zero gradients (checked against finite differences away from the jumps)
    OpCase("floor", lambda a: (a * 3).floor() * a, lambda a: np.floor(3 * a) * a, ins(rnd(3, 4))),
    OpCase("ceil", lambda a: (a * 3).ceil() * a, lambda a: np.ceil(3 * a) * a, ins(rnd(3, 4))),
    OpCase("trunc", lambda a: (a * 3).trunc() * a, lambda a: np.trunc(3 * a) * a, ins(rnd(3, 4))),
    OpCase("round", lambda a: (a * 3).round() * a, lambda a: np.round(3 * a) * a, ins(rnd(3, 4))),
    OpCase("round", lambda a: (a * 3).round(decimals=1) + a, lambda a: np.round(3 * a, 1) + a, ins(rnd(3, 4)),
           name="round_decimals"),
    OpCase("frac", lambda a: (a * 3).frac(), lambda a: np.modf(3 * a)[0], ins(rnd(3, 4))),
    OpCase("fmod.Tensor", lambda a, b: ag.fmod(a * 3, b), lambda a, b: np.fmod(3 * a, b), ins(rnd(3, 4), away0(4))),
    OpCase("remainder.Tensor", lambda a, b: ag.remainder(a * 3, b), lambda a, b: np.remainder(3 * a, b),
           ins(rnd(3, 4), away0(4))),
    OpCase("fmod", lambda a: ag.fmod(a * 3, 0.7), lambda a: np.fmod(3 * a, 0.7), ins(rnd(3, 4)), name="fmod_scalar"),
    OpCase("remainder", lambda a: (a * 3) % -0.7, lambda a: np.remainder(3 * a, -0.7), ins(rnd(3, 4)),
           name="remainder_scalar"),
    OpCase("floor_divide", lambda a, b: ag.ops.apply_op(ag.OPS["floor_divide"], (a, b), None),
           np.floor_divide, ins(rnd(3, 4), away0(4)), grad=False),
    OpCase("xlogy", lambda a, b: ag.xlogy(_with_zero(a, a.device), b), lambda a, b: _np_xlogy(_with_zero(a), b),
           ins(rnd(3, 4), pos(3, 4))),
    # binary composites
    OpCase("lerp.Tensor", lambda a, b, w: ag.lerp(a, b, w), lambda a, b, w: a + w * (b - a), ins(rnd(3, 4), rnd(3, 4), rnd(4))),
    OpCase("lerp", lambda a, b: a.lerp(b, 0.3), lambda a, b: a + 0.3 * (b - a), ins(rnd(3, 4), rnd(4)),
           name="lerp_scalar"),
    OpCase("lerp", lambda a, b: (a * 1.0).lerp_(b, 0.3), lambda a, b: a + 0.3 * (b - a), ins(rnd(3, 4), rnd(4)),
           name="lerp_inplace"),
    OpCase("lerp.Tensor", lambda a, b, w: (a * 1.0).lerp_(b, w), lambda a, b, w: a + w * (b - a),
           ins(rnd(3, 4), rnd(3, 4), rnd(4)), name="lerp_tensor_inplace"),
    OpCase("pow.Tensor_Tensor", lambda a, b: (a * 1.0).pow_(b), np.power, ins(pos(3, 2), rnd(3, 2)),
           name="pow_tensor_inplace"),
    OpCase("hypot", lambda a, b: ag.hypot(a, b), np.hypot, ins(away0(3, 4), rnd(3, 4))),
    OpCase("logaddexp", lambda a, b: ag.logaddexp(a, b * 50), lambda a, b: np.logaddexp(a, 50 * b),
           ins(rnd(3, 4), rnd(4))),
    # scans, sorting, selections
    OpCase("cumsum", lambda a: a.cumsum(1), lambda a: np.cumsum(a, 1), ins(rnd(3, 4))),
    OpCase("cumprod", lambda a: a.cumprod(-1), lambda a: np.cumprod(a, -1), ins(rnd(3, 4))),
    OpCase("cumprod", lambda a: _with_zero(a, a.device).cumprod(0), lambda a: np.cumprod(_with_zero(a), 0),
           ins(rnd(3, 2)), name="cumprod_with_zero"),
    OpCase("logcumsumexp", lambda a: a.logcumsumexp(0), lambda a: _np_lcse(a, 0), ins(rnd(4, 3))),
    OpCase("cumprod", lambda a: _with_zeros(a, a.device).cumprod(1), lambda a: np.cumprod(_with_zeros(a), 1),
           ins(rnd(2, 6, 2)), name="cumprod_two_zeros"),
    OpCase("logcumsumexp", lambda a: (a * 400).logcumsumexp(1), lambda a: _np_lcse(400 * a, 1),
           ins(rnd(2, 5, 3)), name="logcumsumexp_wide"),
    OpCase("dist", lambda a, b: ag.dist(a, b), lambda a, b: np.linalg.norm((a - b).ravel()),
           ins(rnd(3, 4), rnd(4))),
    OpCase("dist", lambda a, b: ag.dist(a, b, 3), lambda a, b: (np.abs(a - b) ** 3).sum() ** (1 / 3),
           ins(rnd(3, 4), rnd(3, 4)), name="dist_p3"),
    OpCase("linalg_cross", lambda a, b: ag.linalg.cross(a, b), lambda a, b: np.cross(a, b),
           ins(rnd(4, 3), rnd(1, 3))),
    OpCase("linalg_cross", lambda a, b: ag.cross(a, b, dim=0), lambda a, b: np.cross(a, b, axis=0),
           ins(rnd(3, 2), rnd(3, 2)), name="cross_dim0"),
    # square-matrix functions of torch.linalg, batched
    OpCase("linalg_inv", lambda a: ag.linalg.inv(a), np.linalg.inv, ins(invertible(2, 3, 3))),
    OpCase("linalg_inv", lambda a: a.inverse(), np.linalg.inv, ins(invertible(4, 4)), name="inverse_method"),
    OpCase("linalg_det", lambda a: ag.linalg.det(a), np.linalg.det, ins(invertible(2, 3, 3))),
    OpCase("linalg_det", lambda a: a.det(), np.linalg.det, ins(invertible(3, 3, negative=True)),
           name="det_negative"),
    OpCase("linalg_slogdet", lambda a: ag.linalg.slogdet(a).logabsdet, lambda a: np.linalg.slogdet(a)[1],
           ins(invertible(2, 3, 3, negative=True))),
    OpCase("linalg_slogdet", lambda a: ag.slogdet(a)[0] * a.slogdet()[1], lambda a: np.prod(np.linalg.slogdet(a), 0),
           ins(invertible(3, 3, negative=True)), name="slogdet_sign"),
    OpCase("linalg_solve", lambda a, b: ag.linalg.solve(a, b), np.linalg.solve,
           ins(invertible(2, 3, 3), rnd(3, 2)), name="solve_matrix"),
    OpCase("linalg_solve", lambda a, b: ag.linalg.solve(a, b), lambda a, b: np.linalg.solve(a, b[..., None])[..., 0],
           ins(invertible(2, 3, 3), rnd(3)), name="solve_vector"),
    OpCase("linalg_solve", lambda a, b: ag.linalg.solve(a, b), lambda a, b: np.linalg.solve(a, b[..., None])[..., 0],
           ins(invertible(2, 3, 3), rnd(2, 3)), name="solve_batch_of_vectors"),
    OpCase("linalg_solve", lambda a, b: ag.linalg.solve(a, b, left=False), lambda a, b: b @ np.linalg.inv(a),
           ins(invertible(3, 3), rnd(2, 2, 3)), name="solve_right"),
    # decompositions of torch.linalg: symmetric inputs made inside fn (cholesky and eigh read one
    # triangle; PyTorch's gradients are the symmetric ones), gauge-invariant outputs (squares of
    # eigen- and singular vectors, whose signs are arbitrary)
    OpCase("linalg_cholesky", lambda a: ag.linalg.cholesky(_spd_t(a)), lambda a: np.linalg.cholesky(_spd(a)),
           ins(rnd(2, 3, 3))),
    OpCase("linalg_cholesky", lambda a: ag.linalg.cholesky(_spd_t(a), upper=True),
           lambda a: np.swapaxes(np.linalg.cholesky(_spd(a)), -1, -2), ins(rnd(3, 3)), name="cholesky_upper"),
    OpCase("linalg_solve_triangular", lambda a, b: ag.linalg.solve_triangular(a, b, upper=True),
           lambda a, b: np.linalg.solve(np.triu(a), b), ins(invertible(3, 3), rnd(2, 3, 2))),
    OpCase("linalg_solve_triangular",
           lambda a, b: ag.linalg.solve_triangular(a, b, upper=False, left=False, unitriangular=True),
           lambda a, b: b @ np.linalg.inv(np.tril(a, -1) + np.eye(3)), ins(rnd(2, 3, 3), rnd(2, 3)),
           name="solve_triangular_right_unit"),
    # the factor's other triangle is masked in fn: PyTorch's gradient for the factor is not
    # (cholesky_solve_backward's -C L), as the factor comes from cholesky
    OpCase("cholesky_solve", lambda b, f: ag.cholesky_solve(b, f.tril()), lambda b, f: np.linalg.solve(f @ f.T, b),
           ins(rnd(2, 3, 2), lambda rng: np.tril(rng.standard_normal((3, 3))) + 3 * np.eye(3))),
    OpCase("cholesky_solve", lambda b, f: b.cholesky_solve(f.triu(), upper=True),
           lambda b, f: np.linalg.solve(f.T @ f, b),
           ins(rnd(3, 1), lambda rng: np.triu(rng.standard_normal((3, 3))) + 3 * np.eye(3)), name="cholesky_solve_upper"),
    OpCase("linalg_qr", lambda a: ag.cat([x.flatten() for x in ag.linalg.qr(a)]),
           lambda a: np.concatenate([x.ravel() for x in np.linalg.qr(a)]), ins(rnd(2, 4, 3))),
    OpCase("linalg_qr", lambda a: ag.cat([x.flatten() for x in ag.linalg.qr(a, mode="complete")]),
           lambda a: np.concatenate([x.ravel() for x in np.linalg.qr(a, mode="complete")]), ins(rnd(3, 5)),
           name="qr_wide_complete"),
    OpCase("linalg_eigh", lambda a: _eig_features(ag, ag.linalg.eigh(a + a.mT)),
           lambda a: _eig_features(np, np.linalg.eigh(a + np.swapaxes(a, -1, -2))), ins(rnd(2, 4, 4))),
    OpCase("linalg_svd", lambda a: _eig_features(ag, ag.linalg.svd(a, full_matrices=False)),
           lambda a: _eig_features(np, np.linalg.svd(a, full_matrices=False)), ins(rnd(2, 5, 3))),
    OpCase("linalg_svd", lambda a: _eig_features(ag, ag.linalg.svd(a, full_matrices=False)),
           lambda a: _eig_features(np, np.linalg.svd(a, full_matrices=False)), ins(rnd(3, 5)), name="svd_wide"),
    OpCase("linalg_pinv", lambda a: ag.linalg.pinv(a), np.linalg.pinv, ins(rnd(2, 4, 3))),
    OpCase("linalg_lstsq", lambda a, b: ag.linalg.lstsq(a, b).solution, lambda a, b: np.linalg.lstsq(a, b)[0],
           ins(rnd(5, 3), rnd(5, 2))),
    OpCase("linalg_lstsq", lambda a, b: ag.linalg.lstsq(a, b, driver="gelsd").residuals,
           lambda a, b: np.linalg.lstsq(a, b)[1], ins(rnd(5, 3), rnd(5)), name="lstsq_vector_residuals"),
    OpCase("linalg_lstsq", lambda a, b: ag.linalg.lstsq(a, b).solution,
           lambda a, b: np.stack([np.linalg.lstsq(m, v)[0] for m, v in zip(a, b)]),
           ins(rnd(2, 3, 4), rnd(2, 3, 2)), name="lstsq_wide_batched"),
    OpCase("linalg_matrix_exp", lambda a: ag.linalg.matrix_exp(a), lambda a: _expm_ref(a), ins(rnd(2, 3, 3))),
    OpCase("take", lambda a: ag.take(a, ag.tensor(np.array([[0, 5], [5, -1]]))),
           lambda a: a.ravel()[[[0, 5], [5, -1]]], ins(rnd(3, 4))),
    OpCase("all", lambda a: (a > 0).all(dim=1), lambda a: (a > 0).all(1), ins(rnd(3, 4)), grad=False),
    OpCase("any", lambda a: ag.any(a > 0), lambda a: (a > 0).any(), ins(rnd(3, 4)), grad=False),
    OpCase("count_nonzero", lambda a: ag.count_nonzero(a > 0, dim=0),
           lambda a: np.count_nonzero(a > 0, axis=0), ins(rnd(3, 4)), grad=False),
    OpCase("diff", lambda a: ag.diff(a, 2, 0), lambda a: np.diff(a, 2, 0), ins(rnd(4, 3))),
    OpCase("diff", lambda a, b: ag.diff(a, prepend=b), lambda a, b: np.diff(a, prepend=b),
           ins(rnd(3, 4), rnd(3, 1)), name="diff_prepend"),
    OpCase("msort", lambda a: ag.msort(a), lambda a: np.sort(a, 0), ins(rnd(4, 3))),
    OpCase("nanmean", lambda a: ag.nanmean(a + _nan_at(a.device), dim=1),
           lambda a: np.nanmean(a + _nan_at().numpy(), axis=1), ins(rnd(3, 4))),
    OpCase("nansum", lambda a: ag.nansum(a + _nan_at(a.device), dim=1),
           lambda a: np.nansum(a + _nan_at().numpy(), axis=1), ins(rnd(3, 4))),
    OpCase("sort", lambda a: a.sort(1, descending=True).values, lambda a: -np.sort(-a, 1), ins(rnd(3, 4))),
    OpCase("sort", lambda a: ag.argsort(a, 0), lambda a: np.argsort(a, 0, kind="stable"), ins(rnd(3, 4)),
           grad=False, name="argsort"),
    OpCase("topk", lambda a: a.topk(2, 1).values, lambda a: -np.sort(-a, 1)[:, :2], ins(rnd(3, 4)), name="topk_dim1"),
    OpCase("kthvalue", lambda a: a.kthvalue(2, 0).values, lambda a: np.sort(a, 0)[1], ins(rnd(3, 4)), name="kthvalue"),
    OpCase("median", lambda a: a.median(), lambda a: np.sort(a.ravel())[5], ins(rnd(3, 4)), name="median"),
    OpCase("nanmedian", lambda a: (a + _nan_at(a.device)).nanmedian(),
           lambda a: np.sort((a + _nan_at().numpy()).ravel())[5], ins(rnd(3, 4)), name="nanmedian"),
    OpCase("nanmedian.dim", lambda a: (a + _nan_at(a.device)).nanmedian(dim=1).values,
           lambda a: np.array([np.sort(r[~np.isnan(r)])[(np.sum(~np.isnan(r)) - 1) // 2]
                               for r in a + _nan_at().numpy()]),
           ins(rnd(3, 4)), name="nanmedian_dim"),
    OpCase("median.dim", lambda a: a.median(dim=1, keepdim=True).values, lambda a: np.sort(a, 1)[:, 1:2], ins(rnd(3, 4)),
           name="median_dim"),
    OpCase("amax", lambda a: ag.aminmax(a, dim=1).max - ag.aminmax(a, dim=1).min,
           lambda a: a.max(1) - a.min(1), ins(rnd(3, 4)), name="aminmax", covers=("amin",)),
    OpCase("var", lambda a: ag.var_mean(a, 1)[0] * ag.var_mean(a, 1)[1], lambda a: a.var(1, ddof=1) * a.mean(1),
           ins(rnd(3, 4)), name="var_mean"),
    # linear algebra
    OpCase("matmul", lambda a, b: ag.mm(a, b), np.matmul, ins(rnd(3, 4), rnd(4, 2)), name="mm"),
    OpCase("matmul.mv", lambda a, b: a.mv(b), np.matmul, ins(rnd(3, 4), rnd(4)), name="mv"),
    OpCase("matmul.dot", lambda a, b: ag.dot(a, b), np.dot, ins(rnd(4), rnd(4)), name="dot"),
    OpCase("addmm", lambda c, a, b: ag.addmm(c, a, b, beta=0.5, alpha=2.0), lambda c, a, b: 0.5 * c + 2 * a @ b,
           ins(rnd(3), rnd(2, 4), rnd(4, 3))),
    OpCase("baddbmm", lambda c, a, b: c.baddbmm(a, b, alpha=-1.0), lambda c, a, b: c - a @ b,
           ins(rnd(2, 3, 3), rnd(2, 3, 4), rnd(2, 4, 3))),
    OpCase("kron", lambda a, b: ag.kron(a, b), np.kron, ins(rnd(2, 3), rnd(3, 2)), covers=("_unsafe_view",)),
    OpCase("tensordot", lambda a, b: ag.tensordot(a, b, dims=([1, 0], [0, 2])),
           lambda a, b: np.tensordot(a, b, axes=([1, 0], [0, 2])), ins(rnd(2, 3, 4), rnd(3, 5, 2))),
    OpCase("cdist", lambda a, b: ag.cdist(a, b), lambda a, b: np.sqrt(((a[:, None] - b[None]) ** 2).sum(-1)),
           ins(rnd(3, 4), rnd(5, 4))),
    OpCase("cdist", lambda a, b: ag.cdist(a, b, p=1.0), lambda a, b: np.abs(a[:, None] - b[None]).sum(-1),
           ins(rnd(3, 4), rnd(2, 4)), name="cdist_p1"),
    OpCase("diagonal", lambda a: a.diagonal(1, 0, 2), lambda a: np.diagonal(a, 1, 0, 2), ins(rnd(3, 2, 4)),
           covers=("diagonal_backward",)),
    OpCase("diagonal", lambda a: a.diagonal(-1), lambda a: np.diagonal(a, -1), ins(rnd(4, 3)), name="diagonal_below"),
    OpCase("diagonal", lambda a: a.diagonal(5), lambda a: np.diagonal(a, 5), ins(rnd(4, 3)), name="diagonal_empty"),
    OpCase("unfold", lambda a: a.unfold(1, 2, 1), lambda a: np.lib.stride_tricks.sliding_window_view(a, 2, 1),
           ins(rnd(3, 4)), covers=("unfold_backward",)),
    OpCase("unfold", lambda a: a.unfold(0, 2, 3), lambda a: np.moveaxis(np.stack([a[0:2], a[3:5]]), 1, -1),
           ins(rnd(6, 2)), name="unfold_step"),
    OpCase("unfold", lambda a: a.unfold(-1, 2, 1) * 1.0, lambda a: np.lib.stride_tricks.sliding_window_view(a, 2, -1),
           ins(rnd(2, 3, 3)), name="unfold_overlap_last"),
    OpCase("topk", lambda a: a.topk(2).values, lambda a: -np.sort(-a, -1)[:, :2], ins(rnd(3, 5))),
    OpCase("topk", lambda a: a.topk(2, dim=0, largest=False).values, lambda a: np.sort(a, 0)[:2],
           ins(rnd(4, 3)), name="topk_smallest_dim0"),
    OpCase("diag", lambda a: ag.diag(a, -1), lambda a: np.diag(a, -1), ins(rnd(3))),
    OpCase("diag", lambda a: a.diag(1), lambda a: np.diag(a, 1), ins(rnd(3, 4)), name="diag_2d"),
    OpCase("trace", lambda a: a.trace(), np.trace, ins(rnd(3, 4))),
    OpCase("einsum", lambda a: ag.einsum("ii->i", a), lambda a: np.einsum("ii->i", a), ins(rnd(3, 3)),
           name="einsum_diagonal"),
    OpCase("einsum", lambda a, b: ag.einsum("ii,ij", a, b), lambda a, b: np.einsum("ii,ij", a, b),
           ins(rnd(3, 3), rnd(3, 2)), name="einsum_trace_implicit"),
    # shape
    OpCase("movedim", lambda a: ag.movedim(a, (0, 1), (2, 0)), lambda a: np.moveaxis(a, (0, 1), (2, 0)),
           ins(rnd(2, 3, 4))),
    OpCase("transpose", lambda a: a.swapaxes(0, -1), lambda a: a.swapaxes(0, -1), ins(rnd(2, 3, 4)), name="swapaxes"),
    OpCase("unbind", lambda a: ag.stack(list(a.unbind(1))[::-1], 0), lambda a: np.stack([a[:, i] for i in (3, 2, 1, 0)]),
           ins(rnd(3, 4))),
    OpCase("unbind", lambda a: a.unbind(-2)[0] * 2.0, lambda a: a[:, 0] * 2.0, ins(rnd(3, 1, 2)),
           name="unbind_dim_of_size_1"),
    OpCase("unbind", lambda a: a.unbind(0)[1] * a.unbind(0)[2], lambda a: a[1] * a[2], ins(rnd(4, 3)),
           name="unbind_some_used"),
    # More pieces than cat joins at once: the backward joins them in rounds.
    OpCase("unbind", lambda a: ag.stack([p * (i % 3 + 1) for i, p in enumerate(a.unbind(0))], 1),
           lambda a: (a * (np.arange(70) % 3 + 1)[:, None]).T, ins(rnd(70, 2)), name="unbind_70_pieces"),
    OpCase("tile", lambda a: a.tile((2,)), lambda a: np.tile(a, (2,)), ins(rnd(2, 3))),
    OpCase("unflatten", lambda a: a.unflatten(1, (2, -1)), lambda a: a.reshape(3, 2, 2), ins(rnd(3, 4))),
    OpCase("tensor_split", lambda a: ag.cat([p.flatten() * (i + 1) for i, p in enumerate(a.tensor_split(3, 1))]),
           lambda a: np.concatenate([p.ravel() * (i + 1) for i, p in enumerate(np.array_split(a, 3, 1))]),
           ins(rnd(2, 7))),
    OpCase("tensor_split", lambda a: ag.cat([p.flatten() * (i + 1) for i, p in enumerate(a.tensor_split([1, 5], 0))]),
           lambda a: np.concatenate([p.ravel() * (i + 1) for i, p in enumerate(np.split(a, [1, 5], 0))]),
           ins(rnd(4, 2)), name="tensor_split_indices"),
    OpCase("hstack", lambda a, b: ag.hstack([a, b]), lambda a, b: np.hstack([a, b]), ins(rnd(2, 3), rnd(2, 1))),
    OpCase("vstack", lambda a, b: ag.vstack([a, b]), lambda a, b: np.vstack([a, b]), ins(rnd(3), rnd(2, 3))),
    # indexing
    OpCase("scatter", lambda a, i, s: a.scatter(1, i, s), lambda a, i, s: _np_scatter(a, i, s, 1),
           ins(rnd(3, 4), _idx([[0, 2], [3, 1], [1, 0]]), rnd(3, 2)), nondiff=(1,)),
    OpCase("scatter.value", lambda a, i: ag.scatter(a, 0, i, value=0.5), lambda a, i: _np_scatter(a, i, np.full(i.shape, 0.5), 0),
           ins(rnd(3, 4), _idx([[0, 2, 1, 1]])), nondiff=(1,), name="scatter_value"),
    OpCase("index_add", lambda a, s, i: a.index_add(1, i, s, alpha=2.0), lambda a, s, i: _np_index_add(a, i, 2 * s),
           ins(rnd(3, 4), rnd(3, 3), _idx([0, 2, 0])), nondiff=(2,)),
    OpCase("index_add", lambda a, s, i: (a * 1.0).index_add_(1, i, s), lambda a, s, i: _np_index_add(a, i, s),
           ins(rnd(3, 4), rnd(3, 3), _idx([3, 2, 3])), nondiff=(2,), name="index_add_inplace"),
    OpCase("masked_select", lambda a, m: a.masked_select(m), lambda a, m: np.broadcast_to(a, m.shape)[m],
           ins(rnd(4), _bools(3, 4)), nondiff=(1,)),
    OpCase("take_along_dim", lambda a, i: ag.take_along_dim(a, i, 1), lambda a, i: np.take_along_axis(a, i, 1),
           ins(rnd(3, 4), _idx([[0, 3, 3]])), nondiff=(1,)),
    OpCase("take_along_dim", lambda a, i: ag.take_along_dim(a, i), lambda a, i: a.ravel()[i],
           ins(rnd(3, 4), _idx([11, 0, 5])), nondiff=(1,), name="take_along_dim_flat"),
    OpCase("repeat_interleave", lambda a: a.repeat_interleave(2), lambda a: np.repeat(a, 2), ins(rnd(2, 3))),
    OpCase("repeat_interleave", lambda a, r: a.repeat_interleave(r, dim=0), lambda a, r: np.repeat(a, r, 0),
           ins(rnd(3, 2), _idx([1, 0, 3])), nondiff=(1,), name="repeat_interleave_counts"),
]


# --------------------------------------------------------------------------- issue 14 (nn)
# Composites added for ported training scripts; values in more detail (padding modes, pooling
# options, interpolate, losses' reductions) in tests/autograd/test_functional_more.py.

def _sp(z):
    return np.logaddexp(0.0, z)


def _away(*shape):
    """Values at least 0.2 away from the kinks at 0 and +-3 (finite differences across a kink
    are not a derivative)."""
    def make(rng):
        v = rng.uniform(0.2, 2.8, shape) * rng.choice([-1.0, 1.0], shape)
        return v + np.where(rng.uniform(size=shape) > 0.7, 3.5 * np.sign(v), 0.0)
    return make


def _away_from_1(*shape):
    """Values at least 0.2 away from the shrinks' kinks at -1 and 1."""
    def make(rng):
        return rng.choice([-2.0, -0.5, 0.5, 2.0], shape) + rng.uniform(-0.3, 0.3, shape)
    return make


def _softmax_np(a, axis):
    e = np.exp(a - a.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


CASES += [
    OpCase("elu", lambda x: AF.elu(x, 0.7), lambda x: np.where(x > 0, x, 0.7 * np.expm1(x)), ins(_away(3, 4))),
    OpCase("selu", AF.selu, lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x)),
           ins(_away(3, 4))),
    OpCase("celu", lambda x: AF.celu(x, 2.0), lambda x: np.where(x > 0, x, 2 * np.expm1(x / 2)), ins(_away(3, 4))),
    # Training: the slope of each x <= 0 from U(lower, upper) with the generator, the gradient
    # that slope (PyTorch's rrelu_with_noise); eval: leaky_relu with the mean slope.
    OpCase("rrelu",
           lambda x: AF.rrelu(x, 0.1, 0.3, training=True, generator=np.random.default_rng(3)),
           lambda x: x * np.where(x <= 0, 0.1 + 0.2 * np.random.default_rng(3).random(x.shape),
                                  1.0),
           ins(_away(3, 4)), covers=("rrelu_with_noise",)),
    OpCase("rrelu", lambda x: AF.rrelu(x, 0.1, 0.3), lambda x: np.where(x > 0, x, 0.2 * x),
           ins(_away(3, 4)), name="rrelu_eval"),
    OpCase("rrelu", lambda x: AF.rrelu(x * 1.0, 0.1, 0.3, inplace=True), lambda x: np.where(x > 0, x, 0.2 * x),
           ins(_away(3, 4)), name="rrelu_inplace", covers=("rrelu_with_noise.inplace",)),
    OpCase("hardtanh", lambda x: AF.hardtanh(x, -2.0, 2.0), lambda x: np.clip(x, -2, 2), ins(_away(3, 4)),
           covers=()),
    OpCase("hardtanh", lambda x: AF.hardtanh(x * 1.0, -1.0, 1.5, inplace=True) * x,
           lambda x: np.clip(x, -1, 1.5) * x, ins(_away(3, 4)), name="hardtanh_inplace"),
    OpCase("threshold", lambda x: AF.threshold(x, 0.5, -1.5), lambda x: np.where(x <= 0.5, -1.5, x),
           ins(_away(3, 4))),
    OpCase("threshold.inplace", lambda x: AF.threshold(x * 1.0, 0.5, -1.5, inplace=True) * x,
           lambda x: np.where(x <= 0.5, -1.5, x) * x, ins(_away(3, 4)), name="threshold_inplace"),
    OpCase("elu.inplace", lambda x: AF.elu(x * 1.0, 0.7, inplace=True) * x,
           lambda x: np.where(x > 0, x, 0.7 * np.expm1(x)) * x, ins(_away(3, 4)), name="elu_inplace"),
    OpCase("celu.inplace", lambda x: AF.celu(x * 1.0, 2.0, inplace=True) * x,
           lambda x: np.where(x > 0, x, 2 * np.expm1(x / 2)) * x, ins(_away(3, 4)), name="celu_inplace"),
    OpCase("leaky_relu.inplace", lambda x: AF.leaky_relu(x * 1.0, 0.2, inplace=True) * x,
           lambda x: np.where(x > 0, x, 0.2 * x) * x, ins(_away(3, 4)), name="leaky_relu_inplace"),
    OpCase("hardshrink", lambda x: AF.hardshrink(x, 1.0), lambda x: np.where(np.abs(x) <= 1, 0, x),
           ins(_away_from_1(3, 4))),
    OpCase("softshrink", lambda x: AF.softshrink(x, 1.0), lambda x: x - np.clip(x, -1, 1),
           ins(_away_from_1(3, 4))),
    OpCase("clamp_min", lambda x: x.clamp_min(0.3), lambda x: np.maximum(x, 0.3), ins(_away_from_1(3, 4))),
    OpCase("clamp_max", lambda x: ag.clamp_max(x, 0.3), lambda x: np.minimum(x, 0.3), ins(_away_from_1(3, 4))),
    OpCase("clamp_min.Tensor", lambda x, m: x.clamp_min(m), np.maximum, ins(_away(3, 4), _away(4)),
           name="clamp_min_tensor"),
    OpCase("clamp_max.Tensor", lambda x, m: (x * 1.0).clamp_max_(m) * x, lambda x, m: np.minimum(x, m) * x,
           ins(_away(3, 4), _away(4)), name="clamp_max_tensor_inplace"),
    OpCase("fmax", ag.fmax, np.fmax, ins(_away(3, 4), _away(4))),
    OpCase("fmin", lambda a, b: a.fmin(b), np.fmin, ins(_away(3, 4), _away(4))),
    OpCase("prelu", AF.prelu, lambda x, w: np.where(x > 0, x, w.reshape(1, 3, 1) * x),
           ins(_away(2, 3, 4), pos(3))),
    OpCase("tanhshrink", AF.tanhshrink, lambda x: x - np.tanh(x), ins(rnd(3, 4))),
    OpCase("hardsigmoid", AF.hardsigmoid, lambda x: np.clip(x / 6 + 0.5, 0, 1), ins(_away(3, 4))),
    OpCase("hardswish", AF.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6, ins(_away(3, 4))),
    OpCase("mish", AF.mish, lambda x: x * np.tanh(_sp(x)), ins(rnd(3, 4))),
    OpCase("logsigmoid", AF.logsigmoid, lambda x: -_sp(-x), ins(rnd(3, 4))),
    OpCase("softsign", AF.softsign, lambda x: x / (1 + np.abs(x)), ins(_away(3, 4))),
    OpCase("softmin", lambda x: AF.softmin(x, 1), lambda x: _softmax_np(-x, 1), ins(rnd(3, 4))),
    OpCase("glu", lambda x: AF.glu(x, 1), lambda x: x[:, :2] / (1 + np.exp(-x[:, 2:])), ins(rnd(3, 4))),
    OpCase("normalize", lambda x: AF.normalize(x, dim=1), lambda x: x / np.linalg.norm(x, axis=1, keepdims=True),
           ins(rnd(3, 4))),
    OpCase("cosine_similarity", lambda a, b: AF.cosine_similarity(a, b),
           lambda a, b: (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1),
           ins(rnd(3, 4), rnd(3, 4))),
    OpCase("pairwise_distance", lambda a, b: AF.pairwise_distance(a, b),
           lambda a, b: np.linalg.norm(a - b + 1e-6, axis=1), ins(rnd(3, 4), rnd(3, 4))),
    OpCase("max_pool1d", lambda x: AF.max_pool1d(x, 2), lambda x: x[..., :6].reshape(2, 3, 3, 2).max(-1),
           ins(rnd(2, 3, 7))),
    OpCase("avg_pool1d", lambda x: AF.avg_pool1d(x, 2), lambda x: x[..., :6].reshape(2, 3, 3, 2).mean(-1),
           ins(rnd(2, 3, 7))),
    OpCase("adaptive_max_pool2d", lambda x: AF.adaptive_max_pool2d(x, 2),
           lambda x: x.reshape(1, 2, 2, 2, 2, 2).max((3, 5)), ins(rnd(1, 2, 4, 4))),
    OpCase("adaptive_avg_pool1d", lambda x: AF.adaptive_avg_pool1d(x, 3),
           lambda x: x.reshape(2, 3, 3, 2).mean(-1), ins(rnd(2, 3, 6))),
    OpCase("unfold", lambda x: AF.unfold(x, 2, stride=2),
           lambda x: x.reshape(1, 2, 2, 2, 2, 2).transpose(0, 1, 3, 5, 2, 4).reshape(1, 8, 4),
           ins(rnd(1, 2, 4, 4))),
    OpCase("pixel_shuffle", lambda x: AF.pixel_shuffle(x, 2),
           lambda x: x.reshape(1, 2, 2, 2, 3, 3).transpose(0, 1, 4, 2, 5, 3).reshape(1, 2, 6, 6),
           ins(rnd(1, 8, 3, 3))),
    OpCase("pixel_unshuffle", lambda x: AF.pixel_unshuffle(x, 2),
           lambda x: x.reshape(1, 2, 3, 2, 3, 2).transpose(0, 1, 3, 5, 2, 4).reshape(1, 8, 3, 3),
           ins(rnd(1, 2, 6, 6))),
    OpCase("interpolate", lambda x: AF.interpolate(x, scale_factor=2, mode="linear", align_corners=True),
           lambda x: np.stack([np.interp(np.linspace(0, 3, 8), np.arange(4), r) for r in x.reshape(-1, 4)]
                              ).reshape(2, 3, 8), ins(rnd(2, 3, 4))),
    OpCase("instance_norm", lambda x: AF.instance_norm(x),
           lambda x: (x - x.mean(2, keepdims=True)) / np.sqrt(x.var(2, keepdims=True) + 1e-5), ins(rnd(2, 3, 5))),
    OpCase("smooth_l1_loss", lambda x, y: AF.smooth_l1_loss(x, y, beta=0.5),
           lambda x, y: np.where(np.abs(x - y) < 0.5, (x - y) ** 2, np.abs(x - y) - 0.25).mean(),
           ins(rnd(3, 4), rnd(3, 4))),
    OpCase("huber_loss", lambda x, y: AF.huber_loss(x, y, delta=0.5),
           lambda x, y: np.where(np.abs(x - y) <= 0.5, 0.5 * (x - y) ** 2, 0.5 * (np.abs(x - y) - 0.25)).mean(),
           ins(rnd(3, 4), rnd(3, 4))),
    OpCase("kl_div", lambda x, t: AF.kl_div(x, t, reduction="batchmean"),
           lambda x, t: (t * (np.log(t) - x)).sum() / 3, ins(rnd(3, 4), pos(3, 4))),
    OpCase("soft_margin_loss", lambda x, y: AF.soft_margin_loss(x, y), lambda x, y: _sp(-y * x).mean(),
           ins(rnd(3, 4), rnd(3, 4))),
]

# Special functions (autograd/ops/_special.py). The references are SciPy's, the library the
# forwards call: these check the wiring, the dtypes and the rules; test_special.py holds what
# PyTorch 2.13 gives at and away from the edges.
import scipy.special as _sps  # noqa: E402


def _uniform(lo, hi, *shape):
    return lambda rng: rng.uniform(lo, hi, shape)


CASES += [
    OpCase("lgamma", lambda a: a.lgamma(), _sps.gammaln, ins(pos(3, 4))),
    OpCase("digamma", lambda a: ag.digamma(a), _sps.psi, ins(pos(3, 4))),
    OpCase("polygamma", lambda a: ag.polygamma(2, a), lambda a: _sps.polygamma(2, a),
           ins(pos(3, 4))),
    OpCase("mvlgamma", lambda a: a.mvlgamma(3), lambda a: _sps.multigammaln(a, 3) if a.ndim == 0
           else np.vectorize(lambda v: _sps.multigammaln(v, 3))(a), ins(_uniform(1.5, 4, 3, 4))),
    OpCase("erfinv", lambda a: a.erfinv(), _sps.erfinv, ins(_uniform(-0.9, 0.9, 3, 4))),
    OpCase("i0", lambda a: ag.i0(a), _sps.i0, ins(rnd(3, 4))),
    OpCase("special_i0e", lambda a: ag.special.i0e(a), _sps.i0e, ins(away0(3, 4))),
    OpCase("special_i1", lambda a: ag.special.i1(a), _sps.i1, ins(rnd(3, 4))),
    OpCase("special_i1e", lambda a: ag.special.i1e(a), _sps.i1e, ins(away0(3, 4))),
    OpCase("special_erfcx", lambda a: ag.special.erfcx(a), _sps.erfcx, ins(rnd(3, 4))),
    OpCase("special_ndtri", lambda a: ag.special.ndtri(a), _sps.ndtri,
           ins(_uniform(0.05, 0.95, 3, 4))),
    OpCase("special_log_ndtr", lambda a: ag.special.log_ndtr(a), _sps.log_ndtr, ins(rnd(3, 4))),
    OpCase("special_entr", lambda a: ag.special.entr(a), _sps.entr, ins(pos(3, 4))),
    OpCase("sinc", lambda a: a.sinc(), np.sinc, ins(rnd(3, 4))),
    OpCase("sinc", lambda a: a.sinc(), np.sinc, ins(_uniform(-0.2, 0.2, 3, 4)), name="sinc_near_0"),
    OpCase("logit", lambda a: a.logit(), _sps.logit, ins(_uniform(0.1, 0.9, 3, 4))),
    OpCase("logit", lambda a: ag.logit(a, 0.05), lambda a: _sps.logit(np.clip(a, 0.05, 0.95)),
           ins(_uniform(0.1, 0.9, 3, 4)), name="logit_eps"),
    OpCase("special_xlog1py", lambda a, b: ag.special.xlog1py(a, b), _sps.xlog1py,
           ins(rnd(3, 4), pos(3, 4))),
    OpCase("special_zeta", lambda a, b: ag.special.zeta(a, b), _sps.zeta,
           ins(_uniform(2, 4, 3, 4), pos(3, 4)), grad=False),
    OpCase("igamma", lambda a, x: ag.igamma(a, x), _sps.gammainc, ins(pos(3, 4), pos(3, 4)),
           nondiff=(0,)),
    OpCase("igammac", lambda a, x: a.igammac(x), _sps.gammaincc, ins(pos(3, 4), pos(3, 4)),
           nondiff=(0,)),
] + [OpCase(f"special_{name}", (lambda n: lambda a: getattr(ag.special, n)(a))(name), ref,
            ins(pos(3, 4)), grad=False)
     for name, ref in [("bessel_j0", _sps.j0), ("bessel_j1", _sps.j1), ("bessel_y0", _sps.y0),
                       ("bessel_y1", _sps.y1), ("modified_bessel_i0", _sps.i0),
                       ("modified_bessel_i1", _sps.i1), ("modified_bessel_k0", _sps.k0),
                       ("modified_bessel_k1", _sps.k1), ("scaled_modified_bessel_k0", _sps.k0e),
                       ("scaled_modified_bessel_k1", _sps.k1e),
                       ("spherical_bessel_j0", lambda a: np.sin(a) / a)]]

# --------------------------------------------------------------------------- running extremes and
# reductions into an index (scatter_reduce, index_reduce); special values (NaN, ties, zeros)
# against PyTorch 2.13 in tests/autograd/test_scatter_reduce.py and test_scans_and_modes.py.

def _np_cum_extreme(a, axis, fn):
    return fn.accumulate(a, axis=axis)


def _np_scatter_reduce(a, i, s, dim, reduce, include_self=True):
    """A loop over the index: PyTorch's definition, one entry at a time."""
    fns = {"sum": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum,
           "mean": np.add}
    out, count = a.copy(), np.ones(a.shape) if include_self else np.zeros(a.shape)
    seen = np.zeros(a.shape, dtype=bool)
    for pos in np.ndindex(*i.shape):
        tgt = list(pos)
        tgt[dim] = i[pos]
        tgt = tuple(tgt)
        if not include_self and not seen[tgt]:
            out[tgt], seen[tgt] = s[pos], True
        else:
            out[tgt] = fns[reduce](out[tgt], s[pos])
        count[tgt] += 1
    return out / np.maximum(count, 1) if reduce == "mean" else out


def _spread(i, shape, dim):
    """index_reduce's 1-D index as scatter_reduce's (along ``dim`` of ``shape``)."""
    view = [1] * len(shape)
    view[dim] = len(i)
    return np.broadcast_to(i.reshape(view), shape)


CASES += [
    OpCase("cummax", lambda a: a.cummax(1).values, lambda a: _np_cum_extreme(a, 1, np.maximum),
           ins(rnd(3, 5))),
    OpCase("cummax", lambda a: ag.cummax(a, -3)[0], lambda a: _np_cum_extreme(a, 0, np.maximum),
           ins(rnd(4, 2, 3)), name="cummax_negative_dim"),
    OpCase("cummin", lambda a: ag.cummin(a, 0).values, lambda a: _np_cum_extreme(a, 0, np.minimum),
           ins(rnd(5, 3))),
] + [
    OpCase("scatter_reduce",
           lambda a, i, s, r=r, inc=inc: a.scatter_reduce(1, i, s, r, include_self=inc),
           lambda a, i, s, r=r, inc=inc: _np_scatter_reduce(a, i, s, 1, r, inc),
           ins(pos(3, 4), _idx([[0, 2, 0], [3, 1, 1], [1, 1, 1]]), pos(3, 3)), nondiff=(1,),
           name=f"scatter_reduce_{r}{'' if inc else '_exclude_self'}")
    for r in ("sum", "prod", "mean", "amax", "amin") for inc in (True, False)
] + [
    OpCase("scatter_reduce", lambda a, i, s: (a * 1.0).scatter_reduce_(0, i, s, "prod"),
           lambda a, i, s: _np_scatter_reduce(a, i, s, 0, "prod"),
           ins(rnd(3, 2), _idx([[2, 0], [2, 2]]), rnd(2, 2)), nondiff=(1,),
           name="scatter_reduce_prod_inplace"),
    OpCase("index_reduce", lambda a, s, i: a.index_reduce(0, i, s, "prod"),
           lambda a, s, i: _np_scatter_reduce(a, _spread(i, s.shape, 0), s, 0, "prod"),
           ins(rnd(3, 2), rnd(4, 2), _idx([2, 0, 2, 2])), nondiff=(2,)),
    OpCase("index_reduce", lambda a, s, i: (a * 1.0).index_reduce_(1, i, s, "amax", include_self=False),
           lambda a, s, i: _np_scatter_reduce(a, _spread(i, s.shape, 1), s, 1, "amax", False),
           ins(rnd(2, 3), rnd(2, 4), _idx([1, 0, 1, 1])), nondiff=(2,), name="index_reduce_amax_inplace"),
]


def _np_put(a, key, v, accumulate):
    out = a.copy()
    if accumulate:
        np.add.at(out, key, v)
    else:
        out[key] = v
    return out


CASES += [
    OpCase("index_put", lambda a, v, i, j: a.index_put((i, j), v, accumulate=True),
           lambda a, v, i, j: _np_put(a, (i, j), v, True),
           ins(rnd(3, 4), rnd(4), _idx([0, 2, 0, 0]), _idx([1, 3, 1, -3])), nondiff=(2, 3),
           name="index_put_accumulate"),
    OpCase("index_put", lambda a, v, m: (a * 1.0).index_put_((m,), v, accumulate=True),
           lambda a, v, m: _np_put(a, m, v, True),
           ins(rnd(3, 2), rnd(2), _idx([True, False, True])), nondiff=(2,),
           name="index_put_accumulate_mask_inplace"),
    OpCase("index_put", lambda a, v, i: ag.index_put(a, (i,), v),
           lambda a, v, i: _np_put(a, (i,), v, False),
           ins(rnd(4, 2), rnd(1, 2), _idx([3, 1])), nondiff=(2,), name="index_put_function"),
]


def _np_mode_line(r):
    vals, counts = np.unique(r, return_counts=True)
    return vals[np.argmax(counts)]


CASES += [
    OpCase("mode", lambda a: (a * 4).round().mode(1).values,   # ties broken at the rounding
           lambda a: np.array([_np_mode_line(r) for r in np.round(a * 4)]), ins(rnd(3, 6)),
           grad=False, name="mode_values"),
    # Distinct values: each as frequent as the others, so the mode is the smallest (min's).
    OpCase("mode", lambda a: a.mode(0).values, lambda a: a.min(0), ins(rnd(4, 3)), name="mode_gradient"),
    OpCase("quantile", lambda a: ag.quantile(a, 0.3, dim=1), lambda a: np.quantile(a, 0.3, axis=1),
           ins(rnd(3, 5))),
    OpCase("quantile", lambda a: a.quantile(ag.tensor(np.array([0.1, 0.5, 0.9]), device=a.device), dim=-2, keepdim=True),
           lambda a: np.quantile(a, [0.1, 0.5, 0.9], axis=-2, keepdims=True), ins(rnd(4, 2, 3)),
           name="quantile_many_q_keepdim"),
    OpCase("quantile", lambda a: ag.quantile(a, 0.4, interpolation="midpoint"),
           lambda a: np.quantile(a, 0.4, method="midpoint"), ins(rnd(3, 4)), name="quantile_midpoint"),
    OpCase("nanquantile", lambda a: ag.nanquantile(a + _nan_at(a.device), 0.6, dim=1, interpolation="higher"),
           lambda a: np.nanquantile(a + _nan_at().numpy(), 0.6, axis=1, method="higher"), ins(rnd(3, 4))),
]



CASES += [
    OpCase("diag_embed", lambda a: ag.diag_embed(a), lambda a: np.stack([np.diag(r) for r in a]),
           ins(rnd(2, 3))),
    OpCase("diag_embed", lambda a: a.diag_embed(1, 0, 2),
           lambda a: np.moveaxis(np.stack([np.diag(r, 1) for r in a]), 0, 1), ins(rnd(2, 3)),
           name="diag_embed_offset_dims"),
    OpCase("diagonal_copy", lambda a: ag.diag(a, -1) * 1.0, lambda a: np.diag(a, -1), ins(rnd(3, 4))),
    OpCase("index_select", lambda a, r: a.repeat_interleave(r, dim=1),
           lambda a, r: np.repeat(a, r, 1), ins(rnd(2, 3), _idx([2, 0, 1])), nondiff=(1,),
           name="repeat_interleave_counts_dim1"),
]


# --------------------------------------------------------------------------- more torch names
# (values checked against torch 2.13 in tests/autograd/test_torch_names.py)

def _specials(*shape):
    """Normal values with NaN, +inf, -inf and a signed zero among them."""
    def make(rng):
        a = rng.standard_normal(shape).reshape(-1)
        a[:4] = [np.nan, np.inf, -np.inf, -0.0]
        return a.reshape(shape)
    return make


def _np_cov(a, correction=1):
    return np.cov(a, ddof=correction)


def _np_pdist(a, p=2.0):
    n = a.shape[0]
    return np.array([np.linalg.norm(a[i] - a[j], p) for i in range(n) for j in range(i + 1, n)])


def _np_renorm(a, p, dim, maxnorm):
    axes = tuple(i for i in range(a.ndim) if i != dim)
    norm = np.sum(np.abs(a) ** p, axis=axes, keepdims=True) ** (1 / p)
    return a * np.where(norm > maxnorm, maxnorm / (norm + 1e-7), 1.0)


def _np_cumtrapz(y, dx=1.0):
    return np.cumsum((y[..., 1:] + y[..., :-1]) * dx / 2, axis=-1)


CASES += [
    OpCase("sgn", lambda a: a.sgn(), np.sign, ins(away0(3, 4))),
    OpCase("copysign", lambda a, b: ag.copysign(a, b), np.copysign, ins(away0(3, 4), away0(4))),
    OpCase("heaviside", lambda a, v: ag.heaviside(a, v), np.heaviside,
           ins(lambda rng: np.array([-1.5, 0.0, 2.0, 0.0]), rnd(4)), grad=False),
    OpCase("nan_to_num", lambda a: ag.nan_to_num(a, nan=1.5, posinf=9.0),
           lambda a: np.nan_to_num(a, nan=1.5, posinf=9.0), ins(_specials(3, 4)), grad=False,
           name="nan_to_num_values"),
    OpCase("nan_to_num", lambda a: (a + _nan_at(a.device)).nan_to_num(),
           lambda a: np.nan_to_num(a + _nan_at().numpy()), ins(rnd(3, 4))),
    OpCase("signbit", lambda a: a.signbit(), np.signbit, ins(_specials(3, 4)), grad=False),
    OpCase("isfinite", lambda a: a.isfinite(), np.isfinite, ins(_specials(3, 4)), grad=False,
           covers=("isinf", "isposinf", "isneginf")),
    OpCase("isinf", lambda a: ag.isinf(a) ^ ag.isposinf(a) ^ ag.isneginf(a),
           lambda a: np.isinf(a) ^ np.isposinf(a) ^ np.isneginf(a), ins(_specials(3, 4)),
           grad=False),
    OpCase("deg2rad", lambda a: ag.deg2rad(a), np.deg2rad, ins(rnd(3, 4))),
    OpCase("rad2deg", lambda a: a.rad2deg(), np.rad2deg, ins(rnd(3, 4))),
    OpCase("addcdiv", lambda a, b, c: ag.addcdiv(a, b, c, value=0.5), lambda a, b, c: a + 0.5 * b / c,
           ins(rnd(3, 4), rnd(3, 1), away0(4))),
    OpCase("addcdiv", lambda a, b, c: (a * 1.0).addcdiv_(b, c), lambda a, b, c: a + b / c,
           ins(rnd(3, 4), rnd(3, 4), away0(3, 4)), name="addcdiv_inplace"),
    OpCase("isclose", lambda a, b: ag.isclose(a, b, rtol=0.1), lambda a, b: np.isclose(a, b, rtol=0.1),
           ins(rnd(3, 4), rnd(3, 4)), grad=False),
    OpCase("float_power", lambda a: ag.float_power(a, 3), lambda a: a ** 3, ins(rnd(3, 4))),
    OpCase("float_power", lambda a, b: a.float_power(b), np.power, ins(pos(3, 4), rnd(4)),
           name="float_power_tensor"),
    OpCase("inner", lambda a, b: ag.inner(a, b), np.inner, ins(rnd(2, 3), rnd(4, 3))),
    OpCase("inner", lambda a, b: a.inner(b), np.inner, ins(rnd(3), rnd(3)), name="inner_1d"),
    OpCase("addmv", lambda a, m, v: ag.addmv(a, m, v, beta=0.5, alpha=2),
           lambda a, m, v: 0.5 * a + 2 * m @ v, ins(rnd(2), rnd(2, 3), rnd(3))),
    OpCase("addr", lambda a, u, v: a.addr(u, v, alpha=3), lambda a, u, v: a + 3 * np.outer(u, v),
           ins(rnd(2, 3), rnd(2), rnd(3))),
    OpCase("addbmm", lambda a, b, c: ag.addbmm(a, b, c, beta=2),
           lambda a, b, c: 2 * a + np.einsum("bij,bjk->ik", b, c), ins(rnd(2, 3), rnd(4, 2, 5), rnd(4, 5, 3))),
    OpCase("multi_dot", lambda a, b, c: ag.linalg.multi_dot([a, b, c]),
           lambda a, b, c: np.linalg.multi_dot([a, b, c]), ins(rnd(3), rnd(3, 4), rnd(4, 2))),
    OpCase("logdet", lambda a: ag.logdet(a), lambda a: np.log(np.linalg.det(a)),
           ins(lambda rng: rng.standard_normal((3, 3)) @ rng.standard_normal((3, 3)).T + 3 * np.eye(3))),
    OpCase("renorm", lambda a: a.renorm(2, 0, 1.5), lambda a: _np_renorm(a, 2, 0, 1.5),
           ins(lambda rng: rng.standard_normal((3, 4)) * np.array([[0.1], [3], [2]]))),
    OpCase("trapezoid", lambda y, x: ag.trapezoid(y, x), lambda y, x: np.trapezoid(y, x),
           ins(rnd(3, 4), rnd(4))),
    OpCase("trapezoid", lambda y: ag.trapz(y, dx=0.5, dim=0), lambda y: np.trapezoid(y, dx=0.5, axis=0),
           ins(rnd(3, 4)), name="trapz_dx_dim0"),
    OpCase("cumulative_trapezoid", lambda y: ag.cumulative_trapezoid(y, dx=2.0),
           lambda y: _np_cumtrapz(y, 2.0), ins(rnd(3, 4))),
    OpCase("cov", lambda a: ag.cov(a), _np_cov, ins(rnd(3, 5))),
    OpCase("cov", lambda a, f, w: a.cov(correction=0, fweights=f, aweights=w),
           lambda a, f, w: np.cov(a, ddof=0, fweights=f, aweights=w),
           ins(rnd(2, 5), _idx([1, 2, 1, 3, 1]), pos(5)), nondiff=(1,), name="cov_weights"),
    OpCase("corrcoef", lambda a: ag.corrcoef(a), np.corrcoef, ins(rnd(3, 6))),
    OpCase("pdist", lambda a: ag.pdist(a), _np_pdist, ins(rnd(4, 3))),
    OpCase("pdist", lambda a: AF.pdist(a, 1.0), lambda a: _np_pdist(a, 1.0), ins(rnd(4, 3)),
           name="pdist_p1"),
]


def _np_rot90(a, k=1, axes=(0, 1)):
    return np.ascontiguousarray(np.rot90(a, k, axes))


def _np_block_diag(*mats):
    mats = [np.atleast_2d(m) for m in mats]
    out = np.zeros((sum(m.shape[0] for m in mats), sum(m.shape[1] for m in mats)))
    r = c = 0
    for m in mats:
        out[r:r + m.shape[0], c:c + m.shape[1]] = m
        r, c = r + m.shape[0], c + m.shape[1]
    return out


CASES += [
    OpCase("rot90", lambda a: ag.rot90(a), _np_rot90, ins(rnd(2, 3))),
    OpCase("rot90", lambda a: a.rot90(-1, [2, 0]), lambda a: _np_rot90(a, -1, (2, 0)),
           ins(rnd(2, 3, 4)), name="rot90_k-1_dims20"),
    OpCase("rot90", lambda a: a.rot90(2, [1, 2]), lambda a: _np_rot90(a, 2, (1, 2)),
           ins(rnd(2, 3, 4)), name="rot90_k2"),
    OpCase("meshgrid", lambda a, b: ag.stack(ag.meshgrid(a, b, indexing="xy")),
           lambda a, b: np.stack(np.meshgrid(a, b, indexing="xy")), ins(rnd(3), rnd(2))),
    OpCase("meshgrid", lambda a, b, c: ag.stack(ag.meshgrid([a, b, c], indexing="ij")),
           lambda a, b, c: np.stack(np.meshgrid(a, b, c, indexing="ij")), ins(rnd(3), rnd(2), rnd(2)),
           name="meshgrid_ij"),
    OpCase("cartesian_prod", lambda a, b: ag.cartesian_prod(a, b),
           lambda a, b: np.array([[x, y] for x in a for y in b]), ins(rnd(3), rnd(2))),
    OpCase("combinations", lambda a: ag.combinations(a, 3, with_replacement=True),
           lambda a: np.array(list(itertools.combinations_with_replacement(a, 3))), ins(rnd(4))),
    OpCase("combinations", lambda a: ag.combinations(a),
           lambda a: np.array(list(itertools.combinations(a, 2))), ins(rnd(4)), name="combinations_2"),
    OpCase("block_diag", lambda a, b, c: ag.block_diag(a, b, c), _np_block_diag,
           ins(rnd(2, 3), rnd(2), lambda rng: np.array(rng.standard_normal()))),
    OpCase("diagflat", lambda a: a.diagflat(1), lambda a: np.diagflat(a, 1), ins(rnd(2, 2))),
    OpCase("dstack", lambda a, b: ag.dstack([a, b]), lambda a, b: np.dstack([a, b]),
           ins(rnd(3), rnd(1, 3, 2))),
    OpCase("column_stack", lambda a, b: ag.column_stack([a, b]),
           lambda a, b: np.column_stack([a, b]), ins(rnd(3), rnd(3, 2))),
    OpCase("tensor_split", lambda a: ag.cat(ag.hsplit(a, 3)[::-1], 1) * 1.0,
           lambda a: np.concatenate(np.hsplit(a, 3)[::-1], 1), ins(rnd(2, 6)), name="hsplit"),
    OpCase("tensor_split", lambda a: ag.cat(a.vsplit([1])[::-1]) + ag.cat(a.dsplit(2), 0).sum(),
           lambda a: np.concatenate(np.vsplit(a, [1])[::-1]) + np.concatenate(np.dsplit(a, 2), 0).sum(),
           ins(rnd(2, 3, 4)), name="vsplit_dsplit"),
]


def _np_unique_consecutive(a):
    a = a.astype(np.int64)
    starts = np.flatnonzero(np.r_[True, a[1:] != a[:-1]])
    return a[starts], np.cumsum(np.r_[0, a[1:] != a[:-1]]), np.diff(np.r_[starts, a.size])


# Counting and searching: no gradient (the outputs never require grad).
CASES += [
    OpCase("bincount", lambda i, w: ag.bincount(i, w, minlength=7), lambda i, w: np.bincount(i, w, 7),
           ins(_idx([0, 1, 1, 4, 2, 1]), rnd(6)), nondiff=(0,), grad=False),
    OpCase("histc", lambda a: ag.histc(a, bins=5, min=-1, max=1),
           lambda a: np.histogram(a, 5, (-1, 1))[0].astype(np.float64), ins(rnd(40)), grad=False),
    OpCase("searchsorted", lambda s, v: ag.bucketize(v, s, right=True),
           lambda s, v: np.searchsorted(s, v, side="right"),
           ins(lambda rng: np.sort(rng.standard_normal(6)), rnd(3, 4)), grad=False),
    OpCase("searchsorted", lambda s, v: ag.searchsorted(s, v),
           lambda s, v: np.stack([np.searchsorted(a, b) for a, b in zip(s, v)]),
           ins(lambda rng: np.sort(rng.standard_normal((2, 5)), axis=-1), rnd(2, 3)), grad=False,
           name="searchsorted_batched"),
    OpCase("unique", lambda a: ag.cat([t.double().reshape(-1) for t in ag.unique(
               (a * 2).round(), return_inverse=True, return_counts=True)[1:]]) * 1.0,
           lambda a: np.concatenate([x.reshape(-1).astype(np.float64) for x in np.unique(
               np.round(a * 2), return_inverse=True, return_counts=True)[1:]]), ins(rnd(3, 4)),
           grad=False),
    OpCase("unique", lambda a: ag.unique(a.round(), dim=1),
           lambda a: np.unique(np.round(a), axis=1), ins(rnd(2, 5)), grad=False, name="unique_dim"),
    # PyTorch: unique_consecutive(tensor([1, 1, 2, 2, 3, 1, 1, 2]), return_inverse=True,
    # return_counts=True) is ([1, 2, 3, 1, 2], [0, 0, 1, 1, 2, 3, 3, 4], [2, 2, 1, 2, 1]).
    OpCase("unique_consecutive", lambda a: ag.cat(ag.unique_consecutive(
               (a > 0).long(), return_inverse=True, return_counts=True)),
           lambda a: np.concatenate(_np_unique_consecutive(a > 0)), ins(rnd(8)), grad=False),
]


# torch.gradient: NumPy's np.gradient (same formulas), one tensor per dim; the coordinates
# form is differentiable in the coordinates too.
CASES += [
    OpCase("gradient", lambda a: ag.cat(ag.gradient(a, spacing=[2.0, 0.5])),
           lambda a: np.concatenate(np.gradient(a, 2.0, 0.5)), ins(rnd(3, 4))),
    OpCase("gradient", lambda a: ag.gradient(a, dim=1, edge_order=2)[0],
           lambda a: np.gradient(a, axis=1, edge_order=2), ins(rnd(3, 5)), name="gradient_edge2"),
    OpCase("gradient", lambda a, c: ag.gradient(a, spacing=(c,), edge_order=2)[0],
           lambda a, c: np.gradient(a, c, edge_order=2),
           ins(rnd(5), lambda rng: np.cumsum(rng.uniform(0.5, 1.5, 5))), name="gradient_coordinates"),
    OpCase("gradient", lambda a, c: ag.gradient(a, spacing=[c], dim=0)[0],
           lambda a, c: np.gradient(a, c, axis=0), ins(rnd(4, 2), lambda rng: np.cumsum(rng.uniform(0.5, 1.5, 4))),
           name="gradient_coordinates_edge1"),
]


CASES += [
    # torch.div(a, b, rounding_mode="floor"/"trunc"): DivBackward2, a zero gradient
    OpCase("div.Tensor_mode", lambda a, b: ag.div(a, b, rounding_mode="floor") + a.div(b, rounding_mode="trunc"),
           lambda a, b: np.floor_divide(a, b) + np.trunc(a / b), ins(rnd(3, 4), away0(4))),
    OpCase("acosh", lambda a: ag.acosh(a + 1.5), lambda a: np.arccosh(a + 1.5), ins(pos(3, 4))),
    OpCase("logaddexp2", lambda a, b: ag.logaddexp2(a, b), np.logaddexp2, ins(rnd(3, 4), rnd(4))),
    OpCase("isin", lambda a, b: ag.isin(a.round(), b.round(), invert=True),
           lambda a, b: np.isin(np.round(a), np.round(b), invert=True), ins(rnd(3, 4), rnd(5)), grad=False),
    OpCase("nonzero", lambda a: ag.nonzero(a > 0), lambda a: np.argwhere(a > 0), ins(rnd(3, 4)), grad=False),
]


def _np_masked_scatter(a, m, s):
    out, m = a.copy(), np.broadcast_to(m, a.shape)
    out[m] = s.reshape(-1)[:m.sum()]
    return out


CASES += [
    OpCase("gcd", lambda a, b: ag.gcd(a, b) + ag.lcm(a, b), lambda a, b: np.gcd(a, b) + np.lcm(a, b),
           ins(_idx([12, -18, 0, 7]), _idx([8, 12, 5, 3])), nondiff=(0, 1), grad=False, covers=("lcm",)),
    OpCase("nextafter", lambda a, b: ag.nextafter(a, b), np.nextafter, ins(rnd(3, 4), rnd(4)), grad=False),
    OpCase("frexp", lambda a: ag.frexp(a).mantissa * ag.frexp(a).exponent,
           lambda a: np.frexp(a)[0] * np.frexp(a)[1], ins(rnd(3, 4)), grad=False),
    OpCase("ldexp", lambda a, e: ag.ldexp(a, e), np.ldexp, ins(rnd(3, 4), _idx([1, -2, 0, 3])),
           nondiff=(1,)),
    OpCase("vander", lambda a: ag.vander(a), np.vander, ins(rnd(4))),
    OpCase("vander", lambda a: ag.vander(a, 3, increasing=True), lambda a: np.vander(a, 3, True),
           ins(rnd(4)), name="vander_increasing"),
    OpCase("index_fill", lambda a, i: a.index_fill(1, i, -1.5),
           lambda a, i: np.where(np.isin(np.arange(4), i % 4), -1.5, a), ins(rnd(3, 4), _idx([0, -2])),
           nondiff=(1,)),
    OpCase("index_fill", lambda a, i, v: ag.index_fill(a, 0, i, v.sum()),
           lambda a, i, v: np.where(np.isin(np.arange(3), i)[:, None], v.sum(), a),
           ins(rnd(3, 2), _idx([2]), lambda rng: np.array(rng.standard_normal())), nondiff=(1,),
           name="index_fill_tensor_value"),
    OpCase("masked_scatter", lambda a, m, s: a.masked_scatter(m, s),
           lambda a, m, s: _np_masked_scatter(a, m, s),
           ins(rnd(2, 3), _idx([True, False, True]), rnd(5)), nondiff=(1,)),
]


CASES += [
    OpCase("histogram", lambda a, w: ag.cat(ag.histogram(a, 4, range=(-1.0, 1.5), weight=w)),
           lambda a, w: np.concatenate(np.histogram(a, 4, range=(-1.0, 1.5), weights=w)),
           ins(rnd(20), pos(20)), grad=False),
    OpCase("histogram", lambda a, e: ag.cat(a.histogram(e, density=True)),
           lambda a, e: np.concatenate(np.histogram(a, e, density=True)),
           ins(rnd(20), lambda rng: np.array([-2.0, -0.5, 0.0, 2.0])), grad=False, name="histogram_edges"),
    OpCase("index_copy", lambda a, i, s: a.index_copy(1, i, s),
           lambda a, i, s: _np_index_copy(a, 1, i, s), ins(rnd(3, 4), _idx([3, 0]), rnd(3, 2)), nondiff=(1,)),
]


def _np_index_copy(a, dim, i, s):
    out = np.moveaxis(a.copy(), dim, 0)
    out[i] = np.moveaxis(s, dim, 0)
    return np.moveaxis(out, 0, dim)


def _np_put_part(a, key, s):
    out = a.copy()
    out[key] = s
    return out


def _np_diagonal_scatter(a, s, offset):
    out = a.copy()
    rows = np.arange(s.shape[0]) + max(-offset, 0)
    out[rows, rows + offset] = s
    return out


CASES += [
    OpCase("select_scatter", lambda a, s: ag.select_scatter(a, s, 1, -1),
           lambda a, s: _np_put_part(a, (slice(None), -1), s), ins(rnd(3, 4), rnd(3))),
    OpCase("slice_scatter", lambda a, s: ag.slice_scatter(a, s, 1, 0, 4, 2),
           lambda a, s: _np_put_part(a, (slice(None), slice(0, 4, 2)), s), ins(rnd(3, 4), rnd(3, 2))),
    OpCase("diagonal_scatter", lambda a, s: ag.diagonal_scatter(a, s, -1),
           lambda a, s: _np_diagonal_scatter(a, s, -1), ins(rnd(3, 4), rnd(2))),
]


# In-place unary math (Tensor.log_() ...): the op's node (PyTorch's LogBackward0 ...) on the
# tensor written into; ``a * 1.0`` is a non-leaf, as PyTorch requires. Inputs inside every
# op's domain (0.2 .. 0.8: asin, acos, atanh, log). round/floor/ceil/trunc/sign/frac: gradient
# 0 (or 1 for frac), as PyTorch's.
def _mid(*shape):
    return lambda rng: rng.uniform(0.2, 0.8, shape)


_INPLACE_UNARY = (("log", np.log), ("log2", np.log2), ("log10", np.log10), ("log1p", np.log1p),
                  ("exp2", np.exp2), ("expm1", np.expm1), ("sin", np.sin), ("cos", np.cos),
                  ("tan", np.tan), ("asin", np.arcsin), ("acos", np.arccos),
                  ("atan", np.arctan), ("sinh", np.sinh), ("cosh", np.cosh),
                  ("asinh", np.arcsinh), ("atanh", np.arctanh), ("rsqrt", lambda a: a ** -0.5),
                  ("reciprocal", lambda a: 1 / a), ("floor", np.floor), ("ceil", np.ceil),
                  ("round", np.round), ("trunc", np.trunc), ("frac", lambda a: a - np.trunc(a)),
                  ("sign", np.sign))
CASES += [OpCase(_op, (lambda m: lambda a: getattr(a * 1.0, m)() * a)(_op + "_"),
                 (lambda f: lambda a: f(a) * a)(_ref), ins(_mid(3, 4)), name=f"{_op}_inplace")
          for _op, _ref in _INPLACE_UNARY]


def _np_put_flat(a, idx, s, accumulate):
    out = a.copy().reshape(-1)
    if accumulate:
        np.add.at(out, idx, s.reshape(-1))
    else:
        out[idx] = s.reshape(-1)
    return out.reshape(a.shape)


_SC_IDX = _idx([[0, 1], [2, 0], [1, 3]])
CASES += [
    OpCase("put", lambda a, s: a.put(ag.tensor([1, -1, 5]), s),
           lambda a, s: _np_put_flat(a, [1, 11, 5], s, False), ins(rnd(3, 4), rnd(3))),
    OpCase("put", lambda a, s: (a * 1.0).put_(ag.tensor([[1, 1], [5, 0]]), s, accumulate=True) * a,
           lambda a, s: _np_put_flat(a, [1, 1, 5, 0], s, True) * a, ins(rnd(3, 4), rnd(2, 2)),
           name="put_inplace_accumulate"),
    OpCase("scatter", lambda a, i, s: (a * 1.0).scatter_(1, i, s) * a,
           lambda a, i, s: _np_put_along(a, i, s) * a, ins(rnd(3, 4), _SC_IDX, rnd(3, 2)),
           nondiff=(1,), name="scatter_inplace"),
    OpCase("scatter.value", lambda a, i: (a * 1.0).scatter_(1, i, 2.5) * a,
           lambda a, i: _np_put_along(a, i, np.full(i.shape, 2.5)) * a, ins(rnd(3, 4), _SC_IDX),
           nondiff=(1,), name="scatter_value_inplace"),
    OpCase("scatter_add", lambda a, i, s: (a * 1.0).scatter_add_(1, i, s) * a,
           lambda a, i, s: _np_add_along(a, i, s) * a, ins(rnd(3, 4), _SC_IDX, rnd(3, 2)),
           nondiff=(1,), name="scatter_add_inplace"),
    OpCase("scatter_reduce", lambda a, i, s: (a * 1.0).scatter_(1, i, s, reduce="multiply"),
           lambda a, i, s: _np_mul_along(a, i, s), ins(rnd(3, 4), _SC_IDX, rnd(3, 2)),
           nondiff=(1,), name="scatter_legacy_multiply"),
    OpCase("addmm", lambda c, a, b: (c * 1.0).addmm_(a, b, beta=0.5, alpha=2.0),
           lambda c, a, b: 0.5 * c + 2.0 * (a @ b), ins(rnd(2, 3), rnd(2, 4), rnd(4, 3)),
           name="addmm_inplace"),
    OpCase("baddbmm", lambda c, a, b: (c * 1.0).baddbmm_(a, b),
           lambda c, a, b: c + a @ b, ins(rnd(2, 2, 3), rnd(2, 2, 4), rnd(2, 4, 3)),
           name="baddbmm_inplace"),
]


def _np_put_along(a, i, s):
    out = a.copy()
    np.put_along_axis(out, i, s, 1)
    return out


def _np_add_along(a, i, s):
    out = a.copy()
    for r in range(i.shape[0]):
        for c in range(i.shape[1]):
            out[r, i[r, c]] += s[r, c]
    return out


def _np_mul_along(a, i, s):
    out = a.copy()
    for r in range(i.shape[0]):
        for c in range(i.shape[1]):
            out[r, i[r, c]] *= s[r, c]
    return out


# Bitwise ops: integers and bools, no gradient. Shift counts inside the width (NumPy's
# shifts are undefined past it; the wider counts are in test_tensor_api.py).
def _ints(*shape):
    return lambda rng: rng.integers(-50, 50, shape)


def _counts(*shape):
    return lambda rng: rng.integers(0, 8, shape)


CASES += [
    OpCase("bitwise_and", lambda a, b: a & b, np.bitwise_and, ins(_ints(5), _ints(5)),
           nondiff=(0, 1), grad=False),
    OpCase("bitwise_or", lambda a, b: a | b, np.bitwise_or, ins(_ints(5), _ints(5)),
           nondiff=(0, 1), grad=False),
    OpCase("bitwise_xor", lambda a, b: a ^ b, np.bitwise_xor, ins(_bools(5), _bools(5)),
           nondiff=(0, 1), grad=False),
    OpCase("bitwise_not", lambda a: ~a, np.invert, ins(_ints(5)), nondiff=(0,), grad=False),
    OpCase("bitwise_left_shift", lambda a, b: a << b, np.left_shift, ins(_ints(5), _counts(5)),
           nondiff=(0, 1), grad=False),
    OpCase("bitwise_right_shift", lambda a, b: a >> b, np.right_shift,
           ins(_ints(5), _counts(5)), nondiff=(0, 1), grad=False),
]


# The fused LSTM layer (ops/rnn.py) through the ``lstm`` composite, against PyTorch's
# documented equations in NumPy. One flat tensor of (output, h_n, c_n), so that the checks
# see every output; the second-derivative check also runs through the workspace output.
def _lstm_ref(x, h0, c0, params, layers, bidirectional, bias, proj):
    sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    directions = 2 if bidirectional else 1
    per = 2 + 2 * bias + proj
    hs, cs = [], []
    for layer in range(layers):
        outs = []
        for d in range(directions):
            k = layer * directions + d
            w = params[k * per:(k + 1) * per]
            b = w[2] + w[3] if bias else 0.0
            h, c = h0[k], c0[k]
            out = np.zeros((x.shape[0], x.shape[1], h.shape[-1]))
            for t in (range(x.shape[0] - 1, -1, -1) if d else range(x.shape[0])):
                i, f, g, o = np.split(x[t] @ w[0].T + h @ w[1].T + b, 4, -1)
                c = sig(f) * c + sig(i) * np.tanh(g)
                h = sig(o) * np.tanh(c)
                h = h @ w[-1].T if proj else h
                out[t] = h
            outs.append(out)
            hs.append(h)
            cs.append(c)
        x = np.concatenate(outs, -1)
    return np.concatenate([x.ravel(), np.ravel(hs), np.ravel(cs)])


def _lstm_case(layers, bidirectional, bias, proj=False):
    def fn(x, h0, c0, *params):
        from gradtrace.autograd.nn.modules.rnn_layers import lstm
        out, h, c = lstm(x, (h0, c0), list(params), bias, layers, 0.0, False, bidirectional,
                         proj)
        return ag.cat([out.reshape(-1), h.reshape(-1), c.reshape(-1)])
    return fn


def _lstm_inputs(steps, batch, n_in, hidden, layers, bidirectional, bias, proj=0):
    directions = 2 if bidirectional else 1
    size = proj or hidden
    makers = [rnd(steps, batch, n_in), rnd(layers * directions, batch, size),
              rnd(layers * directions, batch, hidden)]
    for layer in range(layers):
        for _ in range(directions):
            cols = n_in if layer == 0 else size * directions
            makers += [rnd(4 * hidden, cols), rnd(4 * hidden, size)]
            makers += [rnd(4 * hidden), rnd(4 * hidden)] if bias else []
            makers += [rnd(proj, hidden)] if proj else []
    return ins(*makers)


CASES += [
    OpCase("mkldnn_rnn_layer", _lstm_case(1, False, True),
           lambda x, h0, c0, *p: _lstm_ref(x, h0, c0, p, 1, False, True, False),
           _lstm_inputs(3, 2, 3, 2, 1, False, True), covers=("lstm",), name="lstm_layer"),
    OpCase("mkldnn_rnn_layer", _lstm_case(2, True, False),
           lambda x, h0, c0, *p: _lstm_ref(x, h0, c0, p, 2, True, False, False),
           _lstm_inputs(3, 2, 2, 2, 2, True, False), name="lstm_layer_bidirectional_nobias"),
    OpCase("mkldnn_rnn_layer", _lstm_case(2, True, True, proj=True),
           lambda x, h0, c0, *p: _lstm_ref(x, h0, c0, p, 2, True, True, True),
           _lstm_inputs(3, 2, 2, 3, 2, True, True, proj=2), name="lstm_layer_proj_size"),
]


# The fused GRU layer (ops/gru.py) through the ``gru`` composite, likewise.
def _gru_ref(x, h0, params, layers, bidirectional):
    sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    directions = 2 if bidirectional else 1
    per = len(params) // (layers * directions)
    hs = []
    for layer in range(layers):
        outs = []
        for d in range(directions):
            k = layer * directions + d
            w_ih, w_hh, *b = params[k * per:(k + 1) * per]
            b_ih, b_hh = b if b else (0.0, 0.0)
            h = h0[k]
            out = np.zeros((x.shape[0], x.shape[1], w_hh.shape[1]))
            for t in (range(x.shape[0] - 1, -1, -1) if d else range(x.shape[0])):
                xr, xz, xn = np.split(x[t] @ w_ih.T + b_ih, 3, -1)
                hr, hz, hn = np.split(h @ w_hh.T + b_hh, 3, -1)
                r, z = sig(xr + hr), sig(xz + hz)
                n = np.tanh(xn + r * hn)
                h = (1 - z) * n + z * h
                out[t] = h
            outs.append(out)
            hs.append(h)
        x = np.concatenate(outs, -1)
    return np.concatenate([x.ravel(), np.ravel(hs)])


def _gru_case(layers, bidirectional, bias):
    def fn(x, h0, *params):
        from gradtrace.autograd.nn.modules.rnn_layers import gru
        out, h = gru(x, h0, list(params), bias, layers, 0.0, False, bidirectional)
        return ag.cat([out.reshape(-1), h.reshape(-1)])
    return fn


def _gru_inputs(steps, batch, n_in, hidden, layers, bidirectional, bias):
    directions = 2 if bidirectional else 1
    makers = [rnd(steps, batch, n_in), rnd(layers * directions, batch, hidden)]
    for layer in range(layers):
        for _ in range(directions):
            cols = n_in if layer == 0 else hidden * directions
            makers += [rnd(3 * hidden, cols), rnd(3 * hidden, hidden)]
            makers += [rnd(3 * hidden), rnd(3 * hidden)] if bias else []
    return ins(*makers)


CASES += [
    OpCase("gru_layer", _gru_case(1, False, True),
           lambda x, h0, *p: _gru_ref(x, h0, p, 1, False),
           _gru_inputs(3, 2, 3, 2, 1, False, True), covers=("gru",)),
    OpCase("gru_layer", _gru_case(2, True, False),
           lambda x, h0, *p: _gru_ref(x, h0, p, 2, True),
           _gru_inputs(3, 2, 2, 2, 2, True, False), name="gru_layer_bidirectional_nobias"),
]


# The fused Elman RNN layer (ops/elman.py) through ``rnn_tanh`` / ``rnn_relu``, likewise.
def _elman_ref(x, h0, params, layers, bidirectional, relu):
    act = (lambda z: np.maximum(z, 0)) if relu else np.tanh
    directions = 2 if bidirectional else 1
    per = len(params) // (layers * directions)
    hs = []
    for layer in range(layers):
        outs = []
        for d in range(directions):
            k = layer * directions + d
            w_ih, w_hh, *b = params[k * per:(k + 1) * per]
            bias = b[0] + b[1] if b else 0.0
            h = h0[k]
            out = np.zeros((x.shape[0], x.shape[1], w_hh.shape[1]))
            for t in (range(x.shape[0] - 1, -1, -1) if d else range(x.shape[0])):
                h = act(x[t] @ w_ih.T + h @ w_hh.T + bias)
                out[t] = h
            outs.append(out)
            hs.append(h)
        x = np.concatenate(outs, -1)
    return np.concatenate([x.ravel(), np.ravel(hs)])


def _elman_case(layers, bidirectional, bias, relu):
    def fn(x, h0, *params):
        from gradtrace.autograd.nn.modules import rnn_layers
        run = rnn_layers.rnn_relu if relu else rnn_layers.rnn_tanh
        out, h = run(x, h0, list(params), bias, layers, 0.0, False, bidirectional)
        return ag.cat([out.reshape(-1), h.reshape(-1)])
    return fn


def _elman_inputs(steps, batch, n_in, hidden, layers, bidirectional, bias):
    directions = 2 if bidirectional else 1
    makers = [rnd(steps, batch, n_in), rnd(layers * directions, batch, hidden)]
    for layer in range(layers):
        for _ in range(directions):
            cols = n_in if layer == 0 else hidden * directions
            makers += [rnd(hidden, cols), rnd(hidden, hidden)]
            makers += [rnd(hidden), rnd(hidden)] if bias else []
    return ins(*makers)


CASES += [
    OpCase("rnn_layer", _elman_case(1, False, True, False),
           lambda x, h0, *p: _elman_ref(x, h0, p, 1, False, False),
           _elman_inputs(3, 2, 3, 2, 1, False, True), covers=("rnn_tanh",), name="rnn_layer_tanh"),
    OpCase("rnn_layer", _elman_case(2, True, False, True),
           lambda x, h0, *p: _elman_ref(x, h0, p, 2, True, True),
           _elman_inputs(3, 2, 2, 3, 2, True, False), covers=("rnn_relu",),
           name="rnn_layer_relu_bidirectional_nobias"),
]
