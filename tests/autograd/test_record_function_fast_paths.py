"""RecordFunction's fast paths keep records exact: begin()'s precomputed table for global,
unsampled callbacks, apply_op's fast path and the engine's direct node call under a callback.

Each case names a way the fast table must be bypassed or rebuilt (a callback added from a
backward hook, from another thread, a thread-local callback beside a global one, sampling)
and checks the records against the graph's own sequence numbers.
"""
import random
import threading

import numpy as np

import gradtrace.autograd as ag
from gradtrace.autograd import record_function as rf
from gradtrace.autograd.record_function import RecordScope

F = int(RecordScope.FUNCTION)
B = int(RecordScope.BACKWARD_FUNCTION)


class Recorder:
    """Keeps (name, scope, sequence_nr, thread_id, fwd_thread_id, inputs) per closed range and
    checks that every end gets the context its own start returned."""

    def __init__(self):
        self.records = []
        self.opened = 0
        self.lock = threading.Lock()

    def start(self, rec):
        with self.lock:
            self.opened += 1
        return rec

    def end(self, rec, ctx):
        assert ctx is rec
        with self.lock:
            self.records.append((rec.name, int(rec.scope), rec.sequence_nr, rec.thread_id,
                                 rec.fwd_thread_id, rec.inputs))

    def of_scope(self, scope):
        return [r for r in self.records if r[1] == scope]


def chain(x):
    """x -> a = x * 2 -> b = a * 3 -> c = b + 1 -> c.sum(); returns (a, b, c, s)."""
    a = x * 2.0
    b = a * 3.0
    c = b + 1.0
    return a, b, c, c.sum()


def test_forward_records_carry_the_sequence_nr_of_their_node():
    r = Recorder()
    x = ag.tensor(np.ones(4, dtype=np.float32), requires_grad=True)
    with rf.add_global_callback(r.start, r.end, needs_inputs=True):
        a, b, c, s = chain(x)
        with ag.no_grad():
            x * 5.0
    fwd = r.of_scope(F)
    assert [f[0] for f in fwd] == ["mul", "mul", "add", "sum", "mul"]
    assert [f[2] for f in fwd] == [t.grad_fn.sequence_nr for t in (a, b, c, s)] + [-1]
    assert all(f[3] == rf.current_thread_id() for f in fwd)
    assert fwd[0][5] == (((4,), "float32"), ((), "Scalar"))
    assert r.opened == len(r.records)


def test_backward_records_pair_with_their_forward_nodes():
    r = Recorder()
    x = ag.tensor(np.ones(4), requires_grad=True)
    with rf.add_global_callback(r.start, r.end):
        a, b, c, s = chain(x)
        s.backward()
    bwd = [(name, seq, ftid) for name, _, seq, _, ftid, _ in r.of_scope(B)]
    tid = rf.current_thread_id()
    expected = [(t.grad_fn.name(), t.grad_fn.sequence_nr, tid) for t in (s, c, b, a)]
    assert bwd[:4] == expected
    assert bwd[4][0] == "AccumulateGrad"
    assert r.opened == len(r.records)


def test_callback_added_and_removed_from_backward_hooks_mid_backward():
    r = Recorder()
    x = ag.tensor(np.ones(4), requires_grad=True)
    a, b, c, s = chain(x)
    handles = []
    # b's hook runs before b's node: from there on every node is recorded, until a's hook
    # removes the callback (a's node and AccumulateGrad are then not recorded).
    b.register_hook(lambda g: handles.append(rf.add_global_callback(r.start, r.end)))
    a.register_hook(lambda g: handles[0].remove())
    s.backward()
    assert not rf.STATE.on
    assert [(n, seq) for n, _, seq, *_ in r.records] == [("MulBackward0", b.grad_fn.sequence_nr)]

    # Turned on by a hook on a node with no hooks of its own below it: the nodes that follow
    # take the engine's direct path, now inside records.
    r2 = Recorder()
    x2 = ag.tensor(np.ones(4), requires_grad=True)
    a2, b2, c2, s2 = chain(x2)
    c2.register_hook(lambda g: handles.append(rf.add_global_callback(r2.start, r2.end)))
    try:
        s2.backward()
    finally:
        handles[-1].remove()
    names = [(n, seq) for n, scope, seq, *_ in r2.records if scope == B]
    assert names[:3] == [("AddBackward0", c2.grad_fn.sequence_nr),
                         ("MulBackward0", b2.grad_fn.sequence_nr),
                         ("MulBackward0", a2.grad_fn.sequence_nr)]
    assert names[3][0] == "AccumulateGrad"
    assert x2.grad is not None and np.allclose(x2.grad.data, 6.0)


