"""Reductions, scans, order statistics and norms at special inputs (zeros, ties, inf, NaN; inf
and NaN upstream gradients), against PyTorch 2.13's answers (float64, from the same calls).

PyTorch's rules there are not all selects: prod's ``g * (out / x)`` gives an inf entry NaN,
nansum's ``g * ~isnan(x)`` and the 2-norm's ``g * (x / norm)`` give NaN for an inf gradient
at a masked entry, while cumprod gives exactly 0 after a line's first zero and prod() over
two zeros 0 whatever the gradient is.
"""
import numpy as np
import pytest

import gradtrace.autograd as ag

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
inf, nan = np.inf, np.nan
M = ag   # the cases are PyTorch's calls, spelled the same

# (label, fn, input, upstream gradient, torch's node, torch's value, torch's gradient)
CASES = [
    ("prod", lambda x: x.prod(), [1.0, inf, 2.0], 1.0, "ProdBackward0", inf, [inf, nan, inf]),
    ("prod", lambda x: x.prod(), [1.0, 0.0, 3.0], inf, "ProdBackward0", 0.0, [nan, inf, nan]),
    ("prod", lambda x: x.prod(), [2.0, 0.0, 0.0, 3.0], inf, "ProdBackward0", 0.0, [0.0, 0.0, 0.0, 0.0]),
    ("prod", lambda x: x.prod(), [inf, -inf], 1.0, "ProdBackward0", -inf, [nan, nan]),
    ("prod_dim", lambda x: x.prod(1), [[inf, 1.0], [2.0, 3.0]], 1.0, "ProdBackward1", [inf, 6.0], [[nan, inf], [3.0, 2.0]]),
    ("prod_dim", lambda x: x.prod(1), [[0.0, 0.0], [2.0, 3.0]], inf, "ProdBackward1", [0.0, 6.0], [[nan, nan], [inf, inf]]),
    ("cumprod", lambda x: x.cumprod(0), [2.0, 0.0, 3.0, 0.0, 4.0], inf, "CumprodBackward0", [2.0, 0.0, 0.0, 0.0, 0.0], [inf, inf, 0.0, 0.0, 0.0]),
    ("cumprod", lambda x: x.cumprod(0), [2.0, 0.0, 3.0, 0.0, 4.0], 1.0, "CumprodBackward0", [2.0, 0.0, 0.0, 0.0, 0.0], [1.0, 8.0, 0.0, 0.0, 0.0]),
    ("cumprod", lambda x: x.cumprod(0), [1.0, inf, 2.0], 1.0, "CumprodBackward0", [1.0, inf, inf], [inf, nan, inf]),
    ("cumprod", lambda x: x.cumprod(0), [0.0, 2.0, 3.0], nan, "CumprodBackward0", [0.0, 0.0, 0.0], [nan, 0.0, 0.0]),
    ("logcumsumexp", lambda x: x.logcumsumexp(0), [-inf, 0.0, 1.0], 1.0, "LogcumsumexpBackward0", [-inf, 0.0, 1.3132616875182228], [nan, 1.268941421369995, 0.7310585786300049]),
    ("logcumsumexp", lambda x: x.logcumsumexp(0), [0.0, 0.0], nan, "LogcumsumexpBackward0", [0.0, 0.6931471805599453], [0.0, 0.0]),
    ("logcumsumexp", lambda x: x.logcumsumexp(0), [-1000.0, 0.0, -inf], -2.5, "LogcumsumexpBackward0", [-1000.0, 0.0, 0.0], [-2.4999999999999667, -5.000000000000001, 0.0]),
    ("nansum", lambda x: x.nansum(), [1.0, nan, 2.0], inf, "NansumBackward0", 3.0, [inf, nan, inf]),
    ("nanmean", lambda x: x.nanmean(), [1.0, nan, 2.0], 1.0, "DivBackward0", 1.5, [0.5, 0.0, 0.5]),
    ("vector_norm_2", lambda x: M.linalg.vector_norm(x), [0.0, -0.0, 0.0], inf, "LinalgVectorNormBackward0", 0.0, [nan, nan, nan]),
    ("vector_norm_2", lambda x: M.linalg.vector_norm(x), [0.0, -0.0, 0.0], 1.0, "LinalgVectorNormBackward0", 0.0, [0.0, 0.0, 0.0]),
    ("vector_norm_inf", lambda x: M.linalg.vector_norm(x, inf), [1.0, nan, 2.0], 1.0, "LinalgVectorNormBackward0", nan, [0.0, 0.0, 0.0]),
    ("vector_norm_inf", lambda x: M.linalg.vector_norm(x, inf), [-2.0, 1.0, 2.0], 1.0, "LinalgVectorNormBackward0", 2.0, [-0.5, 0.0, 0.5]),
    ("median", lambda x: x.median(), [0.0, 0.0, 0.0], 1.0, "MedianBackward0", 0.0, [0.3333333333333333, 0.3333333333333333, 0.3333333333333333]),
    ("median", lambda x: x.median(), [1.0, nan, 2.0, nan], 1.0, "MedianBackward0", nan, [0.0, 0.5, 0.0, 0.5]),
    ("median_dim", lambda x: x.median(0).values, [1.0, nan, 2.0, nan], 1.0, "MedianBackward1", nan, [0.0, 1.0, 0.0, 0.0]),
    ("nanmedian", lambda x: x.nanmedian(), [2.0, nan, 1.0, 2.0], 1.0, "NanmedianBackward0", 2.0, [0.5, 0.0, 0.0, 0.5]),
    ("nanmedian", lambda x: x.nanmedian(), [nan, nan], 1.0, "NanmedianBackward0", nan, [0.5, 0.5]),
    ("nanmedian_dim", lambda x: x.nanmedian(0).values, [2.0, nan, 1.0, 2.0], 1.0, "NanmedianBackward1", 2.0, [1.0, 0.0, 0.0, 0.0]),
    ("sort_descending", lambda x: x.sort(descending=True).values, [nan, 1.0, nan, -inf], 1.0, "SortBackward0", [nan, nan, 1.0, -inf], [1.0, 1.0, 1.0, 1.0]),
    ("topk", lambda x: x.topk(2).values, [1.0, nan, 2.0], 1.0, "TopkBackward0", [nan, 2.0], [0.0, 1.0, 1.0]),
    ("dist", lambda x: M.dist(x, x.detach() * 1), [1.0, 2.0], inf, "DistBackward0", 0.0, [nan, nan]),
    ("trace", lambda x: x.reshape(2, 2).trace(), [1.0, 2.0, 3.0, 4.0], inf, "TraceBackward0", 5.0, [inf, 0.0, 0.0, inf]),
]


