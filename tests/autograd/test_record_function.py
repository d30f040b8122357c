"""RecordFunction: scopes, exact forward/backward correlation, handles, zero cost when off."""
import threading
import tracemalloc

import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd import record_function as rf
from gradtrace.autograd.record_function import RecordScope


class Recorder:
    def __init__(self):
        self.records = []

    def start(self, rec):
        return len(self.records)

    def end(self, rec, ctx):
        self.records.append((rec.name, int(rec.scope), rec.sequence_nr, rec.thread_id,
                             rec.fwd_thread_id, rec.inputs))


def test_every_backward_record_pairs_with_exactly_its_forward_op():
    r = Recorder()
    with rf.add_global_callback(r.start, r.end):
        x = ag.tensor(np.ones((2, 3)), requires_grad=True)
        w = ag.tensor(np.ones((3, 4)), requires_grad=True)
        y = ((x @ w).tanh() * 2.0).sum()
        y.backward()
    fwd = {(seq, tid): name for name, scope, seq, tid, _, _ in r.records
           if scope == RecordScope.FUNCTION and seq >= 0}
    bwd = [(name, seq, ftid) for name, scope, seq, _, ftid, _ in r.records
           if scope == RecordScope.BACKWARD_FUNCTION and name != "AccumulateGrad"]
    assert len(bwd) == 4
    expected = {"MmBackward0": "matmul", "TanhBackward0": "tanh", "MulBackward0": "mul",
                "SumBackward0": "sum"}
    for name, seq, ftid in bwd:
        assert fwd[(seq, ftid)] == expected[name]
    # one forward per backward: the pairs are distinct
    assert len({(s, t) for _, s, t in bwd}) == len(bwd)


def test_correlation_across_threads_uses_forward_thread_id():
    r = Recorder()
    out = {}

    def forward_in_thread(key):
        x = ag.tensor(np.ones(3), requires_grad=True)
        out[key] = (x * 2).sum()

    with rf.add_global_callback(r.start, r.end):
        # Two fresh threads: both forward ops get sequence_nr 0, told apart by thread id.
        for key in ("y", "other"):
            t = threading.Thread(target=forward_in_thread, args=(key,))
            t.start()
            t.join()
        out["y"].backward()
    fwd = [rec for rec in r.records if rec[1] == RecordScope.FUNCTION and rec[0] == "mul"]
    assert len(fwd) == 2 and fwd[0][2] == fwd[1][2] and fwd[0][3] != fwd[1][3]
    (bwd,) = [rec for rec in r.records if rec[0] == "MulBackward0"]
    forward_thread = fwd[0][3]
    assert bwd[4] == forward_thread and bwd[3] != forward_thread


def test_scopes_filter_and_user_scope_and_inputs():
    r = Recorder()
    with rf.add_global_callback(r.start, r.end, scopes=[RecordScope.USER_SCOPE, RecordScope.FUNCTION],
                                needs_inputs=True):
        with rf.record_function("my block"):
            y = ag.tensor(np.ones((2, 3)), requires_grad=True) * 2.0
        y.sum().backward()
    names = [rec[0] for rec in r.records]
    assert "my block" in names and "mul" in names and "MulBackward0" not in names
    (mul,) = [rec for rec in r.records if rec[0] == "mul"]
    assert mul[5] == (((2, 3), "float64"), ((), "Scalar"))   # a tuple: hashable, a profiler keys on it
    # the user range closes after the op inside it
    assert names.index("mul") < names.index("my block")


def test_record_function_as_decorator():
    r = Recorder()

    @rf.record_function("decorated")
    def f(x):
        return x * 2

    with rf.add_thread_local_callback(r.start, r.end):
        f(ag.ones(2))
    assert [rec[0] for rec in r.records] == ["mul", "decorated"]


