"""Basic indexing and the shape views under PyTorch's backward nodes: ``x[1:3]`` is
SliceBackward0, ``x[0]`` SelectBackward0, ``x[None]`` UnsqueezeBackward0, ``x[...]``
AliasBackward0, one node per key entry that changes something, in PyTorch's order; advanced
keys stay one IndexBackward0. Each expected chain is what torch 2.13 gives."""
import numpy as np
import pytest

import gradtrace.autograd as ag


def _chain(t) -> list:
    """Node names from ``t`` back to its leaf (first next function each time)."""
    out, fn = [], t.grad_fn
    while fn is not None and fn.name() != "AccumulateGrad":
        out.append(fn.name())
        nxt = [f for f, _ in fn.next_functions if f is not None]
        fn = nxt[0] if nxt else None
    return out


# key, torch's chain (output first), torch's shape, for x of shape (4, 5, 6)
KEYS = [
    ("[1:3]", ["SliceBackward0"], (2, 5, 6)),
    ("[:]", ["SliceBackward0"], (4, 5, 6)),           # a lone slice is a slice, even whole
    ("[0:100]", ["SliceBackward0"], (4, 5, 6)),
    ("[3:1]", ["SliceBackward0"], (0, 5, 6)),
    ("[::2]", ["SliceBackward0"], (2, 5, 6)),
    ("[0]", ["SelectBackward0"], (5, 6)),
    ("[-1]", ["SelectBackward0"], (5, 6)),
    ("[np.int64(1)]", ["SelectBackward0"], (5, 6)),
    ("[ag.tensor(1)]", ["SelectBackward0"], (5, 6)),     # a 0-d integer tensor is an int
    ("[1:ag.tensor(3)]", ["SliceBackward0"], (2, 5, 6)),
    ("[:, 0]", ["SelectBackward0"], (4, 6)),           # a whole-dim slice in a tuple: skipped
    ("[:, 1:3]", ["SliceBackward0"], (4, 2, 6)),
    ("[:, :, 2:4]", ["SliceBackward0"], (4, 5, 2)),
    ("[..., 0]", ["SelectBackward0"], (4, 5)),
    ("[1:3, 0]", ["SelectBackward0", "SliceBackward0"], (2, 6)),
    ("[1:3, 2:4]", ["SliceBackward0", "SliceBackward0"], (2, 2, 6)),
    ("[0, 1]", ["SelectBackward0", "SelectBackward0"], (6,)),
    ("[None]", ["UnsqueezeBackward0"], (1, 4, 5, 6)),
    ("[:, None, 0]", ["SelectBackward0", "UnsqueezeBackward0"], (4, 1, 6)),
    ("[1, ..., None]", ["UnsqueezeBackward0", "SelectBackward0"], (5, 6, 1)),
    ("[...]", ["AliasBackward0"], (4, 5, 6)),
    ("[()]", ["AliasBackward0"], (4, 5, 6)),
    ("[:, :]", ["AliasBackward0"], (4, 5, 6)),
    ("[[0, 2]]", ["IndexBackward0"], (2, 5, 6)),
    ("[x[:, 0, 0] > 0]", ["IndexBackward0"], None),
]


@pytest.mark.parametrize("key, chain, shape", KEYS, ids=[k for k, _, _ in KEYS])
def test_getitem_nodes_are_pytorchs(key, chain, shape):
    x = ag.randn(4, 5, 6).requires_grad_()
    y = eval("x" + key)                                      # noqa: S307 - a fixed table
    ref = eval("x._data" + key.replace("x[", "x._data["))    # noqa: S307
    assert _chain(y) == chain
    assert y.shape == ref.shape and (shape is None or y.shape == shape)
    np.testing.assert_array_equal(y._data, ref)
    if chain[0] != "IndexBackward0":                         # a basic key gives a view
        assert y._base is x and (y._data.size == 0 or np.shares_memory(y._data, x._data))
    y.sum().backward()
    expect = np.zeros(x.shape, np.float32)
    np.add.at(expect, eval("np.s_" + key.replace("x[", "x._data[")), 1.0)   # noqa: S307
    np.testing.assert_array_equal(x.grad._data, expect)


# expression, torch's node, torch's shape, for x (1, 5, 1) and y (4, 5)
METHODS = [
    ("x.squeeze()", "SqueezeBackward0", (5,)),
    ("x.squeeze(0)", "SqueezeBackward1", (5, 1)),
    ("x.squeeze(1)", "SqueezeBackward1", (1, 5, 1)),    # not size 1: kept, still a node
    ("x.squeeze((0, 2))", "SqueezeBackward2", (5,)),
    ("y.unsqueeze(-1)", "UnsqueezeBackward0", (4, 5, 1)),
    ("y.t()", "TBackward0", (5, 4)),
    ("y[0].t()", "TBackward0", (5,)),
    ("y.select(1, 2)", "SelectBackward0", (4,)),
    ("ag.select(y, -1, -1)", "SelectBackward0", (4,)),
    ("y.narrow(0, 1, 2)", "SliceBackward0", (2, 5)),
]


