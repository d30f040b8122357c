"""conv2d's array kernels (ops/conv_arrays.py): the chunked forward and backward equal the
differentiable rules (whole batch, compact col2im) for every chunk size, stride, padding,
dilation and groups; and the gradient of a batch split into several chunks matches finite
differences."""
import numpy as np
import pytest

from gradtrace import autograd as ag
from gradtrace.autograd.dispatch import ArrayF
from gradtrace.autograd.nn import functional as F
from gradtrace.autograd.ops import conv_arrays
from gradtrace.autograd.ops import nn as ops_nn

from .gradcheck import check_grad

AF = ArrayF(np)
CONFIGS = [  # (x shape, weight shape, stride, padding, dilation, groups)
    ((3, 2, 7, 6), (4, 2, 3, 3), (1, 1), (0, 0), (1, 1), 1),
    ((3, 4, 8, 7), (6, 2, 2, 3), (1, 1), (1, 2), (2, 1), 2),
    ((2, 3, 7, 6), (4, 3, 3, 3), (2, 1), (1, 1), (1, 1), 1),
    ((2, 2, 9, 9), (3, 2, 3, 2), (2, 3), (0, 1), (1, 2), 1),
]


@pytest.fixture(params=[1, 10 ** 9], ids=["one-sample-chunks", "one-chunk"])
def chunk_bytes(request, monkeypatch):
    monkeypatch.setattr(conv_arrays, "CHUNK_BYTES", request.param)
    return request.param


@pytest.mark.parametrize("cfg", CONFIGS)
def test_kernels_equal_the_rules(cfg, chunk_bytes):
    xs, ws, stride, padding, dilation, groups = cfg
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(ws[0])
    out = conv_arrays.forward(np, x, w, b, stride, padding, dilation, groups)
    attrs = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    ref = F.conv2d(ag.tensor(x), ag.tensor(w), ag.tensor(b), **attrs).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)
    g = rng.standard_normal(out.shape)
    gi = conv_arrays.input_grad(np, g, w, x.shape, stride, padding, dilation, groups)
    gw = conv_arrays.weight_grad(np, g, x, w.shape, stride, padding, dilation, groups)
    np.testing.assert_allclose(gi, ops_nn._conv2d_grad_input(AF, g, out, x, w, b, **attrs),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gw, ops_nn._conv2d_grad_weight(AF, g, out, x, w, b, **attrs),
                               rtol=1e-12, atol=1e-12)


def test_chunked_gradient_matches_finite_differences(monkeypatch):
    monkeypatch.setattr(conv_arrays, "CHUNK_BYTES", 1)   # one sample a chunk
    rng = np.random.default_rng(1)
    x, w, b = (ag.tensor(rng.standard_normal(s), requires_grad=True)
               for s in ((3, 2, 6, 5), (3, 2, 3, 2), (3,)))
    check_grad(lambda x, w, b: F.conv2d(x, w, b, padding=1, dilation=(1, 2)), [x, w, b])


def test_chunk_size():
    assert conv_arrays.chunk_size(np, 64, conv_arrays.CHUNK_BYTES // 3) == 3
    assert conv_arrays.chunk_size(np, 64, conv_arrays.CHUNK_BYTES * 4) == 1
    assert conv_arrays.chunk_size(np, 2, 1) == 2
    assert conv_arrays.chunk_size(object(), 64, 10 ** 9) == 64   # not NumPy: the whole batch
