"""The profiler on the real engine: invariants, timing accuracy, correlation, threads,
shapes, stacks, memory, modules, and the profile object's life cycle."""
import threading
import time

import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace import profiler
from gradtrace.autograd import memory as ag_memory
from gradtrace.autograd.dispatch import OPS
from gradtrace.autograd.record_function import RecordScope
from gradtrace.profiler import ProfileData, Scope

B = int(Scope.BACKWARD_FUNCTION)


def mlp_step(x, w1, b1, w2, b2):
    h = (x @ w1 + b1).relu()
    out = h @ w2 + b2
    loss = (out * out).mean() + out.sum() * 0.001
    loss.backward()
    return loss


def make_mlp(seed=0):
    ag.manual_seed(seed)
    x = ag.randn(16, 32)
    w1 = ag.randn(32, 64, requires_grad=True)
    b1 = ag.zeros(64, requires_grad=True)
    w2 = ag.randn(64, 8, requires_grad=True)
    b2 = ag.zeros(8, requires_grad=True)
    return x, w1, b1, w2, b2


def assert_invariants(data: ProfileData):
    a = data.analysis
    top = a.parent < 0
    assert a.self_cpu_ns.sum() == a.cpu_total_ns[top].sum()
    assert a.self_cuda_ns.sum() == a.cuda_total_ns[top].sum()
    assert (a.self_cpu_ns >= 0).all() and (a.self_cuda_ns >= 0).all()
    assert a.cpu_clock_skew == 0 and len(a.partial_overlaps) == 0


def node_name(op: str) -> str:
    return OPS[op].node_cls.__name__


def assert_links_exact(data: ProfileData):
    """Every backward event with a sequence_nr links to exactly one forward op: the one with the
    same (sequence_nr, thread) whose backward node class has this event's name."""
    a = data.analysis
    cols = data.event_columns
    bwd = np.flatnonzero((cols["scope"] == B) & (cols["sequence_nr"] >= 0))
    assert len(bwd) > 0
    for b in bwd:
        f = int(a.forward_event[b])
        assert f >= 0, data.name_of(b)
        assert cols["scope"][f] == Scope.FUNCTION
        assert cols["sequence_nr"][f] == cols["sequence_nr"][b]
        assert cols["thread_id"][f] == cols["fwd_thread_id"][b]
        candidates = np.flatnonzero((cols["scope"] == Scope.FUNCTION) & (cols["sequence_nr"] == cols["sequence_nr"][b])
                                    & (cols["thread_id"] == cols["fwd_thread_id"][b]))
        assert candidates.tolist() == [f]
        fwd_name = data.name_of(f)
        if fwd_name in OPS:
            assert data.name_of(b) == node_name(fwd_name)
    assert a.unlinked_backward == 0


def test_scope_values_match_the_engine():
    assert {s.name: int(s) for s in Scope} == {s.name: int(s) for s in RecordScope}


def test_mlp_invariants_and_links():
    params = make_mlp()
    # CPU only, also on a machine with a GPU (the default would add "cuda" there).
    with profiler.profile(activities=["cpu"], record_shapes=True) as prof:
        for _ in range(3):
            mlp_step(*params)
    data = prof.profile_data
    assert isinstance(data, ProfileData)
    assert data.metadata["activities"] == ["cpu"]
    assert_invariants(data)
    assert_links_exact(data)
    names = {r.key for r in prof.key_averages()}
    assert {"matmul", "add", "relu", "mul", "sum", "mean", node_name("matmul"), node_name("relu"),
            "AccumulateGrad"} <= names
    rows = {r.key: r for r in prof.key_averages()}
    assert rows["matmul"].count == 3 * 2 and rows["relu"].count == 3
    assert rows["AccumulateGrad"].count == 3 * 4
    # Backward nodes carry the forward op's shapes.
    by_shape = {(r.key, str(r.input_shapes)) for r in prof.key_averages(group_by_input_shape=True)}
    assert ("matmul", "[[16, 32], [32, 64]]") in by_shape
    assert (node_name("matmul"), "[[16, 32], [32, 64]]") in by_shape
    assert (node_name("matmul"), "[[16, 64], [64, 8]]") in by_shape


