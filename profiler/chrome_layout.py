"""Chrome trace layout: where every event of a profile goes in a Chrome trace, as plain data.

The first of the Chrome trace export's two steps: :func:`chrome_layout` decides rows, times,
nesting, flows, counters and metadata and returns them as numpy columns and dicts; the second,
:mod:`.chrome_trace`, encodes that as JSON text without deciding anything. Names are Kineto's,
so that trace tools read the result unchanged:

* **CPU process** (``pid`` = the profiled process's id): one row per logical thread (``tid`` =
  thread id, from 1, named "CPU thread N"). Forward ops and backward nodes are ``cpu_op``
  complete events, user ranges (``record_function``, ``ProfilerStep#N``, module ranges)
  ``user_annotation``; memory records are ``[memory]`` instant events on the allocating thread.
* **GPU process** per device (``pid`` = device index + 1, because a pid of 0 reads as "no
  process" in Perfetto; ``args.device`` holds the index itself): one row per stream (``tid`` =
  a small stream id, 7 for the default stream as in Kineto, named "cuda:0 stream 7"). The
  device work (:mod:`.device`: a torch trace's activities, a gradtrace profile's innermost op
  intervals) is ``kernel`` events; a device interval that contains other ones (a composite op,
  a backward node around its ops) is ``gpu_user_annotation``, so that summing ``kernel``
  durations does not count time twice. No ``cuda_runtime`` events: the profile
  records no launch calls, so the ``ac2g`` flow starts at the CPU op itself.
* **Flows**: ``fwdbwd`` from each forward op to every backward node that ran its node (the
  profile's exact (sequence_nr, thread) correlation), ``ac2g`` from each CPU op to its device
  interval. Each end sits at a time inside its slice that no child covers, so that a reader
  binding a flow to "the enclosing slice at ts" binds it to that slice.
* **Counters**: allocated bytes per device (``"ph":"C"``), on the device's process, coalesced
  at the trace's microsecond resolution: of the memory records of one device that fall in the
  same microsecond (the integer part of ``ts``), only the last becomes a counter sample — at its
  own exact ``ts``, holding the value at the end of that microsecond — and a sample that repeats
  the device's previous value is left out. The first record that reaches the device's peak
  stays a sample too, so the track's maximum is the true peak. Every record is still an
  instant with its own ``Total Allocated``; only the counter track is thinned.

Times are integer nanoseconds relative to ``baseTimeNanoseconds`` (wall clock of the earliest
event when the profile knows it). Rows nest perfectly: partially overlapping ranges are
clamped into their enclosing range (:func:`~.nesting.nest_rows`), and ends are then trimmed by
1 ns wherever a reader adding ``ts + dur`` in floating point, or truncating each to integer ns
as Perfetto does, would see a child end after its parent or a slice end after its next sibling
starts. Both repairs are counted in ``otherData``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .device import device_work_rows, has_device_interval
from .nesting import nest_rows
from .records import Scope, device_index

if TYPE_CHECKING:  # pragma: no cover
    from .data import ProfileData

__all__ = ["ChromeLayout", "CpuEvents", "DeviceEvents", "Flows", "MemoryInstants", "CounterSamples",
           "chrome_layout", "SCHEMA_VERSION", "DEFAULT_STREAM_TID", "CAT_FWDBWD", "CAT_AC2G"]

SCHEMA_VERSION = 1
DEFAULT_STREAM_TID = 7          # Kineto's id for the default (legacy) CUDA stream
CAT_FWDBWD = "fwdbwd"
CAT_AC2G = "ac2g"


# --------------------------------------------------------------------------- the layout


@dataclass(frozen=True)
class CpuEvents:
    """One complete event per profile event, in profile order (``External id`` = index + 1).

    ``ts``/``dur`` are ns from the trace's base; ``user_scope`` picks ``user_annotation`` over
    ``cpu_op``; ``sequence_nr`` is -1 for none, ``fwd_thread_id`` 0 unless a backward node;
    ``shapes_id``/``dtypes_id``/``stack_id`` index the string table (-1: none; ``stack_id`` is
    None when the profile has no stacks); ``correlation`` is -1 without a device interval."""

    pid: int
    tid: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    name_id: np.ndarray
    user_scope: np.ndarray
    sequence_nr: np.ndarray
    fwd_thread_id: np.ndarray
    shapes_id: np.ndarray
    dtypes_id: np.ndarray
    stack_id: np.ndarray | None
    correlation: np.ndarray


@dataclass(frozen=True)
class DeviceEvents:
    """One complete event per device interval; ``event`` is the profile event it belongs to
    (``External id`` and ``correlation`` = event + 1), ``tid`` the stream row, ``device`` the
    device index, ``is_kernel`` False for an interval containing others."""

    event: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    device: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    name_id: np.ndarray
    is_kernel: np.ndarray


@dataclass(frozen=True)
class Flows:
    """Flow arrows of one category: start (``ph`` s) at ``src``, finish (``ph`` f) at ``dst``."""

    category: str
    id: np.ndarray
    src_pid: np.ndarray
    src_tid: np.ndarray
    src_ts: np.ndarray
    dst_pid: np.ndarray
    dst_tid: np.ndarray
    dst_ts: np.ndarray


@dataclass(frozen=True)
class MemoryInstants:
    """One ``[memory]`` instant per memory record, on the CPU process; ``device_type`` 1 for
    CUDA, 0 otherwise, ``device_index`` -1 off CUDA (Kineto's fields)."""

    pid: int
    tid: np.ndarray
    ts: np.ndarray
    device_type: np.ndarray
    device_index: np.ndarray
    addr: np.ndarray
    bytes: np.ndarray
    total_allocated: np.ndarray


@dataclass(frozen=True)
class CounterSamples:
    """Allocated-bytes counter samples; ``device_name_id`` indexes the string table (the
    counter's series name)."""

    pid: np.ndarray
    tid: np.ndarray
    ts: np.ndarray
    device_name_id: np.ndarray
    value: np.ndarray


@dataclass(frozen=True)
class ChromeLayout:
    """A profile laid out as Chrome trace events, before any JSON (see the module docstring).

    Attributes:
        header: every top-level key except ``traceEvents``.
        stats: counts — events per kind (``counter_samples``: allocated-bytes samples left
            after coalescing), ``clamped_overlaps``, ``rounding_fixes``.
        strings: the profile's string table, which the ``*_id`` columns index.
        metadata_events: ``"ph":"M"`` events (process and thread names, sort order), as dicts.
        cpu, device, fwdbwd, ac2g, memory, counters: the events, in the order they are written.
    """

    header: dict
    stats: dict
    strings: list
    metadata_events: list
    cpu: CpuEvents
    device: DeviceEvents
    fwdbwd: Flows
    ac2g: Flows
    memory: MemoryInstants
    counters: CounterSamples


def chrome_layout(data: "ProfileData", distributed_info: dict | None = None,
                  trace_name: str | None = None) -> ChromeLayout:
    """Lay a profile out as Chrome trace events (see the module docstring).

    Args:
        data: the profile (live or loaded: only its columns, strings, metadata and analysis).
        distributed_info: ``distributedInfo`` (default ``{"rank": 0, "world_size": 1}``, or
            ``metadata["distributed_info"]`` when the profile has one).
        trace_name: ``traceName`` (default: from the metadata, else "gradtrace profile").
    Returns:
        A :class:`ChromeLayout`.
    """
    cols, mem, meta, strings, a = (data.event_columns, data.memory_columns, data.metadata,
                                   data.strings, data.analysis)
    n = data.n_events
    scope = cols["scope"]

    # ---- Devices: events with a device interval, and the devices of them and of memory.
    dev_start = cols["device_start_ns"].astype(np.int64)
    dev_end = cols["device_end_ns"].astype(np.int64)
    gpu = np.flatnonzero(has_device_interval(cols))
    dev_name = {int(d): strings[int(d)] for d in np.unique(cols["device_id"][gpu])}
    gpu_dev = np.array([device_index(dev_name[int(d)]) for d in cols["device_id"][gpu]],
                       dtype=np.int64).reshape(-1)
    mem_dev_names = {int(d): strings[int(d)] for d in np.unique(mem["device_id"])}
    devices = sorted({int(i) for i in gpu_dev.tolist()}
                     | {device_index(s) for s in mem_dev_names.values() if s.startswith("cuda")})

    # ---- Rows: pids and tids.
    thread, mem_thread, tid_shift = _shifted_threads(cols["thread_id"], mem["thread_id"])
    cpu_threads = sorted(set(np.unique(thread).tolist()) | set(np.unique(mem_thread).tolist()))
    gpu_pid, cpu_pid = _pids(meta, devices)
    stream_tid, stream_rows, stream_base = _stream_rows(cols["stream"][gpu].astype(np.int64), gpu_dev,
                                                        devices, cpu_threads)

    # ---- One table of intervals (CPU events, then device intervals), nested per row.
    m = len(gpu)
    iv_start = np.concatenate([cols["start_ns"].astype(np.int64), dev_start[gpu]])
    iv_end = np.concatenate([cols["end_ns"].astype(np.int64), dev_end[gpu]])
    iv_pid = np.concatenate([np.full(n, cpu_pid, dtype=np.int64),
                             np.array([gpu_pid[d] for d in gpu_dev.tolist()], dtype=np.int64)])
    iv_tid = np.concatenate([thread, stream_tid])
    times = [iv_start, mem["time_ns"].astype(np.int64)]
    base_ns = int(min(t.min() for t in times if len(t))) if (n or len(mem["time_ns"])) else 0
    iv_start = iv_start - base_ns
    iv_end = iv_end - base_ns
    _, row = np.unique(iv_pid * (2**32) + iv_tid, return_inverse=True)
    row = row.reshape(-1).astype(np.int64)
    # CPU rows are the analysis' threads: reuse its nesting unless ranges overlap partially.
    # nest_rows clamps ends in place, through these views of iv_end.
    cpu_parent, clamped_cpu = nest_rows(iv_start[:n], iv_end[:n], row[:n],
                                        a.parent if len(a.partial_overlaps) == 0 else None)
    gpu_parent, clamped_gpu = nest_rows(iv_start[n:], iv_end[n:], row[n:])
    parent = np.concatenate([cpu_parent, np.where(gpu_parent >= 0, gpu_parent + n, -1)])
    prev = _siblings(iv_start, iv_end, parent, row)
    rounding = _fix_reader_rounding(iv_start, iv_end, parent, prev)
    iv_dur = iv_end - iv_start
    # The device work is kernels; a device interval around others is an annotation
    # (profiler.device), so that summing ``kernel`` durations counts no time twice.
    is_kernel = np.isin(gpu, device_work_rows(cols, data.gpu_columns))

    # ---- Flows: fwdbwd (forward op -> backward node), ac2g (CPU op -> device interval).
    bwd = np.flatnonzero(a.forward_event >= 0)
    fwd = a.forward_event[bwd]
    k = len(bwd)
    flow_pts = _flow_points(iv_start, iv_end, parent,
                            np.concatenate([fwd, bwd, gpu, n + np.arange(m)]).astype(np.int64))
    dev_rows = n + np.arange(m)
    fwdbwd = Flows(CAT_FWDBWD, n + m + bwd + 1, iv_pid[fwd], iv_tid[fwd], flow_pts[:k],
                   iv_pid[bwd], iv_tid[bwd], flow_pts[k:2 * k])
    ac2g = Flows(CAT_AC2G, gpu + 1, iv_pid[gpu], iv_tid[gpu], flow_pts[2 * k:2 * k + m],
                 iv_pid[dev_rows], iv_tid[dev_rows], flow_pts[2 * k + m:])

    # ---- Events.
    with_stack = bool(meta.get("with_stack")) or bool((cols["stack_id"] >= 0).any())
    correlation = np.full(n, -1, dtype=np.int64)
    correlation[gpu] = gpu + 1
    cpu = CpuEvents(
        pid=cpu_pid, tid=thread, ts=iv_start[:n], dur=iv_dur[:n],
        name_id=cols["name_id"].astype(np.int64),
        user_scope=np.clip(scope.astype(np.int64), 0, 2) == Scope.USER_SCOPE,
        sequence_nr=cols["sequence_nr"].astype(np.int64),
        fwd_thread_id=np.where(scope == Scope.BACKWARD_FUNCTION, cols["fwd_thread_id"], 0).astype(np.int64),
        shapes_id=cols["shapes_id"].astype(np.int64), dtypes_id=cols["dtypes_id"].astype(np.int64),
        stack_id=a.stack_id.astype(np.int64) if with_stack else None, correlation=correlation)
    device = DeviceEvents(event=gpu, pid=iv_pid[n:], tid=stream_tid, device=gpu_dev, ts=iv_start[n:],
                          dur=iv_dur[n:], name_id=cols["name_id"][gpu].astype(np.int64),
                          is_kernel=is_kernel)
    memory, counters = _memory(mem, mem_thread, base_ns, mem_dev_names, cpu_pid, gpu_pid,
                               stream_rows, stream_base, cpu_threads)

    stats = {
        "cpu_events": int(n), "device_events": int(m), "kernels": int(device.is_kernel.sum()),
        "fwdbwd_flows": int(k), "ac2g_flows": int(m), "memory_events": int(len(mem["time_ns"])),
        "clamped_overlaps": int(clamped_cpu + clamped_gpu), "rounding_fixes": int(rounding),
        "counter_samples": int(len(counters.ts)),
    }
    return ChromeLayout(
        header=_header(meta, devices, base_ns, stats, distributed_info, trace_name), stats=stats,
        strings=strings,
        metadata_events=_metadata_events(meta, cpu_pid, cpu_threads, tid_shift, gpu_pid, devices,
                                         stream_rows, stream_base),
        cpu=cpu, device=device, fwdbwd=fwdbwd, ac2g=ac2g, memory=memory, counters=counters)


# --------------------------------------------------------------------------- rows


def _shifted_threads(thread_id, mem_thread_id) -> tuple[np.ndarray, np.ndarray, int]:
    """Thread ids of events and memory records as tids, and the shift applied.

    Perfetto reads tid 0 as "no thread": ids are shifted up when a profile has ids < 1 (the
    collector numbers threads from 1, so this is for hand-made profiles).
    """
    thread = thread_id.astype(np.int64)
    mem_thread = mem_thread_id.astype(np.int64)
    lowest = min([1] + np.unique(thread).tolist()[:1] + np.unique(mem_thread).tolist()[:1])
    tid_shift = 1 - lowest
    return thread + tid_shift, mem_thread + tid_shift, tid_shift


def _pids(meta: dict, devices: list[int]) -> tuple[dict[int, int], int]:
    """(pid per device index, CPU pid): device index + 1, and the profiled process's id unless
    it is missing, out of range or taken by a device."""
    gpu_pid = {d: d + 1 for d in devices}
    cpu_pid = meta.get("pid")
    if type(cpu_pid) is not int or not 0 < cpu_pid < 2**31:   # not bool: "pid": True is no JSON
        cpu_pid = 1
    while cpu_pid in gpu_pid.values():
        cpu_pid = max(gpu_pid.values()) + 1
    return gpu_pid, cpu_pid


def _stream_rows(raw_stream, gpu_dev, devices, cpu_threads):
    """Stream tids: 7 for the default stream, then 8, 9... in order of first use; shifted above
    every CPU thread id so that no tid means two rows.

    Returns:
        (tid per device interval, {(device, tid): raw stream handle}, lowest stream tid).
    """
    stream_base = max([DEFAULT_STREAM_TID] + [t + 1 for t in cpu_threads])
    stream_tid = np.zeros(len(raw_stream), dtype=np.int64)
    stream_rows: dict[tuple[int, int], int] = {}
    for d in devices:
        on_d = np.flatnonzero(gpu_dev == d)
        handles, first = np.unique(raw_stream[on_d], return_index=True)
        ranked = sorted(zip(handles.tolist(), first.tolist()), key=lambda hf: (hf[0] != 0, hf[1]))
        label = {h: stream_base + k + (0 if 0 in handles else 1) for k, (h, _) in enumerate(ranked)}
        for h, lab in label.items():
            stream_rows[(d, lab)] = h
        stream_tid[on_d] = np.array([label[h] for h in raw_stream[on_d].tolist()], dtype=np.int64)
    return stream_tid, stream_rows, stream_base


def _stream_tids(stream_rows: dict, device: int) -> list[int]:
    return sorted(lab for (dd, lab) in stream_rows if dd == device)


def _metadata_events(meta, cpu_pid, cpu_threads, tid_shift, gpu_pid, devices, stream_rows,
                     stream_base) -> list[dict]:
    """Process and thread names and sort order: CPU first, then the devices by index."""
    def event(name, pid, tid, args):
        return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args}

    first_cpu_tid = cpu_threads[0] if cpu_threads else 1
    proc = f"CPU (pid {meta['pid']})" if type(meta.get("pid")) is int else "CPU"
    out = [event("process_name", cpu_pid, first_cpu_tid, {"name": proc}),
           event("process_sort_index", cpu_pid, first_cpu_tid, {"sort_index": 0})]
    for t in cpu_threads:
        out.append(event("thread_name", cpu_pid, t, {"name": f"CPU thread {t - tid_shift}"}))
        out.append(event("thread_sort_index", cpu_pid, t, {"sort_index": int(t)}))
    for d in devices:
        tids = _stream_tids(stream_rows, d)
        first = (tids or [stream_base])[0]
        out.append(event("process_name", gpu_pid[d], first, {"name": f"cuda:{d}"}))
        out.append(event("process_sort_index", gpu_pid[d], first, {"sort_index": d + 1}))
        for lab in tids:
            out.append(event("thread_name", gpu_pid[d], lab, {"name": f"cuda:{d} stream {lab}"}))
            out.append(event("thread_sort_index", gpu_pid[d], lab, {"sort_index": lab}))
    return out


