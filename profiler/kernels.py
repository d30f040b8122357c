"""The kernel view: per kernel name (optionally per launching op and launch shape), memcpys by
kind, and NCCL collectives — the tables of ``gradtrace gpu --kernels`` and the dashboard's
Kernels page. Pure functions over a :class:`~profiler.data.ProfileData`'s device work
(:func:`profiler.gpu.device_work`); names, types and Tensor Cores are
:mod:`profiler.kernel_names`' (re-exported here). Definitions: ``docs/gpu-analysis.md``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .aggregate import group_rows
from .gpu import device_work
from .kernel_names import (BUS_BANDWIDTH_FACTORS, COMMUNICATION, COMMUNICATION_OP, COMPUTATION, MEMORY, TENSOR_CORE_ELIGIBLE_OPS,
                           TENSOR_CORE_KERNEL_PATTERNS, collective_of, collective_of_op, kernel_type, memcpy_kind, nccl_algorithm,
                           readable_kernel_name, short_kernel_names, uses_tensor_cores)

if TYPE_CHECKING:  # pragma: no cover
    from .data import ProfileData

__all__ = ["KernelRow", "kernel_table", "memcpy_table", "collective_table",
           # re-exported from kernel_names, where they are defined
           "COMPUTATION", "COMMUNICATION", "MEMORY", "TENSOR_CORE_KERNEL_PATTERNS", "TENSOR_CORE_ELIGIBLE_OPS",
           "readable_kernel_name", "short_kernel_names", "kernel_type", "uses_tensor_cores", "memcpy_kind",
           "nccl_algorithm", "BUS_BANDWIDTH_FACTORS", "collective_of", "collective_of_op"]


# ---------------------------------------------------------------- the tables

_DTYPE_BYTES = {"float": 4, "float32": 4, "double": 8, "float64": 8, "c10::Half": 2, "c10::BFloat16": 2,
                "half": 2, "bfloat16": 2, "int": 4, "long int": 8, "int64": 8, "signed char": 1,
                "unsigned char": 1, "bool": 1, "short int": 2}


@dataclass(frozen=True)
class KernelRow:
    """One row of the kernel view: the device activities of one name (and launching op, grid
    and block when grouped by them). Times in microseconds; None where the trace does not say.

    Attributes:
        name: the full (demangled) kernel name; ``readable_kernel_name`` for display.
        device: "cuda:0"...
        op: the launching op's name (grouped by op), else None.
        grid, block: "x,y,z" (grouped by launch shape), else None.
        count: calls.
        kernel_time_total, kernel_time_avg, kernel_time_min, kernel_time_max, kernel_time_std:
            device time (std with one degree of freedom, 0 for one call, as HTA's).
        kernel_time_total_percent: share of the device's total activity time.
        blocks_per_sm, occupancy_pct: means weighted by duration (TB's kernel table), over the
            calls that have them.
        tensor_cores: the name is on TB's Tensor Core allow-list (None for memcpys/memsets).
        kind: HTA's kernel type (COMMUNICATION, COMPUTATION, MEMORY).
    """

    name: str
    device: str
    op: str | None
    grid: str | None
    block: str | None
    count: int
    kernel_time_total: float
    kernel_time_avg: float
    kernel_time_min: float
    kernel_time_max: float
    kernel_time_std: float
    kernel_time_total_percent: float
    blocks_per_sm: float | None
    occupancy_pct: float | None
    tensor_cores: bool | None
    kind: str


def _weighted(values: np.ndarray, weight: np.ndarray, group: np.ndarray, n: int) -> np.ndarray:
    ok = np.isfinite(values)
    w = np.bincount(group[ok], weights=weight[ok], minlength=n)
    s = np.bincount(group[ok], weights=(values * weight)[ok], minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(w > 0, s / w, np.nan)


def kernel_table(data: "ProfileData", by_op: bool = False, by_launch: bool = False) -> list[KernelRow]:
    """The kernel view: per device and kernel name (optionally also per launching op, and per
    grid and block), heaviest first.

    Args:
        by_op: one row per (name, launching op).
        by_launch: one row per (name, grid, block).
    Returns:
        :class:`KernelRow` rows sorted by total time, descending.
    """
    g = data.gpu_columns
    gpu_row = np.full(data.n_events, -1, dtype=np.int64)
    gpu_row[g["event"]] = np.arange(len(g["event"]))
    rows: list[KernelRow] = []
    for device, work in device_work(data).items():
        dur = (work.end - work.start).astype(np.float64) / 1000.0
        op_name = np.where(work.op >= 0, data.event_columns["name_id"][np.maximum(work.op, 0)], -1)
        gr = gpu_row[work.event]
        # Grid and block of each activity; -1 where there is no gpu table (a gradtrace profile).
        launch = [np.where(gr >= 0, g[c][np.maximum(gr, 0)] if len(g[c]) else -1, -1).astype(np.int64)
                  for c in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")]
        keys = [work.name_id.astype(np.int64)] + ([op_name.astype(np.int64)] if by_op else []) + \
            (launch if by_launch else [])
        first, group = group_rows(keys)
        n = len(first)
        count = np.bincount(group, minlength=n)
        total = np.bincount(group, weights=dur, minlength=n)
        mean = total / np.maximum(count, 1)
        lo = np.full(n, np.inf)
        hi = np.full(n, -np.inf)
        np.minimum.at(lo, group, dur)
        np.maximum.at(hi, group, dur)
        sq = np.bincount(group, weights=(dur - mean[group]) ** 2, minlength=n)
        std = np.where(count > 1, np.sqrt(sq / np.maximum(count - 1, 1)), 0.0)
        blocks = _weighted(work.blocks_per_sm, dur, group, n)
        occupancy = _weighted(work.occupancy_pct, dur, group, n)
        whole = float(dur.sum()) or 1.0
        for i in np.argsort(-total, kind="stable").tolist():
            r = first[i]
            name = data.strings[int(work.name_id[r])]
            memory = work.type[r] == MEMORY
            shape = (",".join(str(int(c[r])) for c in launch[:3]), ",".join(str(int(c[r])) for c in launch[3:])) \
                if by_launch and gr[r] >= 0 and launch[0][r] >= 0 else (None, None)
            rows.append(KernelRow(
                name=name, device=device, op=data.strings[int(op_name[r])] if by_op and op_name[r] >= 0 else None,
                grid=shape[0], block=shape[1], count=int(count[i]), kernel_time_total=float(total[i]),
                kernel_time_avg=float(mean[i]), kernel_time_min=float(lo[i]), kernel_time_max=float(hi[i]),
                kernel_time_std=float(std[i]), kernel_time_total_percent=100.0 * float(total[i]) / whole,
                blocks_per_sm=None if not np.isfinite(blocks[i]) else float(blocks[i]),
                occupancy_pct=None if not np.isfinite(occupancy[i]) else float(occupancy[i]),
                tensor_cores=None if memory or not work.has_launch_args else uses_tensor_cores(name),
                kind=str(work.type[r])))
    return rows


def memcpy_table(data: "ProfileData") -> list[dict]:
    """Memcpys and memsets per device, direction and host memory (``HtoD`` from pageable
    memory...): count, time, bytes and bandwidth (bytes / time, GB/s = 1e9 bytes/s); bytes and
    bandwidth None where the trace gives no sizes."""
    g = data.gpu_columns
    gpu_row = np.full(data.n_events, -1, dtype=np.int64)
    gpu_row[g["event"]] = np.arange(len(g["event"]))
    out = []
    for device, work in device_work(data).items():
        m = work.type == MEMORY
        if not m.any():
            continue
        kinds: dict = {}
        for i, s, e, ev in zip(work.name_id[m].tolist(), work.start[m].tolist(), work.end[m].tolist(),
                               work.event[m].tolist()):
            key = memcpy_kind(data.strings[i])
            size = int(g["bytes"][gpu_row[ev]]) if gpu_row[ev] >= 0 else -1
            row = kinds.setdefault(key, {"count": 0, "ns": 0, "bytes": 0, "sized_ns": 0, "unsized": 0})
            row["count"] += 1
            row["ns"] += e - s
            if size >= 0:
                row["bytes"] += size
                row["sized_ns"] += e - s
            else:
                row["unsized"] += 1
        for (direction, host), r in sorted(kinds.items(), key=lambda kv: -kv[1]["ns"]):
            sized = r["unsized"] < r["count"]
            out.append({"device": device, "kind": direction, "host_memory": host, "count": r["count"],
                        "time_total_us": r["ns"] / 1000.0, "bytes": r["bytes"] if sized else None,
                        "bandwidth_gbps": r["bytes"] / r["sized_ns"] if sized and r["sized_ns"] > 0 else None})
    return out


def _op_bytes(data: "ProfileData", op: int) -> int | None:
    """Bytes of an op's first input, from its recorded shape and dtype; None when unknown."""
    cols = data.event_columns
    shapes = data.input_shapes_of(int(cols["shapes_id"][op]))
    if not shapes or cols["dtypes_id"][op] < 0:
        return None
    try:
        dtypes = json.loads(data.strings[int(cols["dtypes_id"][op])])
    except ValueError:
        return None
    size = _DTYPE_BYTES.get(dtypes[0]) if dtypes else None
    if size is None or not isinstance(shapes[0], list):
        return None
    return int(np.prod(shapes[0], dtype=np.int64)) * size


def _communication_ranges(data: "ProfileData", call: int, parent: np.ndarray):
    """The communication ranges around a launching call, innermost first (``nccl:all_reduce``,
    ``record_param_comms``, ``c10d::allreduce_``), up to the first range that is not one."""
    names, strings = data.event_columns["name_id"], data.strings
    e = int(parent[call]) if call >= 0 else -1
    while e >= 0 and COMMUNICATION_OP.search(strings[int(names[e])]):
        yield e
        e = int(parent[e])


def _launch_message(data: "ProfileData", call: int, parent: np.ndarray) -> tuple[str | None, int | None]:
    """(the collective the program asked for, the message's bytes) of a communication kernel,
    from the ranges around its launch: the nearest that names a collective
    (``nccl:_reduce_scatter_base`` -> ReduceScatter) and the nearest that recorded its first
    input (``nccl:all_reduce`` [[447923396]] float: shape × dtype size); None where none does."""
    collective = size = None
    for e in _communication_ranges(data, call, parent):
        collective = collective or collective_of_op(data.strings[int(data.event_columns["name_id"][e])])
        size = size or _op_bytes(data, e)
        if collective and size:
            break
    return collective, size


def collective_table(data: "ProfileData") -> list[dict]:
    """NCCL kernels per device, name and collective: the collective, NCCL's algorithm and
    protocol (from the name), calls, latency, bytes and bus bandwidth.

    The collective is the one the program called, read from the communication ranges around
    the launch (NCCL may run a reduce-scatter as ``SendRecv`` kernels), else the kernel name's.
    Bytes are the message sizes of the calls whose launch sits inside a communication range
    that recorded its input (shape × dtype size; :func:`_launch_message`), summed; ``sized`` says
    how many of ``count`` calls that is (0: bytes None). Bus bandwidth is those bytes / their
    latency × nccl-tests' factor for the collective and the run's world size
    (``distributedInfo``), None where either is unknown.
    """
    info = data.metadata.get("distributed_info") or {}
    world = info.get("world_size") if isinstance(info.get("world_size"), int) else None
    parent = data.analysis.parent
    out = []
    for device, work in device_work(data).items():
        groups: dict = {}
        sizes_of: dict = {}
        for k in np.flatnonzero(work.type == COMMUNICATION).tolist():
            collective, sizes_of[k] = _launch_message(data, int(work.launch_call[k]), parent)
            collective = collective or collective_of(data.strings[int(work.name_id[k])])
            groups.setdefault((int(work.name_id[k]), collective), []).append(k)
        for (name_id, collective), ks in groups.items():
            name = data.strings[name_id]
            dur = (work.end[ks] - work.start[ks]) / 1000.0
            sizes = [sizes_of[k] for k in ks]
            sized = [k for k, s in enumerate(sizes) if s is not None]
            nbytes = int(sum(sizes[k] for k in sized)) if sized else None
            sized_us = float(dur[sized].sum()) if sized else 0.0
            algorithm, protocol = nccl_algorithm(name)
            bus = None
            if nbytes is not None and world and collective in BUS_BANDWIDTH_FACTORS and sized_us > 0:
                bus = nbytes / (sized_us * 1000.0) * BUS_BANDWIDTH_FACTORS[collective](world)
            out.append({"device": device, "name": name, "collective": collective, "algorithm": algorithm,
                        "protocol": protocol, "count": len(ks), "sized": len(sized),
                        "latency_total_us": float(dur.sum()), "latency_avg_us": float(dur.mean()),
                        "latency_max_us": float(dur.max()), "bytes": nbytes, "bus_bandwidth_gbps": bus})
    out.sort(key=lambda r: -r["latency_total_us"])
    return out
