"""torch.mode, torch.quantile and torch.nanquantile against PyTorch 2.13's answers from the
same calls (float64; values, shapes, int64 indices, gradients for an upstream gradient of
1, 2, 3, ...), and their errors in PyTorch's words.

PyTorch's quantile is a composite (sort, gather, lerp, then an in-place ``squeeze_`` or
``transpose_``), and so is ours, with the same gradient; its last node differs: torch's is
SqueezeBackward4 (the in-place ``squeeze_.dim``), ours the out-of-place squeeze
(SqueezeBackward1) or a view, as gradtrace has no in-place squeeze.
"""
import numpy as np
import pytest

import gradtrace.autograd as ag

nan = np.nan


def _same(got, want):
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15, equal_nan=True)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


# (label, input, dim, keepdim, torch's values, indices, gradient for ones). torch: the
# smallest of the most frequent values, at its last occurrence; -0.0 and 0.0 are one value
# (the result is the entry at the index).
MODES = [
    ("ties_smallest_value", [[3., 1., 3., 1., 2.], [0., -0., 5., 5., 0.]], 1, False,
     [1., 0.], [3, 4], [[0., 0., 0., 1., 0.], [0., 0., 0., 0., 1.]]),
    ("signed_zero_last", [0., 2., 0., -0.], 0, False, -0., 3, [0., 0., 0., 1.]),
    ("all_distinct", [5., 4., 3.], -1, False, 3., 2, [0., 0., 1.]),
    ("keepdim_dim0", [[1., 2., 2.], [3., 3., 1.]], 0, True, [[1., 2., 1.]], [[0, 0, 1]],
     [[1., 1., 0.], [0., 0., 1.]]),
    ("zero_dim", 3., 0, False, 3., 0, 1.),
]


@pytest.mark.parametrize("label,x,dim,keepdim,values,indices,grad", MODES, ids=[m[0] for m in MODES])
def test_mode_matches_torch(label, x, dim, keepdim, values, indices, grad):
    t = ag.tensor(np.array(x), requires_grad=True)
    v, i = ag.mode(t, dim, keepdim)
    assert v.grad_fn.name() == "ModeBackward0"
    assert i.dtype == np.int64
    v.backward(ag.tensor(np.ones(v.shape)))
    _same(v.detach().numpy(), values)
    np.testing.assert_array_equal(i.numpy(), indices)
    np.testing.assert_array_equal(t.grad.numpy(), grad)


def test_mode_defaults_empty_and_errors():
    # torch: mode's dim defaults to -1; an empty other dim gives empty results; an empty
    # reduced dim raises IndexError "mode(): Expected reduction dim 1 to have non-zero size."
    v, i = ag.tensor(np.array([[1., 2., 2., 1.], [4., 4., 4., 1.]])).mode()
    np.testing.assert_array_equal(v.numpy(), [1., 4.])
    np.testing.assert_array_equal(i.numpy(), [3, 2])
    v, i = ag.mode(ag.zeros(0, 3), 1)
    assert v.shape == (0,) and i.shape == (0,)
    with pytest.raises(IndexError, match=r"^mode\(\): Expected reduction dim 1 to have non-zero size\.$"):
        ag.mode(ag.zeros(3, 0), -1)


def test_mode_of_integers_matches_torch():
    # torch: mode([[1, 2, 2], [3, 3, 1]], 0) -> values [1, 2, 1], indices [0, 0, 1]
    v, i = ag.mode(ag.tensor(np.array([[1, 2, 2], [3, 3, 1]])), 0)
    assert v.dtype == np.int64
    np.testing.assert_array_equal(v.numpy(), [1, 2, 1])
    np.testing.assert_array_equal(i.numpy(), [0, 0, 1])


