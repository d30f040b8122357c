"""``autograd.nn.functional``: the layers as functions.

A few are primitives (linear, conv2d, softmax, log_softmax, embedding; see autograd/ops/nn.py
for why); the rest are composites of primitives, each one FUNCTION range under the profiler.
Shape errors name the function, the argument and both shapes.
"""
from __future__ import annotations

import math

import numpy

from .. import backend, ops
from ..dispatch import TensorF, defcomposite
from ..grad_mode import no_grad
from ..ops import _call
from ..ops.nn import conv2d_input_grad, conv_out_size
from ..ops import (cat, erf, gelu, leaky_relu, log_softmax, masked_fill, pad, sigmoid,  # noqa: F401
                   silu, softmax, softplus, where)
from ..tensor import Tensor, default_generator

__all__ = [
    "linear", "conv1d", "conv2d", "conv_transpose2d", "max_pool2d", "avg_pool2d",
    "adaptive_avg_pool2d", "batch_norm", "layer_norm", "group_norm", "dropout", "embedding",
    "softmax", "log_softmax", "cross_entropy", "nll_loss", "mse_loss", "l1_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits",
    "scaled_dot_product_attention", "relu", "gelu", "silu", "sigmoid", "tanh", "leaky_relu",
    "softplus", "pad", "one_hot",
]


def _pair(v, name, op):
    if isinstance(v, int):
        return (v, v)
    v = tuple(int(a) for a in v)
    if len(v) != 2:
        raise ValueError(f"{op}: {name} must be an int or a pair, got {v}")
    return v


def relu(x, inplace: bool = False):
    return x.relu_() if inplace else _call("relu", x)


def tanh(x):
    return _call("tanh", x)


