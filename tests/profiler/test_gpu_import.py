"""Device activities of torch traces: launch arguments kept as columns, exact device time
(CUDA-graph kernels each count once), device-aligned steps, and the format that stores them."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from gradtrace.profiler import fileformat, load
from gradtrace.profiler.records import GPU_COLUMNS, GpuKind, Scope
from gradtrace.profiler.validate import ProfileFormatError, validate_profile

from . import gpu_traces as gt
from . import kineto_samples as ks

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return gt.write_gpu_trace(tmp_path_factory.mktemp("gpu") / "trace.json")


@pytest.fixture(scope="module")
def data(trace):
    return load(trace)


def _device_ns(data) -> int:
    ev, g = data.event_columns, data.gpu_columns
    return int((ev["device_end_ns"][g["event"]] - ev["device_start_ns"][g["event"]]).sum())


def test_launch_arguments_are_columns(data):
    g = data.gpu_columns
    names = [data.name_of(e) for e in g["event"]]
    assert len(names) == 8
    assert names.count(gt.ELEMENTWISE) == 3 and names.count(gt.SGEMM) == 2
    k = names.index(gt.SGEMM)
    assert g["kind"][k] == GpuKind.KERNEL
    assert (g["grid_x"][k], g["grid_y"][k], g["grid_z"][k]) == (8, 4, 1)
    assert (g["block_x"][k], g["block_y"][k], g["block_z"][k]) == (256, 1, 1)
    assert g["registers_per_thread"][k] == 128 and g["shared_memory"][k] == 16384
    assert g["blocks_per_sm"][k] == 0.5 and g["warps_per_sm"][k] == 4.0 and g["occupancy_pct"][k] == 25
    assert g["context"][k] == 1 and g["correlation"][k] == 11 and g["bytes"][k] == -1
    assert np.isnan(g["bandwidth_gbps"][k])
    m = names.index(gt.MEMCPY)
    assert g["kind"][m] == GpuKind.MEMCPY and g["bytes"][m] == 1_000_000
    assert g["bandwidth_gbps"][m] == pytest.approx(200.0)
    assert np.isnan(g["blocks_per_sm"][m]) and g["grid_x"][m] == -1
    assert g["kind"][names.index(gt.MEMSET)] == GpuKind.MEMSET
    # Each activity's event carries its stream and device interval.
    ev = data.event_columns
    nccl = g["event"][names.index(gt.NCCL)]
    assert ev["stream"][nccl] == 20 and data.strings[ev["device_id"][nccl]] == "cuda:0"
    assert (ev["device_start_ns"][nccl], ev["device_end_ns"][nccl]) == (88_000, 98_000)


def test_graph_kernels_each_count_once(data):
    a = data.analysis
    assert int(a.self_cuda_ns.sum()) == gt.DEVICE_US * 1000 == _device_ns(data)
    assert int(a.cuda_total_ns[a.parent < 0].sum()) == gt.DEVICE_US * 1000
    is_gpu = np.zeros(data.n_events, bool)
    is_gpu[data.gpu_columns["event"]] = True
    # Device activities are leaves: none is another event's parent.
    assert not is_gpu[a.parent[a.parent >= 0]].any()
    launch = [i for i in range(data.n_events) if data.name_of(i) == "cudaGraphLaunch"][0]
    assert a.cuda_total_ns[launch] == sum(e - s for s, e in gt.GRAPH_KERNELS_US) * 1000
    kids = data.children_of(launch)
    assert sorted(a.self_cuda_ns[kids].tolist()) == sorted((e - s) * 1000 for s, e in gt.GRAPH_KERNELS_US)
    assert all(a.depth[k] == a.depth[launch] + 1 for k in kids)


def _all_traces():
    return sorted(DATA.glob("*.json*")) + ([ks.FIVE_STEPS] if ks.FIVE_STEPS.exists() else [])


@pytest.mark.parametrize("path", _all_traces(), ids=lambda p: p.name)
def test_self_cuda_equals_device_time_on_every_trace(path):
    data = load(path)
    a = data.analysis
    assert int(a.self_cuda_ns.sum()) == _device_ns(data)
    assert a.cuda_clock_skew == 0


def test_many_graph_kernels_at_one_instant(tmp_path):
    """A CUDA-graph replay of 2,000 kernels: all at the launch's start, none nested."""
    doc = gt.gpu_trace()
    ts = 200.0
    extra = [gt._x("cuda_runtime", "cudaGraphLaunch", 180, 2, correlation=99, **{"External id": 99})]
    for k in range(2000):
        extra.append(gt._x("kernel", f"k{k % 7}", ts, 0.5, device=True, correlation=99, **{"External id": 99}))
        ts += 0.5
    doc["traceEvents"] += extra
    path = tmp_path / "graph.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    data = load(path)
    a = data.analysis
    assert int(a.self_cuda_ns.sum()) == (gt.DEVICE_US + 1000) * 1000 == _device_ns(data)
    assert int(a.depth.max()) <= 4


