"""The torch names beyond the op table's values: ``dtype=`` arguments, node names, errors in
PyTorch's words, results that are Python values or tuples, factories and random sampling.
Each expectation is what PyTorch 2.13 gives for the same call (noted beside it)."""
import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd.nn import functional as F


def _t(values, dtype=None, requires_grad=False):
    return ag.tensor(np.asarray(values, dtype=dtype), requires_grad=requires_grad)


# --------------------------------------------------------------------------- dtype=

INT = np.arange(6, dtype=np.int32).reshape(2, 3)

# (call, dtype of the result): PyTorch casts the input to dtype first.
DTYPE_CASES = [
    (lambda x: ag.sum(x, dtype=np.float32), np.float32, 15.0),
    (lambda x: x.sum(1, dtype=np.float64), np.float64, [3.0, 12.0]),
    (lambda x: ag.mean(x, dtype=np.float32), np.float32, 2.5),   # torch: 2.5, not an error
    (lambda x: x.mean(0, keepdim=True, dtype=np.float64), np.float64, [[1.5, 2.5, 3.5]]),
    (lambda x: ag.prod(x + 1, 1, dtype=np.float32), np.float32, [6.0, 120.0]),
    (lambda x: ag.cumsum(x, 1, dtype=np.float64), np.float64, [[0, 1, 3], [3, 7, 12]]),
    (lambda x: x.cumprod(0, dtype=np.float32), np.float32, [[0, 1, 2], [0, 4, 10]]),
    (lambda x: ag.nansum(x, dtype=np.float64), np.float64, 15.0),
    (lambda x: ag.nanmean(x, dtype=np.float32), np.float32, 2.5),
]


@pytest.mark.parametrize("call,dtype,expected", DTYPE_CASES)
def test_reductions_take_dtype_as_pytorch(call, dtype, expected):
    out = call(ag.tensor(INT))
    assert out.dtype == dtype
    np.testing.assert_allclose(out.numpy(), expected)


def test_mean_of_integers_without_dtype_still_refuses():
    # torch.mean(torch.tensor([1, 2])): "mean(): could not infer output dtype..."
    with pytest.raises(RuntimeError, match="could not infer output dtype"):
        ag.tensor(INT).mean()


SOFTMAX_DTYPE = [
    lambda x: ag.softmax(x, 1, dtype=np.float32),
    lambda x: x.softmax(1, dtype=np.float32),
    lambda x: F.softmax(x, dim=1, dtype=np.float32),
    lambda x: ag.log_softmax(x, 1, dtype=np.float32),
    lambda x: F.log_softmax(x, dim=-1, dtype=np.float32),
    lambda x: x.sum(dtype=np.float32),
    lambda x: ag.linalg.vector_norm(x, dtype=np.float32),
]


@pytest.mark.parametrize("call", SOFTMAX_DTYPE)
def test_dtype_cast_is_recorded_so_the_gradient_reaches_a_half_input(call):
    # torch.softmax(x16, 1, dtype=torch.float32).grad_fn.next_functions[0][0] is
    # ToCopyBackward0, and x16.grad is float16.
    x = ag.tensor(np.random.default_rng(0).standard_normal((2, 3)).astype(np.float16),
                  requires_grad=True)
    y = call(x)
    assert y.dtype == np.float32
    node = y.grad_fn
    while node.name() != "ToCopyBackward0":
        node = node.next_functions[0][0]
    (y * y).sum().backward()
    assert x.grad.dtype == np.float16 and x.grad.shape == x.shape


def test_functional_softmax_has_pytorchs_signature():
    # F.softmax(input, dim=None, _stacklevel=3, dtype=None): dim None is PyTorch's implicit
    # choice (dim 1 of a 2-D or 4-D input, dim 0 of a 1-D or 3-D one)
    x = ag.tensor(np.random.default_rng(3).standard_normal((2, 3, 4)))
    np.testing.assert_allclose(F.softmax(x).numpy(), ag.softmax(x, 0).numpy())
    np.testing.assert_allclose(F.log_softmax(x, -1, 3, np.float32).numpy(),
                               ag.log_softmax(x.float(), -1).numpy(), rtol=1e-6)


def test_softmax_dtype_values_match_the_cast_input():
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    out = ag.softmax(ag.tensor(x), -1, dtype=np.float64)
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    np.testing.assert_allclose(out.numpy(), e / e.sum(-1, keepdims=True), rtol=1e-12)


# --------------------------------------------------------------------------- node names

X23 = lambda: _t(np.random.default_rng(2).standard_normal((2, 3)), requires_grad=True)  # noqa: E731
V3 = lambda: _t([0.5, -1.0, 2.0], requires_grad=True)  # noqa: E731