def linear(input, weight, bias=None):  # noqa: A002 - PyTorch's names
    """``input @ weight.T + bias`` (a primitive: one GEMM forward, two backward)."""
    return _call("linear", input, weight, bias)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1):  # noqa: A002
    """2-D convolution of (N, C, H, W) with (O, C/groups, kH, kW); padding may be 'same'."""
    if padding == "same":
        k = weight.shape[-2:]
        d = _pair(dilation, "dilation", "conv2d")
        if any(s != 1 for s in _pair(stride, "stride", "conv2d")):
            raise ValueError("conv2d: padding='same' needs stride 1")
        total = [d[i] * (k[i] - 1) for i in range(2)]
        if any(t % 2 for t in total):
            x = pad(input, (total[1] // 2, total[1] - total[1] // 2,
                            total[0] // 2, total[0] - total[0] // 2))
            return conv2d(x, weight, bias, 1, 0, dilation, groups)
        padding = (total[0] // 2, total[1] // 2)
    elif padding == "valid":
        padding = 0
    return _call("conv2d", input, weight, bias, stride=_pair(stride, "stride", "conv2d"),
                 padding=_pair(padding, "padding", "conv2d"),
                 dilation=_pair(dilation, "dilation", "conv2d"), groups=int(groups))


@defcomposite("conv1d")
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1):  # noqa: A002
    """1-D convolution of (N, C, L) with (O, C/groups, k): conv2d over a height of 1."""
    if input.ndim != 3 or weight.ndim != 3:
        raise RuntimeError(f"conv1d: expected a 3-D input and weight, got input shape "
                           f"{list(input.shape)} and weight shape {list(weight.shape)}")
    one = lambda v: v[0] if isinstance(v, (tuple, list)) else v  # noqa: E731
    out = conv2d(ops.unsqueeze(input, 2), ops.unsqueeze(weight, 2), bias, (1, one(stride)),
                 (0, one(padding)), (1, one(dilation)), groups)
    return ops.squeeze(out, 2)


@defcomposite("conv_transpose2d")
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0,  # noqa: A002
                     groups: int = 1, dilation=1):
    """Transposed 2-D convolution, weight (C_in, C_out/groups, kH, kW): the adjoint of
    conv2d, computed by conv2d's own input-gradient rule."""
    stride, padding = _pair(stride, "stride", "conv_transpose2d"), _pair(padding, "padding", "conv_transpose2d")
    dilation = _pair(dilation, "dilation", "conv_transpose2d")
    output_padding = _pair(output_padding, "output_padding", "conv_transpose2d")
    if input.ndim != 4 or weight.ndim != 4:
        raise RuntimeError(f"conv_transpose2d: expected 4-D input and weight, got shapes "
                           f"{list(input.shape)} and {list(weight.shape)}")
    if input.shape[1] != weight.shape[0]:
        raise RuntimeError(f"conv_transpose2d: input has {input.shape[1]} channels, weight "
                           f"expects {weight.shape[0]} (weight shape {list(weight.shape)})")
    h, w = input.shape[2:]
    kh, kw = weight.shape[2:]
    out_h = (h - 1) * stride[0] - 2 * padding[0] + dilation[0] * (kh - 1) + output_padding[0] + 1
    out_w = (w - 1) * stride[1] - 2 * padding[1] + dilation[1] * (kw - 1) + output_padding[1] + 1
    # conv2d's input gradient maps (N, O, Ho, Wo) back to (N, C, H, W); the transposed conv
    # is exactly that map, with this weight read as a conv2d weight (O=C_in, C=C_out).
    out = conv2d_input_grad(_TensorOps, input, weight, (input.shape[0], 0, out_h, out_w),
                            stride, padding, dilation, groups)
    if bias is not None:
        out = out + ops.reshape(bias, (1, -1, 1, 1))
    return out


#: Primitives as autograd ops, for reusing a backward rule as a forward composite.
_TensorOps = TensorF


def _pool_windows(x, kernel, stride, padding, dilation, value, op):
    if x.ndim != 4:
        raise RuntimeError(f"{op}: expected a 4-D input (N, C, H, W), got shape {list(x.shape)}")
    kernel = _pair(kernel, "kernel_size", op)
    stride = _pair(stride if stride is not None else kernel, "stride", op)
    padding = _pair(padding, "padding", op)
    dilation = _pair(dilation, "dilation", op)
    for i in range(2):
        if padding[i] * 2 > kernel[i]:
            raise RuntimeError(f"{op}: padding {padding[i]} should be at most half of kernel "
                               f"size {kernel[i]}")
        if conv_out_size(x.shape[2 + i], kernel[i], stride[i], padding[i], dilation[i]) < 1:
            raise RuntimeError(f"{op}: input of shape {list(x.shape)} is smaller than kernel "
                               f"{list(kernel)}")
    if padding != (0, 0):
        x = _call("pad", x, pad=(padding[1], padding[1], padding[0], padding[0]), value=value)
    cols = _call("im2col", x, kernel=kernel, stride=stride, dilation=dilation)
    n, c, kh, kw, ho, wo = cols.shape
    return ops.reshape(cols, (n, c, kh * kw, ho, wo))


@defcomposite("max_pool2d")
def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1,  # noqa: A002
               return_indices: bool = False):
    """Max over each window; the gradient goes to the arg-max of the window."""
    cols = _pool_windows(input, kernel_size, stride, padding, dilation, -math.inf, "max_pool2d")
    values, indices = ops.max(cols, 2)
    if not return_indices:
        return values
    return values, _plane_indices(indices, input.shape[-1], kernel_size, stride, padding,
                                  dilation)


