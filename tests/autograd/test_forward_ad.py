"""Forward-mode AD: jvp rules against finite differences and reverse mode; functional API."""
import numpy as np
import pytest

import gradtrace.autograd as ag
import gradtrace.autograd.forward_ad as fwAD
from gradtrace.autograd.dispatch import COMPOSITES, OPS, defop

from .op_cases import CASES, make_inputs


def _has_jvp(case):
    op = OPS.get(case.op)
    return case.grad and op is not None and op.jvp is not None


def _jvp(case, tensors, tangents):
    with fwAD.dual_level():
        duals = [fwAD.make_dual(t, v) if v is not None else t for t, v in zip(tensors, tangents)]
        out = case.fn(*duals)
        return fwAD.unpack_dual(out).tangent


@pytest.mark.parametrize("case", [c for c in CASES if _has_jvp(c)], ids=lambda c: c.name)
def test_jvp_matches_finite_differences_and_reverse_mode(case):
    rng = np.random.default_rng(7)
    _, tensors = make_inputs(case, rng)
    diff = [isinstance(t, ag.Tensor) and t.requires_grad for t in tensors]
    tangents = [ag.tensor(rng.standard_normal(t.shape)) if d else None for t, d in zip(tensors, diff)]
    primals = [t.detach() if isinstance(t, ag.Tensor) else t for t in tensors]
    jvp = _jvp(case, primals, tangents).numpy()
    eps = case.tol.get("eps", 1e-6)

    def f(sign):
        moved = [ag.tensor(p.numpy() + sign * eps * v.numpy()) if v is not None else p
                 for p, v in zip(primals, tangents)]
        return case.fn(*moved).numpy()

    numeric = (f(1) - f(-1)) / (2 * eps)
    np.testing.assert_allclose(jvp, numeric, rtol=case.tol.get("rtol", 1e-4), atol=1e-6)
    # <u, J v> from forward mode equals <J^T u, v> from reverse mode
    out = case.fn(*tensors)
    u = rng.standard_normal(out.shape)
    grads = ag.grad(out, [t for t, d in zip(tensors, diff) if d], ag.tensor(u), allow_unused=True)
    rev = sum(float((g.numpy() * v.numpy()).sum()) for g, v in
              zip(grads, [v for v in tangents if v is not None]) if g is not None)
    assert float((jvp * u).sum()) == pytest.approx(rev, rel=1e-6, abs=1e-9)


def test_every_jvp_rule_has_a_case():
    with_rule = {name for name, op in OPS.items() if op.jvp is not None}
    covered = {c.op for c in CASES} | {n for c in CASES for n in c.covers}
    assert not with_rule - covered


def test_ops_with_jvp_rules_include_the_core_families():
    with_rule = {name for name, op in OPS.items() if op.jvp is not None}
    core = {"add", "sub", "mul", "div", "neg", "pow", "exp", "log", "sqrt", "tanh", "relu",
            "sum", "reshape", "transpose", "permute", "expand", "matmul", "index"}
    assert core <= with_rule


def test_missing_jvp_rule_raises_naming_the_op():
    op = defop("test_square_no_jvp", lambda xp, x: x * x, (lambda F, g, out, x: g * 2 * x,))
    try:
        x = ag.tensor([1.0, 2.0])
        with fwAD.dual_level():
            d = fwAD.make_dual(x, ag.ones(2))
            with pytest.raises(NotImplementedError, match="'test_square_no_jvp' \\(input 0\\)"):
                ag.ops.apply_op(op, (d,))
            # the level still works afterwards
            assert fwAD.unpack_dual(d * 3).tangent.tolist() == [3.0, 3.0]
    finally:
        del OPS["test_square_no_jvp"]


def test_dual_level_rules():
    x = ag.tensor([1.0])
    with pytest.raises(RuntimeError, match="inside a forward_ad.dual_level"):
        fwAD.make_dual(x, x)
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match="nested"):
            fwAD.enter_dual_level()
        with pytest.raises(RuntimeError, match="does not match"):
            fwAD.make_dual(x, ag.ones(2))
    # tangents from a closed level are not visible in a new one
    with fwAD.dual_level():
        d = fwAD.make_dual(x, ag.ones(1))
    with fwAD.dual_level():
        assert fwAD.unpack_dual(d * 2).tangent is None


def test_functional_jvp_vjp_jacobian_hessian():
    x = ag.tensor(np.array([0.3, -0.7, 1.1]))
    f = lambda a: (a ** 3).tanh()
    xv = x.numpy()
    dfdx = (1 - np.tanh(xv ** 3) ** 2) * 3 * xv ** 2
    v = ag.tensor(np.array([1.0, 2.0, 3.0]))
    out, jv = ag.functional.jvp(f, x, v)
    np.testing.assert_allclose(jv.numpy(), dfdx * v.numpy())
    out, vj = ag.functional.vjp(f, x, v)
    np.testing.assert_allclose(vj.numpy(), dfdx * v.numpy())
    for strategy in ("reverse-mode", "forward-mode"):
        J = ag.functional.jacobian(f, x, strategy=strategy)
        np.testing.assert_allclose(J.numpy(), np.diag(dfdx), atol=1e-12)
    H = ag.functional.hessian(lambda a: (a ** 3).sum(), x)
    np.testing.assert_allclose(H.numpy(), np.diag(6 * xv), atol=1e-12)
    W = ag.tensor(np.random.default_rng(0).standard_normal((2, 3)))
    J2 = ag.functional.jacobian(lambda a: W @ a, x)
    np.testing.assert_allclose(J2.numpy(), W.numpy())
    with pytest.raises(RuntimeError, match="vector 0 has shape"):
        ag.functional.jvp(f, x, ag.ones(2, dtype="float64"))
    _ = COMPOSITES