def _sleep(seconds):
    """Sleep and return how long it really took (a loaded machine oversleeps by ms)."""
    t0 = time.perf_counter()
    time.sleep(seconds)
    return time.perf_counter() - t0


class Sleepy(ag.Function):
    FORWARD_S = 0.030
    BACKWARD_S = 0.045
    slept = {}

    @staticmethod
    def forward(ctx, x):
        Sleepy.slept["forward"] = _sleep(Sleepy.FORWARD_S)
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        Sleepy.slept["backward"] = _sleep(Sleepy.BACKWARD_S)
        return g * 2.0


def test_self_and_total_cpu_match_known_sleeps():
    x = ag.randn(4, requires_grad=True)
    with profiler.profile(activities=["cpu"]) as prof:
        with profiler.record_function("outer"):
            outer_sleep = _sleep(0.020)
            y = Sleepy.apply(x)
        y.sum().backward()
    rows = {r.key: r for r in prof.key_averages()}
    fwd, node, outer = rows["Sleepy"], rows["SleepyBackward"], rows["outer"]
    slept_fwd, slept_bwd = Sleepy.slept["forward"], Sleepy.slept["backward"]

    def close(measured_us, slept_s):
        # A range holds its sleep, plus a little bookkeeping (more when the machine is busy);
        # a self time that wrongly kept a child's sleep would be off by 30 ms or more.
        return slept_s * 1e6 <= measured_us <= slept_s * 1e6 * 1.10 + 5_000

    assert close(fwd.cpu_time_total, slept_fwd)
    assert close(fwd.self_cpu_time_total, slept_fwd)
    assert close(node.cpu_time_total, slept_bwd)
    assert close(node.self_cpu_time_total, slept_bwd)
    assert close(outer.cpu_time_total, outer_sleep + slept_fwd)
    assert close(outer.self_cpu_time_total, outer_sleep)
    summary = {r.name: r for r in prof.forward_backward_summary()}
    assert close(summary["Sleepy"].forward_backward_cpu_time_total, slept_fwd + slept_bwd)
    assert summary["Sleepy"].backward_names == ["SleepyBackward"]
    assert_invariants(prof.profile_data)


def test_one_forward_op_with_several_backward_nodes():
    x = ag.randn(8, 8, requires_grad=True)
    with profiler.profile() as prof:
        # a composite: x / (|x| + 1) (hypot, the example before, is now a primitive)
        ag.nn.functional.softsign(x * 2.0).sum().backward()
    data = prof.profile_data
    assert_links_exact(data)
    events = data.events()
    softsign = next(e for e in events if e.name == "softsign")
    inner = [c.name for c in softsign.cpu_children]
    assert len(inner) >= 2          # a composite: several primitives, each with its node
    nodes = sorted(e.name for e in events if e.scope == Scope.BACKWARD_FUNCTION
                   and e.forward_event is not None and e.forward_event.cpu_parent == softsign)
    assert nodes == sorted(node_name(n) for n in inner if n in OPS)
    row = {r.name: r for r in prof.forward_backward_summary()}["softsign"]
    assert row.backward_names == sorted(set(nodes)) and row.backward_count == len(nodes)