# (call, grad_fn.name()): PyTorch's node where it is the same op; the composites show their
# primitives' nodes (PyTorch's own in the comment).
NODE_CASES = [
    (lambda: V3().sgn(), "SgnBackward0"),
    (lambda: ag.copysign(V3(), -1.0), "CopysignBackward0"),
    (lambda: ag.nan_to_num(V3()), "NanToNumBackward0"),
    (lambda: ag.deg2rad(V3()), "Deg2RadBackward0"),
    (lambda: V3().rad2deg(), "Rad2DegBackward0"),
    (lambda: ag.addcdiv(V3(), V3(), V3() + 5), "AddcdivBackward0"),
    (lambda: ag.absolute(V3()), "AbsBackward0"),
    (lambda: V3().negative(), "NegBackward0"),
    (lambda: ag.float_power(V3(), 2), "PowBackward0"),
    (lambda: ag.logdet(X23() @ X23().mT + 3 * ag.eye(2, dtype=np.float64)), "WhereBackward0"),
    (lambda: ag.cartesian_prod(V3(), V3()), "StackBackward0"),
    (lambda: ag.combinations(V3()), "StackBackward0"),
    (lambda: ag.diagflat(V3()), "DiagEmbedBackward0"),
    (lambda: ag.column_stack([V3(), V3()]), "CatBackward0"),
    (lambda: ag.dstack([V3(), V3()]), "CatBackward0"),
    (lambda: X23().ravel(), "ViewBackward0"),
    (lambda: X23().H, "TransposeBackward0"),
    (lambda: X23().mH, "TransposeBackward0"),
    (lambda: X23().adjoint(), "TransposeBackward0"),
    (lambda: ag.cumulative_trapezoid(V3()), "CumsumBackward0"),
    (lambda: ag.corrcoef(X23()), "ClampBackward1"),
    (lambda: ag.cosine_similarity(X23(), X23()), "SumBackward1"),
    (lambda: ag.addmv(V3()[:2], X23(), V3()), "AddBackward0"),   # torch: AddmvBackward0
    (lambda: ag.renorm(X23(), 2, 0, 1.0), "MulBackward0"),         # torch: RenormBackward0
    (lambda: ag.rot90(X23()), "TransposeBackward0"),                # torch: Rot90Backward0
    (lambda: ag.div(V3(), 2.0, rounding_mode="floor"), "DivBackward2"),
    (lambda: V3().divide(2.0), "DivBackward0"),
    (lambda: ag.true_divide(V3(), 2.0), "DivBackward0"),
    (lambda: ag.multiply(V3(), 2.0), "MulBackward0"),
    (lambda: V3().subtract(V3(), alpha=2), "SubBackward0"),
    (lambda: ag.acosh(V3() + 3), "AcoshBackward0"),
    (lambda: ag.logaddexp2(V3(), V3()), "Logaddexp2Backward0"),
    (lambda: ag.broadcast_to(V3(), (2, 3)), "ExpandBackward0"),
    (lambda: ag.fliplr(X23()), "FlipBackward0"),
    (lambda: X23().flipud(), "FlipBackward0"),
    (lambda: ag.vander(V3()), "FlipBackward0"),
    (lambda: X23().index_fill(1, _t([0]), 2.0), "MaskedFillBackward0"),   # torch: IndexFillBackward0
    (lambda: ag.ldexp(V3(), _t([1, 2, 3])), "MulBackward0"),             # torch: LdexpBackward0
]


@pytest.mark.parametrize("call,name", NODE_CASES)
def test_node_names(call, name):
    assert call().grad_fn.name() == name


NO_GRAD = [
    lambda: ag.heaviside(V3(), V3()),            # torch: requires grad, backward not implemented
    lambda: ag.signbit(V3()),
    lambda: ag.isclose(V3(), V3()),
    lambda: ag.histc(V3(), bins=3),              # torch: the same as heaviside
    lambda: ag.bucketize(V3(), _t([0.0, 1.0])),
    lambda: ag.searchsorted(_t([0.0, 1.0]), V3()),
    lambda: ag.unique(V3()),                     # torch: Unique2Backward0, not implemented
    lambda: ag.unique_consecutive(V3(), return_counts=True)[0],
    lambda: ag.bincount(_t([0, 2]), V3()[:2]),
    lambda: ag.bernoulli(V3().sigmoid()),
    lambda: ag.multinomial(V3().exp(), 2),
    lambda: ag.poisson(V3().exp()),
    lambda: ag.nonzero(V3()),
    lambda: ag.argwhere(V3()),
    lambda: ag.isin(V3(), V3()),
    lambda: ag.greater(V3(), 0),
    lambda: ag.nextafter(V3(), V3() + 1),         # torch: NextafterBackward0, not implemented
    lambda: ag.frexp(V3()).mantissa,
    lambda: ag.randint_like(V3(), 5),
]


@pytest.mark.parametrize("call", NO_GRAD)
def test_counts_searches_and_samples_never_require_grad(call):
    out = call()
    assert not out.requires_grad and out.grad_fn is None


# --------------------------------------------------------------------------- errors

