"""Elementwise primitives: arithmetic, unary math, comparisons, copies and casts (the
activations are in :mod:`.activation`).

An elementwise op's Jacobian is diagonal, so its forward-mode rule is its reverse rule applied
to the tangent: the entries declare ``jvp=SELF_ADJOINT``.

Where PyTorch's type promotion differs from NumPy's, an entry says so with ``promote=``
(applied in ``dispatch.apply_op``): an int64 tensor with a float32 one, or with 2.5, is float32
in PyTorch (NumPy: float64), so mixed-dtype ops declare ``ELEMENTWISE``; ``FLOATING`` ops
also make integer and bool inputs the default float (``torch.sqrt(torch.tensor([4]))`` is
float32). clamp with number bounds promotes in its forward (``_bounded``): its bounds are
attributes.
"""
from __future__ import annotations

import math

import numpy

from .. import backend
from ..dispatch import (ELEMENTWISE, FLOATING, OPS, SELF_ADJOINT, apply_inplace, apply_op, defop,
                        expose)
from ..promotion import float_type, result_type, torch_name
from .._tensor import Tensor, _is_dtype, _is_float
from ..dtypes import BFLOAT16, ERR_BFLOAT16_CUDA

# --------------------------------------------------------------------------- the threshold select

# The signed integer of each float's size: a select done as a bit mask on the float's bits.
_SAME_SIZE_INT = {numpy.dtype(numpy.float16): numpy.int16,
                  numpy.dtype(numpy.float32): numpy.int32,
                  numpy.dtype(numpy.float64): numpy.int64}
_MINUS_ONE = numpy.int8(-1)


def grad_unless(F, g, zero):
    """``g``, with +0 where ``zero`` is true: PyTorch's threshold_backward select
    (``zero ? 0 : g``), shared by every threshold-style rule (relu, threshold, hardtanh, the
    shrinks). ``zero`` must be a fresh comparison result: on NumPy it is written into.

    A select, not ``g * mask``: an inf or NaN gradient at a masked position must give 0 (the
    product gives NaN, and a RuntimeWarning), and where ``zero`` is false (a NaN input: NaN <= 0
    is false) the gradient passes whole. On NumPy the select is an AND of the gradient's bits
    with a 0 / all-ones mask of the same-size integer, which costs about what the multiply
    does, where ``numpy.where`` costs 2-3 times more (relu's backward is on every training
    step). Anything else goes through ``F.where``: CuPy's where is one fused kernel already,
    complex dtypes have no same-size integer, and under create_graph (tensors) the where
    must be recorded as an op so that the gradient is differentiable again.
    """
    # A NumPy array gradient means an array backward (under create_graph it is a Tensor).
    if g.__class__ is numpy.ndarray and zero.__class__ is numpy.ndarray and g.shape == zero.shape:
        ints = _SAME_SIZE_INT.get(g.dtype)
        if ints is not None:
            # True (1) -> 0, False (0) -> -1, in one-byte ints (the cheapest pass), then
            # sign-extended to all bits set by the cast, into a float array of its own (a
            # view of an int array would be copied, not taken, by AccumulateGrad).
            mask = zero.view(numpy.int8)
            mask += _MINUS_ONE
            out = numpy.empty(g.shape, g.dtype)
            bits = out.view(ints)
            bits[...] = mask
            bits &= g.view(ints)
            return out
    return F.where(zero, 0.0, g)


# Arithmetic. ``a``/``b`` may be tensors or Python scalars; the engine sums each gradient
# back to its input's shape, so rules ignore broadcasting.
# (add_ and sub_, which take ``alpha``, are written in elementwise_api.py.)
defop("add", lambda xp, a, b: a + b, (lambda F, g, out, a, b: g, lambda F, g, out, a, b: g),
      jvp=SELF_ADJOINT, methods="__add__", reflected="__radd__", promote=ELEMENTWISE)
defop("sub", lambda xp, a, b: a - b, (lambda F, g, out, a, b: g, lambda F, g, out, a, b: -g),
      jvp=SELF_ADJOINT, methods="__sub__", promote=ELEMENTWISE)
# ``add(a, b, alpha=k)``, ``sub(a, b, alpha=k)``: a +- k b under one node, AddBackward0 /
# SubBackward0, as PyTorch's (its add.Tensor carries alpha). Overloads, so that the usual
# alpha = 1 pays nothing for it; ``rsub(input, other, alpha)`` is other - alpha input
# (RsubBackward0).
defop("add.alpha", lambda xp, a, b, alpha: a + b * alpha,
      (lambda F, g, out, a, b, alpha: g, lambda F, g, out, a, b, alpha: g * alpha),
      jvp=SELF_ADJOINT, node_name="AddBackward0", promote=ELEMENTWISE)
defop("sub.alpha", lambda xp, a, b, alpha: a - b * alpha,
      (lambda F, g, out, a, b, alpha: g, lambda F, g, out, a, b, alpha: -(g * alpha)),
      jvp=SELF_ADJOINT, node_name="SubBackward0", promote=ELEMENTWISE)
defop("rsub.Tensor", lambda xp, x, other, alpha=1: other - x * alpha if alpha != 1 else other - x,
      (lambda F, g, out, x, other, alpha=1: -(g * alpha) if alpha != 1 else -g,
       lambda F, g, out, x, other, alpha=1: g),
      jvp=SELF_ADJOINT, node_name="RsubBackward0", promote=ELEMENTWISE)
# ``2 - x``: PyTorch's aten::rsub.Scalar, whose node is RsubBackward1.
defop("rsub", lambda xp, x, other: other - x,
      (lambda F, g, out, x, other: -g, lambda F, g, out, x, other: g),
      jvp=SELF_ADJOINT, methods="__rsub__", node_name="RsubBackward1", promote=ELEMENTWISE)
defop("mul", lambda xp, a, b: a * b,
      (lambda F, g, out, a, b: g * b, lambda F, g, out, a, b: g * a),
      jvp=SELF_ADJOINT, public="mul", methods=("mul", "__mul__"), reflected="__rmul__",
      inplace="mul_", promote=ELEMENTWISE)
defop("div", lambda xp, a, b: a / b,
      (lambda F, g, out, a, b: g / b, lambda F, g, out, a, b: -g * out / b),
      jvp=SELF_ADJOINT, methods="__truediv__", reflected="__rtruediv__", inplace="div_",
      promote=FLOATING)
defop("neg", lambda xp, x: -x, (lambda F, g, out, x: -g,), jvp=SELF_ADJOINT,
      public="neg", methods=("neg", "__neg__"), inplace="neg_")


