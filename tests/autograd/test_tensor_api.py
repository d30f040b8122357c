"""Tensor API a PyTorch user reaches for at once: layout queries, casts, in-place unary math,
scatter_/put_, bitwise ops, in-place view ops. Expected values are PyTorch 2.13's."""
from __future__ import annotations

import numpy as np
import pytest

import gradtrace.autograd as ag

# (method, torch's node after ``(x * 1).<method>()``)
INPLACE_UNARY_NODES = [
    ("log_", "LogBackward0"), ("log2_", "Log2Backward0"), ("log10_", "Log10Backward0"),
    ("log1p_", "Log1PBackward0"), ("exp2_", "Exp2Backward0"), ("expm1_", "Expm1Backward0"),
    ("sin_", "SinBackward0"), ("cos_", "CosBackward0"), ("tan_", "TanBackward0"),
    ("asin_", "AsinBackward0"), ("arcsin_", "AsinBackward0"), ("acos_", "AcosBackward0"),
    ("atan_", "AtanBackward0"), ("sinh_", "SinhBackward0"), ("cosh_", "CoshBackward0"),
    ("asinh_", "AsinhBackward0"), ("atanh_", "AtanhBackward0"), ("rsqrt_", "RsqrtBackward0"),
    ("reciprocal_", "ReciprocalBackward0"), ("floor_", "FloorBackward0"),
    ("ceil_", "CeilBackward0"), ("round_", "RoundBackward0"), ("trunc_", "TruncBackward0"),
    ("fix_", "TruncBackward0"), ("frac_", "FracBackward0"), ("sign_", "SignBackward0"),
]


@pytest.mark.parametrize("method,node", INPLACE_UNARY_NODES)
def test_inplace_unary_records_torchs_node_and_bumps_version(method, node):
    a = ag.tensor([0.3, 0.6], dtype=np.float64, requires_grad=True)
    b = a * 1
    out = getattr(b, method)()
    assert out is b and b._version == 1 and b.grad_fn.name() == node
    expected = getattr(ag.tensor([0.3, 0.6], dtype=np.float64), method.rstrip("_"))()
    np.testing.assert_allclose(b.detach().numpy(), expected.numpy())


# torch: a float result cannot be written into an integer tensor.
@pytest.mark.parametrize("method", ["log_", "sin_", "cos_", "reciprocal_", "rsqrt_", "atanh_"])
def test_inplace_float_op_on_int_tensor_raises_torchs_error(method):
    x = ag.tensor([1, 2])
    with pytest.raises(RuntimeError,
                       match="result type Float can't be cast to the desired output type Long"), \
            np.errstate(all="ignore"):   # atanh(1) is inf before the refusal
        getattr(x, method)()
    assert x.tolist() == [1, 2] and x._version == 0


# torch: floor_/ceil_/round_/trunc_/sign_ keep an integer tensor's values and dtype.
@pytest.mark.parametrize("method,expected", [("floor_", [-2, 3]), ("ceil_", [-2, 3]),
                                             ("round_", [-2, 3]), ("trunc_", [-2, 3]),
                                             ("sign_", [-1, 1])])
def test_inplace_rounding_on_int_tensor_keeps_it(method, expected):
    x = ag.tensor([-2, 3])
    getattr(x, method)()
    assert x.tolist() == expected and x.dtype == np.int64


# --------------------------------------------------------------------------- layout queries

X = ag.arange(12.0).reshape(3, 4)

