"""Issue 14's modules: RNN/LSTM/GRU against NumPy versions of PyTorch's documented equations,
gradients by finite differences, the transformer encoder against its definition, and the
PyTorch names, shapes and keyword spellings a ported script relies on."""
import math

import numpy as np
import pytest

from gradtrace import autograd as ag
from gradtrace.autograd import nn
from gradtrace.autograd.nn import functional as F

from .gradcheck import check_grad


def sig(z):
    return 1 / (1 + np.exp(-z))


def _np(p):
    return p.detach().numpy()


def test_lstm_parameters_follow_pytorch():
    m = nn.LSTM(3, 5, num_layers=2, bidirectional=True)
    shapes = {n: tuple(p.shape) for n, p in m.named_parameters()}
    assert shapes["weight_ih_l0"] == (20, 3) and shapes["weight_hh_l0"] == (20, 5)
    assert shapes["bias_ih_l0"] == (20,) and shapes["weight_ih_l1_reverse"] == (20, 10)
    assert len(shapes) == 16
    bound = 1 / math.sqrt(5)
    assert all(np.abs(_np(p)).max() <= bound for p in m.parameters())
    assert sorted(dict(m.state_dict())) == sorted(shapes)


def test_lstm_step_matches_pytorch_equations():
    ag.manual_seed(0)
    m = nn.LSTM(3, 4, dtype=ag.float64)
    x = np.random.default_rng(0).standard_normal((1, 2, 3))
    h0, c0 = np.full((1, 2, 4), 0.1), np.full((1, 2, 4), -0.2)
    out, (h, c) = m(ag.tensor(x), (ag.tensor(h0), ag.tensor(c0)))
    gates = x[0] @ _np(m.weight_ih_l0).T + _np(m.bias_ih_l0) + h0[0] @ _np(m.weight_hh_l0).T \
        + _np(m.bias_hh_l0)
    i, f, g, o = np.split(gates, 4, -1)     # PyTorch's gate order
    c_ref = sig(f) * c0[0] + sig(i) * np.tanh(g)
    h_ref = sig(o) * np.tanh(c_ref)
    np.testing.assert_allclose(_np(c)[0], c_ref)
    np.testing.assert_allclose(_np(h)[0], h_ref)
    np.testing.assert_allclose(_np(out)[0], h_ref)


def test_gru_step_matches_pytorch_equations():
    ag.manual_seed(1)
    m = nn.GRU(3, 4, dtype=ag.float64)
    x = np.random.default_rng(1).standard_normal((1, 2, 3))
    h0 = np.random.default_rng(2).standard_normal((1, 2, 4))
    _, h = m(ag.tensor(x), ag.tensor(h0))
    gi = x[0] @ _np(m.weight_ih_l0).T + _np(m.bias_ih_l0)
    gh = h0[0] @ _np(m.weight_hh_l0).T + _np(m.bias_hh_l0)
    (ir, iz, in_), (hr, hz, hn) = np.split(gi, 3, -1), np.split(gh, 3, -1)
    r, z = sig(ir + hr), sig(iz + hz)
    n = np.tanh(in_ + r * hn)
    np.testing.assert_allclose(_np(h)[0], (1 - z) * n + z * h0[0])


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN])
def test_recurrent_gradients_by_finite_differences(cls):
    ag.manual_seed(2)
    m = cls(3, 4, num_layers=2, batch_first=True, bidirectional=True, dtype=ag.float64)
    x = ag.tensor(np.random.default_rng(3).standard_normal((2, 3, 3)), requires_grad=True)
    w = m.weight_hh_l1_reverse

    def run(inp, weight):
        saved = m.weight_hh_l1_reverse
        m._parameters["weight_hh_l1_reverse"] = weight
        try:
            return m(inp)[0]
        finally:
            m._parameters["weight_hh_l1_reverse"] = saved

    check_grad(run, [x, ag.tensor(_np(w), requires_grad=True)])


