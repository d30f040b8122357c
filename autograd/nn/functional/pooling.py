"""Max, average and adaptive pooling in one and two dims.
"""
from __future__ import annotations

from ... import ops
from ...dispatch import defcomposite
from ...ops import _call
from ...dtypes import is_floating
from ...promotion import torch_name
from .helpers import _pair


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


def _adaptive_size(input, output_size, op: str) -> tuple[int, int]:  # noqa: A002
    """(Ho, Wo) of an adaptive pooling of (N, C, H, W) or (C, H, W) ``input``: an int or a pair,
    None keeping the input's size, as PyTorch's."""
    if input.ndim not in (3, 4):
        raise RuntimeError(f"{op}: expected a 3-D or 4-D input, got shape {list(input.shape)}")
    if output_size is None or isinstance(output_size, int):
        output_size = (output_size, output_size)
    size = tuple(input.shape[-2:][k] if v is None else int(v) for k, v in enumerate(output_size))
    if len(size) != 2 or min(size) < 1:
        raise RuntimeError(f"{op}: output_size must be two positive sizes, got {output_size}")
    if min(input.shape[-2:]) < 1:
        raise RuntimeError(f"{op}: the input's height and width must be positive, got shape {list(input.shape)}")
    return size


@defcomposite("adaptive_avg_pool2d")
def adaptive_avg_pool2d(input, output_size):  # noqa: A002
    """Average-pool (N, C, H, W) or (C, H, W) to ``output_size`` with PyTorch's windows (output
    i covers floor(i·H/Ho) to ceil((i+1)·H/Ho)): ``aten::_adaptive_avg_pool2d`` and one
    AdaptiveAvgPool2DBackward0 node; a 1×1 output is a mean over H and W (MeanBackward1), as
    in PyTorch."""
    size = _adaptive_size(input, output_size, "adaptive_avg_pool2d")
    if not is_floating(input.dtype):
        raise NotImplementedError(f"\"adaptive_avg_pool2d\" not implemented for '{torch_name(input.dtype)}'")
    if size == (1, 1):
        return input.mean(dim=(-2, -1), keepdim=True)
    return _call("_adaptive_avg_pool2d", input, output_size=size)


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


def adaptive_max_pool2d(input, output_size, return_indices: bool = False):  # noqa: A002
    """Max-pool (N, C, H, W) or (C, H, W) to ``output_size`` with PyTorch's windows: one op and
    one AdaptiveMaxPool2DBackward0 node; indices are flat positions in each (H, W) plane (of
    tied maxima the first, of NaNs the last, as PyTorch's)."""
    size = _adaptive_size(input, output_size, "adaptive_max_pool2d")
    values, indices = _call("adaptive_max_pool2d", input, output_size=size)
    return (values, indices) if return_indices else values


@defcomposite("adaptive_avg_pool1d")
def adaptive_avg_pool1d(input, output_size):  # noqa: A002
    """Average-pool (N, C, L) to length ``output_size``."""
    o = output_size[0] if isinstance(output_size, (tuple, list)) else output_size
    return ops.squeeze(adaptive_avg_pool2d(ops.unsqueeze(input, 2), (1, o)), 2)


@defcomposite("adaptive_max_pool1d")
def adaptive_max_pool1d(input, output_size, return_indices: bool = False):  # noqa: A002
    """Max-pool (N, C, L) or (C, L) to length ``output_size``: adaptive_max_pool2d over a height
    of 1, as PyTorch's (indices are positions along L)."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"adaptive_max_pool1d: expected a 2-D or 3-D input, got shape {list(input.shape)}")
    o = output_size[0] if isinstance(output_size, (tuple, list)) else output_size
    res = adaptive_max_pool2d(ops.unsqueeze(input, -2), (1, o), return_indices)
    if return_indices:
        return ops.squeeze(res[0], -2), ops.squeeze(res[1], -2)
    return ops.squeeze(res, -2)
