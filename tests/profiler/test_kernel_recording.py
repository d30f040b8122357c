"""Kernel recording of gradtrace's own CUDA profiles (CUPTI through cupti-python), end to end.

Marked ``cuda``: on a GPU with cupti-python they run against CUPTI; in the stand-in run
(``GRADTRACE_FAKE_CUPY=1``, tests/test_gpu_stand_in.py) against tests/fakecupy's CuPy and
CUPTI, whose clock is offset and faster than the profile's, so kernels landing inside their
launching calls prove the clock alignment. Without cupti-python on a GPU they skip.
"""
from __future__ import annotations

import re
import threading

import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace import profiler
from gradtrace.autograd import nn, optim
from gradtrace.profiler import cupti_activity
from gradtrace.profiler.gpu import RUNTIME_CALL
from gradtrace.profiler.kernels import kernel_table, memcpy_table
from gradtrace.profiler.records import GpuKind, Scope
from tests.cli.conftest import run_cli


@pytest.fixture
def needs_cupti():
    reason = cupti_activity.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)


def _train_step_profile(**kwargs):
    model = nn.Sequential(nn.Linear(64, 128, device="cuda"), nn.ReLU(), nn.Linear(128, 10, device="cuda"))
    opt = optim.SGD(model.parameters(), lr=0.1)
    x = ag.randn(32, 64, device="cuda")
    with profiler.profile(activities=["cpu", "cuda"], **kwargs) as prof:
        for _ in range(2):
            loss = model(x).relu().sum()
            loss.backward()
            opt.step()
            opt.zero_grad()
            loss.item()                       # a device-to-host copy
            prof.step()
    return prof.profile_data


@pytest.mark.cuda
def test_a_training_step_gets_its_kernels_with_launch_arguments(needs_cupti):
    data = _train_step_profile(record_kernels=True)
    cols, g, a = data.event_columns, data.gpu_columns, data.analysis
    assert data.metadata["kernel_recording"] is True
    assert data.metadata["kernel_recording_counts"]["gpu_events_without_launch"] == 0
    kinds = set(g["kind"].tolist())
    assert GpuKind.KERNEL in kinds and GpuKind.MEMCPY in kinds
    kernels = g["event"][g["kind"] == GpuKind.KERNEL]
    assert (g["grid_x"][g["kind"] == GpuKind.KERNEL] > 0).all()
    assert (g["registers_per_thread"][g["kind"] == GpuKind.KERNEL] > 0).all()
    assert not np.isnan(g["occupancy_pct"][g["kind"] == GpuKind.KERNEL]).any()
    # No per-op CUDA events: only the activities have device intervals.
    has_dev = cols["device_start_ns"] >= 0
    assert set(np.flatnonzero(has_dev).tolist()) == set(g["event"].tolist())
    # Each activity sits, with zero CPU time, at the start of its launching runtime/driver call,
    # on the call's thread; the device interval starts after the launch started (the two clocks
    # aligned: CUPTI's is seconds apart from perf_counter's in the stand-in).
    parent = a.parent
    names = data.strings
    for ev in g["event"].tolist():
        call = parent[ev]
        assert call >= 0 and RUNTIME_CALL.match(names[cols["name_id"][call]])
        assert cols["start_ns"][ev] == cols["end_ns"][ev] == cols["start_ns"][call]
        assert cols["device_start_ns"][ev] >= cols["start_ns"][call] - 1_000
        assert data.metadata["start_time_ns"] <= cols["device_start_ns"][ev] <= data.metadata["end_time_ns"] + 10**9
    # The launching calls sit inside the ops that made them.
    ops = {parent[parent[ev]] for ev in kernels.tolist()}
    assert any(cols["scope"][op] == Scope.FUNCTION and names[cols["name_id"][op]] == "linear" or
               cols["scope"][op] == Scope.BACKWARD_FUNCTION for op in ops if op >= 0)
    # The invariants: Σ self CUDA = Σ kernel + memcpy + memset time, never above the wall clock;
    # every backward node still links to exactly one forward op.
    device_time = int((cols["device_end_ns"][g["event"]] - cols["device_start_ns"][g["event"]]).sum())
    assert int(a.self_cuda_ns.sum()) == device_time == int(a.cuda_total_ns[a.parent < 0].sum())
    assert device_time <= data.metadata["end_time_ns"] - data.metadata["start_time_ns"]
    assert a.unlinked_backward == 0
    backward = np.flatnonzero((cols["scope"] == Scope.BACKWARD_FUNCTION) & (cols["sequence_nr"] >= 0))
    assert len(backward) and (a.forward_event[backward] >= 0).all()