# (what, gradtrace's value, torch 2.13's)
LAYOUT = [
    ("stride", lambda: X.stride(), (4, 1)),
    ("stride(dim)", lambda: (X.stride(1), X.stride(-2)), (1, 4)),
    ("stride of t()", lambda: X.t().stride(), (1, 4)),
    ("stride of expand", lambda: X.expand(2, 3, 4).stride(), (0, 4, 1)),
    ("stride of unsqueeze", lambda: (X.unsqueeze(1).stride(), X.unsqueeze(-1).stride()),
     ((4, 4, 1), (4, 1, 1))),
    ("stride of a step slice", lambda: X[::2].stride(), (8, 1)),
    ("stride of empty", lambda: (ag.zeros(0, 3).stride(), ag.zeros(3, 0).stride()),
     ((3, 1), (1, 1))),
    ("stride of size-1 dims", lambda: ag.zeros(3, 1, 2).stride(), (2, 2, 1)),
    ("stride of 0-d", lambda: ag.tensor(1.0).stride(), ()),
    ("is_contiguous", lambda: (X.is_contiguous(), X.t().is_contiguous(),
                               X[:, :1].is_contiguous(), X[::2].is_contiguous(),
                               X.unsqueeze(1).is_contiguous(), ag.zeros(0, 3).t().is_contiguous()),
     (True, False, False, False, True, True)),
    ("is_contiguous(memory_format)", lambda: X.is_contiguous(memory_format="contiguous_format"),
     True),
    ("storage_offset", lambda: (X.storage_offset(), X[:, 1:].storage_offset(),
                                X[1].storage_offset(), X[1:].detach().storage_offset()),
     (0, 1, 4, 4)),
    ("data_ptr", lambda: (X[1].data_ptr() - X.data_ptr(), (+X).data_ptr() == X.data_ptr()),
     (16, True)),
    ("itemsize, nelement, ndimension", lambda: (X.itemsize, X.nelement(), X.ndimension()),
     (4, 12, 2)),
    ("contiguous", lambda: (X.contiguous() is X, X.t().contiguous().is_contiguous()),
     (True, True)),
    ("__contains__", lambda: (3.0 in X, 100 in X, ag.tensor(3.0) in X), (True, False, True)),
    ("__pos__", lambda: +X is X, True),
    ("casts", lambda: (X.byte().dtype, X.char().dtype, X.short().dtype, X.byte().tolist()[0]),
     (np.uint8, np.int8, np.int16, [0, 1, 2, 3])),
]


@pytest.mark.parametrize("what,value,expected", LAYOUT, ids=[c[0] for c in LAYOUT])
def test_layout_queries_match_torch(what, value, expected):
    assert value() == expected


def test_layout_errors_are_torchs():
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of "
                                         r"\[-2, 1\], but got 2\)"):
        X.stride(2)
    with pytest.raises(RuntimeError,
                       match="The `\\+` operator, on a bool tensor is not supported."):
        +ag.tensor([True])
    with pytest.raises(RuntimeError, match="Tensor.__contains__ only supports Tensor or scalar, "
                                           "but you passed in a <class 'str'>."):
        "a" in X  # noqa: B015 - the test is the raise


def test_view_as_and_contiguous_record_torchs_nodes():
    y = ag.zeros(2, 3, requires_grad=True) * 1
    v = y.view_as(ag.zeros(6))
    assert v.shape == (6,) and v.grad_fn.name() == "ViewBackward0"
    c = y.t().contiguous()
    assert c.grad_fn.name() == "CloneBackward0" and c.is_contiguous()
    # a cast to an integer type ends the history (torch: grad_fn None)
    assert y.short().grad_fn is None and not y.short().requires_grad


# --------------------------------------------------------------------------- scatter_, put_


def _nonleaf(*shape):
    return ag.arange(1.0, 1.0 + np.prod(shape)).reshape(shape).requires_grad_() * 1


# (call on a (2, 3) non-leaf, torch's node, torch's values)
WRITES = [
    ("scatter_", lambda t: t.scatter_(1, ag.tensor([[2], [0]]), ag.tensor([[9.0], [8.0]])),
     "ScatterBackward0", [[1, 2, 9], [8, 5, 6]]),
    ("scatter_ value", lambda t: t.scatter_(1, ag.tensor([[2], [0]]), 7.0),
     "ScatterBackward1", [[1, 2, 7], [7, 5, 6]]),
    ("scatter_ value=", lambda t: t.scatter_(1, ag.tensor([[2], [0]]), value=7.0),
     "ScatterBackward1", [[1, 2, 7], [7, 5, 6]]),
    ("scatter_add_", lambda t: t.scatter_add_(1, ag.tensor([[2, 2]]), ag.tensor([[1.0, 2.0]])),
     "ScatterAddBackward0", [[1, 2, 6], [4, 5, 6]]),
    # torch: NotImplemented node (its backward raises); here scatter_reduce_'s
    ("scatter_ reduce=add", lambda t: t.scatter_(1, ag.tensor([[0, 0]]), ag.tensor([[1.0, 2.0]]),
                                                 reduce="add"),
     "ScatterReduceBackward0", [[4, 2, 3], [4, 5, 6]]),
    ("scatter_ reduce=multiply", lambda t: t.scatter_(1, ag.tensor([[1, 1]]), 3.0,
                                                      reduce="multiply"),
     "ScatterReduceBackward0", [[1, 18, 3], [4, 5, 6]]),
    ("put_", lambda t: t.put_(ag.tensor([0, -1]), ag.tensor([9.0, 8.0])),
     "PutBackward0", [[9, 2, 3], [4, 5, 8]]),
    ("put_ accumulate", lambda t: t.put_(ag.tensor([4, 4]), ag.tensor([1.0, 2.0]),
                                         accumulate=True),
     "PutBackward0", [[1, 2, 3], [4, 8, 6]]),
    ("addmm_", lambda t: t.addmm_(ag.ones(2, 4), ag.ones(4, 3), beta=0.5, alpha=2),
     "CopyBackwards", [[8.5, 9, 9.5], [10, 10.5, 11]]),   # torch: AddmmBackward0
]