def _pow_grad_base(F, g, out, a, b):
    """``g * b * a**(b-1)``, zero where ``b == 0`` (PyTorch's rule: a select, so no NaN from
    ``0**-1`` at ``a == 0`` nor from an inf gradient). The exponent is made safe as well as
    the product masked, so that a second derivative sees no inf either."""
    if not hasattr(b, "shape"):
        return F.zeros_like(g) if b == 0 else g * b * a ** (b - 1)
    return grad_unless(F, g * b * a ** F.where(b == 0, 0.0, b - 1), b == 0)


def _pow_grad_exponent(F, g, out, a, b):
    """``g * a**b * log(a)``, zero where ``a == 0`` and ``b >= 0`` (PyTorch masks the same;
    below, 0**b * log(0) is -inf, as PyTorch's)."""
    if not hasattr(a, "shape"):
        # 0**b is 0 or 1 for b >= 0 and inf below: out * log(0) is -out there.
        return g * F.where(b >= 0, 0.0, -out) if a == 0 else g * out * math.log(a)
    return g * out * F.log(F.where((a == 0) & (b >= 0), 1.0, a))


def _pow_fwd(xp, a, b):
    return a ** b


# One rule set under PyTorch's three nodes: a number exponent PowBackward0 (aten::pow.Tensor_
# Scalar), a tensor one PowBackward1 (pow.Tensor_Tensor), a number base PowBackward2
# (pow.Scalar); :func:`pow` picks by the operands.
_POW = defop("pow", _pow_fwd, (_pow_grad_base, _pow_grad_exponent), jvp=SELF_ADJOINT,
             promote=ELEMENTWISE)
_POW_TENSOR = defop("pow.Tensor_Tensor", _pow_fwd, (_pow_grad_base, _pow_grad_exponent),
                    jvp=SELF_ADJOINT, node_name="PowBackward1", promote=ELEMENTWISE)
_POW_SCALAR = defop("pow.Scalar", _pow_fwd, (_pow_grad_base, _pow_grad_exponent),
                    jvp=SELF_ADJOINT, node_name="PowBackward2", promote=ELEMENTWISE)


@expose(public="pow", methods=("pow", "__pow__"))
def pow(input, exponent):  # noqa: A001, A002 - PyTorch's names
    """``input ** exponent``; either may be a number."""
    if not isinstance(exponent, Tensor):
        return apply_op(_POW, (input, exponent), None)
    return apply_op(_POW_TENSOR if isinstance(input, Tensor) else _POW_SCALAR,
                    (input, exponent), None)


@expose(methods="pow_")
def pow_(self, exponent):
    """In-place :func:`pow`."""
    return apply_inplace(_POW_TENSOR if isinstance(exponent, Tensor) else _POW, self,
                         (exponent,), None)


@expose(methods="__rpow__")
def _rpow(self, other):
    """``other ** self`` for a number ``other``."""
    return apply_op(_POW_SCALAR, (other, self), None)


# NOTE: lerp and addcmul are primitives for PyTorch's nodes (LerpBackward0/1,
# AddcmulBackward0) and one node instead of three; values as the composites they replace.
def _lerp_fwd(xp, input, end, weight):  # noqa: A002 - PyTorch's names
    return input + weight * (end - input)


# A number weight is an attribute (LerpBackward0), a tensor one an input (LerpBackward1).
defop("lerp", _lerp_fwd, (lambda F, g, out, input, end, weight: g * (1 - weight),
                          lambda F, g, out, input, end, weight: g * weight), jvp=SELF_ADJOINT,
      promote=ELEMENTWISE)
defop("lerp.Tensor", _lerp_fwd, (lambda F, g, out, input, end, weight: g * (1 - weight),
                                 lambda F, g, out, input, end, weight: g * weight,
                                 lambda F, g, out, input, end, weight: g * (end - input)),
      jvp=SELF_ADJOINT, node_name="LerpBackward1", promote=ELEMENTWISE)


def _addcmul_fwd(xp, input, tensor1, tensor2, value=1):  # noqa: A002
    prod = tensor1 * tensor2
    return input + (prod if value == 1 else prod * value)


def _scaled(g, value):
    return g if value == 1 else g * value


defop("addcmul", _addcmul_fwd,
      (lambda F, g, out, input, tensor1, tensor2, value=1: g,
       lambda F, g, out, input, tensor1, tensor2, value=1: _scaled(g * tensor2, value),
       lambda F, g, out, input, tensor1, tensor2, value=1: _scaled(g * tensor1, value)),
      jvp=SELF_ADJOINT, promote=ELEMENTWISE)

# Unary math.
defop("exp", lambda xp, x: xp.exp(x), (lambda F, g, out, x: g * out,), jvp=SELF_ADJOINT,
      public="exp", methods="exp", inplace="exp_", promote=FLOATING)
defop("log", lambda xp, x: xp.log(x), (lambda F, g, out, x: g / x,), jvp=SELF_ADJOINT,
      public="log", methods="log", inplace="log_", promote=FLOATING)
defop("sqrt", lambda xp, x: xp.sqrt(x), (lambda F, g, out, x: g / (out * 2),), jvp=SELF_ADJOINT,
      public="sqrt", methods="sqrt", inplace="sqrt_", promote=FLOATING)
defop("tanh", lambda xp, x: xp.tanh(x), (lambda F, g, out, x: g * (1 - out * out),),
      jvp=SELF_ADJOINT, public="tanh", methods="tanh", inplace="tanh_", promote=FLOATING)
# (relu, sigmoid and the other activations are in activation.py.)

# Comparisons: no gradient, boolean results.
defop("eq", lambda xp, a, b: a == b, public="eq", methods="__eq__")
defop("ne", lambda xp, a, b: a != b, public="ne", methods="__ne__")
defop("lt", lambda xp, a, b: a < b, public="lt", methods="__lt__")
defop("le", lambda xp, a, b: a <= b, public="le", methods="__le__")
defop("gt", lambda xp, a, b: a > b, public="gt", methods="__gt__")
defop("ge", lambda xp, a, b: a >= b, public="ge", methods="__ge__")

# Copies and casts.
defop("clone", lambda xp, x: x.copy(), (lambda F, g, out, x: g,), jvp=SELF_ADJOINT,
      public="clone", methods="clone")
defop("to_dtype", lambda xp, x, dtype: x.astype(dtype),
      (lambda F, g, out, x, dtype: F.to_dtype(g, dtype=x.dtype),),
      jvp=(lambda F, t, out, x, dtype: F.to_dtype(t, dtype=dtype),), meta=(0,),
      node_name="ToCopyBackward0")