ERRORS = [
    (lambda: ag.addcdiv(_t([1]), _t([1]), _t([1])), RuntimeError,
     "Integer division with addcdiv is no longer supported"),
    (lambda: ag.heaviside(_t([1.0]), _t([1.0], np.float32)), RuntimeError,
     "heaviside is not yet implemented for tensors with different dtypes."),
    (lambda: ag.isclose(_t([1.0]), _t([1.0], np.float32)), RuntimeError, "Double did not match Float"),
    (lambda: ag.inner(_t(np.ones((2, 3))), _t(np.ones(4))), RuntimeError,
     r"inner\(\) the last dimension must match on both input tensors but got shapes \[2, 3\] and \[4\]"),
    (lambda: ag.vdot(_t(np.ones((2, 3))), _t(np.ones(3))), RuntimeError,
     "1D tensors expected, but got 2D and 1D tensors"),
    (lambda: ag.linalg.multi_dot([_t(np.ones(3))]), RuntimeError,
     r"multi_dot\(\): expected at least 2 tensors but got 1"),
    (lambda: ag.linalg.multi_dot([_t(np.ones((3, 3))), _t(np.ones((3, 3, 3))), _t(np.ones((3, 3)))]),
     RuntimeError, r"multi_dot\(\): tensor 1 must be 2D but got 3D"),
    (lambda: ag.rot90(_t(np.ones((2, 3))), 1, [0, 0]), RuntimeError,
     "expected rotation dims to be different, but got dim0 = 0 and dim1 = 0"),
    (lambda: ag.rot90(_t(np.ones(3))), RuntimeError, "expected total dims >= 2, but got total dims = 1"),
    (lambda: ag.hsplit(_t(np.ones((2, 5))), 3), RuntimeError,
     "torch.hsplit attempted to split along dimension 1, but the size of the dimension 5 is not "
     "divisible by the split_size 3!"),
    (lambda: ag.vsplit(_t(np.ones(4)), 2), RuntimeError,
     "torch.vsplit requires a tensor with at least 2 dimension, but got a tensor with 1 dimensions!"),
    (lambda: ag.block_diag(_t(np.ones((2, 3, 1)))), RuntimeError,
     "torch.block_diag: Input tensors must have 2 or fewer dimensions. Input 0 has 3 dimensions"),
    (lambda: ag.cartesian_prod(_t(np.ones((3, 2)))), RuntimeError, r"Expect a 1D vector, but got shape \[3, 2\]"),
    (lambda: _t(np.ones((2, 3, 4))).H, RuntimeError,
     "tensor.H is only supported on matrices \\(2-D tensors\\). Got 3-D tensor. For batches of "
     "matrices, consider using tensor.mH"),
    (lambda: _t(np.ones(3)).mH, RuntimeError,
     "tensor.mH is only supported on matrices or batches of matrices. Got 1-D tensor."),
    (lambda: ag.bincount(_t([-1, 2])), RuntimeError, "bincount only supports 1-d non-negative integral inputs."),
    (lambda: ag.bincount(_t([1.0])), NotImplementedError, "\"bincount_cpu\" not implemented for 'Double'"),
    (lambda: ag.bincount(_t([1, 2]), _t([1.0, 2, 3])), RuntimeError,
     "weights should be 1-d and have the same length as input"),
    (lambda: ag.histc(_t([1, 2]), bins=3), NotImplementedError, "\"histogram_cpu\" not implemented for 'Long'"),
    (lambda: ag.histc(_t([1.0, 2]), bins=3, min=3, max=1), RuntimeError, "torch.histc: max must be larger than min"),
    (lambda: ag.searchsorted(_t([1.0]), _t([2.0]), side="left", right=True), RuntimeError,
     "side and right can't be set to opposites, got side of left while right was True"),
    (lambda: ag.searchsorted(_t(np.ones((2, 3))), _t(np.ones((3, 2)))), RuntimeError,
     r"boundaries tensor \[2, 3\] and input value tensor \[3, 2\]"),
    (lambda: ag.unique(_t(np.ones((2, 3))), dim=3), IndexError,
     r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 3\)"),
    (lambda: ag.multinomial(_t([0.5, 0.5]), 3), RuntimeError,
     r"cannot sample n_sample > prob_dist.size\(-1\) samples without replacement"),
    (lambda: ag.multinomial(_t([[0.0, 0.0]]), 1), RuntimeError,
     r"invalid multinomial distribution \(sum of probabilities <= 0\)"),
    (lambda: ag.multinomial(_t([-1.0, 2.0]), 1), RuntimeError,
     "probability tensor contains either `inf`, `nan` or element < 0"),
    (lambda: ag.multinomial(_t([1, 2]), 1), RuntimeError,
     "multinomial only supports floating-point dtypes for input, got: Long"),
    (lambda: ag.bernoulli(_t([1.5])), RuntimeError, "Expected p_in >= 0 && p_in <= 1 to be true"),
    (lambda: ag.normal(_t([0.0, 0.0]), _t([-1.0, 1.0])), RuntimeError,
     "normal expects all elements of std >= 0.0"),
    (lambda: ag.normal(0.0, -1.0, (2,)), RuntimeError, "normal expects std >= 0.0, but found std -1"),
    (lambda: ag.poisson(_t([-1.0])), RuntimeError, "invalid Poisson rate, expected rate to be non-negative"),
    (lambda: ag.div(_t([1.0]), 2, rounding_mode="x"), RuntimeError,
     "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found 'x'"),
    (lambda: ag.positive(_t([True])), RuntimeError, "The `\\+` operator, on a bool tensor is not supported."),
    (lambda: ag.fliplr(_t([1.0, 2.0])), RuntimeError, "Input must be >= 2-d."),
    (lambda: ag.flipud(_t(1.0)), RuntimeError, "Input must be >= 1-d."),
    (lambda: ag.broadcast_shapes((2,), (3,)), RuntimeError,
     r"Attempting to broadcast a dimension of length 3 at -1! Mismatching argument at index 1 "
     r"had \(3,\); but expected shape should be broadcastable to \[2\]"),
    (lambda: ag.ones(3).float_power_(2), RuntimeError,
     "the base given to float_power_ has dtype Float but the operation's result requires dtype Double"),
    (lambda: ag.ones(3, requires_grad=True).normal_(), RuntimeError,
     "a leaf Variable that requires grad is being used in an in-place operation"),
    (lambda: ag.gcd(_t([1.0]), _t([2.0])), NotImplementedError, "\"gcd_cpu\" not implemented for 'Double'"),
    (lambda: ag.frexp(_t([8, 3])), RuntimeError, r"torch.frexp\(\) only supports floating-point dtypes"),
    (lambda: ag.vander(_t(np.ones((2, 2)))), RuntimeError, "x must be a one-dimensional tensor."),
    (lambda: ag.zeros(3, 4).index_fill(0, _t([3]), 1.0), IndexError,
     "index 3 is out of bounds for dimension 0 with size 3"),
    (lambda: ag.zeros(2, 3).masked_scatter(ag.ones(2, 3, dtype=bool), ag.ones(5)), RuntimeError,
     "Number of elements of source < number of ones in mask"),
    (lambda: ag.histogram(_t([1, 2]), 3), NotImplementedError, "\"histogramdd\" not implemented for 'Long'"),
    (lambda: ag.histogram(_t([1.0, 2.0]), 3, range=(2.0, 1.0)), RuntimeError,
     "torch.histogramdd: min should not exceed max, but got min 2 max 1 for dimension 0"),
    (lambda: ag.gradient(_t(np.ones((3, 4))), edge_order=3), RuntimeError,
     "torch.gradient only supports edge_order=1 and edge_order=2."),
    (lambda: ag.gradient(_t([1.0, 2.0]), edge_order=2), RuntimeError,
     r"torch.gradient expected each dimension size to be at least edge_order\+1"),
    (lambda: ag.gradient(_t(np.ones((3, 4))), spacing=[1.0, 2.0, 3.0]), RuntimeError,
     "a list of length equal to 'self.dim\\(\\) = 2', since dim argument was not given, but got "
     "a list of length 3"),
    (lambda: ag.gradient(_t(np.ones((3, 4))), dim=0, spacing=[1.0, 2.0]), RuntimeError,
     "but got a spacing argument of length 2 and a dim argument of length 1."),
]


