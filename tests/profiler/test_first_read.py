"""A profile is built from its records when first read, not as the profiled region ends
(torch.profiler builds its events on first read too): what that may change, and what not."""
import gc
import threading

import numpy as np

import gradtrace.autograd as ag
from gradtrace import profiler
from gradtrace.profiler.collector import Collector


def _step(w, b, x):
    ((x @ w + b).tanh() * 2.0).sum().backward()


def _leaves():
    ag.manual_seed(0)
    return ag.randn(4, 3).requires_grad_(), ag.zeros(3).requires_grad_(), ag.randn(5, 4)


def _table(data) -> dict:
    """Everything a profile holds but times, comparable across two runs of the same code."""
    ev = data.event_columns
    names = [data.name_of(i) for i in range(data.n_events)]
    seq = ev["sequence_nr"]
    first = seq[seq >= 0].min()                # sequence numbers count on across runs
    return {"names": names, "scope": ev["scope"].tolist(),
            "seq": np.where(seq >= 0, seq - first, seq).tolist(),
            "shapes": ev["shapes_id"].tolist(),
            "nodes": {k: v.tolist() for k, v in data.node_columns.items()},
            "edges": {k: v.tolist() for k, v in data.edge_columns.items()}}


def test_the_profile_is_built_once_on_first_read():
    w, b, x = _leaves()
    with profiler.profile() as prof:
        _step(w, b, x)
    assert prof._finished is not None          # recorded, not built yet
    data = prof.profile_data
    assert prof._finished is None and data.n_events > 0
    assert prof.profile_data is data           # built once
    assert prof.key_averages().table()         # every reader goes through it


def test_a_late_read_gives_what_an_immediate_build_gives():
    """Read after the graph, the leaves and the inputs are gone: the records keep what the
    profile needs (the nodes that ran, for the edges), so it equals one built at once."""
    def profiled(read_at_once):
        w, b, x = _leaves()
        col = Collector({"cpu"}, record_shapes=True, profile_memory=False, with_stack=False,
                        with_flops=False, with_modules=False)
        col.start()
        for _ in range(2):
            _step(w, b, x)
        if read_at_once:
            return col.stop()
        col.finish()
        del w, b, x
        gc.collect()
        return col.profile_data()

    assert _table(profiled(False)) == _table(profiled(True))


def test_ranges_closing_after_the_end_are_not_in_the_profile():
    """A range still open when the cycle ends closes into the collector's list afterwards;
    the profile holds what had closed when it ended, whenever it is read."""
    with profiler.profile() as prof:
        with profiler.record_function("inside"):
            pass
        late = profiler.record_function("late").__enter__()
    late.__exit__(None, None, None)
    names = {prof.profile_data.name_of(i) for i in range(prof.profile_data.n_events)}
    assert "inside" in names and "late" not in names


def test_first_reads_from_two_threads_share_one_profile():
    w, b, x = _leaves()
    with profiler.profile() as prof:
        _step(w, b, x)
    got = []
    barrier = threading.Barrier(2)

    def read():
        barrier.wait()
        got.append(prof.profile_data)

    threads = [threading.Thread(target=read) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got[0] is got[1]
    assert np.all(np.diff(got[0].event_columns["start_ns"]) >= 0)


def test_each_scheduled_cycle_is_its_own_profile():
    """on_trace_ready reads each cycle as it ends; a cycle left unread is built when read."""
    seen = []
    w, b, x = _leaves()
    sched = profiler.schedule(wait=0, warmup=0, active=1, repeat=2)
    with profiler.profile(schedule=sched, on_trace_ready=lambda p: seen.append(p.profile_data)) as prof:
        for _ in range(3):
            _step(w, b, x)
            prof.step()
    assert len(seen) == 2 and seen[0] is not seen[1]
    for data in seen:
        assert [data.name_of(i) for i in range(data.n_events)].count("SumBackward0") == 1
