"""Stochastic gradient descent with momentum, Nesterov and weight decay (PyTorch's update)."""
from __future__ import annotations

from .optimizer import Optimizer, required

__all__ = ["SGD"]


class SGD(Optimizer):
    """``buf = momentum * buf + (1 - dampening) * g`` (``buf = g`` on the first step);
    ``p -= lr * (g + momentum * buf if nesterov else buf)``; ``g`` includes weight decay."""

    def __init__(self, params, lr=required, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, maximize: bool = False):
        if lr is not required and lr < 0.0:
            raise ValueError(f"SGD: invalid learning rate {lr}")
        if momentum < 0.0 or weight_decay < 0.0:
            raise ValueError(f"SGD: invalid momentum {momentum} or weight_decay {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize))

    def _step_group(self, group):
        lr, mom, damp = group["lr"], group["momentum"], group["dampening"]
        nesterov = group["nesterov"]
        for p, xp, g, _ in self._params_with_grad(group):
            d = p._data
            tmp = self._scratch(g, p.device)
            if mom:
                st = self.state.setdefault(p, {})
                buf = st.get("momentum_buffer")
                if buf is None:
                    buf = st["momentum_buffer"] = g.copy()
                else:
                    buf *= mom
                    buf += xp.multiply(g, 1 - damp, out=tmp) if damp else g
                g = xp.add(g, xp.multiply(buf, mom, out=tmp), out=tmp) if nesterov else buf
            d -= g if lr == 1.0 else xp.multiply(g, lr, out=tmp)
            p._vc[0] += 1
