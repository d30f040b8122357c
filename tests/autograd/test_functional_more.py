"""Issue 14's functional pieces: values against NumPy versions of PyTorch's documented
formulas (PyTorch's own value where a specific number is quoted), gradients against finite
differences in float64."""
import math

import numpy as np
import pytest

from gradtrace import autograd as ag
from gradtrace.autograd.nn import functional as F

from .gradcheck import check_grad

X = np.array([-3.5, -1.0, -0.2, 0.3, 2.0, 4.0])


def t64(a, grad=True):
    return ag.tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


def sp(z):
    return np.logaddexp(0.0, z)


ALPHA, SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
ACTIVATIONS = [
    ("elu", lambda x: F.elu(x, 0.7), lambda x: np.where(x > 0, x, 0.7 * np.expm1(x))),
    ("selu", F.selu, lambda x: SCALE * np.where(x > 0, x, ALPHA * np.expm1(x))),
    ("celu", lambda x: F.celu(x, 2.0), lambda x: np.maximum(x, 0) + np.minimum(0, 2 * np.expm1(x / 2))),
    ("relu6", F.relu6, lambda x: np.clip(x, 0, 6)),
    ("hardtanh", lambda x: F.hardtanh(x, -2.0, 1.5), lambda x: np.clip(x, -2, 1.5)),
    ("hardsigmoid", F.hardsigmoid, lambda x: np.clip(x / 6 + 0.5, 0, 1)),
    ("hardswish", F.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    ("mish", F.mish, lambda x: x * np.tanh(sp(x))),
    ("logsigmoid", F.logsigmoid, lambda x: -sp(-x)),
    ("softsign", F.softsign, lambda x: x / (1 + np.abs(x))),
]


@pytest.mark.parametrize("name,fn,ref", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_values_and_gradients(name, fn, ref):
    np.testing.assert_allclose(fn(t64(X, False)).numpy(), ref(X), rtol=1e-12, atol=1e-12)
    # away from the kinks (finite differences straddling one would not be a derivative)
    pts = np.array([-3.7, -1.3, -0.4, 0.6, 1.1, 2.3])
    check_grad(fn, [t64(pts)])


def test_activation_specific_values():
    # PyTorch: F.selu(torch.tensor(-1.)) = -1.1113, F.mish(torch.tensor(1.)) = 0.8651,
    # F.logsigmoid(torch.tensor(-100.)) = -100.0 (no -inf), F.hardswish(torch.tensor(1.)) = 0.6667
    assert F.selu(ag.tensor(-1.0)).item() == pytest.approx(-1.1113, abs=1e-4)
    assert F.mish(ag.tensor(1.0)).item() == pytest.approx(0.8651, abs=1e-4)
    assert F.logsigmoid(ag.tensor(-100.0)).item() == pytest.approx(-100.0)
    assert F.logsigmoid(ag.tensor(100.0)).item() == pytest.approx(0.0, abs=1e-30)
    assert F.hardswish(ag.tensor(1.0)).item() == pytest.approx(2 / 3, abs=1e-6)


def test_softmin_glu():
    a = np.random.default_rng(0).standard_normal((3, 4))
    e = np.exp(-a)
    np.testing.assert_allclose(F.softmin(t64(a, False), 1).numpy(), e / e.sum(1, keepdims=True))
    np.testing.assert_allclose(F.glu(t64(a, False), -1).numpy(),
                               a[:, :2] / (1 + np.exp(-a[:, 2:])))
    check_grad(lambda x: F.softmin(x, 0), [t64(a)])
    check_grad(lambda x: F.glu(x, 1), [t64(a)])
    with pytest.raises(RuntimeError, match="even"):
        F.glu(ag.randn(3, 3))


def test_distances():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    np.testing.assert_allclose(F.cosine_similarity(t64(a, False), t64(b, False)).numpy(),
                               (a * b).sum(1) / (na * nb))
    np.testing.assert_allclose(F.normalize(t64(a, False), dim=1).numpy(), a / na[:, None])
    np.testing.assert_allclose(F.pairwise_distance(t64(a, False), t64(b, False)).numpy(),
                               np.linalg.norm(a - b + 1e-6, axis=1))
    check_grad(lambda x, y: F.cosine_similarity(x, y, dim=1), [t64(a), t64(b)])
    check_grad(lambda x: F.normalize(x, p=2.0, dim=0), [t64(a)])
    check_grad(lambda x, y: F.pairwise_distance(x, y), [t64(a), t64(b)])


@pytest.mark.parametrize("mode,expected", [
    # PyTorch's documented examples for a row [0, 1, 2, 3] padded by (2, 2) / (2, 1)
    ("reflect", [2, 1, 0, 1, 2, 3, 2, 1]),
    ("replicate", [0, 0, 0, 1, 2, 3, 3, 3]),
    ("circular", [2, 3, 0, 1, 2, 3, 0, 1]),
])
def test_pad_modes(mode, expected):
    x = ag.tensor([[[0.0, 1.0, 2.0, 3.0]]])
    assert F.pad(x, (2, 2), mode=mode).tolist() == [[expected]]
    m = np.arange(12.0).reshape(1, 1, 3, 4)
    npmode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    np.testing.assert_array_equal(F.pad(t64(m, False), (1, 2, 2, 1), mode=mode).numpy(),
                                  np.pad(m, ((0, 0), (0, 0), (2, 1), (1, 2)), mode=npmode))
    check_grad(lambda v: F.pad(v, (1, 2, 2, 1), mode=mode), [t64(m)])


def test_pad_negative_crops():
    x = t64(np.arange(10.0).reshape(2, 5))
    out = F.pad(x, (-1, 2, 1, -1), value=9.0)
    assert out.tolist() == [[9, 9, 9, 9, 9, 9], [1, 2, 3, 4, 9, 9]]
    check_grad(lambda v: F.pad(v, (-2, 1)), [x])
    with pytest.raises(RuntimeError, match="reflect"):
        F.pad(ag.zeros(1, 1, 3), (3, 0), mode="reflect")


def _avg_ref(x, k, s, p, ceil_mode, count_include_pad):
    """PyTorch's avg_pool2d loop (aten AvgPool2d.cpp's window and divisor rules)."""
    h, w = x.shape[-2:]

    def out_size(n):
        span = n + 2 * p - k
        o = (-(-span // s) if ceil_mode else span // s) + 1
        return o - 1 if ceil_mode and (o - 1) * s >= n + p else o

    oh, ow = out_size(h), out_size(w)
    out = np.zeros(x.shape[:-2] + (oh, ow))
    for i in range(oh):
        for j in range(ow):
            h0, w0 = i * s - p, j * s - p
            h1, w1 = min(h0 + k, h + p), min(w0 + k, w + p)
            size = (h1 - h0) * (w1 - w0)
            h0c, w0c, h1c, w1c = max(h0, 0), max(w0, 0), min(h1, h), min(w1, w)
            win = x[..., h0c:h1c, w0c:w1c]
            div = size if count_include_pad else (h1c - h0c) * (w1c - w0c)
            out[..., i, j] = win.sum((-1, -2)) / div
    return out


@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize("count_include_pad", [False, True])
def test_avg_pool2d_options(ceil_mode, count_include_pad):
    x = np.random.default_rng(2).standard_normal((2, 3, 5, 6))
    got = F.avg_pool2d(t64(x, False), 3, 2, 1, ceil_mode, count_include_pad).numpy()
    np.testing.assert_allclose(got, _avg_ref(x, 3, 2, 1, ceil_mode, count_include_pad))
    check_grad(lambda v: F.avg_pool2d(v, 3, 2, 1, ceil_mode, count_include_pad), [t64(x)])
    div = F.avg_pool2d(t64(x, False), 2, divisor_override=3).numpy()
    np.testing.assert_allclose(div, x[..., :4, :6].reshape(2, 3, 2, 2, 3, 2).sum((3, 5)) / 3)


def test_max_pool_ceil_mode_and_1d():
    x = np.arange(25.0).reshape(1, 1, 5, 5)
    # PyTorch: 5x5, kernel 2, stride 2: 2x2 output, 3x3 with ceil_mode
    assert F.max_pool2d(t64(x, False), 2).shape == (1, 1, 2, 2)
    out = F.max_pool2d(t64(x, False), 2, ceil_mode=True)
    assert out.numpy()[0, 0].tolist() == [[6, 8, 9], [16, 18, 19], [21, 23, 24]]
    seq = np.random.default_rng(3).standard_normal((2, 3, 7))
    got = F.max_pool1d(t64(seq, False), 3, 2).numpy()
    np.testing.assert_allclose(got, np.stack([seq[..., i:i + 3].max(-1) for i in (0, 2, 4)], -1))
    got = F.avg_pool1d(t64(seq, False), 2).numpy()
    np.testing.assert_allclose(got, seq[..., :6].reshape(2, 3, 3, 2).mean(-1))
    check_grad(lambda v: F.max_pool1d(v, 3, 2, ceil_mode=True), [t64(seq)])
    check_grad(lambda v: F.avg_pool1d(v, 3, 2, 1), [t64(seq)])


def test_adaptive_max_pool2d():
    x = np.random.default_rng(4).standard_normal((2, 2, 5, 7))
    vals, idx = F.adaptive_max_pool2d(t64(x, False), (2, 3), return_indices=True)
    for i, (h0, h1) in enumerate([(0, 3), (2, 5)]):
        for j, (w0, w1) in enumerate([(0, 3), (2, 5), (4, 7)]):
            win = x[:, :, h0:h1, w0:w1]
            np.testing.assert_allclose(vals.numpy()[:, :, i, j], win.max((2, 3)))
            flat = np.take_along_axis(x.reshape(2, 2, -1), idx.numpy()[:, :, i, j][..., None], -1)
            np.testing.assert_allclose(flat[..., 0], win.max((2, 3)))
    check_grad(lambda v: F.adaptive_max_pool2d(v, (2, 3)), [t64(x)])


def test_unfold_matches_im2col_order():
    x = np.random.default_rng(5).standard_normal((2, 3, 4, 5))
    cols = F.unfold(t64(x, False), (2, 3), padding=1, stride=(2, 1)).numpy()
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.stack([xp[:, :, i:i + 2, j:j + 3].reshape(2, -1)
                    for i in range(0, 5, 2) for j in range(0, 5)], -1)
    np.testing.assert_allclose(cols, ref)
    check_grad(lambda v: F.unfold(v, 2, dilation=2), [t64(x)])


def test_pixel_shuffle_roundtrip():
    x = np.random.default_rng(6).standard_normal((2, 8, 3, 4))
    out = F.pixel_shuffle(t64(x, False), 2).numpy()
    # PyTorch's definition: out[n, c, h*r + i, w*r + j] = in[n, c*r*r + i*r + j, h, w]
    assert out[1, 1, 2 * 2 + 1, 3 * 2 + 0] == x[1, 1 * 4 + 1 * 2 + 0, 2, 3]
    np.testing.assert_array_equal(F.pixel_unshuffle(ag.tensor(out), 2).numpy(), x)
    check_grad(lambda v: F.pixel_shuffle(v, 2), [t64(x)])


def _linear_ref(a, out_size, align_corners, axis):
    n = a.shape[axis]
    dst = np.arange(out_size, dtype=float)
    if align_corners:
        src = dst * (n - 1) / (out_size - 1) if out_size > 1 else dst * 0
    else:
        src = np.maximum((dst + 0.5) * n / out_size - 0.5, 0)
    i0 = np.floor(src).astype(int)
    i1 = np.minimum(i0 + 1, n - 1)
    lam = (src - i0).reshape([-1 if k == axis % a.ndim else 1 for k in range(a.ndim)])
    return np.take(a, i0, axis) * (1 - lam) + np.take(a, i1, axis) * lam


@pytest.mark.parametrize("align_corners", [False, True])
def test_interpolate_bilinear(align_corners):
    x = np.random.default_rng(7).standard_normal((1, 2, 3, 4))
    got = F.interpolate(t64(x, False), size=(5, 7), mode="bilinear",
                        align_corners=align_corners).numpy()
    ref = _linear_ref(_linear_ref(x, 5, align_corners, 2), 7, align_corners, 3)
    np.testing.assert_allclose(got, ref)
    check_grad(lambda v: F.interpolate(v, scale_factor=2, mode="bilinear",
                                       align_corners=align_corners), [t64(x)])


def test_interpolate_nearest_and_documented_values():
    row = ag.tensor([[[1.0, 2.0]]])
    # PyTorch: interpolate([1, 2], scale_factor=2, mode='linear') = [1, 1.25, 1.75, 2]
    assert F.interpolate(row, scale_factor=2, mode="linear").tolist() == [[[1.0, 1.25, 1.75, 2.0]]]
    assert F.interpolate(row, scale_factor=2).tolist() == [[[1.0, 1.0, 2.0, 2.0]]]
    x = np.arange(12.0).reshape(1, 1, 3, 4)
    got = F.interpolate(t64(x, False), size=(2, 6)).numpy()
    np.testing.assert_array_equal(got, x[:, :, [0, 1]][:, :, :, [0, 0, 1, 2, 2, 3]])
    check_grad(lambda v: F.interpolate(v, size=(5, 3)), [t64(x)])
    with pytest.raises(ValueError, match="align_corners"):
        F.interpolate(row, scale_factor=2, align_corners=True)


def test_instance_norm():
    x = np.random.default_rng(8).standard_normal((2, 3, 4, 5))
    m, v = x.mean((2, 3), keepdims=True), x.var((2, 3), keepdims=True)
    rm, rv = ag.zeros(3, dtype=ag.float64), ag.ones(3, dtype=ag.float64)
    w, b = t64([1.0, 2.0, 0.5]), t64([0.0, -1.0, 1.0])
    got = F.instance_norm(t64(x, False), rm, rv, w, b).detach().numpy()
    ref = (x - m) / np.sqrt(v + 1e-5) * w.detach().numpy()[:, None, None] + b.detach().numpy()[:, None, None]
    np.testing.assert_allclose(got, ref)
    np.testing.assert_allclose(rm.numpy(), 0.1 * m.reshape(2, 3).mean(0))
    np.testing.assert_allclose(rv.numpy(), 0.9 + 0.1 * (v.reshape(2, 3) * 20 / 19).mean(0))
    check_grad(lambda v_, w_, b_: F.instance_norm(v_, weight=w_, bias=b_), [t64(x), w, b])


def test_regression_losses():
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((4, 3)) * 2, rng.standard_normal((4, 3))
    d = np.abs(a - b)
    ref = np.where(d < 0.5, 0.5 * d ** 2 / 0.5, d - 0.25)
    np.testing.assert_allclose(F.smooth_l1_loss(t64(a, False), t64(b, False), beta=0.5).item(),
                               ref.mean())
    ref = np.where(d <= 0.7, 0.5 * d ** 2, 0.7 * (d - 0.35))
    np.testing.assert_allclose(F.huber_loss(t64(a, False), t64(b, False), "sum", 0.7).item(),
                               ref.sum())
    # PyTorch: smooth_l1_loss(tensor([0., 2.]), tensor([0.5, 0.])) = 0.8125 (beta=1)
    assert F.smooth_l1_loss(ag.tensor([0.0, 2.0]), ag.tensor([0.5, 0.0])).item() == pytest.approx(0.8125)
    y = np.sign(rng.standard_normal((4, 3)))
    np.testing.assert_allclose(F.soft_margin_loss(t64(a, False), t64(y, False)).item(),
                               np.log1p(np.exp(-y * a)).mean())
    check_grad(lambda u: F.smooth_l1_loss(u, t64(b, False), beta=0.5), [t64(a)])
    check_grad(lambda u: F.huber_loss(u, t64(b, False), delta=0.7), [t64(a)])
    check_grad(lambda u: F.soft_margin_loss(u, t64(y, False)), [t64(a)])


def test_kl_div():
    rng = np.random.default_rng(10)
    logits = rng.standard_normal((4, 5))
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    q = rng.random((4, 5))
    q[0, 1] = 0.0
    q /= q.sum(1, keepdims=True)
    pointwise = np.where(q > 0, q * (np.log(np.where(q > 0, q, 1)) - logp), 0.0)
    inp, tgt = t64(logp, False), t64(q, False)
    np.testing.assert_allclose(F.kl_div(inp, tgt, reduction="batchmean").item(),
                               pointwise.sum() / 4)
    np.testing.assert_allclose(F.kl_div(inp, tgt).item(), pointwise.mean())
    np.testing.assert_allclose(F.kl_div(inp, tgt, reduction="none").numpy(), pointwise)
    lq = np.log(np.where(q > 0, q, 1e-3))
    np.testing.assert_allclose(F.kl_div(inp, t64(lq, False), reduction="sum", log_target=True).item(),
                               (np.exp(lq) * (lq - logp)).sum())
    check_grad(lambda u: F.kl_div(u, tgt, reduction="batchmean"), [t64(logp)])
    check_grad(lambda u, v: F.kl_div(u, v, reduction="sum", log_target=True),
               [t64(logp), t64(lq)])
    # PyTorch: kl_div of identical distributions is 0
    assert F.kl_div(ag.tensor([[math.log(0.5)] * 2]), ag.tensor([[0.5, 0.5]]),
                    reduction="batchmean").item() == pytest.approx(0.0)
