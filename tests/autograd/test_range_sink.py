"""Range sinks: the profiler's lane of RecordFunction. One row (a list, ``rf.ROW_*``) per
range, handed to the sink as the range closes; no RecordFunction object while a sink is the
only listener, and the same fields as a callback sees when callbacks listen too."""
import threading

import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd import record_function as rf
from gradtrace.autograd.record_function import RecordScope

F, B, U = (int(s) for s in RecordScope)


def _fields(row) -> tuple:
    """What a callback's record shows of the same range, read from a sink's row."""
    return (row[rf.ROW_NAME], row[rf.ROW_SCOPE], row[rf.ROW_SEQ], row[rf.ROW_TID],
            row[rf.ROW_FWD_TID], row[rf.ROW_INPUTS], row[rf.ROW_DEVICE])


def _program():
    """A forward, a user range and a backward: (x, w, loss)."""
    x = ag.tensor(np.ones((2, 3)), requires_grad=True)
    w = ag.tensor(np.ones((3, 4)), requires_grad=True)
    with rf.record_function("block"):
        loss = ((x @ w).tanh() * 2.0).sum()
    loss.backward()
    return x, w, loss


def test_a_sink_alone_gets_one_row_per_range_with_exact_links(records_made):
    rows = []
    with rf.add_range_sink(rows.append, needs_inputs=True):
        assert rf.STATE.on
        _program()
    assert not rf.STATE.on
    assert records_made == []              # the lean lane makes no record objects
    names = [(r[rf.ROW_NAME], r[rf.ROW_SCOPE]) for r in rows]
    # Rows arrive as ranges close: the ops inside "block" before it, the backward after.
    assert names[:5] == [("matmul", F), ("tanh", F), ("mul", F), ("sum", F), ("block", U)]
    assert [n for n, s in names[5:]] == ["SumBackward0", "MulBackward0", "TanhBackward0",
                                         "MmBackward0", "AccumulateGrad", "AccumulateGrad"]
    fwd = {r[rf.ROW_SEQ]: r[rf.ROW_NAME] for r in rows if r[rf.ROW_SCOPE] == F}
    tid = rf.current_thread_id()
    for r in rows:
        assert r[0] == rows.append and r[rf.ROW_TID] == tid and r[rf.ROW_DEVICE] == "cpu"
        assert 0 < r[rf.ROW_START] <= r[rf.ROW_END]         # end() writes the closing time
        if r[rf.ROW_SCOPE] == B:
            node = r[rf.ROW_NODE]
            assert node.name() == r[rf.ROW_NAME] and node.sequence_nr == r[rf.ROW_SEQ]
            assert r[rf.ROW_FWD_TID] == tid
            if r[rf.ROW_NAME] != "AccumulateGrad":
                assert fwd[r[rf.ROW_SEQ]] == {"SumBackward0": "sum", "MulBackward0": "mul",
                                              "TanhBackward0": "tanh", "MmBackward0": "matmul"}[r[rf.ROW_NAME]]
        else:
            assert r[rf.ROW_NODE] is None
    assert rows[2][rf.ROW_INPUTS] == (((2, 4), "float64"), ((), "Scalar"))
    assert rows[4][rf.ROW_INPUTS] is None and rows[4][rf.ROW_STREAM] is None   # a user range


def test_a_sink_beside_a_callback_sees_what_the_callback_sees():
    """Both listening: the general path makes one record for the callback and the same
    row for the sink."""
    rows, records = [], []

    def end(rec, ctx):
        records.append((rec.name, int(rec.scope), rec.sequence_nr, rec.thread_id,
                        rec.fwd_thread_id, rec.inputs, rec.device))

    with rf.add_range_sink(rows.append, needs_inputs=True), rf.add_global_callback(None, end):
        _program()
    assert [_fields(r) for r in rows] == records
    assert len(rows) == 11
    # Times are read after the callbacks' starts, so the range holds the op alone.
    assert all(r[rf.ROW_START] > 0 for r in rows)


def test_start_hook_scopes_and_inputs():
    """``start(scope, stream)`` runs as the range opens and its result is the row's ctx; a
    sink hears only its scopes; inputs only when asked for."""
    rows, opened = [], []

    def start(scope, stream):
        opened.append(scope)
        return ("ctx", scope)

    with rf.add_range_sink(rows.append, start=start, scopes=[RecordScope.BACKWARD_FUNCTION]):
        _program()
    assert {r[rf.ROW_SCOPE] for r in rows} == {B} and opened == [B] * len(rows)
    assert all(r[rf.ROW_CTX] == ("ctx", B) and r[rf.ROW_INPUTS] is None for r in rows)


def test_two_sinks_each_hear_their_own_scopes_on_the_lean_path(monkeypatch):
    made = []
    monkeypatch.setattr(rf, "_record", lambda *a: made.append(a))   # the general path's builder
    backward, other = [], []
    with rf.add_range_sink(backward.append, scopes=[RecordScope.BACKWARD_FUNCTION]), \
            rf.add_range_sink(other.append, scopes=[RecordScope.FUNCTION, RecordScope.USER_SCOPE]):
        _program()
    assert made == []
    assert {r[rf.ROW_SCOPE] for r in backward} == {B} and len(backward) == 6
    assert {r[rf.ROW_SCOPE] for r in other} == {F, U} and len(other) == 5


def test_two_sinks_on_one_scope_both_hear_every_range():
    a, b = [], []
    with rf.add_range_sink(a.append), rf.add_range_sink(b.append):
        _program()
    assert len(a) == len(b) == 11
    assert [_fields(r) for r in a] == [_fields(r) for r in b]
    assert all(r[0] == a.append for r in a) and all(r[0] == b.append for r in b)


def test_sink_hears_every_thread_and_a_thread_local_callback_only_its_own():
    rows, local = [], []
    barrier = threading.Barrier(2)

    def worker():
        barrier.wait()
        ag.ones(3) * 2.0

    with rf.add_range_sink(rows.append):
        with rf.add_thread_local_callback(None, lambda rec, ctx: local.append(rec.name)):
            t = threading.Thread(target=worker)
            t.start()
            barrier.wait()
            ag.ones(3) + 1.0
            t.join()
    assert sorted(r[rf.ROW_NAME] for r in rows) == ["add", "mul"]
    assert len({r[rf.ROW_TID] for r in rows}) == 2
    assert local == ["add"]


def test_removing_a_sink_stops_it_and_errors_name_the_problem():
    rows = []
    handle = rf.add_range_sink(rows.append)
    ag.ones(2) * 2.0
    handle.remove()
    ag.ones(2) * 2.0
    assert len(rows) == 1 and not rf.STATE.on
    with pytest.raises(ValueError, match="needs an end function"):
        rf.add_range_sink(None)


def test_a_range_open_when_the_sink_goes_still_closes_into_it():
    """The row carries its sink: removing the sink inside a range loses nothing."""
    rows = []
    handle = rf.add_range_sink(rows.append)
    with rf.record_function("outer"):
        handle.remove()
    assert [r[rf.ROW_NAME] for r in rows] == ["outer"]