@pytest.mark.parametrize("what,call,node,expected", WRITES, ids=[w[0] for w in WRITES])
def test_inplace_writes_match_torch(what, call, node, expected):
    t = _nonleaf(2, 3)
    assert call(t) is t
    assert t.tolist() == expected and t._version == 1 and t.grad_fn.name() == node


def test_put_out_of_place_leaves_input():
    a = _nonleaf(2, 2)
    out = a.put(ag.tensor([3, 0]), ag.tensor([7.0, 6.0]))
    assert out.grad_fn.name() == "PutBackward0" and out.tolist() == [[6, 2], [3, 7]]
    assert a.tolist() == [[1, 2], [3, 4]]


# torch's classes and words
PUT_ERRORS = [
    (lambda: ag.zeros(2, 2).put_(ag.tensor([4]), ag.tensor([1.0])), IndexError,
     "out of range: tried to access index 4 on a tensor of 4 elements."),
    (lambda: ag.zeros(2, 2).put_(ag.tensor([0, 1]), ag.tensor([1.0])), IndexError,
     r"put_\(\): Expected source and index to have the same number of elements, but got "
     r"source.numel\(\) = 1, index.numel\(\) = 2"),
    (lambda: ag.zeros(2, 2).put(ag.tensor([0.0]), ag.tensor([1.0])), RuntimeError,
     r"put_\(\): Expected a long tensor for index, but got Float"),
    (lambda: ag.zeros(2, 2).put_(ag.tensor([0]), ag.tensor([1.0], dtype=np.float64)),
     RuntimeError, r"put_\(\): self and source expected to have the same dtype, but got "
     "self.dtype = Float and source.dtype = Double"),
    (lambda: ag.ones(2, 3).scatter_(1, ag.tensor([[0]]), 3.0, reduce="mean"), RuntimeError,
     "reduce argument must be either add or multiply."),
]


@pytest.mark.parametrize("call,cls,message", PUT_ERRORS)
def test_put_and_scatter_errors_are_torchs(call, cls, message):
    with pytest.raises(cls, match=message):
        call()


def test_scatter_reduce_out_of_place():
    # torch.ones(2, 3).scatter(1, tensor([[0, 0], [1, 1]]), 3.0, reduce="add")
    out = ag.ones(2, 3).scatter(1, ag.tensor([[0, 0], [1, 1]]), 3.0, reduce="add")
    assert out.tolist() == [[7, 1, 1], [1, 7, 1]]


@pytest.mark.cuda
def test_layout_queries_on_cuda_arrays():
    # torch on a GPU: the same strides and offsets; data_ptr a device address.
    x = ag.arange(12.0, device="cuda").reshape(3, 4)
    assert x.stride() == (4, 1) and not x.t().is_contiguous()
    assert (x.storage_offset(), x[1].storage_offset(), x[:, 1:][1].storage_offset()) == (0, 4, 5)
    assert x[1].data_ptr() - x.data_ptr() == 16 and 3.0 in x
    out = x.put(ag.tensor([0, -1], device="cuda"), ag.tensor([5.0, 6.0], device="cuda"))
    assert out.tolist()[0][0] == 5.0 and out.tolist()[2][3] == 6.0


# --------------------------------------------------------------------------- bitwise ops

A = ag.tensor([5, -3, 12])
B = ag.tensor([3, 1, 2], dtype=np.int32)
TF = ag.tensor([True, False, True])

