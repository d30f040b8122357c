"""Activation primitives: the threshold-style rules (relu, threshold, hardtanh, the shrinks,
which share PyTorch's threshold_backward select, :func:`.elementwise.grad_unless`) and the smooth and
piecewise-linear activations of ``torch.nn.functional`` (sigmoid, glu, silu, elu/selu/celu,
softplus, leaky_relu, rrelu_with_noise, hardsigmoid, hardswish, logsigmoid, mish).

Elementwise, so each forward-mode rule is its reverse rule on the tangent (``SELF_ADJOINT``);
the arithmetic and unary math they are built beside live in :mod:`.elementwise`.
"""
from __future__ import annotations

import numpy

from ..dispatch import FLOATING, SELF_ADJOINT, defop
from ..promotion import float_type
from .elementwise import grad_unless

# --------------------------------------------------------------------------- threshold-style rules

# relu saves its result, as PyTorch's ReluBackward0: result <= 0 exactly where x <= 0, and a
# NaN input gives a NaN result, which passes the gradient.
defop("relu", lambda xp, x: xp.maximum(x, 0),
      (lambda F, g, out, x: grad_unless(F, g, out <= 0),),
      jvp=SELF_ADJOINT, public="relu", methods="relu", inplace="relu_")


def _threshold_fwd(xp, x, threshold, value):
    # ``x <= threshold ? value : x``: a NaN input stays NaN.
    return xp.where(x <= threshold, xp.asarray(value, x.dtype), x)


def _threshold_vjp(F, g, out, x, threshold, value):
    return grad_unless(F, g, x <= threshold)


# torch.nn.functional.threshold; its in-place form is another node, ThresholdBackward1 (both
# save the input: the in-place one gets a copy of the old values).
defop("threshold", _threshold_fwd, (_threshold_vjp,), jvp=SELF_ADJOINT)
defop("threshold.inplace", _threshold_fwd, (_threshold_vjp,), jvp=SELF_ADJOINT,
      node_name="ThresholdBackward1")


def _hardtanh_fwd(xp, x, min_val=-1.0, max_val=1.0):
    return xp.clip(x, xp.asarray(min_val, x.dtype), xp.asarray(max_val, x.dtype))


# NOTE: a primitive, not clamp: PyTorch's hardtanh (and relu6) is its own node whose gradient
# passes only strictly inside (min_val, max_val) -- a boundary input gets 0, where clamp's
# bounds are inclusive -- and a NaN input passes it.
defop("hardtanh", _hardtanh_fwd,
      (lambda F, g, out, x, min_val=-1.0, max_val=1.0:
       grad_unless(F, g, (x <= min_val) | (x >= max_val)),), jvp=SELF_ADJOINT)


# --------------------------------------------------------------------------- smooth and piecewise activations

def _sigmoid_fwd(xp, x):
    # exp(-|x|) never overflows, and e / (1 + e) keeps full relative precision far below 0
    # (sigmoid(-40) = 4.25e-18, where 1 - 1/(1+e) or a tanh form would give 0).
    if x.dtype.kind not in "fc":   # PyTorch's default float (see dispatch's promotion)
        x = x.astype(float_type(x.dtype))
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


# NOTE: a primitive rather than 1 / (1 + exp(-x)): the form above never overflows and keeps
# its precision for negative x, and one node instead of four keeps the backward cheap.
defop("sigmoid", _sigmoid_fwd,
      (lambda F, g, out, x: g * out * (1 - out),), jvp=SELF_ADJOINT,
      public="sigmoid", methods="sigmoid", inplace="sigmoid_", promote=FLOATING)


# NOTE: glu is a primitive for PyTorch's node (GluBackward0) and one node instead of four.
def _glu_fwd(xp, x, dim=-1):
    a, b = xp.split(x, 2, axis=dim)
    return a * _sigmoid_fwd(xp, b)


def _glu_halves(F, x, dim):
    """(dim, half size, a, sigmoid(b)) of glu's input."""
    d = dim % x.ndim
    h = x.shape[d] // 2
    return d, h, F.slice(x, dim=d, start=0, end=h), F.sigmoid(F.slice(x, dim=d, start=h, end=2 * h))


def _glu_vjp(F, g, out, x, dim=-1):
    d, h, a, s = _glu_halves(F, x, dim)
    return F.cat(g * s, g * a * s * (1 - s), dim=d, sizes=(h, h))


def _glu_jvp(F, t, out, x, dim=-1):
    d, h, a, s = _glu_halves(F, x, dim)
    return (F.slice(t, dim=d, start=0, end=h) * s
            + a * s * (1 - s) * F.slice(t, dim=d, start=h, end=2 * h))


