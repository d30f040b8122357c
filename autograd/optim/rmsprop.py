"""RMSprop, with PyTorch's update: momentum, the centered variant, L2 weight decay."""
from __future__ import annotations

from .optimizer import Optimizer, square_average_

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """``v = alpha v + (1-alpha) g^2``; centered: ``m = lerp(m, g, 1-alpha)`` and
    ``v - m^2`` in place of ``v``; ``d = sqrt(v) + eps``; with momentum
    ``buf = momentum buf + g / d`` and ``p -= lr buf``, else ``p -= lr g / d``.
    ``g`` includes the weight decay ``weight_decay * p``.

    Args:
        params: the parameters (or parameter groups) to optimize.
        lr: the learning rate.
        alpha: the smoothing constant of the squared-gradient average.
        eps: added to the denominator for numerical stability.
        weight_decay: the L2 penalty.
        momentum: the momentum factor (0 for none).
        centered: normalize by an estimate of the gradient's variance.
        maximize: maximize the objective instead of minimizing it.
    """

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False,
                 maximize: bool = False):
        for name, value in (("learning rate", lr), ("epsilon value", eps),
                            ("momentum value", momentum), ("weight_decay value", weight_decay),
                            ("alpha value", alpha)):
            if value < 0.0:
                raise ValueError(f"Invalid {name}: {value}")
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered, maximize=maximize))

    def _step_group(self, group):
        lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
        mom, centered = group["momentum"], group["centered"]
        def init_state(p, xp):
            st = {"square_avg": xp.zeros_like(p._data)}
            if mom > 0:
                st["momentum_buffer"] = xp.zeros_like(p._data)
            if centered:
                st["grad_avg"] = xp.zeros_like(p._data)
            return st

        for p, xp, g, st in self._params_with_grad(group, init_state):
            d = p._data
            tmp = self._scratch(d, p.device)
            v = st["square_avg"]
            square_average_(v, g, alpha, tmp, xp)
            if centered:
                m = st["grad_avg"]
                tmp = xp.subtract(g, m, out=tmp)
                tmp *= 1 - alpha
                m += tmp
                avg = xp.sqrt(xp.subtract(v, xp.multiply(m, m, out=tmp), out=tmp), out=tmp)
            else:
                avg = xp.sqrt(v, out=tmp)
            avg += eps
            step = xp.divide(g, avg, out=tmp)
            if mom > 0:
                buf = st["momentum_buffer"]
                buf *= mom
                buf += step
                step = xp.multiply(buf, lr, out=tmp)
            else:
                step *= lr
            d -= step
            p._vc[0] += 1