@pytest.mark.cuda
def test_gpu_summary_figures_are_numbers(needs_cupti):
    data = _train_step_profile(record_kernels=True)
    figures = data.gpu_summary()["devices"]["cuda:0"]
    assert isinstance(figures["sm_efficiency_pct"], float)
    assert isinstance(figures["achieved_occupancy_pct"], float)
    assert isinstance(figures["tensor_core_pct"], float)
    assert isinstance(figures["launch"]["launch_delay_us"]["mean"], float)
    assert figures["self_cuda_total_us"] > 0
    rows = kernel_table(data)
    assert rows and all(r.count >= 1 for r in rows)
    assert all(r.occupancy_pct is not None for r in rows if r.kind != "MEMORY")
    copies = memcpy_table(data)
    assert any(c["kind"] == "DtoH" and c["host_memory"] == "pageable" for c in copies)


@pytest.mark.cuda
def test_the_profile_saves_reloads_and_the_cli_lists_its_kernels(needs_cupti, tmp_path):
    data = _train_step_profile(record_kernels=True)
    path = tmp_path / "train.gtprof"
    data.save(path)
    loaded = profiler.load(path)
    for name, col in data.gpu_columns.items():
        np.testing.assert_array_equal(loaded.gpu_columns[name], col)
    assert loaded.metadata["kernel_recording"] is True
    res = run_cli("gpu", path, "--kernels")
    assert res.returncode == 0, res.stderr
    kernel_names = {r.name for r in kernel_table(loaded)}
    assert any(name.split("(")[0][:20] in res.stdout for name in kernel_names)
    assert "Memcpy" in res.stdout or "DtoH" in res.stdout
    assert "kernels were not recorded" not in res.stdout
    res = run_cli("gpu", path)
    assert res.returncode == 0 and "Est. achieved occupancy" in res.stdout


