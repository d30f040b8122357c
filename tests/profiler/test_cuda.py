"""Device timing on a GPU (skipped by tests/conftest.py when no CUDA GPU is usable).

The tests of the per-op CUDA event pairs ask for ``record_kernels=False``: with kernel
recording (CUPTI, where cupti-python imports) the device time is the kernels' instead
(tests/profiler/test_kernel_recording.py)."""
import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace import profiler
from gradtrace.autograd import backend


@pytest.mark.cuda
def test_self_cuda_time_matches_event_timed_wall_clock(monkeypatch):
    n = 4096
    a = ag.randn(n, n, device="cuda")
    b = ag.randn(n, n, device="cuda")
    for _ in range(3):                       # warm-up: cuBLAS handles, memory pool
        a @ b
    backend.synchronize("cuda")
    syncs = []
    real_sync = backend.synchronize
    monkeypatch.setattr(backend, "synchronize", lambda *args: (syncs.append(args), real_sync(*args))[1])
    stream = backend.current_stream("cuda")
    with profiler.profile(activities=["cpu", "cuda"], record_kernels=False) as prof:
        begin = backend.Event("cuda").record(stream)
        for _ in range(20):
            a @ b
        end = backend.Event("cuda").record(stream)
    assert len(syncs) == 1                    # one synchronize at stop, none per op
    end.synchronize()
    wall_ns = backend.elapsed_ns(begin, end)
    data = prof.profile_data
    a_ = data.analysis
    assert data.has_device_time
    matmul = data.event_columns["name_id"] == data.strings.index("matmul")
    assert (data.event_columns["device_start_ns"][matmul] >= 0).all()
    total_self_cuda = int(a_.self_cuda_ns.sum())
    assert total_self_cuda == int(a_.cuda_total_ns[a_.parent < 0].sum())
    assert total_self_cuda <= wall_ns
    assert total_self_cuda >= 0.9 * wall_ns
    assert a_.cuda_clock_skew == 0
    text = prof.table(sort_by="self_cuda_time_total")
    assert "Self CUDA %" in text and "Self CUDA time total" in text
    row = {r.key: r for r in prof.key_averages()}["matmul"]
    assert row.count == 20 and row.self_cuda_time_total == pytest.approx(total_self_cuda / 1e3, rel=1e-6)


@pytest.mark.cuda
def test_cuda_backward_and_memory():
    x = ag.randn(512, 512, device="cuda", requires_grad=True)
    w = ag.randn(512, 512, device="cuda", requires_grad=True)
    with profiler.profile(activities=["cpu", "cuda"], profile_memory=True, record_kernels=False) as prof:
        ((x @ w).relu().sum()).backward()
    data = prof.profile_data
    a = data.analysis
    assert a.self_cuda_ns.sum() == a.cuda_total_ns[a.parent < 0].sum()
    bwd = data.event_columns["scope"] == profiler.Scope.BACKWARD_FUNCTION
    assert (data.event_columns["device_start_ns"][bwd] >= 0).any()
    assert data.has_cuda_memory
    mem = data.memory_columns
    cuda = np.array([data.strings[d].startswith("cuda") for d in mem["device_id"]])
    assert (mem["bytes"][cuda] > 0).any()


@pytest.mark.cuda
def test_optimizer_step_gets_the_cuda_time_of_its_update():
    from gradtrace.autograd import nn, optim

    model = nn.Linear(256, 256, device="cuda")
    opt = optim.Adam(model.parameters(), lr=1e-3)
    model(ag.randn(64, 256, device="cuda")).sum().backward()
    with profiler.profile(activities=["cpu", "cuda"], record_kernels=False) as prof:
        opt.step()
    rows = {r.key: r for r in prof.key_averages()}
    step = rows["Optimizer.step#Adam.step"]
    # The update is array code, not ops: without the range's own events it had no CUDA time.
    assert step.self_cuda_time_total > 0
    a = prof.profile_data.analysis
    assert a.self_cuda_ns.sum() == a.cuda_total_ns[a.parent < 0].sum()


def test_record_function_with_a_cpu_device_is_a_plain_range():
    with profiler.profile(activities=["cpu"]) as prof:
        with profiler.record_function("load", device="cpu"):
            ag.ones(3) + 1.0
    rows = {r.key: r for r in prof.key_averages()}
    assert rows["load"].count == 1 and rows["load"].self_cuda_time_total == 0


@pytest.mark.cuda
def test_cuda_memory_kinds_of_an_adam_step():
    """On the GPU too, parameters, gradients, optimizer state and activations get their kind
    (the pool's pointer is the allocation's address)."""
    from gradtrace.autograd import nn, optim
    from gradtrace.profiler.memory import kind_summary
    from gradtrace.profiler.records import MemoryCategory as K

    with profiler.profile(activities=["cpu", "cuda"], profile_memory=True) as prof:
        model = nn.Sequential(nn.Linear(64, 64, device="cuda"), nn.ReLU(), nn.Linear(64, 8, device="cuda"))
        opt = optim.Adam(model.parameters(), lr=1e-3)
        model(ag.randn(32, 64, device="cuda")).relu().sum().backward()
        opt.step()
    data = prof.profile_data
    cuda = next(d for d in set(data.memory_columns["device_id"].tolist()) if data.strings[d].startswith("cuda"))
    rows, _ = kind_summary(data.memory_columns, data.memory_kinds, cuda)
    by = {r.kind: r for r in rows}
    params = sum(p.data.nbytes for p in model.parameters())
    # The pool rounds sizes up (512-byte blocks): at least the tensors' bytes, never less.
    assert by[K.PARAMETER].max_live >= params
    assert by[K.GRADIENT].max_live >= params
    assert by[K.OPTIMIZER_STATE].max_live >= 2 * params
    assert by[K.ACTIVATION].allocated > 0


@pytest.mark.cuda
def test_gpu_storage_freed_between_profiles_is_not_live_in_the_next():
    """Once a memory-tracking profile ends, the pool's frees go unseen: storage made under it
    and freed afterwards must not appear among the next profile's starting allocations (it did:
    a CPU-only profile listed 37 phantom CUDA allocations from an earlier GPU test)."""
    with profiler.profile(activities=["cpu", "cuda"], profile_memory=True):
        x = ag.randn(256, 256, device="cuda")
    del x
    with profiler.profile(activities=["cpu"], profile_memory=True) as prof:
        ag.randn(4, 4).sum()
    data = prof.profile_data
    devices = {data.strings[d] for d in set(data.memory_columns["device_id"].tolist())}
    assert devices == {"cpu"}
