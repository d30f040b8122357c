"""Backward rules made cheaper for small arrays (issue 17, item 5) give the values of the
general forms they short-cut, bit for bit: nll_loss's all-valid path against _nll_picks's
arithmetic, log_softmax's array rule against its formula, sum_over against the reduction it
names, row_sum / row_dot over trailing dims given in any order. Their gradients are checked
against finite differences in the OpCase table (op_cases.py: nll_loss*, log_softmax*,
cross_entropy*, layer_norm*); the PyTorch values of nll_loss's gradient (inf upstream, ignored
rows) are in test_nll_loss_grad.py.
"""
import numpy as np
import pytest

from gradtrace.autograd.dispatch import ArrayF, OPS
from gradtrace.autograd.ops.nn import _nll_picks, row_dot, row_sum
from gradtrace.autograd.ops.shape import sum_over

RNG = np.random.default_rng(0)
F = ArrayF(np)


def _nll_general(g, x, t, ignore_index, reduction):
    """_nll_grad's arithmetic for any target (the path every non-NumPy or partly ignored
    batch takes)."""
    rows, cols, coef, valid = _nll_picks(np, x.dtype, t, ignore_index, reduction)
    w = np.zeros(x.shape, dtype=x.dtype)
    w[rows, cols] = np.where(valid, coef * g, 0)
    return w


# (rows, classes, dtype, reduction, ignore_index, upstream gradient): 7 rows, so that -1/7
# is rounded to the dtype; ignore_index on a row sends it down the general path.
NLL_CASES = [
    (7, 10, np.float32, "mean", -100, 1.0),
    (7, 10, np.float32, "mean", -100, 0.37),
    (7, 10, np.float64, "mean", -100, 1.0),
    (32, 3, np.float32, "sum", -100, 2.5),
    (5, 4, np.float32, "mean", -100, float("inf")),
    (5, 4, np.float16, "mean", -100, 1.0),
    (7, 10, np.float32, "mean", 2, 1.0),    # rows whose target is 2 are ignored
    (1, 1, np.float32, "mean", -100, 1.0),
]


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")   # inf * 0
@pytest.mark.parametrize("n, c, dtype, reduction, ignore, g", NLL_CASES)
def test_nll_rule_equals_the_general_arithmetic(n, c, dtype, reduction, ignore, g):
    x = RNG.standard_normal((n, c)).astype(dtype)
    t = np.arange(n) % c
    g = np.asarray(g, dtype=dtype)
    got = OPS["nll_loss_forward"].vjp[0](F, g, None, x, t, ignore_index=ignore,
                                          reduction=reduction)
    want = _nll_general(g, x, t, ignore, reduction)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


# (shape, dim, dtype of the upstream gradient): float64 upstream on a float32 output keeps the
# promoting formula.
LOG_SOFTMAX_CASES = [((32, 10), 1, np.float32), ((4, 16, 64), -1, np.float32),
                     ((3, 5, 2), 1, np.float64), ((6, 4), 0, np.float32), ((2, 3), 1, np.float64)]


@pytest.mark.parametrize("shape, dim, gdtype", LOG_SOFTMAX_CASES)
def test_log_softmax_rule_equals_its_formula(shape, dim, gdtype):
    op = OPS["log_softmax"]
    out = op.fwd(np, RNG.standard_normal(shape).astype(np.float32), dim)
    g = RNG.standard_normal(shape).astype(gdtype)
    got = op.vjp[0](F, g, out, None, dim=dim)
    want = g - np.exp(out) * np.sum(g, axis=dim, keepdims=True)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


# (shape, axes, dtype): leading axes of a float array (the GEMV), other axes, an integer
# array, a non-contiguous one; sum_over gives what it names.
SUM_OVER_CASES = [((32, 10), (0,), np.float32, "gemv"), ((4, 16, 32), (0, 1), np.float32, "gemv"),
                  ((3, 4, 5), (0, 2), np.float32, "sum"), ((6, 5), (0,), np.int64, "sum"),
                  ((5, 6), (0,), np.float16, "sum"), ((8, 3), (0,), np.float32, "sum_T")]


@pytest.mark.parametrize("shape, axes, dtype, how", SUM_OVER_CASES)
def test_sum_over_is_the_reduction_it_names(shape, axes, dtype, how):
    x = (RNG.standard_normal(shape) * 10).astype(dtype)
    if how == "sum_T":
        x = np.ascontiguousarray(x.T).T     # a transposed view: the general reduction
    kept = tuple(1 if i in axes else s for i, s in enumerate(shape))
    target = kept[len(axes):] if how == "gemv" else kept
    got = sum_over(np, x, axes, target)
    if how == "gemv":
        rows = int(np.prod(shape[:len(axes)]))
        want = (np.ones(rows, dtype) @ x.reshape(rows, -1)).reshape(target)
    else:
        want = np.sum(x, axis=axes).reshape(target)
    assert got.shape == tuple(target) and got.dtype == x.dtype
    np.testing.assert_array_equal(got, want)


# Trailing dims in any order sum the same rows as the sorted ones.
@pytest.mark.parametrize("shape, dims", [((3, 7, 9), (-1, -2)), ((3, 7, 9), (2, 1)),
                                         ((4, 5), (1,)), ((2, 3, 4), (0, 1, 2))])
def test_row_reductions_take_trailing_dims_in_any_order(shape, dims):
    a = RNG.standard_normal(shape).astype(np.float32)
    b = RNG.standard_normal(shape).astype(np.float32)
    ordered = tuple(sorted(d % a.ndim for d in dims))
    np.testing.assert_array_equal(row_sum(np, a, dims), row_sum(np, a, ordered))
    np.testing.assert_array_equal(row_dot(np, a, b, dims), row_dot(np, a, b, ordered))
    np.testing.assert_allclose(row_sum(np, a, dims), np.sum(a, axis=ordered, keepdims=True),
                               rtol=1e-5, atol=1e-5)


# The ones of the GEMV sums are kept per (length, dtype) for NumPy: read-only, so that no
# caller can change what every later sum multiplies by; past the length limit, made per call.
@pytest.mark.parametrize("n, dtype, kept", [(32, np.float32, True), (7, np.float64, True),
                                            (5000, np.float32, False)])
def test_ones_vector_is_shared_read_only_up_to_its_length_limit(n, dtype, kept):
    from gradtrace.autograd.ops.shape import ones_vector

    a, b = ones_vector(np, n, np.dtype(dtype)), ones_vector(np, n, np.dtype(dtype))
    np.testing.assert_array_equal(a, np.ones(n, dtype))
    assert a.dtype == dtype and (a is b) == kept
    assert a.flags.writeable != kept
    if kept:
        with pytest.raises(ValueError):
            a[0] = 2.0