defop("glu", _glu_fwd, (_glu_vjp,), jvp=(_glu_jvp,))


# NOTE: silu and elu are primitives for PyTorch's nodes (SiluBackward0, EluBackward0) and one
# node instead of two to four; values as the composites they replace.
def _silu_vjp(F, g, out, x):
    s = F.sigmoid(x)
    return g * s * (1 + x * (1 - s))


defop("silu", lambda xp, x: x * _sigmoid_fwd(xp, x), (_silu_vjp,), jvp=SELF_ADJOINT,
      public="silu")


def _elu_fwd(xp, x, alpha=1.0, scale=1.0, input_scale=1.0):
    # expm1 of min(x, 0) never overflows, so the unselected branch holds no inf.
    neg = xp.expm1(xp.minimum(x, 0) * input_scale) * (alpha * scale)
    return xp.where(x > 0, x * scale if scale != 1.0 else x, neg).astype(x.dtype, copy=False)


def _elu_vjp(F, g, out, x, alpha=1.0, scale=1.0, input_scale=1.0):
    """PyTorch's elu_backward: x <= 0 takes the exponential branch's slope (alpha at 0); the
    rest, a NaN input included (NaN <= 0 is false), the linear one's."""
    slope = F.exp(F.clamp(x, max=0.0) * input_scale) * (alpha * scale * input_scale)
    return F.where(x <= 0, g * slope, g * scale)


# aten::elu(alpha, scale, input_scale): selu is elu with scale, under the same node; in place
# (elu_, selu_) PyTorch's node is EluBackward1. Both save the input (in place, a copy).
defop("elu", _elu_fwd, (_elu_vjp,), jvp=SELF_ADJOINT)
defop("elu.inplace", _elu_fwd, (_elu_vjp,), jvp=SELF_ADJOINT, node_name="EluBackward1")


def _celu_fwd(xp, x, alpha=1.0):
    return _elu_fwd(xp, x, alpha, 1.0, 1.0 / alpha)


def _celu_vjp(F, g, out, x, alpha=1.0):
    return _elu_vjp(F, g, out, x, alpha, 1.0, 1.0 / alpha)


# NOTE: celu is elu with input_scale = 1 / alpha (as PyTorch computes it), under its own node:
# a composite on expm1 took its slope from expm1's output + 1, which loses the tail
# (exp(-25) came out 4e-6 off in float64).
defop("celu", _celu_fwd, (_celu_vjp,), jvp=SELF_ADJOINT)
defop("celu.inplace", _celu_fwd, (_celu_vjp,), jvp=SELF_ADJOINT, node_name="CeluBackward1")


def _softplus_fwd(xp, x, beta=1.0, threshold=20.0):
    z = x * beta
    soft = (xp.maximum(z, 0) + xp.log1p(xp.exp(-xp.abs(z)))) / beta
    return xp.where(z > threshold, x, soft).astype(x.dtype, copy=False)


# NOTE: a primitive for its gradient: the stable composite max(z, 0) + log1p(exp(-|z|)) has
# two kinks at 0 whose one-sided rules give 0 there, where the true slope is sigmoid(0) = 0.5.
defop("softplus", _softplus_fwd,
      (lambda F, g, out, x, beta=1.0, threshold=20.0:
       F.where(x * beta > threshold, g, g * F.sigmoid(x * beta)),), jvp=SELF_ADJOINT,
      public="softplus", doc="``log(1 + exp(beta x)) / beta``, computed stably; linear above "
      "``threshold`` (torch.nn.functional.softplus).")
def _leaky_relu_fwd(xp, x, negative_slope=0.01):
    return xp.where(x > 0, x, x * negative_slope)


def _leaky_relu_vjp(F, g, out, x, negative_slope=0.01):
    return F.where(x > 0, g, g * negative_slope)


defop("leaky_relu", _leaky_relu_fwd, (_leaky_relu_vjp,), jvp=SELF_ADJOINT, public="leaky_relu")
# In place, PyTorch's node is LeakyReluBackward1.
defop("leaky_relu.inplace", _leaky_relu_fwd, (_leaky_relu_vjp,), jvp=SELF_ADJOINT,
      node_name="LeakyReluBackward1")