defop("zero", lambda xp, x: xp.zeros_like(x), (lambda F, g, out, x: F.zeros_like(g),),
      jvp=SELF_ADJOINT, inplace="zero_")
defop("zeros_like", lambda xp, x: xp.zeros_like(x))


def _to_device_fwd(xp, x, device, src):
    return backend.to_device(x, device)


defop("to_device", _to_device_fwd,
      (lambda F, g, out, x, device, src: F.to_device(g, device=src, src=device),),
      jvp=(lambda F, t, out, x, device, src: F.to_device(t, device=device, src=src),),
      moves_device=True, node_name="ToCopyBackward0")


@expose(methods="to")
def to(self, *args, device=None, dtype=None, non_blocking: bool = False, copy: bool = False):
    """Move and/or cast; differentiable. PyTorch's overloads: ``to(device)``,
    ``to(dtype)``, ``to(device, dtype)``, ``to(other_tensor)`` (its device and dtype),
    and the keywords ``device=``, ``dtype=``, ``copy=``. ``non_blocking`` is accepted
    and ignored (copies follow the stream order anyway)."""
    for a in args:
        if isinstance(a, Tensor):
            device, dtype = a._device, a._data.dtype
        elif _is_dtype(a):
            dtype = a
        elif a is not None:
            device = a
    t = self
    if dtype is not None and numpy.dtype(dtype) != self._data.dtype:
        dtype = numpy.dtype(dtype)
        t = apply_op(OPS["to_dtype"], (t,), {"dtype": dtype})
        if not _is_float(dtype) and t.requires_grad:
            # As PyTorch: an integer or bool tensor never requires grad (its values are
            # not differentiable in the input), so a cast there ends the history.
            t = t.detach()
    if device is not None:
        dev = backend.device(device)
        if dev is not t._device and dev.type == "cuda" and t._data.dtype is BFLOAT16:
            raise RuntimeError(ERR_BFLOAT16_CUDA)
        if dev is not t._device:
            t = apply_op(OPS["to_device"], (t,), {"device": dev, "src": t._device})
    if copy and t is self:
        t = self.clone()
    return t


# --------------------------------------------------------------------------- more unary math

_SQRT_PI = 1.7724538509055159


defop("log1p", lambda xp, x: xp.log1p(x), (lambda F, g, out, x: g / (x + 1),),
      jvp=SELF_ADJOINT, public="log1p", methods="log1p", inplace="log1p_",
      node_name="Log1PBackward0", promote=FLOATING)
defop("expm1", lambda xp, x: xp.expm1(x), (lambda F, g, out, x: g * (out + 1),),
      jvp=SELF_ADJOINT, public="expm1", methods="expm1", inplace="expm1_", promote=FLOATING)
defop("sin", lambda xp, x: xp.sin(x), (lambda F, g, out, x: g * F.cos(x),), jvp=SELF_ADJOINT,
      public="sin", methods="sin", inplace="sin_", promote=FLOATING)
defop("cos", lambda xp, x: xp.cos(x), (lambda F, g, out, x: -g * F.sin(x),), jvp=SELF_ADJOINT,
      public="cos", methods="cos", inplace="cos_", promote=FLOATING)
defop("rsqrt", lambda xp, x: 1 / xp.sqrt(x), (lambda F, g, out, x: g * out * out * out * -0.5,),
      jvp=SELF_ADJOINT, public="rsqrt", methods="rsqrt", inplace="rsqrt_", promote=FLOATING)
defop("reciprocal", lambda xp, x: 1 / x, (lambda F, g, out, x: -g * out * out,),
      jvp=SELF_ADJOINT, public="reciprocal", methods="reciprocal",
      inplace="reciprocal_", promote=FLOATING)
defop("abs", lambda xp, x: xp.abs(x), (lambda F, g, out, x: g * F.sign(x),), jvp=SELF_ADJOINT,
      public="abs", methods=("abs", "__abs__"), inplace="abs_")
# sign is piecewise constant: its gradient is zero, but it is differentiable (as PyTorch's),
# so a backward through a sign-only path runs and gives zeros.
def _sign_fwd(xp, x):
    # PyTorch's sign (and sgn, abs's slope) of NaN is 0; NumPy's is NaN.
    s = xp.sign(x)
    if s.dtype.kind != "f":
        return s
    # In place on the fresh array; a 0-d input gives a NumPy scalar, which NumPy 2's
    # ``copy=False`` ("never copy") refuses, so that one is copied.
    return xp.nan_to_num(s, copy=s.__class__ is not xp.ndarray, nan=0.0)


defop("sign", _sign_fwd, (lambda F, g, out, x: F.zeros_like(g),),
      jvp=SELF_ADJOINT, public="sign", methods="sign", inplace="sign_")


def _atan2_recip(F, input, other):  # noqa: A002 - PyTorch's names
    """1 / r², r² = input² + other², and 0 at the origin (PyTorch's: the gradient there is 0,
    not 0/0). The inner where keeps the reciprocal finite for a second derivative."""
    r2 = input * input + other * other
    origin = r2 == 0
    return F.where(origin, 0.0, 1.0 / F.where(origin, 1.0, r2))


# atan2(input, other) is the angle of the point (other, input): d/dinput = other / r²,
# d/dother = -input / r².
defop("atan2", lambda xp, input, other: xp.arctan2(input, other),  # noqa: A006 - PyTorch's names
      (lambda F, g, out, input, other: g * other * _atan2_recip(F, input, other),
       lambda F, g, out, input, other: -g * input * _atan2_recip(F, input, other)),
      jvp=SELF_ADJOINT, public=("atan2", "arctan2"), methods=("atan2", "arctan2"),
      inplace=("atan2_", "arctan2_"), doc="Elementwise arctangent of ``input / other`` in the "
      "quadrant of the point ``(other, input)`` (torch.atan2).", promote=FLOATING)


def erf_array(xp, x):
    """erf from the special-function library (scipy.special / cupyx.scipy.special): one
    compiled pass. A float input keeps its dtype (float16 is computed in float32 and cast
    back); an integer one gives float64."""
    out = backend.special(xp).erf(x)
    return out.astype(x.dtype, copy=False) if x.dtype.kind == "f" else out


def _erfc_fwd(xp, x):
    """erfc from the special-function library: exact where ``1 - erf`` would cancel."""
    out = backend.special(xp).erfc(x)
    return out.astype(x.dtype, copy=False) if x.dtype.kind == "f" else out


defop("erf", erf_array,
      (lambda F, g, out, x: g * F.exp(-(x * x)) * (2 / _SQRT_PI),), jvp=SELF_ADJOINT,
      public="erf", methods="erf", promote=FLOATING)

