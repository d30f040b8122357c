"""The ranges and nodes a profile shows for max_pool2d and binary_cross_entropy, as PyTorch
2.13's profiler shows them: ``aten::max_pool2d`` > ``aten::max_pool2d_with_indices`` and
MaxPool2DWithIndicesBackward0 (they showed ``im2col``, ``max`` and MaxBackward0), and
``aten::binary_cross_entropy`` with one BinaryCrossEntropyBackward0 (it showed ``clamp``
ranges and ClampBackward1 nodes)."""
import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd import record_function as rf
from gradtrace.autograd.nn import functional as F
from gradtrace.autograd.record_function import RecordScope

from .gradcheck import compiled_replay_stats


def _profile(fn):
    """FUNCTION and BACKWARD_FUNCTION record names of ``fn()`` and its backward."""
    forward, backward = [], []
    with rf.add_global_callback(lambda rec: forward.append(rec.name),
                                scopes=[RecordScope.FUNCTION]):
        with rf.add_global_callback(lambda rec: backward.append(rec.name),
                                    scopes=[RecordScope.BACKWARD_FUNCTION]):
            out = fn()
            n_forward = len(forward)
            out.backward()
    return forward[:n_forward], backward, out


def test_max_pool2d_shows_pytorchs_op_and_node():
    x = ag.tensor(np.random.default_rng(0).standard_normal((2, 3, 6, 6)), requires_grad=True)
    forward, backward, out = _profile(lambda: F.max_pool2d(x, 2).sum())
    assert forward == ["max_pool2d", "max_pool2d_with_indices", "sum"]
    assert "im2col" not in forward and "max" not in forward
    assert backward == ["SumBackward0", "MaxPool2DWithIndicesBackward0", "AccumulateGrad"]


def test_avg_pool2d_shows_pytorchs_op_and_node():
    x = ag.tensor(np.random.default_rng(0).standard_normal((2, 3, 6, 6)), requires_grad=True)
    forward, backward, out = _profile(lambda: F.avg_pool2d(x, 3, 2, 1).sum())
    assert forward == ["avg_pool2d", "sum"]
    assert backward == ["SumBackward0", "AvgPool2DBackward0", "AccumulateGrad"]


def test_max_pool2d_node_and_indices():
    x = ag.tensor(np.arange(16.0).reshape(1, 1, 4, 4), requires_grad=True)
    values, indices = F.max_pool2d(x, 2, return_indices=True)
    assert values.grad_fn.name() == "MaxPool2DWithIndicesBackward0"
    assert indices.tolist() == [[[[5, 7], [13, 15]]]] and not indices.requires_grad


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_is_one_op_and_one_node(reduction):
    p = ag.tensor([[0.2, 0.7], [0.9, 0.4]], requires_grad=True)
    t = ag.tensor([[0.0, 1.0], [1.0, 0.5]])
    forward, backward, out = _profile(
        lambda: F.binary_cross_entropy(p, t, reduction=reduction).sum())
    assert [n for n in forward if n != "sum"] == ["binary_cross_entropy"]
    assert backward == ["SumBackward0", "BinaryCrossEntropyBackward0", "AccumulateGrad"]


# PyTorch 2.13's values: binary_cross_entropy(p, t, weight, reduction) at
# p = [1e-20, 0.3, 1 - 1e-10, 1.0, 0.0, 0.999999, 1e-10], t = [0.2, 0.7, 0.1, 0.5, 0.5, 1.0, 0],
# weight = linspace(0.5, 2, 7), float64, and the gradients of the sum (PyTorch's backward
# formulas: (p - t) / max(p (1 - p), 1e-12f) for p, -logit(p) for t, both times weight).
P = [1e-20, 0.3, 1 - 1e-10, 1.0, 0.0, 0.999999, 1e-10]
T = [0.2, 0.7, 0.1, 0.5, 0.5, 1.0, 0.0]
BCE_NONE = [4.605170185988092, 0.7123375846573312, 20.723265762490083, 62.5, 75.0,
            1.750000875050906e-06, 2.0000000001e-10]
GRAD_P = [-100000000399.58029, -1.4285714285714284, 8999999255.236723, 625000002497.3768,
          -750000002996.8522, -1.75000175000175, 2.0000000002]
GRAD_T = [23.025850929940457, 0.6354733952904027, -23.025850847100088, -float("inf"),
          float("inf"), -24.17714172638628, 46.05170185968091]


