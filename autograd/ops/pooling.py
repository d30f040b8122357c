"""max_pool2d as PyTorch's ``max_pool2d_with_indices``, and avg_pool2d: one op, one node each.

NOTE: a primitive for PyTorch's names in a profile: as a composite (pad, im2col, max over the
window) max_pool2d showed ``im2col`` and ``max`` ranges and a MaxBackward0 node where a
PyTorch user sees ``aten::max_pool2d`` > ``aten::max_pool2d_with_indices`` and
MaxPool2DWithIndicesBackward0. The forward runs over the kernel's taps (strided views, no
window copy); the backward sends each output's gradient to its arg-max, PyTorch's indices
(offsets into the flattened, unpadded H*W plane), summed where windows overlap.
"""
from __future__ import annotations

import numpy

from .. import backend
from ..dispatch import defop, linear_in
from .indexing import along_dim_key
from .nn import _col2im_fwd, _im2col_fwd


def _lowest(dtype):
    """The padding value no real entry loses to: -inf, or an integer type's minimum."""
    return -numpy.inf if dtype.kind in "fc" else numpy.iinfo(dtype).min


def _tap(x, jh, jw, out_hw, stride, dilation):
    """The strided view of ``x`` that kernel tap (jh, jw) reads in every window, (N, C, Ho, Wo)."""
    (ho, wo), (sh, sw), (dh, dw) = out_hw, stride, dilation
    return x[:, :, jh * dh:jh * dh + (ho - 1) * sh + 1:sh, jw * dw:jw * dw + (wo - 1) * sw + 1:sw]


