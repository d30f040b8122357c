"""Max, average and adaptive pooling in one and two dims.
"""
from __future__ import annotations

import numpy

from ... import ops
from ...dispatch import defcomposite
from ...ops import _call
from ..._tensor import Tensor
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
