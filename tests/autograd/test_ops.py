"""Every op in the table: forward against NumPy; gradient, forward-mode tangent and second
derivative against finite differences; every op has a case and a forward-mode rule."""
import inspect

import numpy as np
import pytest

from gradtrace import autograd
from gradtrace.autograd.dispatch import COMPOSITES, FUNCTIONS, METHODS, OPS, SELF_ADJOINT, defop

from .gradcheck import check_grad, check_grad_grad, check_jvp
from .op_cases import CASES, make_inputs


def _np(x):
    return x.detach().numpy() if isinstance(x, autograd.Tensor) else np.asarray(x)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_forward_matches_numpy(case):
    raw, tensors = make_inputs(case, np.random.default_rng(1), requires_grad=False)
    if case.ref is None:
        pytest.fail(f"case {case.name} has no NumPy reference")
    out = case.fn(*tensors)
    expected = case.ref(*raw)
    np.testing.assert_allclose(_np(out), expected, rtol=1e-6, atol=1e-12)
    assert _np(out).dtype == np.asarray(expected).dtype or np.asarray(expected).dtype == object


@pytest.mark.parametrize("case", [c for c in CASES if c.grad], ids=lambda c: c.name)
def test_gradient_matches_finite_differences(case):
    _, tensors = make_inputs(case, np.random.default_rng(2))
    check_grad(case.fn, tensors, **case.tol)


@pytest.mark.parametrize("case", [c for c in CASES if c.grad], ids=lambda c: c.name)
def test_gradient_with_create_graph_matches(case):
    """The differentiable backward (TensorF) gives the same numbers as the array backward."""
    _, tensors = make_inputs(case, np.random.default_rng(3))
    check_grad(case.fn, tensors, create_graph=True, **case.tol)


def test_every_op_has_a_case():
    covered = {c.op for c in CASES} | {n for c in CASES for n in c.covers}
    missing = sorted((set(OPS) | set(COMPOSITES)) - covered)
    assert not missing, f"ops without a case in tests/autograd/op_cases.py: {missing}"


@pytest.mark.cuda
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_gpu_matches_cpu(case):
    raw, cpu_in = make_inputs(case, np.random.default_rng(4), device="cpu")
    _, gpu_in = make_inputs(case, np.random.default_rng(4), device="cuda")
    out_c, out_g = case.fn(*cpu_in), case.fn(*gpu_in)
    np.testing.assert_allclose(_np(out_g.cpu() if hasattr(out_g, "cpu") else out_g), _np(out_c),
                               rtol=1e-6, atol=1e-9)
    if case.grad:
        diff_c = [t for t in cpu_in if isinstance(t, autograd.Tensor) and t.requires_grad]
        diff_g = [t for t in gpu_in if isinstance(t, autograd.Tensor) and t.requires_grad]
        gc = autograd.grad(out_c.sum(), diff_c, allow_unused=True)
        gg = autograd.grad(out_g.sum(), diff_g, allow_unused=True)
        for a, b in zip(gc, gg):
            if a is not None:
                np.testing.assert_allclose(b.cpu().numpy(), a.numpy(), rtol=1e-6, atol=1e-9)


# --------------------------------------------------------------------------- forward mode


def test_every_differentiable_op_has_a_forward_rule():
    """A differentiable primitive declares jvp= on its defop (rules, SELF_ADJOINT or
    linear_in); otherwise forward mode would only fail at run time."""
    missing = sorted(name for name, op in OPS.items() if op.differentiable and (
        op.jvp is None or any(f is None for f, r in zip(op.jvp, op.vjp) if r is not None)))
    assert not missing, f"differentiable ops without a forward-mode rule: {missing}"


@pytest.mark.parametrize("case", [c for c in CASES if c.grad], ids=lambda c: c.name)
def test_forward_mode_matches_finite_differences_and_reverse_mode(case):
    _, tensors = make_inputs(case, np.random.default_rng(5))
    check_jvp(case.fn, tensors, **case.tol)


# --------------------------------------------------------------------------- second derivatives


@pytest.mark.parametrize("case", [c for c in CASES if c.grad], ids=lambda c: c.name)
def test_second_derivative_matches_finite_differences(case):
    """gradgradcheck: the gradient built with create_graph=True, differentiated again. A case
    that declares its op once differentiable must fail it (PyTorch raises for a double
    backward through a once_differentiable function)."""
    _, tensors = make_inputs(case, np.random.default_rng(6))
    if not case.once_differentiable:
        check_grad_grad(case.fn, tensors, **case.tol)
        return
    with pytest.raises(AssertionError, match="second derivative mismatch"):
        check_grad_grad(case.fn, tensors, **case.tol)


# --------------------------------------------------------------------------- the entry


def test_declared_names_are_attached():
    """Each public function a defop, defcomposite or expose declares is on gradtrace.autograd,
    each method on Tensor: the same function objects."""
    for name, fn in FUNCTIONS.items():
        assert getattr(autograd, name) is fn, name
    for name, fn in METHODS.items():
        assert getattr(autograd.Tensor, name) is fn, name


def test_generated_function_has_the_forward_signature():
    # torch.tril(input, diagonal=0); torch.atan2(input, other)
    assert str(inspect.signature(autograd.tril)) == "(x, diagonal=0)"
    assert str(inspect.signature(autograd.atan2)) == "(input, other)"
    x = autograd.tensor(np.arange(9.0).reshape(3, 3))
    np.testing.assert_array_equal(autograd.tril(x, 1).numpy(), np.tril(x.numpy(), 1))
    np.testing.assert_array_equal(x.triu(diagonal=-1).numpy(), np.triu(x.numpy(), -1))


def test_defop_rejects_a_missing_forward_rule_and_a_taken_name():
    with pytest.raises(ValueError, match=r"inputs \[1\] have a reverse rule but no forward rule"):
        defop("test_half_jvp", lambda xp, a, b: a * b,
              (lambda F, g, out, a, b: g * b, lambda F, g, out, a, b: g * a),
              jvp=(lambda F, t, out, a, b: t * b, None))
    with pytest.raises(ValueError, match="Tensor method 'exp' is already registered"):
        defop("test_exp_again", lambda xp, x: xp.exp(x), (lambda F, g, out, x: g * out,),
              jvp=SELF_ADJOINT, methods="exp")
    for name in ("test_half_jvp", "test_exp_again"):
        OPS.pop(name, None)