# (expression, torch 2.13's values, dtype)
BITWISE = [
    ("a & b", lambda: A & B, [1, 1, 0], np.int64),
    ("bitwise_or(a, 3)", lambda: ag.bitwise_or(A, 3), [7, -1, 15], np.int64),
    ("a ^ b", lambda: A ^ B, [6, -4, 14], np.int64),
    ("6 & a", lambda: 6 & A, [4, 4, 4], np.int64),
    ("a | True", lambda: A | True, [5, -3, 13], np.int64),
    ("bool & 1", lambda: TF & 1, [1, 0, 1], np.int64),
    ("bool | bool", lambda: TF | TF, [True, False, True], np.bool_),
    ("bool ^ True", lambda: TF ^ True, [False, True, False], np.bool_),
    ("~a", lambda: ~A, [-6, 2, -13], np.int64),
    ("~bool", lambda: ~TF, [False, True, False], np.bool_),
    ("a << b", lambda: ag.bitwise_left_shift(A, B), [40, -6, 48], np.int64),
    ("a >> b", lambda: A.bitwise_right_shift(B), [0, -2, 3], np.int64),
    ("1 << a", lambda: 1 << A.clamp(0, 4), [16, 1, 16], np.int64),
    ("shift by the width or more",
     lambda: ag.tensor([1, 1, -8, -8, 8]) << ag.tensor([64, -1, 0, 1, 2]),
     [0, 0, -8, -16, 32], np.int64),
    ("right shift past the width", lambda: ag.tensor([-8, -8, 8]) >> ag.tensor([70, -1, 63]),
     [-1, -1, 0], np.int64),
    ("uint8 shifts", lambda: ag.cat([ag.tensor([1], dtype=np.uint8) << 9,
                                     ag.tensor([200], dtype=np.uint8) >> 9]), [0, 0], np.uint8),
]


@pytest.mark.parametrize("what,value,expected,dtype", BITWISE, ids=[b[0] for b in BITWISE])
def test_bitwise_ops_match_torch(what, value, expected, dtype):
    out = value()
    assert out.tolist() == expected and out.dtype == dtype and out.grad_fn is None


BITWISE_ERRORS = [
    (lambda: ag.tensor([1.5]) & 1, NotImplementedError,
     "\"bitwise_and_cpu\" not implemented for 'Float'"),
    (lambda: ag.tensor([1]) | 1.5, NotImplementedError,   # the promoted dtype, as torch
     "\"bitwise_or_cpu\" not implemented for 'Float'"),
    (lambda: ag.tensor([1.5]) ^ ag.tensor([1]), NotImplementedError,
     "\"bitwise_xor_cpu\" not implemented for 'Float'"),
    (lambda: ag.bitwise_not(ag.tensor([1.5])), NotImplementedError,
     "\"bitwise_not_cpu\" not implemented for 'Float'"),
    (lambda: ~ag.tensor([1.5]), TypeError,
     r"~ \(operator.invert\) is only implemented on integer and Boolean-type tensors"),
    (lambda: ag.tensor([1.5]) << 1, NotImplementedError,
     "\"lshift_cpu\" not implemented for 'Float'"),
    (lambda: ag.tensor([1.5]) >> 1, NotImplementedError,
     "\"rshift_cpu\" not implemented for 'Float'"),
    (lambda: TF << TF, NotImplementedError, "\"lshift_cpu\" not implemented for 'Bool'"),
    (lambda: ag.tensor([True]).bitwise_and_(ag.tensor([2])), RuntimeError,
     "result type Long can't be cast to the desired output type Bool"),
]


@pytest.mark.parametrize("call,cls,message", BITWISE_ERRORS)
def test_bitwise_errors_are_torchs(call, cls, message):
    with pytest.raises(cls, match=message):
        call()


def test_bitwise_inplace_and_augmented_assignment():
    x = ag.tensor([1, 2])
    y = x
    y &= 2           # torch: x is changed, not rebound
    assert x.tolist() == [0, 2] and x._version == 1
    y <<= 1
    y |= 1
    y ^= 3
    y >>= 1
    assert x.tolist() == [1, 3] and x._version == 5
    # torch: an int32 tensor keeps its dtype under an int64 operand
    z = ag.tensor([1, 2], dtype=np.int32).bitwise_and_(ag.tensor([3, 3]))
    assert z.dtype == np.int32 and z.tolist() == [1, 2]
    assert ag.tensor([1, 2]).bitwise_not_().tolist() == [-2, -3]