# NOTE: erfc is a primitive for precision: 1 - erf(x) is 0 in double precision from x = 6,
# where erfc(6) = 2.15e-17 (and PyTorch gives that).
defop("erfc", _erfc_fwd,
      (lambda F, g, out, x: g * F.exp(-(x * x)) * (-2 / _SQRT_PI),), jvp=SELF_ADJOINT,
      public="erfc", methods="erfc", promote=FLOATING)

# More unary math. Each is a primitive: numpy's function is the precise one (log2(8) is 3
# exactly, where log(8) / log(2) is not; tan near pi/2 and atanh near 1 lose digits as ratios).
defop("tan", lambda xp, x: xp.tan(x), (lambda F, g, out, x: g * (1 + out * out),),
      jvp=SELF_ADJOINT, public="tan", methods="tan", inplace="tan_", promote=FLOATING)
defop("atan", lambda xp, x: xp.arctan(x), (lambda F, g, out, x: g / (1 + x * x),),
      jvp=SELF_ADJOINT, public=("atan", "arctan"), methods=("atan", "arctan"),
      inplace=("atan_", "arctan_"), promote=FLOATING)
defop("asin", lambda xp, x: xp.arcsin(x), (lambda F, g, out, x: g * F.rsqrt(1 - x * x),),
      jvp=SELF_ADJOINT, public=("asin", "arcsin"), methods=("asin", "arcsin"),
      inplace=("asin_", "arcsin_"), promote=FLOATING)
defop("acos", lambda xp, x: xp.arccos(x), (lambda F, g, out, x: -g * F.rsqrt(1 - x * x),),
      jvp=SELF_ADJOINT, public=("acos", "arccos"), methods=("acos", "arccos"),
      inplace=("acos_", "arccos_"), promote=FLOATING)
defop("sinh", lambda xp, x: xp.sinh(x), (lambda F, g, out, x: g * F.cosh(x),),
      jvp=SELF_ADJOINT, public="sinh", methods="sinh", inplace="sinh_", promote=FLOATING)
defop("cosh", lambda xp, x: xp.cosh(x), (lambda F, g, out, x: g * F.sinh(x),),
      jvp=SELF_ADJOINT, public="cosh", methods="cosh", inplace="cosh_", promote=FLOATING)
defop("asinh", lambda xp, x: xp.arcsinh(x), (lambda F, g, out, x: g * F.rsqrt(x * x + 1),),
      jvp=SELF_ADJOINT, public=("asinh", "arcsinh"), methods=("asinh", "arcsinh"),
      inplace=("asinh_", "arcsinh_"), promote=FLOATING)
defop("atanh", lambda xp, x: xp.arctanh(x), (lambda F, g, out, x: g / (1 - x * x),),
      jvp=SELF_ADJOINT, public=("atanh", "arctanh"), methods=("atanh", "arctanh"),
      inplace=("atanh_", "arctanh_"), promote=FLOATING)
defop("log2", lambda xp, x: xp.log2(x), (lambda F, g, out, x: g / (x * math.log(2.0)),),
      jvp=SELF_ADJOINT, public="log2", methods="log2", inplace="log2_", promote=FLOATING)
defop("log10", lambda xp, x: xp.log10(x), (lambda F, g, out, x: g / (x * math.log(10.0)),),
      jvp=SELF_ADJOINT, public="log10", methods="log10", inplace="log10_", promote=FLOATING)
defop("exp2", lambda xp, x: xp.exp2(x), (lambda F, g, out, x: g * out * math.log(2.0),),
      jvp=SELF_ADJOINT, public="exp2", methods="exp2", inplace="exp2_", promote=FLOATING)

# NOTE: frac, hypot and logaddexp are primitives for PyTorch's nodes (FracBackward0,
# HypotBackward0, LogaddexpBackward0) and its values at infinities: hypot(inf, nan) is inf and
# logaddexp(-inf, -inf) -inf, where the composites gave NaN.
defop("frac", lambda xp, x: x - xp.trunc(x), (lambda F, g, out, x: g,), jvp=SELF_ADJOINT,
      public="frac", methods="frac", inplace="frac_",
      doc="The fractional part, ``x - trunc(x)`` (the sign of ``x``).")
defop("hypot", lambda xp, input, other: xp.hypot(input, other),  # noqa: A006 - PyTorch's names
      (lambda F, g, out, input, other: g * input / out,
       lambda F, g, out, input, other: g * other / out), jvp=SELF_ADJOINT,
      public="hypot", methods="hypot", inplace="hypot_",
      doc="``sqrt(input² + other²)`` (torch.hypot).", promote=FLOATING)
# d/da log(e^a + e^b) = sigmoid(a - b): never overflows, 1/2 at a tie.
defop("logaddexp", lambda xp, input, other: xp.logaddexp(input, other),  # noqa: A006
      (lambda F, g, out, input, other: g * F.sigmoid(input - other),
       lambda F, g, out, input, other: g * F.sigmoid(other - input)), jvp=SELF_ADJOINT,
      public="logaddexp", methods="logaddexp",
      doc="``log(exp(input) + exp(other))`` without overflow (torch.logaddexp).", promote=FLOATING)

# Rounding: piecewise constant, so a zero gradient (PyTorch's), but differentiable.
defop("floor", lambda xp, x: xp.floor(x), (lambda F, g, out, x: F.zeros_like(g),),
      jvp=SELF_ADJOINT, public="floor", methods="floor", inplace="floor_")
defop("ceil", lambda xp, x: xp.ceil(x), (lambda F, g, out, x: F.zeros_like(g),),
      jvp=SELF_ADJOINT, public="ceil", methods="ceil", inplace="ceil_")
defop("trunc", lambda xp, x: xp.trunc(x), (lambda F, g, out, x: F.zeros_like(g),),
      jvp=SELF_ADJOINT, public=("trunc", "fix"), methods=("trunc", "fix"),
      inplace=("trunc_", "fix_"))
# Half to even, as PyTorch's round (numpy's round does the same, decimals included).
defop("round", lambda xp, x, decimals=0: xp.round(x, decimals),
      (lambda F, g, out, x, decimals=0: F.zeros_like(g),), jvp=SELF_ADJOINT,
      public="round", methods="round", inplace="round_")