def test_recurrent_shapes():
    m = nn.LSTM(3, 4, num_layers=3, batch_first=True)
    out, (h, c) = m(ag.randn(2, 5, 3))
    assert out.shape == (2, 5, 4) and h.shape == (3, 2, 4) and c.shape == (3, 2, 4)
    out, h = nn.GRU(3, 4, bidirectional=True)(ag.randn(5, 3))    # unbatched
    assert out.shape == (5, 8) and h.shape == (2, 4)
    with pytest.raises(RuntimeError, match="input_size"):
        m(ag.randn(2, 5, 4))


def test_transformer_encoder_layer_matches_definition():
    ag.manual_seed(3)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, dtype=ag.float64)
    layer.eval()
    x = ag.tensor(np.random.default_rng(4).standard_normal((5, 2, 8)))   # (L, N, E)
    out = layer(x)
    sa = layer.self_attn(x, x, x)[0]         # seq-first, as the layer (batch_first=False)
    h = F.layer_norm(x + sa, (8,), layer.norm1.weight, layer.norm1.bias)
    ff = layer.linear2(F.relu(layer.linear1(h)))
    ref = F.layer_norm(h + ff, (8,), layer.norm2.weight, layer.norm2.bias)
    np.testing.assert_allclose(_np(out), _np(ref), rtol=1e-12, atol=1e-12)
    names = {n.split(".")[0] for n, _ in layer.named_parameters()}
    assert {"self_attn", "linear1", "linear2", "norm1", "norm2"} <= names


def test_transformer_encoder_masks_and_gradients():
    ag.manual_seed(4)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation="gelu",
                                       batch_first=True, norm_first=True, dtype=ag.float64)
    enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8, dtype=ag.float64))
    x = np.random.default_rng(5).standard_normal((2, 4, 8))
    pad = ag.tensor(np.array([[False] * 4, [False, False, True, True]]))
    out = enc(ag.tensor(x), src_key_padding_mask=pad)
    changed = x.copy()
    changed[1, 3] += 10.0           # a padded position: no other position may see it
    out2 = enc(ag.tensor(changed), src_key_padding_mask=pad)
    np.testing.assert_allclose(_np(out)[1, :2], _np(out2)[1, :2], rtol=1e-12)
    causal = ag.tensor(np.triu(np.ones((4, 4), dtype=bool), 1))    # True = masked (PyTorch)
    out3 = enc(ag.tensor(changed), mask=causal)
    out4 = enc(ag.tensor(x), mask=causal)
    np.testing.assert_allclose(_np(out3)[1, :3], _np(out4)[1, :3], rtol=1e-12)
    check_grad(lambda v: enc(v, src_key_padding_mask=pad), [ag.tensor(x, requires_grad=True)],
               atol=1e-5)


def test_activation_modules_and_input_keyword():
    x = ag.randn(3, 4)
    pairs = [(nn.ELU(0.5), lambda v: F.elu(v, 0.5)), (nn.SELU(), F.selu),
             (nn.CELU(2.0), lambda v: F.celu(v, 2.0)), (nn.ReLU6(), F.relu6),
             (nn.Hardtanh(-0.5, 0.5), lambda v: F.hardtanh(v, -0.5, 0.5)),
             (nn.Hardsigmoid(), F.hardsigmoid), (nn.Hardswish(), F.hardswish),
             (nn.Mish(), F.mish), (nn.LogSigmoid(), F.logsigmoid), (nn.Softsign(), F.softsign),
             (nn.Softmin(1), lambda v: F.softmin(v, 1)), (nn.GLU(), F.glu),
             (nn.Identity(), lambda v: v), (nn.Linear(4, 2), None), (nn.ReLU(), F.relu),
             (nn.Threshold(0.1, 2.0), lambda v: F.threshold(v, 0.1, 2.0)),
             (nn.Hardshrink(), F.hardshrink), (nn.Softshrink(0.3), lambda v: F.softshrink(v, 0.3)),
             (nn.Tanhshrink(), F.tanhshrink), (nn.PReLU(), lambda v: F.prelu(v, ag.full((1,), 0.25))),
             (nn.LeakyReLU(0.2), lambda v: F.leaky_relu(v, 0.2))]
    for mod, fn in pairs:
        out = mod(input=x)
        if fn is not None:
            np.testing.assert_array_equal(out.detach().numpy(), fn(x).detach().numpy())
    y = x * 1.0
    assert nn.LeakyReLU(0.2, inplace=True)(y) is y
    np.testing.assert_array_equal(y.numpy(), F.leaky_relu(x, 0.2).numpy())
    # torch's reprs
    assert [repr(m) for m in (nn.Hardshrink(), nn.Softshrink(0.3), nn.Tanhshrink(),
                              nn.Threshold(0.1, 2.0), nn.LeakyReLU(0.2, True), nn.PReLU())] == [
        "Hardshrink(0.5)", "Softshrink(0.3)", "Tanhshrink()", "Threshold(threshold=0.1, value=2.0)",
        "LeakyReLU(negative_slope=0.2, inplace=True)", "PReLU(num_parameters=1)"]
    assert nn.Unflatten(1, (2, 2))(x).shape == (3, 2, 2)
    assert nn.Flatten()(ag.randn(2, 3, 4)).shape == (2, 12)


