"""GPU analyses (profiler/gpu.py, kernels.py, advice.py) on the hand-built trace of
``gpu_traces.py``, whose every figure is worked out here by hand, on small variants of it, on a
gradtrace profile's op-level kernels, and invariants on every sample trace."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradtrace.profiler import load
from gradtrace.profiler import gpu as G
from gradtrace.profiler.kernels import (collective_table, kernel_table, memcpy_kind, memcpy_table, nccl_algorithm,
                                        readable_kernel_name, short_kernel_names)
from gradtrace.profiler.synthetic import from_events

from . import gpu_traces as gt
from . import kineto_samples as ks



def _load(tmp_path, doc, name="trace.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return load(path)


@pytest.fixture(scope="module")
def summary(tmp_path_factory):
    return load(gt.write_gpu_trace(tmp_path_factory.mktemp("gpu") / "trace.json")).gpu_summary()


@pytest.fixture(scope="module")
def dev(summary):
    return summary["devices"]["cuda:0"]


# Device activity of the fixture (us), from its docstring: kernels sgemm [20, 50], the graph's
# three [70, 90], NCCL [88, 98] (stream 20), sgemm [110, 170]; memcpy [55, 60], memset [60, 62].
# Steps, device-aligned: [0, 100] and [100, 170]; "steps time" = 170.

def test_tb_gpu_utilization(dev):
    # Union of kernels: [20, 50] + [70, 98] + [110, 170] = 30 + 28 + 60 over 170.
    assert dev["gpu_utilization_pct"] == pytest.approx(100 * (30 + 28 + 60) / 170)      # 69.41%
    step1, step2 = dev["steps"]
    assert step1["gpu_utilization_pct"] == pytest.approx(58.0)                           # 30 + 28 of 100
    assert step2["gpu_utilization_pct"] == pytest.approx(100 * 60 / 70)


def test_tb_sm_efficiency(dev):
    # Blocks per SM summed over the kernels running, clamped at 1: sgemm 0.5 for 30 us, the graph
    # kernels 2 -> 1 for 20 us (NCCL's 0.0185 beside k3 is clamped away), NCCL alone 0.0185 for
    # 8 us, sgemm 0.5 for 60 us.
    step1 = 0.5 * 30 + 1 * 20 + 0.0185 * 8
    assert dev["sm_efficiency_pct"] == pytest.approx(100 * (step1 + 0.5 * 60) / 170, rel=1e-6)
    assert dev["steps"][0]["sm_efficiency_pct"] == pytest.approx(step1, rel=1e-6)
    assert dev["steps"][1]["sm_efficiency_pct"] == pytest.approx(100 * 30 / 70)


def test_tb_achieved_occupancy(dev):
    # Weighted by kernel time: 25% x 30, 50% x 20, 3% x 10, 25% x 60.
    assert dev["achieved_occupancy_pct"] == pytest.approx((25 * 30 + 50 * 20 + 3 * 10 + 25 * 60) / 120)
    assert dev["steps"][0]["achieved_occupancy_pct"] == pytest.approx((25 * 30 + 50 * 20 + 3 * 10) / 60)
    assert dev["steps"][1]["achieved_occupancy_pct"] == pytest.approx(25.0)


def test_tb_tensor_cores(tmp_path, dev):
    assert dev["tensor_core_pct"] == 0.0          # ampere_sgemm_128x64_tn is not on TB's allow-list
    doc = gt.gpu_trace()
    for e in doc["traceEvents"]:
        if e["name"] == gt.SGEMM:
            e["name"] = "ampere_s16816gemm_fp16_128x64_tn"     # contains "16816"
    tc = _load(tmp_path, doc).gpu_summary()["devices"]["cuda:0"]
    assert tc["tensor_core_pct"] == pytest.approx(100 * (30 + 60) / 120)
    assert tc["steps"][1]["tensor_core_pct"] == pytest.approx(100.0)


def test_hta_temporal_breakdown(dev):
    t = dev["temporal"]
    # Compute: [20, 50] + [70, 90] + [110, 170]; non-compute: memcpy 5 + memset 2 + NCCL alone 8;
    # idle: the rest of the 170 us.
    assert (t["compute_us"], t["non_compute_us"], t["idle_us"]) == (110.0, 15.0, 45.0)
    s1, s2 = (s["temporal"] for s in dev["steps"])
    assert (s1["compute_us"], s1["non_compute_us"], s1["idle_us"]) == (50.0, 15.0, 35.0)
    assert (s2["compute_us"], s2["non_compute_us"], s2["idle_us"]) == (60.0, 0.0, 10.0)


def test_hta_idle_breakdown(dev):
    # Stream 7: memcpy 5 us after sgemm (launched at 36 < 50: kernel wait), memset 0, graph 8 us
    # after the memset (launch 60 < 62: kernel wait), then sgemm 20 us after the graph, launched
    # at 106 > 90: host wait. Stream 20 has one kernel: no gap.
    assert dev["idle_breakdown"] == {"host_wait_us": 20.0, "kernel_wait_us": 13.0, "other_us": 0.0}
    assert dev["steps"][0]["idle_breakdown"]["kernel_wait_us"] == 13.0
    assert dev["steps"][1]["idle_breakdown"]["host_wait_us"] == 20.0


def test_hta_overlap_and_self_cuda(dev):
    assert dev["comm_comp_overlap_pct"] == pytest.approx(20.0)     # [88, 90] of [88, 98]
    assert (dev["communication_us"], dev["exposed_communication_us"]) == (10.0, 8.0)
    assert dev["self_cuda_total_us"] == gt.DEVICE_US
    assert [s["self_cuda_total_us"] for s in dev["steps"]] == [67.0, 60.0]
    assert dev["steps"][1]["comm_comp_overlap_pct"] is None        # no communication in step 2


def test_tb_step_breakdown(dev):
    # Step 1 (100 us): kernel 50, memcpy 5, memset 2, NCCL alone 8; runtime calls outside device
    # work: [12, 16] + [62, 64] + [98, 99] = 7; CPU exec: aten::mm's [10, 12] + [16, 20] = 6;
    # other 22. Step 2 (70 us): kernel 60, runtime [106, 108] 2, aten::mm [105, 106] + [108, 110] 3.
    assert dev["steps"][0]["step_breakdown_us"] == {"kernel": 50.0, "memcpy": 5.0, "memset": 2.0,
                                                    "communication": 8.0, "runtime": 7.0, "dataloader": 0.0,
                                                    "cpu_exec": 6.0, "other": 22.0}
    assert dev["steps"][1]["step_breakdown_us"] == {"kernel": 60.0, "memcpy": 0.0, "memset": 0.0,
                                                    "communication": 0.0, "runtime": 2.0, "dataloader": 0.0,
                                                    "cpu_exec": 3.0, "other": 5.0}
    assert sum(dev["step_breakdown_us"].values()) == 170.0


def test_tb_step_breakdown_dataloader(tmp_path):
    doc = gt.gpu_trace()
    # [1, 9] and [12, 18]: the second is under the runtime call [12, 16] (higher), so 8 + 2.
    for ts in (1, 12):
        doc["traceEvents"].append(gt._x("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                                        ts, 8 if ts == 1 else 6))
    dev = _load(tmp_path, doc).gpu_summary()["devices"]["cuda:0"]
    parts = dev["steps"][0]["step_breakdown_us"]
    assert (parts["dataloader"], parts["runtime"], parts["cpu_exec"], parts["other"]) == (10.0, 7.0, 4.0, 14.0)


def test_hta_launches_and_queue(dev):
    launch = dev["launch"]
    # cudaLaunchKernel/MemcpyAsync/MemsetAsync only (the graph launch is left out, as in HTA):
    # delays 20-16, 55-40, 60-48, 88-83, 110-108.
    assert launch["launched"] == 5
    assert launch["launch_delay_us"]["mean"] == pytest.approx((4 + 15 + 12 + 5 + 2) / 5)
    assert launch["launch_delay_us"]["max"] == 15.0
    assert launch["short_kernels"] == 0
    assert dev["queue_length"] == {"7": {"max": 2, "mean": pytest.approx(0.75)},
                                   "20": {"max": 1, "mean": pytest.approx(0.5)}}


def test_launch_found_under_a_zero_length_call(tmp_path):
    """A zero-length runtime call at the launch's instant (cudaPeekAtLastError inside
    cudaMemcpyAsync, as real traces have) does not hide the launch from the memcpy."""
    doc = gt.gpu_trace()
    doc["traceEvents"].append(gt._x("cuda_runtime", "cudaPeekAtLastError", 36, 0, correlation=99))
    dev = _load(tmp_path, doc).gpu_summary()["devices"]["cuda:0"]
    assert dev["launch"]["launched"] == 5 and dev["launch"]["launch_delay_us"]["max"] == 15.0   # 55 - 40


def test_undefined_figures_are_null(tmp_path):
    doc = gt.gpu_trace()
    for e in doc["traceEvents"]:
        for key in ("blocks per SM", "est. achieved occupancy %"):
            e.get("args", {}).pop(key, None)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e["name"] not in (gt.NCCL, "nccl:all_reduce")]
    dev = _load(tmp_path, doc).gpu_summary()["devices"]["cuda:0"]
    for key in ("sm_efficiency_pct", "achieved_occupancy_pct", "comm_comp_overlap_pct", "communication_us",
                "exposed_communication_us"):
        assert dev[key] is None, key
        assert all(s[key] is None for s in dev["steps"]), key
    assert dev["gpu_utilization_pct"] is not None


def test_a_step_without_kernels(tmp_path):
    doc = gt.gpu_trace()
    doc["traceEvents"].append(gt._x("user_annotation", "ProfilerStep#3", 200, 20))
    dev = _load(tmp_path, doc).gpu_summary()["devices"]["cuda:0"]
    step3 = dev["steps"][2]
    assert step3["gpu_utilization_pct"] == 0.0            # defined: nothing ran
    assert step3["sm_efficiency_pct"] is None             # TB: no kernel with blocks per SM in it
    assert step3["achieved_occupancy_pct"] is None
    assert step3["temporal"]["idle_us"] == 20.0


def test_gradtrace_profile_op_level_kernels():
    """A gradtrace profile: an op whose device interval contains others is no kernel; no
    launch arguments, so occupancy, SM efficiency and Tensor Cores are null."""
    ev = [dict(name="ProfilerStep#1", start=0, end=100_000, scope=2),
          dict(name="aten::linear", start=10_000, end=40_000, device="cuda:0", stream=7,
               device_start=20_000, device_end=60_000),
          dict(name="aten::mm", start=11_000, end=20_000, device="cuda:0", stream=7,
               device_start=20_000, device_end=50_000),
          dict(name="aten::add", start=21_000, end=30_000, device="cuda:0", stream=7,
               device_start=50_000, device_end=60_000),
          dict(name="nccl:all_reduce", start=50_000, end=60_000, device="cuda:0", stream=9,
               device_start=55_000, device_end=75_000)]
    data = from_events(ev)
    work = G.device_work(data)["cuda:0"]
    assert sorted(data.name_of(e) for e in work.event) == ["aten::add", "aten::mm", "nccl:all_reduce"]
    dev = data.gpu_summary()["devices"]["cuda:0"]
    assert dev["gpu_utilization_pct"] == pytest.approx(55.0)       # [20, 75] of [0, 100]
    for key in ("sm_efficiency_pct", "achieved_occupancy_pct", "tensor_core_pct"):
        assert dev[key] is None, key
    assert dev["temporal"] == {"compute_us": 40.0, "non_compute_us": 15.0, "idle_us": 45.0}
    assert dev["comm_comp_overlap_pct"] == pytest.approx(25.0)      # [55, 60] of [55, 75]
    assert dev["launch"] is None                                    # no runtime calls recorded


def test_cpu_only_profile_has_no_devices():
    data = from_events([dict(name="aten::add", start=0, end=10)])
    summary = data.gpu_summary()
    assert summary["devices"] == {} and summary["recommendations"] == []


def test_utilization_series(tmp_path):
    data = load(gt.write_gpu_trace(tmp_path / "t.json"))
    series = G.utilization_series(data, "cuda:0")
    # The profile spans [0, 170] us: buckets of 10 us (at most 100 buckets), 17 of them.
    assert series["bucket_us"] == 10.0 and len(series["utilization_pct"]) == 17
    assert series["utilization_pct"][2] == 100.0 and series["utilization_pct"][0] == 0.0   # [20, 30], [0, 10]
    assert series["utilization_pct"][8] == 100.0 and series["utilization_pct"][9] == 80.0  # [80, 90], [90, 100]
    busy = (series["utilization_pct"] * (series["end_ns"] - series["start_ns"])).sum() / 100
    assert busy == pytest.approx(118_000)


def test_recommendations_carry_their_figure(summary):
    rules = {r["rule"]: r for r in summary["recommendations"]}
    # aten::mm's sgemm kernels (90 of the 110 us of non-NCCL kernels) are off Tensor Cores.
    assert rules["off_tensor_cores"]["value"] == pytest.approx(100 * 90 / 110)
    assert rules["pageable_copies"]["value"] == pytest.approx(100 * 5 / 170)
    for r in summary["recommendations"]:
        assert set(r) >= {"rule", "figure", "value", "threshold", "advice"}
    assert "low_gpu_utilization" not in rules                       # 69% >= 50%


def test_recommendation_rules_fire(tmp_path):
    doc = gt.gpu_trace()
    doc["traceEvents"].append(gt._x("cpu_op", "aten::item", 121, 28))
    doc["deviceProperties"][0]["totalGlobalMem"] = 1000
    doc["traceEvents"].append({"ph": "i", "s": "t", "name": "[memory]", **gt.HOST, "ts": 30,
                               "args": {"Addr": 1, "Bytes": 950, "Total Allocated": 950, "Total Reserved": 1024,
                                        "Device Type": 1, "Device Id": 0}})
    rules = {r["rule"]: r for r in _load(tmp_path, doc).gpu_summary()["recommendations"]}
    # cudaDeviceSynchronize [92, 99] and aten::item [121, 149] of the 170 us of steps.
    assert rules["synchronization"]["value"] == pytest.approx(100 * (7 + 28) / 170)
    assert rules["peak_memory"]["value"] == pytest.approx(95.0) and rules["peak_memory"]["device"] == "cuda:0"


# ---------------------------------------------------------------- the kernel view

def test_kernel_table(tmp_path):
    data = load(gt.write_gpu_trace(tmp_path / "t.json"))
    rows = kernel_table(data)
    sgemm = next(r for r in rows if r.name == gt.SGEMM)
    assert (sgemm.count, sgemm.kernel_time_total, sgemm.kernel_time_min, sgemm.kernel_time_max) == (2, 90.0, 30.0, 60.0)
    assert sgemm.kernel_time_std == pytest.approx(np.std([30, 60], ddof=1))
    assert sgemm.occupancy_pct == 25.0 and sgemm.blocks_per_sm == 0.5
    assert sgemm.tensor_cores is False and sgemm.kind == "COMPUTATION"
    assert rows[0].name == gt.SGEMM                                  # heaviest first
    kinds = {r.name: r.kind for r in rows}
    assert kinds[gt.NCCL] == "COMMUNICATION" and kinds[gt.MEMCPY] == "MEMORY"
    assert next(r for r in rows if r.name == gt.MEMCPY).tensor_cores is None
    by_op = kernel_table(data, by_op=True, by_launch=True)
    mm = [r for r in by_op if r.name == gt.SGEMM]
    assert len(mm) == 1 and mm[0].op == "aten::mm" and (mm[0].grid, mm[0].block) == ("8,4,1", "256,1,1")
    graph = next(r for r in by_op if r.name == gt.ELEMENTWISE)
    assert graph.op is None and graph.count == 3                     # a graph launch has no op
    assert sum(r.kernel_time_total for r in rows) == gt.DEVICE_US


def test_memcpy_and_collective_tables(tmp_path):
    data = load(gt.write_gpu_trace(tmp_path / "t.json"))
    copies = {(m["kind"], m["host_memory"]): m for m in memcpy_table(data)}
    htod = copies[("HtoD", "pageable")]
    assert (htod["count"], htod["bytes"], htod["time_total_us"]) == (1, 1_000_000, 5.0)
    assert htod["bandwidth_gbps"] == pytest.approx(1_000_000 / 5_000)   # bytes per ns = GB/s
    assert copies[("Memset", None)]["bytes"] == 4096
    (nccl,) = collective_table(data)
    assert (nccl["collective"], nccl["algorithm"], nccl["protocol"]) == ("AllReduce", "RING", "LL")
    assert nccl["count"] == 1 and nccl["latency_avg_us"] == 10.0
    assert nccl["bytes"] is None and nccl["bus_bandwidth_gbps"] is None    # the op recorded no shapes


def test_memcpy_kind_and_algorithm_names():
    assert memcpy_kind("Memcpy HtoD (Pageable -> Device)") == ("HtoD", "pageable")
    assert memcpy_kind("Memcpy DtoH (Device -> Pinned)") == ("DtoH", "pinned")
    assert memcpy_kind("Memcpy DtoD (Device -> Device)") == ("DtoD", None)
    assert memcpy_kind("Memset (Device)") == ("Memset", None)
    assert nccl_algorithm("ncclDevKernel_AllGather_RING_LL128(ncclDevComm*)") == ("RING", "LL128")
    assert nccl_algorithm("ncclDevKernel_AllReduce_Sum_bf16_TREE_SIMPLE(x)") == ("TREE", "SIMPLE")
    assert nccl_algorithm("ncclDevKernel_Generic(x)") == (None, None)


# ---------------------------------------------------------------- readable names

@pytest.mark.parametrize("name, readable", [
    (gt.SGEMM, "ampere_sgemm_128x64_tn"),
    (gt.ELEMENTWISE, "at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
                     "at::detail::Array<char*, 3> >"),
    ("void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int, float const*)",
     "at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>"),
    ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::direct_copy_kernel_cuda"
     "(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, "
     "float const&)::{lambda(int)#1}>(int, at::native::foo)",
     "at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::direct_copy_kernel_cuda"
     "(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, "
     "float const&)::{lambda(int)#1}>"),
    ("Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD (Pageable -> Device)"),
    ("triton__0d1d2d3d", "triton__0d1d2d3d"),
    ("void bn_bw_1C11_kernel_new<float, float, float2, 128, false, 1>(float const*, float*)",
     "bn_bw_1C11_kernel_new<float, float, float2, 128, false, 1>"),
])
def test_readable_kernel_name(name, readable):
    assert readable_kernel_name(name) == readable


def test_short_names_keep_template_arguments_apart():
    names = ["void bn_bw_1C11_kernel_new<float, float, float2, 128, false, 1>(float const*, float*, int)",
             "void bn_bw_1C11_kernel_new<float, float, float2, 32, false, 1>(float const*, float*, int)"]
    for width in (20, 30, 40):
        labels = short_kernel_names(names, width)
        assert labels[0] != labels[1] and all(len(s) <= width for s in labels)


def test_top_kernels_distinct_at_100_columns():
    from gradtrace.cli.gpu import kernel_name_width

    data = load(ks.GPU_1STEP)
    rows = kernel_table(data)[:10]
    width = kernel_name_width(rows, width=100)
    assert width >= 20
    for plain in (False, True):
        labels = short_kernel_names([r.name for r in rows], width, plain)
        assert len(set(labels)) == 10 and all(len(s) <= width for s in labels)


# ---------------------------------------------------------------- invariants on every trace

@pytest.mark.parametrize("path", ["fixture", *ks.gpu_traces()], ids=lambda p: getattr(p, "name", p))
def test_invariants(path, tmp_path):
    data = load(gt.write_gpu_trace(tmp_path / "t.json") if path == "fixture" else path)
    summary = data.gpu_summary()
    json.dumps(summary)                                              # JSON-able as it is
    for dev in summary["devices"].values():
        windows = [(summary["steps_us"], dev)] + [(s["step_us"], s) for s in dev["steps"]]
        for length, fig in windows:
            for key in ("gpu_utilization_pct", "sm_efficiency_pct", "achieved_occupancy_pct", "tensor_core_pct",
                        "comm_comp_overlap_pct"):
                assert fig[key] is None or 0.0 <= fig[key] <= 100.0 + 1e-9, key
            t = fig["temporal"]
            assert min(t.values()) >= 0
            assert sum(t.values()) == pytest.approx(length, abs=1e-6)
        for step in dev["steps"]:
            parts = step["step_breakdown_us"]
            assert min(parts.values()) >= -1e-9
            assert sum(parts.values()) == pytest.approx(step["step_us"], abs=1e-6)
        assert sum(dev["step_breakdown_us"].values()) == pytest.approx(sum(s["step_us"] for s in dev["steps"]))
    if data.gpu_columns["event"].size:
        # Σ self CUDA of the device's events = Σ kernel + memcpy + memset time, all inside the steps here.
        total = sum(d["self_cuda_total_us"] for d in summary["devices"].values())
        ev = data.event_columns
        g = data.gpu_columns["event"]
        inside = ev["device_start_ns"][g] < data.step_ranges()[-1][2] if data.step_ranges() else slice(None)
        assert total == pytest.approx(float((ev["device_end_ns"][g] - ev["device_start_ns"][g])[inside].sum()) / 1000)


def test_tensor_cores_undefined_off_nvidia(tmp_path):
    """TB's allow-list names NVIDIA kernels: on an AMD device the share is undefined."""
    doc = gt.gpu_trace()
    doc["deviceProperties"][0]["name"] = "AMD Instinct MI250X"
    summary = _load(tmp_path, doc).gpu_summary()
    assert summary["devices"]["cuda:0"]["tensor_core_pct"] is None
    assert "off_tensor_cores" not in {r["rule"] for r in summary["recommendations"]}


