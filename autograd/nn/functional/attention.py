"""``scaled_dot_product_attention`` as PyTorch's math path: a composite of its primitives.
"""
from __future__ import annotations

import math

from ... import ops
from ...dispatch import defcomposite
from ...ops import _call, masked_fill
from ..._tensor import Tensor
from .dropouts import dropout


@defcomposite("scaled_dot_product_attention")
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale=None, generator=None):
    """``softmax(q k^T * scale + mask) v`` over (..., L, E) / (..., S, E) / (..., S, Ev).
    ``attn_mask``: bool (True = attend) or float (added); ``is_causal`` masks the future. A
    query whose mask hides every key gets zeros (and no gradient), as PyTorch's since 2.5."""
    if query.shape[-1] != key.shape[-1]:
        raise RuntimeError(f"scaled_dot_product_attention: query has head size "
                           f"{query.shape[-1]}, key has {key.shape[-1]} (shapes "
                           f"{list(query.shape)} and {list(key.shape)})")
    if key.shape[-2] != value.shape[-2]:
        raise RuntimeError(f"scaled_dot_product_attention: key has {key.shape[-2]} positions, "
                           f"value has {value.shape[-2]} (shapes {list(key.shape)} and "
                           f"{list(value.shape)})")
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    if attn_mask is None:   # scale, causal mask and softmax in one op
        attn = _call("scaled_softmax", query @ key.mT, scale=scale, causal=bool(is_causal))
        if dropout_p > 0.0:
            attn = dropout(attn, dropout_p, True, generator=generator)
        return attn @ value
    scores = (query * scale) @ key.mT
    L, S = query.shape[-2], key.shape[-2]
    xp = query.device.xp
    if is_causal:
        future = xp.triu(xp.ones((L, S), dtype=bool), 1)
        scores = masked_fill(scores, Tensor._make(future, False, None, 0, [0], query.device),
                             -math.inf)
    if attn_mask is not None:
        if attn_mask.dtype.kind == "b":
            scores = masked_fill(scores, ops.logical_not(attn_mask), -math.inf)
        else:
            scores = scores + attn_mask
    # PyTorch's safe softmax (since 2.5): a query whose mask hides every key gets zeros,
    # not NaN, so a padding row does not poison the loss and its gradients.
    attn = _call("_safe_softmax", scores, dim=scores.ndim - 1)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p, True, generator=generator)
    return attn @ value