@pytest.mark.parametrize("label,fn,x,up,node,value,grad", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(label, fn, x, up, node, value, grad):
    t = ag.tensor(np.array(x, dtype=np.float64), requires_grad=True)
    y = fn(t)
    assert y.grad_fn.name() == node
    y.backward(ag.tensor(np.full(y.shape, up)))
    np.testing.assert_allclose(y.detach().numpy(), value, rtol=1e-12, equal_nan=True)
    np.testing.assert_allclose(t.grad.numpy(), grad, rtol=1e-12, equal_nan=True)


# (label, fn, input, torch's indices): NaN is the largest value; ties keep their order.
INDICES = [
    ("sort_descending", lambda x: x.sort(descending=True).indices, [nan, 1.0, nan, -inf], [0, 2, 1, 3]),
    ("sort_descending_ties", lambda x: x.sort(descending=True, stable=True).indices,
     [2.0, 1.0, 2.0, 1.0], [0, 2, 1, 3]),
    ("topk_nan", lambda x: x.topk(2).indices, [1.0, nan, 2.0], [1, 2]),
    ("topk_smallest_nan", lambda x: x.topk(2, largest=False).indices, [nan, 1.0, nan, -inf], [3, 1]),
    ("median_first_nan", lambda x: x.median(1).indices, [[1.0, nan, nan], [nan, nan, 2.0]], [1, 0]),
    ("nanmedian_all_nan", lambda x: x.nanmedian(0).indices, [nan, nan], 0),
    ("median_value_nan", lambda x: x.median(0).indices, [1.0, nan, 2.0, nan], 1),
]


@pytest.mark.parametrize("label,fn,x,indices", INDICES, ids=[c[0] for c in INDICES])
def test_indices_match_torch(label, fn, x, indices):
    np.testing.assert_array_equal(fn(ag.tensor(np.array(x))).numpy(), indices)


def test_cumprod_double_backward_with_zeros():
    # sum(cumprod(x)) = x0 + x0 x1 + x0 x1 x2; at x = [2, 0, 3] torch gives the gradient
    # [1, 8, 0] and, with create_graph, the Hessian times ones [4, 6, 2] (x2's gradient
    # x0 x1 is 0 but its derivative in x1 is not)
    x = ag.tensor(np.array([2.0, 0.0, 3.0]), requires_grad=True)
    (g,) = ag.grad(x.cumprod(0).sum(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), [1.0, 8.0, 0.0])
    (h,) = ag.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), [4.0, 6.0, 2.0])


def test_logcumsumexp_keeps_small_entries():
    # torch: [-1000, 0] -> [-1000, 0] (no underflow of the first entry to -inf)
    x = ag.tensor(np.array([-1000.0, 0.0, -1000.0]))
    np.testing.assert_allclose(ag.logcumsumexp(x, 0).numpy(), [-1000.0, 0.0, 0.0])


def test_cdist_zero_distance_with_inf_gradient():
    # torch: _cdist_backward masks after the product, so an inf gradient at a zero
    # distance gives 0: x1.grad = [[0, 0], [inf, nan]]
    a = ag.tensor(np.array([[0.0, 1.0], [1.0, 1.0]]), requires_grad=True)
    b = ag.tensor(np.array([[0.0, 1.0]]), requires_grad=True)
    ag.cdist(a, b).backward(ag.tensor(np.full((2, 1), inf)))
    np.testing.assert_array_equal(a.grad.numpy(), [[0.0, 0.0], [inf, nan]])