def test_kernel_view_of_a_gradtrace_profile():
    """Op-level kernels have no launch arguments: no grid, block, occupancy or Tensor Cores."""
    data = from_events([dict(name="ProfilerStep#1", start=0, end=100_000, scope=2),
                        dict(name="aten::mm", start=1_000, end=5_000, device="cuda:0", stream=7,
                             device_start=2_000, device_end=9_000)])
    (row,) = kernel_table(data, by_op=True, by_launch=True)
    assert (row.name, row.op, row.grid, row.block, row.count) == ("aten::mm", "aten::mm", None, None, 1)
    assert row.kernel_time_total == 7.0 and row.occupancy_pct is None and row.tensor_cores is None
    assert memcpy_table(data) == [] and collective_table(data) == []


def test_mutated_profiles_analyse_or_are_rejected(tmp_path):
    """Every profile that loads (fuzzing.py's mutants of gradtrace profiles and of imported GPU
    traces) gets its GPU figures and tables, JSON-able with no NaN."""
    import random

    from gradtrace.profiler import ProfileFormatError

    from .fuzzing import mutate, seed_files

    seeds = seed_files(tmp_path)
    for i, data in enumerate([load(gt.write_gpu_trace(tmp_path / "t.json")), _variant_without_args(tmp_path)]):
        data.save(tmp_path / f"gpu{i}.gtprof")
        seeds.append((tmp_path / f"gpu{i}.gtprof").read_bytes())
    rng = random.Random(27)
    loaded = 0
    for i in range(300):
        _, blob = mutate(rng, seeds)
        path = tmp_path / f"m{i}.gtprof"
        path.write_bytes(blob)
        try:
            data = load(path)
        except ProfileFormatError:
            continue
        loaded += 1
        json.dumps(data.gpu_summary(), allow_nan=False)
        json.dumps([vars(r) for r in kernel_table(data, by_op=True, by_launch=True)], allow_nan=False)
        json.dumps([memcpy_table(data), collective_table(data)], allow_nan=False)
        for dev in G.device_work(data):
            G.utilization_series(data, dev), G.launch_stats(data, dev), G.queue_length(data, dev)
    assert loaded > 10


