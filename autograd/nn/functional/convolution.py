"""``linear``, the convolutions (``conv1d``, ``conv2d``, ``conv_transpose2d``) and ``unfold``
(im2col).
"""
from __future__ import annotations

from ... import ops
from ...dispatch import TensorF, defcomposite
from ...ops import _call
from ...ops.nn import conv2d_input_grad, conv_out_size
from .helpers import _pair
from .vision import pad


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
