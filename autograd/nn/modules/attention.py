"""Attention: MultiheadAttention (PyTorch's parameters, layouts, masks and returned weights)
and a pre-norm GPT block built on it."""
from __future__ import annotations

import math

from ...ops import cat
from ..._tensor import Tensor, empty as _empty_t, zeros as _zeros
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .layers import Dropout, GELU, LayerNorm, Linear
from .module import Module

__all__ = ["MultiheadAttention", "TransformerBlock"]


class NonDynamicallyQuantizableLinear(Linear):
    """PyTorch's class of ``MultiheadAttention.out_proj``: a Linear (the name only keeps
    PyTorch's quantization from swapping it; kept so ``type(mha.out_proj).__name__`` and
    ``repr`` read as PyTorch's)."""


def _float_mask(mask, dtype, name: str):
    """PyTorch's ``_canonical_mask``: a bool mask (True = *not allowed*) as a float one with
    -inf there and 0 elsewhere; a float mask is returned as it is (added to the scores)."""
    if mask is None:
        return None
    if mask.dtype.kind == "b":
        return _zeros(*mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, -math.inf)
    if mask.dtype.kind != "f":
        raise AssertionError(f"only bool and floating types of {name} are supported")
    return mask


class MultiheadAttention(Module):
    """Multi-head attention as PyTorch's ``nn.MultiheadAttention``.

    Inputs are (L, N, E) (``batch_first=False``, the default), (N, L, E) with
    ``batch_first=True``, or unbatched (L, E). ``forward(query, key, value,
    key_padding_mask=None, need_weights=True, attn_mask=None, average_attn_weights=True,
    is_causal=False)`` returns ``(output, weights)``: the weights are (N, L, S) averaged over
    the heads, (N, H, L, S) with ``average_attn_weights=False``, None with
    ``need_weights=False``. Masks: bool True = *not allowed*, or float added to the scores;
    ``key_padding_mask`` is (N, S), ``attn_mask`` (L, S) or (N * num_heads, L, S).

    Parameters have PyTorch's names: ``in_proj_weight`` (3E, E) and ``in_proj_bias`` (3E),
    or ``q_proj_weight``/``k_proj_weight``/``v_proj_weight`` when ``kdim``/``vdim`` differ
    from ``embed_dim``; ``bias_k``/``bias_v`` with ``add_bias_kv``; ``out_proj``.
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim=None, vdim=None,
                 batch_first: bool = False, device=None, dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        if embed_dim % num_heads:
            raise AssertionError("embed_dim must be divisible by num_heads")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        kw = dict(device=device, dtype=dtype)

        def param(*shape):
            return Parameter(_empty_t(*shape, **kw))

        # Registered in PyTorch's order, so state_dict() lists the keys as PyTorch's does.
        if self._qkv_same_embed_dim:
            self.in_proj_weight = param(3 * embed_dim, embed_dim)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = param(embed_dim, embed_dim)
            self.k_proj_weight = param(embed_dim, self.kdim)
            self.v_proj_weight = param(embed_dim, self.vdim)
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = param(3 * embed_dim)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias, **kw)
        if add_bias_kv:
            self.bias_k = param(1, 1, embed_dim)
            self.bias_v = param(1, 1, embed_dim)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        # PyTorch's: Xavier-uniform projections, zero biases, Xavier-normal bias_k/bias_v.
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True,
                attn_mask=None, average_attn_weights: bool = True, is_causal: bool = False):
        batched = query.ndim == 3
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but "
                                 f"received {query.ndim}-D query tensor (key {key.ndim}-D, "
                                 f"value {value.ndim}-D)")
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use "
                               "the Transformer module method `generate_square_subsequent_mask` "
                               "to create this mask.")
        # Work batch-first, (N, L, E): one layout for the head reshapes below.
        if not batched:
            query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif not self.batch_first:
            same = query is key and key is value
            query = query.transpose(0, 1)
            key, value = (query, query) if same else (key.transpose(0, 1), value.transpose(0, 1))
        out, weights = self._attention(query, key, value, key_padding_mask, need_weights,
                                       attn_mask, average_attn_weights, is_causal)
        if not batched:
            return out.squeeze(0), (weights.squeeze(0) if weights is not None else None)
        if not self.batch_first:
            out = out.transpose(0, 1)
        return out, weights

    def _project(self, query, key, value):
        e = self.embed_dim
        b = self.in_proj_bias
        bq, bk, bv = b.chunk(3, 0) if b is not None else (None, None, None)
        if self._qkv_same_embed_dim:
            if query is key and key is value:   # self-attention: one product, split in three
                return F.linear(query, self.in_proj_weight, b).chunk(3, -1)
            wq, wk, wv = self.in_proj_weight.chunk(3, 0)
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        if key.shape[-1] != (self.kdim if not self._qkv_same_embed_dim else e):
            raise AssertionError(f"key's embedding dim {key.shape[-1]} does not match kdim "
                                 f"{self.kdim}")
        return F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)

    def _attention(self, query, key, value, key_padding_mask, need_weights, attn_mask,
                   average_attn_weights, is_causal):
        n, tgt_len, e = query.shape
        if e != self.embed_dim:
            raise AssertionError(f"was expecting embedding dimension of {self.embed_dim}, "
                                 f"but got {e}")
        h, hd = self.num_heads, self.head_dim
        q, k, v = self._project(query, key, value)
        # PyTorch's: the causal hint, with no padding mask and no weights to return, stands
        # for the mask (the fused causal softmax, no mask built); otherwise the mask is used.
        causal = is_causal and key_padding_mask is None and not need_weights
        attn_mask = None if causal else _float_mask(attn_mask, q.dtype, "attn_mask")
        key_padding_mask = _float_mask(key_padding_mask, q.dtype, "key_padding_mask")
        if attn_mask is not None:
            attn_mask = self._heads_mask(attn_mask, n, tgt_len, k.shape[1])
        if self.bias_k is not None:
            k = cat([k, self.bias_k.expand(n, 1, e)], 1)
            v = cat([v, self.bias_v.expand(n, 1, e)], 1)
            attn_mask = _pad_last(attn_mask)
            key_padding_mask = _pad_last(key_padding_mask)

        def heads(t):                                   # (N, S, E) -> (N, H, S, hd)
            return t.reshape(n, t.shape[1], h, hd).transpose(1, 2)

        q, k, v = heads(q), heads(k), heads(v)
        if self.add_zero_attn:
            k = cat([k, k.new_zeros((n, h, 1, hd))], 2)
            v = cat([v, v.new_zeros((n, h, 1, hd))], 2)
            attn_mask = _pad_last(attn_mask)
            key_padding_mask = _pad_last(key_padding_mask)
        src_len = k.shape[2]
        if key_padding_mask is not None:
            if tuple(key_padding_mask.shape) != (n, src_len):
                raise AssertionError(f"expecting key_padding_mask shape of {(n, src_len)}, but "
                                     f"got {tuple(key_padding_mask.shape)}")
            pad = key_padding_mask.reshape(n, 1, 1, src_len)
            attn_mask = pad if attn_mask is None else attn_mask + pad
        dropout_p = self.dropout if self.training else 0.0
        if not need_weights:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, causal)
            weights = None
        else:
            scores = (q * (1.0 / math.sqrt(hd))) @ k.mT
            if attn_mask is not None:
                scores = scores + attn_mask
            weights = F.softmax(scores, -1)
            if dropout_p > 0.0:
                weights = F.dropout(weights, dropout_p)
            out = weights @ v
            if average_attn_weights:
                weights = weights.mean(1)
        out = out.transpose(1, 2).reshape(n, tgt_len, e)
        return self.out_proj(out), weights

    def _heads_mask(self, mask, n, tgt_len, src_len):
        """attn_mask (L, S) or (N * H, L, S) as a mask broadcasting over (N, H, L, S)."""
        if mask.ndim == 2:
            if tuple(mask.shape) != (tgt_len, src_len):
                raise RuntimeError(f"The shape of the 2D attn_mask is {tuple(mask.shape)}, but "
                                   f"should be {(tgt_len, src_len)}.")
            return mask.reshape(1, 1, tgt_len, src_len)
        if mask.ndim == 3:
            want = (n * self.num_heads, tgt_len, src_len)
            if tuple(mask.shape) != want:
                raise RuntimeError(f"The shape of the 3D attn_mask is {tuple(mask.shape)}, but "
                                   f"should be {want}.")
            return mask.reshape(n, self.num_heads, tgt_len, src_len)
        raise RuntimeError(f"attn_mask's dimension {mask.ndim} is not supported")

    def extra_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}"


def _pad_last(mask):
    """A zero (attend) column after a mask's last axis, for the key ``add_bias_kv`` or
    ``add_zero_attn`` appends."""
    if mask is None:
        return None
    return cat([mask, mask.new_zeros(tuple(mask.shape[:-1]) + (1,))], -1)


class TransformerBlock(Module):
    """Pre-norm GPT block: ``x + attn(ln1(x))`` then ``x + mlp(ln2(x))``, causal, on
    batch-first (N, L, E) inputs."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: int = 4, dropout: float = 0.0,
                 device=None, dtype=None):
        super().__init__()
        self.ln1 = LayerNorm(dim, device=device, dtype=dtype)
        self.attn = MultiheadAttention(dim, num_heads, dropout, batch_first=True, device=device,
                                       dtype=dtype)
        self.ln2 = LayerNorm(dim, device=device, dtype=dtype)
        self.fc = Linear(dim, mlp_ratio * dim, device=device, dtype=dtype)
        self.act = GELU(approximate="tanh")
        self.proj = Linear(mlp_ratio * dim, dim, device=device, dtype=dtype)
        self.drop = Dropout(dropout)

    def forward(self, x):
        h = self.ln1(x)
        # The causal hint with need_weights=False takes the fused causal softmax; the mask is
        # what PyTorch requires alongside the hint.
        mask = _causal_mask(x.shape[-2], x.device)
        x = x + self.drop(self.attn(h, h, h, attn_mask=mask, need_weights=False,
                                    is_causal=True)[0])
        return x + self.drop(self.proj(self.act(self.fc(self.ln2(x)))))


def _causal_mask(size: int, device):
    """A bool (size, size) mask, True above the diagonal (the future, not allowed)."""
    xp = device.xp
    return Tensor._make(xp.triu(xp.ones((size, size), dtype=bool), 1), False, None, 0, [0],
                        device)