@pytest.mark.cuda
def test_record_kernels_false_keeps_per_op_cuda_events_and_says_why(tmp_path):
    data = _train_step_profile(record_kernels=False)
    assert data.metadata["kernel_recording"] is False
    assert data.metadata["kernel_recording_reason"] == "record_kernels=False"
    assert len(data.gpu_columns["event"]) == 0
    assert (data.event_columns["device_start_ns"] >= 0).any()
    path = tmp_path / "ops.gtprof"
    data.save(path)
    res = run_cli("gpu", path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("kernels were not recorded (record_kernels=False)") == 1


@pytest.mark.cuda
def test_a_graph_launch_gives_each_kernel_its_own_event(needs_cupti):
    from gradtrace.autograd import backend

    cp = backend._load_cupy()
    x = cp.ones(1024, dtype=np.float32)
    out = cp.zeros(1024, dtype=np.float32)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        y = cp.exp(x * 2.0 + 1.0)
        cp.multiply(y, 3.0, out=out)
        graph = stream.end_capture()
    with profiler.profile(activities=["cpu", "cuda"], record_kernels=True) as prof:
        with stream:
            graph.launch(stream)
        stream.synchronize()
    data = prof.profile_data
    cols, g = data.event_columns, data.gpu_columns
    launch = [i for i, n in enumerate(cols["name_id"].tolist()) if data.strings[n] == "cudaGraphLaunch"]
    assert len(launch) == 1
    mine = g["event"][g["correlation"] == np.bincount(g["correlation"]).argmax()]
    assert len(mine) >= 3                                           # one call, many kernels
    assert (cols["start_ns"][mine] == cols["start_ns"][launch[0]]).all()
    assert (data.analysis.parent[mine] == launch[0]).all()
    dur = cols["device_end_ns"][g["event"]] - cols["device_start_ns"][g["event"]]
    assert data.analysis.self_cuda_ns.sum() == dur.sum()


@pytest.mark.cuda
def test_api_calls_land_on_the_thread_that_made_them(needs_cupti):
    x = ag.randn(64, 64, device="cuda")
    done = []

    def work():
        done.append((x @ x).sum())

    with profiler.profile(activities=["cpu", "cuda"], record_kernels=True) as prof:
        (x + 1).sum()
        t = threading.Thread(target=work)
        t.start()
        t.join()
    data = prof.profile_data
    cols, g, a = data.event_columns, data.gpu_columns, data.analysis
    names = data.strings
    matmul = [i for i, n in enumerate(cols["name_id"].tolist()) if names[n] == "matmul"]
    add = [i for i, n in enumerate(cols["name_id"].tolist()) if names[n] == "add"]
    assert matmul and add and cols["thread_id"][matmul[0]] != cols["thread_id"][add[0]]
    for op in (matmul[0], add[0]):
        launched = [ev for ev in g["event"].tolist() if a.parent[a.parent[ev]] == op]
        assert launched, data.strings[cols["name_id"][op]]
        assert all(cols["thread_id"][ev] == cols["thread_id"][op] for ev in launched)


@pytest.mark.cuda
def test_without_cupti_python_nothing_changes_and_the_reason_is_kept(monkeypatch):
    monkeypatch.setattr(cupti_activity, "_loaded", {"module": None, "reason": cupti_activity.NOT_INSTALLED})
    data = _train_step_profile()
    assert data.metadata["kernel_recording"] is False
    assert data.metadata["kernel_recording_reason"] == cupti_activity.NOT_INSTALLED
    assert len(data.gpu_columns["event"]) == 0
    assert (data.event_columns["device_start_ns"] >= 0).any()          # the per-op CUDA events
    a = data.analysis
    assert a.self_cuda_ns.sum() == a.cuda_total_ns[a.parent < 0].sum()
    with pytest.raises(RuntimeError, match=r"record_kernels=True.*pip install 'gradtrace\[cuda12\]'"):
        _train_step_profile(record_kernels=True)


def _api_names(data):
    """The runtime and driver calls of a profile (``cudaX``, ``cuX``; not ``cupy_*`` kernels)."""
    names = data.strings
    return {names[i] for i in set(data.event_columns["name_id"].tolist()) if re.match(r"cu(da)?[A-Z]", names[i])}


@pytest.mark.cuda
def test_api_calls_kineto_leaves_out_are_not_recorded(needs_cupti):
    """cudaGetDevice (around every CuPy op: 572 of 851 records of a small step on an H200) and
    the driver calls that launch nothing are turned off in CUPTI for the session, and on again
    after it; the launches, copies and synchronizations stay."""
    data = _train_step_profile(record_kernels=True)
    counts = data.metadata["kernel_recording_counts"]
    cupti = cupti_activity.load_cupti()[0]
    if getattr(cupti, "_IS_FAKE", False):    # it refuses one id, as CUPTI 13.4 refuses some
        assert counts["api_records"] == "filtered (1 ids refused: cuptiError: ERROR_INVALID_PARAMETER (1))"
    else:   # where CUPTI refuses the switches, the profile leaves the calls out all the same
        assert counts["api_records"].startswith(("filtered", "all ("))
    names = _api_names(data)
    assert not names & set(cupti_activity.SKIPPED_RUNTIME)
    assert all(n.startswith(cupti_activity.KEPT_DRIVER) for n in names if not n.startswith("cuda"))
    assert "cuLaunchKernel" in names
    assert any(n.startswith(("cudaLaunch", "cuLaunch")) for n in names) and "cudaMemcpyAsync" in names
    if getattr(cupti, "_IS_FAKE", False):
        assert not cupti._api_off                   # the session turned them back on


@pytest.mark.cuda
def test_without_per_api_switches_the_profile_still_leaves_them_out(needs_cupti, monkeypatch):
    """An older CUPTI without cuptiActivityEnableRuntimeApi: every call is recorded, and the
    profile leaves the same ones out when it is built."""
    cupti = cupti_activity.load_cupti()[0]

    def missing(cbid, enable):
        raise AttributeError("cuptiActivityEnableRuntimeApi needs CUPTI 12.x")
    monkeypatch.setattr(cupti, "activity_enable_runtime_api", missing)
    monkeypatch.setattr(cupti, "activity_enable_driver_api", missing)
    data = _train_step_profile(record_kernels=True)
    assert data.metadata["kernel_recording_counts"]["api_records"].startswith("all (AttributeError")
    names = _api_names(data)
    assert not names & set(cupti_activity.SKIPPED_RUNTIME) and "cuCtxGetCurrent" not in names
