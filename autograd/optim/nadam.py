"""NAdam (Adam with Nesterov momentum), with PyTorch's update and momentum schedule."""
from __future__ import annotations

import numpy

from .._tensor import get_default_dtype
from .optimizer import Optimizer, check_betas, check_hyperparameters, lerp_, square_average_

__all__ = ["NAdam"]


class NAdam(Optimizer):
    """Adam whose step mixes the gradient and the first moment by Dozat's momentum schedule
    ``mu_t = b1 (1 - 0.5 * 0.96^(t * momentum_decay))``:
    ``p -= lr (1 - mu_t) / (1 - prod mu) * g / d + lr mu_{t+1} / (1 - prod mu * mu_{t+1})
    * m / d`` with ``d = sqrt(v / (1 - b2^t)) + eps``.

    Args:
        params: the parameters (or parameter groups) to optimize.
        lr: the learning rate (PyTorch's default 2e-3).
        betas: the decay rates of the first and second moments.
        eps: added to the denominator for numerical stability.
        weight_decay: the weight decay: L2 (added to ``g``), or with
            ``decoupled_weight_decay`` applied to ``p`` as AdamW's.
        momentum_decay: the momentum schedule's decay.
        decoupled_weight_decay: ``p *= 1 - lr * weight_decay`` before the update (NAdamW).
        maximize: maximize the objective instead of minimizing it.
    """

    def __init__(self, params, lr: float = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, maximize: bool = False):
        check_hyperparameters(learning_rate=lr, eps=eps, weight_decay=weight_decay,
                              momentum_decay=momentum_decay)
        check_betas(betas)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, momentum_decay=momentum_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize))

    def _step_group(self, group):
        lr, (b1, b2), eps = group["lr"], group["betas"], group["eps"]
        decay = group["momentum_decay"]
        scalar = numpy.float64 if get_default_dtype() == numpy.float64 else numpy.float32
        def init_state(p, xp):
            return {"mu_product": 1.0, "exp_avg": xp.zeros_like(p._data),
                    "exp_avg_sq": xp.zeros_like(p._data)}

        for p, xp, g, st in self._params_with_grad(group, init_state,
                                                   group["decoupled_weight_decay"]):
            t = st["step"]
            bias_correction2 = 1 - b2 ** t
            mu = b1 * (1.0 - 0.5 * (0.96 ** (t * decay)))
            mu_next = b1 * (1.0 - 0.5 * (0.96 ** ((t + 1) * decay)))
            # PyTorch keeps the product as a tensor of the default dtype's precision
            # (float32 unless the default is float64) and multiplies in it.
            st["mu_product"] = mu_product = float(scalar(st["mu_product"]) * scalar(mu))
            m, v = st["exp_avg"], st["exp_avg_sq"]
            # Scratch slots 2 and 3 (the gradient may be in 0/1): nothing allocated per step.
            tmp, denom = self._scratch(g, p.device, 2), self._scratch(g, p.device, 3)
            lerp_(m, g, 1 - b1, tmp, xp)
            square_average_(v, g, b2, tmp, xp)
            denom = xp.sqrt(xp.divide(v, bias_correction2, out=denom), out=denom)
            denom += eps
            tmp = xp.divide(g, denom, out=tmp)
            tmp *= -lr * (1.0 - mu) / (1.0 - mu_product)
            p._data += tmp
            tmp = xp.divide(m, denom, out=tmp)
            tmp *= (-lr * mu_next) / (1.0 - mu_product * mu_next)
            p._data += tmp
            p._vc[0] += 1