@pytest.mark.parametrize("call,error,message", ERRORS)
def test_errors_in_pytorchs_words(call, error, message):
    with pytest.raises(error, match=message):
        call()


# --------------------------------------------------------------------------- values

def test_python_bool_results():
    a = _t([1.0, np.nan, 3.0])
    # torch.allclose(a, a) is False (NaN), True with equal_nan; torch.equal: shapes first.
    assert ag.allclose(a, a) is False and ag.allclose(a, a, equal_nan=True) is True
    assert a.allclose(a + 1e-9, equal_nan=True) is True
    assert ag.equal(_t([1, 2]), _t([1, 2])) is True
    assert ag.equal(_t([1, 2]), _t([1, 2, 3])) is False
    assert _t([1.0, 2.0]).equal(_t([1.0, 2.5])) is False


def test_unique_and_unique_consecutive_as_pytorch():
    x = _t([[3.0, 1, 3], [1, 2, 1]])
    values, inverse, counts = ag.unique(x, return_inverse=True, return_counts=True)
    # torch: (tensor([1., 2., 3.]), tensor([[2, 0, 2], [0, 1, 0]]), tensor([3, 1, 2]))
    np.testing.assert_array_equal(values.numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(inverse.numpy(), [[2, 0, 2], [0, 1, 0]])
    np.testing.assert_array_equal(counts.numpy(), [3, 1, 2])
    # torch.unique(tensor([nan, 1., nan])): tensor([1., nan, nan]) (NaNs are not merged)
    assert ag.unique(_t([np.nan, 1.0, np.nan])).shape == (3,)
    values, inverse = ag.unique(_t([[1, 2], [1, 2], [0, 5]]), dim=0, return_inverse=True)
    np.testing.assert_array_equal(values.numpy(), [[0, 5], [1, 2]])
    np.testing.assert_array_equal(inverse.numpy(), [1, 1, 0])
    values, inverse, counts = ag.unique_consecutive(
        _t([[1, 1], [1, 1], [2, 3], [1, 1]]), dim=0, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(values.numpy(), [[1, 1], [2, 3], [1, 1]])
    np.testing.assert_array_equal(inverse.numpy(), [0, 0, 1, 2])
    np.testing.assert_array_equal(counts.numpy(), [2, 1, 1])
    values, inverse = ag.unique(_t(5.0), return_inverse=True)   # torch: (tensor([5.]), tensor(0))
    assert values.shape == (1,) and inverse.shape == ()


def test_bincount_histc_bucketize_searchsorted_values():
    idx = _t([0, 1, 1, 3])
    assert ag.bincount(idx).dtype == np.int64
    out = ag.bincount(idx, _t([1.0, 2, 3, 4], np.float32), minlength=6)
    assert out.dtype == np.float32   # torch: float32 weights count in float32, others in float64
    np.testing.assert_array_equal(out.numpy(), [1, 5, 0, 4, 0, 0])
    assert ag.bincount(idx, _t([1, 2, 3, 4])).dtype == np.float64
    # torch.histc(tensor([1., 1.]), bins=3): tensor([0., 2., 0.]); data range when min == max
    np.testing.assert_array_equal(ag.histc(_t([1.0, 1.0], np.float32), bins=3).numpy(), [0, 2, 0])
    np.testing.assert_array_equal(ag.histc(_t([1.0, 2, 3, 4]), bins=3).numpy(), [1, 1, 2])
    b = _t([1.0, 3, 5, 7])
    v = _t([[0.0, 1, 3], [6, 7, 9]])
    np.testing.assert_array_equal(ag.bucketize(v, b).numpy(), [[0, 0, 1], [3, 3, 4]])
    right = ag.bucketize(v, b, right=True, out_int32=True)
    assert right.dtype == np.int32
    np.testing.assert_array_equal(right.numpy(), [[0, 1, 2], [3, 4, 4]])
    assert ag.bucketize(3.0, b).item() == 1 and ag.bucketize(3.0, b).shape == ()
    # torch.searchsorted(tensor([5., 1, 3]), tensor([2., 4]), sorter=tensor([1, 2, 0])): [1, 2]
    np.testing.assert_array_equal(
        ag.searchsorted(_t([5.0, 1, 3]), _t([2.0, 4]), sorter=_t([1, 2, 0])).numpy(), [1, 2])
    np.testing.assert_array_equal(ag.searchsorted(b, v, side="right").numpy(), right.numpy())


def test_shape_helpers_as_pytorch():
    a = _t(np.arange(6.0).reshape(2, 3))
    assert [t.shape for t in ag.hsplit(a, 3)] == [(2, 1)] * 3
    assert [t.shape for t in ag.hsplit(_t(np.arange(6.0)), [1, 4])] == [(1,), (3,), (2,)]
    assert [t.shape for t in ag.dsplit(_t(np.ones((1, 2, 4))), [3])] == [(1, 2, 3), (1, 2, 1)]
    # torch.atleast_3d: () -> (1, 1, 1), (3,) -> (1, 3, 1), (2, 3) -> (2, 3, 1)
    assert ag.atleast_3d(_t(1.0)).shape == (1, 1, 1)
    assert ag.atleast_3d(_t([1.0, 2, 3])).shape == (1, 3, 1)
    assert ag.atleast_3d(a).shape == (2, 3, 1)
    assert [t.shape for t in ag.atleast_2d(_t(1.0), _t([1.0, 2]))] == [(1, 1), (1, 2)]
    assert ag.atleast_1d(_t(1.0)).shape == (1,)
    x, y = ag.meshgrid(_t([1.0, 2, 3]), _t([4.0, 5]), indexing="xy")
    assert x.shape == y.shape == (2, 3)   # torch: (len(y), len(x)) with "xy"
    np.testing.assert_array_equal(ag.block_diag().numpy(), np.zeros((1, 0)))
    assert ag.combinations(_t([1.0, 2]), 3).shape == (0, 3)
    assert ag.combinations(_t([1.0, 2, 3]), 1).shape == (3, 1)
    assert ag.chain_matmul(a, a.mT).shape == (2, 2)


def test_division_modes_aliases_and_nonzero_as_pytorch():
    a, b = _t([-7.0, 7, 5.5]), _t([2.0, -2, 2])
    # torch: floor [-4., -4., 2.], trunc [-3., -3., 2.]; integers stay integers
    np.testing.assert_array_equal(ag.div(a, b, rounding_mode="floor").numpy(), [-4, -4, 2])
    np.testing.assert_array_equal(a.div(b, rounding_mode="trunc").numpy(), [-3, -3, 2])
    out = ag.div(_t([-7, 7]), _t([2, -2]), rounding_mode="trunc")
    assert out.dtype == np.int64 and out.tolist() == [-3, -3]
    assert ag.div(_t([-7, 7]), 2, rounding_mode="floor").tolist() == [-4, 3]
    assert ag.true_divide(_t([1, 2]), _t([4, 4])).dtype == np.float32
    x = _t([[0, 1], [2, 0]])
    np.testing.assert_array_equal(ag.nonzero(x).numpy(), [[0, 1], [1, 0]])
    rows, cols = x.nonzero(as_tuple=True)
    assert rows.tolist() == [0, 1] and cols.tolist() == [1, 0]
    assert ag.nonzero(_t(5.0)).shape == (1, 0) and ag.nonzero(_t(0.0)).shape == (0, 0)
    assert [t.tolist() for t in ag.nonzero(_t(5.0), as_tuple=True)] == [[0]]
    assert ag.isin(_t([1, 2, 3]), 2).tolist() == [False, True, False]
    assert ag.isin(2, _t([1, 2])).item() is True
    assert ag.broadcast_shapes((2, 1), (3,)) == (2, 3)
    p, q = ag.broadcast_tensors(_t([1.0, 2, 3]), _t([[1.0], [2.0]]))
    assert p.shape == q.shape == (2, 3)
    assert ag.is_complex(_t([1.0])) is False and not _t([1.0]).is_complex()
    v = _t([1.0, 2.0])
    assert ag.positive(v) is v   # torch.positive returns its input


def test_inplace_variants_as_pytorch():
    m = ag.ones(2, requires_grad=True) * 1
    m.addmv_(ag.ones(2, 3), ag.ones(3), beta=2)   # torch: [5., 5.]
    assert m.tolist() == [5.0, 5.0]
    r = ag.zeros(2, 3)
    r.addr_(_t([1.0, 2.0], np.float32), _t([1.0, 1.0, 1.0], np.float32))
    assert r.tolist() == [[1.0] * 3, [2.0] * 3]
    s = ag.zeros(2, 2)
    s.addbmm_(ag.ones(3, 2, 4), ag.ones(3, 4, 2))
    assert s.tolist() == [[12.0, 12.0], [12.0, 12.0]]
    c = ag.ones(2, 3)
    assert c.cumsum_(1).tolist() == [[1, 2, 3], [1, 2, 3]] and c.cumprod_(0).tolist() == [[1, 2, 3], [1, 4, 9]]
    n = ag.ones(2, 3).renorm_(2, 0, 1.0)
    np.testing.assert_allclose(n.numpy(), np.full((2, 3), 1 / np.sqrt(3)), rtol=1e-6)
    assert ag.ones(3, dtype=np.float64).float_power_(2).tolist() == [1.0, 1.0, 1.0]
    a = ag.ones(3, requires_grad=True)
    b = a * 1
    b.uniform_()
    b.sum().backward()   # torch: the old values get a zero gradient (UniformBackward0)
    assert a.grad.tolist() == [0.0, 0.0, 0.0]


def test_more_values_as_pytorch():
    # torch.gcd(tensor([12, -18, 0]), tensor([8, 12, 5])): [4, 6, 5]; lcm: [24, 36, 0]
    assert ag.gcd(_t([12, -18, 0]), _t([8, 12, 5])).tolist() == [4, 6, 5]
    assert ag.lcm(_t([12, -18, 0]), _t([8, 12, 5])).tolist() == [24, 36, 0]
    mantissa, exponent = ag.frexp(_t([8.0, 0.3, -5.0]))
    assert exponent.dtype == np.int32 and exponent.tolist() == [4, -1, 3]
    np.testing.assert_allclose(mantissa.numpy(), [0.5, 0.6, -0.625])
    assert ag.vander(_t([1, 2])).dtype == np.int64   # torch: int64 stays int64
    x = ag.zeros(2, 3)
    x.masked_scatter_(_t([[True, False, True], [False, True, True]]), ag.arange(1.0, 7.0).reshape(2, 3))
    assert x.tolist() == [[1.0, 0.0, 2.0], [0.0, 3.0, 4.0]]   # torch: the same
    y = ag.zeros(3, 4)
    y.index_fill_(1, _t([0, 2]), -1.0)
    assert y.tolist() == [[-1.0, 0.0, -1.0, 0.0]] * 3
    ag.manual_seed(2)
    r = ag.randint_like(ag.zeros(1000), 2, 5)
    assert r.dtype == np.float32 and set(np.unique(r.numpy()).tolist()) == {2.0, 3.0, 4.0}


def test_histogram_index_copy_and_comparison_methods_as_pytorch():
    # torch.histogram(tensor([1., 2, 1]), bins=4, range=(0., 3.)):
    # hist=[0., 2., 1., 0.], bin_edges=[0., 0.75, 1.5, 2.25, 3.]
    hist, edges = ag.histogram(_t([1.0, 2, 1]), bins=4, range=(0.0, 3.0))
    assert hist.tolist() == [0.0, 2.0, 1.0, 0.0] and edges.tolist() == [0.0, 0.75, 1.5, 2.25, 3.0]
    out = ag.histogram(_t([1.0, 2, 1]), bins=_t([0.0, 1, 2.5]), weight=_t([1.0, 2, 4]))
    assert out.hist.tolist() == [0.0, 7.0] and out.bin_edges.tolist() == [0.0, 1.0, 2.5]
    y = ag.zeros(2, 3)
    y.index_copy_(1, _t([2, 0]), ag.ones(2, 2))
    assert y.tolist() == [[1.0, 0.0, 1.0], [1.0, 0.0, 1.0]]
    x = _t([1.0, 2.0, 3.0])
    assert x.eq(2).tolist() == [False, True, False] and x.ge(2).tolist() == [False, True, True]
    assert x.ne(2).tolist() == [True, False, True] and x.lt(2).tolist() == [True, False, False]
    assert x.outer(x).shape == (3, 3)


# torch.hann_window(5): [0, 0.3455, 0.9045, 0.9045, 0.3455]; periodic=False: [0, .5, 1, .5, 0]
WINDOWS = [
    (lambda: ag.hann_window(5), [0.0, 0.3454915, 0.9045085, 0.9045085, 0.3454915]),
    (lambda: ag.hann_window(5, periodic=False), [0.0, 0.5, 1.0, 0.5, 0.0]),
    (lambda: ag.hann_window(1), [1.0]),
    (lambda: ag.hann_window(0), []),
    (lambda: ag.kaiser_window(4), [5.2773e-05, 0.21567, 1.0, 0.21567]),
    (lambda: ag.bartlett_window(5), [0.0, 0.4, 0.8, 0.8, 0.4]),
    (lambda: ag.blackman_window(4), [0.0, 0.34, 1.0, 0.34]),
    (lambda: ag.hamming_window(4, True, 0.5, 0.5), [0.0, 0.5, 1.0, 0.5]),
]


def test_sgn_of_complex_is_z_over_its_modulus():
    z = ag.tensor(np.array([3 + 4j, 0, -2j]), requires_grad=True)
    out = ag.sgn(z)   # torch: [0.6+0.8j, 0+0j, -0-1j]
    np.testing.assert_allclose(out.detach().numpy(), [0.6 + 0.8j, 0, -1j])
    with pytest.raises(NotImplementedError, match="sgn: the derivative for complex inputs"):
        out.abs().sum().backward()


@pytest.mark.parametrize("call,expected", WINDOWS)
def test_windows_as_pytorch(call, expected):
    out = call()
    assert out.dtype == np.float32 and not out.requires_grad
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-4, atol=1e-6)


def test_dtype_and_size_queries_as_pytorch():
    # torch.result_type(tensor([1]), 1.0): float32; promote_types(int32, float16): float16
    assert ag.result_type(_t([1]), 1.0) == np.float32
    assert ag.promote_types(np.int32, np.float16) == np.float16
    assert ag.can_cast(np.float32, np.int32) is False and ag.can_cast(np.int32, np.float32) is True
    assert ag.numel(ag.ones(2, 3)) == 6 and ag.is_nonzero(_t([1.0])) is True
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with more than one value is ambiguous"):
        ag.is_nonzero(_t([1.0, 2.0]))
    x = _t([1.0], requires_grad=True)
    assert not ag.detach(x).requires_grad
    with pytest.raises(RuntimeError, match="expected src to have a size equal to the slice of self. "
                                           r"src size = \[3\], slice size = \[4\]"):
        ag.select_scatter(ag.zeros(3, 4), ag.ones(3), 0, 1)


def test_inplace_random_fills():
    ag.manual_seed(5)
    x = ag.zeros(200000)
    x.normal_(2.0, 3.0)
    assert abs(float(x.mean()) - 2.0) < 0.03 and abs(float(x.std()) - 3.0) < 0.03
    x.uniform_(-1.0, 3.0)
    assert float(x.min()) >= -1.0 and float(x.max()) < 3.0 and abs(float(x.mean()) - 1.0) < 0.02
    x.uniform_(**{"from": 2.0, "to": 2.5})
    assert float(x.min()) >= 2.0 and float(x.max()) < 2.5
    assert abs(float(x.exponential_(2.0).mean()) - 0.5) < 0.01
    assert abs(float(x.log_normal_(0.0, 0.5).mean()) - np.exp(0.125)) < 0.01
    assert abs(float(x.geometric_(0.25).mean()) - 4.0) < 0.05 and float(x.min()) == 1.0
    x.random_(3, 7)
    assert set(np.unique(x.numpy()).tolist()) == {3.0, 4.0, 5.0, 6.0}
    assert set(np.unique(ag.zeros(1000).random_(2).numpy()).tolist()) == {0.0, 1.0}
    assert float(ag.zeros(1000).cauchy_().median()) == pytest.approx(0.0, abs=0.15)


def test_gradient_as_pytorch():
    # torch.gradient(tensor([1., 2, 4, 7, 11])): ([1.0, 1.5, 2.5, 3.5, 4.0],), with
    # spacing=(tensor([0., 1, 1.5, 3.5, 4]),): ([1.0, 3.0, 3.5, 6.7, 8.0],)
    x = _t([1.0, 2, 4, 7, 11], requires_grad=True)
    (g,) = ag.gradient(x)
    np.testing.assert_allclose(g.numpy() if not g.requires_grad else g.detach().numpy(),
                               [1.0, 1.5, 2.5, 3.5, 4.0])
    assert g.grad_fn.name() == "CatBackward0"   # torch: CatBackward0
    (g,) = ag.gradient(x, spacing=(_t([0.0, 1, 1.5, 3.5, 4]),))
    np.testing.assert_allclose(g.detach().numpy(), [1.0, 3.0, 3.5, 6.7, 8.0])
    (g,) = ag.gradient(_t([1, 2, 4, 7, 11]))   # integers: float32, as torch
    assert g.dtype == np.float32 and not g.requires_grad


def test_index_factories_and_logspace():
    # torch.tril_indices(3, 3): [[0, 1, 1, 2, 2, 2], [0, 0, 1, 0, 1, 2]]
    np.testing.assert_array_equal(ag.tril_indices(3, 3).numpy(),
                                  [[0, 1, 1, 2, 2, 2], [0, 0, 1, 0, 1, 2]])
    np.testing.assert_array_equal(ag.triu_indices(3, 4, 1).numpy(),
                                  [[0, 0, 0, 1, 1, 2], [1, 2, 3, 2, 3, 3]])
    assert ag.tril_indices(3, 3).dtype == np.int64 and ag.triu_indices(0, 0).shape == (2, 0)
    out = ag.logspace(0, 2, 5)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.numpy(), [1, 10 ** 0.5, 10, 10 ** 1.5, 100], rtol=1e-6)
    np.testing.assert_array_equal(ag.logspace(0, 3, 4, base=2, dtype=np.float64).numpy(), [1, 2, 4, 8])


