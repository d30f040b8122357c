"""nn.utils.clip_grad_norm_ / clip_grad_value_ and the parameter-vector helpers, against
PyTorch's documented behaviour."""
import math

import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd.nn.utils import (clip_grad_norm_, clip_grad_value_, parameters_to_vector,
                                         vector_to_parameters)


def _params(*grads, dtype="float64"):
    out = []
    for g in grads:
        p = ag.nn.Parameter(ag.zeros(len(g), dtype=dtype))
        p.grad = ag.tensor(g, dtype=dtype)
        out.append(p)
    return out


@pytest.mark.parametrize("norm_type,total", [
    (2.0, 13.0),                                  # sqrt(9 + 16 + 144)
    (1.0, 19.0),                                  # 3 + 4 + 12
    (3.0, (27 + 64 + 1728) ** (1 / 3)),
    (math.inf, 12.0), ("inf", 12.0),              # the largest |g|
])
def test_clip_grad_norm_scales_by_max_norm_over_total(norm_type, total):
    params = _params([3.0, -4.0], [12.0])
    got = ag.nn.utils.clip_grad_norm_(params, max_norm=2.0, norm_type=norm_type)
    assert isinstance(got, ag.Tensor) and got.shape == ()
    assert got.item() == pytest.approx(total, rel=1e-14)
    # PyTorch: grads *= min(max_norm / (total + 1e-6), 1)
    coef = 2.0 / (total + 1e-6)
    np.testing.assert_allclose(params[0].grad.numpy(), [3 * coef, -4 * coef], rtol=1e-14)
    np.testing.assert_allclose(params[1].grad.numpy(), [12 * coef], rtol=1e-14)


def test_clip_grad_norm_leaves_small_gradients_and_skips_missing_ones():
    params = _params([0.3, 0.4])
    no_grad = ag.nn.Parameter(ag.ones(3))
    total = clip_grad_norm_(params + [no_grad], max_norm=1.0)
    assert total.item() == pytest.approx(0.5)
    np.testing.assert_array_equal(params[0].grad.numpy(), [0.3, 0.4])
    assert no_grad.grad is None
    # A single tensor is accepted; no gradients at all give a total of 0, as PyTorch.
    p = ag.nn.Parameter(ag.ones(2))
    assert clip_grad_norm_(p, 1.0).item() == 0.0


def test_clip_grad_norm_keeps_float32():
    params = _params([3.0, 4.0], dtype="float32")
    total = clip_grad_norm_(params, 1.0)
    assert total.dtype == np.float32 and params[0].grad.dtype == np.float32
    np.testing.assert_allclose(params[0].grad.numpy(), [0.6, 0.8], rtol=1e-6)


def test_clip_grad_norm_nonfinite():
    params = _params([1.0, float("nan")])
    with pytest.raises(RuntimeError, match="The total norm of order 2.0 for gradients from "
                                           "`parameters` is non-finite"):
        clip_grad_norm_(params, 1.0, error_if_nonfinite=True)
    np.testing.assert_array_equal(params[0].grad.numpy(), [1.0, np.nan])  # unchanged
    # Without the check, PyTorch scales by the nan coefficient: every gradient becomes nan.
    total = clip_grad_norm_(params, 1.0)
    assert math.isnan(total.item()) and np.isnan(params[0].grad.numpy()).all()


def test_clip_grad_value_clamps_in_place():
    params = _params([-3.0, 0.5, 2.0], [10.0])
    before = params[0].grad._version
    assert clip_grad_value_(params, 1.0) is None
    np.testing.assert_array_equal(params[0].grad.numpy(), [-1.0, 0.5, 1.0])
    np.testing.assert_array_equal(params[1].grad.numpy(), [1.0])
    assert params[0].grad._version > before


def test_clipping_a_model_between_backward_and_step():
    ag.manual_seed(0)
    model = ag.nn.Linear(4, 3)
    loss = (model(ag.randn(8, 4)) * 100).sum()
    loss.backward()
    clip_grad_norm_(model.parameters(), 0.5)
    grads = np.concatenate([p.grad.numpy().ravel() for p in model.parameters()])
    assert np.linalg.norm(grads) == pytest.approx(0.5, rel=1e-5)


def test_parameters_to_vector_and_back():
    a, b = ag.nn.Parameter(ag.ones(2, 2)), ag.nn.Parameter(ag.zeros(3))
    vec = parameters_to_vector([a, b])
    assert vec.requires_grad, "in the graph, as PyTorch's (a cat of views)"
    np.testing.assert_array_equal(vec.detach().numpy(), [1, 1, 1, 1, 0, 0, 0])
    vector_to_parameters(ag.arange(7, dtype="float32"), [a, b])
    np.testing.assert_array_equal(a.detach().numpy(), [[0, 1], [2, 3]])
    np.testing.assert_array_equal(b.detach().numpy(), [4, 5, 6])
    with pytest.raises(TypeError, match="expected a Tensor"):
        vector_to_parameters([1.0] * 7, [a, b])