def _variant_without_args(tmp_path):
    doc = gt.gpu_trace()
    for e in doc["traceEvents"]:
        for key in ("blocks per SM", "est. achieved occupancy %", "grid", "block"):
            e.get("args", {}).pop(key, None)
    return _load(tmp_path, doc, "noargs.json")


def test_two_devices(tmp_path):
    doc = gt.gpu_trace()
    for e in doc["traceEvents"]:
        if e["name"] == gt.NCCL:
            e["pid"], e["args"]["device"] = 1, 1
    devices = _load(tmp_path, doc).gpu_summary()["devices"]
    assert list(devices) == ["cuda:0", "cuda:1"]
    assert devices["cuda:1"]["gpu_utilization_pct"] == pytest.approx(100 * 10 / 170)
    assert devices["cuda:0"]["gpu_utilization_pct"] == pytest.approx(100 * (30 + 20 + 60) / 170)
    assert devices["cuda:0"]["comm_comp_overlap_pct"] is None and devices["cuda:1"]["comm_comp_overlap_pct"] == 0.0


def test_collective_bytes_and_collective_from_the_communication_range(tmp_path):
    """The message size is the first input of the nearest communication range around the
    launch; the collective is the one that range calls, even when NCCL names its kernel
    SendRecv (as on gpu_5steps_rank0, where reduce-scatters run as SendRecv kernels)."""
    trace = gt.gpu_trace()
    trace["distributedInfo"] = {"backend": "nccl", "rank": 0, "world_size": 4}
    for e in trace["traceEvents"]:
        if e.get("name") == "nccl:all_reduce":
            e["args"].update({"Input Dims": [[1024, 256]], "Input type": ["float"]})
    send_recv = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"
    ev = trace["traceEvents"]
    ev.append(gt._x("user_annotation", "nccl:_reduce_scatter_base", 120, 10,
                    **{"Input Dims": [[2048]], "Input type": ["c10::BFloat16"]}))
    ev.append(gt._x("cuda_runtime", "cudaLaunchKernel", 121, 2, correlation=40, **{"External id": 40}))
    ev.append(gt._x("kernel", send_recv, 125, 4, device=True, stream=20, correlation=40))
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    rows = {r["collective"]: r for r in collective_table(load(path))}
    allreduce = rows["AllReduce"]
    assert (allreduce["bytes"], allreduce["sized"], allreduce["count"]) == (1024 * 256 * 4, 1, 1)
    # bus bandwidth = bytes / latency (10 us) × 2(n-1)/n, n = 4 (nccl-tests)
    assert allreduce["bus_bandwidth_gbps"] == pytest.approx(1024 * 256 * 4 / 10_000 * 1.5)
    scatter = rows["ReduceScatter"]
    assert scatter["name"] == send_recv and scatter["bytes"] == 2048 * 2
    assert scatter["bus_bandwidth_gbps"] == pytest.approx(4096 / 4_000 * 0.75)


