"""Non-linear activations (``relu``, ``elu``, ``hardtanh``, ``prelu``, ``glu``...), their
in-place forms, and ``softmax``/``log_softmax``/``softmin`` with PyTorch's implicit dim.
"""
from __future__ import annotations

import numpy

from ... import backend, ops
from ...dispatch import OPS, apply_inplace, defcomposite
from ...ops import _call, log_softmax as _log_softmax, softmax as _softmax
from ..._tensor import Tensor, default_generator


def relu(x, inplace: bool = False):
    return x.relu_() if inplace else _call("relu", x)


def tanh(x):
    return _call("tanh", x)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _call_or_inplace(name, input, inplace, **attrs):  # noqa: A002
    """The primitive ``name``, or in place writing into ``input``: through its
    ``name.inplace`` twin where PyTorch names the in-place node apart (EluBackward1)."""
    if inplace:
        return apply_inplace(OPS.get(name + ".inplace") or OPS[name], input, (), attrs)
    return _call(name, input, **attrs)


def elu(input, alpha: float = 1.0, inplace: bool = False):  # noqa: A002
    """``x`` for x > 0, ``alpha * (exp(x) - 1)`` otherwise."""
    return _call_or_inplace("elu", input, inplace, alpha=float(alpha))


def selu(input, inplace: bool = False):  # noqa: A002
    """``scale * elu(x, alpha)`` with the self-normalising constants of Klambauer et al.
    (one EluBackward0, as PyTorch's)."""
    return _call_or_inplace("elu", input, inplace, alpha=_SELU_ALPHA, scale=_SELU_SCALE)


def celu(input, alpha: float = 1.0, inplace: bool = False):  # noqa: A002
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`` (CeluBackward0)."""
    return _call_or_inplace("celu", input, inplace, alpha=float(alpha))


def leaky_relu(input, negative_slope: float = 0.01, inplace: bool = False):  # noqa: A002
    """``x`` for x > 0, ``negative_slope * x`` otherwise (LeakyReluBackward0/1)."""
    return _call_or_inplace("leaky_relu", input, inplace, negative_slope=negative_slope)


def hardtanh(input, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):  # noqa: A002
    """``x`` clamped to [min_val, max_val]; the gradient passes strictly inside the bounds
    (HardtanhBackward0, as PyTorch's, in place too)."""
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val {min_val} cannot be greater than max_val {max_val}")
    return _call_or_inplace("hardtanh", input, inplace, min_val=float(min_val),
                            max_val=float(max_val))


def hardtanh_(input, min_val: float = -1.0, max_val: float = 1.0):  # noqa: A002
    """In-place :func:`hardtanh`."""
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input, inplace: bool = False):  # noqa: A002
    """``min(max(0, x), 6)``: hardtanh on [0, 6], as PyTorch's (HardtanhBackward0)."""
    return hardtanh(input, 0.0, 6.0, inplace)


def threshold(input, threshold: float, value: float, inplace: bool = False):  # noqa: A002
    """``value`` where ``x <= threshold``, else ``x`` (ThresholdBackward0; in place
    ThresholdBackward1, as PyTorch's)."""
    return _call_or_inplace("threshold", input, inplace, threshold=threshold, value=value)


def threshold_(input, threshold: float, value: float):  # noqa: A002
    """In-place :func:`threshold`."""
    return _call_or_inplace("threshold", input, True, threshold=threshold, value=value)


def relu_(input):  # noqa: A002
    """In-place :func:`relu`."""
    return input.relu_()


def elu_(input, alpha: float = 1.0):  # noqa: A002
    """In-place :func:`elu` (EluBackward1)."""
    return elu(input, alpha, inplace=True)


def selu_(input):  # noqa: A002
    """In-place :func:`selu` (EluBackward1)."""
    return selu(input, inplace=True)


def celu_(input, alpha: float = 1.0):  # noqa: A002
    """In-place :func:`celu` (CeluBackward1)."""
    return celu(input, alpha, inplace=True)


def leaky_relu_(input, negative_slope: float = 0.01):  # noqa: A002
    """In-place :func:`leaky_relu` (LeakyReluBackward1)."""
    return leaky_relu(input, negative_slope, inplace=True)


@defcomposite("rrelu")
def rrelu(input, lower: float = 1.0 / 8, upper: float = 1.0 / 3,  # noqa: A002
          training: bool = False, inplace: bool = False, generator=None):
    """Randomized leaky ReLU. Training: each entry x <= 0 times its own slope drawn from
    U(lower, upper) (from ``generator`` or the device's seeded default), the gradient that
    slope; otherwise the mean slope, as leaky_relu. Either way PyTorch's ``rrelu_with_noise``
    and its node RreluWithNoiseBackward0 (in place RreluWithNoiseBackward1)."""
    if lower > upper:
        raise RuntimeError(f"Lower bound should be less than or equal to the upper bound, got "
                           f"lower={lower}, upper={upper}")
    xp = input.device.xp
    if training:
        gen = generator if generator is not None else default_generator(input.device)
        u = gen.random(input.shape, dtype=numpy.float32 if input.dtype.itemsize <= 4
                       else numpy.float64)
        # A host generator (numpy's) for a GPU input draws on the host: move the slopes over.
        slope = backend.to_device(lower + (upper - lower) * u, input.device)
    else:
        slope = (lower + upper) / 2
    noise = Tensor._make(xp.where(input._data <= 0, slope, 1).astype(input.dtype), False, None, 0, [0],
                         input.device)
    if inplace:
        return apply_inplace(OPS["rrelu_with_noise.inplace"], input, (noise,), {})
    return _call("rrelu_with_noise", input, noise)


