"""Recommendations: rules over a profile's GPU figures, each returned with the figure that
triggered it, its value and threshold, and what to try.

Each rule is one function ``(data, summary) -> list of hits``; :data:`RULES` lists them in the
order they are shown. A rule whose figure the profile cannot define (no steps, no memory
records, no kernel names) says nothing. Thresholds are named constants beside their rule.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable

import numpy as np

from .gpu import covered_ns, device_work, is_nvidia
from .kernel_names import COMMUNICATION, TENSOR_CORE_ELIGIBLE_OPS, memcpy_kind, uses_tensor_cores
from .records import GpuKind, device_index

if TYPE_CHECKING:  # pragma: no cover
    from .data import ProfileData

__all__ = ["recommendations", "RULES"]

DATALOADER_PCT = 5.0
EXPOSED_COMMUNICATION_PCT = 10.0
LOW_UTILIZATION_PCT = 50.0
HOST_WAIT_PCT = 30.0          # launch-bound: host wait above this share of the streams' idle time...
SHORT_KERNELS_PCT = 30.0      # ...with at least this share of launches short kernels
OFF_TENSOR_CORES_PCT = 10.0   # Tensor-Core-eligible ops' kernel time off Tensor Cores
LOW_OCCUPANCY_PCT = 25.0      # a kernel of lower estimated achieved occupancy is "low"...
LOW_OCCUPANCY_TIME_PCT = 50.0  # ...and such kernels holding more of the kernel time than this
PAGEABLE_COPY_PCT = 1.0       # pageable host-to-device copies above this share of the steps
SYNC_PCT = 5.0
PEAK_MEMORY_PCT = 90.0
SYNC_CALLS = re.compile(r"^(cudaDeviceSynchronize|cudaStreamSynchronize|cudaEventSynchronize|hipDeviceSynchronize|"
                        r"hipStreamSynchronize|aten::item|aten::_local_scalar_dense)$")


def _hit(rule: str, figure: str, value: float, threshold: float, advice: str, device: str | None = None) -> dict:
    out = {"rule": rule, "figure": figure, "value": float(value), "threshold": float(threshold), "advice": advice}
    if device is not None:
        out["device"] = device
    return out


def _steps_us(summary: dict) -> float:
    return sum(s["step_us"] for s in summary["steps"])


def dataloader(data, summary) -> list:
    out = []
    for dev, d in summary["devices"].items():
        share = 100.0 * d["step_breakdown_us"]["dataloader"] / _steps_us(summary)
        if share > DATALOADER_PCT:
            out.append(_hit("dataloader", "dataloader share of step time (%)", share, DATALOADER_PCT,
                            "the input pipeline holds the step: raise DataLoader num_workers, set "
                            "pin_memory=True and persistent_workers=True, prefetch", dev))
        break  # the dataloader is the host's: one hit, not one per device
    return out


def exposed_communication(data, summary) -> list:
    out = []
    for dev, d in summary["devices"].items():
        exposed = d.get("exposed_communication_us")
        if exposed is None:
            continue
        share = 100.0 * exposed / summary["steps_us"]
        if share > EXPOSED_COMMUNICATION_PCT:
            out.append(_hit("exposed_communication", "communication not overlapped with computation (% of steps)",
                            share, EXPOSED_COMMUNICATION_PCT,
                            "overlap communication with computation: DDP bucket_cap_mb / gradient_as_bucket_view, "
                            "FSDP prefetching (forward_prefetch, backward_prefetch), fewer larger collectives", dev))
    return out


def low_utilization(data, summary) -> list:
    out = []
    for dev, d in summary["devices"].items():
        u = d["gpu_utilization_pct"]
        if u is not None and u < LOW_UTILIZATION_PCT:
            out.append(_hit("low_gpu_utilization", "GPU utilization (%)", u, LOW_UTILIZATION_PCT,
                            "the GPU is idle most of the step: see idle time by cause; larger batches, "
                            "fewer host synchronizations, an input pipeline that keeps up", dev))
    return out


def launch_bound(data, summary) -> list:
    out = []
    for dev, d in summary["devices"].items():
        launch, idle = d["launch"], d["idle_breakdown"]
        waited = sum(idle.values())
        if launch is None or not waited:
            continue
        host_wait = 100.0 * idle["host_wait_us"] / waited
        if host_wait > HOST_WAIT_PCT and launch["short_kernels_pct"] >= SHORT_KERNELS_PCT:
            out.append(_hit("launch_bound", "host wait share of the streams' idle time (%)", host_wait,
                            HOST_WAIT_PCT,
                            f"{launch['short_kernels_pct']:.0f}% of launches are short kernels and the GPU waits "
                            "for the host: capture the step in a CUDA graph (torch.cuda.graphs) or use "
                            "torch.compile(mode=\"reduce-overhead\"); fuse small ops", dev))
    return out


def off_tensor_cores(data, summary) -> list:
    out = []
    cols = data.event_columns
    for dev, work in device_work(data).items():
        if not work.has_launch_args or not is_nvidia(data, dev):
            continue
        k = work.is_kernel & (work.type != COMMUNICATION)
        total = float((work.end[k] - work.start[k]).sum())
        if total <= 0:
            continue
        # Eligibility is a property of the launching op's (name, dtypes): decided once per
        # distinct pair, then spread to the kernels (a 10M-event trace launches from a
        # million ops; one pass per op was quadratic).
        ops = np.unique(work.op[k & (work.op >= 0)])
        # One int64 key per (name, dtypes): ids are int32, dtypes -1 when not recorded.
        key = cols["name_id"][ops].astype(np.int64) << 32 | (cols["dtypes_id"][ops].astype(np.int64) + 1)
        pairs, which = np.unique(key, return_inverse=True)
        pair_ok = np.array([data.strings[p >> 32] in TENSOR_CORE_ELIGIBLE_OPS and _float32(data, (p & 0xFFFFFFFF) - 1)
                            for p in pairs.tolist()], dtype=bool)
        is_eligible_op = np.zeros(data.n_events, dtype=bool)
        is_eligible_op[ops[pair_ok[which.reshape(-1)]]] = True
        eligible = (work.op >= 0) & is_eligible_op[np.maximum(work.op, 0)]
        off = k & eligible & ~_by_name(data, work.name_id, uses_tensor_cores)
        share = 100.0 * float((work.end[off] - work.start[off]).sum()) / total
        if share > OFF_TENSOR_CORES_PCT:
            out.append(_hit("off_tensor_cores", "kernel time of Tensor-Core-eligible ops off Tensor Cores (%)", share,
                            OFF_TENSOR_CORES_PCT,
                            "matmuls/convolutions in float32 run without Tensor Cores: "
                            "torch.backends.cuda.matmul.allow_tf32 = True (torch.set_float32_matmul_precision"
                            "(\"high\")), torch.backends.cudnn.allow_tf32 = True, or autocast to bfloat16/float16",
                            dev))
    return out


def _by_name(data, name_id: np.ndarray, predicate: Callable[[str], bool]) -> np.ndarray:
    """``predicate`` of each row's name, as a bool array: evaluated once per distinct name.

    Args:
        name_id: string-table ids, one per row.
        predicate: a test of a name (``uses_tensor_cores``).
    Returns:
        One bool per row.
    """
    ids, which = np.unique(name_id, return_inverse=True)
    flags = np.array([bool(predicate(data.strings[i])) for i in ids.tolist()], dtype=bool)
    return flags[which.reshape(-1)] if len(ids) else np.zeros(0, dtype=bool)


def _float32(data, dtypes_id: int) -> bool:
    """The op's inputs hold float32 ("float" in a torch trace's input types); unknown dtypes
    count, as the trace did not record them."""
    if dtypes_id < 0:
        return True
    return re.search(r'"(float|float32|torch\.float32)"', data.strings[int(dtypes_id)]) is not None


def low_occupancy(data, summary) -> list:
    out = []
    for dev, work in device_work(data).items():
        k = work.is_kernel & (work.type != COMMUNICATION) & np.isfinite(work.occupancy_pct)
        dur = (work.end - work.start).astype(np.float64)
        total = dur[k].sum()
        if total <= 0:
            continue
        share = 100.0 * dur[k & (work.occupancy_pct < LOW_OCCUPANCY_PCT)].sum() / total
        if share > LOW_OCCUPANCY_TIME_PCT:
            out.append(_hit("low_occupancy", f"kernel time in kernels under {LOW_OCCUPANCY_PCT:.0f}% est. occupancy (%)",
                            share, LOW_OCCUPANCY_TIME_PCT,
                            "the heaviest kernels keep few warps per SM (gradtrace gpu --kernels): larger "
                            "batches or tiles, fewer registers or shared memory per block", dev))
    return out


def pageable_copies(data, summary) -> list:
    out = []
    for dev, work in device_work(data).items():
        m = work.kind == GpuKind.MEMCPY
        sel = m & _by_name(data, work.name_id, lambda name: memcpy_kind(name) == ("HtoD", "pageable"))
        share = 100.0 * float((work.end[sel] - work.start[sel]).sum()) / 1000.0 / summary["steps_us"]
        if sel.any() and share > PAGEABLE_COPY_PCT:
            out.append(_hit("pageable_copies", "pageable host-to-device copy time (% of steps)", share,
                            PAGEABLE_COPY_PCT,
                            f"{int(sel.sum())} host-to-device copies from pageable memory: DataLoader(pin_memory=True) "
                            "or tensor.pin_memory(), then .to(device, non_blocking=True)", dev))
    return out


def synchronization(data, summary) -> list:
    cols = data.event_columns
    ids = [i for i, s in enumerate(data.strings) if SYNC_CALLS.match(s)]
    m = np.isin(cols["name_id"], ids)
    if not m.any():
        return []
    steps = summary["steps"]
    lo, hi = np.array([steps[0]["start_ns"]]), np.array([steps[-1]["end_ns"]])
    held = float(covered_ns(cols["start_ns"][m], cols["end_ns"][m], lo, hi)[0]) / 1000.0
    share = 100.0 * held / summary["steps_us"]
    if share <= SYNC_PCT:
        return []
    return [_hit("synchronization", "host time in synchronizing calls (% of steps)", share, SYNC_PCT,
                 "the host waits for the GPU (cudaDeviceSynchronize, cudaStreamSynchronize, .item(), "
                 "printing or branching on GPU values): keep values on the GPU, log less often")]


def peak_memory(data, summary) -> list:
    props = {p.get("id"): p for p in data.metadata.get("device_properties") or [] if isinstance(p, dict)}
    mem = data.memory_columns
    out = []
    for dev in np.unique(mem["device_id"]).tolist():
        name = data.strings[int(dev)]
        if not name.startswith("cuda"):
            continue
        total = props.get(device_index(name), {}).get("totalGlobalMem")
        if not isinstance(total, (int, float)) or total <= 0:
            continue
        peak = float(mem["total_allocated"][mem["device_id"] == dev].max())
        share = 100.0 * peak / total
        if share > PEAK_MEMORY_PCT:
            out.append(_hit("peak_memory", "peak allocated memory (% of the device's memory)", share, PEAK_MEMORY_PCT,
                            "close to out of memory: activation checkpointing, a smaller batch with gradient "
                            "accumulation, mixed precision, or sharding (FSDP)", name))
    return out


RULES: tuple[Callable, ...] = (low_utilization, launch_bound, exposed_communication, dataloader, synchronization,
                               off_tensor_cores, low_occupancy, pageable_copies, peak_memory)


def recommendations(data: "ProfileData", summary: dict) -> list[dict]:
    """Every rule's hits for a profile, given its :func:`profiler.gpu.gpu_summary`.

    Returns:
        ``[{"rule", "figure", "value", "threshold", "advice"[, "device"]}]``, in :data:`RULES`
        order; empty without steps.
    """
    if not summary["steps"] or not summary["steps_us"]:
        return []
    return [hit for rule in RULES for hit in rule(data, summary)]
