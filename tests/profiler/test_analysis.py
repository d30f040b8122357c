"""Analysis on hand-written and synthetic profiles: self/total times, CUDA times,
forward↔backward links, inheritance of shapes and stacks, memory attribution, FLOPs."""
import numpy as np
import pytest

from gradtrace.profiler import Scope
from gradtrace.profiler.flops import estimate_flops
from gradtrace.profiler.synthetic import from_events, from_intervals, training_profile

F, B, U = Scope.FUNCTION, Scope.BACKWARD_FUNCTION, Scope.USER_SCOPE


def assert_invariants(data):
    """The accounting identities every profile must satisfy."""
    a = data.analysis
    top = a.parent < 0
    assert a.self_cpu_ns.sum() == a.cpu_total_ns[top].sum()
    assert a.self_cuda_ns.sum() == a.cuda_total_ns[top].sum()
    assert (a.self_cpu_ns >= 0).all() and (a.self_cuda_ns >= 0).all()
    assert a.cpu_clock_skew == 0 and a.cuda_clock_skew == 0
    assert len(a.partial_overlaps) == 0


def test_self_time_of_the_basic_case():
    data = from_intervals([[0, 10], [1, 3], [3, 4]])
    a = data.analysis
    assert a.cpu_total_ns.tolist() == [10, 2, 1]
    assert a.self_cpu_ns.tolist() == [7, 2, 1]
    assert_invariants(data)


def test_self_time_across_threads_and_levels():
    data = from_events([
        {"name": "step", "start": 0, "end": 100, "thread": 1, "scope": U},
        {"name": "a", "start": 10, "end": 60, "thread": 1},
        {"name": "b", "start": 20, "end": 30, "thread": 1},
        {"name": "worker", "start": 15, "end": 80, "thread": 2, "scope": U},
        {"name": "b", "start": 20, "end": 50, "thread": 2},
    ])
    a = data.analysis
    assert a.parent.tolist() == [-1, 0, 1, -1, 3]
    assert a.self_cpu_ns.tolist() == [50, 40, 10, 35, 30]
    assert_invariants(data)
    rows = {r.key: r for r in data.key_averages()}
    assert rows["b"].count == 2 and rows["b"].self_cpu_time_total == pytest.approx(0.040)


def test_overlapping_children_are_clamped_and_counted():
    # Children of one parent that overlap each other (partial overlap) sum to more than it.
    data = from_intervals([[0, 10], [1, 8], [5, 10]])
    a = data.analysis
    assert len(a.partial_overlaps) == 1
    assert a.partial_overlaps.tolist() == [[1, 2]]
    # [5, 10] sticks out of [1, 8], so both are children of [0, 10]: 7 + 5 > 10 is clamped.
    assert a.parent.tolist() == [-1, 0, 0]
    assert a.self_cpu_ns.tolist() == [0, 7, 5]
    assert a.cpu_clock_skew == 1
    assert "Partially overlapping ranges" in data.table()
    assert [(a.name, b.name) for a, b in data.partial_overlaps()] == [("op1", "op2")]


def test_negative_self_time_is_clamped():
    # Two children of [0, 10] that overlap each other: 7 + 5 > 10.
    data = from_intervals([[0, 10], [0, 7], [5, 10]])
    a = data.analysis
    assert a.self_cpu_ns[0] == 0
    assert a.cpu_clock_skew == 1
    assert "clock skew" in data.table()


def _cuda_profile():
    """forward op "linear" with device interval around two kernels; a user scope without one."""
    return from_events([
        {"name": "model", "start": 0, "end": 100, "scope": U},
        {"name": "linear", "start": 10, "end": 60, "device": "cuda:0", "device_start": 1000, "device_end": 1100},
        {"name": "matmul", "start": 15, "end": 30, "device": "cuda:0", "device_start": 1005, "device_end": 1065},
        {"name": "add", "start": 35, "end": 50, "device": "cuda:0", "device_start": 1070, "device_end": 1090},
        {"name": "relu", "start": 65, "end": 80, "device": "cuda:0", "device_start": 1100, "device_end": 1130},
        {"name": "cpu_only", "start": 82, "end": 90},
    ], metadata={"activities": ["cpu", "cuda"]})