def test_mode_counts_nans_as_one_value():
    # Deliberately not torch's: its CPU kernel sorts with ``<``, which leaves NaNs where they
    # stand and counts each NaN as a value of its own, so torch.mode([1, nan, 1]) gives
    # (1, 0) but torch.mode([nan, nan, 1, nan, 1]) gives (nan, 0). Here NaNs are one value,
    # the largest (as sort puts them): three NaNs outnumber two ones, at the last NaN.
    v, i = ag.mode(ag.tensor(np.array([nan, nan, 1., nan, 1.])), 0)
    assert np.isnan(v.item()) and i.item() == 3
    v, i = ag.mode(ag.tensor(np.array([1., nan, 1.])), 0)
    assert v.item() == 1.0 and i.item() == 2


# (label, function, input, q, keyword arguments, torch's values, shape, gradient)
QUANTILES = [
    ("quantile_linear", "quantile", [[1.0, 5.0, 2.0, 8.0], [3.0, 4.0, 4.0, 0.0]], 0.4, {'dim': 1},
     [2.6000000000000005, 3.2], [2], [[0.0, 0.20000000000000018, 0.7999999999999998, 0.0], [1.5999999999999996, 0.40000000000000036, 0.0, 0.0]]),
    ("quantile_nan_row", "quantile", [[1.0, 5.0, 2.0, 8.0], [3.0, nan, 4.0, 0.0]], 0.4, {'dim': 1},
     [2.6000000000000005, nan], [2], [[0.0, 0.20000000000000018, 0.7999999999999998, 0.0], [0.0, 2.0, 0.0, 0.0]]),
    ("nanquantile_nan_row", "nanquantile", [[1.0, 5.0, 2.0, 8.0], [3.0, nan, 4.0, 0.0]], 0.4, {'dim': 1},
     [2.6000000000000005, 2.4000000000000004], [2], [[0.0, 0.20000000000000018, 0.7999999999999998, 0.0], [1.6, 0.0, 0.0, 0.3999999999999999]]),
    ("nanquantile_all_nan", "nanquantile", [[nan, nan], [1.0, nan]], 0.3, {'dim': 1},
     [nan, 1.0], [2], [[1.0, 0.0], [2.0, 0.0]]),
    ("quantile_lower", "quantile", [[1.0, 5.0, 2.0, 8.0], [3.0, 4.0, 4.0, 0.0]], 0.4, {'dim': 1, 'interpolation': 'lower'},
     [2.0, 3.0], [2], [[0.0, 0.0, 1.0, 0.0], [2.0, 0.0, 0.0, 0.0]]),
    ("quantile_higher", "quantile", [[1.0, 5.0, 2.0, 8.0], [3.0, 4.0, 4.0, 0.0]], 0.4, {'dim': 1, 'interpolation': 'higher'},
     [5.0, 4.0], [2], [[0.0, 1.0, 0.0, 0.0], [0.0, 2.0, 0.0, 0.0]]),
    ("quantile_midpoint", "quantile", [[1.0, 5.0, 2.0, 8.0], [3.0, 4.0, 4.0, 0.0]], 0.4, {'dim': 1, 'interpolation': 'midpoint'},
     [3.5, 3.5], [2], [[0.0, 0.5, 0.5, 0.0], [1.0, 1.0, 0.0, 0.0]]),
    ("quantile_nearest_half_even", "quantile", [0.0, 1.0, 2.0, 3.0], [0.5, 0.125, 0.375, 0.8333333333333334], {'interpolation': 'nearest'},
     [2.0, 0.0, 1.0, 2.0], [4], [2.0, 3.0, 5.0, 0.0]),
    ("quantile_ties", "quantile", [1.0, 5.0, 5.0, 8.0], 0.5, {},
     5.0, [], [0.0, 0.5, 0.5, 0.0]),
    ("quantile_many_q_keepdim", "quantile", [[1.0, 2.0], [3.0, 4.0], [0.0, 9.0]], [0.2, 0.7], {'dim': 0, 'keepdim': True},
     [[[0.4, 2.8]], [[1.7999999999999998, 6.0]]], [2, 1, 2], [[2.2, 1.2], [1.1999999999999997, 3.2], [0.6, 1.5999999999999996]]),
    ("quantile_all_dims_keepdim", "quantile", [[1.0, 2.0], [3.0, 4.0], [0.0, 9.0]], 0.9, {'keepdim': True},
     [[6.5]], [1, 1], [[0.0, 0.0], [0.0, 0.5], [0.0, 0.5]]),
    ("quantile_signed_zero", "quantile", [-0.0, 0.0, 1.0], 0.0, {},
     0.0, [], [1.0, 0.0, 0.0]),
]


