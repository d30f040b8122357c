"""nll_loss's gradient, as PyTorch's nll_loss_backward: the upstream gradient times the
coefficient at each row's target class, and 0 at every other entry whatever the upstream
gradient is (inf or NaN there does not spread to the other classes).

The finite-difference checks of the rule are the OpCase table's (nll_loss, nll_loss_none,
nll_loss_sum_ignore in op_cases.py); compiled replays equal eager bit for bit in
test_compiled_autograd.py (the MLP's cross-entropy).
"""
import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd import nn

INF, NAN = float("inf"), float("nan")
X = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
T = np.array([1, 0, 3])

# (reduction, ignore_index, upstream gradient, expected input gradient); the expected values
# are what torch.nn.functional.nll_loss(x, t, reduction=...).backward(g) gives (PyTorch 2.13).
CASES = [
    ("mean", -100, 1.0, [[0, -1 / 3, 0, 0], [-1 / 3, 0, 0, 0], [0, 0, 0, -1 / 3]]),
    ("mean", -100, INF, [[0, -INF, 0, 0], [-INF, 0, 0, 0], [0, 0, 0, -INF]]),
    ("sum", -100, INF, [[0, -INF, 0, 0], [-INF, 0, 0, 0], [0, 0, 0, -INF]]),
    ("none", -100, [INF, 2.0, NAN], [[0, -INF, 0, 0], [-2, 0, 0, 0], [0, 0, 0, NAN]]),
    ("mean", 0, 2.0, [[0, -1, 0, 0], [0, 0, 0, 0], [0, 0, 0, -1]]),   # row 1 ignored
    ("mean", 0, INF, [[0, -INF, 0, 0], [0, 0, 0, 0], [0, 0, 0, -INF]]),
    ("none", 0, [INF, INF, 2.0], [[0, -INF, 0, 0], [0, 0, 0, 0], [0, 0, 0, -2]]),
    ("mean", 5, 1.0, [[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]),   # every row ignored
]


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")   # inf * 0, 0 / 0
@pytest.mark.parametrize("reduction, ignore, g, expected", CASES)
def test_gradient_is_zero_off_the_targets_as_pytorch(reduction, ignore, g, expected):
    x = ag.tensor(X, requires_grad=True)
    target = T if ignore != 5 else np.full(3, 5)
    loss = nn.functional.nll_loss(x, ag.tensor(target), ignore_index=ignore, reduction=reduction)
    loss.backward(ag.tensor(np.asarray(g, dtype=np.float32)))
    np.testing.assert_array_equal(x.grad.numpy(), np.asarray(expected, dtype=np.float32))


@pytest.mark.parametrize("reduction, d_sum_d_g", [("mean", -1.0), ("sum", -3.0),
                                                  ("none", [-1.0, -1.0, -1.0])])
def test_create_graph_gives_the_same_gradient_and_is_linear_in_the_upstream_one(reduction,
                                                                                d_sum_d_g):
    """With create_graph the rule runs on tensors: the same values, and a gradient that is
    differentiable in the upstream gradient (its derivative there is the coefficients)."""
    x = ag.tensor(X, requires_grad=True)
    loss = nn.functional.nll_loss(x, ag.tensor(T), reduction=reduction)
    g = ag.tensor(np.full(loss.shape, 3.0, dtype=np.float32), requires_grad=True)
    (gx,) = ag.grad(loss, x, grad_outputs=g, create_graph=True)
    x2 = ag.tensor(X, requires_grad=True)
    nn.functional.nll_loss(x2, ag.tensor(T), reduction=reduction).backward(
        ag.tensor(np.full(loss.shape, 3.0, dtype=np.float32)))
    assert gx.requires_grad
    np.testing.assert_array_equal(gx.detach().numpy(), x2.grad.numpy())
    (gg,) = ag.grad(gx.sum(), g)     # sum over the entries of g * coefficients
    np.testing.assert_allclose(gg.numpy(), d_sum_d_g, rtol=1e-6)


# --------------------------------------------------------------------------- fused with log_softmax

def _two_rules(g, logp, target, ignore_index, reduction):
    """NllLossBackward0's rule, then LogSoftmaxBackward0's, as the eager engine runs them."""
    from gradtrace.autograd.dispatch import OPS, ArrayF

    F = ArrayF(np)
    w = OPS["nll_loss_forward"].vjp[0](F, g, None, logp, target, ignore_index, reduction)
    return OPS["log_softmax"].vjp[0](F, w, logp, None, 1)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # inf * 0 in both computations
@pytest.mark.parametrize("dtype, g_dtype", [(np.float32, np.float32), (np.float64, np.float64),
                                            (np.float32, np.float64)])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("g", [1.0, 2.5, -0.75, INF, -INF, NAN, 1e-30, 1 / 3])
def test_fused_with_log_softmax_equals_the_two_rules_bit_for_bit(dtype, g_dtype, reduction, g):
    from gradtrace.autograd.ops.nn import _log_softmax_fwd, nll_log_softmax_grad

    rng = np.random.default_rng(0)
    x = (rng.standard_normal((7, 5)) * 4).astype(dtype)
    x[2, 3] = -80   # an exp that underflows to 0 in float32: a zero product's sign
    logp = _log_softmax_fwd(np, x, 1)
    target = np.array([0, 4, 3, 1, 1, 2, 0])
    gg = np.asarray(g, dtype=g_dtype)
    fused = nll_log_softmax_grad(gg, logp, target, -100, reduction, 1)
    expected = _two_rules(gg, logp, target, -100, reduction)
    assert fused.dtype == expected.dtype and fused.shape == expected.shape
    # the same bits (NaN payloads aside): equal values with equal signs, zeros included
    assert np.array_equal(fused, expected, equal_nan=True)
    assert np.array_equal(np.signbit(fused), np.signbit(expected))


@pytest.mark.parametrize("case, args", [
    ("an ignored target", dict(target=np.array([0, -100, 1]))),
    ("reduction none", dict(reduction="none")),
    ("a zero upstream gradient", dict(g=0.0)),
    ("classes not on dim 1", dict(dim=0)),
    ("not 2-D", dict(logp=np.zeros((3, 2, 2)))),
    ("no rows", dict(logp=np.zeros((0, 2)), target=np.zeros(0, np.int64))),
])
def test_fused_with_log_softmax_leaves_the_rest_to_the_rules(case, args):
    from gradtrace.autograd.ops.nn import nll_log_softmax_grad

    kw = dict(g=1.0, logp=np.log(np.full((3, 2), 0.5)), target=np.array([0, 1, 1]),
              reduction="mean", dim=1)
    kw.update(args)
    g = np.asarray(kw.pop("g"))
    assert nll_log_softmax_grad(g, kw.pop("logp"), kw.pop("target"), -100, **kw) is None
