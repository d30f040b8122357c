"""Hook order and removal: tensor pre-hooks, retains-grad, node pre/post hooks, post-accumulate."""
import numpy as np
import pytest

import gradtrace.autograd as ag


def leaf(*v):
    return ag.tensor(np.array(v, dtype=np.float64), requires_grad=True)


def test_hook_order_tensor_then_retains_grad_then_prehook_then_posthook():
    x = leaf(1.0, 2.0)
    y = x * 2
    y.retain_grad()
    events = []
    y.register_hook(lambda g: events.append(("tensor", g.numpy().tolist())) or g * 10)
    y.grad_fn.register_prehook(lambda gouts: events.append(("pre", gouts[0].numpy().tolist())))
    y.grad_fn.register_hook(lambda gin, gout: events.append(("post", gin[0].numpy().tolist())))
    y.sum().backward()
    assert events == [("tensor", [1.0, 1.0]), ("pre", [10.0, 10.0]), ("post", [20.0, 20.0])]
    # retain_grad sees the gradient after tensor hooks, before node pre-hooks
    np.testing.assert_allclose(y.grad.numpy(), [10.0, 10.0])
    np.testing.assert_allclose(x.grad.numpy(), [20.0, 20.0])


def test_tensor_hooks_run_in_registration_order_and_chain():
    x = leaf(1.0)
    y = x * 1
    seen = []
    y.register_hook(lambda g: seen.append(1) or g + 1)
    y.register_hook(lambda g: seen.append(2) or g * 3)
    y.sum().backward()
    assert seen == [1, 2] and x.grad.item() == 6.0


def test_leaf_tensor_hook_changes_accumulated_grad():
    x = leaf(1.0)
    x.register_hook(lambda g: g * 100)
    (x * 2).sum().backward()
    assert x.grad.item() == 200.0


def test_handles_remove_hooks_and_work_as_context_managers():
    x = leaf(1.0)
    calls = []
    h = x.register_hook(lambda g: calls.append("a"))
    with x.register_hook(lambda g: calls.append("b")):
        (x * 1).sum().backward()
    assert calls == ["a", "b"]
    h.remove()
    h.remove()   # idempotent
    (x * 1).sum().backward()
    assert calls == ["a", "b"]


def test_post_hook_can_replace_grad_inputs():
    x = leaf(1.0, 2.0)
    y = x * 3
    y.grad_fn.register_hook(lambda gin, gout: (gin[0] * 0, gin[1]))  # gin[1]: the scalar's (None)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 0.0])


def test_post_accumulate_grad_hook_sees_new_grad():
    x = leaf(1.0)
    seen = []
    x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.item()))
    (x * 2).sum().backward()
    (x * 3).sum().backward()
    assert seen == [2.0, 5.0]


def test_post_accumulate_hook_only_on_leaves():
    x = leaf(1.0)
    with pytest.raises(RuntimeError, match="non-leaf"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)


def test_hook_on_tensor_without_grad_is_refused():
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        ag.tensor([1.0]).register_hook(lambda g: g)


def test_hook_returning_non_tensor_is_an_error():
    x = leaf(1.0)
    y = x * 2
    y.register_hook(lambda g: 3.0)
    with pytest.raises(RuntimeError, match="returned a float"):
        y.sum().backward()


def test_hooks_receive_differentiable_grads_under_create_graph():
    x = leaf(2.0)
    y = x ** 2
    grads = []
    y.register_hook(lambda g: grads.append(g))
    (g,) = ag.grad(y.sum(), x, create_graph=True)
    assert isinstance(grads[0], ag.Tensor)
    (gg,) = ag.grad(g.sum(), x)
    assert gg.item() == 2.0
