"""Where the GPU's time went: utilization, SM efficiency, occupancy, Tensor Cores, the temporal
and priority breakdowns, idle time by cause, communication overlap, launch delay and queue
length — each as its anchor defines it (DESIGN §4; ``docs/gpu-analysis.md`` lists every
figure with its definition and its anchor: the TensorBoard profiler plugin, "TB", or
Holistic Trace Analysis, "HTA").

The device work of a profile (:func:`device_work`) is :mod:`profiler.device`'s: in a torch
trace, its kernels, memcpys and memsets (the gpu table); in a gradtrace profile, the ops'
device intervals that contain no other one (a composite op around its ops is not a kernel).

Figures are taken over **windows**: each step (``ProfileData.step_ranges()``, device-aligned
as TB aligns them) and the span of all steps, from the first step's start to the last one's
end (TB's "steps time"; the last step is included). A profile without steps has one window:
its host events' span (TB's fallback), device-aligned like a step. Times are nanoseconds
inside, microseconds (floats, fractions kept) in the summary. A figure a profile cannot define
is None, never 0.

Everything is vectorized numpy over interval arrays: intervals are merged once, and a window's
share of a union is read off its running total (:class:`_Cover`), so a step costs two binary
searches.
"""
from __future__ import annotations

import dataclasses
import math
import re
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .kernel_names import COMMUNICATION, COMMUNICATION_OP, COMPUTATION, MEMORY, kernel_type, uses_tensor_cores
from .device import device_work_rows
from .records import GpuKind, Scope, device_index

if TYPE_CHECKING:  # pragma: no cover
    from .data import ProfileData

__all__ = ["DeviceWork", "device_work", "all_devices", "windows", "covered_ns", "is_nvidia", "gpu_summary", "device_figures", "kernel_type_breakdown", "utilization_series", "launch_stats",
           "queue_length", "step_breakdown", "STEP_CATEGORIES", "SUMMARY_VERSION", "SUMMARY_SHAPE", "has_shape", "KERNEL_WAIT_US", "SHORT_KERNEL_RUNTIME_US",
           "RUNTIME_CALL", "LAUNCH_CALLS"]

# HTA's get_idle_time_breakdown default: a gap between kernels of one stream shorter than this,
# with the next launch already queued, is launch overhead ("kernel wait").
KERNEL_WAIT_US = 30
# HTA's cuda_kernel_launch_stats default runtime_cutoff: a "short kernel" is launched by a call
# of at most this long and runs for less time than its launch took.
SHORT_KERNEL_RUNTIME_US = 50
# CUDA / HIP runtime and driver calls (cudaLaunchKernel, cudaMemcpyAsync, cuLaunchKernel,
# hipLaunchKernel, cudaDeviceSynchronize...): TB's "runtime" category.
RUNTIME_CALL = re.compile(r"^(cuda|cu|hip|hsa)[A-Z]")
# The calls that enqueue one kernel or copy (HTA's runtime launch events): launch delay and
# queue length are defined for their activities only. A graph launch enqueues many kernels
# at once and is left out, as HTA leaves it out.
LAUNCH_CALLS = frozenset(("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaMemcpyAsync",
                          "cudaMemsetAsync", "hipLaunchKernel", "hipExtModuleLaunchKernel", "hipMemsetAsync",
                          "hipMemcpyAsync", "hipMemcpyWithStream"))
# TB's dataloader ranges.
_DATALOADER = re.compile(r"^(enumerate\(DataLoader\)#.*\.__next__|enumerate\(DataPipe\)#.*)$")
_STEP = re.compile(r"^ProfilerStep#")
# TB's overview categories, highest priority first: each takes only the step time no higher one
# took; "other" is what is left.
STEP_CATEGORIES = ("kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec", "other")


# ---------------------------------------------------------------- the device work

@dataclass(frozen=True)
class DeviceWork:
    """The device activities of one device, in device start order (ns on the profile's clock).

    Attributes:
        device: "cuda:0"...
        event: the activity's row in the event columns.
        start, end: its device interval.
        stream: the stream it ran on.
        kind: GpuKind (KERNEL for every op-level kernel of a gradtrace profile).
        type: HTA's kernel type, "COMPUTATION", "COMMUNICATION" or "MEMORY".
        name_id: its name (string id).
        blocks_per_sm, occupancy_pct: launch estimates, NaN where the trace has none.
        launch_start, launch_end: the launching runtime call's host interval; for a gradtrace
            profile the op's own start (it launched its work) and -1; -1 where unknown.
        launch_call: row of the launching runtime call (-1: none, or a gradtrace profile).
        op: row of the op that launched it (for a gradtrace profile the op itself), -1: none.
        has_launch_args: the activities come from a torch trace's gpu table (kernel names,
            grid and occupancy are the trace's); False for a gradtrace profile's op intervals.
    """

    device: str
    event: np.ndarray
    start: np.ndarray
    end: np.ndarray
    stream: np.ndarray
    kind: np.ndarray
    type: np.ndarray
    name_id: np.ndarray
    blocks_per_sm: np.ndarray
    occupancy_pct: np.ndarray
    launch_start: np.ndarray
    launch_end: np.ndarray
    launch_call: np.ndarray
    op: np.ndarray
    has_launch_args: bool

    @property
    def is_kernel(self) -> np.ndarray:
        return self.kind == GpuKind.KERNEL

    def take(self, mask: np.ndarray) -> "DeviceWork":
        """The activities where ``mask`` holds (same order)."""
        return DeviceWork(self.device, *(getattr(self, f)[mask] for f in _ARRAYS), self.has_launch_args)