def test_binary_cross_entropy_values_and_gradients_are_pytorchs():
    p = ag.tensor(P, dtype=ag.float64, requires_grad=True)
    t = ag.tensor(T, dtype=ag.float64, requires_grad=True)
    w = ag.tensor(np.linspace(0.5, 2, 7))
    loss = F.binary_cross_entropy(p, t, weight=w, reduction="none")
    np.testing.assert_allclose(loss.detach().numpy(), BCE_NONE, rtol=1e-12)
    loss.sum().backward()
    np.testing.assert_allclose(p.grad.numpy(), GRAD_P, rtol=1e-12)
    np.testing.assert_allclose(t.grad.numpy(), GRAD_T, rtol=1e-12)


def test_binary_cross_entropy_refuses_a_weight_that_requires_grad():
    p = ag.tensor([0.3, 0.6], requires_grad=True)
    with pytest.raises(RuntimeError, match="not differentiable with respect to argument "
                                           "'weight'"):
        F.binary_cross_entropy(p, p.detach(), weight=ag.ones(2, requires_grad=True))


def test_new_nodes_replay_compiled_and_bfloat16_runs_eagerly():
    """Compiled autograd replays max_pool2d's, avg_pool2d's, binary_cross_entropy's and the
    alpha overloads' nodes bit for bit; a graph with bfloat16 nodes runs eagerly (where their gradients are
    computed in float32), with the same gradients."""
    rng = np.random.default_rng(3)
    for dtype, fallbacks in ((ag.float64, 0), (ag.bfloat16, 2)):
        x = ag.tensor(rng.standard_normal((2, 3, 4, 4)), dtype=dtype, requires_grad=True)
        v = ag.tensor(rng.uniform(0.1, 0.9, (4, 4)), dtype=dtype, requires_grad=True)

        def grads():
            x.grad = v.grad = None
            parts = [F.max_pool2d(x, 2).sum((0, 1)), F.max_pool2d(x, 3, 1, 1).sum((0, 1)),
                     F.avg_pool2d(x, 3, 2, 1, count_include_pad=False).sum((0, 1)),
                     F.binary_cross_entropy(v, (v > 0.5).to(dtype)).reshape(1, 1),
                     ag.add(v, v * 2, alpha=0.5), ag.sub(v, v.exp(), alpha=2),
                     ag.rsub(v, v * 3, alpha=1.5)]
            ag.cat([p.reshape(-1).float() for p in parts]).square().sum().backward()
            return [p.grad.float().numpy().copy() for p in (x, v)]

        assert compiled_replay_stats(grads)["eager_fallbacks"] == fallbacks


# ---------------------------------------------------------------- adaptive pooling
# PyTorch 2.13: adaptive_avg_pool2d is aten::adaptive_avg_pool2d > aten::_adaptive_avg_pool2d
# with AdaptiveAvgPool2DBackward0 (a 1x1 output: aten::mean, MeanBackward1), even when the
# output divides the input; adaptive_max_pool2d is one op with AdaptiveMaxPool2DBackward0.

@pytest.mark.parametrize("size", [(3, 4), (2, 2)])
def test_adaptive_avg_pool2d_shows_pytorchs_op_and_node(size):
    x = ag.tensor(np.random.default_rng(0).standard_normal((1, 2, 4, 8)), requires_grad=True)
    forward, backward, out = _profile(lambda: F.adaptive_avg_pool2d(x, size).sum())
    assert forward == ["adaptive_avg_pool2d", "_adaptive_avg_pool2d", "sum"]
    assert backward == ["SumBackward0", "AdaptiveAvgPool2DBackward0", "AccumulateGrad"]


def test_adaptive_avg_pool2d_to_one_is_a_mean():
    x = ag.tensor(np.random.default_rng(0).standard_normal((1, 2, 4, 6)), requires_grad=True)
    assert F.adaptive_avg_pool2d(x, 1).grad_fn.name() == "MeanBackward1"


def test_adaptive_max_pool2d_shows_pytorchs_op_and_node():
    x = ag.tensor(np.random.default_rng(0).standard_normal((1, 2, 5, 7)), requires_grad=True)
    forward, backward, out = _profile(lambda: F.adaptive_max_pool2d(x, (3, 4)).sum())
    assert forward == ["adaptive_max_pool2d", "sum"]
    assert backward == ["SumBackward0", "AdaptiveMaxPool2DBackward0", "AccumulateGrad"]