def test_cuda_self_and_total():
    data = _cuda_profile()
    a = data.analysis
    # The user scope has no device interval: its CUDA total is its children's.
    assert a.cuda_total_ns.tolist() == [130, 100, 60, 20, 30, 0]
    assert a.self_cuda_ns.tolist() == [0, 20, 60, 20, 30, 0]
    assert_invariants(data)
    region = 1130 - 1000
    assert a.self_cuda_ns.sum() <= region


def test_cuda_children_longer_than_parent_are_clamped():
    data = from_events([
        {"name": "outer", "start": 0, "end": 100, "device": "cuda:0", "device_start": 0, "device_end": 10},
        {"name": "inner", "start": 10, "end": 20, "device": "cuda:0", "device_start": 0, "device_end": 50},
    ])
    assert data.analysis.self_cuda_ns.tolist() == [0, 50]
    assert data.analysis.cuda_clock_skew == 1


def _fwd_bwd_profile():
    """mul (seq 0) and a composite mean around sum (seq 1) and div (seq 2); backward on thread 2
    for thread 1's graph, plus thread 2's own forward mul with the same seq 0."""
    return from_events([
        {"name": "mul", "start": 0, "end": 10, "sequence_nr": 0, "thread": 1, "shapes": [[4, 4], []],
         "stack": ["train.py(10): forward", "train.py(50): main"]},
        {"name": "mean", "start": 10, "end": 40, "thread": 1, "shapes": [[4, 4]], "stack": ["train.py(11): forward"]},
        {"name": "sum", "start": 12, "end": 20, "sequence_nr": 1, "thread": 1, "shapes": [[4, 4]],
         "stack": ["train.py(11): forward"]},
        {"name": "div", "start": 22, "end": 30, "sequence_nr": 2, "thread": 1, "shapes": [[], []],
         "stack": ["train.py(11): forward"]},
        {"name": "mul", "start": 5, "end": 9, "sequence_nr": 0, "thread": 2, "shapes": [[8], []],
         "stack": ["worker.py(3): run"]},
        {"name": "DivBackward0", "start": 100, "end": 110, "scope": B, "sequence_nr": 2, "fwd_thread_id": 1, "thread": 2},
        {"name": "div", "start": 101, "end": 105, "thread": 2, "shapes": [[], []], "stack": ["engine.py(1): run"]},
        {"name": "SumBackward0", "start": 110, "end": 130, "scope": B, "sequence_nr": 1, "fwd_thread_id": 1, "thread": 2},
        {"name": "MulBackward0", "start": 130, "end": 150, "scope": B, "sequence_nr": 0, "fwd_thread_id": 1, "thread": 2},
        {"name": "MulBackward0", "start": 150, "end": 155, "scope": B, "sequence_nr": 0, "fwd_thread_id": 2, "thread": 2},
        {"name": "AccumulateGrad", "start": 155, "end": 156, "scope": B, "sequence_nr": -1, "fwd_thread_id": 1, "thread": 2},
        {"name": "OrphanBackward0", "start": 160, "end": 161, "scope": B, "sequence_nr": 99, "fwd_thread_id": 1, "thread": 2},
    ], metadata={"with_stack": True, "record_shapes": True})


def test_backward_links_to_exactly_its_forward_op():
    data = _fwd_bwd_profile()
    a = data.analysis
    names = [data.name_of(i) for i in range(data.n_events)]
    links = {i: int(a.forward_event[i]) for i in range(data.n_events) if a.forward_event[i] >= 0}
    # Events are stored in start order: index by name and thread to stay readable.
    cols = data.event_columns

    def idx(name, thread, start):
        return next(i for i in range(data.n_events) if names[i] == name and cols["thread_id"][i] == thread
                    and cols["start_ns"][i] == start)

    assert links == {
        idx("DivBackward0", 2, 100): idx("div", 1, 22),
        idx("SumBackward0", 2, 110): idx("sum", 1, 12),
        idx("MulBackward0", 2, 130): idx("mul", 1, 0),
        idx("MulBackward0", 2, 150): idx("mul", 2, 5),
    }
    assert a.unlinked_backward == 1   # OrphanBackward0: its forward op was not profiled
    # Inheritance: shapes and stack from the forward op; ops inside a node take the node's stack.
    mul_bwd = data.events()[idx("MulBackward0", 2, 150)]
    assert mul_bwd.input_shapes == [[8], []]
    assert mul_bwd.stack == ["worker.py(3): run"]
    inner_div = data.events()[idx("div", 2, 101)]
    assert inner_div.stack == ["train.py(11): forward"]
    assert inner_div.input_shapes == [[], []]          # its own shapes