def _max_pool2d_fwd(xp, x, kernel, stride, padding, dilation, extra=(0, 0)):
    """(values, indices) of (N, C, H, W) ``x``: ``padding`` on each side (and ``extra`` more
    on the bottom and right, for ceil_mode's last window) at the dtype's lowest value.

    NOTE: one pass per kernel tap over its strided view, carrying the running max and the
    winning tap, where an im2col copy of the windows then an argmax over them took ~6x as
    long (NumPy's argmax over a short axis is a call per window). The winning tap is chosen
    branch-free (k += upd * (j - k)); a masked assignment mispredicts on random data.
    """
    n, c, h, w = x.shape
    (ph, pw), (eh, ew) = padding, extra
    if ph or pw or eh or ew:
        padded = xp.full((n, c, h + 2 * ph + eh, w + 2 * pw + ew), _lowest(x.dtype), x.dtype)
        padded[:, :, ph:ph + h, pw:pw + w] = x
        x = padded
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    out_hw = ((x.shape[2] - dh * (kh - 1) - 1) // sh + 1,
              (x.shape[3] - dw * (kw - 1) - 1) // sw + 1)
    # On a GPU the NaN-aware rule always (two more cheap kernels, where testing for a NaN
    # first would be a host sync per call).
    nan_aware = x.dtype.kind == "f" and xp is not numpy
    values, tap = _running_max(xp, x, kernel, out_hw, stride, dilation, nan_aware)
    if x.dtype.kind == "f" and not nan_aware and numpy.isnan(values).any():
        # A NaN wins its window (maximum carries it) but ">" never picks it: redo the taps
        # with the NaN-aware rule, so that the index is the window's last NaN, as PyTorch's.
        values, tap = _running_max(xp, x, kernel, out_hw, stride, dilation, nan_aware=True)
    ho, wo = out_hw
    # An output's index is its window's top-left corner in the unpadded plane, plus the tap.
    corner = ((xp.arange(ho, dtype=numpy.int64) * sh - ph).reshape(ho, 1) * w
              + (xp.arange(wo, dtype=numpy.int64) * sw - pw).reshape(1, wo))
    offsets = xp.asarray([jh * dh * w + jw * dw for jh in range(kh) for jw in range(kw)],
                         dtype=numpy.int64)
    indices = offsets.take(tap)
    indices += corner
    return values, indices


def _running_max(xp, x, kernel, out_hw, stride, dilation, nan_aware):
    """The max over each window and the (row-major) number of the tap PyTorch's kernel
    picks there: the first of tied maxima, the last NaN (``nan_aware``)."""
    kh, kw = kernel
    values = _tap(x, 0, 0, out_hw, stride, dilation).copy()
    tap_type = numpy.min_scalar_type(kh * kw - 1)
    tap = xp.zeros(values.shape, dtype=tap_type)
    upd = xp.empty(values.shape, dtype=bool)
    step = xp.empty(values.shape, dtype=tap_type)
    for j in range(1, kh * kw):
        xj = _tap(x, j // kw, j % kw, out_hw, stride, dilation)
        if nan_aware:   # PyTorch's CPU kernel: take xj when it is larger or NaN
            upd = (xj > values) | (xj != xj)
        else:
            xp.greater(xj, values, out=upd)
        xp.maximum(values, xj, out=values)
        xp.subtract(tap_type.type(j), tap, out=step)
        xp.multiply(step, upd, out=step)
        tap += step
    return values, tap


def _overlapping(kernel, stride, dilation) -> bool:
    """Can two windows pick the same input entry?"""
    return any(s < d * (k - 1) + 1 for k, s, d in zip(kernel, stride, dilation))


def _max_pool2d_backward_fwd(xp, grad, indices, shape, overlap=True):
    """``grad`` (N, C, Ho, Wo) sent to input positions ``indices``, of an input of ``shape``:
    PyTorch's max_pool2d_with_indices_backward."""
    n, c, h, w = shape
    flat_idx = indices.reshape(n, c, -1)
    g = grad.reshape(n, c, -1)
    if not overlap:   # each input entry is some window's arg-max at most once: an assignment
        z = xp.zeros((n, c, h * w), dtype=grad.dtype)
        z[along_dim_key(xp, flat_idx, 2)] = g
        return z.reshape(shape)
    if xp is numpy and grad.dtype.kind == "f":
        # One bincount over the planes (numpy.add.at is an unbuffered loop, ~50x slower).
        planes = numpy.arange(n * c, dtype=numpy.int64).reshape(n, c, 1) * (h * w)
        z = numpy.bincount((flat_idx + planes).ravel(), weights=g.ravel(),
                           minlength=n * c * h * w)
        return z.astype(grad.dtype, copy=False).reshape(shape)
    z = xp.zeros((n, c, h * w), dtype=grad.dtype)
    backend.scatter_add(xp, z, along_dim_key(xp, flat_idx, 2), g)
    return z.reshape(shape)


def _take_at(F, t, indices, shape):
    """The entries of ``t`` (an input-shaped tensor, (N, C, H, W) or (C, H, W)) at ``indices``:
    the pooling's values of a tangent, and the backward's own adjoint."""
    lead, (h, w) = tuple(shape[:-2]), shape[-2:]
    ho, wo = indices.shape[-2:]
    flat = F.reshape(t, shape=lead + (h * w,))
    picked = F.gather(flat, F.reshape(indices, shape=lead + (ho * wo,)), dim=len(lead))
    return F.reshape(picked, shape=lead + (ho, wo))


def _max_pool2d_vjp(F, g, out, x, kernel, stride, padding, dilation, extra=(0, 0)):
    return F.max_pool2d_with_indices_backward(
        g[0], out[1], shape=tuple(x.shape), overlap=_overlapping(kernel, stride, dilation))


def _max_pool2d_jvp(F, t, out, x, kernel, stride, padding, dilation, extra=(0, 0)):
    return _take_at(F, t, out[1], tuple(x.shape)), None


defop("max_pool2d_with_indices", _max_pool2d_fwd, (_max_pool2d_vjp,), jvp=(_max_pool2d_jvp,),
      nout=2, meta=(0,), node_name="MaxPool2DWithIndicesBackward0")
# Linear in grad; the indices are constants.
defop("max_pool2d_with_indices_backward", _max_pool2d_backward_fwd,
      (lambda F, g, out, grad, indices, shape, overlap=True: _take_at(F, g, indices, shape),
       None),
      jvp=(lambda F, t, out, grad, indices, shape, overlap=True: F.max_pool2d_with_indices_backward(
          t, indices, shape=shape, overlap=overlap), None),
      node_name="MaxPool2DWithIndicesBackwardBackward0")


# --------------------------------------------------------------------------- avg_pool2d
# NOTE: a primitive for PyTorch's names too: ``aten::avg_pool2d`` with one AvgPool2DBackward0
# node, where the composite (pad, im2col, sum, a divide by the window counts) showed those
# ops and a DivBackward0. Linear in the input: its backward spreads each output's gradient
# over its window (col2im), and that op's own adjoint is the pooling again.


def _window_counts(xp, n_out, size, k, s, p, include_pad):
    """How many entries of each window along one dim count in its divisor: the window
    clipped to the zero-padded input (``include_pad``) or to the input itself; never the
    overhang that ceil_mode's last window reaches past the padding."""
    starts = xp.arange(n_out) * s - p
    lo, hi = (-p, size + p) if include_pad else (0, size)
    return xp.maximum(xp.minimum(starts + k, hi) - xp.maximum(starts, lo), 0)


def _avg_divisor(xp, shape, out_hw, kernel, stride, padding, count_include_pad,
                 divisor_override, dtype):
    if divisor_override is not None:
        return dtype.type(divisor_override)
    rows = _window_counts(xp, out_hw[0], shape[2], kernel[0], stride[0], padding[0],
                          count_include_pad)
    cols = _window_counts(xp, out_hw[1], shape[3], kernel[1], stride[1], padding[1],
                          count_include_pad)
    return (rows.reshape(-1, 1) * cols.reshape(1, -1)).astype(dtype)


def _zero_padded(xp, x, padding, extra):
    n, c, h, w = x.shape
    (ph, pw), (eh, ew) = padding, extra
    if not (ph or pw or eh or ew):
        return x
    padded = xp.zeros((n, c, h + 2 * ph + eh, w + 2 * pw + ew), x.dtype)
    padded[:, :, ph:ph + h, pw:pw + w] = x
    return padded


def _avg_pool2d_fwd(xp, x, kernel, stride, padding, extra=(0, 0), count_include_pad=True,
                    divisor_override=None):
    cols = _im2col_fwd(xp, _zero_padded(xp, x, padding, extra), kernel, stride, (1, 1))
    sums = cols.sum(axis=(2, 3))
    return sums / _avg_divisor(xp, x.shape, sums.shape[2:], kernel, stride, padding,
                               count_include_pad, divisor_override, sums.dtype)


def _avg_pool2d_backward_fwd(xp, grad, shape, kernel, stride, padding, extra=(0, 0),
                             count_include_pad=True, divisor_override=None):
    """PyTorch's avg_pool2d_backward: each output's gradient over its divisor, added to every
    input entry of its window (the padding's share dropped)."""
    n, c, h, w = shape
    (ph, pw), (eh, ew) = padding, extra
    d = grad / _avg_divisor(xp, shape, grad.shape[2:], kernel, stride, padding,
                            count_include_pad, divisor_override, grad.dtype)
    cols = xp.broadcast_to(d[:, :, None, None], d.shape[:2] + tuple(kernel) + d.shape[2:])
    z = _col2im_fwd(xp, cols, (n, c, h + 2 * ph + eh, w + 2 * pw + ew), kernel, stride, (1, 1))
    return xp.ascontiguousarray(z[:, :, ph:ph + h, pw:pw + w])


defop("avg_pool2d", _avg_pool2d_fwd,
      (lambda F, g, out, x, kernel, stride, padding, extra=(0, 0), count_include_pad=True,
       divisor_override=None: F.avg_pool2d_backward(
           g, shape=tuple(x.shape), kernel=kernel, stride=stride, padding=padding, extra=extra,
           count_include_pad=count_include_pad, divisor_override=divisor_override),),
      jvp=linear_in(0), meta=(0,), node_name="AvgPool2DBackward0")
defop("avg_pool2d_backward", _avg_pool2d_backward_fwd,
      (lambda F, g, out, grad, shape, kernel, stride, padding, extra=(0, 0),
       count_include_pad=True, divisor_override=None: F.avg_pool2d(
           g, kernel=kernel, stride=stride, padding=padding, extra=extra,
           count_include_pad=count_include_pad, divisor_override=divisor_override),),
      jvp=linear_in(0), node_name="AvgPool2DBackwardBackward0")


# --------------------------------------------------------------------------- adaptive pooling
# NOTE: primitives for PyTorch's names: ``aten::adaptive_avg_pool2d`` > ``aten::_adaptive_avg_pool2d``
# with AdaptiveAvgPool2DBackward0, and ``aten::adaptive_max_pool2d`` with
# AdaptiveMaxPool2DBackward0, where the composites (a mean or amax per window, then two
# stacks) showed ``stack`` ranges and a StackBackward0 node, and made 2·Ho·Wo nodes per call.
# PyTorch's windows: output i of n over a size s covers [floor(i·s/n), ceil((i+1)·s/n)), so
# neighbouring windows overlap when n does not divide s. Inputs are (..., H, W).


def _adaptive_windows(size: int, out: int) -> list[tuple[int, int]]:
    return [((i * size) // out, -((-(i + 1) * size) // out)) for i in range(out)]


def _adaptive_avg_pool2d_fwd(xp, x, output_size):
    """The mean of each window: a mean over each row band (Ho slices), then over each column
    band of that (Wo slices). The windows are products of a row and a column range, so the
    two means are the window's mean; unlike a matmul by averaging weights, an inf or NaN stays
    in the windows that hold it."""
    oh, ow = output_size
    rows = xp.stack([x[..., h0:h1, :].mean(axis=-2) for h0, h1 in _adaptive_windows(x.shape[-2], oh)], axis=-2)
    return xp.stack([rows[..., w0:w1].mean(axis=-1) for w0, w1 in _adaptive_windows(x.shape[-1], ow)], axis=-1)


def _adaptive_avg_pool2d_backward_fwd(xp, grad, shape):
    """PyTorch's _adaptive_avg_pool2d_backward: each output's gradient over its window's size,
    added to every entry of the window (the two bands in turn, as the forward)."""
    h, w = shape[-2:]
    oh, ow = grad.shape[-2:]
    cols = xp.zeros(grad.shape[:-1] + (w,), dtype=grad.dtype)
    for j, (w0, w1) in enumerate(_adaptive_windows(w, ow)):
        cols[..., w0:w1] += grad[..., j:j + 1] / (w1 - w0)
    out = xp.zeros(tuple(shape), dtype=grad.dtype)
    for i, (h0, h1) in enumerate(_adaptive_windows(h, oh)):
        out[..., h0:h1, :] += cols[..., i:i + 1, :] / (h1 - h0)
    return out


defop("_adaptive_avg_pool2d", _adaptive_avg_pool2d_fwd,
      (lambda F, g, out, x, output_size: F._adaptive_avg_pool2d_backward(g, shape=tuple(x.shape)),),
      jvp=linear_in(0), meta=(0,), node_name="AdaptiveAvgPool2DBackward0")
defop("_adaptive_avg_pool2d_backward", _adaptive_avg_pool2d_backward_fwd,
      (lambda F, g, out, grad, shape: F._adaptive_avg_pool2d(g, output_size=tuple(grad.shape[-2:])),),
      jvp=linear_in(0), node_name="AdaptiveAvgPool2DBackwardBackward0")


def _adaptive_max_pool2d_fwd(xp, x, output_size):
    """(values, indices) of (N, C, H, W) or (C, H, W) ``x``: each window's max and its offset
    in the H*W plane; of tied maxima the first, of NaNs the last (PyTorch's CPU kernel takes an
    entry when it is larger or NaN)."""
    if x.ndim == 3:
        values, indices = _adaptive_max_pool2d_fwd(xp, x[None], output_size)
        return values[0], indices[0]
    n, c, h, w = x.shape
    oh, ow = output_size
    values = xp.empty((n, c, oh, ow), dtype=x.dtype)
    indices = xp.empty((n, c, oh, ow), dtype=numpy.int64)
    for i, (h0, h1) in enumerate(_adaptive_windows(h, oh)):
        for j, (w0, w1) in enumerate(_adaptive_windows(w, ow)):
            win = x[:, :, h0:h1, w0:w1].reshape(n, c, -1)
            arg = win.argmax(axis=-1)
            if x.dtype.kind == "f":
                nan = xp.isnan(win)
                last_nan = win.shape[-1] - 1 - nan[..., ::-1].argmax(axis=-1)
                arg = xp.where(nan.any(axis=-1), last_nan, arg)
            values[:, :, i, j] = xp.take_along_axis(win, arg[..., None], axis=-1)[..., 0]
            indices[:, :, i, j] = (h0 + arg // (w1 - w0)) * w + w0 + arg % (w1 - w0)
    return values, indices


def _adaptive_max_pool2d_vjp(F, g, out, x, output_size):
    h, w = x.shape[-2:]
    oh, ow = output_size
    return F.adaptive_max_pool2d_backward(g[0], out[1], shape=tuple(x.shape),
                                          overlap=h % oh != 0 or w % ow != 0)


defop("adaptive_max_pool2d", _adaptive_max_pool2d_fwd, (_adaptive_max_pool2d_vjp,),
      jvp=(lambda F, t, out, x, output_size: (_take_at(F, t, out[1], tuple(x.shape)), None),),
      nout=2, meta=(0,), node_name="AdaptiveMaxPool2DBackward0")
def _adaptive_max_pool2d_backward_fwd(xp, grad, indices, shape, overlap=True):
    """max_pool2d's backward (the gradient sent to the indices), of a 4-D or 3-D input."""
    if len(shape) == 3:
        return _max_pool2d_backward_fwd(xp, grad[None], indices[None], (1,) + tuple(shape), overlap)[0]
    return _max_pool2d_backward_fwd(xp, grad, indices, shape, overlap)


defop("adaptive_max_pool2d_backward", _adaptive_max_pool2d_backward_fwd,
      (lambda F, g, out, grad, indices, shape, overlap=True: _take_at(F, g, indices, shape), None),
      jvp=(lambda F, t, out, grad, indices, shape, overlap=True: F.adaptive_max_pool2d_backward(
          t, indices, shape=shape, overlap=overlap), None),
      node_name="AdaptiveMaxPool2DBackwardBackward0")
