"""Rprop (resilient backpropagation), with PyTorch's update."""
from __future__ import annotations

from .optimizer import Optimizer, check_hyperparameters

__all__ = ["Rprop"]


class Rprop(Optimizer):
    """Per element, a step size grows by ``etas[1]`` while the gradient keeps its sign and
    shrinks by ``etas[0]`` when it flips (then that element skips its step and forgets its
    gradient), clamped to ``step_sizes``; ``p -= sign(g) * step_size``.

    Args:
        params: the parameters (or parameter groups) to optimize.
        lr: the initial step size.
        etas: the (decrease, increase) factors, ``0 < etaminus < 1 < etaplus``.
        step_sizes: the (minimum, maximum) step sizes.
        maximize: maximize the objective instead of minimizing it.
    """

    def __init__(self, params, lr: float = 1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50),
                 maximize: bool = False):
        check_hyperparameters(learning_rate=lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        super().__init__(params, dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes),
                                      maximize=maximize))

    def _step_group(self, group):
        (etaminus, etaplus), (step_min, step_max) = group["etas"], group["step_sizes"]
        for p in group["params"]:
            if p.grad is None:
                continue
            xp = p.device.xp
            g = p.grad._data
            g = -g if group["maximize"] else g.copy()
            st = self.state.get(p)
            if st is None:
                st = self.state[p] = {"step": 0, "prev": xp.zeros_like(p._data),
                                      "step_size": xp.full_like(p._data, group["lr"])}
            st["step"] += 1
            # The sign masks and factors are temporaries, as in PyTorch's Rprop (the other
            # optimizers write theirs into scratch buffers).
            sign = xp.sign(g * st["prev"])
            factor = xp.where(sign > 0, etaplus, xp.where(sign < 0, etaminus, 1.0))
            step_size = st["step_size"]
            step_size *= factor.astype(step_size.dtype, copy=False)
            xp.clip(step_size, step_min, step_max, out=step_size)
            g[sign < 0] = 0           # a sign flip: no step, and no memory of this gradient
            p._data -= xp.sign(g) * step_size
            st["prev"][...] = g
            p._vc[0] += 1
