"""``autograd.nn.functional``: the layers as functions.

A few are primitives (linear, conv2d, softmax, log_softmax, embedding; see autograd/ops/nn.py
for why); the rest are composites of primitives, each one FUNCTION range under the profiler.
Shape errors name the function, the argument and both shapes.
"""
from __future__ import annotations

import math

import numpy

from .. import backend, ops
from ..dispatch import OPS, TensorF, apply_inplace, defcomposite
from ..dtypes import is_floating
from ..grad_mode import is_grad_enabled, no_grad
from ..ops import _call
from ..ops.nn import conv2d_input_grad, conv_out_size
# torch has these at the top level too: one definition, in ops/products.py.
from ..ops.products import cosine_similarity, pairwise_distance, pdist  # noqa: F401
from ..ops import (cat, erf, gelu, masked_fill, pad, sigmoid,  # noqa: F401
                   silu, softplus, where)
from ..ops import log_softmax as _log_softmax, softmax as _softmax
from .._tensor import Tensor, default_generator

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
    return _call("linear" if bias is not None else "linear.mm", input, weight, bias)


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


def _pool_args(x, kernel, stride, padding, dilation, op, ceil_mode=False):
    """The pooling's (kernel, stride, padding, dilation) as pairs, checked against ``x``, and
    the extra bottom/right padding ceil_mode's last window needs."""
    if x.ndim != 4:
        raise RuntimeError(f"{op}: expected a 4-D input (N, C, H, W), got shape {list(x.shape)}")
    kernel = _pair(kernel, "kernel_size", op)
    stride = _pair(stride if stride is not None else kernel, "stride", op)
    padding = _pair(padding, "padding", op)
    dilation = _pair(dilation, "dilation", op)
    extra = [0, 0]
    for i in range(2):
        if padding[i] * 2 > kernel[i]:
            raise RuntimeError(f"{op}: padding {padding[i]} should be at most half of kernel "
                               f"size {kernel[i]}")
        out, extra[i] = _pool_geometry(x.shape[2 + i], kernel[i], stride[i], padding[i],
                                       dilation[i], ceil_mode)
        if out < 1:
            raise RuntimeError(f"{op}: input of shape {list(x.shape)} is smaller than kernel "
                               f"{list(kernel)}")
    return kernel, stride, padding, dilation, tuple(extra)


def _pool_windows(x, kernel, stride, padding, dilation, value, op, ceil_mode=False):
    kernel, stride, padding, dilation, extra = _pool_args(x, kernel, stride, padding, dilation,
                                                          op, ceil_mode)
    # ceil_mode's last partial window reads past the right padding: pad that with ``value`` too.
    if padding != (0, 0) or extra != [0, 0]:
        x = _call("pad", x, pad=(padding[1], padding[1] + extra[1], padding[0],
                                 padding[0] + extra[0]), value=value)
    cols = _call("im2col", x, kernel=kernel, stride=stride, dilation=dilation)
    n, c, kh, kw, ho, wo = cols.shape
    return ops.reshape(cols, (n, c, kh * kw, ho, wo))


@defcomposite("max_pool2d")
def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1,  # noqa: A002
               ceil_mode: bool = False, return_indices: bool = False):
    """Max over each window; the gradient goes to the arg-max of the window. The indices are
    PyTorch's: offsets into the flattened H*W plane of the (unpadded) input. One op,
    ``max_pool2d_with_indices``, and one node, MaxPool2DWithIndicesBackward0, as PyTorch's."""
    kernel, stride, padding, dilation, extra = _pool_args(
        input, kernel_size, stride, padding, dilation, "max_pool2d", ceil_mode)
    values, indices = _call("max_pool2d_with_indices", input, kernel=kernel, stride=stride,
                            padding=padding, dilation=dilation, extra=extra)
    return (values, indices) if return_indices else values


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode: bool = False,  # noqa: A002
               count_include_pad: bool = True, divisor_override=None):
    """Mean over each window. The divisor is the window's size clipped to the padded input
    (count_include_pad=True, PyTorch's default) or its count of real elements (False), or
    ``divisor_override``. One op and one node (AvgPool2DBackward0), as PyTorch's."""
    kernel, stride, padding, _, extra = _pool_args(input, kernel_size, stride, padding, 1,
                                                   "avg_pool2d", ceil_mode)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("avg_pool2d: divisor_override must be non-zero")
    return _call("avg_pool2d", input, kernel=kernel, stride=stride, padding=padding,
                 extra=extra, count_include_pad=bool(count_include_pad),
                 divisor_override=divisor_override)


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
    idx = input._data if isinstance(input, Tensor) else input
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
        num_classes = int(t._data.max()) + 1
    out = (t._data[..., None] == xp.arange(num_classes)).astype("int64")
    return Tensor._make(out, False, None, 0, [0], t.device)