@pytest.mark.parametrize("expr, node, shape", METHODS, ids=[e for e, _, _ in METHODS])
def test_shape_views_nodes_are_pytorchs(expr, node, shape):
    x = ag.randn(1, 5, 1).requires_grad_()
    y = ag.randn(4, 5).requires_grad_()
    out = eval(expr)                                          # noqa: S307 - a fixed table
    assert out.grad_fn.name() == node and out.shape == shape
    assert out._base is not None                              # a view, as torch's


@pytest.mark.parametrize("expr, error, message", [
    # torch: IndexError with these words
    ("x[5]", IndexError, "index 5 is out of bounds for dimension 0 with size 4"),
    ("x[:, -6]", IndexError, "index -6 is out of bounds for dimension 1 with size 5"),
    ("x[0, 0, 0, 0]", IndexError, "too many indices for tensor of dimension 3"),
    ("x[..., 0, ...]", IndexError, "an index can only have a single ellipsis"),
    ("x.select(0, 7)", IndexError, "select(): index 7 out of range for tensor of size [4, 5, 6] at dimension 0"),
    ("x.t()", RuntimeError, "t() expects a tensor with <= 2 dimensions, but self is 3D"),
])
def test_errors_are_pytorchs(expr, error, message):
    x = ag.randn(4, 5, 6).requires_grad_()
    with pytest.raises(error) as info:
        eval(expr)                                            # noqa: S307
    assert message in str(info.value)
    assert ((x * 2.0)[1:3, 0].sum()).item() is not None       # the engine goes on


def test_in_place_through_a_select_view_reaches_the_base():
    """torch: y = x * 1; y[0].mul_(3) makes y's history a CopySlices; d sum(y) / dx is 3 on
    row 0 and 1 elsewhere."""
    x = ag.randn(3, 4).requires_grad_()
    y = x * 1.0
    row = y[0]
    row.mul_(3.0)
    assert y.grad_fn.name() == "CopySlices"
    y.sum().backward()
    expect = np.ones((3, 4), np.float32)
    expect[0] = 3.0
    np.testing.assert_array_equal(x.grad._data, expect)
    assert row._version == y._version == 1


def test_a_negative_step_stays_numpy_indexing():
    """torch refuses a negative step ("step must be greater than zero"); NumPy's meaning is
    kept here, as one IndexBackward0 (the gradient is the reversed upstream gradient)."""
    x = ag.randn(5).requires_grad_()
    y = x[::-1]
    assert _chain(y) == ["IndexBackward0"]
    (y * ag.tensor(np.arange(5.0, dtype=np.float32))).sum().backward()
    np.testing.assert_array_equal(x.grad._data, np.arange(5.0)[::-1])


@pytest.mark.parametrize("make, node, next_node", [
    # torch 2.13: a differentiable backward of cat narrows (SliceBackward0), of stack selects
    # (SelectBackward0), of unbind stacks (StackBackward0)
    (lambda a, b, w: ag.cat([a, b], 0) * w, "SliceBackward0", "MulBackward0"),
    (lambda a, b, w: ag.stack([a, b], 0) * w.reshape(2, 2, 3), "SelectBackward0", "MulBackward0"),
    (lambda a, b, w: sum(p * (i + 1.0) * p for i, p in enumerate(a.unbind(1))), "StackBackward0", None),
])
def test_double_backward_nodes_are_pytorchs(make, node, next_node):
    ag.manual_seed(0)
    a, b, w = ag.randn(2, 3).requires_grad_(), ag.randn(2, 3).requires_grad_(), ag.randn(4, 3).requires_grad_()
    g, = ag.grad(make(a, b, w).sum(), a, create_graph=True)
    assert g.grad_fn.name() == node
    if next_node is not None:
        assert g.grad_fn.next_functions[0][0].name() == next_node


def test_stack_is_one_node():
    """torch: stack is one StackBackward0 (no unsqueeze and cat nodes), also past 64 inputs
    (here a cat of unsqueezed inputs then)."""
    xs = [ag.randn(2).requires_grad_() for _ in range(3)]
    y = ag.stack(xs, 1)
    assert y.grad_fn.name() == "StackBackward0" and y.shape == (2, 3)
    assert [f.name() for f, _ in y.grad_fn.next_functions] == ["AccumulateGrad"] * 3
    assert ag.stack(xs * 30, 0).shape == (90, 2)
