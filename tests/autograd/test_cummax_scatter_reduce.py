"""cummax / cummin and scatter_reduce / index_reduce at special inputs (NaN, ties, signed zeros,
zeros in products, include_self), against PyTorch 2.13's answers from the same calls (float64;
values, int64 indices, node names, gradients for an upstream gradient of 1, 2, 3, ...), and
their errors in PyTorch's classes and words.

Gradients against finite differences, forward mode and second derivatives are the OpCase rows
in tests/autograd/op_cases.py.
"""
import re

import numpy as np
import pytest

import gradtrace.autograd as ag

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
nan, inf = np.nan, np.inf


def _same(got, want):
    """Equal values, NaN where NaN, and the sign of each zero as PyTorch's."""
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


# (label, method, input, dim, upstream gradient, torch's values, indices, gradient). torch: a
# later entry takes over when >= (cummin: <=) the running value or NaN, so ties and NaNs take
# the last index and a NaN stays the value, each later NaN taking the index.
CUM = [
    ("cummax_nan_ties", "cummax", [1., 3., 3., nan, 2., nan, 5.], 0, [0., 1, 2, 3, 4, 5, 6],
     [1., 3., 3., nan, nan, nan, nan], [0, 1, 2, 3, 3, 5, 5], [0., 1., 2., 7., 0., 11., 0.]),
    ("cummin_nan_ties", "cummin", [1., 3., 1., nan, 2., nan, 5.], 0, [0., 1, 2, 3, 4, 5, 6],
     [1., 1., 1., nan, nan, nan, nan], [0, 0, 2, 3, 3, 5, 5], [1., 0., 2., 7., 0., 11., 0.]),
    ("cummax_signed_zeros", "cummax", [[0., -0., 0.], [2., 2., -1.]], 1, [[1., 2, 3], [4, 5, 6]],
     [[0., -0., 0.], [2., 2., 2.]], [[0, 1, 2], [0, 1, 1]], [[1., 2., 3.], [4., 11., 0.]]),
    ("cummin_signed_zeros", "cummin", [[0., -0., 0.], [-1., -1., -1.]], -1, [[1., 2, 3], [4, 5, 6]],
     [[0., -0., 0.], [-1., -1., -1.]], [[0, 1, 2], [0, 1, 2]], [[1., 2., 3.], [4., 5., 6.]]),
    ("cummax_dim0_nan", "cummax", [[1., nan], [2., 1.], [2., nan]], 0, [[1., 2], [3, 4], [5, 6]],
     [[1., nan], [2., nan], [2., nan]], [[0, 0], [1, 0], [2, 2]], [[1., 6.], [3., 0.], [5., 6.]]),
    ("cummax_0d", "cummax", 2.5, 0, 3.0, 2.5, 0, 3.0),
]


@pytest.mark.parametrize("label,method,x,dim,up,values,indices,grad", CUM, ids=[c[0] for c in CUM])
def test_cummax_cummin_match_torch(label, method, x, dim, up, values, indices, grad):
    t = ag.tensor(np.array(x), requires_grad=True)
    v, i = getattr(t, method)(dim)
    assert v.grad_fn.name() == method.capitalize() + "Backward0"
    assert i.dtype == np.int64 and i.grad_fn is None
    v.backward(ag.tensor(np.array(up)))
    _same(v.detach().numpy(), values)
    np.testing.assert_array_equal(i.numpy(), indices)
    np.testing.assert_array_equal(t.grad.numpy(), grad)


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_cummax_other_dtypes_match_torch(dtype):
    # torch: cummin([1, nan, -0, 0]) in float32 -> [1, nan, nan, nan], [0, 1, 1, 1];
    # cummax([[1, 5, 5], [7, 2, 7]]) -> [[1, 5, 5], [7, 7, 7]], [[0, 1, 2], [0, 0, 2]];
    # cummax([True, False, True]) -> all True, [0, 0, 2]
    if dtype == "float32":
        v, i = ag.cummin(ag.tensor(np.array([1., nan, -0., 0.], dtype=np.float32)), 0)
        want_v, want_i = [1., nan, nan, nan], [0, 1, 1, 1]
    elif dtype == "int64":
        v, i = ag.cummax(ag.tensor(np.array([[1, 5, 5], [7, 2, 7]])), 1)
        want_v, want_i = [[1, 5, 5], [7, 7, 7]], [[0, 1, 2], [0, 0, 2]]
    else:
        v, i = ag.tensor(np.array([True, False, True])).cummax(0)
        want_v, want_i = [True, True, True], [0, 0, 2]
    assert v.dtype == np.dtype(dtype) and i.dtype == np.int64
    np.testing.assert_array_equal(v.numpy(), want_v)
    np.testing.assert_array_equal(i.numpy(), want_i)