# fmod truncates the quotient (the sign of the dividend), remainder floors it (the sign of the
# divisor); d/db = -quotient, with Python's floor division for remainder (-1 // inf is -1, as
# PyTorch's div(rounding_mode="floor"); floor(-1 / inf) would be -0). A number divisor is an
# attribute (FmodBackward0 / RemainderBackward0), a tensor one an input (...Backward1).
# Not differentiable here, where PyTorch's node raises "the derivative for 'floor_divide' is
# not implemented" on backward: its result does not require grad.
defop("floor_divide", lambda xp, a, b: xp.floor_divide(a, b), public="floor_divide",
      methods=("floor_divide", "__floordiv__"), reflected="__rfloordiv__",
      inplace="floor_divide_",
      doc="Python's floor division, rounding towards -inf (torch.floor_divide and ``//``).",
      promote=ELEMENTWISE)


def _fmod_fwd(xp, a, b):
    return xp.fmod(a, b)


def _remainder_fwd(xp, a, b):
    return xp.remainder(a, b)


_FMOD = defop("fmod", _fmod_fwd, (lambda F, g, out, a, b: g,), jvp=SELF_ADJOINT,
              promote=ELEMENTWISE)
_FMOD_T = defop("fmod.Tensor", _fmod_fwd,
                (lambda F, g, out, a, b: g, lambda F, g, out, a, b: -g * F.trunc(a / b)),
                jvp=SELF_ADJOINT, node_name="FmodBackward1", promote=ELEMENTWISE)
_REMAINDER = defop("remainder", _remainder_fwd, (lambda F, g, out, a, b: g,), jvp=SELF_ADJOINT,
                   promote=ELEMENTWISE)
_REMAINDER_T = defop("remainder.Tensor", _remainder_fwd,
                     (lambda F, g, out, a, b: g,
                      lambda F, g, out, a, b: -g * F.floor_divide(a, b)),
                     jvp=SELF_ADJOINT, node_name="RemainderBackward1", promote=ELEMENTWISE)


@expose(public="fmod", methods="fmod")
def fmod(input, other):  # noqa: A002 - PyTorch's names
    """The remainder of ``input / other`` with the sign of ``input`` (torch.fmod)."""
    return apply_op(_FMOD_T if isinstance(other, Tensor) else _FMOD, (input, other), None)


@expose(public="remainder", methods=("remainder", "__mod__"))
def remainder(input, other):  # noqa: A002
    """The remainder of ``input / other`` with the sign of ``other`` (torch.remainder)."""
    return apply_op(_REMAINDER_T if isinstance(other, Tensor) else _REMAINDER, (input, other),
                    None)


def _xlogy_fwd(xp, x, y):
    # The log of 1 where x == 0, so that 0 * log(0) is no NaN; a NaN y stays NaN (0 * NaN).
    safe = xp.where((x == 0) & ~xp.isnan(y), 1, y)
    return x * xp.log(safe)


# xlogy(0, y) = 0 for any y but NaN; PyTorch 2.13's rules: d/dx = xlogy(g, y), 0 where x == 0
# and y <= 0 (log(2) at x == 0, y == 2); d/dy = x / y.
defop("xlogy", _xlogy_fwd,
      (lambda F, g, out, x, y: grad_unless(F, F.xlogy(g, y), (x == 0) & (y <= 0)),
       lambda F, g, out, x, y: g * x / y), jvp=SELF_ADJOINT, public="xlogy", methods="xlogy",
      promote=FLOATING)

# Selections: the gradient goes to the input that was picked; maximum/minimum split a tie
# evenly between the operands, as PyTorch does.
defop("where", lambda xp, cond, a, b: xp.where(cond, a, b),
      (None, lambda F, g, out, cond, a, b: F.where(cond, g, 0.0),
       lambda F, g, out, cond, a, b: F.where(cond, 0.0, g)), jvp=SELF_ADJOINT, promote=ELEMENTWISE)


def _picked(F, g, mine, other, bigger: bool):
    """The share of ``g`` that ``mine`` gets: half on a tie, none where it loses, all
    elsewhere -- a NaN on either side included, so both operands of a NaN result get the
    gradient (PyTorch's ``where(self == other, grad / 2, grad).masked_fill_(self < other, 0)``)."""
    loses = mine < other if bigger else mine > other
    return grad_unless(F, F.where(mine == other, g * 0.5, g), loses)


defop("maximum", lambda xp, a, b: xp.maximum(a, b),
      (lambda F, g, out, a, b: _picked(F, g, a, b, True),
       lambda F, g, out, a, b: _picked(F, g, b, a, True)), jvp=SELF_ADJOINT,
      public="maximum", methods="maximum", promote=ELEMENTWISE)
defop("minimum", lambda xp, a, b: xp.minimum(a, b),
      (lambda F, g, out, a, b: _picked(F, g, a, b, False),
       lambda F, g, out, a, b: _picked(F, g, b, a, False)), jvp=SELF_ADJOINT,
      public="minimum", methods="minimum", promote=ELEMENTWISE)
defop("masked_fill", lambda xp, x, mask, value: xp.where(mask, xp.asarray(value, x.dtype), x),
      (lambda F, g, out, x, mask, value: F.where(mask, 0.0, g), None, None), jvp=SELF_ADJOINT)


def _bounded(x, *bounds):
    """``x`` in PyTorch's result dtype of clamping it by these number bounds: its own for a
    float tensor; promoted for an integer or bool one (an int64 tensor clamped at 0.5 is
    float32, a bool one at 1 int64), where NumPy would cast the bounds to ``x``'s dtype."""
    if x.dtype.kind in "fc":
        return x
    dt = result_type(x, *bounds)
    return x if dt == x.dtype else x.astype(dt)


def _clamp_fwd(xp, x, min=None, max=None):  # noqa: A002 - PyTorch's names
    x = _bounded(x, min, max)
    if min is not None and max is not None:
        return xp.clip(x, min, max)
    if min is not None:
        return xp.maximum(x, xp.asarray(min, x.dtype))
    return xp.minimum(x, xp.asarray(max, x.dtype))


def _clamp_vjp(F, g, out, x, min=None, max=None):  # noqa: A002
    if min is not None:
        g = F.where(x >= min, g, 0.0)
    if max is not None:
        g = F.where(x <= max, g, 0.0)
    return g


# Number bounds: aten::clamp, ClampBackward1 (tensor bounds, clamp.Tensor, are ClampBackward0).
defop("clamp", _clamp_fwd, (_clamp_vjp,), jvp=SELF_ADJOINT, node_name="ClampBackward1")


def _clamp_tensor_fwd(xp, x, min, max):  # noqa: A002
    if min is not None:
        x = xp.maximum(x, min)
    return x if max is None else xp.minimum(x, max)


# PyTorch's clamp_backward_min_max: a bound gets the gradient where it is the result, and
# with min > max the result is max (so min gets nothing there, and at min == max neither).
def _clamp_tensor_vjp_min(F, g, out, x, min, max):  # noqa: A002
    hit = x < min
    return F.where(hit if max is None else hit & (min < max), g, 0.0)


