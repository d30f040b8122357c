"""Layers: Linear, Conv2d, BatchNorm2d, LayerNorm, Embedding, Dropout, activations."""
from __future__ import annotations

import math

from ..._tensor import empty as _empty_t, ones as _ones, zeros as _zeros
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["Identity", "Linear", "Conv2d", "BatchNorm2d", "LayerNorm", "GroupNorm", "Embedding",
           "Dropout", "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "LeakyReLU", "Softmax",
           "Flatten", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "MSELoss", "CrossEntropyLoss"]


def _empty(shape, device, dtype):
    return Parameter(_empty_t(*shape, device=device, dtype=dtype))


def _conv_parameters(conv, name: str, in_channels: int, out_channels: int, groups: int,
                     kernel_size: tuple, bias: bool, device, dtype) -> None:
    """A convolution's weight (out, in/groups, *kernel) and bias, initialised as PyTorch's."""
    if in_channels % groups or out_channels % groups:
        raise ValueError(f"{name}: in_channels {in_channels} and out_channels "
                         f"{out_channels} must be divisible by groups={groups}")
    conv.weight = _empty((out_channels, in_channels // groups) + tuple(kernel_size), device, dtype)
    if bias:
        conv.bias = _empty((out_channels,), device, dtype)
    else:
        conv.register_parameter("bias", None)
    _reset_conv(conv)


def _reset_conv(conv) -> None:
    init.kaiming_uniform_(conv.weight, a=math.sqrt(5))
    if conv.bias is not None:
        fan_in = math.prod(conv.weight.shape[1:])     # in/groups * the kernel's size
        bound = 1 / math.sqrt(fan_in)
        init.uniform_(conv.bias, -bound, bound)


class Identity(Module):
    def forward(self, input):  # noqa: A002 - PyTorch's name (forward(input=x))
        return input


class Linear(Module):
    """``y = x W^T + b``; W is (out_features, in_features), initialized like PyTorch's."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = _empty((out_features, in_features), device, dtype)
        self.bias = _empty((out_features,), device, dtype) if bias else None
        if not bias:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):  # noqa: A002 - PyTorch's name (forward(input=x))
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Conv2d(Module):
    """2-D convolution layer over (N, C, H, W)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, device=None, dtype=None):
        super().__init__()
        k = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, k
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        _conv_parameters(self, "Conv2d", in_channels, out_channels, groups, k, bias, device, dtype)

    def reset_parameters(self) -> None:
        _reset_conv(self)

    def forward(self, input):  # noqa: A002 - PyTorch's name (forward(input=x))
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={_pair_repr(self.stride)}")
        if self.padding not in (0, (0, 0)):
            s += f", padding={_pair_repr(self.padding)}"
        if self.dilation not in (1, (1, 1)):
            s += f", dilation={_pair_repr(self.dilation)}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


def _pair_repr(v):
    return (v, v) if isinstance(v, int) else tuple(v)


class _NormBase(Module):
    def __init__(self, num_features, eps, momentum, affine, track_running_stats, device, dtype):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(_ones(num_features, device=device, dtype=dtype))
            self.bias = Parameter(_zeros(num_features, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", _zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", _ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", _zeros((), device=device, dtype="int64"))
        else:
            self.running_mean = self.running_var = None

    def forward(self, input):  # noqa: A002 - PyTorch's name (forward(input=x))
        self._check_input(input)
        use_batch = self.training or not self.track_running_stats
        if self.training and self.track_running_stats:
            self.num_batches_tracked._data += 1
        return F.batch_norm(input, self.running_mean if self.track_running_stats else None,
                            self.running_var if self.track_running_stats else None,
                            self.weight, self.bias, use_batch, self.momentum, self.eps)

    def _check_input(self, x):
        pass

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class BatchNorm2d(_NormBase):
    """Batch normalization over (N, C, H, W): batch statistics in training, running ones in
    eval."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)

    def _check_input(self, x):
        if x.ndim != 4:
            raise ValueError(f"BatchNorm2d: expected 4-D input (N, C, H, W), got shape "
                             f"{list(x.shape)}")


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device=None, dtype=None):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps = shape, eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(_ones(*shape, device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(_zeros(*shape, device=device, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input):  # noqa: A002 - PyTorch's name (forward(input=x))
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class GroupNorm(Module):
    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, device=None, dtype=None):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels {num_channels} must be divisible by "
                             f"num_groups {num_groups}")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        if affine:
            self.weight = Parameter(_ones(num_channels, device=device, dtype=dtype))
            self.bias = Parameter(_zeros(num_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input):  # noqa: A002 - PyTorch's name (forward(input=x))
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class Embedding(Module):
    """A lookup table of ``num_embeddings`` vectors; ``padding_idx``'s row stays zero and gets
    no gradient."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx=None, device=None,
                 dtype=None):
        super().__init__()
        if padding_idx is not None and not -num_embeddings <= padding_idx < num_embeddings:
            raise ValueError(f"Embedding: padding_idx {padding_idx} must be within "
                             f"num_embeddings {num_embeddings}")
        if padding_idx is not None and padding_idx < 0:
            padding_idx += num_embeddings
        self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, padding_idx
        self.weight = _empty((num_embeddings, embedding_dim), device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            self.weight._data[self.padding_idx] = 0

    def forward(self, input):  # noqa: A002 - PyTorch's name
        return F.embedding(input, self.weight, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")


class Dropout(Module):
    """Zero elements with probability ``p`` while training; identity in eval."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: probability has to be between 0 and 1, got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input):  # noqa: A002 - PyTorch's name (forward(input=x))
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class ReLU(Module):
    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):  # noqa: A002 - PyTorch's name (forward(input=x))
        return F.relu(input, self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class GELU(Module):
    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):  # noqa: A002 - PyTorch's name (forward(input=x))
        return F.gelu(input, self.approximate)

    def extra_repr(self):
        return f"approximate='{self.approximate}'"


class SiLU(Module):
    def forward(self, input):  # noqa: A002 - PyTorch's name (forward(input=x))
        return F.silu(input)


class Tanh(Module):
    def forward(self, input):  # noqa: A002 - PyTorch's name (forward(input=x))
        return F.tanh(input)


class Sigmoid(Module):
    def forward(self, input):  # noqa: A002 - PyTorch's name (forward(input=x))
        return F.sigmoid(input)


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):  # noqa: A002 - PyTorch's name (forward(input=x))
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class Softmax(Module):
    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, input):  # noqa: A002 - PyTorch's name (forward(input=x))
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Flatten(Module):
    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):  # noqa: A002 - PyTorch's name (forward(input=x))
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class MaxPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False):
        super().__init__()
        self.kernel_size, self.stride, self.padding, self.dilation = kernel_size, stride or kernel_size, padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):  # noqa: A002 - PyTorch's name (forward(input=x))
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}")


class AvgPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override=None):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride or kernel_size, padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):  # noqa: A002 - PyTorch's name (forward(input=x))
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):  # noqa: A002 - PyTorch's name (forward(input=x))
        return F.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class MSELoss(Module):
    def __init__(self, reduction: str = "mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input, target):  # noqa: A002
        return F.mse_loss(input, target, self.reduction)


class CrossEntropyLoss(Module):
    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean",
                 label_smoothing: float = 0.0):
        super().__init__()
        self.register_buffer("weight", weight)    # PyTorch's: a class weight is state
        self.ignore_index = ignore_index
        self.reduction, self.label_smoothing = reduction, label_smoothing

    def forward(self, input, target):  # noqa: A002
        return F.cross_entropy(input, target, self.weight, self.ignore_index, self.reduction,
                               self.label_smoothing)
