"""Forward-mode AD: dual levels, the error for an op without a rule, the functional API.

Each op's forward-mode rule is checked per case in test_ops.py (against finite differences
and reverse mode), where a differentiable op without a rule also fails.
"""
import numpy as np
import pytest

import gradtrace.autograd as ag
import gradtrace.autograd.forward_ad as fwAD
from gradtrace.autograd.dispatch import OPS, defop


def test_missing_jvp_rule_raises_naming_the_op():
    # An op registered without jvp= (the completeness test in test_ops.py keeps the table's
    # own ops from this) raises at run time, naming the op and the input.
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