def _plane_indices(window_idx, width, kernel, stride, padding, dilation):
    """Window-local arg-max positions as PyTorch's indices: offsets into the flattened H*W
    plane of the (unpadded) input."""
    kernel = _pair(kernel, "kernel_size", "max_pool2d")
    stride = _pair(stride if stride is not None else kernel, "stride", "max_pool2d")
    padding = _pair(padding, "padding", "max_pool2d")
    dilation = _pair(dilation, "dilation", "max_pool2d")
    k = window_idx.data
    xp = window_idx.device.xp
    ho, wo = k.shape[-2:]
    out_r = xp.arange(ho).reshape(ho, 1)
    out_c = xp.arange(wo).reshape(1, wo)
    row = out_r * stride[0] - padding[0] + (k // kernel[1]) * dilation[0]
    col = out_c * stride[1] - padding[1] + (k % kernel[1]) * dilation[1]
    return Tensor._make((row * width + col).astype("int64"), False, None, 0, [0],
                        window_idx.device)


@defcomposite("avg_pool2d")
def avg_pool2d(input, kernel_size, stride=None, padding=0):  # noqa: A002
    """Mean over each window (zero padding counted, as PyTorch's count_include_pad=True)."""
    return _pool_windows(input, kernel_size, stride, padding, 1, 0.0, "avg_pool2d").mean(dim=2)


@defcomposite("adaptive_avg_pool2d")
def adaptive_avg_pool2d(input, output_size):  # noqa: A002
    """Average-pool to ``output_size``; windows as PyTorch's (floor/ceil of i*H/out)."""
    if input.ndim != 4:
        raise RuntimeError(f"adaptive_avg_pool2d: expected a 4-D input, got shape {list(input.shape)}")
    oh, ow = _pair(output_size, "output_size", "adaptive_avg_pool2d")
    h, w = input.shape[2:]
    if h % oh == 0 and w % ow == 0:
        return avg_pool2d(input, (h // oh, w // ow))
    rows = []
    for i in range(oh):
        h0, h1 = (i * h) // oh, -((-(i + 1) * h) // oh)
        cols = []
        for j in range(ow):
            w0, w1 = (j * w) // ow, -((-(j + 1) * w) // ow)
            cols.append(input[:, :, h0:h1, w0:w1].mean(dim=(2, 3)))
        rows.append(ops.stack(cols, -1))
    return ops.stack(rows, -2)


def _channel_shape(x, n):
    return (1, n) + (1,) * (x.ndim - 2)


@defcomposite("batch_norm")
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
            with no_grad():
                rm, rv = running_mean.data, running_var.data
                rm *= 1 - momentum
                rm += momentum * mean.data.reshape(c)
                rv *= 1 - momentum
                rv += momentum * n / (n - 1) * var.data.reshape(c)
                running_mean._vc[0] += 1
                running_var._vc[0] += 1
        out = centered * ops.rsqrt(var + eps)
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("batch_norm: running_mean and running_var are needed in eval mode")
        out = (input - ops.reshape(running_mean, shape)) * ops.rsqrt(
            ops.reshape(running_var, shape) + eps)
    if weight is not None:
        out = out * ops.reshape(weight, shape)
    if bias is not None:
        out = out + ops.reshape(bias, shape)
    return out


@defcomposite("layer_norm")
def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):  # noqa: A002
    """Normalize over the last ``len(normalized_shape)`` dims."""
    normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(normalized_shape)
    if tuple(input.shape[input.ndim - k:]) != normalized_shape:
        raise RuntimeError(f"layer_norm: input of shape {list(input.shape)} does not end with "
                           f"normalized_shape {list(normalized_shape)}")
    dims = tuple(range(input.ndim - k, input.ndim))
    mean = input.mean(dim=dims, keepdim=True)
    centered = input - mean
    var = (centered * centered).mean(dim=dims, keepdim=True)
    out = centered * ops.rsqrt(var + eps)
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


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
    if weight is not None:
        out = out * ops.reshape(weight, shape)
    if bias is not None:
        out = out + ops.reshape(bias, shape)
    return out


@defcomposite("dropout")
def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False,  # noqa: A002
            generator=None):
    """Zero each element with probability ``p`` and scale the rest by 1/(1-p); identity when
    not training. The mask comes from ``generator`` or the device's seeded default."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: probability has to be between 0 and 1, got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    gen = generator if generator is not None else default_generator(input.device)
    keep = gen.random(input.shape, dtype=numpy.float32 if input.dtype.itemsize <= 4
                      else numpy.float64) >= p
    scale = (keep * (1.0 / (1.0 - p))).astype(input.dtype)
    # A host generator (numpy's) for a GPU input draws on the host: move the mask over.
    scale = backend.to_device(scale, input.device)
    out = input * Tensor._make(scale, False, None, 0, [0], input.device)
    if inplace:
        return input.copy_(out)
    return out


def embedding(input, weight, padding_idx=None):  # noqa: A002
    """Rows of ``weight`` at the integer ``input``; the ``padding_idx`` row gets no gradient."""
    idx = input.data if isinstance(input, Tensor) else input
    if getattr(idx, "dtype", None) is None or idx.dtype.kind not in "iu":
        raise TypeError(f"embedding: indices must be an integer tensor, got "
                        f"{getattr(idx, 'dtype', type(input).__name__)}")
    n = weight.shape[0]
    if idx.size:
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= n:
            raise IndexError(f"embedding: index {hi if hi >= n else lo} is out of range for "
                             f"a weight of {n} rows")
    if padding_idx is not None and padding_idx < 0:
        padding_idx += n
    return _call("embedding", weight, input, padding_idx=padding_idx)


def one_hot(t, num_classes: int = -1):
    """Integer classes as a one-hot int64 tensor (no gradient)."""
    xp = t.device.xp
    if num_classes < 0:
        num_classes = int(t.data.max()) + 1
    out = (t.data[..., None] == xp.arange(num_classes)).astype("int64")
    return Tensor._make(out, False, None, 0, [0], t.device)


# --------------------------------------------------------------------------- losses


def _reduce(loss, reduction, op, denom=None):
    if reduction == "mean":
        return loss.mean() if denom is None else loss.sum() / denom
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _check_targets(op, target, n_classes, ignore_index):
    t = target.data
    if t.dtype.kind not in "iu":
        raise TypeError(f"{op}: class-index targets must be an integer tensor, got {t.dtype}")
    if not t.size:
        return
    xp = target.device.xp
    bad = ((t < 0) | (t >= n_classes)) & (t != ignore_index)
    if bool(bad.any()):
        pos = tuple(int(i) for i in xp.argwhere(bad)[0])
        value = int(t[pos])
        raise IndexError(f"{op}: target {value} at index {list(pos) if len(pos) > 1 else pos[0]} "
                         f"is out of bounds for {n_classes} classes")


@defcomposite("nll_loss")
def nll_loss(input, target, weight=None, ignore_index: int = -100, reduction: str = "mean"):  # noqa: A002
    """Negative log-likelihood of class indices; ``input`` holds log-probabilities (N, C, ...)."""
    if input.ndim < 1:
        raise RuntimeError("nll_loss: input must have at least 1 dim")
    unbatched = input.ndim == 1
    if unbatched:
        input, target = ops.unsqueeze(input, 0), ops.unsqueeze(target, 0)
    c = input.shape[1]
    if (input.shape[0],) + tuple(input.shape[2:]) != tuple(target.shape):
        raise RuntimeError(f"nll_loss: input of shape {list(input.shape)} needs target of shape "
                           f"{[input.shape[0]] + list(input.shape[2:])}, got {list(target.shape)}")
    _check_targets("nll_loss", target, c, ignore_index)
    valid = target != ignore_index
    safe = Tensor._make(target.device.xp.where(valid.data, target.data, 0), False, None, 0, [0],
                        target.device)
    picked = ops.squeeze(_call("gather", input, ops.unsqueeze(safe, 1), dim=1), 1)
    w = valid.to(dtype=input.dtype)
    if weight is not None:
        w = w * _call("embedding", weight, safe)
    loss = -(picked * w)
    if unbatched:   # a (C,) input gives a 0-d loss per sample, as PyTorch's
        loss, w = ops.squeeze(loss, 0), ops.squeeze(w, 0)
    if reduction == "mean":
        return loss.sum() / w.sum()
    return _reduce(loss, reduction, "nll_loss")


@defcomposite("cross_entropy")
def cross_entropy(input, target, weight=None, ignore_index: int = -100,  # noqa: A002
                  reduction: str = "mean", label_smoothing: float = 0.0):
    """Cross entropy of logits (N, C, ...) against class indices (N, ...) or class
    probabilities (same shape as ``input``), with optional label smoothing."""
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    class_dim = 0 if input.ndim == 1 else 1
    logp = log_softmax(input, class_dim)
    c = input.shape[class_dim]
    if target.dtype.kind == "f":   # class probabilities
        if target.shape != input.shape:
            raise RuntimeError(f"cross_entropy: probability target of shape {list(target.shape)} "
                               f"must match input shape {list(input.shape)}")
        if label_smoothing:
            target = target * (1 - label_smoothing) + label_smoothing / c
        w = logp if weight is None else logp * ops.reshape(weight, _channel_shape(logp, c) if logp.ndim > 1 else (c,))
        return _reduce(-(w * target).sum(dim=class_dim), reduction, "cross_entropy")
    if input.ndim > 1 and (input.shape[0],) + tuple(input.shape[2:]) != tuple(target.shape):
        raise RuntimeError(f"cross_entropy: input of shape {list(input.shape)} needs target of "
                           f"shape {[input.shape[0]] + list(input.shape[2:])}, got "
                           f"{list(target.shape)}")
    _check_targets("cross_entropy", target, c, ignore_index)
    nll = nll_loss(logp, target, weight, ignore_index, "none")
    if not label_smoothing:
        if reduction == "mean":
            valid = (target != ignore_index).to(dtype=input.dtype)
            if weight is not None:
                safe = Tensor._make(target.device.xp.where(valid.data > 0, target.data, 0), False,
                                    None, 0, [0], target.device)
                valid = valid * _call("embedding", weight, safe)
            return nll.sum() / valid.sum()
        return _reduce(nll, reduction, "cross_entropy")
    # Label smoothing: (1 - eps) * nll + eps * mean over classes of -log p (weighted).
    valid = (target != ignore_index).to(dtype=input.dtype)
    wl = logp if weight is None else logp * ops.reshape(
        weight, _channel_shape(logp, c) if logp.ndim > 1 else (c,))
    smooth = -wl.sum(dim=class_dim) * (1.0 / c) * valid
    loss = nll * (1 - label_smoothing) + smooth * label_smoothing
    if reduction == "mean":
        if weight is not None:
            safe = Tensor._make(target.device.xp.where(valid.data > 0, target.data, 0), False,
                                None, 0, [0], target.device)
            return loss.sum() / (valid * _call("embedding", weight, safe)).sum()
        return loss.sum() / valid.sum()
    return _reduce(loss, reduction, "cross_entropy")


def _same_shape(op, input, target):
    if tuple(input.shape) != tuple(target.shape):
        raise RuntimeError(f"{op}: input has shape {list(input.shape)} but target has shape "
                           f"{list(target.shape)}")


@defcomposite("mse_loss")
def mse_loss(input, target, reduction: str = "mean"):  # noqa: A002
    """Squared error, averaged (or summed)."""
    _same_shape("mse_loss", input, target)
    d = input - target
    return _reduce(d * d, reduction, "mse_loss")


@defcomposite("l1_loss")
def l1_loss(input, target, reduction: str = "mean"):  # noqa: A002
    """Absolute error, averaged (or summed)."""
    _same_shape("l1_loss", input, target)
    return _reduce(ops.abs(input - target), reduction, "l1_loss")


@defcomposite("binary_cross_entropy")
def binary_cross_entropy(input, target, weight=None, reduction: str = "mean"):  # noqa: A002
    """BCE of probabilities; the logs are clamped at -100 as PyTorch does."""
    _same_shape("binary_cross_entropy", input, target)
    loss = -(target * ops.clamp(ops.log(input), min=-100.0)
             + (1 - target) * ops.clamp(ops.log(1 - input), min=-100.0))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "binary_cross_entropy")


@defcomposite("binary_cross_entropy_with_logits")
def binary_cross_entropy_with_logits(input, target, weight=None, reduction: str = "mean",  # noqa: A002
                                     pos_weight=None):
    """BCE of logits, stable for large |x|: ``(1 - t) x + (1 + (pw - 1) t) softplus(-x)``."""
    _same_shape("binary_cross_entropy_with_logits", input, target)
    sp = softplus(-input)
    if pos_weight is None:
        loss = (1 - target) * input + sp
    else:
        loss = (1 - target) * input + (1 + (pos_weight - 1) * target) * sp
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "binary_cross_entropy_with_logits")


@defcomposite("scaled_dot_product_attention")
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale=None, generator=None):
    """``softmax(q k^T * scale + mask) v`` over (..., L, E) / (..., S, E) / (..., S, Ev).
    ``attn_mask``: bool (True = attend) or float (added); ``is_causal`` masks the future."""
    if query.shape[-1] != key.shape[-1]:
        raise RuntimeError(f"scaled_dot_product_attention: query has head size "
                           f"{query.shape[-1]}, key has {key.shape[-1]} (shapes "
                           f"{list(query.shape)} and {list(key.shape)})")
    if key.shape[-2] != value.shape[-2]:
        raise RuntimeError(f"scaled_dot_product_attention: key has {key.shape[-2]} positions, "
                           f"value has {value.shape[-2]} (shapes {list(key.shape)} and "
                           f"{list(value.shape)})")
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = (query * scale) @ key.mT
    L, S = query.shape[-2], key.shape[-2]
    xp = query.device.xp
    if is_causal:
        future = xp.triu(xp.ones((L, S), dtype=bool), 1)
        scores = masked_fill(scores, Tensor._make(future, False, None, 0, [0], query.device),
                             -math.inf)
    if attn_mask is not None:
        if attn_mask.dtype.kind == "b":
            scores = masked_fill(scores, ops.logical_not(attn_mask), -math.inf)
        else:
            scores = scores + attn_mask
    attn = softmax(scores, -1)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p, True, generator=generator)
    return attn @ value