def test_forward_backward_summary():
    data = _fwd_bwd_profile()
    rows = {(r.name, r.call_site): r for r in data.forward_backward_summary()}
    mul = rows[("mul", "train.py(10): forward")]
    assert (mul.count, mul.backward_count, mul.backward_names) == (1, 1, ["MulBackward0"])
    assert mul.cpu_time_total == pytest.approx(0.010)
    assert mul.backward_cpu_time_total == pytest.approx(0.020)
    assert mul.forward_backward_cpu_time_total == pytest.approx(0.030)
    # The composite is charged for the nodes of the ops inside it.
    mean = rows[("mean", "train.py(11): forward")]
    assert mean.backward_names == ["DivBackward0", "SumBackward0"]
    assert mean.backward_cpu_time_total == pytest.approx(0.030)
    # ... but its self columns hold only what it did itself: the nodes are its parts'.
    assert mean.backward_self_cpu_time_total == pytest.approx(0.0)
    sum_row = rows[("sum", "train.py(11): forward")]
    assert sum_row.backward_self_cpu_time_total == pytest.approx(0.020)
    assert mean.forward_backward_self_cpu_time_total == pytest.approx(mean.self_cpu_time_total)
    # "div" run inside DivBackward0 is not a forward op.
    div = rows[("div", "train.py(11): forward")]
    assert div.count == 1
    assert ("div", "engine.py(1): run") not in rows
    text = data.forward_backward_summary().table()
    assert "Fwd+Bwd CPU total" in text and "Fwd+Bwd Self CPU" in text and "Call Site" in text
    assert "DivBackward0, SumBackward0" in text


def test_forward_backward_self_columns_never_double_count():
    """Self forward + self backward over all forward-op rows is at most the profile's total
    (composites and their parts are not counted twice); totals may overlap."""
    for data in (_fwd_bwd_profile(), training_profile(3_000)):
        rows = data.forward_backward_summary()
        total_us = data.total_average().self_cpu_time_total
        self_sum = sum(r.forward_backward_self_cpu_time_total for r in rows)
        assert 0 < self_sum <= total_us + 1e-6
        for r in rows:
            assert r.backward_self_cpu_time_total <= r.backward_cpu_time_total + 1e-9
            assert r.forward_backward_self_cpu_time_total <= r.forward_backward_cpu_time_total + 1e-9


def test_group_by_input_shape_and_stack():
    data = _fwd_bwd_profile()
    by_shape = {(r.key, str(r.input_shapes)) for r in data.key_averages(group_by_input_shape=True)}
    assert ("mul", "[[4, 4], []]") in by_shape and ("mul", "[[8], []]") in by_shape
    assert ("MulBackward0", "[[4, 4], []]") in by_shape and ("MulBackward0", "[[8], []]") in by_shape
    by_stack = data.key_averages(group_by_stack_n=1)
    mul_sites = sorted(r.stack[0] for r in by_stack if r.key == "mul")
    assert mul_sites == ["train.py(10): forward", "worker.py(3): run"]
    by_two = [r for r in data.key_averages(group_by_stack_n=2) if r.key == "mul" and r.stack[0].startswith("train")]
    assert by_two[0].stack == ["train.py(10): forward", "train.py(50): main"]


