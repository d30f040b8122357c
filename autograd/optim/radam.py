"""RAdam (rectified Adam), with PyTorch's update."""
from __future__ import annotations

from .optimizer import Optimizer, check_betas, check_hyperparameters, lerp_, square_average_

__all__ = ["RAdam"]


class RAdam(Optimizer):
    """Adam whose adaptive step is switched on, and scaled by the variance rectification
    ``r_t``, once the length of the approximated moving average ``rho_t`` exceeds 5; before
    that the step is momentum SGD ``p -= lr m / (1 - b1^t)``.

    Args:
        params: the parameters (or parameter groups) to optimize.
        lr: the learning rate.
        betas: the decay rates of the first and second moments.
        eps: added to the denominator for numerical stability.
        weight_decay: the weight decay: L2 (added to ``g``), or with
            ``decoupled_weight_decay`` applied to ``p`` as AdamW's.
        decoupled_weight_decay: ``p *= 1 - lr * weight_decay`` before the update.
        maximize: maximize the objective instead of minimizing it.
    """

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, decoupled_weight_decay: bool = False,
                 maximize: bool = False):
        check_hyperparameters(learning_rate=lr, eps=eps, weight_decay=weight_decay)
        check_betas(betas)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize))

    def _step_group(self, group):
        lr, (b1, b2), eps = group["lr"], group["betas"], group["eps"]
        rho_inf = 2 / (1 - b2) - 1

        def init_state(p, xp):
            return {"exp_avg": xp.zeros_like(p._data), "exp_avg_sq": xp.zeros_like(p._data)}

        for p, xp, g, st in self._params_with_grad(group, init_state,
                                                   group["decoupled_weight_decay"]):
            t = st["step"]
            m, v = st["exp_avg"], st["exp_avg_sq"]
            # Scratch slots 2 and 3 (the gradient may be in 0/1): nothing allocated per step.
            tmp, step = self._scratch(g, p.device, 2), self._scratch(g, p.device, 3)
            lerp_(m, g, 1 - b1, tmp, xp)
            square_average_(v, g, b2, tmp, xp)
            bias_correction1 = 1 - b1 ** t
            bias_correction2 = 1 - b2 ** t
            # PyTorch's order: ((m / bc1) * lr) * adaptive_lr * rect.
            step = xp.divide(m, bias_correction1, out=step)
            step *= lr
            rho_t = rho_inf - 2 * t * (b2 ** t) / bias_correction2
            if rho_t > 5.0:
                rect = ((rho_t - 4) * (rho_t - 2) * rho_inf
                        / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                adaptive_lr = xp.sqrt(v, out=tmp)
                adaptive_lr += eps
                adaptive_lr = xp.divide(bias_correction2 ** 0.5, adaptive_lr, out=tmp)
                step *= adaptive_lr
                step *= rect
            p._data -= step
            p._vc[0] += 1