def test_conv1d_batchnorm1d_groupnorm():
    ag.manual_seed(5)
    conv = nn.Conv1d(3, 4, 3, padding=1, dtype=ag.float64)
    x = ag.tensor(np.random.default_rng(6).standard_normal((2, 3, 7)))
    np.testing.assert_allclose(_np(conv(x)), _np(F.conv1d(x, conv.weight, conv.bias, 1, 1)))
    circ = nn.Conv1d(3, 4, 3, padding=1, padding_mode="circular", dtype=ag.float64)
    ref = F.conv1d(F.pad(x, (1, 1), mode="circular"), circ.weight, circ.bias)
    np.testing.assert_allclose(_np(circ(x)), _np(ref))
    assert nn.Conv1d(3, 4, 4, padding="same")(ag.randn(1, 3, 9)).shape == (1, 4, 9)
    bn = nn.BatchNorm1d(3, dtype=ag.float64)
    y = bn(x)
    xn = x.numpy()
    ref = (xn - xn.mean((0, 2), keepdims=True)) / np.sqrt(xn.var((0, 2), keepdims=True) + 1e-5)
    np.testing.assert_allclose(_np(y), ref, rtol=1e-10)
    np.testing.assert_allclose(_np(bn.running_mean), 0.1 * xn.mean((0, 2)))
    assert bn(ag.randn(4, 3, dtype=ag.float64)).shape == (4, 3)
    gn = nn.GroupNorm(1, 3, dtype=ag.float64)
    np.testing.assert_allclose(_np(gn(x)), (xn - xn.mean((1, 2), keepdims=True))
                               / np.sqrt(xn.var((1, 2), keepdims=True) + 1e-5), rtol=1e-10)


def test_loss_modules():
    a, b = ag.randn(4, 3), ag.randn(4, 3)
    assert nn.SmoothL1Loss(beta=0.5)(a, b).item() == F.smooth_l1_loss(a, b, beta=0.5).item()
    assert nn.HuberLoss(delta=2.0)(a, b).item() == F.huber_loss(a, b, delta=2.0).item()
    lp = F.log_softmax(a, 1)
    assert nn.KLDivLoss(reduction="batchmean")(lp, F.softmax(b, 1)).item() == pytest.approx(
        F.kl_div(lp, F.softmax(b, 1), reduction="batchmean").item())
    assert nn.L1Loss(reduction="sum")(a, b).item() == pytest.approx(F.l1_loss(a, b, "sum").item())
    assert nn.MaxPool1d(2)(ag.randn(2, 3, 6)).shape == (2, 3, 3)
    assert nn.AvgPool2d(3, 2, 1, ceil_mode=True)(ag.randn(1, 1, 4, 4)).shape == (1, 1, 3, 3)
    assert nn.Upsample(scale_factor=2, mode="bilinear")(ag.randn(1, 1, 2, 3)).shape == (1, 1, 4, 6)