# --------------------------------------------------------------------------- random


def test_random_samplers_follow_manual_seed():
    draws = []
    for _ in range(2):
        ag.manual_seed(7)
        draws.append([ag.randperm(8), ag.normal(0.0, 1.0, (4,)), ag.bernoulli(ag.full((5,), 0.5)),
                      ag.multinomial(_t([0.2, 0.3, 0.5]), 2), ag.poisson(ag.full((3,), 2.0))])
    for a, b in zip(*draws):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    perm = draws[0][0]
    assert perm.dtype == np.int64 and sorted(perm.tolist()) == list(range(8))


def test_random_sampler_statistics():
    ag.manual_seed(3)
    x = ag.normal(5.0, 2.0, (200000,))
    assert abs(float(x.mean()) - 5.0) < 0.02 and abs(float(x.std()) - 2.0) < 0.02
    b = ag.bernoulli(ag.full((200000,), 0.3))
    assert b.dtype == np.float32 and abs(float(b.mean()) - 0.3) < 0.005
    w = _t([0.1, 0.0, 0.6, 0.3])
    s = ag.multinomial(w, 100000, replacement=True)
    np.testing.assert_allclose(np.bincount(s.numpy(), minlength=4) / 1e5, [0.1, 0, 0.6, 0.3], atol=0.01)
    first = np.array([ag.multinomial(w, 1).item() for _ in range(3000)])
    np.testing.assert_allclose(np.bincount(first, minlength=4) / 3000, [0.1, 0, 0.6, 0.3], atol=0.03)
    rows = ag.multinomial(_t([[1.0, 2, 3, 0], [0, 0, 1, 1]]), 2)
    assert rows.shape == (2, 2) and set(rows[1].tolist()) == {2, 3}
    r = ag.poisson(ag.full((200000,), 4.0))
    assert r.dtype == np.float32 and abs(float(r.mean()) - 4.0) < 0.03


