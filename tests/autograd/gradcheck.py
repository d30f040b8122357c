"""Finite-difference checks of gradients in float64, in a random direction.

For f: R^n -> R^m and a random unit direction v and random cotangent u, the analytic
directional derivative ``<u, J v>`` (from backward: ``<J^T u, v>``) must match the central
difference ``<u, (f(x + h v) - f(x - h v)) / 2h>``.
"""
from __future__ import annotations

import numpy as np

from gradtrace import autograd


def _as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def check_grad(fn, inputs, *, eps=1e-6, atol=1e-6, rtol=1e-4, seed=0, create_graph=False):
    """Assert that backward through ``fn(*inputs)`` matches finite differences.

    Args:
        fn: function of tensors returning a tensor or a tuple of tensors.
        inputs: list of tensors (float64 ones with requires_grad are differentiated) or other
            values passed through.
        create_graph: run backward with create_graph=True (checks the differentiable path).
    """
    rng = np.random.default_rng(seed)
    diff = [i for i, x in enumerate(inputs) if isinstance(x, autograd.Tensor) and x.requires_grad]
    assert diff, "check_grad needs at least one input that requires grad"
    outs = [o for o in _as_list(fn(*inputs)) if isinstance(o, autograd.Tensor) and o.requires_grad]
    assert outs, "the function produced no differentiable output"
    cot = [rng.standard_normal(o.shape) for o in outs]
    grads = autograd.grad(outs, [inputs[i] for i in diff],
                          [autograd.tensor(c, dtype=o.dtype) for c, o in zip(cot, outs)],
                          allow_unused=True, create_graph=create_graph)
    dirs = [rng.standard_normal(inputs[i].shape) for i in diff]
    analytic = sum(float((g.detach().numpy() * d).sum()) for g, d in zip(grads, dirs) if g is not None)

    def f_at(sign):
        moved = list(inputs)
        for i, d in zip(diff, dirs):
            moved[i] = autograd.tensor(inputs[i].detach().numpy() + sign * eps * d)
        with autograd.no_grad():
            res = [o for o in _as_list(fn(*moved)) if isinstance(o, autograd.Tensor)
                   and o.dtype.kind == "f"]
        return [r.numpy() for r in res]

    plus, minus = f_at(+1), f_at(-1)
    numeric = sum(float(((p - m) / (2 * eps) * c).sum()) for p, m, c in zip(plus, minus, cot))
    assert np.isclose(analytic, numeric, atol=atol, rtol=rtol), (
        f"gradient mismatch: analytic {analytic!r} vs finite differences {numeric!r}")
    return analytic, numeric
