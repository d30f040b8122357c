"""conv2d's forward and array backward, on the arrays of either backend (``xp``).

The op itself (checks, node, differentiable rules) is ``conv2d`` in ``nn.py``; these are the
kernels its forward and its ``joint`` (the backward on arrays) run. Both are im2col + GEMM:

- **Cache blocking.** The im2col buffer of a whole batch is kH*kW times the input (42 MB for
  the MNIST example's second conv), written once and read back by the GEMM from memory. On
  the CPU the batch goes through in chunks whose buffer stays in cache (a few hundred KB),
  each chunk's GEMM writing straight into its rows of the output: 25% less time for that
  conv. A GPU takes the batch in one chunk (one launch per step of the loop, not N).
- **Gradient of the input, stride 1.** col2im adds kH*kW shifted windows back; with the
  gradient's rows padded to the input's width, each window is one contiguous run of the
  flattened image instead of Ho runs of Wo, so each add is one long ufunc loop (2x faster
  at 24x24 windows). The padding columns are zeros and add nothing where they wrap.
"""
from __future__ import annotations

import numpy

from ..backend import matmul
from .shape import _pad_fwd

# Bytes of im2col buffer per chunk on the CPU: within a core's L2 with room for the GEMM's
# other operands (a chunk of 2-3 samples of a 32-channel 26x26 input: 14 ms against 19 ms
# for the whole batch at once, same GEMMs).
CHUNK_BYTES = 2 << 20


def pads(padding):
    """F.pad's order (left, right, top, bottom) for conv2d's (pad_h, pad_w)."""
    ph, pw = padding
    return (pw, pw, ph, ph)


def chunk_size(xp, batch: int, per_sample_bytes: int) -> int:
    """Samples per chunk: the whole batch on a GPU, a cache-sized block on the CPU."""
    if xp is not numpy or per_sample_bytes <= 0:
        return max(batch, 1)
    return max(1, min(batch, CHUNK_BYTES // per_sample_bytes))


def im2col(xp, x, kernel, stride, dilation):
    """(N, C, H, W) -> (N, C, kh, kw, Ho, Wo): every kernel tap's strided view, copied once."""
    n, c, h, w = x.shape
    kh, kw = kernel
    ho = (h - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (w - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    sn, sc, sh, sw = x.strides
    view = xp.lib.stride_tricks.as_strided(
        x, (n, c, kh, kw, ho, wo),
        (sn, sc, sh * dilation[0], sw * dilation[1], sh * stride[0], sw * stride[1]))
    return xp.ascontiguousarray(view)


def col2im(xp, cols, shape, kernel, stride, dilation):
    """The adjoint of im2col: each tap's values added back at the positions it read."""
    out = xp.zeros(shape, dtype=cols.dtype)
    kh, kw = kernel
    ho, wo = cols.shape[-2:]
    for i in range(kh):
        r = i * dilation[0]
        for j in range(kw):
            c = j * dilation[1]
            out[:, :, r:r + stride[0] * (ho - 1) + 1:stride[0],
                c:c + stride[1] * (wo - 1) + 1:stride[1]] += cols[:, :, i, j]
    return out


def forward(xp, x, weight, bias, stride, padding, dilation, groups):
    """conv2d: per chunk of samples, im2col then one batched GEMM into the output's rows."""
    if padding != (0, 0):
        x = _pad_fwd(xp, x, pads(padding))
    n = x.shape[0]
    o, cg, kh, kw = weight.shape
    k = cg * kh * kw
    ho = (x.shape[2] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (x.shape[3] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    wm = weight.reshape(groups, o // groups, k)
    out = xp.empty((n, o, ho, wo), dtype=xp.result_type(x, weight))
    step = chunk_size(xp, n, groups * k * ho * wo * x.itemsize)
    for s in range(0, n, step):
        cols = im2col(xp, x[s:s + step], (kh, kw), stride, dilation)
        b = cols.shape[0]
        matmul(xp, wm, cols.reshape(b, groups, k, ho * wo),
               out=out[s:s + b].reshape(b, groups, o // groups, ho * wo))
    if bias is not None:
        out += bias.reshape(1, o, 1, 1)
    return out


def weight_grad(xp, g, x, weight_shape, stride, padding, dilation, groups):
    """dL/dweight: the sum over samples of g_n @ cols_n^T, im2col recomputed per chunk."""
    if padding != (0, 0):
        x = _pad_fwd(xp, x, pads(padding))
    n, o, ho, wo = g.shape
    _, cg, kh, kw = weight_shape
    k = cg * kh * kw
    gm = g.reshape(n, groups, o // groups, ho * wo)
    gw = None
    step = chunk_size(xp, n, groups * k * ho * wo * x.itemsize)
    for s in range(0, n, step):
        cols = im2col(xp, x[s:s + step], (kh, kw), stride, dilation)
        b = cols.shape[0]
        cols = cols.reshape(b, groups, k, ho * wo)
        part = matmul(xp, gm[s:s + b], cols.transpose(0, 1, 3, 2))
        part = part[0] if b == 1 else part.sum(0)
        gw = part if gw is None else xp.add(gw, part, out=gw)
    return gw.reshape(weight_shape)


def input_grad(xp, g, weight, x_shape, stride, padding, dilation, groups):
    """dL/dinput: cols = W^T g per chunk, then col2im (contiguous runs at stride 1)."""
    n, o, ho, wo = g.shape
    _, cg, kh, kw = weight.shape
    c, k = cg * groups, cg * kh * kw
    ph, pw = padding
    hp, wp = x_shape[2] + 2 * ph, x_shape[3] + 2 * pw
    wt = weight.reshape(groups, o // groups, k).transpose(0, 2, 1)
    dtype = xp.result_type(g, weight)
    gm = g.reshape(n, groups, o // groups, ho, wo)
    dx = xp.empty((n, c, hp, wp), dtype=dtype)
    wide = stride == (1, 1)
    # The flattened run each tap covers: (Ho - 1) full padded rows and the last row's Wo.
    run = (ho - 1) * wp + wo
    step = chunk_size(xp, n, groups * k * (ho * wp if wide else ho * wo) * dtype.itemsize)
    for s in range(0, n, step):
        b = min(step, n - s)
        if not wide:
            cols = matmul(xp, wt, gm[s:s + b].reshape(b, groups, o // groups, ho * wo))
            dx[s:s + b] = col2im(xp, cols.reshape(b, c, kh, kw, ho, wo), (b, c, hp, wp),
                                 (kh, kw), stride, dilation)
            continue
        g_wide = xp.zeros((b, groups, o // groups, ho, wp), dtype=g.dtype)
        g_wide[..., :wo] = gm[s:s + b]
        g_wide = g_wide.reshape(b, groups, o // groups, ho * wp)[..., :run]
        cols = matmul(xp, wt, g_wide).reshape(b, c, kh, kw, run)
        flat = dx[s:s + b].reshape(b, c, hp * wp)
        flat[:, :, :run] = cols[:, :, 0, 0]   # the first tap starts at 0: set, not added
        flat[:, :, run:] = 0
        for i in range(kh):
            for j in range(kw):
                at = i * dilation[0] * wp + j * dilation[1]
                if at:
                    flat[:, :, at:at + run] += cols[:, :, i, j]
    if padding != (0, 0):
        dx = dx[:, :, ph:ph + x_shape[2], pw:pw + x_shape[3]]
    return dx