def test_device_aligned_steps(data):
    us = [(s // 1000 - gt.BASE_NS // 1000 if s > 10**15 else s // 1000, e // 1000 if e < 10**15 else e // 1000)
          for _, s, e in data.step_ranges()]
    t0 = data.step_ranges(device_aligned=False)[0][1]
    aligned = [(s - t0, e - t0) for _, s, e in data.step_ranges()]
    host = [(s - t0, e - t0) for _, s, e in data.step_ranges(device_aligned=False)]
    assert host == [(s * 1000, e * 1000) for s, e in gt.HOST_STEPS_US]
    assert aligned == [(s * 1000, e * 1000) for s, e in gt.ALIGNED_STEPS_US]
    assert len(us) == 2


@pytest.mark.parametrize("path", [ks.GPU_1STEP] + ([ks.FIVE_STEPS] if ks.FIVE_STEPS.exists() else []),
                         ids=lambda p: p.name)
def test_aligned_steps_never_overlap_and_cover_host_ranges(path):
    """On a real trace (the generated one above has two steps; the one-step cut keeps its
    device tail; the five-step original, where ../shared has it, all five)."""
    data = load(path)
    aligned, host = data.step_ranges(), data.step_ranges(device_aligned=False)
    assert len(aligned) == len(host) == (1 if path == ks.GPU_1STEP else 5)
    for (_, s, e), (_, hs, he) in zip(aligned, host):
        assert s >= hs and e >= he
    assert all(a[2] <= b[1] for a, b in zip(aligned, aligned[1:]))
    # The last step keeps the GPU work that ran after its host range.
    assert aligned[-1][2] > host[-1][2]


def test_gpu_table_round_trips(data, tmp_path):
    path = tmp_path / "p.gtprof"
    data.save(path)
    back = load(path)
    for name in GPU_COLUMNS:
        np.testing.assert_array_equal(back.gpu_columns[name], data.gpu_columns[name])
    assert int(back.analysis.self_cuda_ns.sum()) == gt.DEVICE_US * 1000


def test_schema_3_files_still_load(data, tmp_path, monkeypatch):
    """A file written before the gpu table (schema 3) loads with an empty one."""
    monkeypatch.setattr(fileformat, "SCHEMA_VERSION", 3)
    monkeypatch.setattr(fileformat, "_TABLES", {k: v for k, v in fileformat._TABLES.items() if k != "gpu"})
    path = tmp_path / "old.gtprof"
    try:
        fileformat.save(data, path)
    finally:
        monkeypatch.undo()
    old = load(path)
    assert len(old.gpu_columns["event"]) == 0 and old.n_events == data.n_events


@pytest.mark.parametrize("change, problem", [
    (lambda g: g["event"].__setitem__(slice(None), g["event"][::-1]), "out of order"),
    (lambda g: g["kind"].__setitem__(0, 9), "unknown kind"),
    (lambda g: g["blocks_per_sm"].__setitem__(0, -1.0), "blocks_per_sm is out of range"),
    (lambda g: g["registers_per_thread"].__setitem__(0, -7), "registers_per_thread is out of range"),
])
@pytest.mark.parametrize("window_rows", [None, 16, 1])
def test_hostile_gpu_tables_are_refused(data, change, problem, window_rows):
    """Checked whole or in row windows (a mapped file's; an eighth of the event windows, at
    least one row): the same refusals, an order broken across a window's edge included."""
    gpu = {k: v.copy() for k, v in data.gpu_columns.items()}
    change(gpu)
    with pytest.raises(ProfileFormatError, match=problem):
        validate_profile("x.gtprof", data.event_columns, data.memory_columns, data.strings, data.metadata,
                         gpu=gpu, window_rows=window_rows)


@pytest.mark.parametrize("window_rows", [None, 16, 1])
def test_a_repeat_across_a_window_edge_is_refused(data, window_rows):
    gpu = {k: v.copy() for k, v in data.gpu_columns.items()}
    gpu["event"][2] = gpu["event"][1]          # rows 1 and 2: one window apart when windows are 1 row
    with pytest.raises(ProfileFormatError, match="out of order"):
        validate_profile("x.gtprof", data.event_columns, data.memory_columns, data.strings, data.metadata,
                         gpu=gpu, window_rows=window_rows)


def test_activity_event_must_be_a_zero_length_device_event(data):
    gpu = {k: v.copy() for k, v in data.gpu_columns.items()}
    host_op = int(np.flatnonzero(data.event_columns["scope"] == Scope.USER_SCOPE)[0])
    gpu["event"][0] = host_op
    gpu = {k: v[np.argsort(gpu["event"])] for k, v in gpu.items()}
    with pytest.raises(ProfileFormatError, match="zero-length"):
        validate_profile("x.gtprof", data.event_columns, data.memory_columns, data.strings, data.metadata,
                         gpu=gpu)