_ARRAYS = ("event", "start", "end", "stream", "kind", "type", "name_id", "blocks_per_sm", "occupancy_pct",
           "launch_start", "launch_end", "launch_call", "op")
_WORK_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def device_work(data: "ProfileData") -> dict[str, DeviceWork]:
    """``{device: DeviceWork}`` of a profile (computed once per profile, then cached).

    A torch trace's work is its gpu table; a gradtrace profile's is the ops' device intervals
    that contain no other device interval of their stream (:func:`.device.device_work_rows`).
    """
    if data not in _WORK_CACHE:
        _WORK_CACHE[data] = _device_work(data)
    return _WORK_CACHE[data]


def _device_work(data: "ProfileData") -> dict[str, DeviceWork]:
    cols, g, strings = data.event_columns, data.gpu_columns, data.strings
    rows = device_work_rows(cols, g)
    parent = data.analysis.parent
    if len(g["event"]):    # the gpu table, in event order as ``rows``
        kind = g["kind"].astype(np.int8)
        blocks = g["blocks_per_sm"].astype(np.float64)
        occupancy = g["occupancy_pct"].astype(np.float64)
        # A kernel sits at the start of its launch, as a child of the runtime call (or, with
        # none in the trace, of the op that launched it). A zero-length call at that instant
        # (cudaPeekAtLastError inside cudaMemsetAsync) can hold it instead: the launch is the
        # outermost runtime call starting there.
        up = parent[rows]
        is_call = np.zeros(len(strings), dtype=bool)
        for i in np.unique(cols["name_id"]).tolist():
            is_call[i] = RUNTIME_CALL.match(strings[i]) is not None
        call = np.where((up >= 0) & is_call[cols["name_id"][np.maximum(up, 0)]], up, -1)
        start = cols["start_ns"]
        while True:
            outer = parent[np.maximum(call, 0)]
            climb = (call >= 0) & (outer >= 0) & is_call[cols["name_id"][np.maximum(outer, 0)]] \
                & (start[np.maximum(outer, 0)] == start[np.maximum(call, 0)])
            if not climb.any():
                break
            call = np.where(climb, outer, call)
        op_of = np.where(call >= 0, parent[np.maximum(call, 0)], up)
        is_op = (op_of >= 0) & np.isin(cols["scope"][np.maximum(op_of, 0)],
                                       (Scope.FUNCTION, Scope.BACKWARD_FUNCTION))
        op = np.where(is_op, op_of, -1)
        launch_start = np.where(call >= 0, cols["start_ns"][np.maximum(call, 0)], -1)
        launch_end = np.where(call >= 0, cols["end_ns"][np.maximum(call, 0)], -1)
        has_args = True
    else:
        kind = np.full(len(rows), int(GpuKind.KERNEL), dtype=np.int8)
        blocks = occupancy = np.full(len(rows), np.nan)
        call = np.full(len(rows), -1, dtype=np.int64)
        op = rows
        launch_start = cols["start_ns"][rows].astype(np.int64)
        launch_end = np.full(len(rows), -1, dtype=np.int64)
        has_args = False
    name_id = cols["name_id"][rows]
    ids, which = np.unique(name_id, return_inverse=True)
    # The type of each activity: one of three shared strings in an object array (8 bytes a
    # row; a "<U13" array took 52, 68 MB per copy at 1.3M activities), compared as strings.
    if has_args:
        types = np.array([kernel_type(strings[i]) for i in ids.tolist()], dtype=object)
    else:
        # gradtrace's own ops are named by op, not kernel: communication is an op saying so.
        types = np.array([COMMUNICATION if COMMUNICATION_OP.search(strings[i]) else COMPUTATION
                          for i in ids.tolist()], dtype=object)
    type_ = np.where(kind != GpuKind.KERNEL, MEMORY, types[which.reshape(-1)] if len(rows) else COMPUTATION)
    device = cols["device_id"][rows]
    out = {}
    for dev in np.unique(device).tolist():
        pick = device == dev
        start = cols["device_start_ns"][rows[pick]].astype(np.int64)
        order = np.argsort(start, kind="stable")
        sel = np.flatnonzero(pick)[order]
        out[strings[dev]] = DeviceWork(
            strings[dev], rows[sel], start[order], cols["device_end_ns"][rows[sel]].astype(np.int64),
            cols["stream"][rows[sel]].astype(np.int64), kind[sel], type_[sel], name_id[sel],
            blocks[sel], occupancy[sel], launch_start[sel].astype(np.int64), launch_end[sel].astype(np.int64),
            call[sel].astype(np.int64), op[sel].astype(np.int64), has_args)
    return dict(sorted(out.items()))


def all_devices(data: "ProfileData") -> DeviceWork | None:
    """The work of every device of a profile as one :class:`DeviceWork` (device "all"), in
    device start order; None without device work. For figures of a rank, whose one process
    may drive several devices."""
    works = list(device_work(data).values())
    if not works:
        return None
    if len(works) == 1:     # the usual rank: its one device's arrays, not a copy of them
        return dataclasses.replace(works[0], device="all")
    joined = {f: np.concatenate([getattr(w, f) for w in works]) for f in _ARRAYS}
    order = np.argsort(joined["start"], kind="stable")
    return DeviceWork("all", *(joined[f][order] for f in _ARRAYS), all(w.has_launch_args for w in works))