def rrelu_(input, lower: float = 1.0 / 8, upper: float = 1.0 / 3,  # noqa: A002
           training: bool = False, generator=None):
    """In-place :func:`rrelu`."""
    return rrelu(input, lower, upper, training, inplace=True, generator=generator)


def hardsigmoid(input, inplace: bool = False):  # noqa: A002
    """``relu6(x + 3) / 6``: 0 below -3, 1 above 3, linear between (HardsigmoidBackward0)."""
    return _call_or_inplace("hardsigmoid", input, inplace)


def hardswish(input, inplace: bool = False):  # noqa: A002
    """``x * relu6(x + 3) / 6`` (MobileNetV3; HardswishBackward0)."""
    return _call_or_inplace("hardswish", input, inplace)


def _softplus_stable(z):
    # log(1 + exp(z)) = -logsigmoid(-z): no overflow for any z, and the slope sigmoid(z)
    # everywhere (0.5 at 0; a max/abs composite has one-sided kinks there).
    return -_call("logsigmoid", -z)


def mish(input, inplace: bool = False):  # noqa: A002
    """``x * tanh(softplus(x))`` (MishBackward0)."""
    return _call_or_inplace("mish", input, inplace)


def logsigmoid(input):  # noqa: A002
    """``log(sigmoid(x)) = -softplus(-x)``, finite for any x (LogSigmoidBackward0)."""
    return _call("logsigmoid", input)


def hardshrink(input, lambd: float = 0.5):  # noqa: A002
    """0 on ``[-lambd, lambd]``, ``x`` elsewhere (HardshrinkBackward0)."""
    return _call("hardshrink", input, lambd=lambd)


def softshrink(input, lambd: float = 0.5):  # noqa: A002
    """``x`` moved ``lambd`` toward 0, 0 on ``[-lambd, lambd]`` (SoftshrinkBackward0)."""
    if lambd < 0:
        raise RuntimeError(f"softshrink: lambda must be greater or equal to 0, but found to "
                           f"be {lambd}.")
    return _call("softshrink", input, lambd=lambd)


def prelu(input, weight):  # noqa: A002
    """``x`` for x > 0, ``weight * x`` otherwise; ``weight`` has one entry or one per channel
    (dim 1), viewed to broadcast there as PyTorch does (PreluKernelBackward0)."""
    n = weight.numel()
    channels = input.shape[1] if input.ndim >= 2 else 1
    if n != 1 and n != channels:
        raise RuntimeError(f"prelu: mismatch of parameter numbers and input channel size: "
                           f"weight has {n} entries, input of shape {list(input.shape)} has "
                           f"{channels} channels")
    shape = [1] * input.ndim
    if input.ndim >= 2:
        shape[1] = n
    return _call("prelu", input, ops.reshape(weight, tuple(shape)))


@defcomposite("tanhshrink")
def tanhshrink(input):  # noqa: A002
    """``x - tanh(x)`` (a composite in PyTorch too: SubBackward0)."""
    return input - ops.tanh(input)


@defcomposite("softsign")
def softsign(input):  # noqa: A002
    """``x / (1 + |x|)``."""
    return input / (ops.abs(input) + 1.0)


def _softmax_dim(ndim):
    # PyTorch's implicit dim choice (deprecated there, kept for ported code).
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel: int = 3, dtype=None):  # noqa: A002
    """:func:`gradtrace.autograd.softmax` with F.softmax's signature (``dim`` None: PyTorch's
    implicit choice; ``dtype``: the input cast first)."""
    return _softmax(input, _softmax_dim(input.ndim) if dim is None else dim, dtype)


def log_softmax(input, dim=None, _stacklevel: int = 3, dtype=None):  # noqa: A002
    """:func:`gradtrace.autograd.log_softmax` with F.log_softmax's signature."""
    return _log_softmax(input, _softmax_dim(input.ndim) if dim is None else dim, dtype)


@defcomposite("softmin")
def softmin(input, dim=None, _stacklevel: int = 3, dtype=None):  # noqa: A002
    """``softmax(-x, dim)``."""
    if dtype is not None:
        input = input.to(dtype=dtype)
    return _softmax(-input, _softmax_dim(input.ndim) if dim is None else dim)


def glu(input, dim: int = -1):  # noqa: A002
    """Gated linear unit: ``a * sigmoid(b)`` with ``a, b`` the two halves along ``dim``
    (GluBackward0)."""
    if input.ndim == 0 or input.shape[dim] % 2:
        raise RuntimeError(f"glu: halving dimension must be even, but dimension {dim} of shape "
                           f"{list(input.shape)} is not")
    return _call("glu", input, dim=dim)
