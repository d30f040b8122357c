"""RNNCell, LSTMCell and GRUCell (issue 28) against PyTorch: outputs and gradients pinned
from PyTorch 2.x with the same float64 weights (torch is not needed to run these), finite
differences, PyTorch's parameter names, defaults and errors; and the state_dict keys of the
multi-layer modules."""
import numpy as np
import pytest

from gradtrace import autograd as ag
from gradtrace.autograd import nn

from .gradcheck import check_grad

X = np.array([[0.001230153357, 0.298745537508], [-0.274137855362, -0.890591838757]])
H0 = np.array([[-0.454670785172, -0.991646554996], [0.060143602597, 1.340215245555]])
C0 = np.array([[-0.492206518551, -0.62047489982], [0.489842050185, 0.35688700816]])
# The loss: sum(h * U_H) (+ sum(c * U_C) for the LSTM cell).
U_H = np.array([[1.0, -2.0], [0.5, 3.0]])
U_C = np.array([[-1.0, 0.25], [2.0, 1.0]])

# torch.nn.<Cell>(2, 2).double() with these weights; outputs and .grad after backward.
PINNED = {
    "RNNCell": dict(
        out=[[[0.934029401502, -0.817446443039], [0.182121166092, -0.731965640498]]],
        gx=[[-0.404158255412, 0.256054818747], [0.861086268711, -0.026685132073]],
        gh=[[-0.208033386298, -0.015043098055], [0.324701333732, -0.166512843566]],
        weight_ih=[[-0.132365655026, -0.392409623845], [-0.382602291575, -1.438544838602]],
        weight_hh=[[-0.028936649667, 0.521358144519], [0.385463266469, 2.524509090113]],
        bias_ih=[0.61100501756, 0.729116277866],
        bias_hh=[0.61100501756, 0.729116277866]),
    "LSTMCell": dict(
        out=[[[-0.065893812545, 0.037561095101], [0.071917885899, -0.136911250834]],
             [[-0.197094397426, 0.09181643576], [0.279035071848, -0.415600497935]]],
        gx=[[-0.263334912545, 0.190754405919], [0.619240624023, -0.634726408138]],
        gh=[[0.264432426773, 0.117864967928], [-0.929926246444, -0.937355166239]],
        gc=[[-0.576707552733, -0.205203564667], [1.136815460636, 0.408727910182]],
        weight_ih=[[-0.007027711052, -0.045992198192], [0.077143269552, 0.223374651438],
                   [-0.070839557596, -0.218040221689], [-0.031209010017, -0.07752417584],
                   [-0.165652693365, -0.612665316961], [-0.179523435879, -0.628945381171],
                   [-0.00730501236, -0.036576748697], [0.073338701264, 0.225196859232]],
        weight_hh=[[0.037248461933, 0.111807940262], [0.025071169013, -0.286048611997],
                   [-0.003106674534, 0.305873371367], [-0.029943864137, 0.072773375826],
                   [0.151210330953, 1.05900591437], [0.109881868453, 1.03057212127],
                   [0.021405116027, 0.078666152526], [0.004041965219, -0.314873266104]],
        bias_ih=[-0.053296528916, -0.374238009047, 0.299631976163, 0.195173193466,
                 0.350344640564, 0.49902906727, -0.017127595782, -0.312027922162],
        bias_hh=[-0.053296528916, -0.374238009047, 0.299631976163, 0.195173193466,
                 0.350344640564, 0.49902906727, -0.017127595782, -0.312027922162]),
    "GRUCell": dict(
        out=[[[-0.457395393097, -0.301877089863], [-0.087647563412, 0.469372341889]]],
        gx=[[-0.734822545858, -0.324604411973], [1.352428367472, -0.354066250956]],
        gh=[[0.164779401448, -0.538201644024], [0.215300467955, 1.656496141457]],
        weight_ih=[[0.010032442493, 0.082632100156], [0.050438056396, 0.15584584728],
                   [-0.007930634853, -0.025510376389], [-0.357122113109, -1.026824305764],
                   [-0.079950973071, -0.100571627064], [-0.347652166795, -1.525099850118]],
        weight_hh=[[-7.934488662622e-02, -2.163782657712e-01],
                   [1.286491370809e-03, -2.197905263086e-01],
                   [1.348517680302e-03, 3.792260412252e-02],
                   [-1.272429393116e-01, 1.299964638831e+00],
                   [-9.468761314601e-02, -1.237590732423e-01],
                   [2.316420840264e-01, 1.205291261288e+00]],
        bias_ih=[0.133935941174, -0.211293370377, 0.02979458413, 1.75718787472,
                 0.834070422324, -0.080295057483],
        bias_hh=[0.133935941174, -0.211293370377, 0.02979458413, 1.75718787472,
                 0.285757760814, 0.146155515816]),
}
GATES = {"RNNCell": 1, "LSTMCell": 4, "GRUCell": 3}
NAMES = ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]


