"""Threshold-style activations at special inputs, against PyTorch 2.13's answers.

Each row: the call, the backward node PyTorch names, the values and ``x.grad`` PyTorch
(2.13, float64 and float32 alike: these are selects) gives for ``X`` with the upstream
gradient ``G``. The rows pin the select semantics of threshold_backward / hardtanh_backward:
a masked position gets 0 even for an inf or NaN upstream gradient, a NaN input passes the
gradient (relu, threshold, hardtanh), hardtanh's bounds are exclusive while clamp's are
inclusive (and clamp blocks at NaN).
"""
import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd.dispatch import ArrayF
from gradtrace.autograd.nn import functional as F
from gradtrace.autograd.ops.elementwise import grad_unless

inf, nan = np.inf, np.nan
X = [-inf, -6.5, -6.0, -1.0, -0.5, 0.0, 0.5, 1.0, 6.0, 6.5, inf, nan]
G = [inf, nan, 3.0, inf, nan, 5.0, inf, nan, 3.0, -inf, 2.0, 3.0]

# (label, call, torch's node, torch's values, torch's x.grad)
ROWS = [
    ("relu", lambda t: F.relu(t), "ReluBackward0",
     [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 1.0, 6.0, 6.5, inf, nan],
     [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, inf, nan, 3.0, -inf, 2.0, 3.0]),
    ("relu_", lambda t: F.relu(t * 1.0, inplace=True), "ReluBackward0",
     [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 1.0, 6.0, 6.5, inf, nan],
     [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, inf, nan, 3.0, -inf, 2.0, 3.0]),
    ("relu6", lambda t: F.relu6(t), "HardtanhBackward0",
     [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 1.0, 6.0, 6.0, 6.0, nan],
     [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, inf, nan, 0.0, 0.0, 0.0, 3.0]),
    ("relu6_", lambda t: F.relu6(t * 1.0, inplace=True), "HardtanhBackward0",
     [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 1.0, 6.0, 6.0, 6.0, nan],
     [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, inf, nan, 0.0, 0.0, 0.0, 3.0]),
    ("hardtanh", lambda t: F.hardtanh(t), "HardtanhBackward0",
     [-1.0, -1.0, -1.0, -1.0, -0.5, 0.0, 0.5, 1.0, 1.0, 1.0, 1.0, nan],
     [0.0, 0.0, 0.0, 0.0, nan, 5.0, inf, 0.0, 0.0, 0.0, 0.0, 3.0]),
    ("hardtanh(-6,1)", lambda t: F.hardtanh(t, -6.0, 1.0), "HardtanhBackward0",
     [-6.0, -6.0, -6.0, -1.0, -0.5, 0.0, 0.5, 1.0, 1.0, 1.0, 1.0, nan],
     [0.0, 0.0, 0.0, inf, nan, 5.0, inf, 0.0, 0.0, 0.0, 0.0, 3.0]),
    ("hardtanh_", lambda t: F.hardtanh_(t * 1.0, -1.0, 6.0), "HardtanhBackward0",
     [-1.0, -1.0, -1.0, -1.0, -0.5, 0.0, 0.5, 1.0, 6.0, 6.0, 6.0, nan],
     [0.0, 0.0, 0.0, 0.0, nan, 5.0, inf, nan, 0.0, 0.0, 0.0, 3.0]),
    ("threshold(0.5,-2)", lambda t: F.threshold(t, 0.5, -2.0), "ThresholdBackward0",
     [-2.0, -2.0, -2.0, -2.0, -2.0, -2.0, -2.0, 1.0, 6.0, 6.5, inf, nan],
     [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, nan, 3.0, -inf, 2.0, 3.0]),
    ("threshold(-1,nan)", lambda t: F.threshold(t, -1.0, nan), "ThresholdBackward0",
     [nan, nan, nan, nan, -0.5, 0.0, 0.5, 1.0, 6.0, 6.5, inf, nan],
     [0.0, 0.0, 0.0, 0.0, nan, 5.0, inf, nan, 3.0, -inf, 2.0, 3.0]),
    ("threshold_(6,20)", lambda t: F.threshold(t * 1.0, 6.0, 20.0, inplace=True),
     "ThresholdBackward1",
     [20.0, 20.0, 20.0, 20.0, 20.0, 20.0, 20.0, 20.0, 20.0, 6.5, inf, nan],
     [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -inf, 2.0, 3.0]),
    ("nn.Threshold", lambda t: ag.nn.Threshold(6.0, 20.0)(t), "ThresholdBackward0",
     [20.0, 20.0, 20.0, 20.0, 20.0, 20.0, 20.0, 20.0, 20.0, 6.5, inf, nan],
     [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -inf, 2.0, 3.0]),
    # clamp keeps its inclusive bounds and blocks at NaN (torch's clamp_backward).
    ("clamp(-1,6)", lambda t: t.clamp(-1.0, 6.0), "ClampBackward1",
     [-1.0, -1.0, -1.0, -1.0, -0.5, 0.0, 0.5, 1.0, 6.0, 6.0, 6.0, nan],
     [0.0, 0.0, 0.0, inf, nan, 5.0, inf, nan, 3.0, 0.0, 0.0, 0.0]),
    ("clamp(min=0)", lambda t: t.clamp(min=0.0), "ClampBackward1",
     [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 1.0, 6.0, 6.5, inf, nan],
     [0.0, 0.0, 0.0, 0.0, 0.0, 5.0, inf, nan, 3.0, -inf, 2.0, 0.0]),
    ("clamp(max=1)", lambda t: t.clamp(max=1.0), "ClampBackward1",
     [-inf, -6.5, -6.0, -1.0, -0.5, 0.0, 0.5, 1.0, 1.0, 1.0, 1.0, nan],
     [inf, nan, 3.0, inf, nan, 5.0, inf, nan, 0.0, 0.0, 0.0, 0.0]),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("label,call,node,values,grad", ROWS, ids=[r[0] for r in ROWS])
def test_matches_torch_at_special_inputs(label, call, node, values, grad, dtype):
    x = ag.tensor(np.array(X, dtype=dtype), requires_grad=True)
    with np.errstate(all="raise"):      # the select warns of nothing (g * mask did: inf * 0)
        y = call(x)
        assert y.grad_fn.name() == node
        y.backward(ag.tensor(np.array(G, dtype=dtype)))
    assert y.dtype == x.grad.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(y.detach().numpy(), np.array(values, dtype=dtype))
    np.testing.assert_array_equal(x.grad.numpy(), np.array(grad, dtype=dtype))


# Smooth activations: the same check with a tolerance (their values are transcendental).
# hardsigmoid's slope is PyTorch's 0.1666666716 in float64 too (its kernel's float constant
# 1.0f / 6.0f; issue 28 asks for PyTorch's values over the exact 1/6).
XS = [-inf, -6.5, -6.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 6.5, inf, nan]
GS = [2.0, 3.0, 3.0, inf, -1.0, 5.0, inf, 1.0, 3.0, -inf, 2.0, 3.0, 3.0]
SMOOTH = [
    ("elu", lambda t: F.elu(t), "EluBackward0",
     [-1.0, -0.9984965608070224, -0.9975212478233336, -0.950212931632136, -0.6321205588285577, -0.3934693402873666, 0.0, 0.5, 1.0, 3.0, 6.5, inf, nan],
     [0.0, 0.0045103175789327175, 0.0074362565299990755, inf, -0.36787944117144233, 3.032653298563167, inf, 1.0, 3.0, -inf, 2.0, 3.0, 3.0]),
    ("elu_", lambda t: F.elu(t * 1.0, 2.0, inplace=True), "EluBackward1",
     [-2.0, -1.9969931216140449, -1.9950424956466672, -1.900425863264272, -1.2642411176571153, -0.7869386805747332, 0.0, 0.5, 1.0, 3.0, 6.5, inf, nan],
     [0.0, 0.009020635157865442, 0.01487251305999826, inf, -0.7357588823428847, 6.065306597126334, inf, 1.0, 3.0, -inf, 2.0, 3.0, 3.0]),
    ("selu", lambda t: F.selu(t), "EluBackward0",
     [-1.7580993408473766, -1.7554561453931987, -1.7537414482794556, -1.6705687287671118, -1.1113307378125625, -0.6917581878028713, 0.0, 0.5253504936777402, 1.0507009873554805, 3.1521029620664414, 6.829556417810623, inf, nan],
     [0.0, 0.007929586362533946, 0.013073677703763375, inf, -0.646768603034814, 5.331705765222527, inf, 1.0507009873554805, 3.1521029620664414, -inf, 2.101401974710961, 3.1521029620664414, 3.1521029620664414]),
    ("selu_", lambda t: F.selu(t * 1.0, inplace=True), "EluBackward1",
     [-1.7580993408473766, -1.7554561453931987, -1.7537414482794556, -1.6705687287671118, -1.1113307378125625, -0.6917581878028713, 0.0, 0.5253504936777402, 1.0507009873554805, 3.1521029620664414, 6.829556417810623, inf, nan],
     [0.0, 0.007929586362533714, 0.01307367770376322, inf, -0.6467686030348141, 5.331705765222527, inf, 1.0507009873554805, 3.1521029620664414, -inf, 2.101401974710961, 3.1521029620664414, 3.1521029620664414]),
    ("celu(2)", lambda t: F.celu(t, 2.0), "CeluBackward0",
     [-2.0, -1.922451584336556, -1.900425863264272, -1.5537396797031404, -0.7869386805747332, -0.44239843385719024, 0.0, 0.5, 1.0, 3.0, 6.5, inf, nan],
     [0.0, 0.11632262349516603, 0.14936120510359183, inf, -0.6065306597126334, 3.8940039153570245, inf, 1.0, 3.0, -inf, 2.0, 3.0, 3.0]),
    ("celu_", lambda t: F.celu(t * 1.0, inplace=True), "CeluBackward1",
     [-1.0, -0.9984965608070224, -0.9975212478233336, -0.950212931632136, -0.6321205588285577, -0.3934693402873666, 0.0, 0.5, 1.0, 3.0, 6.5, inf, nan],
     [0.0, 0.004510317578932721, 0.00743625652999913, inf, -0.36787944117144233, 3.032653298563167, inf, 1.0, 3.0, -inf, 2.0, 3.0, 3.0]),
    ("leaky_relu_", lambda t: F.leaky_relu(t * 1.0, 0.2, inplace=True), "LeakyReluBackward1",
     [-inf, -1.3, -1.2000000000000002, -0.6000000000000001, -0.2, -0.1, 0.0, 0.5, 1.0, 3.0, 6.5, inf, nan],
     [0.4, 0.6000000000000001, 0.6000000000000001, inf, -0.2, 1.0, inf, 1.0, 3.0, -inf, 2.0, 3.0, 0.6000000000000001]),
    ("hardsigmoid", lambda t: F.hardsigmoid(t), "HardsigmoidBackward0",  # 1.0f / 6.0f
     [0.0, 0.0, 0.0, 0.0, 0.3333333333333333, 0.4166666666666667, 0.5, 0.5833333333333334, 0.6666666666666666, 1.0, 1.0, 1.0, nan],
     [0.0, 0.0, 0.0, 0.0, -0.1666666716337204, 0.833333358168602, inf, 0.1666666716337204, 0.5000000149011612, 0.0, 0.0, 0.0, 0.0]),
    ("hardswish", lambda t: F.hardswish(t), "HardswishBackward0",
     [nan, -0.0, -0.0, -0.0, -0.3333333333333333, -0.20833333333333334, 0.0, 0.2916666666666667, 0.6666666666666666, 3.0, 6.5, inf, nan],
     [0.0, 0.0, 0.0, 0.0, -0.16666666666666669, 1.666666666666667, inf, 0.6666666666666666, 2.5, -inf, 2.0, 3.0, 3.0]),
    ("hardswish_", lambda t: F.hardswish(t * 1.0, inplace=True), "HardswishBackward0",
     [nan, -0.0, -0.0, -0.0, -0.3333333333333333, -0.20833333333333334, 0.0, 0.2916666666666667, 0.6666666666666666, 3.0, 6.5, inf, nan],
     [0.0, 0.0, 0.0, 0.0, -0.16666666666666669, 1.666666666666667, inf, 0.6666666666666666, 2.5, -inf, 2.0, 3.0, 3.0]),
    ("logsigmoid", lambda t: F.logsigmoid(t), "LogSigmoidBackward0",
     [-inf, -6.501502310159754, -6.00247568513773, -3.048587351573742, -1.3132616875182228, -0.9740769841801067, -0.6931471805599453, -0.4740769841801067, -0.31326168751822286, -0.04858735157374206, -0.0015023101597542838, 0.0, nan],
     [2.0, 2.995496453229789, 2.9925821305300957, inf, -0.7310585786300049, 3.1122966560092724, inf, 0.37754066879814546, 0.8068242641099853, -inf, 0.003002364513473983, 0.0, nan]),
    ("mish", lambda t: F.mish(t), "MishBackward0",
     [nan, -0.00976500869207133, -0.014854080479424995, -0.1456474612756246, -0.30340146137410895, -0.22074377465173, 0.0, 0.3752452113048951, 0.8650983882673103, 2.9865350049679575, 6.499970703939837, inf, nan],
     [nan, -0.024766060850418402, -0.03707990379534393, -inf, -0.059216755877395014, 1.4475533895675614, inf, 0.8864243753577272, 3.1471086602993767, -inf, 2.0001079938897086, nan, nan]),
    ("hardshrink(1)", lambda t: F.hardshrink(t, 1.0), "HardshrinkBackward0",
     [-inf, -6.5, -6.0, -3.0, 0.0, 0.0, 0.0, 0.0, 0.0, 3.0, 6.5, inf, nan],
     [2.0, 3.0, 3.0, inf, 0.0, 0.0, 0.0, 0.0, 0.0, -inf, 2.0, 3.0, 3.0]),
    ("softshrink", lambda t: F.softshrink(t), "SoftshrinkBackward0",
     [-inf, -6.0, -5.5, -2.5, -0.5, 0.0, 0.0, 0.0, 0.5, 2.5, 6.0, inf, nan],
     [2.0, 3.0, 3.0, inf, -1.0, 0.0, 0.0, 0.0, 3.0, -inf, 2.0, 3.0, 3.0]),
    ("tanhshrink", lambda t: F.tanhshrink(t), "SubBackward0",
     [-inf, -5.500004520648596, -5.000012288349204, -2.0049452463132695, -0.23840584404423515, -0.03788284273999026, 0.0, 0.03788284273999026, 0.23840584404423515, 2.0049452463132695, 5.500004520648596, inf, nan],
     [2.0, 2.999972876169734, 2.999926270357784, nan, -0.5800256583859739, 1.067761335170363, nan, 0.2135522670340726, 1.7400769751579217, nan, 1.9999819174464892, 3.0, nan]),
]


# -inf * 0 (hardswish, mish at -inf; tanhshrink's inf - inf) is NaN here as in PyTorch.
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("label,call,node,values,grad", SMOOTH, ids=[r[0] for r in SMOOTH])
def test_smooth_activations_match_torch_at_special_inputs(label, call, node, values, grad, dtype):
    x = ag.tensor(np.array(XS, dtype=dtype), requires_grad=True)
    y = call(x)
    assert y.grad_fn.name() == node
    y.backward(ag.tensor(np.array(GS, dtype=dtype)))
    rtol = 1e-12 if dtype == np.float64 else 2e-6
    np.testing.assert_allclose(y.detach().numpy(), values, rtol=rtol, atol=1e-300)
    np.testing.assert_allclose(x.grad.numpy(), grad, rtol=rtol, atol=1e-300)


# (call, torch's g = grad of the call at x with upstream v, torch's d(g . w)/dv)
DOUBLE = [
    (lambda t: F.relu(t), [0.0, 2.0, 3.0, 4.0, 5.0], [0.0, 20.0, 30.0, 40.0, 50.0]),
    (lambda t: F.hardtanh(t, -1.0, 2.0), [0.0, 2.0, 0.0, 4.0, 5.0], [0.0, 20.0, 0.0, 40.0, 50.0]),
    (lambda t: F.threshold(t, 0.5, -3.0), [0.0, 0.0, 3.0, 4.0, 5.0], [0.0, 0.0, 30.0, 40.0, 50.0]),
]


@pytest.mark.parametrize("call,g_torch,gv_torch", DOUBLE, ids=["relu", "hardtanh", "threshold"])
def test_double_backward_is_the_same_select(call, g_torch, gv_torch):
    # The gradient is linear in the upstream gradient v: its derivative is the mask again.
    # (torch's d/dx of it is zeros; here x is not on g's graph, the same as a zero.)
    x = ag.tensor(np.array([-1.0, 0.5, 2.0, 1.5, nan]), requires_grad=True)
    v = ag.tensor(np.array([1.0, 2.0, 3.0, 4.0, 5.0]), requires_grad=True)
    (g,) = ag.grad(call(x), x, v, create_graph=True)
    assert g.requires_grad
    np.testing.assert_array_equal(g.detach().numpy(), g_torch)
    (gv,) = ag.grad(g, v, ag.tensor(np.array([10.0, 20.0, 30.0, 40.0, 50.0])))
    np.testing.assert_array_equal(gv.numpy(), gv_torch)


# The select helper on every dtype it takes the bit path for, and the where it falls back to.
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.complex128])
def test_grad_unless_is_an_exact_select(dtype):
    g = np.array([inf, -inf, nan, -0.0, 1.5, -2.25, 3.0], dtype=dtype)
    zero = np.array([True, False, True, False, True, False, False])
    with np.errstate(all="raise"):
        out = grad_unless(ArrayF(np), g, zero.copy())
    assert out.dtype == np.dtype(dtype) and out.shape == g.shape
    # an array of its own, which AccumulateGrad takes over rather than copies
    assert out.base is None and out.flags.owndata
    expected = np.where(zero, np.zeros((), dtype), g)
    # Bit for bit: +0 at the masked places, the gradient (its inf, NaN, -0.0) elsewhere.
    np.testing.assert_array_equal(out.view(np.uint8), expected.view(np.uint8))


def test_grad_unless_on_a_strided_gradient():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    g = base[:, ::2].T                          # neither C- nor F-contiguous
    zero = (np.arange(12).reshape(3, 4) % 3) == 0
    out = grad_unless(ArrayF(np), g, zero.copy())
    np.testing.assert_array_equal(out, np.where(zero, np.float32(0), g))


@pytest.mark.parametrize("inplace", [False, True])
def test_nn_threshold_module(inplace):
    m = ag.nn.Threshold(0.1, 20.0, inplace=inplace)
    assert repr(m) == "Threshold(threshold=0.1, value=20.0" + (", inplace=True)" if inplace else ")")
    x = ag.tensor(np.array([-1.0, 0.1, 0.2]), requires_grad=True)
    y = m(x * 1.0)
    # torch: tensor([20.0, 20.0, 0.2]), ThresholdBackward0 / ThresholdBackward1 in place
    np.testing.assert_array_equal(y.detach().numpy(), [20.0, 20.0, 0.2])
    assert y.grad_fn.name() == ("ThresholdBackward1" if inplace else "ThresholdBackward0")