def test_cummax_empty_and_errors():
    # torch: an empty dim gives empty values and int64 indices; a dim out of range raises
    # IndexError "Dimension out of range (expected to be in range of [-2, 1], but got 2)"
    v, i = ag.cummax(ag.zeros(0, 3), 0)
    assert v.shape == (0, 3) and i.shape == (0, 3) and i.dtype == np.int64
    with pytest.raises(IndexError, match=r"^Dimension out of range \(expected to be in range of "
                                         r"\[-2, 1\], but got 2\)$"):
        ag.cummin(ag.zeros(2, 3), 2)


# (label, input, index, src, reduce, include_self, torch's value, input's gradient, src's
# gradient), along dim 0 for an upstream gradient of 1, 2, 3, .... PyTorch's rules: prod
# gives a target's only zero the product of the others and two zeros 0; amax/amin share the
# gradient evenly among the entries equal to the result, counting the input's own entry even
# when include_self=False; NaN propagates (and its gradient is NaN: the product 0 * (g / 0)).
SCATTER_REDUCE = [
    ("sum_nan", [nan, 2.0, 3.0], [0, 1, 1], [1.0, nan, 4.0], "sum", True,
     [nan, nan, 3.0], [1.0, 2.0, 3.0], [1.0, 2.0, 2.0]),
    ("prod_zeros", [1.0, 2.0, 3.0, 0.0], [0, 0, 2, 2, 1], [2.0, 1.0, 3.0, 0.0, 5.0], "prod", True,
     [2.0, 10.0, 0.0, 0.0], [2.0, 10.0, 0.0, 4.0], [1.0, 2.0, 0.0, 27.0, 4.0]),
    ("prod_zeros_exclude_self", [1.0, 2.0, 3.0, 0.0], [0, 0, 2, 2, 1], [2.0, 1.0, 3.0, 0.0, 5.0], "prod", False,
     [2.0, 5.0, 0.0, 0.0], [0.0, 0.0, 0.0, 4.0], [1.0, 2.0, 0.0, 9.0, 2.0]),
    ("prod_zero_in_self_and_src", [0.0, 2.0, 3.0], [0, 0, 1], [0.0, 4.0, 0.0], "prod", True,
     [0.0, 0.0, 3.0], [0.0, 0.0, 3.0], [0.0, 0.0, 4.0]),
    ("prod_zero_in_self_excluded", [0.0, 2.0, 3.0], [0, 0, 1], [0.0, 4.0, 0.0], "prod", False,
     [0.0, 0.0, 3.0], [0.0, 0.0, 3.0], [4.0, 0.0, 2.0]),
    ("prod_two_zeros_in_src", [1.0, 2.0, 3.0], [0, 0, 0], [0.0, 4.0, 0.0], "prod", True,
     [0.0, 2.0, 3.0], [0.0, 2.0, 3.0], [0.0, 0.0, 0.0]),
    ("mean", [1.0, 2.0, 3.0, 0.0], [0, 0, 2, 2, 1], [2.0, 1.0, 3.0, 0.0, 5.0], "mean", True,
     [1.3333333333333333, 3.5, 2.0, 0.0], [0.3333333333333333, 1.0, 1.0, 4.0], [0.3333333333333333, 0.3333333333333333, 1.0, 1.0, 1.0]),
    ("mean_exclude_self", [1.0, 2.0, 3.0, 0.0], [0, 0, 2, 2, 1], [2.0, 1.0, 3.0, 0.0, 5.0], "mean", False,
     [1.5, 5.0, 1.5, 0.0], [0.0, 0.0, 0.0, 4.0], [0.5, 0.5, 1.5, 1.5, 2.0]),
    ("amax_ties", [5.0, 2.0, 3.0], [0, 0], [5.0, 5.0], "amax", True,
     [5.0, 2.0, 3.0], [0.3333333333333333, 2.0, 3.0], [0.3333333333333333, 0.3333333333333333]),
    ("amax_ties_self_counted_when_excluded", [5.0, 2.0, 3.0], [0, 0], [5.0, 5.0], "amax", False,
     [5.0, 2.0, 3.0], [0.0, 2.0, 3.0], [0.3333333333333333, 0.3333333333333333]),
    ("amax_nan", [nan, 2.0, 3.0], [0, 1, 1], [1.0, nan, 4.0], "amax", True,
     [nan, nan, 3.0], [nan, nan, 3.0], [nan, nan, nan]),
    ("amin_nan", [nan, 2.0, 3.0], [0, 1, 1], [1.0, nan, 4.0], "amin", True,
     [nan, nan, 3.0], [nan, nan, 3.0], [nan, nan, nan]),
    ("amin_signed_zeros", [0.0, 2.0, 3.0], [0, 0], [-0.0, -1.0], "amin", True,
     [-1.0, 2.0, 3.0], [0.0, 2.0, 3.0], [0.0, 1.0]),
    ("amax_signed_zeros", [0.0, 2.0, 3.0], [0, 0], [-0.0, -1.0], "amax", False,
     [-0.0, 2.0, 3.0], [0.0, 2.0, 3.0], [0.5, 0.0]),
    ("amax_inf_tie", [inf, 2.0, 3.0], [0, 1], [inf, 2.0], "amax", True,
     [inf, 2.0, 3.0], [0.5, 1.0, 3.0], [0.5, 1.0]),
]


