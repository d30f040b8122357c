"""The fast paths of the dispatcher and the engine give way to the general ones exactly when
they must: each mode, hook, callback and stream is switched on *between* two ops (or two
backward nodes) of one run, and what it does must be seen from that point on, and no sooner.

The dispatcher reads one per-thread flag (``STATE.ops.slow``) and RecordFunction's ``on``;
the engine calls a node directly when it has no hooks and runs on the thread's CPU stream
with no profiler and no anomaly mode. These tests pin down that the flags follow every
writer and that the skipped work (records, traces, tangents, checks, events) still happens.
"""
import threading

import numpy as np
import pytest

import gradtrace.autograd as ag
import gradtrace.autograd.forward_ad as fwAD
from gradtrace.autograd import backend
from gradtrace.autograd import record_function as rf
from gradtrace.autograd.grad_mode import STATE
from gradtrace.autograd.graph import saved_tensors_hooks
from gradtrace.autograd.record_function import RecordScope


def leaf(*values):
    return ag.tensor(np.array(values or (1.0, 2.0, 3.0)), requires_grad=True)


# --------------------------------------------------------------------------- the flags


@pytest.mark.parametrize("name, on", [("anomaly", True), ("inference", True), ("fw_level", 3)])
def test_slow_flag_follows_every_mode_that_needs_the_general_path(name, on):
    ops = STATE.ops
    assert not ops.slow
    setattr(STATE, name, on)
    try:
        assert ops.slow and getattr(STATE, name) == on and getattr(ops, name) == on
    finally:
        setattr(STATE, name, type(on)())
    assert not ops.slow


def test_grad_mode_and_cpu_stream_are_read_through_the_op_state():
    ops = STATE.ops
    with ag.no_grad():
        assert not ops.grad_enabled and not STATE.grad_enabled and not ag.is_grad_enabled()
        with ag.enable_grad():
            assert ops.grad_enabled and STATE.grad_enabled
    with ag.set_grad_enabled(False):
        assert not ops.grad_enabled
    assert ops.grad_enabled and not ops.slow
    s = backend.Stream("cpu")
    with s:
        assert ops.cpu_stream.current is s and backend.current_stream("cpu") is s
    assert ops.cpu_stream.current is backend.CPU_STREAM


def test_op_state_is_per_thread():
    seen = {}

    def other():
        ops = STATE.ops
        seen["ops"] = ops
        seen["flags"] = (ops.grad_enabled, ops.anomaly, ops.slow, ops.thread_id)

    with ag.no_grad(), ag.set_detect_anomaly(True):
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert seen["ops"] is not STATE.ops
    grad, anomaly, slow, tid = seen["flags"]
    assert grad and not anomaly and not slow and tid != STATE.ops.thread_id


# --------------------------------------------------------------------------- forward ops


def test_grad_mode_switched_between_two_ops():
    x = leaf()
    a = x * 2
    with ag.no_grad():
        b = a * 3
    c = b * 4
    assert a.requires_grad and a.grad_fn is not None
    assert not b.requires_grad and b.grad_fn is None
    assert not c.requires_grad


def test_inference_mode_switched_between_two_ops():
    x = leaf()
    a = x * 2
    with ag.inference_mode():
        b = a * 3
    c = x * 4
    assert b.grad_fn is None
    # An inference tensor cannot be saved for backward; a tensor made after can.
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved"):
        x * b
    (x * c).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 8 * x.detach().numpy())


def test_anomaly_mode_switched_between_two_ops_traces_only_the_nodes_made_inside():
    x = leaf()
    a = x * 2
    with ag.detect_anomaly():
        b = a * 3
    c = b * 4
    assert a.grad_fn._extra is None
    assert "b = a * 3" in b.grad_fn._extra.anomaly_trace
    assert c.grad_fn._extra is None