def _pinned_case():
    rng = np.random.default_rng(3)
    return rng.standard_normal((1, 2, 5, 7)), rng.standard_normal((1, 2, 3, 4))


def test_adaptive_pooling_values_and_gradients_are_pytorchs():
    """(5, 7) -> (3, 4): overlapping windows both ways. Values from PyTorch 2.13 (float64)."""
    x, w = _pinned_case()
    t = ag.tensor(x, requires_grad=True)
    y = F.adaptive_avg_pool2d(t, (3, 4))
    (y * ag.tensor(w)).sum().backward()
    np.testing.assert_allclose(y.detach().numpy()[0, 0, 0],
                               [-0.402972840962, -0.003627122853, -0.274024610099, -0.796229264124], atol=1e-11)
    np.testing.assert_allclose(t.grad.numpy()[0, 0, :2], [
        [0.082005023136, -0.019530999856, -0.101536022992, 0.163570682229, 0.265106705221, -0.032699965184,
         -0.297806670404],
        [0.14109368085, -0.076931844202, -0.218025525052, 0.203299284961, 0.421324810013, 0.119909601433,
         -0.30141520858]], atol=1e-11)
    t.grad = None
    values, indices = F.adaptive_max_pool2d(t, (3, 4), return_indices=True)
    (values * ag.tensor(w)).sum().backward()
    assert indices.tolist() == [[[[0, 9, 10, 5], [21, 9, 26, 26], [21, 29, 26, 26]],
                                 [[0, 2, 11, 12], [14, 23, 11, 12], [28, 31, 32, 26]]]]
    assert np.flatnonzero(t.grad.numpy()).tolist()[:10] == [0, 5, 9, 10, 21, 26, 29, 35, 37, 46]


def test_adaptive_max_pool2d_ties_nans_and_three_d_inputs():
    """PyTorch 2.13: of tied maxima the first index, of NaNs the last; a (C, H, W) input."""
    nan = float("nan")
    values, indices = F.adaptive_max_pool2d(ag.tensor([[[[1.0, 1.0, 0.0], [nan, 2.0, nan]]]]), (1, 2),
                                            return_indices=True)
    assert np.isnan(values.numpy()).all() and indices.tolist() == [[[[3, 5]]]]
    values, indices = F.adaptive_max_pool2d(ag.tensor([[[3.0, 3.0, 3.0, 3.0]]]), (1, 3), return_indices=True)
    assert values.tolist() == [[[3.0, 3.0, 3.0]]] and indices.tolist() == [[[0, 1, 2]]]
    values, indices = F.adaptive_max_pool1d(ag.tensor([[[1.0, 5.0, 2.0, 7.0, 3.0]]]), 3, return_indices=True)
    assert values.tolist() == [[[5.0, 7.0, 7.0]]] and indices.tolist() == [[[1, 3, 3]]]


def test_adaptive_avg_pool2d_keeps_an_inf_in_its_own_window_and_checks_like_pytorch():
    out = F.adaptive_avg_pool2d(ag.tensor([[[1.0, float("inf"), 2.0, 3.0]]]), (1, 2))
    assert out.tolist() == [[[float("inf"), 2.5]]]               # PyTorch: [[[inf, 2.5]]]
    assert F.adaptive_avg_pool2d(ag.ones(1, 1, 4, 4), (None, 2)).shape == (1, 1, 4, 2)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        F.adaptive_avg_pool2d(ag.ones(1, 1, 4, 4, dtype=ag.int64), 2)
    with pytest.raises(RuntimeError, match="3-D or 4-D"):
        F.adaptive_avg_pool2d(ag.ones(4, 4), 2)


@pytest.mark.parametrize("training", [True, False])
def test_rrelu_is_rrelu_with_noise_in_training_and_eval(training):
    """PyTorch 2.13: aten::rrelu > aten::rrelu_with_noise, node RreluWithNoiseBackward0 (in
    place RreluWithNoiseBackward1) whether training or not."""
    x = ag.tensor(np.random.default_rng(0).standard_normal((3, 4)), requires_grad=True)
    forward, backward, out = _profile(lambda: F.rrelu(x, training=training).sum())
    assert forward == ["rrelu", "rrelu_with_noise", "sum"]
    assert backward == ["SumBackward0", "RreluWithNoiseBackward0", "AccumulateGrad"]
    assert F.rrelu(x * 1.0, training=training, inplace=True).grad_fn.name() == "RreluWithNoiseBackward1"