def test_memory_attribution():
    data = from_events(
        [{"name": "outer", "start": 0, "end": 100}, {"name": "inner", "start": 10, "end": 20},
         {"name": "other_thread", "start": 0, "end": 100, "thread": 2}],
        memory=[{"time": 5, "bytes": 100}, {"time": 15, "bytes": 40}, {"time": 20, "bytes": -40},
                {"time": 50, "bytes": 8, "thread": 2}, {"time": 200, "bytes": 1},
                {"time": 30, "bytes": 64, "device": "cuda:0"}],
        metadata={"profile_memory": True})
    a = data.analysis
    assert a.memory_event.tolist() == [0, 1, 1, 2, -1, 0]
    assert a.self_cpu_memory.tolist() == [100, 0, 8]
    assert a.cpu_memory.tolist() == [100, 0, 8]
    assert a.self_cuda_memory.tolist() == [64, 0, 0]
    rows = {r.key: r for r in data.key_averages()}
    assert rows["inner"].cpu_memory_usage == 0 and rows["outer"].self_cuda_memory_usage == 64
    assert "Self CUDA Mem" in data.table()


FLOP_CASES = [
    ("matmul", [[8, 16], [16, 4]], 2 * 8 * 16 * 4),
    ("matmul", [[3, 8, 16], [16, 4]], 2 * 3 * 8 * 16 * 4),
    ("matmul", [[5, 2, 3], [5, 3, 7]], 2 * 5 * 2 * 3 * 7),     # matmul.bmm
    ("matmul", [[16], [16, 4]], 2 * 16 * 4),                   # a vector times a matrix
    ("addmm", [[4], [8, 16], [16, 4]], 0),     # a composite: its matmul and add carry its FLOPs
    ("linear", [[8, 16], [4, 16], [4]], 2 * 8 * 16 * 4 + 8 * 4),
    ("linear", [[2, 8, 16], [4, 16]], 2 * 16 * 16 * 4),
    ("conv2d", [[1, 3, 8, 8], [6, 3, 3, 3]], 2 * 1 * 6 * 27 * 36),
    ("add", [[4, 4], []], 16),
    ("mul", [[4, 1], [1, 5]], 20),
    ("relu", [[7]], 7),
    ("sum", [[4, 4]], 0),
    ("matmul", [], 0),
    ("aten::mm", [[[8, 4], [8, 4]], [4, 2]], 0),     # a tensor-list input (torch traces): no estimate
    ("aten::cat", [[[8, 4], [8, 4]], []], 0),
]


@pytest.mark.parametrize("name, shapes, expected", FLOP_CASES)
def test_flops(name, shapes, expected):
    assert estimate_flops(name, shapes) == expected


def test_flops_in_key_averages_and_table():
    data = from_events([{"name": "matmul", "start": 0, "end": 10, "shapes": [[8, 16], [16, 4]]},
                        {"name": "matmul", "start": 10, "end": 20, "shapes": [[8, 16], [16, 4]]}],
                       metadata={"with_flops": True})
    assert data.key_averages()[0].flops == 2 * 1024
    assert "Total KFLOPs" in data.table()


@pytest.mark.parametrize("n_events, threads", [(5_000, 1), (38_000, 4)])
def test_invariants_on_synthetic_training_profiles(n_events, threads):
    data = training_profile(n_events, threads=threads)
    a = data.analysis
    # Truncating the last step leaves parents with missing children but never breaks nesting.
    assert len(a.partial_overlaps) == 0
    top = a.parent < 0
    assert a.self_cpu_ns.sum() == a.cpu_total_ns[top].sum()
    assert (a.self_cpu_ns >= 0).all()
    cols = data.event_columns
    bwd = (cols["scope"] == B) & (cols["sequence_nr"] >= 0)
    assert (a.forward_event[bwd] >= 0).all()
    fwd = a.forward_event[bwd]
    assert (cols["sequence_nr"][fwd] == cols["sequence_nr"][bwd]).all()
    assert (cols["thread_id"][fwd] == cols["fwd_thread_id"][bwd]).all()
    # Each forward op is the target of at most one backward node here.
    assert len(np.unique(fwd)) == len(fwd)
    rows = data.key_averages()
    assert sum(r.count for r in rows) == data.n_events
    assert sum(r.self_cpu_time_total for r in rows) == pytest.approx(a.self_cpu_ns.sum() / 1e3)
