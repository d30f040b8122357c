"""Issue 28, PyTorch programs unchanged: ``add_``/``sub_`` with ``alpha``, the ``add(...,
alpha=)`` family under one node, ``Tensor.type``, ``format`` of a 0-d tensor, every form of
``randint``. Expected values are PyTorch 2.13's (pinned)."""
import re

import numpy as np
import pytest

import gradtrace.autograd as torch   # the way a ported program imports it


def _ab():
    return (torch.tensor([1.0, 2.0], requires_grad=True),
            torch.tensor([3.0, 4.0], requires_grad=True))


# expression, PyTorch's value, its node, d(sum)/da, d(sum)/db
ALPHA = [
    ("a.clone().add_(b, alpha=2)", [7.0, 10.0], "AddBackward0", [1.0, 1.0], [2.0, 2.0]),
    ("a.clone().sub_(b, alpha=2)", [-5.0, -6.0], "SubBackward0", [1.0, 1.0], [-2.0, -2.0]),
    ("a.clone().subtract_(b, alpha=2)", [-5.0, -6.0], "SubBackward0", [1.0, 1.0], [-2.0, -2.0]),
    ("a.clone().add_(2, alpha=3)", [7.0, 8.0], "AddBackward0", [1.0, 1.0], None),
    ("torch.add(a, b, alpha=2)", [7.0, 10.0], "AddBackward0", [1.0, 1.0], [2.0, 2.0]),
    ("torch.sub(a, b, alpha=2)", [-5.0, -6.0], "SubBackward0", [1.0, 1.0], [-2.0, -2.0]),
    ("torch.subtract(a, b, alpha=2)", [-5.0, -6.0], "SubBackward0", [1.0, 1.0], [-2.0, -2.0]),
    ("a.add(b, alpha=-0.5)", [-0.5, 0.0], "AddBackward0", [1.0, 1.0], [-0.5, -0.5]),
    ("a.sub(b, alpha=0.5)", [-0.5, 0.0], "SubBackward0", [1.0, 1.0], [-0.5, -0.5]),
    ("torch.rsub(a, b, alpha=2)", [1.0, 0.0], "RsubBackward0", [-2.0, -2.0], [1.0, 1.0]),
    ("torch.rsub(a, b)", [2.0, 2.0], "RsubBackward0", [-1.0, -1.0], [1.0, 1.0]),
    ("torch.rsub(a, 5.0)", [4.0, 3.0], "RsubBackward1", [-1.0, -1.0], None),
    ("torch.add(a, b)", [4.0, 6.0], "AddBackward0", [1.0, 1.0], [1.0, 1.0]),
]


@pytest.mark.parametrize("expr, value, node, grad_a, grad_b", ALPHA, ids=[r[0] for r in ALPHA])
def test_alpha_forms_match_torch(expr, value, node, grad_a, grad_b):
    a, b = _ab()
    out = eval(expr)   # noqa: S307 - a fixed table
    np.testing.assert_array_equal(out.detach().numpy(), value)
    assert out.grad_fn.name() == node
    out.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), grad_a)
    if grad_b is None:
        assert b.grad is None
    else:
        np.testing.assert_array_equal(b.grad.numpy(), grad_b)


def test_add_alpha_in_place_keeps_versions_and_integer_results():
    x = torch.tensor([1, 2])
    y = x.add_(torch.tensor([3, 4]), alpha=2)
    assert y is x and x.tolist() == [7, 10] and x.dtype == torch.int64
    assert x._version == 1
    x -= torch.tensor([1, 1])
    assert x.tolist() == [6, 9] and x._version == 2


def test_alpha_errors_are_torchs():
    i = torch.tensor([1, 2])
    f = torch.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="For integral input tensors, argument alpha must "
                                           "not be a floating point number."):
        i.add(i, alpha=0.5)
    with pytest.raises(RuntimeError, match="For integral input tensors"):
        i.clone().sub_(i, alpha=1.5)
    with pytest.raises(RuntimeError, match="Boolean alpha only supported for Boolean results."):
        f.add(f, alpha=True)
    # torch: a float other makes a float result, where a float alpha is fine
    np.testing.assert_array_equal(i.add(1.5, alpha=2).numpy(), [4.0, 5.0])
    assert torch.tensor([True]).add(torch.tensor([True]), alpha=2).tolist() == [True]


