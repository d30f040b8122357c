"""Every op in the table: forward against NumPy, gradient against finite differences."""
import numpy as np
import pytest

from gradtrace import autograd
from gradtrace.autograd.dispatch import COMPOSITES, OPS

from .gradcheck import check_grad
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