# Per trace: {collective: (calls, calls sized)}, AllReduce bytes and bus bandwidth (GB/s).
_REAL_COLLECTIVES = {
    "gpu_1step": ({"AllReduce": (2, 2), "AllToAll": (9, 7), "SendRecv": (5, 0), "AllGather": (2, 2),
                   "ReduceScatter": (2, 2)}, 1_793_158_928, 127.665),
    "gpu_5steps_rank0": ({"AllReduce": (10, 10), "AllToAll": (45, 35), "SendRecv": (5, 0), "AllGather": (10, 10),
                          "ReduceScatter": (10, 10)}, 8_965_794_640, 132.834),
}


@pytest.mark.parametrize("path", [ks.GPU_1STEP] + ([ks.FIVE_STEPS] if ks.FIVE_STEPS.exists() else []),
                         ids=lambda p: p.name)
def test_collectives_on_the_real_traces(path):
    """gpu_5steps_rank0 (16 ranks, NCCL; its first step kept here, the whole where ../shared
    has it): every collective runs as SendRecv kernels; the sizes come from the nccl:* ranges'
    Input Dims. Figures pinned from this implementation, checked by hand on the first
    all_reduce (nccl:all_reduce [[447923396]] float = 1.79 GB)."""
    counts, all_reduce_bytes, bus_gbps = _REAL_COLLECTIVES[path.name.split(".")[0]]
    rows = {r["collective"]: r for r in collective_table(load(path))}
    assert {k: (r["count"], r["sized"]) for k, r in rows.items()} == counts
    assert rows["AllReduce"]["bytes"] == all_reduce_bytes
    assert rows["AllReduce"]["bus_bandwidth_gbps"] == pytest.approx(bus_gbps, abs=1e-3)
    assert rows["SendRecv"]["bytes"] is None and rows["SendRecv"]["bus_bandwidth_gbps"] is None