def test_normal_with_tensor_mean_and_std_is_differentiable():
    mean = ag.zeros(2, 3, requires_grad=True)
    std = ag.ones(3, requires_grad=True)
    out = ag.normal(mean, std)
    assert out.shape == (2, 3)
    out.sum().backward()
    np.testing.assert_array_equal(mean.grad.numpy(), np.ones((2, 3)))
    # d(mean + std * z)/d std = z, summed over the broadcast rows
    np.testing.assert_allclose(std.grad.numpy(), (out - mean).detach().sum(0).numpy(), rtol=1e-6)


# --------------------------------------------------------------------------- on the GPU


@pytest.mark.cuda
def test_factories_samplers_and_counts_on_the_gpu():
    """The same seed gives the same draws on "cuda" as before; results stay on the device."""
    ag.manual_seed(4)
    first = [ag.randperm(6, device="cuda"), ag.normal(0.0, 1.0, (3,), device="cuda")]
    ag.manual_seed(4)
    again = [ag.randperm(6, device="cuda"), ag.normal(0.0, 1.0, (3,), device="cuda")]
    for a, b in zip(first, again):
        assert a.device.type == "cuda"
        np.testing.assert_array_equal(a.cpu().numpy(), b.cpu().numpy())
    w = ag.tensor(np.array([[0.2, 0.0, 0.8], [1.0, 1.0, 0.0]]), device="cuda")
    for replacement in (True, False):
        s = ag.multinomial(w, 2, replacement=replacement)
        assert s.device.type == "cuda" and s.shape == (2, 2) and 1 not in s[0].cpu().tolist()
    assert ag.poisson(ag.full((4,), 3.0, device="cuda")).device.type == "cuda"
    assert ag.bernoulli(ag.full((4,), 0.5, device="cuda")).device.type == "cuda"
    assert ag.tril_indices(3, 3, device="cuda").cpu().tolist() == [[0, 1, 1, 2, 2, 2], [0, 0, 1, 0, 1, 2]]
    np.testing.assert_allclose(ag.hann_window(5, device="cuda").cpu().numpy(),
                               [0.0, 0.3454915, 0.9045085, 0.9045085, 0.3454915], rtol=1e-5, atol=1e-7)
    x = ag.tensor(np.array([[3.0, 1, 3], [1, 2, 1]]), device="cuda")
    values, inverse, counts = ag.unique(x, return_inverse=True, return_counts=True)
    assert values.cpu().tolist() == [1.0, 2.0, 3.0] and counts.cpu().tolist() == [3, 1, 2]
    assert inverse.cpu().tolist() == [[2, 0, 2], [0, 1, 0]]
    assert ag.unique_consecutive(x.reshape(-1), return_counts=True)[1].cpu().tolist() == [1, 1, 1, 1, 1, 1]
    assert ag.bincount(ag.tensor(np.array([0, 2, 2]), device="cuda")).cpu().tolist() == [1, 0, 2]
    hist, edges = ag.histogram(x, 2)
    assert hist.device.type == "cuda" and hist.cpu().tolist() == [3.0, 3.0]   # [1, 2) and [2, 3]
    assert ag.nonzero(x > 2).cpu().tolist() == [[0, 0], [0, 2]]
