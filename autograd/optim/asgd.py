"""ASGD (averaged stochastic gradient descent), with PyTorch's update."""
from __future__ import annotations

import numpy

from .._tensor import get_default_dtype
from .optimizer import Optimizer, check_hyperparameters

__all__ = ["ASGD"]


class ASGD(Optimizer):
    """``p *= 1 - lambd eta``, ``p -= eta g``; the average ``ax`` follows ``p`` (a copy
    while ``mu`` is 1, then ``ax += mu (p - ax)``); ``eta = lr / (1 + lambd lr t)^alpha``,
    ``mu = 1 / max(1, t - t0)``. ``g`` includes the weight decay ``weight_decay * p``.

    As in PyTorch, ``eta`` and ``mu`` are kept in the default dtype's precision (float32
    unless the default is float64), so the steps round as PyTorch's.

    Args:
        params: the parameters (or parameter groups) to optimize.
        lr: the learning rate.
        lambd: the decay term.
        alpha: the power of the eta update.
        t0: the step at which averaging starts.
        weight_decay: the L2 penalty.
        maximize: maximize the objective instead of minimizing it.
    """

    def __init__(self, params, lr: float = 1e-2, lambd: float = 1e-4, alpha: float = 0.75,
                 t0: float = 1e6, weight_decay: float = 0.0, maximize: bool = False):
        check_hyperparameters(learning_rate=lr, weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0,
                                      weight_decay=weight_decay, maximize=maximize))

    def _step_group(self, group):
        lr, lambd, alpha, t0 = group["lr"], group["lambd"], group["alpha"], group["t0"]
        scalar = numpy.float64 if get_default_dtype() == numpy.float64 else numpy.float32
        def init_state(p, xp):
            return {"eta": float(scalar(lr)), "mu": 1.0, "ax": xp.zeros_like(p._data)}

        for p, xp, g, st in self._params_with_grad(group, init_state):
            t, eta = st["step"], st["eta"]
            d = p._data
            tmp = self._scratch(g, p.device, 2)     # slots 0/1 may hold the gradient
            d *= 1 - lambd * eta
            d -= xp.multiply(g, eta, out=tmp)
            if st["mu"] != 1:
                tmp = xp.subtract(d, st["ax"], out=tmp)
                tmp *= st["mu"]
                st["ax"] += tmp
            else:
                st["ax"][...] = d
            st["eta"] = float(scalar(lr / ((1 + lambd * lr * t) ** alpha)))
            st["mu"] = float(scalar(1 / max(1, t - t0)))
            p._vc[0] += 1
