"""TransformerEncoderLayer and TransformerEncoder with PyTorch's arguments and attribute
names (self_attn, linear1, dropout, linear2, norm1, norm2, dropout1, dropout2), built on
MultiheadAttention; the backward comes from the ops they use."""
from __future__ import annotations

import copy

from ...ops import logical_not
from .. import functional as F
from .attention import MultiheadAttention
from .layers import Dropout, LayerNorm, Linear
from .module import Module, ModuleList

__all__ = ["TransformerEncoderLayer", "TransformerEncoder"]

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


def _attend_mask(src_mask, src_key_padding_mask, dtype):
    """PyTorch's masks (bool True = *masked*, or float added) as one mask for
    scaled_dot_product_attention (bool True = *attend*, or float added), shaped to broadcast
    over (N, heads, L, S)."""
    def attend(m):
        return logical_not(m) if m.dtype.kind == "b" else m

    mask = None if src_mask is None else attend(src_mask)
    if src_key_padding_mask is not None:
        pad = attend(src_key_padding_mask)        # (N, S) -> (N, 1, 1, S)
        pad = pad.reshape(pad.shape[0], 1, 1, pad.shape[1])
        if mask is None:
            mask = pad
        elif mask.dtype.kind == "b" and pad.dtype.kind == "b":
            mask = mask & pad if hasattr(mask, "__and__") else mask.logical_and(pad)
        else:
            to_float = (lambda m: m if m.dtype.kind != "b" else
                        F.masked_fill(m.to(dtype=dtype) * 0.0, logical_not(m), float("-inf")))
            mask = to_float(mask) + to_float(pad)
    return mask


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward block, each with a residual connection and a
    LayerNorm: after the residual (``norm_first=False``, the original) or before the block
    (``norm_first=True``, pre-norm)."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation="relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device=None, dtype=None):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first=True, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias, **kw)
        self.norm1 = LayerNorm(d_model, layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.batch_first, self.norm_first = batch_first, norm_first
        if isinstance(activation, str):
            if activation not in _ACTIVATIONS:
                raise RuntimeError(f"TransformerEncoderLayer: activation should be relu/gelu, "
                                   f"not {activation}")
            activation = _ACTIVATIONS[activation]
        self.activation = activation

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal: bool = False):
        x = src if self.batch_first or src.ndim == 2 else src.transpose(0, 1)
        unbatched = x.ndim == 2
        if unbatched:
            x = x.unsqueeze(0)
            if src_key_padding_mask is not None:
                src_key_padding_mask = src_key_padding_mask.unsqueeze(0)
        mask = _attend_mask(src_mask, src_key_padding_mask, x.dtype)
        causal = is_causal and mask is None
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), mask, causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, mask, causal))
            x = self.norm2(x + self._ff_block(x))
        if unbatched:
            return x.squeeze(0)
        return x if self.batch_first else x.transpose(0, 1)

    def _sa_block(self, x, mask, is_causal):
        out = self.self_attn(x, x, x, attn_mask=mask, is_causal=is_causal)[0]
        return self.dropout1(out)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """``num_layers`` deep copies of ``encoder_layer``, then an optional final ``norm``."""

    def __init__(self, encoder_layer, num_layers: int, norm=None,
                 enable_nested_tensor: bool = True, mask_check: bool = True):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                        is_causal=bool(is_causal))
        return self.norm(out) if self.norm is not None else out