def test_thread_local_callback_beside_a_global_one():
    glob, local = Recorder(), Recorder()
    other_done = threading.Event()

    def other_thread():
        ag.ones(2) * 3.0
        other_done.set()

    with rf.add_global_callback(glob.start, glob.end):
        ag.ones(2) + 1.0                        # the fast table: the global callback only
        with rf.add_thread_local_callback(local.start, local.end):
            x = ag.tensor(np.ones(3), requires_grad=True)
            (x * 2.0).sum().backward()
            t = threading.Thread(target=other_thread)
            t.start()
            t.join()
            assert other_done.is_set()
        ag.ones(2) - 1.0                        # the table is back after the local one left
    assert [n for n, *_ in glob.records] == ["add", "mul", "sum", "SumBackward0",
                                             "MulBackward0", "AccumulateGrad", "mul", "sub"]
    assert [n for n, *_ in local.records] == ["mul", "sum", "SumBackward0", "MulBackward0",
                                              "AccumulateGrad"]
    # Both callbacks saw the same ranges of this thread, with the same sequence numbers.
    mine = rf.current_thread_id()
    shared = [rec for rec in glob.records if rec[3] == mine and rec[0] not in ("add", "sub")]
    assert shared == local.records


def test_several_global_callbacks_end_in_reverse_order_of_start():
    order = []

    def make(tag):
        return (lambda rec: order.append(("start", tag)) or tag,
                lambda rec, ctx: order.append(("end", ctx)))

    with rf.add_global_callback(*make("a")), rf.add_global_callback(*make("b")):
        ag.ones(2) * 2.0
    assert order == [("start", "a"), ("start", "b"), ("end", "b"), ("end", "a")]


def test_sampling_below_one_still_samples_and_others_see_everything():
    sampled, full = Recorder(), Recorder()
    random.seed(1234)
    n = 400
    with rf.add_global_callback(sampled.start, sampled.end, sampling_prob=0.5), \
            rf.add_global_callback(full.start, full.end):
        y = ag.ones(2)
        for _ in range(n):
            y = y * 1.0
    assert len(full.records) == n
    assert 0 < len(sampled.records) < n      # 400 draws at 0.5: never all or none here
    assert set(sampled.records) <= set(full.records)
    # Removing the sampled callback brings the unsampled table back: everything recorded.
    with rf.add_global_callback(full.start, full.end):
        ag.ones(2) * 1.0
    assert len(full.records) == n + 1


def test_a_failing_op_closes_its_record():
    r = Recorder()
    with rf.add_global_callback(r.start, r.end):
        try:
            ag.ones((2, 3)) @ ag.ones((2, 3))
        except RuntimeError:
            pass
        else:  # pragma: no cover - the shapes cannot be multiplied
            raise AssertionError("matmul of (2, 3) by (2, 3) did not raise")
    assert r.opened == len(r.records) == 1 and r.records[0][0] == "matmul"


def test_callback_added_and_removed_from_another_thread_while_ops_run():
    r = Recorder()
    seen_some = threading.Event()
    removed = threading.Event()

    def start(rec):
        out = r.start(rec)
        if r.opened >= 50:
            seen_some.set()
        return out

    def toggler():
        handle = rf.add_global_callback(start, r.end)
        seen_some.wait()
        handle.remove()
        removed.set()

    t = threading.Thread(target=toggler)
    t.start()
    x = ag.tensor(np.ones(3), requires_grad=True)
    y = x
    for _ in range(200_000):                    # a bound on ops, so the test always ends
        if removed.is_set():
            break
        y = y * 1.0
    seen_some.set()                             # lets the toggler finish in any case
    t.join()
    assert removed.is_set()
    y.sum().backward()
    assert np.allclose(x.grad.data, 1.0)
    # Every range that started was closed, with its own context.
    assert r.opened == len(r.records) >= 50
    seqs = [seq for name, scope, seq, *_ in r.records if name == "mul"]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