def _clamp_tensor_vjp_max(F, g, out, x, min, max):  # noqa: A002
    hit = x > max
    return F.where(hit if min is None else hit | (max < min), g, 0.0)


defop("clamp.Tensor", _clamp_tensor_fwd,
      (_clamp_vjp, _clamp_tensor_vjp_min, _clamp_tensor_vjp_max), jvp=SELF_ADJOINT,
      node_name="ClampBackward0", promote=ELEMENTWISE)

# clamp_min / clamp_max: one bound, their own nodes in PyTorch (ClampMinBackward0 for a number,
# ClampMinBackward1 for a tensor bound, likewise for max); the input's gradient passes where
# the bound is not above (below) it, as clamp's, and a tensor bound gets the rest.
def _clamp_min_fwd(xp, x, min):  # noqa: A002 - PyTorch's names
    if hasattr(min, "dtype"):
        return xp.maximum(x, min)
    x = _bounded(x, min)
    return xp.maximum(x, xp.asarray(min, x.dtype))


def _clamp_max_fwd(xp, x, max):  # noqa: A002
    if hasattr(max, "dtype"):
        return xp.minimum(x, max)
    x = _bounded(x, max)
    return xp.minimum(x, xp.asarray(max, x.dtype))


_CLAMP_MIN = defop("clamp_min", _clamp_min_fwd,
                   (lambda F, g, out, x, min: F.where(x >= min, g, 0.0),), jvp=SELF_ADJOINT)
_CLAMP_MAX = defop("clamp_max", _clamp_max_fwd,
                   (lambda F, g, out, x, max: F.where(x <= max, g, 0.0),), jvp=SELF_ADJOINT)
_CLAMP_MIN_T = defop("clamp_min.Tensor", _clamp_min_fwd,
                     (lambda F, g, out, x, min: F.where(x >= min, g, 0.0),
                      lambda F, g, out, x, min: F.where(x < min, g, 0.0)), jvp=SELF_ADJOINT,
                     node_name="ClampMinBackward1", promote=ELEMENTWISE)
_CLAMP_MAX_T = defop("clamp_max.Tensor", _clamp_max_fwd,
                     (lambda F, g, out, x, max: F.where(x <= max, g, 0.0),
                      lambda F, g, out, x, max: F.where(x > max, g, 0.0)), jvp=SELF_ADJOINT,
                     node_name="ClampMaxBackward1", promote=ELEMENTWISE)


@expose(public="clamp_min", methods="clamp_min")
def clamp_min(input, min):  # noqa: A002
    """``max(input, min)``; ``min`` a number or a tensor (torch.clamp_min)."""
    if isinstance(min, Tensor):
        return apply_op(_CLAMP_MIN_T, (input, min), None)
    return apply_op(_CLAMP_MIN, (input,), {"min": min})


@expose(public="clamp_max", methods="clamp_max")
def clamp_max(input, max):  # noqa: A002
    """``min(input, max)``; ``max`` a number or a tensor (torch.clamp_max)."""
    if isinstance(max, Tensor):
        return apply_op(_CLAMP_MAX_T, (input, max), None)
    return apply_op(_CLAMP_MAX, (input,), {"max": max})


@expose(methods="clamp_min_")
def clamp_min_(input, min):  # noqa: A002
    """In-place :func:`clamp_min`."""
    if isinstance(min, Tensor):
        return apply_inplace(_CLAMP_MIN_T, input, (min,), None)
    return apply_inplace(_CLAMP_MIN, input, (), {"min": min})


@expose(methods="clamp_max_")
def clamp_max_(input, max):  # noqa: A002
    """In-place :func:`clamp_max`."""
    if isinstance(max, Tensor):
        return apply_inplace(_CLAMP_MAX_T, input, (max,), None)
    return apply_inplace(_CLAMP_MAX, input, (), {"max": max})


# fmax / fmin: NaN-ignoring maximum / minimum. PyTorch's rules: the first operand gets the
# gradient where it is the result (ties included) or the second is NaN, the second the rest.
def _fmax_first(a, b, F):
    return (a >= b) | F.isnan(b)


def _fmin_first(a, b, F):
    return (a <= b) | F.isnan(b)


defop("fmax", lambda xp, a, b: xp.fmax(a, b),
      (lambda F, g, out, a, b: grad_unless(F, g, ~_fmax_first(a, b, F)),
       lambda F, g, out, a, b: grad_unless(F, g, _fmax_first(a, b, F))), jvp=SELF_ADJOINT,
      public="fmax", methods="fmax", promote=ELEMENTWISE)
defop("fmin", lambda xp, a, b: xp.fmin(a, b),
      (lambda F, g, out, a, b: grad_unless(F, g, ~_fmin_first(a, b, F)),
       lambda F, g, out, a, b: grad_unless(F, g, _fmin_first(a, b, F))), jvp=SELF_ADJOINT,
      public="fmin", methods="fmin", promote=ELEMENTWISE)


# prelu: leaky relu with a learned slope per channel (the weight reshaped by
# nn.functional.prelu to broadcast over dim 1). PyTorch's node is PreluKernelBackward0.
defop("prelu", lambda xp, x, weight: xp.where(x > 0, x, weight * x),
      (lambda F, g, out, x, weight: F.where(x > 0, g, g * weight),
       lambda F, g, out, x, weight: F.where(x > 0, 0.0, g * x)), jvp=SELF_ADJOINT,
      node_name="PreluKernelBackward0")

# Logical ops: boolean results, no gradient. (``&``, ``|``, ``^``, ``~`` are the bitwise ops,
# as PyTorch's: the same on bool tensors.)
defop("logical_and", lambda xp, a, b: xp.logical_and(a, b), public="logical_and",
      methods="logical_and")
defop("logical_or", lambda xp, a, b: xp.logical_or(a, b), public="logical_or",
      methods="logical_or")
defop("logical_xor", lambda xp, a, b: xp.logical_xor(a, b), public="logical_xor",
      methods="logical_xor")
defop("logical_not", lambda xp, x: xp.logical_not(x), public="logical_not",
      methods="logical_not")


# --------------------------------------------------------------------------- bitwise ops

def _integer_result(kernel, xp, *operands, kinds="biu"):
    """The operands' promoted dtype, refused as PyTorch refuses a float one (its kernel name:
    ``"bitwise_and_cpu" not implemented for 'Float'``)."""
    dt = result_type(*operands)
    if dt.kind not in kinds:
        where = "cpu" if xp is numpy else "cuda"
        raise NotImplementedError(f'"{kernel}_{where}" not implemented for \'{torch_name(dt)}\'')
    return dt


