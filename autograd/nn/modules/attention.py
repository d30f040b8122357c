"""Attention: MultiheadAttention and a pre-norm transformer block built from functional ops."""
from __future__ import annotations

from .. import functional as F
from .layers import Dropout, GELU, LayerNorm, Linear
from .module import Module

__all__ = ["MultiheadAttention", "TransformerBlock"]


class MultiheadAttention(Module):
    """Multi-head scaled dot-product attention (batch_first: inputs are (N, L, E)).

    ``forward(query, key, value, attn_mask=None, is_causal=False)`` returns
    ``(output, None)`` like PyTorch with ``need_weights=False``.
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 batch_first: bool = True, device=None, dtype=None):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim {embed_dim} must be divisible by "
                             f"num_heads {num_heads}")
        if not batch_first:
            raise NotImplementedError("MultiheadAttention: only batch_first=True is supported")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.in_proj = Linear(embed_dim, 3 * embed_dim, bias, device, dtype)
        self.out_proj = Linear(embed_dim, embed_dim, bias, device, dtype)

    def forward(self, query, key=None, value=None, attn_mask=None, is_causal: bool = False,
                need_weights: bool = False):
        key = query if key is None else key
        value = key if value is None else value
        n, lq, e = query.shape
        h = self.num_heads
        if query is key is value:
            q, k, v = self.in_proj(query).chunk(3, -1)
        else:
            w, b = self.in_proj.weight, self.in_proj.bias
            ws, bs = w.chunk(3, 0), (b.chunk(3, 0) if b is not None else (None,) * 3)
            q, k, v = (F.linear(t, wi, bi) for t, wi, bi in zip((query, key, value), ws, bs))

        def heads(t):
            return t.reshape(n, t.shape[1], h, e // h).transpose(1, 2)

        out = F.scaled_dot_product_attention(
            heads(q), heads(k), heads(v), attn_mask=attn_mask, is_causal=is_causal,
            dropout_p=self.dropout if self.training else 0.0)
        out = out.transpose(1, 2).reshape(n, lq, e)
        return self.out_proj(out), None

    def extra_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}"


class TransformerBlock(Module):
    """Pre-norm GPT block: ``x + attn(ln1(x))`` then ``x + mlp(ln2(x))``, causal."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: int = 4, dropout: float = 0.0,
                 device=None, dtype=None):
        super().__init__()
        self.ln1 = LayerNorm(dim, device=device, dtype=dtype)
        self.attn = MultiheadAttention(dim, num_heads, dropout, device=device, dtype=dtype)
        self.ln2 = LayerNorm(dim, device=device, dtype=dtype)
        self.fc = Linear(dim, mlp_ratio * dim, device=device, dtype=dtype)
        self.act = GELU(approximate="tanh")
        self.proj = Linear(mlp_ratio * dim, dim, device=device, dtype=dtype)
        self.drop = Dropout(dropout)

    def forward(self, x):
        x = x + self.drop(self.attn(self.ln1(x), is_causal=True)[0])
        return x + self.drop(self.proj(self.act(self.fc(self.ln2(x)))))
