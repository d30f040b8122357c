"""Adamax (Adam with the infinity norm), with PyTorch's update."""
from __future__ import annotations

from .optimizer import Optimizer, check_betas, check_hyperparameters, lerp_

__all__ = ["Adamax"]


class Adamax(Optimizer):
    """``m = lerp(m, g, 1-b1)``; ``u = max(b2 u, |g| + eps)``;
    ``p -= lr / (1 - b1^t) * m / u``. ``g`` includes the weight decay ``weight_decay * p``.

    Args:
        params: the parameters (or parameter groups) to optimize.
        lr: the learning rate (PyTorch's default 2e-3).
        betas: the decay rates of the first moment and of the infinity norm.
        eps: added to ``|g|`` for numerical stability.
        weight_decay: the L2 penalty.
        maximize: maximize the objective instead of minimizing it.
    """

    def __init__(self, params, lr: float = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, maximize: bool = False):
        check_hyperparameters(learning_rate=lr, eps=eps, weight_decay=weight_decay)
        check_betas(betas)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, maximize=maximize))

    def _step_group(self, group):
        lr, (b1, b2), eps = group["lr"], group["betas"], group["eps"]
        def init_state(p, xp):
            return {"exp_avg": xp.zeros_like(p._data), "exp_inf": xp.zeros_like(p._data)}

        for p, xp, g, st in self._params_with_grad(group, init_state):
            m, u = st["exp_avg"], st["exp_inf"]
            tmp = self._scratch(g, p.device, 2)     # slots 0/1 may hold the gradient
            lerp_(m, g, 1 - b1, tmp, xp)
            u *= b2
            tmp = xp.abs(g, out=tmp)
            tmp += eps
            xp.maximum(u, tmp, out=u)
            clr = lr / (1 - b1 ** st["step"])
            tmp = xp.divide(m, u, out=tmp)
            tmp *= clr
            p._data -= tmp
            p._vc[0] += 1
