"""Selections and powers at special values (ties, NaN, 0, inf; inf and NaN upstream gradients),
against PyTorch 2.13's answers (float64, from the same calls). PyTorch's rules there are
selects (masked_fill / where), so a masked position gets 0 whatever the upstream gradient is.
"""
import numpy as np
import pytest

import gradtrace.autograd as ag

# NaN answers (0 * inf, 0 / 0) are PyTorch's too: NumPy's warnings about them are expected.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning",
                                        "ignore:divide by zero encountered:RuntimeWarning")
inf, nan = np.inf, np.nan


def leaf(values):
    return ag.tensor(np.array(values, dtype=np.float64), requires_grad=True)


def grads(fn, inputs, upstream):
    ts = [leaf(v) for v in inputs]
    y = fn(*ts)
    y.backward(ag.tensor(np.array(upstream, dtype=np.float64)))
    return y, [t.grad.numpy() for t in ts]


A = [1.0, 2.0, 2.0, nan, 1.0, nan, 0.0, -inf]
B = [2.0, 1.0, 2.0, 1.0, nan, nan, -0.0, -inf]
G = [inf, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, nan]

# (fn, torch's values, torch's a.grad, torch's b.grad): a tie splits the gradient, a NaN on
# either side gives both operands all of it, the loser gets 0 (also for an inf gradient).
BINARY = [
    ("maximum", ag.maximum, [2.0, 2.0, 2.0, nan, nan, nan, -0.0, -inf],
     [0.0, 3.0, 2.0, 5.0, 6.0, 7.0, 4.0, nan], [inf, 0.0, 2.0, 5.0, 6.0, 7.0, 4.0, nan]),
    ("minimum", ag.minimum, [1.0, 1.0, 2.0, nan, nan, nan, -0.0, -inf],
     [inf, 0.0, 2.0, 5.0, 6.0, 7.0, 4.0, nan], [0.0, 3.0, 2.0, 5.0, 6.0, 7.0, 4.0, nan]),
]


@pytest.mark.parametrize("name,fn,values,grad_a,grad_b", BINARY, ids=[r[0] for r in BINARY])
def test_maximum_minimum_match_torch(name, fn, values, grad_a, grad_b):
    y, (ga, gb) = grads(fn, [A, B], G)
    np.testing.assert_array_equal(y.detach().numpy(), values)
    np.testing.assert_array_equal(ga, grad_a)
    np.testing.assert_array_equal(gb, grad_b)