def test_thread_local_callback_sees_only_its_thread():
    r = Recorder()
    with rf.add_thread_local_callback(r.start, r.end):
        t = threading.Thread(target=lambda: ag.ones(2) * 2)
        t.start()
        t.join()
        ag.ones(2) + 1
    assert [rec[0] for rec in r.records] == ["add"]


def test_handle_removes_callback_and_flag_goes_off():
    r = Recorder()
    h = rf.add_global_callback(r.start, r.end)
    assert rf.STATE.on
    h.remove()
    assert not rf.STATE.on
    ag.ones(2) * 2
    assert r.records == []


def test_sampling_probability_zero_records_nothing():
    r = Recorder()
    with rf.add_global_callback(r.start, r.end, sampling_prob=0.0):
        ag.ones(2) * 2
    assert r.records == []
    with pytest.raises(ValueError, match="sampling_prob"):
        rf.add_global_callback(r.start, r.end, sampling_prob=2.0)


def test_no_callback_means_no_record_object_and_no_allocation_in_record_function(records_made):
    made = records_made
    assert not rf.STATE.on
    x = ag.tensor(np.ones(16, dtype=np.float32), requires_grad=True)
    # warm up caches (save plans, F namespaces) outside the measured region
    y = x
    for _ in range(10):
        y = y * 1.0001 + 0.0001
    y.sum().backward()
    tracemalloc.start()
    try:
        y = x
        for _ in range(200):
            y = y * 1.0001 + 0.0001
        y.sum().backward()
        snap = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    assert made == []
    rf_file = rf.__file__
    from_rf = [s for s in snap.statistics("filename") if s.traceback[0].filename == rf_file]
    assert from_rf == []
    # and with a callback, records are made
    with rf.add_global_callback(lambda rec: None, lambda rec, ctx: None):
        ag.ones(2) * 2
    assert made


_T = ag.ones((2, 3))


@pytest.mark.parametrize("inputs, expected", [
    ((_T, 2.0), (((2, 3), "float32"), ((), "Scalar"))),
    ((_T, 2), (((2, 3), "float32"), ((), "Scalar"))),
    ((_T, True), (((2, 3), "float32"), ((), "Scalar"))),
    ((np.zeros(4, np.int64),), (((4,), "int64"),)),
    ((np.float64(1.5), _T), (((), "float64"), ((2, 3), "float32"))),
    (([_T, ag.zeros(5, dtype=np.float64)], 0), (((2, 3), "float32"), ((5,), "float64"), ((), "Scalar"))),
    ((_T, None, "mean"), (((2, 3), "float32"), ((), "NoneType"), ((), "str"))),
    ((), ()),
])
def test_input_descriptions(inputs, expected):
    """(shape, dtype) per input, scalars as torch's profiler shows them (an empty shape), a
    list of tensors one entry each; equal descriptions are one object (a profiler tells them
    apart by id()), also when reached through different raw inputs (a float and an int)."""
    desc = rf._describe_inputs(inputs)
    assert desc == expected
    assert rf._describe_inputs(inputs) is desc
    assert rf._intern(tuple(expected)) is desc


def test_equal_descriptions_are_one_object_across_input_kinds():
    a = rf._describe_inputs((ag.ones(3), 2.0))
    assert rf._describe_inputs((ag.ones(3), 7)) is a
    assert rf._describe_inputs((np.ones(3, np.float32), 1.0)) is a


def test_description_tables_stay_bounded(monkeypatch):
    """Both tables (by raw key, by value) start over past _MAX_DESCRIPTIONS, also for inputs
    described apart (a list of tensors) that only the by-value table holds."""
    monkeypatch.setattr(rf, "_MAX_DESCRIPTIONS", 4)
    for n in range(1, 30):
        rf._describe_inputs((ag.ones(n), 2.0))
        rf._describe_inputs(([ag.ones(n), ag.ones(n + 1)], 0))
        assert len(rf._descriptions) <= 4 and len(rf._by_value) <= 4
    assert rf._describe_inputs((ag.ones(3), 1.0)) == (((3,), "float32"), ((), "Scalar"))