def test_forward_ad_level_entered_between_two_ops():
    x = ag.tensor([1.0, 2.0])
    a = x * 2
    with fwAD.dual_level():
        d = fwAD.make_dual(a, ag.ones(2))
        e = d * 3 + 1
        np.testing.assert_allclose(fwAD.unpack_dual(e).tangent.numpy(), [3.0, 3.0])
    assert not STATE.ops.slow
    assert fwAD.unpack_dual(a * 3).tangent is None


def test_saved_tensor_hooks_entered_between_two_ops():
    packed = []

    def pack(t):
        packed.append(t.shape)
        return t

    x, w = leaf(), leaf(4.0, 5.0, 6.0)
    a = x * w
    with saved_tensors_hooks(pack, lambda p: p):
        b = a * w           # saves a and w
    c = b * w               # saves b and w, no hooks
    assert len(packed) == 2
    c.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), w.detach().numpy() ** 3)


class Recorder:
    def __init__(self):
        self.records = []

    def start(self, rec):
        return None

    def end(self, rec, ctx):
        self.records.append((rec.name, int(rec.scope), rec.sequence_nr))


def test_profiler_callback_added_between_two_ops_records_from_then_on():
    r = Recorder()
    x = leaf()
    a = x * 2
    handle = rf.add_global_callback(r.start, r.end)
    try:
        b = a + 1
        c = b * 3
    finally:
        handle.remove()
    d = c * 4
    fwd = [(name, seq) for name, scope, seq in r.records if scope == RecordScope.FUNCTION]
    assert fwd == [("add", b.grad_fn.sequence_nr), ("mul", c.grad_fn.sequence_nr)]
    # sequence numbers stay consecutive across the switch in and out of the general path
    seqs = [t.grad_fn.sequence_nr for t in (a, b, c, d)]
    assert seqs == list(range(seqs[0], seqs[0] + 4))


def test_profiler_callback_added_by_another_thread_is_seen_by_this_one():
    r = Recorder()
    x = leaf()
    started, proceed, done = threading.Event(), threading.Event(), threading.Event()
    holder = {}

    def other():
        holder["h"] = rf.add_global_callback(r.start, r.end)
        started.set()
        proceed.wait(5)
        holder["h"].remove()
        done.set()

    t = threading.Thread(target=other)
    x * 2                          # before: not recorded
    t.start()
    started.wait(5)
    x * 3                          # while the other thread's callback is on
    proceed.set()
    done.wait(5)
    t.join()
    x * 4                          # after: not recorded
    assert [name for name, scope, _ in r.records if scope == RecordScope.FUNCTION] == ["mul"]


def test_thread_local_callback_added_between_two_ops():
    r = Recorder()
    x = leaf()
    x * 2
    with rf.add_thread_local_callback(r.start, r.end):
        x + 1
    x * 3
    assert [name for name, scope, _ in r.records if scope == RecordScope.FUNCTION] == ["add"]


# --------------------------------------------------------------------------- backward nodes


def chain(x, n):
    """x, then n nodes: y = y * 1.5 + 0.25 repeated; returns every intermediate tensor."""
    ys = [x]
    for _ in range(n):
        ys.append(ys[-1] * 1.5)
        ys.append(ys[-1] + 0.25)
    return ys


def test_profiler_turned_on_by_a_hook_mid_backward_records_the_nodes_after_it():
    r = Recorder()
    x = leaf()
    ys = chain(x, 3)
    handles = []
    # A pre-hook on the 4th node from the top turns the profiler on; later nodes are recorded.
    trigger = ys[-4].grad_fn
    trigger.register_prehook(lambda grads: handles.append(rf.add_global_callback(r.start, r.end)))
    try:
        ys[-1].sum().backward()
    finally:
        for h in handles:
            h.remove()
    bwd = [(name, seq) for name, scope, seq in r.records
           if scope == RecordScope.BACKWARD_FUNCTION]
    expected = [(t.grad_fn.name(), t.grad_fn.sequence_nr) for t in reversed(ys[1:-3])]
    assert bwd == expected + [("AccumulateGrad", bwd[-1][1])]
    np.testing.assert_allclose(x.grad.numpy(), [1.5 ** 3] * 3)


