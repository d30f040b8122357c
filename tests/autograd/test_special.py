"""Special functions come from the library made for them (scipy.special on the CPU,
cupyx.scipy.special on the GPU, through ``backend.special``): values against ``math`` in
float64, the input's float dtype kept. Gradients are checked with every op in test_ops.py."""
import math
import warnings

import numpy as np
import pytest
import scipy.special

import gradtrace.autograd as ag
from gradtrace.autograd import backend
from gradtrace.autograd.nn import functional as F

X = np.concatenate([np.linspace(-6, 6, 241), [-30.0, -1e-9, 0.0, 1e-9, 30.0]])


def test_the_cpu_lookup_is_scipy_special():
    assert backend.special(np) is scipy.special
    for name in ("erf", "erfc", "erfinv", "gammaln", "digamma"):
        assert callable(getattr(backend.special(np), name))


# GELU's ``1 + erf`` cancels where erf is near -1: a few ulps of 1 (1e-15) absolute there.
@pytest.mark.parametrize("name, fn, ref, rtol, atol", [
    ("erf", lambda t: t.erf(), math.erf, 2e-15, 0.0),
    ("gelu", F.gelu, lambda v: v * 0.5 * (1 + math.erf(v / math.sqrt(2))), 2e-15, 1e-15),
], ids=lambda v: v if isinstance(v, str) else "")
def test_float64_values_match_math(name, fn, ref, rtol, atol):
    got = fn(ag.tensor(X, dtype="float64")).numpy()
    want = np.array([ref(v) for v in X])
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("fn", [lambda t: t.erf(), F.gelu], ids=["erf", "gelu"])
def test_dtype_is_kept(dtype, fn):
    x = ag.tensor(X.astype(dtype))
    out = fn(x)
    assert out.dtype == np.dtype(dtype)
    erf = scipy.special.erf
    want = X * 0.5 * (1 + erf(X / math.sqrt(2))) if fn is F.gelu else erf(X)
    tol = {"float16": 2e-3, "float32": 2e-6, "float64": 1e-15}[dtype]
    np.testing.assert_allclose(out.numpy().astype(np.float64), want, rtol=tol, atol=tol)


def test_gelu_defaults_to_the_exact_form():
    x = ag.tensor(np.array([-1.5, 0.3, 2.0]))
    np.testing.assert_array_equal(F.gelu(x).numpy(), F.gelu(x, approximate="none").numpy())
    assert not np.allclose(F.gelu(x).numpy(), F.gelu(x, approximate="tanh").numpy(), rtol=1e-6)


# GELU is one primitive (its float32 CPU forward through a rational erf, as PyTorch's CPU
# kernel uses an approximate erf); it stays within float32 rounding of the composite it
# replaced, x * 0.5 * (1 + erf(x / sqrt 2)) with scipy's erf. Both lose a few ulps of 1 to
# the cancellation in 1 + erf, so the bound scales with |x| + 1.
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_float32_gelu_is_within_rounding_of_the_composite(approximate):
    xs = np.concatenate([np.linspace(-8, 8, 4001), [-1e-30, 0.0, 1e-30]]).astype(np.float32)
    x = ag.tensor(xs, requires_grad=True)
    F.gelu(x, approximate=approximate).sum().backward()
    new_value, new_grad = F.gelu(x.detach(), approximate=approximate).numpy(), x.grad.numpy()
    x.grad = None
    if approximate == "tanh":
        inner = (x + x * x * x * 0.044715) * 0.7978845608028654
        old = x * 0.5 * (ag.tanh(inner) + 1.0)
    else:
        old = x * 0.5 * (ag.erf(x * 0.7071067811865476) + 1.0)
    old.sum().backward()
    assert new_value.dtype == new_grad.dtype == np.float32
    bound = 4 * np.finfo(np.float32).eps * (np.abs(xs) + 1)
    assert np.all(np.abs(new_value - old.detach().numpy()) <= bound)
    assert np.all(np.abs(new_grad - x.grad.numpy()) <= bound)


def test_gelu_is_one_node_and_its_backward_one_op():
    x = ag.tensor(np.array([-1.0, 0.5], np.float32), requires_grad=True)
    y = F.gelu(x)
    assert y.grad_fn.name() == "GeluBackward0"
    assert [e[0].name() for e in y.grad_fn.next_edges] == ["AccumulateGrad"]
    (g,) = ag.grad(y.sum(), x, create_graph=True)
    assert g.grad_fn.name() == "GeluBackwardBackward0"
    with pytest.raises(ValueError, match="approximate must be 'none' or 'tanh'"):
        F.gelu(x, approximate="erf")


def test_an_inplace_op_on_gelus_output_leaves_its_backward_valid():
    """gelu saves its input, as PyTorch's: dropout(gelu(x), inplace=True) still backpropagates."""
    x = ag.tensor(np.array([-1.0, 0.5, 2.0]), requires_grad=True)
    y = F.gelu(x)
    y.mul_(3.0)
    y.sum().backward()
    xs = x.detach().numpy()
    want = 3 * (0.5 * (1 + scipy.special.erf(xs / math.sqrt(2)))
                + xs * np.exp(-xs * xs / 2) / math.sqrt(2 * math.pi))
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12)


def test_float32_gelu_gradient_is_within_rounding_of_float64():
    """The float32 CPU gelu takes Phi through tanh of a fitted polynomial; its derivative
    Phi(x) + x phi(x) stays within float32 rounding of the float64 one, signs, zeros and
    large arguments included (PyTorch gives 0 at -40 and 1 at 40)."""
    xs = np.concatenate([np.linspace(-9, 9, 20001), [-1e-30, -0.0, 0.0, 1e-30, 40.0, -40.0]])
    x = ag.tensor(xs.astype(np.float32), requires_grad=True)
    F.gelu(x).sum().backward()
    want = 0.5 * (1 + scipy.special.erf(xs / math.sqrt(2))) + xs * np.exp(-xs * xs / 2) / math.sqrt(2 * math.pi)
    assert x.grad.dtype == np.float32
    bound = 4 * np.finfo(np.float32).eps * (np.abs(xs) + 1)
    assert np.all(np.abs(x.grad.numpy() - want) <= bound)


def test_float32_gelu_is_within_rounding_of_float64_far_out():
    """Past the fitted range tanh saturates: gelu(x) is x or -0 (PyTorch: -0 at -1e5), no
    overflow warning where x * x overflows; -inf gives NaN, as PyTorch's."""
    xs = np.array([-3e38, -1e5, -40.0, -5.7, 5.7, 40.0, 1e5, 3e38], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = F.gelu(ag.tensor(xs)).numpy()
    far = np.abs(xs) >= 40
    np.testing.assert_array_equal(got[far], np.where(xs > 0, xs, 0.0)[far])
    x64 = xs.astype(np.float64)
    want = x64 * 0.5 * (1 + scipy.special.erf(x64 / math.sqrt(2)))
    assert np.all(np.abs(got - want) <= 4 * np.finfo(np.float32).eps * (np.abs(x64) + 1))
    with np.errstate(invalid="ignore"):   # 0 * -inf
        assert np.isnan(F.gelu(ag.tensor(np.array([-np.inf], np.float32))).numpy()).all()