@pytest.mark.parametrize("label,x,index,src,reduce,include_self,value,x_grad,src_grad",
                         SCATTER_REDUCE, ids=[c[0] for c in SCATTER_REDUCE])
@pytest.mark.parametrize("inplace", [False, True], ids=["function", "inplace"])
def test_scatter_reduce_matches_torch(label, x, index, src, reduce, include_self, value, x_grad,
                                      src_grad, inplace):
    a = ag.tensor(np.array(x), requires_grad=True)
    s = ag.tensor(np.array(src), requires_grad=True)
    idx = ag.tensor(np.array(index))
    if inplace:
        out = (a * 1.0).scatter_reduce_(0, idx, s, reduce, include_self=include_self)
    else:
        out = ag.scatter_reduce(a, 0, idx, s, reduce, include_self=include_self)
    assert out.grad_fn.name() == "ScatterReduceBackward0"
    out.backward(ag.tensor(np.arange(1.0, out.numel() + 1)))
    _same(out.detach().numpy(), value)
    np.testing.assert_allclose(a.grad.numpy(), x_grad, rtol=1e-15, equal_nan=True)
    np.testing.assert_allclose(s.grad.numpy(), src_grad, rtol=1e-15, equal_nan=True)


def test_scatter_reduce_prod_double_backward():
    # torch, x = [0, 2, 3], src = [0, 4, 0] at [0, 0, 1], include_self: the gradient of
    # out.sum() is x: [0, 0, 1], src: [0, 0, 2] (a differentiable one: DivBackward0,
    # WhereBackward0), and the gradient of gx[0] + gs[0] + gs[2] + gx[1] is x: [4, 1, 0],
    # src: [4, 0, 1]
    x = ag.tensor(np.array([0.0, 2.0, 3.0]), requires_grad=True)
    s = ag.tensor(np.array([0.0, 4.0, 0.0]), requires_grad=True)
    out = x.scatter_reduce(0, ag.tensor(np.array([0, 0, 1])), s, "prod")
    gx, gs = ag.grad(out.sum(), [x, s], create_graph=True)
    np.testing.assert_array_equal(gx.detach().numpy(), [0.0, 0.0, 1.0])
    np.testing.assert_array_equal(gs.detach().numpy(), [0.0, 0.0, 2.0])
    # out0 = x0 s0 s1, out1 = x1 s2: d(gx0 = s0 s1)/d s1 = s0 = 0, d/d s0 = s1 = 4;
    # d(gs0 = x0 s1)/dx0 = 4, d/ds1 = x0 = 0; d(gs2 = x1)/dx1 = 1, d(gx1 = s2)/ds2 = 1
    hx, hs = ag.grad(gx[0] + gs[0] + gs[2] + gx[1], [x, s])
    np.testing.assert_array_equal(hx.numpy(), [4.0, 1.0, 0.0])
    np.testing.assert_array_equal(hs.numpy(), [4.0, 0.0, 1.0])