# NOTE: a primitive for PyTorch's node: rrelu, in training and in eval alike, is
# ``rrelu_with_noise``, the input times its noise (each entry x <= 0 its slope, 1 elsewhere)
# with the gradient that noise (RreluWithNoiseBackward0; in place RreluWithNoiseBackward1),
# where a product showed MulBackward0. The noise is a constant.
defop("rrelu_with_noise", lambda xp, x, noise: x * noise, (lambda F, g, out, x, noise: g * noise, None),
      jvp=(lambda F, t, out, x, noise: t * noise, None), node_name="RreluWithNoiseBackward0")
defop("rrelu_with_noise.inplace", lambda xp, x, noise: x * noise, (lambda F, g, out, x, noise: g * noise, None),
      jvp=(lambda F, t, out, x, noise: t * noise, None), node_name="RreluWithNoiseBackward1")


# NOTE: hardsigmoid, hardswish, logsigmoid and mish are primitives for PyTorch's gradients and
# nodes: as composites of clamp, relu and abs their one-sided rules gave the wrong slope at
# the kinks (logsigmoid'(0) came out 0, not 0.5; hardswish'(3) 1.5, not 1), NaN where an
# inf gradient met a zero factor, and several nodes where PyTorch has one.
def _hardsigmoid_fwd(xp, x):
    return xp.clip(x + 3, 0, 6) / 6


# PyTorch's hardsigmoid_backward multiplies by ``1.0f / 6.0f``, a float constant, in every
# dtype: its float64 slope is 0.1666666716337204, not 1/6. The same number here, so that
# float64 gradients agree with PyTorch's to the last bit (float32 rounds 1/6 to it anyway).
_ONE_SIXTH_F32 = float(numpy.float32(1.0) / numpy.float32(6.0))


def _hardsigmoid_vjp(F, g, out, x):
    # PyTorch's hardsigmoid_backward: grad / 6 strictly inside (-3, 3), 0 elsewhere and at NaN.
    return grad_unless(F, g * _ONE_SIXTH_F32, ~((x > -3.0) & (x < 3.0)))


defop("hardsigmoid", _hardsigmoid_fwd, (_hardsigmoid_vjp,), jvp=SELF_ADJOINT)


def _hardswish_fwd(xp, x):
    return x * (xp.clip(x + 3, 0, 6) / 6)


def _hardswish_vjp(F, g, out, x):
    # PyTorch's hardswish_backward: 0 up to -3 (inclusive), x / 3 + 1/2 strictly below 3,
    # from 3 on (and at NaN) the gradient itself.
    return grad_unless(F, F.where(x < 3.0, g * (x * (1.0 / 3.0) + 0.5), g), x <= -3.0)


defop("hardswish", _hardswish_fwd, (_hardswish_vjp,), jvp=SELF_ADJOINT)


def _logsigmoid_fwd(xp, x):
    # -(max(-x, 0) + log1p(exp(-|x|))): no overflow for any x, full precision in both tails.
    return -(xp.maximum(-x, 0) + xp.log1p(xp.exp(-xp.abs(x))))


defop("logsigmoid", _logsigmoid_fwd, (lambda F, g, out, x: g * F.sigmoid(-x),),
      jvp=SELF_ADJOINT, node_name="LogSigmoidBackward0", promote=FLOATING)


def _mish_fwd(xp, x):
    return x * xp.tanh(_softplus_fwd(xp, x))


def _mish_vjp(F, g, out, x):
    # PyTorch's mish_backward: tanh(softplus(x)) + x * sigmoid(x) * (1 - tanh(softplus(x))^2).
    t = F.tanh(F.softplus(x))
    return g * (t + x * F.sigmoid(x) * (1 - t * t))


defop("mish", _mish_fwd, (_mish_vjp,), jvp=SELF_ADJOINT)


def _shrink_zero(x, lambd):
    # Both shrinks' backward: 0 on [-lambd, lambd], the gradient elsewhere and at NaN.
    return (x >= -lambd) & (x <= lambd)


def _hardshrink_fwd(xp, x, lambd=0.5):
    return xp.where((x >= -lambd) & (x <= lambd), xp.zeros((), x.dtype), x)


def _softshrink_fwd(xp, x, lambd=0.5):
    # x - lambd above, x + lambd below, 0 between; NaN stays NaN.
    return x - xp.clip(x, xp.asarray(-lambd, x.dtype), xp.asarray(lambd, x.dtype))


defop("hardshrink", _hardshrink_fwd,
      (lambda F, g, out, x, lambd=0.5: grad_unless(F, g, _shrink_zero(x, lambd)),),
      jvp=SELF_ADJOINT)
defop("softshrink", _softshrink_fwd,
      (lambda F, g, out, x, lambd=0.5: grad_unless(F, g, _shrink_zero(x, lambd)),),
      jvp=SELF_ADJOINT)
