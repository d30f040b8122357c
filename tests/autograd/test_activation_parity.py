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
