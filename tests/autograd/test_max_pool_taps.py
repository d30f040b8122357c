"""max_pool2d's forward, one pass per kernel tap, against PyTorch's CPU kernel written as loops.

The reference is aten's rule, window by window: start at the dtype's lowest value and take an
entry when it is larger or NaN (so ties keep the first entry and a window's last NaN wins),
padding never taken; indices are offsets into the unpadded H*W plane.
"""
import itertools
import math

import numpy as np
import pytest

from gradtrace import autograd
from gradtrace.autograd.nn import functional as F


def _out_size(size, k, s, p, d, ceil_mode):
    span = size + 2 * p - d * (k - 1) - 1
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:   # the last window must start inside
        out -= 1
    return out


def _reference(x, k, s, p, d, ceil_mode):
    n, c, h, w = x.shape
    ho = _out_size(h, k[0], s[0], p[0], d[0], ceil_mode)
    wo = _out_size(w, k[1], s[1], p[1], d[1], ceil_mode)
    values = np.empty((n, c, ho, wo), x.dtype)
    indices = np.empty((n, c, ho, wo), np.int64)
    for b, ch, i, j in itertools.product(range(n), range(c), range(ho), range(wo)):
        best, arg = -math.inf, -1
        for a, e in itertools.product(range(k[0]), range(k[1])):
            r, q = i * s[0] - p[0] + a * d[0], j * s[1] - p[1] + e * d[1]
            if 0 <= r < h and 0 <= q < w:
                v = x[b, ch, r, q]
                if v > best or math.isnan(v):
                    best, arg = v, r * w + q
        values[b, ch, i, j], indices[b, ch, i, j] = best, arg
    return values, indices


CONFIGS = [((2, 2), (2, 2), (0, 0), (1, 1), False),
           ((3, 3), (3, 3), (0, 0), (1, 1), True),
           ((2, 3), (1, 2), (1, 1), (1, 1), False),
           ((3, 2), (2, 1), (1, 0), (2, 1), True),
           ((3, 3), (2, 2), (1, 1), (2, 2), False)]


@pytest.mark.parametrize("k,s,p,d,ceil_mode", CONFIGS)
def test_values_and_indices_match_the_reference(k, s, p, d, ceil_mode):
    rng = np.random.default_rng(0)
    x = rng.integers(-3, 3, (2, 2, 9, 10)).astype(np.float64)   # many ties
    x[0, 0, 1, 1] = np.nan
    x[1, 1, 4, 4:6] = np.nan          # two NaNs in one window: PyTorch indexes the last
    values, indices = F.max_pool2d(autograd.tensor(x), k, s, p, d, ceil_mode,
                                   return_indices=True)
    want_values, want_indices = _reference(x, k, s, p, d, ceil_mode)
    np.testing.assert_array_equal(values.numpy(), want_values)
    np.testing.assert_array_equal(indices.numpy(), want_indices)


def test_two_nans_in_a_window_index_the_last_as_pytorch():
    x = np.array([[[[np.nan, 1.0], [np.nan, 0.0]]]])
    # torch.nn.functional.max_pool2d(torch.tensor(x), 2, return_indices=True) -> nan, 2
    values, indices = F.max_pool2d(autograd.tensor(x), 2, return_indices=True)
    assert math.isnan(values.item()) and indices.item() == 2


def test_integer_input_and_gradient_of_the_taps():
    x = autograd.tensor(np.arange(16.0).reshape(1, 1, 4, 4)[..., ::-1].copy(),
                        requires_grad=True)
    F.max_pool2d(x, 2).sum().backward()
    want = np.zeros((4, 4))
    want[[1, 1, 3, 3], [0, 2, 0, 2]] = 1.0   # columns reversed: each window's max bottom left
    np.testing.assert_array_equal(x.grad.numpy()[0, 0], want)
    xi = autograd.tensor(np.array([[[[3, 7], [7, -2]]]], dtype=np.int64))
    v, i = F.max_pool2d(xi, 2, return_indices=True)
    assert v.item() == 7 and i.item() == 1
