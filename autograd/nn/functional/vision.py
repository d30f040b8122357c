"""Padding (constant, reflect, replicate, circular), resizing (``interpolate``, ``upsample``)
and ``pixel_shuffle``/``pixel_unshuffle``.
"""
from __future__ import annotations

import math

import numpy

from ... import ops
from ...dispatch import defcomposite
from .helpers import _const, _int_like


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
