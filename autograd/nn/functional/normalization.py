"""Batch, layer, group and instance normalization, and ``normalize`` (Lp over a dim).
"""
from __future__ import annotations

from ... import ops
from ...dispatch import defcomposite
from ...grad_mode import no_grad
from ...ops import _call


def _channel_shape(x, n):
    return (1, n) + (1,) * (x.ndim - 2)


def _update_running(running_mean, running_var, mean, unbiased_var, momentum: float) -> None:
    """Move the running statistics (arrays updated in place, versions bumped) toward this
    batch's: ``running = (1 - momentum) * running + momentum * batch``, as PyTorch."""
    with no_grad():
        for t, value in ((running_mean, mean), (running_var, unbiased_var)):
            t._data *= 1 - momentum
            t._data += momentum * value
            t._vc[0] += 1


def _with_running_stats(input, running_mean, running_var, shape, eps):  # noqa: A002
    return (input - ops.reshape(running_mean, shape)) * ops.rsqrt(ops.reshape(running_var, shape) + eps)


def _affine(out, weight, bias, shape):
    """The per-channel scale and shift of a normalization (either may be None)."""
    if weight is not None:
        out = out * ops.reshape(weight, shape)
    if bias is not None:
        out = out + ops.reshape(bias, shape)
    return out


@defcomposite("batch_norm")   # the whole op is one range, as PyTorch's aten::batch_norm
def batch_norm(input, running_mean, running_var, weight=None, bias=None,  # noqa: A002
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5):
    """Normalize over every dim but the channel dim (1). In training, batch statistics are
    used and the running ones updated in place (unbiased variance, like PyTorch)."""
    if input.ndim < 2:
        raise RuntimeError(f"batch_norm: expected at least 2-D input, got shape {list(input.shape)}")
    c = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (c,):
            raise RuntimeError(f"batch_norm: {name} has shape {list(t.shape)}, expected [{c}] "
                               f"for input of shape {list(input.shape)}")
    dims = (0,) + tuple(range(2, input.ndim))
    shape = _channel_shape(input, c)
    if training:
        mean = input.mean(dim=dims, keepdim=True)
        centered = input - mean
        var = (centered * centered).mean(dim=dims, keepdim=True)
        n = input.numel() // c
        if n <= 1:
            raise ValueError(f"batch_norm: expected more than 1 value per channel when "
                             f"training, got input of shape {list(input.shape)}")
        if running_mean is not None:
            _update_running(running_mean, running_var, mean._data.reshape(c),
                            n / (n - 1) * var._data.reshape(c), momentum)
        out = centered * ops.rsqrt(var + eps)
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("batch_norm: running_mean and running_var are needed in eval mode")
        out = _with_running_stats(input, running_mean, running_var, shape, eps)
    return _affine(out, weight, bias, shape)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):  # noqa: A002
    """Normalize over the last ``len(normalized_shape)`` dims (one primitive, see ops/nn.py)."""
    normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(normalized_shape)
    if tuple(input.shape[input.ndim - k:]) != normalized_shape:
        raise RuntimeError(f"layer_norm: input of shape {list(input.shape)} does not end with "
                           f"normalized_shape {list(normalized_shape)}")
    return _call("layer_norm", input, weight, bias, normalized_shape=normalized_shape, eps=eps)


@defcomposite("group_norm")
def group_norm(input, num_groups: int, weight=None, bias=None, eps: float = 1e-5):  # noqa: A002
    """Normalize over groups of channels (and all spatial dims)."""
    n, c = input.shape[:2]
    if c % num_groups:
        raise RuntimeError(f"group_norm: input has {c} channels, not divisible by "
                           f"num_groups={num_groups}")
    x = ops.reshape(input, (n, num_groups, -1))
    mean = x.mean(dim=2, keepdim=True)
    centered = x - mean
    var = (centered * centered).mean(dim=2, keepdim=True)
    out = ops.reshape(centered * ops.rsqrt(var + eps), input.shape)
    shape = _channel_shape(input, c)
    return _affine(out, weight, bias, shape)


@defcomposite("normalize")
def normalize(input, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out=None):  # noqa: A002
    """``x / max(||x||_p, eps)`` along ``dim``."""
    if out is not None:
        raise TypeError("normalize: out= is not supported (gradtrace has no out= arguments)")
    n = ops.norm(input, p, dim, keepdim=True)
    return input / ops.clamp(n, min=eps)


@defcomposite("instance_norm")
def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,  # noqa: A002
                  use_input_stats: bool = True, momentum: float = 0.1, eps: float = 1e-5):
    """Normalize each (sample, channel) over its spatial dims. With running buffers and
    ``use_input_stats``, they are updated with the batch average of the instance statistics."""
    if input.ndim < 3:
        raise RuntimeError(f"instance_norm: expected an input with spatial dims (N, C, ...), "
                           f"got shape {list(input.shape)}")
    c = input.shape[1]
    dims = tuple(range(2, input.ndim))
    shape = _channel_shape(input, c)
    if use_input_stats:
        mean = input.mean(dim=dims, keepdim=True)
        centered = input - mean
        var = (centered * centered).mean(dim=dims, keepdim=True)
        if running_mean is not None and running_var is not None:
            n = input.numel() // (input.shape[0] * c)
            _update_running(running_mean, running_var, mean._data.reshape(input.shape[0], c).mean(0),
                            (var._data.reshape(input.shape[0], c) * (n / max(n - 1, 1))).mean(0), momentum)
        out = centered * ops.rsqrt(var + eps)
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("instance_norm: running_mean and running_var are needed when "
                               "use_input_stats=False")
        out = _with_running_stats(input, running_mean, running_var, shape, eps)
    return _affine(out, weight, bias, shape)