def _device_aligned_by_definition(host, cols):
    """TB's rule step by step: a step ends at max(host end, device end of the work launched in
    it, its start); the next starts at max(its host start, the previous step's end)."""
    dev = np.flatnonzero(cols["device_end_ns"] >= 0)
    launch, dev_end = cols["start_ns"][dev], cols["device_end_ns"][dev]
    out, prev_end = [], None
    for name, s, e in host:
        mine = (launch >= s) & (launch < e)
        device_end = int(dev_end[mine].max()) if mine.any() else e
        start = s if prev_end is None else max(s, prev_end)
        end = max(e, device_end, start)
        out.append((name, start, end))
        prev_end = end
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 300), st.integers(0, 40)), min_size=1, max_size=12),
       st.lists(st.tuples(st.integers(0, 400), st.integers(-1, 120)), max_size=40), st.booleans())
def test_device_aligned_steps_at_once_are_the_rule_step_by_step(steps, launches, disjoint):
    from gradtrace.profiler.data import _device_aligned
    if disjoint:      # the usual case: ProfilerSteps one after the other
        at, host = 0, []
        for k, (gap, length) in enumerate(steps):
            host.append((f"ProfilerStep#{k}", at + gap % 20, at + gap % 20 + length))
            at = host[-1][2]
    else:             # any order and overlap
        host = [(f"ProfilerStep#{k}", s, s + length) for k, (s, length) in enumerate(steps)]
    launches = sorted(launches)
    cols = {"start_ns": np.array([t for t, _ in launches], dtype=np.int64),
            "device_end_ns": np.array([-1 if d < 0 else t + d for t, d in launches], dtype=np.int64)}
    assert _device_aligned(host, cols) == _device_aligned_by_definition(host, cols)
