"""Tensor.index_put_ / torch.index_put with and without accumulate, against PyTorch 2.13's
answers from the same calls (float64), and their errors in PyTorch's classes and words.

PyTorch leaves the value at a position indexed twice without accumulate undefined (its CUDA
kernel's winner changes from run to run); here NumPy's last write wins on the CPU, and the
tests only read such a position's gradient, which both give as zero for x and the full
upstream gradient for every value written there.
"""
import numpy as np
import pytest

import gradtrace.autograd as ag


def T(a):
    return ag.tensor(np.array(a))


# (label, indices, values, accumulate, torch's value, x's gradient, values' gradient), into
# zeros(3, 4), upstream gradient arange(12).reshape(3, 4)
PUTS = [
    ("accumulate_repeats", ([0, 0, 2], [1, 1, 3]), [1.0, 2.0, 3.0], True,
     [[0, 3, 0, 0], [0, 0, 0, 0], [0, 0, 0, 3]], np.arange(12.0).reshape(3, 4), [1, 1, 11]),
    ("overwrite", ([0, 2], [1, 3]), [1.0, 3.0], False,
     [[0, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 3]],
     [[0, 0, 2, 3], [4, 5, 6, 7], [8, 9, 10, 0]], [1, 11]),
    ("overwrite_repeats_gradient", ([0, 0, 2], [1, 1, 3]), [1.0, 1.0, 3.0], False,
     [[0, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 3]],
     [[0, 0, 2, 3], [4, 5, 6, 7], [8, 9, 10, 0]], [1, 1, 11]),
    ("accumulate_broadcast_row", ([0, 0],), 1.0, True,
     [[2, 2, 2, 2], [0, 0, 0, 0], [0, 0, 0, 0]], np.arange(12.0).reshape(3, 4), 12.0),
    ("accumulate_mask", ([True, False, True],), [1.0, 2.0, 3.0, 4.0], True,
     [[1, 2, 3, 4], [0, 0, 0, 0], [1, 2, 3, 4]], np.arange(12.0).reshape(3, 4), [8, 10, 12, 14]),
    ("accumulate_mask_and_index", ([True, False, True], [1, 3]), [1.0, 5.0], True,
     [[0, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 5]], np.arange(12.0).reshape(3, 4), [1, 11]),
    ("accumulate_negative", ([-1, 2], [0, -4]), [1.0, 2.0], True,
     [[0, 0, 0, 0], [0, 0, 0, 0], [3, 0, 0, 0]], np.arange(12.0).reshape(3, 4), [8, 8]),
]


@pytest.mark.parametrize("label,indices,values,accumulate,value,x_grad,v_grad", PUTS,
                         ids=[p[0] for p in PUTS])
@pytest.mark.parametrize("form", ["function", "method", "inplace"])
def test_index_put_matches_torch(label, indices, values, accumulate, value, x_grad, v_grad, form):
    x = ag.zeros(3, 4, dtype="float64", requires_grad=True)
    v = ag.tensor(np.array(values), requires_grad=True)
    key = tuple(T(i) for i in indices)
    if form == "function":
        out = ag.index_put(x, key, v, accumulate=accumulate)
    elif form == "method":
        out = x.index_put(key, v, accumulate)
    else:
        out = (x * 1.0).index_put_(key, v, accumulate=accumulate)
    assert out.grad_fn.name() == "IndexPutBackward0"
    out.backward(ag.tensor(np.arange(12.0).reshape(3, 4)))
    np.testing.assert_array_equal(out.detach().numpy(), value)
    np.testing.assert_array_equal(x.grad.numpy(), x_grad)
    np.testing.assert_array_equal(v.grad.numpy(), v_grad)


def test_index_put_inplace_bumps_the_version_and_returns_self():
    # torch: index_put_ returns self, its version goes up by one
    x = ag.zeros(3)
    before = x._version
    assert x.index_put_((T([1]),), ag.tensor(np.array(2.0, dtype=np.float32)), True) is x
    assert x._version == before + 1
    np.testing.assert_array_equal(x.numpy(), [0.0, 2.0, 0.0])


# (call, torch's class, torch's message), into zeros(3) (float32) unless said
ERRORS = [
    (lambda: ag.zeros(3).index_put((T([3]),), ag.tensor(1.0), accumulate=True),
     IndexError, "index 3 is out of bounds for dimension 0 with size 3"),
    (lambda: ag.zeros(3).index_put((T([-4]),), ag.tensor(1.0)),
     IndexError, "index -4 is out of bounds for dimension 0 with size 3"),
    (lambda: ag.zeros(3).index_put((T([1.0]),), ag.tensor(1.0)),
     IndexError, "tensors used as indices must be long, int, byte or bool tensors"),
    (lambda: ag.zeros(3).index_put((T([1]),), ag.tensor([1.0, 2.0])),
     RuntimeError, "shape mismatch: value tensor of shape [2] cannot be broadcast to indexing "
                   "result of shape [1]"),
    (lambda: ag.zeros(3).index_put((T([1]),), T(1)),
     RuntimeError, "Index put requires the source and destination dtypes match, got Float for "
                   "the destination and Long for the source."),
    (lambda: ag.zeros(3).index_put((T([1]),), 1.0),
     TypeError, "index_put(): argument 'values' (position 2) must be Tensor, not float"),
    (lambda: ag.zeros(3).index_put((T([True, False]),), ag.tensor(1.0)),
     IndexError, "The shape of the mask [2] at index 0 does not match the shape of the indexed "
                 "tensor [3] at index 0"),
    (lambda: ag.zeros(3).index_put((T([0]), T([0])), ag.tensor(1.0)),
     IndexError, "too many indices for tensor of dimension 1 (got 2)"),
    (lambda: ag.zeros(2, 3).index_put((T([0, 1]), T([0, 1, 1])), ag.ones(3)),
     IndexError, "shape mismatch: indexing tensors could not be broadcast together with shapes "
                 "[2], [3]"),
    (lambda: ag.zeros(2, 3).index_put((T([0]), None), ag.ones(3)),
     TypeError, "expected Tensor as element 1 in argument 0, but got NoneType"),
]


@pytest.mark.parametrize("call,cls,message", ERRORS, ids=[e[2][:40] for e in ERRORS])
def test_errors_match_torch(call, cls, message):
    with pytest.raises(cls) as info:
        call()
    assert str(info.value) == message