def _cell(name):
    """The cell (2, 2) in float64 with the weights the pinned numbers were made with."""
    gates = GATES[name]
    rng = np.random.default_rng(11)
    shapes = [(gates * 2, 2), (gates * 2, 2), (gates * 2,), (gates * 2,)]
    weights = [rng.standard_normal(s) * 0.5 for s in shapes]
    cell = getattr(nn, name)(2, 2, dtype=ag.float64)
    cell.load_state_dict({n: ag.tensor(w) for n, w in zip(NAMES, weights)})
    return cell


def _close(actual, expected):
    np.testing.assert_allclose(actual, np.asarray(expected), rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("name", list(PINNED))
def test_cell_outputs_and_gradients_match_pytorch(name):
    cell, want = _cell(name), PINNED[name]
    x, h = ag.tensor(X, requires_grad=True), ag.tensor(H0, requires_grad=True)
    c = ag.tensor(C0, requires_grad=True)
    if name == "LSTMCell":
        outs = cell(x, (h, c))
        loss = (outs[0] * ag.tensor(U_H)).sum() + (outs[1] * ag.tensor(U_C)).sum()
    else:
        outs = (cell(x, h),)
        loss = (outs[0] * ag.tensor(U_H)).sum()
    loss.backward()
    for out, expected in zip(outs, want["out"]):
        _close(out.detach().numpy(), expected)
    _close(x.grad.numpy(), want["gx"])
    _close(h.grad.numpy(), want["gh"])
    if name == "LSTMCell":
        _close(c.grad.numpy(), want["gc"])
    for n in NAMES:
        _close(getattr(cell, n).grad.numpy(), want[n])


@pytest.mark.parametrize("name", list(PINNED))
def test_cell_gradients_match_finite_differences(name):
    cell = _cell(name)
    params = [getattr(cell, n) for n in NAMES]
    x, h, c = (ag.tensor(a, requires_grad=True) for a in (X, H0, C0))

    def fn(x, h, c, *ws):
        for n, w in zip(NAMES, ws):   # the moved weights in the parameters' place
            cell._parameters[n] = w
        out = cell(x, (h, c)) if name == "LSTMCell" else (cell(x, h),)
        return tuple(out)

    check_grad(fn, [x, h, c, *params])


@pytest.mark.parametrize("name", list(PINNED))
def test_cell_defaults_unbatched_and_no_bias(name):
    cell = _cell(name)
    lstm = name == "LSTMCell"
    # hx omitted: zeros, as PyTorch's.
    zeros = ag.zeros(2, 2, dtype=ag.float64)
    got = cell(ag.tensor(X))
    ref = cell(ag.tensor(X), (zeros, zeros) if lstm else zeros)
    for a, b in zip(got if lstm else [got], ref if lstm else [ref]):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    # Unbatched: a 1-D input and state give the batched row, without the batch dim.
    one = cell(ag.tensor(X[1]), (ag.tensor(H0[1]), ag.tensor(C0[1])) if lstm else ag.tensor(H0[1]))
    both = cell(ag.tensor(X), (ag.tensor(H0), ag.tensor(C0)) if lstm else ag.tensor(H0))
    for a, b in zip(one if lstm else [one], both if lstm else [both]):
        assert a.shape == (2,)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy()[1], rtol=1e-12)
    bare = getattr(nn, name)(3, 4, bias=False)
    assert [n for n, _ in bare.named_parameters()] == ["weight_ih", "weight_hh"]
    assert bare.bias_ih is None and bare.bias_hh is None
    assert repr(bare) == f"{name}(3, 4, bias=False)"
    assert tuple(bare.weight_ih.shape) == (4 * GATES[name], 3)
    out = bare(ag.randn(5, 3))
    assert tuple((out[0] if lstm else out).shape) == (5, 4)