# --------------------------------------------------------------------------- losses


def _reduction(reduction, op):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    return reduction


def _reduce(loss, reduction, op, denom=None):
    if _reduction(reduction, op) == "mean":
        return loss.mean() if denom is None else loss.sum() / denom
    return loss.sum() if reduction == "sum" else loss


def _check_targets(op, target, n_classes, ignore_index):
    t = target._data
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
    if input.ndim == 2 and weight is None and not unbatched:   # the common case: one op
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"nll_loss: reduction must be 'mean', 'sum' or 'none', got "
                             f"{reduction!r}")
        return _call("nll_loss_forward", input, target, ignore_index=ignore_index,
                     reduction=reduction)
    valid = target != ignore_index
    safe = Tensor._make(target.device.xp.where(valid._data, target._data, 0), False, None, 0, [0],
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
    logp = _log_softmax(input, class_dim)
    c = input.shape[class_dim]
    if is_floating(target.dtype):   # class probabilities
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
    if input.ndim == 2 and weight is None and not label_smoothing:
        return nll_loss(logp, target, None, ignore_index, reduction)
    nll = nll_loss(logp, target, weight, ignore_index, "none")
    if not label_smoothing:
        if reduction == "mean":
            valid = (target != ignore_index).to(dtype=input.dtype)
            if weight is not None:
                safe = Tensor._make(target.device.xp.where(valid._data > 0, target._data, 0), False,
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
            safe = Tensor._make(target.device.xp.where(valid._data > 0, target._data, 0), False,
                                None, 0, [0], target.device)
            return loss.sum() / (valid * _call("embedding", weight, safe)).sum()
        return loss.sum() / valid.sum()
    return _reduce(loss, reduction, "cross_entropy")


def _same_shape(op, input, target):
    if tuple(input.shape) != tuple(target.shape):
        raise RuntimeError(f"{op}: input has shape {list(input.shape)} but target has shape "
                           f"{list(target.shape)}")


def mse_loss(input, target, reduction: str = "mean"):  # noqa: A002
    """Squared error, averaged (or summed)."""
    _same_shape("mse_loss", input, target)
    return _call("mse_loss", input, target, reduction=_reduction(reduction, "mse_loss"))


@defcomposite("l1_loss")
def l1_loss(input, target, reduction: str = "mean"):  # noqa: A002
    """Absolute error, averaged (or summed)."""
    _same_shape("l1_loss", input, target)
    return _reduce(ops.abs(input - target), reduction, "l1_loss")


def binary_cross_entropy(input, target, weight=None, reduction: str = "mean"):  # noqa: A002
    """BCE of probabilities; the logs are clamped at -100 as PyTorch does. One op and one
    node (BinaryCrossEntropyBackward0), as PyTorch's."""
    _same_shape("binary_cross_entropy", input, target)
    if isinstance(weight, Tensor) and weight.requires_grad and is_grad_enabled():
        raise RuntimeError("The function 'binary_cross_entropy' is not differentiable with "
                           "respect to argument 'weight'. This input cannot have "
                           "requires_grad True.")
    return _call("binary_cross_entropy", input, target, weight,
                 reduction=_reduction(reduction, "binary_cross_entropy"))


def binary_cross_entropy_with_logits(input, target, weight=None, reduction: str = "mean",  # noqa: A002
                                     pos_weight=None):
    """BCE of logits, stable for large |x|: ``(1 - t) x + (1 + (pw - 1) t) softplus(-x)``."""
    _same_shape("binary_cross_entropy_with_logits", input, target)
    return _call("binary_cross_entropy_with_logits", input, target, weight, pos_weight,
                 reduction=_reduction(reduction, "binary_cross_entropy_with_logits"))


@defcomposite("scaled_dot_product_attention")
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale=None, generator=None):
    """``softmax(q k^T * scale + mask) v`` over (..., L, E) / (..., S, E) / (..., S, Ev).
    ``attn_mask``: bool (True = attend) or float (added); ``is_causal`` masks the future. A
    query whose mask hides every key gets zeros (and no gradient), as PyTorch's since 2.5."""
    if query.shape[-1] != key.shape[-1]:
        raise RuntimeError(f"scaled_dot_product_attention: query has head size "
                           f"{query.shape[-1]}, key has {key.shape[-1]} (shapes "
                           f"{list(query.shape)} and {list(key.shape)})")
    if key.shape[-2] != value.shape[-2]:
        raise RuntimeError(f"scaled_dot_product_attention: key has {key.shape[-2]} positions, "
                           f"value has {value.shape[-2]} (shapes {list(key.shape)} and "
                           f"{list(value.shape)})")
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    if attn_mask is None:   # scale, causal mask and softmax in one op
        attn = _call("scaled_softmax", query @ key.mT, scale=scale, causal=bool(is_causal))
        if dropout_p > 0.0:
            attn = dropout(attn, dropout_p, True, generator=generator)
        return attn @ value
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
    # PyTorch's safe softmax (since 2.5): a query whose mask hides every key gets zeros,
    # not NaN, so a padding row does not poison the loss and its gradients.
    attn = _call("_safe_softmax", scores, dim=scores.ndim - 1)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p, True, generator=generator)
    return attn @ value