def test_anomaly_mode_turned_on_by_a_hook_mid_backward_checks_the_nodes_after_it():
    x = leaf()
    a = (x * 0.0).sqrt()       # SqrtBackward0 computes g / (2 * out) = 0 / 0: nan
    b = a * 0.0
    c = b * 2.0

    def turn_on(grads):
        ag.set_detect_anomaly(True)

    with np.errstate(invalid="ignore", divide="ignore"):
        # Without anomaly mode the nan flows silently into x.grad.
        c.sum().backward(retain_graph=True)
        assert np.isnan(x.grad.numpy()).all()
        # Turned on from inside the backward, it catches the node that makes the nan.
        c.grad_fn.register_prehook(turn_on)
        try:
            with pytest.raises(RuntimeError, match="'SqrtBackward0' returned nan values"):
                c.sum().backward()
        finally:
            ag.set_detect_anomaly(False)
    assert not STATE.ops.slow


def test_tensor_hook_registered_between_two_backward_runs_fires():
    x = leaf()
    ys = chain(x, 2)
    ys[-1].sum().backward(retain_graph=True)
    first = x.grad.numpy().copy()
    seen = []
    ys[2].register_hook(lambda g: seen.append(g.numpy().copy()) or g * 2)
    x.grad = None
    ys[-1].sum().backward()
    assert len(seen) == 1
    np.testing.assert_allclose(x.grad.numpy(), 2 * first)


def test_node_post_hook_and_retain_grad_on_a_middle_node():
    x = leaf()
    ys = chain(x, 2)
    ys[2].retain_grad()
    calls = []
    ys[3].grad_fn.register_hook(lambda gi, go: calls.append(len(gi)))
    ys[-1].sum().backward()
    assert calls == [2]
    np.testing.assert_allclose(ys[2].grad.numpy(), [1.5] * 3)
    np.testing.assert_allclose(x.grad.numpy(), [1.5 ** 2] * 3)


def test_node_on_another_cpu_stream_runs_under_that_stream():
    used = []

    class Spy(backend.Stream):
        __slots__ = ()

        def __enter__(self):
            used.append(self)
            return super().__enter__()

    s = Spy("cpu")
    x = leaf()
    a = x * 2
    with s:
        b = a * 3           # its node records s; backward runs it under s
    c = b * 4
    used.clear()
    c.sum().backward()
    assert used == [s]
    np.testing.assert_allclose(x.grad.numpy(), [24.0] * 3)


# --------------------------------------------------------------------------- checks kept


def test_fast_path_still_sums_broadcast_gradients_and_casts_dtypes():
    x = ag.tensor(np.ones((3, 1), np.float32), requires_grad=True)
    y = ag.tensor(np.ones((3, 4), np.float64), requires_grad=True)
    (x * y).sum().backward()       # x's gradient arrives as float64 (3, 4)
    assert x.grad.shape == (3, 1) and x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad.numpy(), np.full((3, 1), 4.0))
    assert y.grad.dtype == np.float64


def test_fast_path_still_checks_the_number_of_gradients():
    class Bad(ag.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x + y

        @staticmethod
        def backward(ctx, g):
            return g, g, g

    x, y = leaf(), leaf()
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        Bad.apply(x, y).sum().backward()


def test_fast_path_still_checks_gradient_shapes():
    class Bad(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return ag.ones(7)

    with pytest.raises(RuntimeError, match="invalid gradient at index 0"):
        Bad.apply(leaf()).sum().backward()


def test_long_chain_mixing_fast_and_general_nodes_matches_numpy():
    x = leaf(0.5, 1.0, 2.0)
    y = x
    for i in range(300):
        if i % 50 == 10:
            with ag.detect_anomaly(check_nan=False):
                y = y * 1.01 + 0.01
        else:
            y = y * 1.01 + 0.01
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.01 ** 300] * 3, rtol=1e-10)
