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


def _diff_positions(inputs):
    return [i for i, x in enumerate(inputs) if isinstance(x, autograd.Tensor) and x.requires_grad]


def _moved(inputs, diff, dirs, step, requires_grad=False):
    """``inputs`` with each differentiated tensor moved by ``step * direction`` (fresh leaves)."""
    moved = list(inputs)
    for i, d in zip(diff, dirs):
        moved[i] = autograd.tensor(inputs[i].detach().numpy() + step * d,
                                   requires_grad=requires_grad)
    return moved


def check_jvp(fn, inputs, *, eps=1e-6, atol=1e-6, rtol=1e-4, seed=0):
    """Assert that forward mode (dual tensors) through ``fn(*inputs)`` gives J·v equal to the
    central difference ``(f(x + h v) - f(x - h v)) / 2h``, and that ``<u, J v>`` equals
    reverse mode's ``<Jᵀ u, v>``.

    Args:
        fn: function of tensors returning one tensor.
        inputs: as for :func:`check_grad`; float64 tensors that require grad get tangents.
    """
    from gradtrace.autograd import forward_ad  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    diff = _diff_positions(inputs)
    dirs = [rng.standard_normal(inputs[i].shape) for i in diff]
    primals = [x.detach() if isinstance(x, autograd.Tensor) else x for x in inputs]
    with forward_ad.dual_level():
        duals = list(primals)
        for i, d in zip(diff, dirs):
            duals[i] = forward_ad.make_dual(primals[i], autograd.tensor(d))
        tangent = forward_ad.unpack_dual(fn(*duals)).tangent
    assert tangent is not None, "forward mode gave the output no tangent"
    jvp = tangent.numpy()
    with autograd.no_grad():
        numeric = (fn(*_moved(primals, diff, dirs, eps)).numpy()
                   - fn(*_moved(primals, diff, dirs, -eps)).numpy()) / (2 * eps)
    np.testing.assert_allclose(jvp, numeric, rtol=rtol, atol=atol,
                               err_msg="jvp vs finite differences")
    out = fn(*inputs)
    u = rng.standard_normal(out.shape)
    grads = autograd.grad(out, [inputs[i] for i in diff], autograd.tensor(u), allow_unused=True)
    reverse = sum(float((g.numpy() * d).sum()) for g, d in zip(grads, dirs) if g is not None)
    assert np.isclose(float((jvp * u).sum()), reverse, rtol=1e-6, atol=1e-9), (
        f"forward mode <u, Jv> {float((jvp * u).sum())!r} vs reverse mode <J^T u, v> {reverse!r}")


def check_grad_grad(fn, inputs, *, eps=1e-6, atol=1e-6, rtol=1e-4, seed=0):
    """Assert that the gradient computed with ``create_graph=True`` differentiates correctly
    (as PyTorch's gradgradcheck): for a random cotangent u, weights w and direction v, the
    derivative of ``<w, Jᵀ u>`` along v from a second backward equals the central difference of
    ``<w, Jᵀ u>`` (first gradients at ``x ± h v``, no graph).

    Args:
        fn: function of tensors returning a tensor or a tuple of tensors.
        inputs: as for :func:`check_grad`.
    """
    rng = np.random.default_rng(seed)
    diff = _diff_positions(inputs)
    outs = [o for o in _as_list(fn(*inputs)) if isinstance(o, autograd.Tensor) and o.requires_grad]
    cot = [rng.standard_normal(o.shape) for o in outs]
    weights = [rng.standard_normal(inputs[i].shape) for i in diff]
    dirs = [rng.standard_normal(inputs[i].shape) for i in diff]

    def weighted_grad(xs, create_graph):
        outs = [o for o in _as_list(fn(*xs)) if isinstance(o, autograd.Tensor) and o.requires_grad]
        grads = autograd.grad(outs, [xs[i] for i in diff], [autograd.tensor(c) for c in cot],
                              allow_unused=True, create_graph=create_graph)
        return [(g, w) for g, w in zip(grads, weights) if g is not None]

    terms = [(g * autograd.tensor(w)).sum() for g, w in weighted_grad(inputs, True)]
    terms = [t for t in terms if t.requires_grad]   # a gradient constant in x adds nothing
    analytic = 0.0
    if terms:
        total = terms[0]
        for t in terms[1:]:
            total = total + t
        second = autograd.grad(total, [inputs[i] for i in diff], allow_unused=True)
        analytic = sum(float((s.numpy() * d).sum()) for s, d in zip(second, dirs) if s is not None)

    def at(step):
        pairs = weighted_grad(_moved(inputs, diff, dirs, step, requires_grad=True), False)
        return sum(float((g.numpy() * w).sum()) for g, w in pairs)

    numeric = (at(eps) - at(-eps)) / (2 * eps)
    assert np.isclose(analytic, numeric, atol=atol, rtol=rtol), (
        f"second derivative mismatch: double backward {analytic!r} vs finite differences of "
        f"the gradient {numeric!r}")
    return analytic, numeric


def compiled_replay_stats(grads) -> dict:
    """Compiled autograd's stats after ``grads()`` (a list of gradient arrays) ran once
    eagerly and twice under ``compiled_autograd.enable()``, each compiled gradient bit for bit
    the eager one; compiled autograd is reset before and after."""
    from gradtrace.autograd import compiled_autograd as ca

    ca.reset()
    try:
        eager = grads()
        with ca.enable():
            for _ in range(2):
                for e, c in zip(eager, grads()):
                    np.testing.assert_array_equal(e, c)
        return ca.stats()
    finally:
        ca.reset()