# =========================================================================== issue 14
# More activations, layers and losses for porting PyTorch training scripts. All are
# composites of existing primitives: their gradients come from the op table.

__all__ += [
    "elu", "selu", "celu", "rrelu", "rrelu_", "relu6", "hardtanh", "hardtanh_", "threshold",
    "threshold_", "relu_",
    "elu_", "selu_", "celu_", "leaky_relu_", "hardshrink", "softshrink", "tanhshrink", "prelu",
    "hardsigmoid", "hardswish", "mish",
    "logsigmoid", "softsign", "softmin", "glu", "normalize", "cosine_similarity",
    "pairwise_distance", "pdist", "interpolate", "upsample", "pixel_shuffle", "pixel_unshuffle", "unfold",
    "max_pool1d", "avg_pool1d", "adaptive_max_pool2d", "adaptive_avg_pool1d", "instance_norm",
    "smooth_l1_loss", "huber_loss", "kl_div", "soft_margin_loss",
]


def _const(array, like):
    """A constant (no-grad) tensor from a host array, on ``like``'s device and dtype."""
    arr = numpy.asarray(array, dtype=like.dtype if is_floating(like.dtype) else None)
    return Tensor._make(backend.to_device(arr, like.device), False, None, 0, [0], like.device)


# --------------------------------------------------------------------------- activations

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
    slope (PyTorch's rrelu_with_noise); otherwise leaky_relu with the mean slope."""
    if lower > upper:
        raise RuntimeError(f"Lower bound should be less than or equal to the upper bound, got "
                           f"lower={lower}, upper={upper}")
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)
    gen = generator if generator is not None else default_generator(input.device)
    u = gen.random(input.shape, dtype=numpy.float32 if input.dtype.itemsize <= 4
                   else numpy.float64)
    # A host generator (numpy's) for a GPU input draws on the host: move the slopes over.
    slope = backend.to_device(lower + (upper - lower) * u, input.device)
    xp = input.device.xp
    noise = xp.where(input._data <= 0, slope, 1).astype(input.dtype)
    out = input * Tensor._make(noise, False, None, 0, [0], input.device)
    if inplace:
        return input.copy_(out)
    return out


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


# --------------------------------------------------------------------------- distances


@defcomposite("normalize")
def normalize(input, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out=None):  # noqa: A002
    """``x / max(||x||_p, eps)`` along ``dim``."""
    if out is not None:
        raise TypeError("normalize: out= is not supported (gradtrace has no out= arguments)")
    n = ops.norm(input, p, dim, keepdim=True)
    return input / ops.clamp(n, min=eps)


# --------------------------------------------------------------------------- padding


