"""The optimizers' updates as they were before they moved to in-place arithmetic (issue 17),
kept as the reference the in-place ones must match bit for bit: each class is the current
optimizer with its old ``_step_group``, which allocated a temporary for every product."""
from __future__ import annotations

import math

from gradtrace.autograd import optim


class RefSGD(optim.SGD):
    def _step_group(self, group):
        lr, mom, damp = group["lr"], group["momentum"], group["dampening"]
        wd, nesterov, maximize = group["weight_decay"], group["nesterov"], group["maximize"]
        for p in group["params"]:
            if p.grad is None:
                continue
            d = p._data
            g = p.grad._data
            if maximize:
                g = -g
            if wd:
                g = g + wd * d
            if mom:
                st = self.state.setdefault(p, {})
                buf = st.get("momentum_buffer")
                if buf is None:
                    buf = st["momentum_buffer"] = g.copy()
                else:
                    buf *= mom
                    if damp:
                        buf += (1 - damp) * g
                    else:
                        buf += g
                g = g + mom * buf if nesterov else buf
            if lr == 1.0:
                d -= g
            else:
                d -= lr * g
            p._vc[0] += 1


class RefAdam(optim.Adam):
    def _step_group(self, group):
        lr, (b1, b2), eps = group["lr"], group["betas"], group["eps"]
        wd, amsgrad, maximize = group["weight_decay"], group["amsgrad"], group["maximize"]
        for p in group["params"]:
            if p.grad is None:
                continue
            d = p._data
            xp = p.device.xp
            g = p.grad._data
            if maximize:
                g = -g
            if wd:
                if self._decoupled:
                    d *= 1 - lr * wd
                else:
                    g = g + wd * d
            st = self.state.get(p)
            if st is None:
                st = self.state[p] = {"step": 0, "exp_avg": xp.zeros_like(d),
                                      "exp_avg_sq": xp.zeros_like(d)}
                if amsgrad:
                    st["max_exp_avg_sq"] = xp.zeros_like(d)
            st["step"] += 1
            t = st["step"]
            m, v = st["exp_avg"], st["exp_avg_sq"]
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * (g * g)
            if amsgrad:
                xp.maximum(st["max_exp_avg_sq"], v, out=st["max_exp_avg_sq"])
                v = st["max_exp_avg_sq"]
            bc1 = 1 - b1 ** t
            bc2 = 1 - b2 ** t
            denom = xp.sqrt(v)
            denom *= 1 / math.sqrt(bc2)
            denom += eps
            step = m / denom
            step *= lr / bc1
            d -= step
            p._vc[0] += 1


class RefRMSprop(optim.RMSprop):
    def _step_group(self, group):
        lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
        wd, mom, centered = group["weight_decay"], group["momentum"], group["centered"]
        for p in group["params"]:
            if p.grad is None:
                continue
            d = p._data
            xp = p.device.xp
            g = p.grad._data
            if group["maximize"]:
                g = -g
            if wd:
                g = g + wd * d
            st = self.state.get(p)
            if st is None:
                st = self.state[p] = {"step": 0, "square_avg": xp.zeros_like(d)}
                if mom > 0:
                    st["momentum_buffer"] = xp.zeros_like(d)
                if centered:
                    st["grad_avg"] = xp.zeros_like(d)
            st["step"] += 1
            v = st["square_avg"]
            v *= alpha
            v += (1 - alpha) * (g * g)
            if centered:
                m = st["grad_avg"]
                m += (1 - alpha) * (g - m)
                avg = xp.sqrt(v - m * m)
            else:
                avg = xp.sqrt(v)
            avg += eps
            if mom > 0:
                buf = st["momentum_buffer"]
                buf *= mom
                buf += g / avg
                d -= lr * buf
            else:
                d -= lr * (g / avg)
            p._vc[0] += 1


class RefAdagrad(optim.Adagrad):
    def _step_group(self, group):
        lr, lr_decay, eps, wd = group["lr"], group["lr_decay"], group["eps"], group["weight_decay"]
        for p in group["params"]:
            if p.grad is None:
                continue
            d = p._data
            xp = p.device.xp
            g = p.grad._data
            if group["maximize"]:
                g = -g
            if wd:
                g = g + wd * d
            st = self.state.get(p) or self._init_state(p, group)
            st["step"] += 1
            clr = lr / (1 + (st["step"] - 1) * lr_decay)
            st["sum"] += g * g
            std = xp.sqrt(st["sum"])
            std += eps
            d -= clr * (g / std)
            p._vc[0] += 1


class RefAdamW(RefAdam, optim.AdamW):
    _decoupled = True