@pytest.mark.parametrize("dtype, name", [
    ("float32", "torch.FloatTensor"), ("float64", "torch.DoubleTensor"),
    ("float16", "torch.HalfTensor"), ("int64", "torch.LongTensor"), ("int32", "torch.IntTensor"),
    ("int16", "torch.ShortTensor"), ("int8", "torch.CharTensor"), ("uint8", "torch.ByteTensor"),
    ("bool", "torch.BoolTensor"), ("complex64", "torch.ComplexFloatTensor")])
def test_type_names_are_torchs(dtype, name):
    assert torch.zeros(2, dtype=getattr(torch, dtype)).type() == name


def test_type_converts():
    a = torch.tensor([1.5, 2.0])
    assert a.type(torch.int64).tolist() == [1, 2] and a.type(torch.int64).dtype == torch.int64
    assert a.type("torch.LongTensor").dtype == torch.int64
    assert a.type("torch.DoubleTensor").dtype == torch.float64
    assert a.type(torch.float32) is a and a.type("torch.FloatTensor") is a   # torch: self
    with pytest.raises(ValueError, match=re.escape("invalid type: 'torch.FooTensor'")):
        a.type("torch.FooTensor")


def test_format_of_a_zero_d_tensor_is_its_numbers():
    loss = torch.tensor([1.0, 2.0]).sum()
    assert f"{loss:.4f}" == "3.0000"                 # torch: format(t.item(), spec)
    assert f"{loss}" == "3.0" and f"{torch.tensor(3):d}" == "3"
    assert f"{torch.tensor(7):>4}" == "   7"
    t = torch.tensor([1.0, 2.0])
    assert f"{t}" == str(t)
    with pytest.raises(TypeError, match="unsupported format string passed to Tensor.__format__"):
        f"{t:.4f}"


@pytest.mark.parametrize("call, shape, dtype, low, high", [
    (lambda: torch.randint(10, (3,)), (3,), "int64", 0, 10),
    (lambda: torch.randint(3, 10, (2, 4)), (2, 4), "int64", 3, 10),
    (lambda: torch.randint(10, size=(3,)), (3,), "int64", 0, 10),
    (lambda: torch.randint(low=2, high=5, size=(50,)), (50,), "int64", 2, 5),
    (lambda: torch.randint(high=4, size=(5,)), (5,), "int64", 0, 4),
    (lambda: torch.randint(-3, 3, size=(20,)), (20,), "int64", -3, 3),
    (lambda: torch.randint(10, (3,), dtype=torch.int32), (3,), "int32", 0, 10),
    (lambda: torch.randint(10, (2, 2), dtype=torch.float32), (2, 2), "float32", 0, 10),
    (lambda: torch.randint(10, (3,), device="cpu"), (3,), "int64", 0, 10),
    (lambda: torch.randint(10, ()), (), "int64", 0, 10),
])
def test_randint_forms(call, shape, dtype, low, high):
    t = call()
    assert t.shape == shape and str(t.dtype) == dtype and t.device.type == "cpu"
    values = t.numpy()
    assert ((values >= low) & (values < high)).all() and (values == np.round(values)).all()


def test_randint_generator_requires_grad_and_errors():
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert torch.randint(100, (8,), generator=g1).tolist() == \
        torch.randint(100, (8,), generator=g2).tolist()
    t = torch.randint(5, (2,), dtype=torch.float64, requires_grad=True)
    assert t.requires_grad and t.is_leaf
    with pytest.raises(RuntimeError, match="Only Tensors of floating point"):
        torch.randint(5, (2,), requires_grad=True)
    with pytest.raises(RuntimeError, match="random_ expects 'from' to be less than 'to', but "
                                           "got from=10 >= to=3"):
        torch.randint(10, 3, (2,))
    with pytest.raises(TypeError, match="must be tuple of ints"):
        torch.randint(10, 3)


def test_array_protocol_follows_numpy_2_copy_semantics():
    t = torch.tensor([1.0, 2.0])
    shared = np.asarray(t)                      # copy=None: no copy needed on the CPU
    assert np.shares_memory(shared, t.numpy())
    assert not np.shares_memory(np.array(t, copy=True), t.numpy())
    assert np.array(t, copy=False) is not None  # no copy needed: allowed
    with pytest.raises(ValueError, match="Unable to avoid copy"):
        np.array(t, dtype=np.float64, copy=False)   # a cast needs a copy
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    zero_d = torch.tensor(3.5)
    assert np.asarray(zero_d).shape == () and float(np.asarray(zero_d)) == 3.5