def _pad_index(n, lo, hi, mode, op):
    """Source positions along one dim for PyTorch's padding modes (negative pads crop)."""
    pos = numpy.arange(-lo, n + hi)
    if mode == "reflect":
        if lo >= n or hi >= n:
            raise RuntimeError(f"{op}: padding ({lo}, {hi}) should be less than the input size "
                               f"{n} in reflect mode")
        pos = numpy.abs(pos)
        pos = numpy.where(pos > n - 1, 2 * (n - 1) - pos, pos)
    elif mode == "replicate":
        pos = numpy.clip(pos, 0, n - 1)
    elif mode == "circular":
        if lo > n or hi > n:
            raise RuntimeError(f"{op}: padding ({lo}, {hi}) should be at most the input size "
                               f"{n} in circular mode")
        pos = pos % n
    return pos


def pad(input, pad, mode: str = "constant", value=None):  # noqa: A002,F811 - extends ops.pad
    """Pad the last ``len(pad) // 2`` dims; ``pad`` lists (left, right) from the last dim.

    Modes: 'constant' (with ``value``), 'reflect' (mirror without the edge), 'replicate'
    (repeat the edge), 'circular' (wrap). Negative pads crop. Non-constant modes gather along
    each padded dim with a constant index, so their gradient is index_select's.
    """
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise RuntimeError(f"pad: padding length {len(pad)} must be even and at most "
                           f"2 * ndim ({2 * input.ndim}) for input of shape {list(input.shape)}")
    if mode == "constant":
        out = input
        # Crop first (negative pads), then pad with ops.pad (non-negative pads only).
        for k in range(len(pad) // 2):
            d = input.ndim - 1 - k
            lo, hi = pad[2 * k], pad[2 * k + 1]
            if lo < 0 or hi < 0:
                n = out.shape[d]
                start, stop = max(-lo, 0), n - max(-hi, 0)
                if stop - start + max(lo, 0) + max(hi, 0) < 0 or stop < start:
                    raise RuntimeError(f"pad: negative padding {list(pad)} crops dim {d} of "
                                       f"shape {list(input.shape)} below zero")
                out = ops.narrow(out, d, start, stop - start)
        positive = tuple(max(p, 0) for p in pad)
        if any(positive):
            out = ops.pad(out, positive, value=0.0 if value is None else value)
        return out
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"pad: mode must be 'constant', 'reflect', 'replicate' or "
                                  f"'circular', got {mode!r}")
    if value not in (None, 0, 0.0):
        raise ValueError(f"pad: padding mode {mode!r} doesn't take in value argument")
    out = input
    for k in range(len(pad) // 2):
        d = input.ndim - 1 - k
        if pad[2 * k] or pad[2 * k + 1]:
            idx = _pad_index(out.shape[d], pad[2 * k], pad[2 * k + 1], mode, "pad")
            out = ops.index_select(out, d, _const(idx, _int_like(out)))
    return out


def _int_like(t):
    # A zero-size int64 tensor on t's device: _const's dtype/device template for indices.
    return Tensor._make(t.device.xp.zeros(0, dtype=numpy.int64), False, None, 0, [0], t.device)


# --------------------------------------------------------------------------- pooling


def _pool_geometry(size, k, s, p, d, ceil_mode):
    """Output size and the extra right padding ceil_mode needs (PyTorch's rule: the last
    window must start inside the input or the left padding)."""
    span = size + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    extra = max((out - 1) * s + d * (k - 1) + 1 - (size + 2 * p), 0)
    return out, extra


@defcomposite("max_pool1d")
def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1,  # noqa: A002
               ceil_mode: bool = False, return_indices: bool = False):
    """Max over windows of (N, C, L) or (C, L): max_pool2d over a height of 1."""
    one = lambda v: v[0] if isinstance(v, (tuple, list)) else v  # noqa: E731
    batched = input.ndim == 3
    x = ops.unsqueeze(input if batched else ops.unsqueeze(input, 0), 2)
    res = max_pool2d(x, (1, one(kernel_size)), (1, one(stride if stride is not None
                                                      else kernel_size)),
                     (0, one(padding)), (1, one(dilation)), ceil_mode=ceil_mode,
                     return_indices=return_indices)
    fix = (lambda t: ops.squeeze(t, 2)) if batched else (lambda t: ops.squeeze(ops.squeeze(t, 2), 0))
    return tuple(fix(t) for t in res) if return_indices else fix(res)