def test_cell_initialisation_bound():
    cell = nn.LSTMCell(3, 16)
    for p in cell.parameters():
        assert np.abs(p.detach().numpy()).max() <= 0.25


def test_rnn_cell_relu_and_unknown_nonlinearity():
    cell = nn.RNNCell(2, 2, nonlinearity="relu", dtype=ag.float64)
    assert repr(cell) == "RNNCell(2, 2, nonlinearity=relu)"
    w = [getattr(cell, n).detach().numpy() for n in NAMES]
    expected = np.maximum(X @ w[0].T + w[2] + H0 @ w[1].T + w[3], 0)
    got = cell(ag.tensor(X), ag.tensor(H0)).detach().numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    bad = nn.RNNCell(2, 2, nonlinearity="foo")
    with pytest.raises(RuntimeError, match="Unknown nonlinearity: foo"):
        bad(ag.randn(1, 2))


@pytest.mark.parametrize("name", list(PINNED))
def test_cell_errors_are_pytorchs(name):
    cell = getattr(nn, name)(3, 4)
    lstm = name == "LSTMCell"

    def state(*shape):
        return (ag.randn(*shape), ag.randn(*shape)) if lstm else ag.randn(*shape)

    with pytest.raises(RuntimeError, match="input has inconsistent input_size: got 5 expected 3"):
        cell(ag.randn(2, 5))
    with pytest.raises(ValueError, match=f"{name}: Expected input to be 1D or 2D, got 3D instead"):
        cell(ag.randn(2, 2, 3))
    with pytest.raises(RuntimeError, match="Input batch size 2 doesn't match hidden0 batch size 3"):
        cell(ag.randn(2, 3), state(3, 4))
    with pytest.raises(RuntimeError, match="hidden0 has inconsistent hidden_size: got 2, "
                                           "expected 4"):
        cell(ag.randn(2, 3), state(2, 2))
    hidden = "hx\\[0\\]" if lstm else "hidden"
    with pytest.raises(ValueError, match=f"{name}: Expected {hidden} to be 1D or 2D, got 3D"):
        cell(ag.randn(2, 3), state(1, 2, 4))


# PyTorch 2.x's state_dict keys, in order.
_KEYS_2_LAYERS_BIDIRECTIONAL = [
    f"{w}_l{layer}{s}" for layer in range(2) for s in ("", "_reverse")
    for w in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN])
def test_module_state_dict_keys_are_pytorchs(cls):
    m = cls(3, 4, num_layers=2, bidirectional=True)
    assert list(m.state_dict()) == _KEYS_2_LAYERS_BIDIRECTIONAL
    gates = {nn.LSTM: 4, nn.GRU: 3, nn.RNN: 1}[cls]
    assert tuple(m.weight_ih_l1_reverse.shape) == (gates * 4, 8)
    assert list(cls(3, 4, bias=False).state_dict()) == ["weight_ih_l0", "weight_hh_l0"]


def test_lstm_proj_size_is_pytorchs():
    m = nn.LSTM(3, 5, num_layers=2, bidirectional=True, proj_size=2)
    keys = [f"{w}_l{layer}{s}" for layer in range(2) for s in ("", "_reverse")
            for w in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")]
    assert list(m.state_dict()) == keys
    assert repr(m) == "LSTM(3, 5, proj_size=2, num_layers=2, bidirectional=True)"
    shapes = {k: tuple(v.shape) for k, v in m.state_dict().items()}
    assert shapes["weight_hh_l0"] == (20, 2) and shapes["weight_hr_l0"] == (2, 5)
    assert shapes["weight_ih_l1"] == (20, 4)   # the layer below's projected output, twice
    out, (h, c) = m(ag.randn(4, 2, 3))
    assert out.shape == (4, 2, 4) and h.shape == (4, 2, 2) and c.shape == (4, 2, 5)
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        nn.LSTM(3, 5, proj_size=5)
    with pytest.raises(ValueError, match="proj_size should be a positive integer or zero"):
        nn.LSTM(3, 5, proj_size=-1)
