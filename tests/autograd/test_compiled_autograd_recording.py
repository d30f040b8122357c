"""Compiled autograd's recorded key: a forward under enable() keys its nodes as it makes them.

One table of changes drives the tests: each case changes the third training step of the same
small graph in one way the key must see (structure, shape, dtype, hooks of every kind added
after the forward, unpack hooks, a node made outside the table ops). The recorded key must
not be reused for that step, and gradients and hook calls must match eager exactly.
"""
import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd import compiled_autograd as ca
from gradtrace.autograd.compiled_autograd import Recording
from gradtrace.autograd.graph import saved_tensors_hooks


@pytest.fixture(autouse=True)
def _fresh_cache():
    ca.reset()
    yield
    ca.reset()


class Double(ag.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def _base(w, inp, events):
    return ((inp * w).exp() * 2).sum()


def _hook_on_intermediate(w, inp, events):
    y = inp * w
    y.register_hook(lambda g: events.append("tensor hook") or g * 3)
    return (y.exp() * 2).sum()


def _retain_grad(w, inp, events):
    y = inp * w
    y.retain_grad()
    events.append(y)           # its .grad is compared after backward
    return (y.exp() * 2).sum()


def _node_post_hook(w, inp, events):
    y = (inp * w).exp()
    y.grad_fn.register_hook(lambda gi, go: events.append("node hook"))
    return (y * 2).sum()


def _leaf_hook(w, inp, events):
    events.append(w.register_hook(lambda g: g * 2))   # a handle: removed after the step
    return _base(w, inp, events)


def _leaf_hook_after_forward(w, inp, events):
    loss = _base(w, inp, events)
    events.append(w.register_hook(lambda g: g * 2))
    return loss


def _post_accumulate_hook_after_forward(w, inp, events):
    loss = _base(w, inp, events)
    events.append(w.register_post_accumulate_grad_hook(lambda p: events.append("post acc")))
    return loss


def _hook_on_the_leafs_node(w, inp, events):
    from gradtrace.autograd.dispatch import _gradient_edge

    acc = _gradient_edge(w)[0]     # the leaf's AccumulateGrad node, kept while w lives
    events.append(acc.register_hook(lambda gi, go: events.append("acc node hook")))
    return _base(w, inp, events)


def _post_accumulate_hook(w, inp, events):
    events.append(w.register_post_accumulate_grad_hook(lambda p: None))
    return _base(w, inp, events)


def _unpack_hook_after_forward(w, inp, events):
    y = inp * w
    y.grad_fn._raw_saved_a.register_hooks(lambda t: t, lambda t: events.append("unpack") or t)
    return (y.exp() * 2).sum()


def _default_saved_hooks(w, inp, events):
    with saved_tensors_hooks(lambda t: t, lambda t: events.append("unpack") or t):
        return _base(w, inp, events)


# name -> (the third step's forward, whether that step may reuse the recorded key)
CASES = {
    "the same graph": (_base, True),
    "another op": (lambda w, inp, ev: ((inp * w).sin() * 2).sum(), False),
    "another shape": (lambda w, inp, ev: _base(w, ag.tensor(np.ones((2, 3))), ev), False),
    "another dtype": (lambda w, inp, ev: ((inp * w).exp() * 2).to(dtype=np.float32).sum(),
                      False),
    "a tensor hook on an intermediate": (_hook_on_intermediate, False),
    "retain_grad on an intermediate": (_retain_grad, False),
    "a node post hook": (_node_post_hook, False),
    "a hook on the leaf": (_leaf_hook, False),
    "a post-accumulate-grad hook on the leaf": (_post_accumulate_hook, False),
    "a hook on the leaf after the forward": (_leaf_hook_after_forward, False),
    "a post-accumulate-grad hook after the forward": (_post_accumulate_hook_after_forward,
                                                      False),
    "a hook on the leaf's AccumulateGrad node": (_hook_on_the_leafs_node, False),
    "an unpack hook added after the forward": (_unpack_hook_after_forward, False),
    "default saved-tensor hooks": (_default_saved_hooks, False),
    "a custom Function's node in the graph": (lambda w, inp, ev: _base(Double.apply(w), inp, ev),
                                              False),
    "an extra unused op": (lambda w, inp, ev: ((w * 3).sum(), _base(w, inp, ev))[1], False),
}


def _train(third, compiled):
    """Four steps; the third runs ``third``. Returns grads and hook events per step, and
    the recorded hits counted before and after the third step."""
    w = ag.tensor(np.linspace(-1, 1, 3), requires_grad=True)
    inp = ag.tensor(np.array([0.5, 1.5, -2.0]))
    out = []
    hits = []
    for step in range(4):
        events = []
        ctx = ca.enable() if compiled else ca.disable()
        with ctx:
            loss = (third if step == 2 else _base)(w, inp, events)
            hits.append(ca.stats()["recorded_hits"])
            loss.backward()
        seen = []
        for e in events:
            if isinstance(e, ag.Tensor):
                seen.append(e.grad.numpy().copy())
            elif hasattr(e, "remove"):
                e.remove()
            else:
                seen.append(e)
        out.append((w.grad.numpy().copy(), seen))
    hits.append(ca.stats()["recorded_hits"])
    return out, hits


@pytest.mark.parametrize("case", list(CASES))
def test_a_changed_step_is_not_served_by_the_recorded_key(case):
    third, may_hit = CASES[case]
    eager, _ = _train(third, compiled=False)
    compiled, hits = _train(third, compiled=True)
    for (ge, ee), (gc, ec) in zip(eager, compiled):
        np.testing.assert_array_equal(ge, gc)
        assert len(ee) == len(ec)
        for a, b in zip(ee, ec):
            if isinstance(a, str):
                assert a == b
            else:
                np.testing.assert_array_equal(a, b)
    assert hits[2] - hits[1] == 1          # the second step reused the first step's key
    assert (hits[3] - hits[2] == 1) == may_hit


def test_backward_twice_through_a_recorded_graph_raises_like_eager():
    w = ag.tensor(np.ones(3), requires_grad=True)
    with ca.enable():
        for _ in range(2):
            _base(w, ag.tensor(np.ones(3)), []).backward()
        loss = _base(w, ag.tensor(np.ones(3)), [])
        loss.backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            loss.backward()


def test_retain_graph_then_a_second_backward_of_the_same_graph():
    w = ag.tensor(np.ones(3), requires_grad=True)
    with ca.enable():
        loss = _base(w, ag.tensor(np.ones(3)), [])
        loss.backward(retain_graph=True)
        loss.backward()
    want = ag.tensor(np.ones(3), requires_grad=True)
    loss = _base(want, ag.tensor(np.ones(3)), [])
    loss.backward(retain_graph=True)
    loss.backward()
    np.testing.assert_array_equal(w.grad.numpy(), want.grad.numpy())


def test_a_forward_only_loop_does_not_keep_its_graphs():
    """Forwards under enable() with no backward: the recording stops at its limit (twice
    the largest graph recorded) and lets go of the nodes."""
    w = ag.tensor(np.ones(3), requires_grad=True)
    with ca.enable():
        for _ in range(2):
            _base(w, ag.tensor(np.ones(3)), []).backward()
        rec = ag.grad_mode.STATE.ops.ca_recording
        for _ in range(10):
            _base(w, ag.tensor(np.ones(3)), [])
        assert rec.broken and rec.nodes == [] and rec.limit < 0


def test_a_root_that_gained_an_edge_is_walked():
    w = ag.tensor(np.ones(3), requires_grad=True)
    rec = Recording()
    ops = ag.grad_mode.STATE.ops
    ops.ca_recording = rec
    try:
        y = w * 2
    finally:
        ops.ca_recording = None
    edges = ag.engine.make_root_edges([y], [ag.tensor(np.ones(3))], False)[0]
    assert rec.finish(edges) is not None
    y.grad_fn.add_next_edge(None)
    assert rec.finish(edges) is None


def test_the_recording_belongs_to_the_enable_context_of_its_thread():
    ops = ag.grad_mode.STATE.ops
    assert ops.ca_recording is None
    with ca.enable():
        outer = ops.ca_recording
        with ca.enable():
            assert ops.ca_recording is outer      # a nested context records on
            with ca.disable():
                assert ops.ca_recording is None
            assert ops.ca_recording is outer
        assert ops.ca_recording is outer
    assert ops.ca_recording is None


def test_one_program_serves_recordings_that_made_its_nodes_in_different_orders():
    """The same backward graph with its three branches made in each of the six orders, each
    order twice: one program (the walked key is the same), replayed with each recording's own
    node positions (baked into its code for the first _MAX_ORDERS orders, mapped at replay
    after that); gradients equal eager."""
    import itertools

    leaves = [ag.tensor(np.array([v, v + 1.0]) / 4, requires_grad=True) for v in range(6)]

    def forward(order):
        branch = {}
        for i in order:
            branch[i] = (leaves[2 * i] * leaves[2 * i + 1]).exp()
        return ((branch[0] + branch[1]) + branch[2]).sum()

    steps = [order for order in itertools.permutations(range(3)) for _ in range(2)]
    eager = []
    for order in steps:
        forward(order).backward()
        eager.append([t.grad.numpy().copy() for t in leaves])
        for t in leaves:
            t.grad = None
    for step, order in enumerate(steps):
        with ca.enable():
            forward(order).backward()
        for t, e in zip(leaves, eager[step]):
            np.testing.assert_array_equal(t.grad.numpy(), e)
            t.grad = None
    prog = ca.last_program()
    assert ca.stats()["captures"] == 1 and ca.stats()["recorded_hits"] == 6
    assert len(prog.orders) == ca._MAX_ORDERS < 6


def _eager_backward_of_a_shared_part(y, z, w):
    with ca.disable():
        y.sum().backward()


def _grad_of_a_shared_part(y, z, w):
    ag.grad(y.sum(), [w])


def _release_by_hand(y, z, w):
    y.grad_fn.release_variables()


def _release_by_hand_a_node_without_saved_tensors(y, z, w):
    z.grad_fn.release_variables()      # z = y * 2 saved the number 2 only


# Between a recorded forward and its backward, something frees saved tensors of recorded
# nodes; the compiled backward must raise as the eager one does (the recorded key skips its
# per-node checks only while node.GRAPH_EPOCH has not moved: a backward moves it, a
# release_variables() by hand does not, and the replay itself raises for that one).
FREED_CASES = {
    "an eager backward of a shared part": _eager_backward_of_a_shared_part,
    "autograd.grad of a shared part": _grad_of_a_shared_part,
    "release_variables() by hand": _release_by_hand,
    "release_variables() by hand, no saved tensor": _release_by_hand_a_node_without_saved_tensors,
}


@pytest.mark.parametrize("case", list(FREED_CASES))
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_saved_tensors_freed_after_a_recorded_forward_raise_like_eager(case, compiled):
    w = ag.tensor(np.linspace(-1, 1, 3), requires_grad=True)
    inp = ag.tensor(np.array([0.5, 1.5, -2.0]))
    with ca.enable() if compiled else ca.disable():
        for _ in range(2):   # the structure is known, its recorded key too
            _base(w, inp, []).backward()
        y = (inp * w).exp()
        z = y * 2
        loss = z.sum()
        FREED_CASES[case](y, z, w)
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            loss.backward()


# What moves node.GRAPH_EPOCH (and so makes a recording check each node again): hooks on a
# node, and the start of a backward, eager or compiled; a forward does not.
EPOCH_CASES = {
    "a forward": (lambda y: (y * 3).sum(), False),
    "a node post hook": (lambda y: y.grad_fn.register_hook(lambda gi, go: None), True),
    "a tensor hook": (lambda y: y.register_hook(lambda g: g), True),
    "retain_grad": (lambda y: y.retain_grad(), True),
    "an eager backward": (lambda y: y.sum().backward(), True),
    "a compiled backward": (lambda y: y.sum().backward(compiled=True), True),
    "a hook on a leaf": (lambda y: _LEAF.register_hook(lambda g: g), True),
    "a post-accumulate-grad hook": (lambda y: _LEAF.register_post_accumulate_grad_hook(
        lambda p: None), True),
}
_LEAF = ag.tensor(np.ones(3), requires_grad=True)


@pytest.mark.parametrize("case", list(EPOCH_CASES))
def test_graph_epoch_moves_on_hooks_and_backward_only(case):
    from gradtrace.autograd.node import GRAPH_EPOCH

    do, moves = EPOCH_CASES[case]
    y = (ag.tensor(np.ones(3), requires_grad=True) * 2).exp()
    before = GRAPH_EPOCH[0]
    do(y)
    assert (GRAPH_EPOCH[0] != before) == moves


# What moves node.SAVED_HOOKS_EPOCH (and so makes a recording look at each saved tensor for
# an unpack hook): a saved tensor given hooks, by register_hooks or by default hooks at save
# time; a plain forward, or hooks of other kinds, do not.
SAVED_HOOKS_CASES = {
    "a forward": (lambda x: (x * x).exp(), False),
    "register_hooks": (lambda x: (x * x).grad_fn._raw_saved_a.register_hooks(
        lambda t: t, lambda t: t), True),
    "default saved-tensor hooks": (lambda x: _with_default_hooks(lambda: (x * x).exp()), True),
    "a tensor hook": (lambda x: (x * x).register_hook(lambda g: g), False),
}


def _with_default_hooks(fn):
    with saved_tensors_hooks(lambda t: t, lambda t: t):
        return fn()


@pytest.mark.parametrize("case", list(SAVED_HOOKS_CASES))
def test_saved_hooks_epoch_moves_when_a_saved_tensor_gets_an_unpack_hook(case):
    from gradtrace.autograd.node import SAVED_HOOKS_EPOCH

    do, moves = SAVED_HOOKS_CASES[case]
    x = ag.tensor(np.ones(3), requires_grad=True)
    before = SAVED_HOOKS_EPOCH[0]
    do(x)
    assert (SAVED_HOOKS_EPOCH[0] != before) == moves