@defcomposite("avg_pool1d")
def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode: bool = False,  # noqa: A002
               count_include_pad: bool = True):
    """Mean over windows of (N, C, L) or (C, L): avg_pool2d over a height of 1."""
    one = lambda v: v[0] if isinstance(v, (tuple, list)) else v  # noqa: E731
    batched = input.ndim == 3
    x = ops.unsqueeze(input if batched else ops.unsqueeze(input, 0), 2)
    out = avg_pool2d(x, (1, one(kernel_size)),
                     (1, one(stride if stride is not None else kernel_size)), (0, one(padding)),
                     ceil_mode, count_include_pad)
    out = ops.squeeze(out, 2)
    return out if batched else ops.squeeze(out, 0)


def _adaptive_windows(size, out):
    return [((i * size) // out, -((-(i + 1) * size) // out)) for i in range(out)]


@defcomposite("adaptive_max_pool2d")
def adaptive_max_pool2d(input, output_size, return_indices: bool = False):  # noqa: A002
    """Max-pool to ``output_size`` with PyTorch's windows (floor/ceil of i*H/out); indices
    are flat positions in each (H, W) plane."""
    if input.ndim not in (3, 4):
        raise RuntimeError(f"adaptive_max_pool2d: expected a 3-D or 4-D input, got shape "
                           f"{list(input.shape)}")
    if input.ndim == 3:
        res = adaptive_max_pool2d(ops.unsqueeze(input, 0), output_size, return_indices)
        return tuple(ops.squeeze(t, 0) for t in res) if return_indices else ops.squeeze(res, 0)
    oh, ow = (output_size, output_size) if isinstance(output_size, int) else output_size
    h, w = input.shape[2:]
    oh, ow = oh or h, ow or w     # None keeps the input size, as in PyTorch
    rows, idx_rows = [], []
    for h0, h1 in _adaptive_windows(h, oh):
        cols, idx_cols = [], []
        for w0, w1 in _adaptive_windows(w, ow):
            win = input[:, :, h0:h1, w0:w1]
            cols.append(win.amax(dim=(2, 3)))
            if return_indices:
                arg = win._data.reshape(win.shape[0], win.shape[1], -1).argmax(-1)
                idx_cols.append((h0 + arg // (w1 - w0)) * w + w0 + arg % (w1 - w0))
        rows.append(ops.stack(cols, -1))
        if return_indices:
            idx_rows.append(input.device.xp.stack(idx_cols, -1))
    values = ops.stack(rows, -2)
    if not return_indices:
        return values
    idx = input.device.xp.stack(idx_rows, -2).astype(numpy.int64)
    return values, Tensor._make(idx, False, None, 0, [0], input.device)


@defcomposite("adaptive_avg_pool1d")
def adaptive_avg_pool1d(input, output_size):  # noqa: A002
    """Average-pool (N, C, L) to length ``output_size``."""
    o = output_size[0] if isinstance(output_size, (tuple, list)) else output_size
    return ops.squeeze(adaptive_avg_pool2d(ops.unsqueeze(input, 2), (1, o)), 2)


# --------------------------------------------------------------------------- im2col, resizing


@defcomposite("unfold")
def unfold(input, kernel_size, dilation=1, padding=0, stride=1):  # noqa: A002
    """Sliding local blocks (im2col): (N, C, H, W) -> (N, C*kh*kw, L), L the block count.
    Channel-major then kernel row, kernel column, as PyTorch orders them."""
    if input.ndim not in (3, 4):
        raise RuntimeError(f"unfold: expected a 3-D or 4-D input, got shape {list(input.shape)}")
    if input.ndim == 3:
        return ops.squeeze(unfold(ops.unsqueeze(input, 0), kernel_size, dilation, padding,
                                  stride), 0)
    k, d = _pair(kernel_size, "kernel_size", "unfold"), _pair(dilation, "dilation", "unfold")
    p, s = _pair(padding, "padding", "unfold"), _pair(stride, "stride", "unfold")
    x = input
    if p != (0, 0):
        x = ops.pad(x, (p[1], p[1], p[0], p[0]))
    for i in range(2):
        if conv_out_size(input.shape[2 + i], k[i], s[i], p[i], d[i]) < 1:
            raise RuntimeError(f"unfold: input of shape {list(input.shape)} is too small for "
                               f"kernel {list(k)}, dilation {list(d)}, padding {list(p)}")
    cols = _call("im2col", x, kernel=k, stride=s, dilation=d)
    n, c, kh, kw, ho, wo = cols.shape
    return ops.reshape(cols, (n, c * kh * kw, ho * wo))


@defcomposite("pixel_shuffle")
def pixel_shuffle(input, upscale_factor: int):  # noqa: A002
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r)."""
    r = int(upscale_factor)
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle: channels {c} of shape {list(input.shape)} are not "
                           f"divisible by upscale_factor squared ({r * r})")
    x = ops.reshape(input, (-1, c // (r * r), r, r, h, w))
    x = ops.permute(x, (0, 1, 4, 2, 5, 3))
    return ops.reshape(x, tuple(lead) + (c // (r * r), h * r, w * r))


@defcomposite("pixel_unshuffle")
def pixel_unshuffle(input, downscale_factor: int):  # noqa: A002
    """(*, C, H*r, W*r) -> (*, C*r*r, H, W), the inverse of pixel_shuffle."""
    r = int(downscale_factor)
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle: height and width of shape {list(input.shape)} "
                           f"must be divisible by downscale_factor {r}")
    x = ops.reshape(input, (-1, c, h // r, r, w // r, r))
    x = ops.permute(x, (0, 1, 3, 5, 2, 4))
    return ops.reshape(x, tuple(lead) + (c * r * r, h // r, w // r))


def _resize_axis(x, dim, out_size, mode, align_corners, scale):
    """Resample one spatial dim with constant indices and weights (separable)."""
    n = x.shape[dim]
    dst = numpy.arange(out_size, dtype=numpy.float64)
    # PyTorch's source scale: the user's 1/scale_factor when given, else in/out.
    ratio = (1.0 / scale) if scale is not None else n / out_size
    if mode == "nearest":
        src = numpy.minimum(numpy.floor(dst * ratio).astype(numpy.int64), n - 1)
        return ops.index_select(x, dim, _const(src, _int_like(x)))
    if align_corners:
        src = dst * ((n - 1) / (out_size - 1)) if out_size > 1 else numpy.zeros_like(dst)
    else:
        src = numpy.maximum((dst + 0.5) * ratio - 0.5, 0.0)
    i0 = numpy.minimum(numpy.floor(src).astype(numpy.int64), n - 1)
    i1 = numpy.minimum(i0 + 1, n - 1)
    lam = src - i0
    shape = [1] * x.ndim
    shape[dim] = out_size
    lam_t = _const(lam.reshape(shape), x)
    a = ops.index_select(x, dim, _const(i0, _int_like(x)))
    b = ops.index_select(x, dim, _const(i1, _int_like(x)))
    return a * (1.0 - lam_t) + b * lam_t


@defcomposite("interpolate")
def interpolate(input, size=None, scale_factor=None, mode: str = "nearest",  # noqa: A002
                align_corners=None, recompute_scale_factor=None, antialias: bool = False):
    """Resize the spatial dims of (N, C, L), (N, C, H, W) or (N, C, D, H, W).

    Modes 'nearest' (PyTorch's floor rule) and 'linear'/'bilinear'/'trilinear' (separable
    linear interpolation, with align_corners False or True).
    """
    spatial = input.ndim - 2
    if spatial not in (1, 2, 3):
        raise ValueError(f"interpolate: expected a 3-D, 4-D or 5-D input, got shape "
                         f"{list(input.shape)}")
    linear_modes = {"linear": 1, "bilinear": 2, "trilinear": 3}
    if mode not in ("nearest",) + tuple(linear_modes):
        raise NotImplementedError(f"interpolate: mode {mode!r} is not supported (nearest, "
                                  f"linear, bilinear, trilinear are)")
    if mode in linear_modes and linear_modes[mode] != spatial:
        raise NotImplementedError(f"interpolate: mode {mode!r} expects a "
                                  f"{linear_modes[mode] + 2}-D input, got shape "
                                  f"{list(input.shape)}")
    if mode == "nearest" and align_corners is not None:
        raise ValueError("interpolate: align_corners option can only be set with the "
                         "interpolating modes: linear | bilinear | trilinear")
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported")
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate: exactly one of size or scale_factor must be given")
    in_sizes = input.shape[2:]
    if size is not None:
        sizes = [int(size)] * spatial if isinstance(size, int) else [int(s) for s in size]
        scales = [None] * spatial
    else:
        scales = ([float(scale_factor)] * spatial if isinstance(scale_factor, (int, float))
                  else [float(s) for s in scale_factor])
        sizes = [int(math.floor(n * s)) for n, s in zip(in_sizes, scales)]
        if recompute_scale_factor:
            scales = [None] * spatial
    if len(sizes) != spatial:
        raise ValueError(f"interpolate: size {sizes} must have {spatial} entries for input of "
                         f"shape {list(input.shape)}")
    out = input
    for i in range(spatial):
        if sizes[i] != in_sizes[i] or mode != "nearest":
            out = _resize_axis(out, 2 + i, sizes[i], mode, bool(align_corners), scales[i])
    return out


def upsample(input, size=None, scale_factor=None, mode: str = "nearest", align_corners=None):  # noqa: A002
    """The deprecated spelling of :func:`interpolate`."""
    return interpolate(input, size, scale_factor, mode, align_corners)


# --------------------------------------------------------------------------- normalization


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


# --------------------------------------------------------------------------- more losses


def _legacy_reduction(size_average, reduce, reduction):
    # PyTorch's deprecated size_average/reduce flags, mapped to ``reduction``.
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return "none" if not reduce else ("mean" if size_average else "sum")


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean",  # noqa: A002
                   beta: float = 1.0):
    """``0.5 d^2 / beta`` where |d| < beta, ``|d| - 0.5 beta`` elsewhere (l1 when beta=0);
    one SmoothL1LossBackward0, as PyTorch's."""
    _same_shape("smooth_l1_loss", input, target)
    if beta < 0:
        raise RuntimeError(f"smooth_l1_loss: beta must be non-negative, got {beta}")
    reduction = _reduction(_legacy_reduction(size_average, reduce, reduction), "smooth_l1_loss")
    if beta == 0.0:
        return _reduce(ops.abs(input - target), reduction, "smooth_l1_loss")
    return _call("smooth_l1_loss", input, target, reduction=reduction, beta=float(beta))


def huber_loss(input, target, reduction: str = "mean", delta: float = 1.0):  # noqa: A002
    """``0.5 d^2`` where |d| <= delta, ``delta (|d| - 0.5 delta)`` elsewhere; one
    HuberLossBackward0, as PyTorch's."""
    _same_shape("huber_loss", input, target)
    if delta <= 0:
        raise RuntimeError(f"huber_loss: delta must be positive, got {delta}")
    return _call("huber_loss", input, target, reduction=_reduction(reduction, "huber_loss"),
                 delta=float(delta))


@defcomposite("kl_div")
def kl_div(input, target, size_average=None, reduce=None, reduction: str = "mean",  # noqa: A002
           log_target: bool = False):
    """KL divergence with ``input`` log-probabilities: ``target * (log target - input)``
    pointwise (0 where target is 0); ``log_target`` when target holds log-probabilities.
    reduction 'batchmean' divides the sum by the batch size (the mathematically correct KL);
    'mean' divides by the element count, as PyTorch does."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if log_target:
        loss = ops.exp(target) * (target - input)
    else:
        positive = target > 0
        # log of 1 where target <= 0 keeps the unselected branch finite (xlogy's convention).
        safe = where(positive, target, target * 0.0 + 1.0)
        loss = where(positive, target * (ops.log(safe) - input), target * 0.0)
    if reduction == "batchmean":
        return loss.sum() / (input.shape[0] if input.ndim else 1)
    return _reduce(loss, reduction, "kl_div")


@defcomposite("soft_margin_loss")
def soft_margin_loss(input, target, size_average=None, reduce=None,  # noqa: A002
                     reduction: str = "mean"):
    """Two-class logistic loss ``log(1 + exp(-y x))`` with y in {-1, 1}."""
    _same_shape("soft_margin_loss", input, target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _reduce(_softplus_stable(-target * input), reduction, "soft_margin_loss")