# --------------------------------------------------------------------------- header


def _header(meta, devices, base_ns, stats, distributed_info, trace_name) -> dict:
    wall = meta.get("wall_clock_base_ns")
    t0 = meta.get("start_time_ns")
    base_time = (int(wall) + base_ns - int(t0)) if isinstance(wall, int) and isinstance(t0, int) else base_ns
    dist = dict(distributed_info if distributed_info is not None
                else meta.get("distributed_info") or {"rank": 0, "world_size": 1})
    return {
        "schemaVersion": SCHEMA_VERSION,
        "deviceProperties": _device_properties(meta, [(d, f"cuda:{d}") for d in devices]),
        "distributedInfo": dist,
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": int(base_time),
        "traceName": str(trace_name if trace_name is not None
                         else meta.get("trace_name", "gradtrace profile")),
        "otherData": {"exporter": "gradtrace", "gradtrace_version": meta.get("gradtrace_version"),
                      "clamped_overlaps": stats["clamped_overlaps"],
                      "rounding_fixes": stats["rounding_fixes"]},
    }


def _device_properties(metadata: dict, used: list[tuple[int, str]]) -> list[dict]:
    """Kineto's ``deviceProperties`` from ``metadata["device_properties"]`` (a dict keyed by
    device string or a list of dicts), with common spellings mapped to Kineto's keys; a device
    used but not described gets ``{"id", "name"}``."""
    given = metadata.get("device_properties") or {}
    if isinstance(given, list):
        given = {str(p.get("device", f"cuda:{p.get('id', k)}")): p for k, p in enumerate(given)
                 if isinstance(p, dict)}
    aliases = {"total_memory": "totalGlobalMem", "totalGlobalMem": "totalGlobalMem",
               "multi_processor_count": "numSms", "multiProcessorCount": "numSms",
               "numSms": "numSms", "major": "computeMajor", "computeMajor": "computeMajor",
               "minor": "computeMinor", "computeMinor": "computeMinor"}
    out = []
    for index, device in sorted(set(used) | {(device_index(d), d) for d in given
                                             if str(d).startswith("cuda")}):
        props = given.get(device, {})
        entry = {"id": index, "name": str(props.get("name", device))}
        cc = props.get("compute_capability")
        if isinstance(cc, (list, tuple)) and len(cc) == 2:
            entry["computeMajor"], entry["computeMinor"] = int(cc[0]), int(cc[1])
        for key, value in props.items():
            if key in ("name", "id", "device", "compute_capability"):
                continue
            entry[aliases.get(key, key)] = value
        out.append(entry)
    return out