def test_ops_in_two_threads():
    barrier = threading.Barrier(2)
    thread_ids = {}

    def work(tag, n):
        thread_ids[tag] = ag.record_function.current_thread_id()
        x = ag.randn(4, 4, requires_grad=True)
        barrier.wait()
        for _ in range(n):
            ((x * 3.0).exp() - x).sum().backward()

    with profiler.profile() as prof:
        threads = [threading.Thread(target=work, args=(k, 5)) for k in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    data = prof.profile_data
    assert_invariants(data)
    assert_links_exact(data)
    cols = data.event_columns
    assert set(np.unique(cols["thread_id"])) == set(thread_ids.values())
    # Both threads start their sequence numbers at 0: only the thread tells them apart.
    for tid in thread_ids.values():
        mine = (cols["scope"] == B) & (cols["fwd_thread_id"] == tid) & (cols["sequence_nr"] >= 0)
        assert mine.sum() == 5 * 4


def test_backward_in_another_thread_links_to_the_creating_thread():
    x = ag.randn(4, requires_grad=True)
    box = {}

    def forward_only():
        box["loss"] = (x * 2.0).sum()
        box["tid"] = ag.record_function.current_thread_id()

    with profiler.profile() as prof:
        t = threading.Thread(target=forward_only)
        t.start()
        t.join()
        box["loss"].backward()
    data = prof.profile_data
    assert_links_exact(data)
    cols = data.event_columns
    bwd = (cols["scope"] == B) & (cols["sequence_nr"] >= 0)
    assert set(cols["fwd_thread_id"][bwd]) == {box["tid"]}
    assert box["tid"] not in set(cols["thread_id"][bwd])


def test_stacks_point_at_the_user_line_and_are_inherited():
    x = ag.randn(4, requires_grad=True)
    with profiler.profile(with_stack=True) as prof:
        y = (x * 2.0).sum()  # the call site
        y.backward()
    this_file = __file__
    events = prof.events()
    mul = next(e for e in events if e.name == "mul")
    assert mul.stack[0].startswith(f"{this_file}(")
    assert mul.stack[0].endswith("test_stacks_point_at_the_user_line_and_are_inherited")
    line = int(mul.stack[0][len(this_file) + 1:].split(")")[0])
    source = open(this_file).read().splitlines()[line - 1]
    assert "# the call site" in source
    node = next(e for e in events if e.name == node_name("mul"))
    assert node.stack == mul.stack
    rows = prof.key_averages(group_by_stack_n=1)
    assert any(r.key == node_name("mul") and r.stack == mul.stack[:1] for r in rows)
    summary = prof.forward_backward_summary()
    assert {r.call_site for r in summary if r.name == "mul"} == {mul.stack[0]}


def test_memory_totals_reconcile():
    keep = []
    with profiler.profile(profile_memory=True) as prof:
        before = ag_memory.allocated_bytes("cpu")
        x = ag.randn(64, 64, requires_grad=True)
        for _ in range(3):
            y = (x * 2.0 + 1.0).relu()
            keep.append(y.detach())
        y.sum().backward()
        del y
        after = ag_memory.allocated_bytes("cpu")
    data = prof.profile_data
    mem = data.memory_columns
    cpu = np.array([data.strings[d] == "cpu" for d in mem["device_id"]], dtype=bool)
    assert cpu.sum() > 0
    allocated = mem["bytes"][cpu & (mem["bytes"] > 0)].sum()
    freed = -mem["bytes"][cpu & (mem["bytes"] < 0)].sum()
    assert allocated - freed == after - before
    assert mem["total_allocated"][cpu][-1] - (mem["total_allocated"][cpu][0] - mem["bytes"][cpu][0]) == allocated - freed
    # Each mul output (64*64 float32) is allocated inside the mul op.
    rows = {r.key: r for r in prof.key_averages()}
    assert rows["mul"].self_cpu_memory_usage >= 3 * 64 * 64 * 4
    attributed = data.analysis.memory_event >= 0
    total_self = data.analysis.self_cpu_memory.sum()
    assert total_self == mem["bytes"][cpu & attributed].sum()
    assert "Self CPU Mem" in prof.table()


def test_modules_ranges_kept_only_with_with_modules():
    x = ag.randn(4)
    for with_modules in (False, True):
        with profiler.profile(with_modules=with_modules) as prof:
            with profiler.record_function("nn.Module: Linear"):
                x * 2.0
        names = {e.name for e in prof.events()}
        assert ("nn.Module: Linear" in names) is with_modules
        assert "mul" in names


def test_flops_from_recorded_shapes():
    a, b = ag.randn(8, 16), ag.randn(16, 4)
    with profiler.profile(with_flops=True) as prof:
        a @ b
        a @ b
    rows = {r.key: r for r in prof.key_averages()}
    assert rows["matmul"].flops == 2 * (2 * 8 * 16 * 4)
    assert "Total KFLOPs" in prof.table()


def test_nested_profilers_are_refused():
    with profiler.profile():
        with pytest.raises(RuntimeError, match="already running"):
            with profiler.profile():
                pass
    with profiler.profile() as prof:   # the refused one did not leave state behind
        ag.randn(2) * 2.0
    assert prof.profile_data.n_events == 1


def test_life_cycle_errors():
    prof = profiler.profile()
    with pytest.raises(RuntimeError, match="no profile yet"):
        prof.key_averages()
    with pytest.raises(RuntimeError, match="not running"):
        prof.step()
    with pytest.raises(RuntimeError, match="not running"):
        prof.stop()
    with pytest.raises(ValueError, match="unknown profiler activity"):
        profiler.profile(activities=["tpu"])


def test_start_stop_and_callbacks_removed():
    prof = profiler.profile(activities=[profiler.ProfilerActivity.CPU])
    prof.start()
    ag.randn(3) + 1.0
    prof.stop()
    assert not ag.record_function.has_callbacks()
    assert [e.name for e in prof.events()] == ["add"]


def test_on_trace_ready_without_schedule(tmp_path):
    seen = []
    with profiler.profile(on_trace_ready=seen.append) as prof:
        ag.randn(3) * 2.0
    assert seen == [prof]


def test_save_and_load_a_real_profile(tmp_path):
    params = make_mlp()
    with profiler.profile(activities=["cpu"], record_shapes=True, with_stack=True,
                          profile_memory=True) as prof:
        mlp_step(*params)
    path = tmp_path / "mlp.gtprof"
    prof.save(path)
    loaded = profiler.load(path)
    assert loaded.metadata["record_shapes"] and loaded.metadata["with_stack"]
    assert loaded.metadata["wall_clock_base_ns"] > 1.6e18 and loaded.metadata["start_time_ns"] > 0
    assert loaded.metadata["devices"] == ["cpu"] and loaded.metadata["activities"] == ["cpu"]
    assert type(loaded) is type(prof.profile_data)
    for name, col in prof.profile_data.event_columns.items():
        np.testing.assert_array_equal(col, loaded.event_columns[name])
    assert loaded.table(group_by_stack_n=2) == prof.table(group_by_stack_n=2)
    assert loaded.forward_backward_summary().table() == prof.forward_backward_summary().table()


def test_real_profile_without_stacks_is_compact(tmp_path):
    params = make_mlp()
    with profiler.profile(record_shapes=True) as prof:
        for _ in range(20):
            mlp_step(*params)
    path = tmp_path / "mlp.gtprof"
    prof.save(path, compress=True)      # the transport form; the mapped one trades size for speed
    assert path.stat().st_size / prof.profile_data.n_events <= 64


def test_record_function_is_the_engines():
    assert profiler.record_function is ag.record_function.record_function


class _FakeDevice:
    type, index = "cuda", 0

    def __str__(self):
        return "cuda:0"


class _FakeStream:
    def __init__(self):
        self.device = _FakeDevice()
        self.native = object()
        self.ptr = 0xBEEF


def test_gpu_collection_path_with_a_fake_device(monkeypatch):
    """The CUDA-event path runs on any machine with a stand-in backend: one event pair per
    range, one synchronize at stop, device times placed on the CPU axis."""
    from gradtrace.autograd import backend
    from gradtrace.profiler.collector import Collector

    device_clock = [0]
    syncs = []

    class FakeEvent:
        def __init__(self, device=None):
            self.device = device
            self.native = object()
            self.t = None

        def record(self, stream=None):
            self.t = device_clock[0]
            return self

    monkeypatch.setattr(backend, "cuda_is_available", lambda: True)
    monkeypatch.setattr(backend, "Event", FakeEvent)
    monkeypatch.setattr(backend, "elapsed_ns", lambda a, b: b.t - a.t)
    monkeypatch.setattr(backend, "synchronize", lambda *args: syncs.append(args))

    collector = Collector({"cpu", "cuda"}, record_shapes=False, profile_memory=False, with_stack=False,
                          with_flops=False, with_modules=False)
    end, start = collector._make_sink(collector._ranges)
    stream = _FakeStream()

    def begin(name, scope=0):
        """The row the engine's record_function.begin builds for this sink (its end() closes
        it: the end time, then the sink)."""
        import time
        ctx = start(scope, stream)
        return [end, scope, name, -1, 0, 1, None, "cuda:0", stream, None, ctx, time.perf_counter_ns(), 0]

    close = ag.record_function.end

    outer = begin("linear")                  # base event and linear's start at device t=0
    device_clock[0] = 10
    mm = begin("matmul")
    device_clock[0] = 70
    close(mm)
    add = begin("add")
    device_clock[0] = 90
    close(add)
    device_clock[0] = 100
    close(outer)
    assert syncs == []                       # nothing synchronised while collecting
    data = collector.stop()
    assert len(syncs) == 1
    cols = data.event_columns
    names = [data.name_of(i) for i in range(data.n_events)]
    assert names == ["linear", "matmul", "add"]
    cpu_base = collector._gpu_base["cuda:0"][0]
    assert (cols["device_start_ns"] - cpu_base).tolist() == [0, 10, 70]
    assert (cols["device_end_ns"] - cpu_base).tolist() == [100, 70, 90]
    assert cols["stream"].tolist() == [0xBEEF] * 3
    a = data.analysis
    assert a.cuda_total_ns.tolist() == [100, 60, 20]
    assert a.self_cuda_ns.tolist() == [20, 60, 20]
    assert data.metadata["device_region_ns"] == {"cuda:0": 100}
    assert "Self CUDA %" in data.table()


def test_current_is_the_running_profiler_or_none():
    from gradtrace import profiler

    assert profiler.current() is None
    with profiler.profile() as prof:
        assert profiler.current() is prof
    assert profiler.current() is None


def test_call_sites_inside_reference_workloads_count_as_user_code():
    from gradtrace import profiler
    from gradtrace.autograd.models import make_workload

    work = make_workload("mlp", seed=0)
    with profiler.profile(with_stack=True) as prof:
        work.train_step()
    data = prof.profile_data
    stacks = ["\n".join(data.stack_of(i)) for i in set(data.event_columns["stack_id"].tolist())
              if i >= 0]
    assert any("models" in s for s in stacks), stacks[:3]


def test_a_read_profile_leaves_no_cyclic_garbage():
    """Once the profile is read, the recorded rows (and the backward nodes they hold) are freed
    by reference count: a row starts with its sink's end, the rows list's own ``extend``, so a
    dropped list was a cycle that left ~12 objects per op to a gen-2 collection (240k objects,
    85 ms after a 20k-op chain, landing in whatever ran next)."""
    import gc
    import weakref

    gc.collect()
    gc.disable()
    try:
        with profiler.profile(activities=["cpu"]) as prof:
            x = ag.full((4,), 0.5, requires_grad=True)
            y = x
            for _ in range(50):
                y = y * 1.5 + 0.25
            node = weakref.ref(y.grad_fn)
            y.sum().backward()
        assert prof.profile_data.n_events > 100
        del x, y
        assert node() is None                       # freed without a collection
    finally:
        gc.enable()