# (fn, torch's node, values, a.grad, b.grad): fmax/fmin ignore a NaN operand and give a tie to
# the first; clamp_min/clamp_max with a tensor bound give the input its gradient where it
# is within the bound (ties included), the bound where it is strictly beyond.
NAN_AWARE = [
    ("fmax", ag.fmax, "FmaxBackward0", [2.0, 2.0, 2.0, 1.0, 1.0, nan, 0.0, -inf],
     [0.0, 3.0, 4.0, 0.0, 6.0, 7.0, 8.0, nan], [inf, 0.0, 0.0, 5.0, 0.0, 0.0, 0.0, 0.0]),
    ("fmin", ag.fmin, "FminBackward0", [1.0, 1.0, 2.0, 1.0, 1.0, nan, 0.0, -inf],
     [inf, 0.0, 4.0, 0.0, 6.0, 7.0, 8.0, nan], [0.0, 3.0, 0.0, 5.0, 0.0, 0.0, 0.0, 0.0]),
    ("clamp_min", ag.clamp_min, "ClampMinBackward1", [2.0, 2.0, 2.0, nan, nan, nan, -0.0, -inf],
     [0.0, 3.0, 4.0, 0.0, 0.0, 0.0, 8.0, nan], [inf, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
    ("clamp_max", ag.clamp_max, "ClampMaxBackward1", [1.0, 1.0, 2.0, nan, nan, nan, -0.0, -inf],
     [inf, 0.0, 4.0, 0.0, 0.0, 0.0, 8.0, nan], [0.0, 3.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
]


@pytest.mark.parametrize("name,fn,node,values,grad_a,grad_b", NAN_AWARE,
                         ids=[r[0] for r in NAN_AWARE])
def test_fmax_fmin_clamp_min_max_match_torch(name, fn, node, values, grad_a, grad_b):
    y, (ga, gb) = grads(fn, [A, B], G)
    assert y.grad_fn.name() == node
    np.testing.assert_array_equal(y.detach().numpy(), values)
    np.testing.assert_array_equal(ga, grad_a)
    np.testing.assert_array_equal(gb, grad_b)


@pytest.mark.parametrize("name,fn,values,grad", [
    ("clamp_min", lambda t: t.clamp_min(1.0), [1.0, 2.0, 2.0, nan, 1.0, nan, 1.0, 1.0],
     [inf, 3.0, 4.0, 0.0, 6.0, 0.0, 0.0, 0.0]),
    ("clamp_max", lambda t: ag.clamp_max(t, 1.0), [1.0, 1.0, 1.0, nan, 1.0, nan, 0.0, -inf],
     [inf, 0.0, 0.0, 0.0, 6.0, 0.0, 8.0, nan]),
])
def test_clamp_min_max_with_a_number_match_torch(name, fn, values, grad):
    y, (ga,) = grads(fn, [A], G)
    assert y.grad_fn.name() == ("ClampMinBackward0" if name == "clamp_min" else "ClampMaxBackward0")
    np.testing.assert_array_equal(y.detach().numpy(), values)
    np.testing.assert_array_equal(ga, grad)


def test_prelu_matches_torch():
    x = leaf([[-2.0, 0.0, 3.0], [nan, -inf, 1.0]])
    w = leaf([0.25, -0.5, 2.0])
    y = ag.nn.functional.prelu(x, w)
    assert y.grad_fn.name() == "PreluKernelBackward0"
    y.backward(ag.tensor(np.array([[1.0, inf, 2.0], [3.0, 4.0, nan]])))
    # torch 2.13's values and gradients
    np.testing.assert_array_equal(y.detach().numpy(), [[-0.5, -0.0, 3.0], [nan, inf, 1.0]])
    np.testing.assert_array_equal(x.grad.numpy(), [[0.25, -inf, 2.0], [0.75, -2.0, nan]])
    np.testing.assert_array_equal(w.grad.numpy(), [nan, nan, 0.0])
    m = ag.nn.PReLU(3)
    assert repr(m) == "PReLU(num_parameters=3)"
    np.testing.assert_array_equal(m.weight.detach().numpy(), np.full(3, 0.25, np.float32))


# x.max() / x.min() (MaxBackward1 / MinBackward1): the gradient shared among ties, or among the
# NaN entries when the result is NaN; the rest filled with 0 (torch's CPU rule).
FULL = [
    ("max ties", lambda t: t.max(), [1.0, 3.0, 3.0], 2.0, [0.0, 1.0, 1.0]),
    ("max ties inf", lambda t: t.max(), [1.0, 3.0, 3.0], inf, [0.0, inf, inf]),
    ("min ties inf", lambda t: t.min(), [1.0, 3.0, 1.0], inf, [inf, 0.0, inf]),
    ("max nan", lambda t: t.max(), [nan, 3.0, nan], 2.0, [1.0, 0.0, 1.0]),
    ("min nan inf", lambda t: t.min(), [nan, 3.0, nan], inf, [inf, 0.0, inf]),
]


@pytest.mark.parametrize("name,fn,x,upstream,grad", FULL, ids=[r[0] for r in FULL])
def test_full_max_min_match_torch(name, fn, x, upstream, grad):
    _, (gx,) = grads(fn, [x], upstream)
    np.testing.assert_array_equal(gx, grad)


# (fn, x, upstream, torch's node, torch's x.grad)
POW = [
    ("x**0", lambda t: t ** 0, [0.0, 2.0, -1.0, nan, inf], inf, "PowBackward0",
     [0.0, 0.0, 0.0, 0.0, 0.0]),
    ("x**zeros", lambda t: t ** ag.zeros(5, dtype=ag.float64), [0.0, 2.0, -1.0, nan, inf], inf,
     "PowBackward1", [0.0, 0.0, 0.0, 0.0, 0.0]),
    ("0**x", lambda t: 0 ** t, [-1.0, 0.0, 2.0, nan, -inf], 1.0, "PowBackward2",
     [-inf, 0.0, 0.0, nan, -inf]),
    ("0**x inf", lambda t: 0 ** t, [-1.0, 0.0, 2.0, nan, -inf], inf, "PowBackward2",
     [-inf, nan, nan, nan, -inf]),
]


@pytest.mark.parametrize("name,fn,x,upstream,node,grad", POW, ids=[r[0] for r in POW])
def test_pow_at_zero_matches_torch(name, fn, x, upstream, node, grad):
    y, (gx,) = grads(fn, [x], [upstream] * len(x))
    assert y.grad_fn.name() == node
    np.testing.assert_array_equal(gx, grad)


def test_xlogy_matches_torch():
    x = [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, -1.0, 2.0, nan]
    y = [2.0, -1.0, 0.0, nan, inf, nan, 2.0, 0.0, 1.0]
    out, (gx, gy) = grads(ag.xlogy, [x, y], [1.0] * 9)
    # torch 2.13: xlogy(0, nan) is nan; d/dx = xlogy(g, y), 0 where x == 0 and y <= 0
    np.testing.assert_allclose(out.detach().numpy(),
                               [0.0, 0.0, 0.0, nan, 0.0, nan, -0.6931471805599453, -inf, nan])
    np.testing.assert_allclose(gx, [0.6931471805599453, 0.0, 0.0, nan, inf, nan,
                                    0.6931471805599453, -inf, 0.0])
    np.testing.assert_allclose(gy, [0.0, -0.0, nan, nan, 0.0, nan, -0.5, inf, nan])


@pytest.mark.parametrize("upstream,grad_in,grad_other", [
    (1.0, [0.0, 0.0, 0.0, 0.0, 1.0, nan, nan], [0.0, 0.0, 0.0, -1.0, 0.0, nan, nan]),
    (inf, [nan, nan, nan, nan, inf, nan, nan], [nan, nan, nan, -inf, nan, nan, nan]),
])
def test_atan2_at_the_origin_matches_torch(upstream, grad_in, grad_other):
    # torch: the gradient at (0, 0) is 0 (times the upstream gradient), not 0/0
    _, (gi, go) = grads(ag.atan2, [[0.0, -0.0, 0.0, 1.0, 0.0, inf, nan],
                                   [0.0, 0.0, -0.0, 0.0, 1.0, inf, 0.0]], [upstream] * 7)
    np.testing.assert_array_equal(gi, grad_in)
    np.testing.assert_array_equal(go, grad_other)


def test_sign_and_abs_of_nan():
    # torch: sign(nan) = 0 and abs's slope there (sgn) is 0
    x = leaf([nan, -2.0, 0.0, 3.0])
    np.testing.assert_array_equal(ag.sign(x).detach().numpy(), [0.0, -1.0, 0.0, 1.0])
    ag.abs(x).backward(ag.tensor(np.array([5.0, 5.0, 5.0, 5.0])))
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, -5.0, 0.0, 5.0])


# smooth_l1 (beta 0.5) and huber (delta 0.5) losses, reduction "none", upstream 2: the slope
# is a select, finite for an infinite difference (torch 2.13's values, one node each).
LOSS_X = [-inf, -2.0, -0.5, 0.0, 0.3, 2.0, inf, nan, 1.0]
LOSS_T = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]
ZONE_LOSSES = [
    ("smooth_l1_loss", lambda a, b: ag.nn.functional.smooth_l1_loss(a, b, reduction="none", beta=0.5),
     "SmoothL1LossBackward0", [inf, 1.75, 0.25, 0.0, 0.09, 1.75, inf, nan, 0.0],
     [-2.0, -2.0, -2.0, 0.0, 1.2, 2.0, 2.0, nan, 0.0]),
    ("huber_loss", lambda a, b: ag.nn.functional.huber_loss(a, b, reduction="none", delta=0.5),
     "HuberLossBackward0", [inf, 0.875, 0.125, 0.0, 0.045, 0.875, inf, nan, 0.0],
     [-1.0, -1.0, -1.0, 0.0, 0.6, 1.0, 1.0, nan, 0.0]),
]


@pytest.mark.parametrize("name,fn,node,values,grad", ZONE_LOSSES, ids=[r[0] for r in ZONE_LOSSES])
def test_zone_losses_match_torch(name, fn, node, values, grad):
    y, (gx, gt) = grads(fn, [LOSS_X, LOSS_T], [2.0] * 9)
    assert y.grad_fn.name() == node
    np.testing.assert_allclose(y.detach().numpy(), values, rtol=1e-15)
    np.testing.assert_allclose(gx, grad, rtol=1e-15)
    np.testing.assert_allclose(gt, -np.array(grad), rtol=1e-15)
    # reduced, it is one node too (torch: SmoothL1LossBackward0 / HuberLossBackward0)
    x = leaf([0.1, -3.0])
    loss = getattr(ag.nn.functional, name)(x, ag.zeros(2, dtype=ag.float64))
    assert loss.grad_fn.name() == node


def test_bce_with_logits_keeps_the_tail():
    # torch: [7.500000000013888, 17.500000000013888, 0.6931471805599453] (no linear threshold)
    x = ag.tensor(np.array([-25.0, 25.0, 0.0]))
    loss = ag.nn.functional.binary_cross_entropy_with_logits(
        x, ag.tensor(np.full(3, 0.3)), reduction="none")
    np.testing.assert_allclose(loss.numpy(), [7.500000000013888, 17.500000000013888,
                                              0.6931471805599453], rtol=1e-15)


# (fn, torch's values, a.grad, b.grad) with upstream 2: logaddexp and hypot at infinities
# (-inf for two -infs, inf for an inf and a NaN), their slopes at a tie and at the origin.
INF_PAIRS_A = [-inf, inf, inf, 1.0, -1.0, 0.0, 3.0]
INF_PAIRS_B = [-inf, inf, nan, 1.0, inf, 0.0, -4.0]
AT_INFINITY = [
    ("logaddexp", ag.logaddexp, [-inf, inf, nan, 1.6931471805599454, inf, 0.6931471805599453, 3.000911466453774],
     [nan, nan, nan, 1.0, 0.0, 1.0, 1.9981778976111988],
     [nan, nan, nan, 1.0, 2.0, 1.0, 0.0018221023888012908]),
    ("hypot", ag.hypot, [inf, inf, inf, 1.4142135623730951, inf, 0.0, 5.0],
     [nan, nan, nan, 1.414213562373095, -0.0, nan, 1.2], [nan, nan, nan, 1.414213562373095, nan, nan, -1.6]),
]


@pytest.mark.parametrize("name,fn,values,grad_a,grad_b", AT_INFINITY, ids=[r[0] for r in AT_INFINITY])
def test_logaddexp_hypot_at_infinity_match_torch(name, fn, values, grad_a, grad_b):
    y, (ga, gb) = grads(fn, [INF_PAIRS_A, INF_PAIRS_B], [2.0] * 7)
    np.testing.assert_allclose(y.detach().numpy(), values, rtol=1e-15)
    np.testing.assert_allclose(ga, grad_a, rtol=1e-15)
    np.testing.assert_allclose(gb, grad_b, rtol=1e-15)


def test_hypot_inplace_matches_torch_and_bumps_the_version():
    # torch 2.13: x = a * 1; x.hypot_(b) returns x, its version up by one, grad_fn
    # HypotBackward0, and hypot's values and gradients (above) at the same points.
    a, b = leaf(INF_PAIRS_A), leaf(INF_PAIRS_B)
    x = a * 1.0
    version = x._version
    y = x.hypot_(b)
    assert y is x and x._version == version + 1
    assert y.grad_fn.name() == "HypotBackward0"
    y.backward(ag.tensor(np.full(7, 2.0)))
    _, values, grad_a, grad_b = next(r[1:] for r in AT_INFINITY if r[0] == "hypot")
    np.testing.assert_allclose(y.detach().numpy(), values, rtol=1e-15)
    np.testing.assert_allclose(a.grad.numpy(), grad_a, rtol=1e-15)
    np.testing.assert_allclose(b.grad.numpy(), grad_b, rtol=1e-15)


def test_hypot_inplace_keeps_the_dtype_of_self():
    # torch: a float32 tensor hypot_ a float64 one stays float32 (values 5 and 13)
    x = ag.tensor(np.array([3.0, 5.0], dtype=np.float32))
    x.hypot_(ag.tensor(np.array([4.0, 12.0])))
    assert x.dtype == np.float32
    np.testing.assert_array_equal(x.numpy(), [5.0, 13.0])


def test_remainder_divisor_gradient_uses_floor_division():
    # torch: remainder = [inf, -inf, 1.5, 0.5, nan]; d/dother = -(a // b) = [1, 1, -2, 3, nan]
    # (-1 // inf is -1, as Python's; floor(-1 / inf) would give 0)
    y, (_, gb) = grads(ag.remainder, [[-1.0, 1.0, 5.5, -5.5, -inf], [inf, -inf, 2.0, 2.0, 1.0]],
                       [1.0] * 5)
    np.testing.assert_array_equal(y.detach().numpy(), [inf, -inf, 1.5, 0.5, nan])
    np.testing.assert_array_equal(gb, [1.0, 1.0, -2.0, 3.0, nan])