def test_scatter_reduce_integer_mean_and_dtype():
    # torch: integer means divide with floor: [-1, 2, 3] with [-4, 1, -3] at [0, 0, 1] and
    # include_self=False -> [-2, -3, 3] ((-4 + 1) / 2 = -1.5 -> -2); float32 stays float32
    x = ag.tensor(np.array([-1, 2, 3]))
    out = x.scatter_reduce(0, ag.tensor(np.array([0, 0, 1])), ag.tensor(np.array([-4, 1, -3])),
                           "mean", include_self=False)
    np.testing.assert_array_equal(out.numpy(), [-2, -3, 3])
    assert out.dtype == np.int64
    f = ag.tensor(np.array([1.0, 2.0], dtype=np.float32))
    assert f.scatter_reduce(0, ag.tensor(np.array([0])), f, "mean").dtype == np.float32


# (call, torch's class, torch's message)
ERRORS = [
    (lambda: ag.zeros(3).scatter_reduce(0, ag.tensor(np.array([3])), ag.ones(1), "sum"),
     RuntimeError, "index 3 is out of bounds for dimension 0 with size 3"),
    (lambda: ag.zeros(3).scatter_reduce(0, ag.tensor(np.array([-1])), ag.ones(1), "sum"),
     RuntimeError, "index -1 is out of bounds for dimension 0 with size 3"),
    (lambda: ag.zeros(3).scatter_reduce(0, ag.tensor(np.array([0.0])), ag.ones(1), "sum"),
     RuntimeError, "scatter(): Expected dtype int32/int64 for index"),
    (lambda: ag.zeros(3).scatter_reduce(0, ag.tensor(np.array([0])), ag.ones(1), "foo"),
     RuntimeError, "reduce argument must be either sum, prod, mean, amax or amin, got foo"),
    (lambda: ag.zeros(3).scatter_reduce(0, ag.tensor(np.array([0])), ag.ones(1, dtype="float64"), "sum"),
     RuntimeError, "scatter(): Expected self.dtype to be equal to src.dtype"),
    (lambda: ag.zeros(3).scatter_reduce(0, ag.tensor(np.array([0])), 1.0, "sum"),
     TypeError, "scatter_reduce(): argument 'src' (position 3) must be Tensor, not float"),
    (lambda: ag.zeros(3).scatter_reduce(0, ag.tensor(np.array([[0]])), ag.ones(1, 1), "sum"),
     RuntimeError, "Index tensor must have the same number of dimensions as self tensor"),
    (lambda: ag.zeros(2, 3).scatter_reduce(0, ag.tensor(np.array([[0, 0, 0, 0]])), ag.ones(2, 4), "sum"),
     RuntimeError, "Expected index [1, 4] to be no larger than self [2, 3] apart from dimension 0 "
                   "and to be no larger size than src [2, 4]"),
    (lambda: ag.zeros(2, 3).scatter_reduce(2, ag.tensor(np.array([[0]])), ag.ones(1, 1), "sum"),
     IndexError, "Dimension out of range (expected to be in range of [-2, 1], but got 2)"),
    (lambda: ag.zeros(3).index_reduce(0, ag.tensor(np.array([0])), ag.ones(1), "sum"),
     RuntimeError, "index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got sum."),
    (lambda: ag.zeros(3).index_reduce(0, ag.tensor(np.array([3])), ag.ones(1), "prod"),
     IndexError, "index out of range in self"),
    (lambda: ag.zeros(3).index_reduce(0, ag.tensor(np.array([-1])), ag.ones(1), "prod"),
     IndexError, "index out of range in self"),
    (lambda: ag.zeros(3).index_reduce(0, ag.tensor(np.array([[0]])), ag.ones(1, 1), "prod"),
     IndexError, "index_reduce_(): Index is supposed to be a vector, but got dim: 2 with type: "
                 "Long and size: [1, 1]"),
    (lambda: ag.zeros(3).index_reduce(0, ag.tensor(np.array([0, 1])), ag.ones(1), "prod"),
     RuntimeError, "index_reduce_(): Number of indices (2) should be equal to source.size(dim): "
                   "(1), for dim: 0"),
    (lambda: ag.zeros(3).index_reduce(0, ag.tensor(np.array([0.0], dtype=np.float32)), ag.ones(1), "prod"),
     RuntimeError, "index_reduce_(): Expected dtype int32/int64 for index but got: Float"),
    (lambda: ag.zeros(3).index_reduce(0, ag.tensor(np.array([0])), ag.ones(1, dtype="float64"), "prod"),
     RuntimeError, "index_reduce_(): self (Float) and source (Double) must have the same scalar type"),
    (lambda: ag.zeros(3).index_reduce(0, ag.tensor(np.array([0])), ag.ones(1, 2), "prod"),
     RuntimeError, "source tensor shape must match self tensor shape, excluding the specified "
                   "dimension. Got self.shape = [3] source.shape = [1, 2]"),
]


