"""Adadelta, with PyTorch's update."""
from __future__ import annotations

from .optimizer import Optimizer, check_hyperparameters, square_average_

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    """``v = rho v + (1-rho) g^2``; ``delta = sqrt(u + eps) / sqrt(v + eps) * g``;
    ``u = rho u + (1-rho) delta^2``; ``p -= lr delta``. ``g`` includes the weight decay
    ``weight_decay * p``.

    Args:
        params: the parameters (or parameter groups) to optimize.
        lr: scales the update (PyTorch's default 1.0).
        rho: the smoothing constant of both running averages.
        eps: added inside the square roots for numerical stability.
        weight_decay: the L2 penalty.
        maximize: maximize the objective instead of minimizing it.
    """

    def __init__(self, params, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0.0, maximize: bool = False):
        check_hyperparameters(learning_rate=lr, eps=eps, weight_decay=weight_decay)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize))

    def _step_group(self, group):
        lr, rho, eps = group["lr"], group["rho"], group["eps"]
        def init_state(p, xp):
            return {"square_avg": xp.zeros_like(p._data), "acc_delta": xp.zeros_like(p._data)}

        for p, xp, g, st in self._params_with_grad(group, init_state):
            v, u = st["square_avg"], st["acc_delta"]
            # Scratch slots 2 and 3 (the gradient may be in 0/1): nothing allocated per step.
            tmp, delta = self._scratch(g, p.device, 2), self._scratch(g, p.device, 3)
            square_average_(v, g, rho, tmp, xp)
            delta = xp.sqrt(xp.add(u, eps, out=delta), out=delta)
            delta /= xp.sqrt(xp.add(v, eps, out=tmp), out=tmp)
            delta *= g
            u *= rho
            tmp = xp.multiply(delta, delta, out=tmp)
            tmp *= 1 - rho
            u += tmp
            p._data -= xp.multiply(delta, lr, out=tmp)
            p._vc[0] += 1
