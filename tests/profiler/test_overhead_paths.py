"""The collector's CPU rows (one packed row per range) on the engine's profiled fast paths:
every forward op and backward node of a chain is a row with the right name, sequence_nr,
thread, device and input shapes, and each backward row names exactly its forward op."""
import numpy as np

import gradtrace.autograd as ag
from gradtrace import profiler
from gradtrace.autograd import record_function as rf
from gradtrace.profiler import Scope

F = int(Scope.FUNCTION)
B = int(Scope.BACKWARD_FUNCTION)


def profile_chain(n, record_shapes):
    x = ag.tensor(np.full(16, 0.5, dtype=np.float32), requires_grad=True)
    with profiler.profile(activities=["cpu"], record_shapes=record_shapes) as prof:
        y = x
        for _ in range(n):
            y = y * 1.0001 + 0.0001
        y.sum().backward()
    return prof.profile_data, x


def rows(data):
    cols = data.event_columns
    return [dict(name=data.name_of(i), scope=int(cols["scope"][i]),
                 seq=int(cols["sequence_nr"][i]), tid=int(cols["thread_id"][i]),
                 fwd_tid=int(cols["fwd_thread_id"][i]),
                 device=data.strings[int(cols["device_id"][i])],
                 shapes=data.input_shapes_of(int(cols["shapes_id"][i])),
                 start=int(cols["start_ns"][i]), end=int(cols["end_ns"][i]))
            for i in range(data.n_events)]


def test_chain_rows_are_exact_with_shapes():
    n = 50
    data, x = profile_chain(n, record_shapes=True)
    assert np.allclose(x.grad.data, 1.0001 ** n, rtol=1e-4)
    events = rows(data)
    fwd = [e for e in events if e["scope"] == F]
    bwd = [e for e in events if e["scope"] == B]
    assert len(fwd) == 2 * n + 1 and len(bwd) == 2 * n + 2   # + sum, SumBackward0, AccumulateGrad
    me = rf.current_thread_id()
    assert all(e["tid"] == me and e["device"] == "cpu" and e["start"] <= e["end"] for e in events)
    assert [e["name"] for e in fwd] == ["mul", "add"] * n + ["sum"]
    assert all(e["shapes"] == [[16], []] for e in fwd[:-1]) and fwd[-1]["shapes"] == [[16]]
    assert all(e["shapes"] is None for e in bwd)
    seqs = [e["seq"] for e in fwd]
    assert len(set(seqs)) == len(seqs) and min(seqs) >= 0
    # Each backward node's (sequence_nr, fwd_thread_id) names exactly one forward op.
    by_key = {(e["seq"], e["tid"]): e["name"] for e in fwd}
    expected = {"MulBackward0": "mul", "AddBackward0": "add", "SumBackward0": "sum"}
    for e in bwd:
        if e["name"] == "AccumulateGrad":
            assert e["seq"] < 0                       # no forward op
        else:
            assert by_key[(e["seq"], e["fwd_tid"])] == expected[e["name"]]
    assert len({(e["seq"], e["fwd_tid"]) for e in bwd}) == len(bwd)


def test_chain_rows_without_shapes_match_those_with_them():
    with_shapes = rows(profile_chain(20, record_shapes=True)[0])
    without = rows(profile_chain(20, record_shapes=False)[0])
    assert all(e["shapes"] is None for e in without)
    key = lambda e: (e["name"], e["scope"])  # noqa: E731
    assert [key(e) for e in with_shapes] == [key(e) for e in without]
