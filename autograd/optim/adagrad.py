"""Adagrad, with PyTorch's update: learning-rate decay, L2 weight decay, a starting value
for the accumulator."""
from __future__ import annotations

from .optimizer import Optimizer

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """``clr = lr / (1 + (step - 1) lr_decay)``, ``sum += g^2``,
    ``p -= clr g / (sqrt(sum) + eps)``; ``g`` includes the weight decay ``weight_decay * p``.

    As in PyTorch, the state (``step`` 0 and ``sum`` filled with
    ``initial_accumulator_value``) exists from construction, so it is in the state dict
    before the first step.

    Args:
        params: the parameters (or parameter groups) to optimize.
        lr: the learning rate.
        lr_decay: the learning-rate decay per step.
        weight_decay: the L2 penalty.
        initial_accumulator_value: the starting value of the squared-gradient sums.
        eps: added to the denominator for numerical stability.
        maximize: maximize the objective instead of minimizing it.
    """

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0.0,
                 weight_decay: float = 0.0, initial_accumulator_value: float = 0.0,
                 eps: float = 1e-10, maximize: bool = False):
        for name, value in (("learning rate", lr), ("lr_decay value", lr_decay),
                            ("weight_decay value", weight_decay),
                            ("initial_accumulator_value value", initial_accumulator_value),
                            ("epsilon value", eps)):
            if value < 0.0:
                raise ValueError(f"Invalid {name}: {value}")
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      eps=eps, maximize=maximize))
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, group)

    def _init_state(self, p, group) -> dict:
        st = self.state[p] = {"step": 0, "sum": p.device.xp.full_like(
            p._data, group["initial_accumulator_value"])}
        return st

    def _step_group(self, group):
        lr, lr_decay, eps = group["lr"], group["lr_decay"], group["eps"]
        for p, xp, g, st in self._params_with_grad(group,
                                                   lambda p, xp: self._init_state(p, group)):
            d = p._data
            clr = lr / (1 + (st["step"] - 1) * lr_decay)
            tmp = self._scratch(d, p.device)
            st["sum"] += xp.multiply(g, g, out=tmp)
            std = xp.sqrt(st["sum"], out=tmp)
            std += eps
            step = xp.divide(g, std, out=tmp)
            step *= clr
            d -= step
            p._vc[0] += 1
