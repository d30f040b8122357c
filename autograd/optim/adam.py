"""Adam and AdamW (decoupled weight decay), with PyTorch's bias correction and amsgrad."""
from __future__ import annotations

import math

from .optimizer import Optimizer, square_average_

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """``m = b1 m + (1-b1) g``, ``v = b2 v + (1-b2) g^2``,
    ``p -= lr * m_hat / (sqrt(v_hat) + eps)``; weight decay is added to ``g`` (L2)."""

    _decoupled = False

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, maximize: bool = False):
        if lr < 0.0 or eps < 0.0 or weight_decay < 0.0:
            raise ValueError(f"{type(self).__name__}: invalid lr {lr}, eps {eps} or "
                             f"weight_decay {weight_decay}")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"{type(self).__name__}: invalid betas {betas}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize))

    def _step_group(self, group):
        lr, (b1, b2), eps = group["lr"], group["betas"], group["eps"]
        amsgrad = group["amsgrad"]
        def init_state(p, xp):
            st = {"exp_avg": xp.zeros_like(p._data), "exp_avg_sq": xp.zeros_like(p._data)}
            if amsgrad:
                st["max_exp_avg_sq"] = xp.zeros_like(p._data)
            return st

        for p, xp, g, st in self._params_with_grad(group, init_state, self._decoupled):
            d = p._data
            t = st["step"]
            m, v = st["exp_avg"], st["exp_avg_sq"]
            tmp = self._scratch(d, p.device)
            # m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2, through one scratch array.
            m *= b1
            m += xp.multiply(g, 1 - b1, out=tmp)
            square_average_(v, g, b2, tmp, xp)
            if amsgrad:
                v = xp.maximum(st["max_exp_avg_sq"], v, out=st["max_exp_avg_sq"])
            bc1 = 1 - b1 ** t
            bc2 = 1 - b2 ** t
            # p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps), the denominator then the step in tmp.
            denom = xp.sqrt(v, out=tmp)
            denom *= 1 / math.sqrt(bc2)
            denom += eps
            step = xp.divide(m, denom, out=tmp)
            step *= lr / bc1
            d -= step
            p._vc[0] += 1


class AdamW(Adam):
    """Adam with decoupled weight decay: ``p *= 1 - lr * weight_decay`` before the update."""

    _decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, maximize: bool = False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize)