@pytest.mark.parametrize("label,fn,x,q,kwargs,values,shape,grad", QUANTILES,
                         ids=[c[0] for c in QUANTILES])
def test_quantile_matches_torch(label, fn, x, q, kwargs, values, shape, grad):
    t = ag.tensor(np.array(x), requires_grad=True)
    out = getattr(ag, fn)(t, ag.tensor(np.array(q)) if isinstance(q, list) else q, **kwargs)
    assert list(out.shape) == shape
    out.backward(ag.tensor(np.arange(1.0, out.numel() + 1).reshape(out.shape)))
    _same(out.detach().numpy(), values)
    np.testing.assert_allclose(t.grad.numpy(), grad, rtol=1e-13, atol=1e-15)


def test_quantile_float32_and_last_node():
    # torch: float32 in, float32 out, quantile([[1, 2], [3, 4]], tensor(0.3)) has shape [];
    # its grad_fn is SqueezeBackward4 (in-place squeeze_, see the module docstring)
    x = ag.tensor(np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32), requires_grad=True)
    out = x.quantile(ag.tensor(np.array(0.3, dtype=np.float32)))
    assert out.dtype == np.float32 and out.shape == ()
    np.testing.assert_allclose(out.item(), 1.9, rtol=1e-6)
    assert out.grad_fn.name() == "SqueezeBackward1"


# (call, torch's message), all RuntimeError
ERRORS = [
    (lambda: ag.quantile(ag.zeros(3), 1.5), "quantile() q must be in the range [0, 1] but got 1.5"),
    (lambda: ag.nanquantile(ag.zeros(3), -0.5), "quantile() q must be in the range [0, 1] but got -0.5"),
    (lambda: ag.quantile(ag.zeros(3), ag.tensor(np.array([0.5, 2.0], dtype=np.float32))),
     "quantile() q values must be in the range [0, 1]"),
    (lambda: ag.quantile(ag.tensor(np.array([1, 2])), 0.5),
     "quantile() input tensor must be either float or double dtype"),
    (lambda: ag.quantile(ag.zeros(3), ag.tensor(np.array([[0.5]], dtype=np.float32))),
     "quantile() q must be a scalar or 1D tensor"),
    (lambda: ag.quantile(ag.zeros(3), 0.5, interpolation="foo"),
     "quantile() interpolation must be one of linear, lower, higher, midpoint or nearest, but got foo"),
    (lambda: ag.quantile(ag.zeros(0), 0.5), "quantile() input tensor must be non-empty"),
    (lambda: ag.quantile(ag.zeros(3), ag.tensor(np.array([0.5]))),
     "quantile() q tensor must be same dtype as the input tensor"),
]


@pytest.mark.parametrize("call,message", ERRORS, ids=[e[1][:40] for e in ERRORS])
def test_quantile_errors_match_torch(call, message):
    with pytest.raises(RuntimeError) as info:
        call()
    assert str(info.value) == message


def test_quantile_dim_out_of_range_matches_torch():
    # torch: IndexError "Dimension out of range (expected to be in range of [-2, 1], but got 2)"
    with pytest.raises(IndexError, match=r"^Dimension out of range \(expected to be in range of "
                                         r"\[-2, 1\], but got 2\)$"):
        ag.quantile(ag.zeros(2, 3), 0.5, dim=2)