# --------------------------------------------------------------------------- memory


def _memory(mem, mem_thread, base_ns, mem_dev_names, cpu_pid, gpu_pid, stream_rows, stream_base,
            cpu_threads) -> tuple[MemoryInstants, CounterSamples]:
    """Instants for every memory record; counter samples (see the module docstring) on the
    device's process: a CUDA device's first stream row, the CPU's first thread."""
    # A kind record only says what an allocation holds: torch's trace has no such event.
    kept = np.flatnonzero(mem["category"] == 0)
    if len(kept) < len(mem["bytes"]):
        mem, mem_thread = {k: v[kept] for k, v in mem.items()}, np.asarray(mem_thread)[kept]
    mem_dev = mem["device_id"].astype(np.int64)
    size = max([0] + list(mem_dev_names)) + 1
    type_tbl = np.zeros(size, dtype=np.int64)
    index_tbl = np.full(size, -1, dtype=np.int64)
    pid_tbl = np.zeros(size, dtype=np.int64)
    tid_tbl = np.zeros(size, dtype=np.int64)
    for d, name in mem_dev_names.items():
        if name.startswith("cuda"):
            di = device_index(name)
            type_tbl[d], index_tbl[d] = 1, di
            pid_tbl[d], tid_tbl[d] = gpu_pid[di], (_stream_tids(stream_rows, di) or [stream_base])[0]
        else:
            pid_tbl[d], tid_tbl[d] = cpu_pid, cpu_threads[0]
    ts = mem["time_ns"].astype(np.int64) - base_ns
    total = mem["total_allocated"].astype(np.int64)
    instants = MemoryInstants(pid=cpu_pid, tid=mem_thread, ts=ts, device_type=type_tbl[mem_dev],
                              device_index=index_tbl[mem_dev], addr=mem["addr"],
                              bytes=mem["bytes"], total_allocated=total)
    rec = _counter_samples(ts, mem_dev, total)
    counters = CounterSamples(pid=pid_tbl[mem_dev[rec]], tid=tid_tbl[mem_dev[rec]], ts=ts[rec],
                              device_name_id=mem_dev[rec], value=total[rec])
    return instants, counters


