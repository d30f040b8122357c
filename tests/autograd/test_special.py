"""Special functions come from the library made for them (scipy.special on the CPU,
cupyx.scipy.special on the GPU, through ``backend.special``): values against ``math`` in
float64, the input's float dtype kept. Gradients are checked with every op in test_ops.py."""
import math

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