@pytest.mark.parametrize("call,cls,message", ERRORS, ids=[e[2][:40] for e in ERRORS])
def test_errors_match_torch(call, cls, message):
    with pytest.raises(cls) as info:
        call()
    assert str(info.value) == message


def test_index_reduce_matches_torch():
    # torch: x = [[1, 2], [3, 4], [5, 6]], index [0, 0], source [[2, 0], [3, 1]], "prod":
    # [[6, 0], [3, 4], [5, 6]] (IndexReduceBackward0); for a gradient of ones x.grad
    # [[6, 0], [1, 1], [1, 1]], source.grad [[3, 2], [2, 0]]
    x = ag.tensor(np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), requires_grad=True)
    s = ag.tensor(np.array([[2.0, 0.0], [3.0, 1.0]]), requires_grad=True)
    out = x.index_reduce(0, ag.tensor(np.array([0, 0])), s, "prod")
    assert out.grad_fn.name() == "IndexReduceBackward0"
    out.backward(ag.ones(3, 2, dtype="float64"))
    np.testing.assert_array_equal(out.detach().numpy(), [[6.0, 0.0], [3.0, 4.0], [5.0, 6.0]])
    np.testing.assert_array_equal(x.grad.numpy(), [[6.0, 0.0], [1.0, 1.0], [1.0, 1.0]])
    np.testing.assert_array_equal(s.grad.numpy(), [[3.0, 2.0], [2.0, 0.0]])


# torch, 0-d: tensor(2.).scatter_reduce(0, tensor(0), tensor(5.), reduce, include_self)
# -> (value, input's gradient, src's gradient)
ZERO_DIM = [("amax", True, 5.0, 0.0, 1.0), ("amax", False, 5.0, 0.0, 1.0),
            ("mean", True, 3.5, 0.5, 0.5), ("mean", False, 5.0, 0.0, 1.0),
            ("sum", True, 7.0, 1.0, 1.0), ("sum", False, 5.0, 0.0, 1.0),
            ("prod", True, 10.0, 5.0, 2.0), ("prod", False, 5.0, 0.0, 1.0)]


@pytest.mark.parametrize("reduce,include_self,value,x_grad,src_grad", ZERO_DIM)
def test_scatter_reduce_zero_dim_matches_torch(reduce, include_self, value, x_grad, src_grad):
    x = ag.tensor(np.array(2.0), requires_grad=True)
    s = ag.tensor(np.array(5.0), requires_grad=True)
    out = x.scatter_reduce(0, ag.tensor(np.array(0)), s, reduce, include_self=include_self)
    assert out.shape == ()
    out.backward()
    assert (out.item(), x.grad.item(), s.grad.item()) == (value, x_grad, src_grad)


def test_scatter_reduce_src_larger_than_index():
    # As torch 2.13: the value is computed, the backward raises "Function
    # ScatterReduceBackward0 returned an invalid gradient at index 1 - got [2, 2] but expected
    # shape compatible with [3, 4]" (the gradient of src has index's shape).
    x = ag.zeros(2, 3, dtype="float64", requires_grad=True)
    s = ag.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    out = x.scatter_reduce(1, ag.tensor(np.array([[0, 1], [1, 0]])), s, "sum")
    np.testing.assert_array_equal(out.detach().numpy(), [[0.0, 1.0, 0.0], [5.0, 4.0, 0.0]])
    with pytest.raises(RuntimeError, match=re.escape(
            "Function ScatterReduceBackward0 returned an invalid gradient at index 1 - got "
            "[2, 2] but expected shape compatible with [3, 4]")):
        out.sum().backward()