# --------------------------------------------------------------------------- nesting repair


def _siblings(start, end, parent, row) -> np.ndarray:
    """For each interval, the previous one (in start order) with the same row and parent."""
    n = len(parent)
    by = np.lexsort((-end, start, parent, row))
    prev = np.full(n, -1, dtype=np.int64)
    same = (parent[by][1:] == parent[by][:-1]) & (row[by][1:] == row[by][:-1])
    prev[by[1:][same]] = by[:-1][same]
    return prev


def _fix_reader_rounding(start, end, parent, prev, max_rounds: int = 64) -> int:
    """Trim ends (in place) by 1 ns where a reader's arithmetic would break the nesting.

    Two reader models are checked: (a) ``ts + dur`` in float64 microseconds (chrome://tracing,
    HTA), (b) ``int(ts * 1000) + int(dur * 1000)`` (Perfetto's JSON importer). Under both, a
    child must end no later than its parent and a slice no later than its next sibling starts.
    Returns the number of intervals trimmed.
    """
    fixed = np.zeros(len(start), dtype=bool)
    has_parent = parent >= 0
    has_prev = prev >= 0
    pp = np.maximum(parent, 0)
    pv = np.maximum(prev, 0)
    ts_f = start / 1000.0
    start_b = (ts_f * 1000.0).astype(np.int64)
    for _ in range(max_rounds):
        dur_f = (end - start) / 1000.0
        end_a = ts_f + dur_f
        end_b = start_b + (dur_f * 1000.0).astype(np.int64)
        bad_child = has_parent & ((end_a > end_a[pp]) | (end_b > end_b[pp]) | (end > end[pp]))
        nxt = np.flatnonzero(has_prev)
        p = pv[nxt]
        bad_prev = (end_a[p] > ts_f[nxt]) | (end_b[p] > start_b[nxt]) | (end[p] > start[nxt])
        viol = np.union1d(np.flatnonzero(bad_child), p[bad_prev])
        if len(viol) == 0:
            break
        shrink = viol[end[viol] > start[viol]]
        if len(shrink) == 0:
            break
        end[shrink] -= 1
        fixed[shrink] = True
    return int(np.count_nonzero(fixed))


