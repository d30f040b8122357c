"""Parameter initializers (PyTorch's ``torch.nn.init``): in place, under no_grad, seeded by
``autograd.manual_seed`` through the device's default generator."""
from __future__ import annotations

import math

from ..grad_mode import no_grad
from ..generator import draw_normal, draw_uniform
from .._tensor import default_generator

__all__ = ["calculate_gain", "zeros_", "ones_", "constant_", "normal_", "uniform_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_"]


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The recommended gain for a nonlinearity (PyTorch's table)."""
    if nonlinearity in ("linear", "conv1d", "conv2d", "conv_transpose2d", "sigmoid", "identity"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _fans(t):
    if t.ndim < 2:
        raise ValueError(f"fan in and fan out can not be computed for a tensor with fewer than "
                         f"2 dims (shape {list(t.shape)})")
    receptive = 1
    for s in t.shape[2:]:
        receptive *= s
    return t.shape[1] * receptive, t.shape[0] * receptive


def _write(t, values):
    with no_grad():
        t._data[...] = values
        t._vc[0] += 1
    return t


def _gen(t, generator):
    return generator if generator is not None else default_generator(t.device)


def zeros_(t):
    return _write(t, 0)


def ones_(t):
    return _write(t, 1)


def constant_(t, val: float):
    return _write(t, val)


def normal_(t, mean: float = 0.0, std: float = 1.0, generator=None):
    g = _gen(t, generator)
    return _write(t, draw_normal(g, t.shape, t.dtype) * std + mean)


def uniform_(t, a: float = 0.0, b: float = 1.0, generator=None):
    g = _gen(t, generator)
    return _write(t, draw_uniform(g, t.shape, t.dtype) * (b - a) + a)


def xavier_uniform_(t, gain: float = 1.0, generator=None):
    fan_in, fan_out = _fans(t)
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -a, a, generator)


def xavier_normal_(t, gain: float = 1.0, generator=None):
    fan_in, fan_out = _fans(t)
    return normal_(t, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)


def _kaiming_std(t, a, mode, nonlinearity):
    fan_in, fan_out = _fans(t)
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"kaiming init: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan = fan_in if mode == "fan_in" else fan_out
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(t, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator=None):
    bound = math.sqrt(3.0) * _kaiming_std(t, a, mode, nonlinearity)
    return uniform_(t, -bound, bound, generator)


def kaiming_normal_(t, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator=None):
    return normal_(t, 0.0, _kaiming_std(t, a, mode, nonlinearity), generator)
