"""Custom autograd.Function."""
import numpy as np
import pytest

import gradtrace.autograd as ag
from .gradcheck import check_grad


class Cube(ag.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x


def test_custom_function_gradient_and_node_name():
    x = ag.tensor(np.array([0.5, -2.0]), requires_grad=True)
    y = Cube.apply(x)
    assert y.grad_fn.name() == "CubeBackward"
    check_grad(Cube.apply, [x])
    (g,) = ag.grad(Cube.apply(x).sum(), x, create_graph=True)
    (gg,) = ag.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), 6 * x.detach().numpy())


def test_needs_input_grad_and_non_tensor_args():
    seen = {}

    class Scale(ag.Function):
        @staticmethod
        def forward(ctx, x, y, k):
            seen["needs"] = ctx.needs_input_grad
            ctx.k = k
            return x * y * k

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None, None

    x = ag.tensor([1.0, 2.0], requires_grad=True)
    y = ag.tensor([3.0, 4.0])
    Scale.apply(x, y, 2.0).sum().backward()
    assert seen["needs"] == (True, False, False)
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


def test_mark_non_differentiable_and_mark_dirty():
    class SortWithIndex(ag.Function):
        @staticmethod
        def forward(ctx, x):
            idx = ag.tensor(np.argsort(x.data))
            ctx.mark_non_differentiable(idx)
            ctx.save_for_backward(idx)
            return ag.tensor(np.sort(x.data)), idx

        @staticmethod
        def backward(ctx, g, g_idx):
            (idx,) = ctx.saved_tensors
            out = np.zeros_like(g.data)
            out[idx.data] = g.data
            return ag.tensor(out)

    x = ag.tensor([3.0, 1.0, 2.0], requires_grad=True)
    vals, idx = SortWithIndex.apply(x)
    assert not idx.requires_grad and vals.requires_grad
    (vals * ag.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 1.0, 2.0])

    class AddOneInPlace(ag.Function):
        @staticmethod
        def forward(ctx, x):
            x.data += 1
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    a = ag.tensor([1.0], requires_grad=True) * 1
    v = a._version
    b = AddOneInPlace.apply(a)
    assert b is a and a._version == v + 1 and a.grad_fn.name() == "AddOneInPlaceBackward"


def test_saved_tensor_modified_in_place_raises():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1
    y = Cube.apply(h)
    with ag.no_grad():
        h.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_wrong_number_of_gradients_is_an_error():
    class Bad(ag.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x + y

        @staticmethod
        def backward(ctx, g):
            return g

    x = ag.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        Bad.apply(x, x).sum().backward()


def test_custom_function_gradient_sums_with_other_gradients():
    """Its gradient is a plain array in a normal backward, so it adds to other paths' grads."""
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    (Cube.apply(x * 2) + x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * (2 * np.array([1.0, 2.0])) ** 2 * 2 + 1)