def _flow_points(start, end, parent, who: np.ndarray) -> np.ndarray:
    """A time inside each interval ``who`` that no child covers, so that a flow event bound
    to "the enclosing slice at ts" binds to this interval and not to a child: its start,
    unless a child starts there too; then 1 ns after the children that cover it."""
    pts = start[who].copy()
    n = len(start)
    has = parent >= 0
    first_child = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first_child, parent[has], start[has])
    clash = np.flatnonzero(first_child[who] <= start[who])
    if len(clash) == 0:
        return pts
    by_parent = np.argsort(parent, kind="stable")
    sorted_parent = parent[by_parent]
    for k in clash.tolist():
        e = int(who[k])
        lo, hi = np.searchsorted(sorted_parent, [e, e + 1])
        kids = sorted((int(start[c]), int(end[c])) for c in by_parent[lo:hi].tolist())
        p = int(start[e])
        for cs, ce in kids:
            if cs > p:
                break
            p = max(p, ce + 1)
        pts[k] = p if p < int(end[e]) else int(start[e])
    return pts


def _counter_samples(time_ns: np.ndarray, device: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Which memory records become allocated-bytes counter samples (indices, ascending).

    Per device, in record order: the last record of each microsecond (``time_ns // 1000``,
    the integer part of the trace's ``ts``), whose value is the device's total at the end of
    that microsecond; then, among those, a sample equal to the device's previous sample is
    dropped (the track already holds that value). The first record reaching the device's
    maximum is kept in any case, so that the track's peak is the true one. At microsecond
    resolution the counter track is thus unchanged: what is left out is only a value held
    for less than a microsecond, never the peak.
    """
    devices = np.unique(device)
    picked = []
    for d in devices.tolist():
        idx = np.flatnonzero(device == d) if len(devices) > 1 else None
        t = time_ns if idx is None else time_ns[idx]
        v = total if idx is None else total[idx]
        us = t // 1000
        keep = np.ones(len(t), dtype=bool)
        np.not_equal(us[1:], us[:-1], out=keep[:-1])     # last record of its microsecond
        del us
        keep[int(np.argmax(v))] = True                     # argmax: the first at the peak
        kept = np.flatnonzero(keep)
        values = v[kept]
        kept = kept[np.r_[True, values[1:] != values[:-1]]]   # not a repeat of the previous
        picked.append(kept if idx is None else idx[kept])
    if not picked:
        return np.zeros(0, dtype=np.int64)
    return np.sort(np.concatenate(picked))
