"""Compiled autograd accumulates into ``.grad`` as the eager engine does.

A replayed program whose leaves have no hooks and that runs no user code calls the engine's
``_accumulate_into_tensor`` directly (with the references it holds, for the take-over
test); the rest goes through ``accumulate_grad``. Either way: a first gradient that nobody
else holds is taken over (PyTorch steals a gradient whose use count is 1), a shared one or
the user's own ``gradient=`` is copied, later ones are added in place.
"""
import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd import compiled_autograd as ca
from gradtrace.autograd.dispatch import OPS


@pytest.fixture(autouse=True)
def _fresh_cache():
    ca.reset()
    yield
    ca.reset()


def _leaf(*values):
    return ag.tensor(np.array(values, dtype=np.float64), requires_grad=True)


def _one_flow_to_two_leaves():
    a, b = _leaf(1.0, 2.0), _leaf(3.0, 4.0)
    # mul's rule makes a fresh array (no view of the sum's broadcast gradient); add's rules
    # hand that same array to both leaves
    ((a + b) * 2).sum().backward()
    return not np.shares_memory(a.grad.numpy(), b.grad.numpy()) and b.grad.tolist() == [2, 2]


def _the_users_gradient_through_an_op():
    c = _leaf(1.0, 2.0)
    g = ag.tensor([5.0, 6.0], dtype="float64")
    (c * 1).backward(g)
    c.grad.data += 1
    return g.numpy().tolist() == [5.0, 6.0]


def _the_users_gradient_into_a_leaf_root():
    d = _leaf(1.0)
    g = ag.tensor([2.0], dtype="float64")
    d.backward(g)                        # the root is the leaf: the user's array itself
    return not np.shares_memory(d.grad.numpy(), g.numpy())


def _a_hook_on_another_leaf():
    a, b = _leaf(1.0, 2.0), _leaf(3.0, 4.0)
    b.register_hook(lambda g: g * 2)     # user code in the program: accumulate_grad for all
    (a + b).sum().backward()
    return not np.shares_memory(a.grad.numpy(), b.grad.numpy()) and b.grad.tolist() == [2, 2]


def _accumulated_twice():
    a = _leaf(1.0, 2.0)
    for _ in range(2):
        (a * 3).sum().backward()
    return a.grad.tolist() == [6.0, 6.0]


# name -> a step that must hold (True) whether the backward runs eagerly or compiled
CASES = {
    "one gradient flows to two leaves": _one_flow_to_two_leaves,
    "the user's gradient= through an op": _the_users_gradient_through_an_op,
    "the user's gradient= into a leaf that is the root": _the_users_gradient_into_a_leaf_root,
    "a hook on another leaf": _a_hook_on_another_leaf,
    "accumulated over two backwards": _accumulated_twice,
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_gradients_are_never_aliased_and_accumulate(case, compiled):
    with ca.enable() if compiled else ca.disable():
        results = [CASES[case]() for _ in range(3)]   # capture, then replays
    assert all(results)
    if compiled:
        assert ca.stats()["hits"] >= 2


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_a_gradient_only_the_backward_holds_is_taken_over(compiled, monkeypatch):
    made = []
    op = OPS["exp"]
    rule = op.vjp[0]

    def spy(F, g, out, x):   # exp's rule, noting which array it returns (not holding it)
        r = rule(F, g, out, x)
        made.append(id(r))
        return r

    monkeypatch.setattr(op, "vjp", (spy,))
    with ca.enable() if compiled else ca.disable():
        for _ in range(3):
            x = _leaf(0.5, 1.5)
            made.clear()
            x.exp().sum().backward()
            assert id(x.grad._data) == made[0]   # no copy: the rule's array (alive in .grad)
    if compiled:
        src = ca.last_program().source
        assert any("_into(" in s for s in src.values())


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_bias_gradient_summed_over_the_batch_is_taken_over(compiled, dtype, monkeypatch):
    """The bias's rule hands on the batch's gradient, summed down to the bias by the engine
    (or by the program's folded sum); the sum is a new array nobody else holds, so ``.grad``
    takes it over (a reshape to its own shape made a view of it, which had to be copied)."""
    from gradtrace.autograd.compiled_autograd import codegen
    from gradtrace.autograd.ops import shape

    made = []
    real = shape.sum_over

    def spy(xp, x, axes, to):
        r = real(xp, x, axes, to)
        made.append(id(r))
        return r

    monkeypatch.setattr(shape, "sum_over", spy)
    monkeypatch.setattr(codegen, "sum_over", spy)
    lin = ag.nn.Linear(3, 4).to(dtype=dtype)
    x = ag.ones((5, 3), dtype=dtype)
    with ca.enable() if compiled else ca.disable():
        for _ in range(3):
            lin.bias.grad = None
            made.clear()
            lin(x).sum().backward()
            assert id(lin.bias.grad._data) in made
            assert lin.bias.grad.tolist() == [5.0] * 4
