"""``autograd.nn.functional``: the layers as functions.

A few are primitives (linear, conv2d, softmax, log_softmax, embedding; see autograd/ops/nn.py
for why); the rest are composites of primitives, each one FUNCTION range under the profiler.
Shape errors name the function, the argument and both shapes.

One module per topic, as PyTorch's documentation groups them: ``activation``, ``convolution``
(with ``linear`` and ``unfold``), ``pooling``, ``normalization``, ``dropouts``, ``sparse``
(``embedding``, ``one_hot``), ``loss``, ``attention`` and ``vision`` (padding, resizing, pixel
shuffles); ``helpers`` holds what several of them use. This module gathers their names, so
that ``F.<name>`` is what it has always been.
"""
from __future__ import annotations

# torch has these at the top level too: one definition each, in autograd/ops.
from ...ops import cat, erf, gelu, masked_fill, sigmoid, silu, softplus, where  # noqa: F401
from ...ops.products import cosine_similarity, pairwise_distance, pdist
from .activation import (celu, celu_, elu, elu_, glu, hardshrink, hardsigmoid, hardswish, hardtanh,
                         hardtanh_, leaky_relu, leaky_relu_, log_softmax, logsigmoid, mish, prelu,
                         relu, relu6, relu_, rrelu, rrelu_, selu, selu_, softmax, softmin,
                         softshrink, softsign, tanh, tanhshrink, threshold, threshold_)
from .attention import scaled_dot_product_attention
from .convolution import conv1d, conv2d, conv_transpose2d, linear, unfold
from .dropouts import dropout
from .loss import (binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy,
                   huber_loss, kl_div, l1_loss, mse_loss, nll_loss, smooth_l1_loss,
                   soft_margin_loss)
from .normalization import batch_norm, group_norm, instance_norm, layer_norm, normalize
from .pooling import (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_max_pool1d, adaptive_max_pool2d, avg_pool1d,
                      avg_pool2d, max_pool1d, max_pool2d)
from .sparse import embedding, one_hot
from .vision import interpolate, pad, pixel_shuffle, pixel_unshuffle, upsample
# Helpers the nn modules call as F._name (Softmax's implicit dim, the losses' legacy arguments).
from .activation import _softmax_dim  # noqa: F401
from .loss import _legacy_reduction  # noqa: F401

__all__ = [
    "linear", "conv1d", "conv2d", "conv_transpose2d", "max_pool2d", "avg_pool2d",
    "adaptive_avg_pool2d", "batch_norm", "layer_norm", "group_norm", "dropout", "embedding",
    "softmax", "log_softmax", "cross_entropy", "nll_loss", "mse_loss", "l1_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "scaled_dot_product_attention",
    "relu", "gelu", "silu", "sigmoid", "tanh", "leaky_relu", "softplus", "pad", "one_hot",
    "elu", "selu", "celu", "rrelu", "rrelu_", "relu6", "hardtanh", "hardtanh_", "threshold",
    "threshold_", "relu_", "elu_", "selu_", "celu_", "leaky_relu_", "hardshrink", "softshrink",
    "tanhshrink", "prelu", "hardsigmoid", "hardswish", "mish", "logsigmoid", "softsign",
    "softmin", "glu", "normalize", "cosine_similarity", "pairwise_distance", "pdist",
    "interpolate", "upsample", "pixel_shuffle", "pixel_unshuffle", "unfold", "max_pool1d",
    "avg_pool1d", "adaptive_max_pool2d", "adaptive_max_pool1d", "adaptive_avg_pool1d", "instance_norm",
    "smooth_l1_loss", "huber_loss", "kl_div", "soft_margin_loss",
]