# ---------------------------------------------------------------- windows

def windows(data: "ProfileData") -> list[tuple[str, int, int]]:
    """The steps the figures are taken over: ``data.step_ranges()`` (device-aligned), or without
    steps one window over the host's events (TB's fallback), ending no earlier than the device
    work launched in it."""
    steps = data.step_ranges()
    if steps:
        return steps
    cols = data.event_columns
    host = np.ones(data.n_events, dtype=bool)
    host[data.gpu_columns["event"]] = False
    if not host.any():
        return []
    start, end = int(cols["start_ns"][host].min()), int(cols["end_ns"][host].max())
    dev_end = cols["device_end_ns"]
    if (dev_end >= 0).any():
        end = max(end, int(dev_end.max()))
    return [("all", start, end)]


# ---------------------------------------------------------------- interval arithmetic

def _merge(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted disjoint intervals covering the given ones (touching ones merge, as HTA's
    ``merge_kernel_intervals`` and TB's ``merge_ranges`` merge them)."""
    keep = end > start
    if not keep.all():
        start, end = start[keep], end[keep]
    if len(start) == 0:
        return start.astype(np.int64), end.astype(np.int64)
    # Event columns are in start order already: the sort (and its copies, hundreds of MB at
    # ten million ranges) only for intervals that are not.
    if np.any(start[1:] < start[:-1]):
        order = np.argsort(start, kind="stable")
        start, end = start[order], end[order]
    reach = np.maximum.accumulate(end)
    new = np.ones(len(start), dtype=bool)
    np.greater(start[1:], reach[:-1], out=new[1:])
    first = np.flatnonzero(new)
    # A merged interval ends where the running maximum of the ends stands at its last member
    # (everything before it ended before its first member started).
    last = np.append(first[1:] - 1, len(start) - 1)
    return start[first].astype(np.int64), reach[last].astype(np.int64)


def covered_ns(start, end, lo, hi) -> np.ndarray:
    """Per window [lo[w], hi[w]], the length (ns) of the union of the intervals inside it."""
    return _Cover.union(start, end).within(np.asarray(lo), np.asarray(hi))


class _Cover:
    """A step function over time, given by disjoint sorted segments and their values; reads its
    integral over any window with two binary searches. Value 1 on merged intervals: the length of
    their union inside a window."""

    def __init__(self, start: np.ndarray, end: np.ndarray, value: np.ndarray | None = None):
        # No copies of what is int64 already, and no array of ones for value 1: at millions of
        # segments each is tens of MB, and an import's peak is the GPU summary's.
        self.start, self.end = start.astype(np.int64, copy=False), end.astype(np.int64, copy=False)
        length = (self.end - self.start).astype(np.float64)
        self.value = None if value is None else value.astype(np.float64, copy=False)
        if self.value is not None:
            length *= self.value
        self.cum = np.concatenate([[0.0], np.cumsum(length)])

    @classmethod
    def union(cls, start, end) -> "_Cover":
        return cls(*_merge(np.asarray(start, np.int64), np.asarray(end, np.int64)))

    def until(self, t) -> np.ndarray:
        """∫ of the function from -∞ to each t."""
        t = np.asarray(t, dtype=np.int64)
        k = np.searchsorted(self.start, t, side="right") - 1
        kk = np.maximum(k, 0)
        if len(self.start) == 0:
            return np.zeros(t.shape)
        inside = np.clip(t - self.start[kk], 0, self.end[kk] - self.start[kk])
        if self.value is not None:
            inside = inside * self.value[kk]
        return np.where(k >= 0, self.cum[kk] + inside, 0.0)

    def within(self, lo, hi) -> np.ndarray:
        """∫ of the function over each window [lo, hi]."""
        return self.until(hi) - self.until(lo)

    @property
    def empty(self) -> bool:
        return len(self.start) == 0


def _stacked(start, end, weight, clamp: float | None = None) -> _Cover:
    """The sum of ``weight`` over the intervals running at each moment, as a step function (an
    endpoint sweep, a start before an end at the same time, as TB's ``merge_ranges_with_value``).

    Its integral over a window is Σ weight × (time of each interval inside the window).

    Args:
        clamp: cap the sum at this value (TB's SM efficiency caps the blocks per SM at 1).
    """
    s, e, v = start, end, np.asarray(weight, dtype=np.float64)
    if len(s) == 0:
        return _Cover(s, e, v)
    times = np.concatenate([s, e])
    delta = np.concatenate([v, -v])
    is_end = np.concatenate([np.zeros(len(s), np.int8), np.ones(len(e), np.int8)])
    order = np.lexsort((is_end, times))
    times, running = times[order], np.cumsum(delta[order])
    seg_s, seg_e, val = times[:-1], times[1:], running[:-1]
    # Float sums of + and - values leave dust where nothing runs; TB's test is "> 0".
    keep = (seg_e > seg_s) & (val > 1e-9)
    val = val[keep] if clamp is None else np.minimum(val[keep], clamp)
    return _Cover(seg_s[keep], seg_e[keep], val)


def _sm_efficiency_cover(start, end, blocks) -> _Cover:
    """TB's approximated SM efficiency timeline: the blocks per SM of the kernels running at each
    moment, summed and clamped at 1; kernels without a positive value are left out, as in TB."""
    ok = np.isfinite(blocks) & (blocks > 0)
    return _stacked(start[ok], end[ok], blocks[ok], clamp=1.0)


def _us(ns) -> float:
    return float(ns) / 1000.0


def _pct(part, whole) -> float | None:
    return None if not whole or part is None else 100.0 * float(part) / float(whole)


def _none(x) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


# ---------------------------------------------------------------- figures of one device

def device_figures(data: "ProfileData", work: DeviceWork, lo: np.ndarray, hi: np.ndarray) -> list[dict]:
    """The summary figures of one device over each window [lo[w], hi[w]] (ns): what
    :func:`gpu_summary` shows per step and over all steps, for any windows and any selection of
    the device's work (``work.take(mask)``)."""
    length = (hi - lo).astype(np.float64)
    k = work.is_kernel
    ks, ke = work.start[k], work.end[k]
    comp_m, comm_m = work.type == COMPUTATION, work.type == COMMUNICATION
    busy = _Cover.union(ks, ke).within(lo, hi)                       # TB: kernels only
    all_busy = _Cover.union(work.start, work.end).within(lo, hi)     # HTA: kernels, memcpys, memsets
    compute = _Cover.union(work.start[comp_m], work.end[comp_m]).within(lo, hi)
    comm = _Cover.union(work.start[comm_m], work.end[comm_m]).within(lo, hi)
    either = _Cover.union(work.start[comp_m | comm_m], work.end[comp_m | comm_m]).within(lo, hi)
    overlap = comm + compute - either                                # |comm ∩ comp|
    sm_cover = _sm_efficiency_cover(ks, ke, work.blocks_per_sm[k])
    sm, sm_ran = sm_cover.within(lo, hi), _touches(sm_cover, lo, hi)
    occ = work.occupancy_pct[k]
    has_occ = np.isfinite(occ) & (occ >= 0)
    occ_time = _stacked(ks[has_occ], ke[has_occ], np.ones(int(has_occ.sum()))).within(lo, hi)
    occ_sum = _stacked(ks[has_occ], ke[has_occ], occ[has_occ]).within(lo, hi)
    tensor_cores = _tensor_core_share(data, work, lo, hi)
    idle = _idle_breakdown(work, lo, hi)
    self_cuda = _self_cuda(data, work, lo, hi)
    types = kernel_type_breakdown(work, lo, hi)
    out = []
    for w in range(len(lo)):
        whole = length[w]
        out.append({
            "gpu_utilization_pct": _pct(busy[w], whole) if len(ks) else None,
            "sm_efficiency_pct": _pct(sm[w], whole) if sm_ran[w] else None,
            "achieved_occupancy_pct": float(occ_sum[w] / occ_time[w]) if occ_time[w] > 0 else None,
            "tensor_core_pct": None if tensor_cores is None else tensor_cores[w],
            "temporal": {"compute_us": _us(compute[w]), "non_compute_us": _us(all_busy[w] - compute[w]),
                         "idle_us": _us(whole - all_busy[w])},
            "idle_breakdown": {name: _us(v[w]) for name, v in idle.items()},
            "comm_comp_overlap_pct": _pct(overlap[w], comm[w]) if comm[w] > 0 else None,
            "communication_us": _us(comm[w]) if comm_m.any() else None,
            "exposed_communication_us": _us(comm[w] - overlap[w]) if comm_m.any() else None,
            "self_cuda_total_us": _us(self_cuda[w]),
            "kernel_type_us": {label: _us(v[w]) for label, v in types.items()},
        })
    return out


def _touches(cover: _Cover, lo, hi) -> np.ndarray:
    """Per window, whether some segment of ``cover`` overlaps it (TB leaves SM efficiency None
    for a span where no kernel with blocks per SM ran)."""
    if cover.empty:
        return np.zeros(len(lo), dtype=bool)
    first = np.searchsorted(cover.end, lo, side="right")
    idx = np.minimum(first, len(cover.start) - 1)
    return (first < len(cover.start)) & (cover.start[idx] < hi)


def is_nvidia(data: "ProfileData", device: str) -> bool:
    """Whether a device is NVIDIA's, from the trace's ``deviceProperties`` name (an AMD Instinct
    or Radeon is not); True when the trace does not say."""
    index = device_index(device)
    for p in data.metadata.get("device_properties") or []:
        if isinstance(p, dict) and p.get("id") == index and isinstance(p.get("name"), str):
            return not re.search(r"AMD|Radeon|Instinct", p["name"], re.IGNORECASE)
    return True


def _tensor_core_share(data: "ProfileData", work: DeviceWork, lo, hi) -> list | None:
    """Per window, Tensor Core kernel time / all kernel time (%), TB's ``tc_used_ratio``; None
    without kernel names (a gradtrace profile), on a device that is not NVIDIA's (TB's
    allow-list holds NVIDIA kernel names only), or without kernels in the window.

    TB takes it over every kernel of the trace, not clipped to the steps: the last window (the
    span of all steps) does the same; a step takes its kernels' time inside it.
    """
    k = work.is_kernel
    if not work.has_launch_args or not k.any() or not is_nvidia(data, work.device):
        return None
    ids = np.unique(work.name_id[k])
    on_tc = np.zeros(int(ids.max()) + 1, dtype=bool)
    on_tc[ids] = [uses_tensor_cores(data.strings[i]) for i in ids.tolist()]
    s, e, tc = work.start[k], work.end[k], on_tc[work.name_id[k]]
    # Kernels of several streams overlap: sums of kernel time, not unions.
    total = _stacked(s, e, np.ones(len(s))).within(lo, hi)
    tensor = _stacked(s[tc], e[tc], np.ones(int(tc.sum()))).within(lo, hi)
    total[-1], tensor[-1] = float((e - s).sum()), float((e - s)[tc].sum())
    return [_pct(t, a) if a > 0 else None for t, a in zip(tensor, total)]


def _idle_breakdown(work: DeviceWork, lo, hi) -> dict[str, np.ndarray]:
    """HTA's idle time by cause, per stream, summed over streams.

    The gap before each activity of a stream (since the previous one ended) is **host wait**
    when the activity's launch started after the previous one ended (the host was late),
    **kernel wait** when shorter than :data:`KERNEL_WAIT_US` otherwise (launch overhead), else
    **other** (waiting for an event, another stream...). A gap counts in the window where the
    activity after it starts. Summed over streams it can exceed the device's idle time.
    """
    order = np.lexsort((work.start, work.stream))
    stream, start, end, launch = work.stream[order], work.start[order], work.end[order], work.launch_start[order]
    has_prev = np.zeros(len(start), dtype=bool)
    has_prev[1:] = stream[1:] == stream[:-1]
    prev_end = np.concatenate([[0], end[:-1]]).astype(np.int64)
    gap = (start - prev_end).astype(np.float64)
    # HTA compares the runtime call's start; without one (a NaN there) a gap is never host wait.
    host = has_prev & (launch >= 0) & (launch > prev_end)
    kernel = has_prev & ~host & (gap < KERNEL_WAIT_US * 1000)
    other = has_prev & ~host & ~kernel
    by_start = np.argsort(start, kind="stable")
    t = start[by_start]
    first, last = np.searchsorted(t, lo, side="left"), np.searchsorted(t, hi, side="left")
    out = {}
    for name, mask in (("host_wait_us", host), ("kernel_wait_us", kernel), ("other_us", other)):
        cum = np.concatenate([[0.0], np.cumsum(np.where(mask, gap, 0.0)[by_start])])
        out[name] = cum[last] - cum[first]
    return out


def _self_cuda(data: "ProfileData", work: DeviceWork, lo, hi) -> np.ndarray:
    """Per window, Σ self CUDA time of the device's events whose device interval starts in it:
    for a torch trace its kernels', memcpys' and memsets' time (DESIGN §4)."""
    if len(work.event) == 0:
        return np.zeros(len(lo))
    cols = data.event_columns
    dev = np.flatnonzero((cols["device_start_ns"] >= 0) & (cols["device_id"] == cols["device_id"][work.event[0]]))
    t = cols["device_start_ns"][dev]
    order = np.argsort(t, kind="stable")
    cum = np.concatenate([[0.0], np.cumsum(data.analysis.self_cuda_ns[dev][order].astype(np.float64))])
    t = t[order]
    return cum[np.searchsorted(t, hi, side="left")] - cum[np.searchsorted(t, lo, side="left")]


# ---------------------------------------------------------------- the priority step breakdown

def _host_categories(data: "ProfileData") -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """TB's host-side categories: (start, end) of the runtime calls, dataloader ranges,
    communication ops and the other host ranges (CPU exec); steps themselves are none."""
    cols, strings = data.event_columns, data.strings
    host = np.ones(data.n_events, dtype=bool)
    host[data.gpu_columns["event"]] = False
    flags = np.zeros((4, max(len(strings), 1)), dtype=bool)
    for i in np.unique(cols["name_id"][host]).tolist():
        s = strings[i]
        flags[:, i] = (_STEP.match(s) is not None, RUNTIME_CALL.match(s) is not None,
                       _DATALOADER.match(s) is not None, COMMUNICATION_OP.search(s) is not None)
    step, runtime, loader, comm = (f[cols["name_id"]] & host for f in flags)
    step &= cols["scope"] == Scope.USER_SCOPE
    comm &= ~runtime & ~loader
    cpu = host & ~step & ~runtime & ~loader & ~comm
    s, e = cols["start_ns"], cols["end_ns"]
    # Each category as the union of its ranges (all the breakdown reads): millions of nested
    # host ranges merge into far fewer intervals, in start order already (no sort).
    return {name: _merge(s[m], e[m]) for name, m in
            (("runtime", runtime), ("dataloader", loader), ("communication", comm), ("cpu_exec", cpu))}


def step_breakdown(data: "ProfileData", work: DeviceWork, lo, hi, host: dict | None = None) -> dict[str, np.ndarray]:
    """TB's step time breakdown by priority, per window: ``{category: ns per window}``.

    Categories (:data:`STEP_CATEGORIES`), highest first: kernel (not communication), memcpy,
    memset, communication (NCCL kernels and the host's communication ops), runtime (CUDA
    runtime/driver calls), dataloader, CPU exec (other host ranges), other. Each takes only the
    window time that no higher category took, so they add up to the window's length.

    Args:
        work: the device's activities (device categories); host categories are the profile's.
        host: :func:`_host_categories` when already computed.
    """
    host = host if host is not None else _host_categories(data)
    k = work.is_kernel & (work.type != COMMUNICATION)
    comm = work.type == COMMUNICATION
    ranges = [(work.start[k], work.end[k]),
              (work.start[work.kind == GpuKind.MEMCPY], work.end[work.kind == GpuKind.MEMCPY]),
              (work.start[work.kind == GpuKind.MEMSET], work.end[work.kind == GpuKind.MEMSET]),
              (np.concatenate([work.start[comm], host["communication"][0]]),
               np.concatenate([work.end[comm], host["communication"][1]])),
              host["runtime"], host["dataloader"], host["cpu_exec"]]
    out, below = {}, np.zeros(len(lo))
    starts, ends = np.zeros(0, np.int64), np.zeros(0, np.int64)
    for name, (s, e) in zip(STEP_CATEGORIES, ranges):
        # Category c takes |(U_≤c) ∩ W| − |(U_<c) ∩ W|, U the union of the categories so far,
        # kept merged (the host categories come merged already).
        starts, ends = _merge(np.concatenate([starts, s]), np.concatenate([ends, e]))
        upto = _Cover(starts, ends).within(lo, hi)
        out[name] = upto - below
        below = upto
    out["other"] = (np.asarray(hi) - np.asarray(lo)) - below
    return out


# ---------------------------------------------------------------- launches and queues

def _launched(data: "ProfileData", work: DeviceWork) -> np.ndarray:
    """Mask of the activities launched by one of :data:`LAUNCH_CALLS`."""
    call = work.launch_call
    ok = call >= 0
    names = data.event_columns["name_id"][np.maximum(call, 0)]
    is_launch = np.zeros(len(data.strings) or 1, dtype=bool)
    for i in np.unique(names[ok]).tolist():
        is_launch[i] = data.strings[i] in LAUNCH_CALLS
    return ok & is_launch[names]


def launch_stats(data: "ProfileData", device: str) -> dict[str, np.ndarray]:
    """HTA's kernel launch statistics of one device, per activity launched by a runtime call
    of :data:`LAUNCH_CALLS` (kernels, memcpys, memsets).

    Returns:
        Arrays: ``event`` (row), ``launch_delay_us`` (activity start − runtime call end, 0
        where the activity started before its call returned, as HTA clips it),
        ``cpu_duration_us`` (the runtime call), ``gpu_duration_us``, ``short``
        (HTA's short kernel: a call of at most :data:`SHORT_KERNEL_RUNTIME_US` us launching
        work that runs for less time than the call took).
    """
    work = device_work(data)[device]
    m = _launched(data, work)
    cpu = (work.launch_end[m] - work.launch_start[m]) / 1000.0
    gpu = (work.end[m] - work.start[m]) / 1000.0
    delay = np.maximum(work.start[m] - work.launch_end[m], 0) / 1000.0
    return {"event": work.event[m], "launch_delay_us": delay,
            "cpu_duration_us": cpu, "gpu_duration_us": gpu,
            "short": (cpu <= SHORT_KERNEL_RUNTIME_US) & (gpu < cpu)}


def _launch_summary(stats: dict) -> dict | None:
    delay = stats["launch_delay_us"]
    if len(delay) == 0:
        return None
    short = stats["short"]
    return {"launched": int(len(delay)),
            "launch_delay_us": {"mean": float(delay.mean()), "median": float(np.median(delay)),
                                "p95": float(np.percentile(delay, 95)), "max": float(delay.max())},
            "short_kernels": int(short.sum()), "short_kernels_pct": 100.0 * float(short.mean()),
            "short_kernel_time_us": float(stats["gpu_duration_us"][short].sum())}


def queue_length(data: "ProfileData", device: str) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """HTA's queue length per stream of one device: the activities launched (by a call of
    :data:`LAUNCH_CALLS`) and not started yet, as a step function.

    HTA adds one at the runtime call's start and takes one away when the activity starts
    executing; so do we (at one instant, the launch counts first).

    Returns:
        ``{stream: (times_ns, length after each time)}``.
    """
    work = device_work(data)[device]
    m = _launched(data, work)
    out = {}
    for stream in np.unique(work.stream[m]).tolist():
        sel = m & (work.stream == stream)
        t = np.concatenate([work.launch_start[sel], work.start[sel]])
        step = np.concatenate([np.ones(int(sel.sum()), np.int64), -np.ones(int(sel.sum()), np.int64)])
        order = np.lexsort((-step, t))
        out[int(stream)] = (t[order], np.cumsum(step[order]))
    return out


def utilization_series(data: "ProfileData", device: str) -> dict[str, np.ndarray | float]:
    """TB's GPU utilization over time: the kernels' busy share of equal buckets over the whole
    profile, the bucket a power of ten of microseconds with at most 100 buckets (the last one
    takes the remainder).

    Returns:
        ``start_ns``, ``end_ns`` (bucket bounds), ``utilization_pct`` arrays and ``bucket_us``.
    """
    cols = data.event_columns
    dev = cols["device_start_ns"] >= 0
    lo = int(min(cols["start_ns"].min(), cols["device_start_ns"][dev].min() if dev.any() else cols["start_ns"].min()))
    hi = int(max(cols["end_ns"].max(), cols["device_end_ns"][dev].max() if dev.any() else cols["end_ns"].max()))
    span_us = (hi - lo) / 1000.0
    size_us = 1
    while span_us / size_us > 100:
        size_us *= 10
    n = max(int(span_us / size_us), 1)
    edges = lo + np.arange(n + 1, dtype=np.int64) * size_us * 1000
    edges[-1] = hi
    work = device_work(data)[device]
    k = work.is_kernel
    busy = _Cover.union(work.start[k], work.end[k]).within(edges[:-1], edges[1:])
    with np.errstate(invalid="ignore", divide="ignore"):
        pct = np.where(edges[1:] > edges[:-1], 100.0 * busy / (edges[1:] - edges[:-1]), 0.0)
    return {"start_ns": edges[:-1], "end_ns": edges[1:], "utilization_pct": pct, "bucket_us": float(size_us)}


# ---------------------------------------------------------------- the summary

def gpu_summary(data: "ProfileData") -> dict:
    """Every GPU figure of a profile, per device, over all steps and per step (JSON-able).

    Returns:
        ``{"steps": [{"step", "start_ns", "end_ns", "step_us"}], "steps_us": span of all
        steps, "devices": {device: {figures over all steps..., "step_breakdown_us",
        "launch", "queue_length", "utilization" (:func:`utilization_series`, as lists),
        "steps": [{"step", figures..., "step_breakdown_us"}]}}}``.
        A figure a profile cannot define is None. See ``docs/gpu-analysis.md`` for each one;
        ``ProfileData.gpu_summary()`` adds the recommendations (:mod:`profiler.advice`).
    """
    steps = windows(data)
    devices: dict = {}
    out = {"steps": [{"step": n, "start_ns": s, "end_ns": e, "step_us": _us(e - s)} for n, s, e in steps],
           "steps_us": _us(steps[-1][2] - steps[0][1]) if steps else None, "devices": devices}
    if not steps:
        return out
    lo = np.array([s for _, s, _ in steps] + [steps[0][1]], dtype=np.int64)
    hi = np.array([e for _, _, e in steps] + [steps[-1][2]], dtype=np.int64)
    host = _host_categories(data)
    for name, work in device_work(data).items():
        figures = device_figures(data, work, lo, hi)
        breakdown = step_breakdown(data, work, lo[:-1], hi[:-1], host)
        per_step = []
        for w, (step, s, e) in enumerate(steps):
            per_step.append({"step": step, "step_us": _us(e - s), **figures[w],
                             "step_breakdown_us": {c: _us(v[w]) for c, v in breakdown.items()}})
        queues = queue_length(data, name)
        series = utilization_series(data, name)
        devices[name] = {
            **figures[-1],
            "step_breakdown_us": {c: _us(v.sum()) for c, v in breakdown.items()},
            "launch": _launch_summary(launch_stats(data, name)),
            "queue_length": {str(s): {"max": int(q.max()), "mean": float(q.mean())} for s, (_, q) in queues.items()},
            # TB's utilization over time (:func:`utilization_series`): at most 100 buckets, kept
            # here so a stored summary draws the Overview's chart without the device work.
            "utilization": {"bucket_us": series["bucket_us"], "start_ns": series["start_ns"].tolist(),
                            "end_ns": series["end_ns"].tolist(),
                            "utilization_pct": [float(v) for v in series["utilization_pct"]]},
            "steps": per_step,
        }
    return out


def kernel_type_breakdown(work: DeviceWork, lo, hi) -> dict[str, np.ndarray]:
    """HTA's kernel-type time (``get_gpu_kernel_breakdown``'s first table): per window, the time
    each set of kernel types runs alone or together, labelled as HTA labels it
    ("COMPUTATION", "COMPUTATION overlapping COMMUNICATION"...); each type's intervals merged
    first, so one type on several streams counts once."""
    types = (COMPUTATION, COMMUNICATION, MEMORY)
    times, deltas = [], []
    for bit, t in enumerate(types):
        s, e = _merge(work.start[work.type == t], work.end[work.type == t])
        times += [s, e]
        deltas += [np.full(len(s), 1 << bit), np.full(len(e), -(1 << bit))]
    t = np.concatenate(times)
    d = np.concatenate(deltas)
    out: dict[str, np.ndarray] = {}
    if len(t) == 0:
        return out
    order = np.lexsort((d, t))          # at one instant, ends before starts: no zero-length overlap
    t, mask = t[order], np.cumsum(d[order])
    seg_s, seg_e, m = t[:-1], t[1:], mask[:-1]
    for value in np.unique(m[m > 0]).tolist():
        label = " overlapping ".join(name for bit, name in enumerate(types) if value & (1 << bit))
        pick = (m == value) & (seg_e > seg_s)
        out[label] = _Cover(seg_s[pick], seg_e[pick]).within(lo, hi)
    return out


# ---------------------------------------------------------------- the summary's shape

# What ProfileData.gpu_summary() returns, as a version-5 file keeps it (profiler.stored): a
# stored summary is used only when it has this shape, so that a file cannot make a reader
# index a missing key. Bump SUMMARY_VERSION whenever a figure is added, removed or renamed: a
# file with another version is recomputed instead of read.
SUMMARY_VERSION = 2      # 2: each device's utilization over time
_NUM, _OPT, _INT, _STR = "number", "number or null", "int", "str"
_FIGURES = {
    "gpu_utilization_pct": _OPT, "sm_efficiency_pct": _OPT, "achieved_occupancy_pct": _OPT, "tensor_core_pct": _OPT,
    "temporal": {"compute_us": _NUM, "non_compute_us": _NUM, "idle_us": _NUM},
    "idle_breakdown": {"host_wait_us": _NUM, "kernel_wait_us": _NUM, "other_us": _NUM},
    "comm_comp_overlap_pct": _OPT, "communication_us": _OPT, "exposed_communication_us": _OPT,
    "self_cuda_total_us": _NUM, "kernel_type_us": ({_STR: _NUM},),
    "step_breakdown_us": dict.fromkeys(STEP_CATEGORIES, _NUM),
}
_LAUNCH = {"launched": _INT, "launch_delay_us": {"mean": _NUM, "median": _NUM, "p95": _NUM, "max": _NUM},
           "short_kernels": _INT, "short_kernels_pct": _NUM, "short_kernel_time_us": _NUM}
SUMMARY_SHAPE = {
    "steps": [{"step": _STR, "start_ns": _INT, "end_ns": _INT, "step_us": _NUM}],
    "steps_us": _OPT,
    "devices": ({_STR: {**_FIGURES, "launch": (None, _LAUNCH),
                        "queue_length": ({_STR: {"max": _INT, "mean": _NUM}},),
                        "utilization": {"bucket_us": _NUM, "start_ns": [_INT], "end_ns": [_INT],
                                        "utilization_pct": [_NUM]},
                        "steps": [{"step": _STR, "step_us": _NUM, **_FIGURES}]}},),
    "recommendations": [({"rule": _STR, "figure": _STR, "value": _NUM, "threshold": _NUM, "advice": _STR},
                         {"rule": _STR, "figure": _STR, "value": _NUM, "threshold": _NUM, "advice": _STR,
                          "device": _STR})],
}


def has_shape(value, shape) -> bool:
    """Whether a JSON value has a shape of :data:`SUMMARY_SHAPE`'s notation.

    Args:
        value: parsed JSON.
        shape: ``"number"`` (finite, not bool), ``"number or null"``, ``"int"``, ``"str"``;
            ``None`` (null); a dict (exactly these keys, each of its shape); ``[shape]`` (a
            list of items of that shape); ``({"str": shape},)`` (an object of any keys, values
            of that shape); a tuple of alternatives.
    Returns:
        True when it matches.
    """
    if shape is None:
        return value is None
    if isinstance(shape, str):
        if shape == _STR:
            return type(value) is str
        if shape == _INT:
            return type(value) is int
        if value is None:
            return shape == _OPT
        try:        # finite; an integer beyond any float is no figure either
            return type(value) in (int, float) and math.isfinite(value)
        except OverflowError:
            return False
    if isinstance(shape, list):
        return type(value) is list and _all_have_shape(value, shape[0])
    if isinstance(shape, dict):
        return type(value) is dict and value.keys() == shape.keys() and all(
            has_shape(value[k], s) for k, s in shape.items())
    if _any_keys(shape):
        return type(value) is dict and _all_have_shape(list(value.values()), shape[0][_STR])
    return any(has_shape(value, s) for s in shape)


def _any_keys(shape) -> bool:
    """Whether ``shape`` is ``({"str": value shape},)``: an object of any keys."""
    return type(shape) is tuple and len(shape) == 1 and isinstance(shape[0], dict) and list(shape[0]) == [_STR]


def _all_have_shape(values: list, shape) -> bool:
    """Whether every item of a list has ``shape``: a list of objects (a summary's 18,000
    steps) column by column, a column of figures at once (a call per value took a second)."""
    if isinstance(shape, dict) and values:
        keys = shape.keys()
        return all(type(v) is dict and v.keys() == keys for v in values) and all(
            _all_have_shape([v[k] for v in values], s) for k, s in shape.items())
    if shape in (_NUM, _OPT):
        numbers = [v for v in values if v is not None] if shape == _OPT else values
        if not all(type(v) in (int, float) for v in numbers):
            return False
        try:
            return bool(np.isfinite(np.array(numbers, dtype=np.float64)).all())
        except OverflowError:       # an integer beyond any float: no figure
            return False
    if shape in (_INT, _STR):
        kind = int if shape == _INT else str
        return all(type(v) is kind for v in values)
    if shape is None:
        return all(v is None for v in values)
    if _any_keys(shape):
        # Objects of any keys (a step's time by kernel type): all their values as one column.
        return all(type(v) is dict for v in values) and _all_have_shape(
            [x for v in values for x in v.values()], shape[0][_STR])
    if type(shape) is tuple:
        # Alternatives (a figure or null, one object or another): the nulls apart, then the
        # rest as a column under each alternative in turn (a call per value took seconds).
        if None in shape:
            values = [v for v in values if v is not None]
        rest = [s for s in shape if s is not None]
        if not values or any(_all_have_shape(values, s) for s in rest):
            return True
    return all(has_shape(v, shape) for v in values)
