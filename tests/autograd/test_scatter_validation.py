"""scatter/scatter_add/scatter_reduce with src larger than index: PyTorch 2.13's forward
computes the value from src's first entries and its backward raises in validate_outputs,
because src's gradient has index's shape. gradtrace's engine makes the same check, with
PyTorch's message (the index counts the inputs that can take a gradient, as PyTorch's edges
do: src is 1)."""
import re

import numpy as np
import pytest

import gradtrace.autograd as ag


def _raises(node, got, want):
    return pytest.raises(RuntimeError, match=re.escape(
        f"Function {node} returned an invalid gradient at index 1 - got {got} but expected "
        f"shape compatible with {want}"))


@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_src_with_fewer_columns_raises_in_backward_as_torch(dim):
    x = ag.tensor(np.arange(8.0).reshape(2, 4), requires_grad=True)
    src = ag.tensor([[10.0, 11.0, 12.0, 13.0], [20.0, 21.0, 22.0, 23.0]], requires_grad=True)
    index = ag.tensor([[1], [0]]) if dim == 1 else ag.tensor([[1], [0]])
    out = ag.scatter(x, dim, index, src)   # the forward works, as PyTorch's
    want = {0: [[20.0, 1, 2, 3], [10.0, 5, 6, 7]], 1: [[0, 10.0, 2, 3], [20.0, 5, 6, 7]]}[dim]
    np.testing.assert_array_equal(out.detach().numpy(), want)
    with _raises("ScatterBackward0", [2, 1], [2, 4]):
        out.sum().backward()


def test_scatter_with_src_the_shape_of_index_still_works():
    x = ag.zeros(2, 4, requires_grad=True)
    src = ag.tensor([[1.0], [2.0]], requires_grad=True)
    ag.scatter(x, 1, ag.tensor([[3], [0]]), src).sum().backward()
    np.testing.assert_array_equal(src.grad.numpy(), [[1.0], [1.0]])
    np.testing.assert_array_equal(x.grad.numpy(), [[1, 1, 1, 0], [0, 1, 1, 1]])


def test_scatter_add_and_scatter_reduce_raise_as_torch():
    index = ag.tensor([[0, 0], [3, 1], [2, 2]])
    for fn, node in ((lambda x, s: x.scatter_add(1, index, s), "ScatterAddBackward0"),
                     (lambda x, s: x.scatter_reduce(1, index, s, "mean"),
                      "ScatterReduceBackward0")):
        x = ag.ones(3, 4, requires_grad=True)
        s = ag.ones(3, 3, requires_grad=True)
        with _raises(node, [3, 2], [3, 3]):
            fn(x, s).sum().backward()


class _Bad(ag.Function):
    @staticmethod
    def forward(ctx, x, y):
        return x * 2 + y.sum()

    @staticmethod
    def backward(ctx, g):
        return g[:1], g


class _Broadcast(ag.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return ag.ones(2, 3)


def test_custom_function_gradients_are_validated_as_torchs():
    x, y = ag.ones(3, requires_grad=True), ag.ones(3, requires_grad=True)
    with _raises_at0("_BadBackward", [1], [3]):
        _Bad.apply(x, y).sum().backward()
    # A gradient that the input's shape broadcasts to is summed down (torch: [2., 2., 2.]).
    _Broadcast.apply(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])


def _raises_at0(node, got, want):
    return pytest.raises(RuntimeError, match=re.escape(
        f"Function {node} returned an invalid gradient at index 0 - got {got} but expected "
        f"shape compatible with {want}"))