def _bitwise(kernel):
    def fwd(xp, input, other):  # noqa: A002 - PyTorch's names
        _integer_result(kernel, xp, input, other)
        return getattr(xp, kernel)(input, other)
    return fwd


def _bitwise_not_fwd(xp, input):  # noqa: A002
    _integer_result("bitwise_not", xp, input)
    return xp.invert(input)


def _shift_operands(kernel, xp, input, other):  # noqa: A002
    dt = _integer_result(kernel, xp, input, other, kinds="iu")
    return xp.asarray(input).astype(dt, copy=False), xp.asarray(other).astype(dt, copy=False), \
        dt.itemsize * 8


# PyTorch's shifts are defined for every count: a left shift by the width or more (or by a
# negative count) gives 0; a right shift by that much fills with the sign bit. C's (and
# NumPy's) are undefined there.
def _lshift_fwd(xp, input, other):  # noqa: A002
    a, b, bits = _shift_operands("lshift", xp, input, other)
    bad = (b < 0) | (b >= bits)
    return xp.where(bad, 0, a << xp.where(bad, 0, b)).astype(a.dtype, copy=False)


def _rshift_fwd(xp, input, other):  # noqa: A002
    a, b, bits = _shift_operands("rshift", xp, input, other)
    if a.dtype.kind == "u":
        bad = b >= bits
        return xp.where(bad, 0, a >> xp.where(bad, 0, b)).astype(a.dtype, copy=False)
    return a >> xp.where((b < 0) | (b >= bits - 1), bits - 1, b)


# Integers and bools only, no gradient; the result dtype is PyTorch's promotion.
for _name, _op, _fwd in (("bitwise_and", "and", _bitwise("bitwise_and")),
                         ("bitwise_or", "or", _bitwise("bitwise_or")),
                         ("bitwise_xor", "xor", _bitwise("bitwise_xor")),
                         ("bitwise_left_shift", "lshift", _lshift_fwd),
                         ("bitwise_right_shift", "rshift", _rshift_fwd)):
    defop(_name, _fwd, public=_name, methods=(_name, f"__{_op}__"), reflected=f"__r{_op}__",
          inplace=_name + "_", promote=ELEMENTWISE)
del _op, _fwd
defop("bitwise_not", _bitwise_not_fwd, public="bitwise_not", methods="bitwise_not",
      inplace="bitwise_not_")


@expose(methods="__invert__")
def _invert(self):
    """``~t``: bitwise_not, refused for a float tensor with Python's TypeError (as PyTorch)."""
    if self.dtype.kind not in "biu":
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type "
                        "tensors")
    return apply_op(OPS["bitwise_not"], (self,), None)


defop("isnan", lambda xp, x: xp.isnan(x), public="isnan", methods="isnan")
defop("isfinite", lambda xp, x: xp.isfinite(x), public="isfinite", methods="isfinite")
defop("isinf", lambda xp, x: xp.isinf(x), public="isinf", methods="isinf")
defop("isposinf", lambda xp, x: xp.isposinf(x), public="isposinf", methods="isposinf")
defop("isneginf", lambda xp, x: xp.isneginf(x), public="isneginf", methods="isneginf")

# Fills and copies (the in-place fill_/copy_ write these into a tensor).
defop("fill", lambda xp, x, value: xp.full(x.shape, value, x.dtype),
      (lambda F, g, out, x, value: F.zeros_like(g),), jvp=SELF_ADJOINT, inplace="fill_")


def _copy_fwd(xp, x, src):
    src = xp.asarray(src)
    return xp.broadcast_to(src.astype(x.dtype, copy=False), x.shape).copy()


defop("copy", _copy_fwd, (lambda F, g, out, x, src: F.zeros_like(g),
                          lambda F, g, out, x, src: g), jvp=SELF_ADJOINT,
      node_name="CopyBackwards", inplace="copy_")
defop("zeros", lambda xp, shape, dtype, device: device.xp.zeros(shape, dtype),
      moves_device=True, doc="Zeros of a shape on a device (fills missing gradients).")


# --------------------------------------------------------------------------- more torch names

def _sgn_fwd(xp, x):
    if x.dtype.kind != "c":
        return _sign_fwd(xp, x)
    size = xp.abs(x)
    return xp.where(size == 0, 0, x / xp.where(size == 0, 1, size)).astype(x.dtype)


def _sgn_vjp(F, g, out, x):
    if x.dtype.kind == "c":   # it would need PyTorch's sgn_backward projection
        raise NotImplementedError("sgn: the derivative for complex inputs is not implemented")
    return F.zeros_like(g)


# sgn is sign for real tensors, with PyTorch's own node (SgnBackward0); for complex ones its
# value is z / |z| (0 at 0) and its derivative is refused rather than given as 0.
defop("sgn", _sgn_fwd, (_sgn_vjp,), jvp=SELF_ADJOINT,
      public="sgn", methods="sgn", inplace="sgn_",
      doc="``x / |x|`` (0 at 0); for a real tensor, :func:`sign` (torch.sgn).")


def _copysign_grad(F, g, out, input, other):  # noqa: A002 - PyTorch's names
    # PyTorch's copysign_tensor_self_backward: g * out / input, 0 where input is 0.
    ratio = out / input
    return g * F.where(input == 0, 0.0, ratio)


defop("copysign", lambda xp, input, other: xp.copysign(input, other),  # noqa: A006
      (_copysign_grad, lambda F, g, out, input, other: F.zeros_like(g)), jvp=SELF_ADJOINT,
      public="copysign", methods="copysign", inplace="copysign_", promote=FLOATING,
      doc="``|input|`` with the sign of ``other`` (torch.copysign).")


def _heaviside_fwd(xp, input, values):  # noqa: A002
    if getattr(input, "dtype", None) != getattr(values, "dtype", None):
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    return xp.where(input == 0, values, input > 0).astype(input.dtype)


# Not differentiable, as PyTorch's (its derivative "is not implemented").
defop("heaviside", _heaviside_fwd, public="heaviside", methods="heaviside",
      doc="1 where ``input > 0``, ``values`` where it is 0, 0 below (torch.heaviside).")


def _nan_to_num_fwd(xp, x, nan=0.0, posinf=None, neginf=None):
    if x.dtype.kind not in "fc":
        return x.copy()
    return xp.nan_to_num(x, copy=True, nan=0.0 if nan is None else nan, posinf=posinf,
                         neginf=neginf)


defop("nan_to_num", _nan_to_num_fwd,
      (lambda F, g, out, x, nan=0.0, posinf=None, neginf=None:
       g * F.to_dtype(F.isfinite(x), dtype=g.dtype),), jvp=SELF_ADJOINT,
      public="nan_to_num", methods="nan_to_num", inplace="nan_to_num_",
      doc="NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (by default 0 and "
          "the dtype's largest and lowest finite values) (torch.nan_to_num).")
defop("signbit", lambda xp, x: xp.signbit(x), public="signbit", methods="signbit",
      doc="True where the sign bit is set (-0.0 included) (torch.signbit).")

_DEG = math.pi / 180.0
defop("deg2rad", lambda xp, x: x * x.dtype.type(_DEG) if x.dtype.kind in "fc"
      else (x * _DEG).astype(float_type(x.dtype)),
      (lambda F, g, out, x: g * _DEG,), jvp=SELF_ADJOINT, public="deg2rad",
      methods="deg2rad", inplace="deg2rad_", node_name="Deg2RadBackward0",
      doc="Degrees to radians (torch.deg2rad).")
defop("rad2deg", lambda xp, x: x * x.dtype.type(1 / _DEG) if x.dtype.kind in "fc"
      else (x * (1 / _DEG)).astype(float_type(x.dtype)),
      (lambda F, g, out, x: g * (1 / _DEG),), jvp=SELF_ADJOINT, public="rad2deg",
      methods="rad2deg", inplace="rad2deg_", node_name="Rad2DegBackward0",
      doc="Radians to degrees (torch.rad2deg).")


def _addcdiv_fwd(xp, input, tensor1, tensor2, value=1):  # noqa: A002
    if all(getattr(t, "dtype", numpy.dtype(float)).kind in "biu" for t in (tensor1, tensor2)):
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported, and in a future  release "
            "addcdiv will perform a true division of tensor1 and tensor2. The historic addcdiv "
            "behavior can be implemented as (input + value * torch.trunc(tensor1 / tensor2))."
            "to(input.dtype) for integer inputs and as (input + value * tensor1 / tensor2) for "
            "float inputs. The future addcdiv behavior is just the latter implementation: "
            "(input + value * tensor1 / tensor2), for all dtypes.")
    quot = tensor1 / tensor2
    return input + (quot if value == 1 else quot * value)


defop("addcdiv", _addcdiv_fwd,
      (lambda F, g, out, input, tensor1, tensor2, value=1: g,
       lambda F, g, out, input, tensor1, tensor2, value=1: _scaled(g / tensor2, value),
       lambda F, g, out, input, tensor1, tensor2, value=1:
       _scaled(-g * tensor1 / (tensor2 * tensor2), value)),
      jvp=SELF_ADJOINT, promote=ELEMENTWISE)


def _isclose_fwd(xp, input, other, rtol=1e-05, atol=1e-08, equal_nan=False):  # noqa: A002
    if input.dtype != other.dtype:
        raise RuntimeError(f"{torch_name(input.dtype)} did not match {torch_name(other.dtype)}")
    return xp.isclose(input, other, rtol=rtol, atol=atol, equal_nan=equal_nan)


defop("isclose", _isclose_fwd, public="isclose", methods="isclose",
      doc="``|input - other| <= atol + rtol * |other|``, elementwise (torch.isclose).")


def _div_mode_fwd(xp, a, b, rounding_mode="trunc"):
    if rounding_mode == "floor":
        return xp.floor_divide(a, b)
    kinds = {getattr(v, "dtype", numpy.dtype(type(v))).kind for v in (a, b)}
    if kinds <= set("biu"):   # integer truncation: the floor moved towards zero
        q = xp.floor_divide(a, b)
        return q + ((q < 0) & (q * b != a))
    return xp.trunc(a / b)


# PyTorch's div.Tensor_mode (DivBackward2): piecewise constant, a zero gradient for both.
defop("div.Tensor_mode", _div_mode_fwd,
      (lambda F, g, out, a, b, rounding_mode="trunc": F.zeros_like(g),
       lambda F, g, out, a, b, rounding_mode="trunc": F.zeros_like(g)), jvp=SELF_ADJOINT,
      node_name="DivBackward2", promote=ELEMENTWISE)
defop("acosh", lambda xp, x: xp.arccosh(x), (lambda F, g, out, x: g * F.rsqrt(x * x - 1),),
      jvp=SELF_ADJOINT, public=("acosh", "arccosh"), methods=("acosh", "arccosh"),
      inplace=("acosh_", "arccosh_"), promote=FLOATING)
# d/da log2(2^a + 2^b) = sigmoid((a - b) ln 2).
defop("logaddexp2", lambda xp, input, other: xp.logaddexp2(input, other),  # noqa: A006
      (lambda F, g, out, input, other: g * F.sigmoid((input - other) * math.log(2)),
       lambda F, g, out, input, other: g * F.sigmoid((other - input) * math.log(2))),
      jvp=SELF_ADJOINT, public="logaddexp2", methods="logaddexp2", promote=FLOATING,
      doc="``log2(2**input + 2**other)`` (torch.logaddexp2).")
defop("isin", lambda xp, elements, test_elements, assume_unique=False, invert=False:
      xp.isin(elements, test_elements, assume_unique=assume_unique, invert=invert))
defop("nonzero", lambda xp, x: xp.stack(xp.nonzero(x), axis=1).astype(numpy.int64)
      if x.ndim else xp.zeros((int(bool(x)), 0), numpy.int64))



def _integer_only(name):
    def fwd(xp, input, other):  # noqa: A002
        for v in (input, other):
            dt = getattr(v, "dtype", None)
            if dt is not None and dt.kind not in "biu":
                raise NotImplementedError(f'"{name}_cpu" not implemented for \'{torch_name(dt)}\'')
        return getattr(xp, name)(input, other)
    return fwd


defop("gcd", _integer_only("gcd"), public="gcd", methods="gcd", inplace="gcd_",
      promote=ELEMENTWISE, doc="Greatest common divisor, elementwise (integers; torch.gcd).")
defop("lcm", _integer_only("lcm"), public="lcm", methods="lcm", inplace="lcm_",
      promote=ELEMENTWISE, doc="Least common multiple, elementwise (integers; torch.lcm).")
defop("nextafter", lambda xp, input, other: xp.nextafter(input, other),  # noqa: A006
      public="nextafter", methods="nextafter", inplace="nextafter_", promote=ELEMENTWISE,
      doc="The next floating-point value after ``input`` towards ``other`` (torch.nextafter).")


def _frexp_fwd(xp, input):  # noqa: A002
    if input.dtype.kind != "f":
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    mantissa, exponent = xp.frexp(input)
    return mantissa, exponent.astype(numpy.int32)


defop("frexp", _frexp_fwd, nout=2)
