"""Chrome trace export: a profile as Kineto-style JSON for Perfetto, chrome://tracing and HTA.

:func:`chrome_trace` builds a :class:`ChromeTrace` from a :class:`~profiler.data.ProfileData`
(live or loaded: it reads only the columns, strings, metadata and analysis). The trace is data —
a header dict plus the events, produced chunk by chunk — and :func:`write_json` is the one
writer that puts it in a file (``.json``, or gzip for ``.json.gz``).

Layout (names as Kineto writes them, so trace tools read it unchanged):

* **CPU process** (``pid`` = the profiled process's id): one row per logical thread (``tid`` =
  thread id, from 1, named "CPU thread N"). Forward ops and backward nodes are ``cpu_op``
  complete events, user ranges (``record_function``, ``ProfilerStep#N``, module ranges)
  ``user_annotation``; memory records are ``[memory]`` instant events on the allocating thread.
* **GPU process** per device (``pid`` = device index + 1, because a pid of 0 reads as "no
  process" in Perfetto; ``args.device`` holds the index itself): one row per stream (``tid`` =
  a small stream id, 7 for the default stream as in Kineto, named "cuda:0 stream 7"). Device
  intervals of ops are ``kernel`` events; a device interval that contains other ones (a
  composite op, a backward node around its ops) is ``gpu_user_annotation``, so that summing
  ``kernel`` durations does not count time twice. No ``cuda_runtime`` events: the profile
  records no launch calls, so the ``ac2g`` flow starts at the CPU op itself.
* **Flows**: ``fwdbwd`` from each forward op to every backward node that ran its node (the
  profile's exact (sequence_nr, thread) correlation), ``ac2g`` from each CPU op to its device
  interval.
* **Counters**: allocated bytes per device (``"ph":"C"``), on the device's process, coalesced
  at the trace's microsecond resolution: of the memory records of one device that fall in the
  same microsecond (the integer part of ``ts``), only the last becomes a counter sample — at its
  own exact ``ts``, holding the value at the end of that microsecond — and a sample that repeats
  the device's previous value is left out. The first record that reaches the device's peak
  stays a sample too, so the track's maximum is the true peak. Every record is still an
  instant with its own ``Total Allocated``; only the counter track is thinned.

Times: ``ts``/``dur`` are microseconds written exactly from integer nanoseconds (no float
rounding): at most three decimals, without trailing zeros (``12.5`` for 12,500 ns, ``3`` for
3,000 ns; every JSON reader parses them to the same double as ``12.500``/``3.000``), ``ts``
relative to ``baseTimeNanoseconds`` (wall clock of the earliest event when the profile knows
it). Rows nest perfectly: partially overlapping ranges are clamped into their enclosing range,
and ends are then trimmed by 1 ns wherever a reader adding ``ts + dur`` in floating point, or
truncating each to integer ns as Perfetto does, would see a child end after its parent or a
slice end after its next sibling starts. Both repairs are counted in ``otherData``.

Size: one compact JSON object per line, no spaces, and no field a reader defaults the same
way: ``[memory]`` instants carry no ``"s"`` (thread scope is the Trace Event Format's default
in chrome://tracing and Perfetto alike).

Speed: per-event text is assembled with f-strings from numpy columns formatted once per
chunk; every string (names, shapes, stacks) goes through :func:`json_string` once per string
id. A million-event profile writes in a few seconds with a bounded amount of extra memory.
"""
from __future__ import annotations

import gzip
import json
import os
import queue
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator

import numpy as np

from .nesting import nest_intervals
from .records import Scope, valid_text

if TYPE_CHECKING:  # pragma: no cover
    from .data import ProfileData

__all__ = ["ChromeTrace", "chrome_trace", "export_chrome_trace", "write_json", "open_output",
           "json_string", "DEFAULT_STREAM_TID"]

SCHEMA_VERSION = 1
DEFAULT_STREAM_TID = 7          # Kineto's id for the default (legacy) CUDA stream
CHUNK_EVENTS = 32_768           # events encoded per chunk (bounds the writer's memory)
GZIP_LEVEL = 1                  # fastest zlib level: ~4x faster than the default 6, ~15% more bytes
# Fraction of a microsecond per ns remainder, trailing zeros dropped: 0 -> "", 500 -> ".5".
_FRAC = np.array([f".{i:03d}".rstrip("0").rstrip(".") for i in range(1000)], dtype=object)

# Categories (Kineto's spelling).
CAT_CPU_OP = "cpu_op"
CAT_USER_ANNOTATION = "user_annotation"
CAT_KERNEL = "kernel"
CAT_GPU_USER_ANNOTATION = "gpu_user_annotation"
CAT_FWDBWD = "fwdbwd"
CAT_AC2G = "ac2g"
CAT_CPU_INSTANT = "cpu_instant_event"
MEMORY_EVENT_NAME = "[memory]"
MEMORY_COUNTER_NAME = "Allocated bytes"


# --------------------------------------------------------------------------- JSON pieces


_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def json_string(s: str) -> str:
    """``s`` as a JSON string literal, non-ASCII kept as UTF-8 (Perfetto's JSON importer shows
    ``\\uXXXX`` escapes literally). Control characters, quotes and backslashes are escaped by
    the json encoder; lone surrogates, which UTF-8 cannot hold, become U+FFFD."""
    text = _encoder.encode(s)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = _encoder.encode(valid_text(s))
    return text


def _dumps(obj) -> str:
    return _encoder.encode(_utf8_safe(obj))


def _utf8_safe(obj):
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
            return obj
        except UnicodeEncodeError:
            return valid_text(obj)
    if isinstance(obj, dict):
        return {_utf8_safe(k): _utf8_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_utf8_safe(v) for v in obj]
    return obj


def _compact_json(text: str) -> str:
    """Re-encode a JSON document from the string table (shapes, dtypes) without spaces."""
    try:
        return _dumps(json.loads(text))
    except ValueError:
        return json_string(text)


def _us_parts(ns: np.ndarray) -> tuple[list, list]:
    """Integer ns -> (whole microseconds, fraction text) lists; exact, no float involved."""
    q, r = np.divmod(ns, 1000)
    return q.tolist(), _FRAC[r].tolist()


class _Lookup:
    """Per-string-id text fragments, encoded once: ``table[id + 1]`` ('' for id -1)."""

    def __init__(self, strings: list[str], ids: np.ndarray, make):
        self.table = np.full(len(strings) + 1, "", dtype=object)
        for sid in np.unique(ids).tolist():
            if sid >= 0:
                self.table[sid + 1] = make(strings[sid])

    def __call__(self, ids: np.ndarray) -> np.ndarray:
        return self.table[ids + 1]


# --------------------------------------------------------------------------- writer


def open_output(path):
    """A binary file for ``path``: gzip-compressed when the name ends in ``.gz``."""
    path = Path(path)
    if path.suffix == ".gz":
        return gzip.open(path, "wb", compresslevel=GZIP_LEVEL)
    return open(path, "wb")


class _BackgroundWriter:
    """Writes byte chunks to a file from a second thread, so that compressing (zlib) and
    writing, which release the GIL, overlap with encoding the next chunk. At most
    ``depth`` chunks wait in the queue, which bounds the memory held."""

    def __init__(self, f, depth: int = 3):
        self._f = f
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="gradtrace-trace-writer", daemon=True)
        self._thread.start()

    def _run(self):
        while True:
            data = self._queue.get()
            if data is None:
                return
            if self._error is None:
                try:
                    self._f.write(data)
                except BaseException as exc:  # re-raised in the caller's thread
                    self._error = exc

    def write(self, data: bytes) -> None:
        if self._error is not None:
            raise self._error
        self._queue.put(data)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error


def write_json(path, head: dict, array_key: str | None = None,
               chunks: Iterable[str] = ()) -> int:
    """The one writer of the JSON exports: ``head`` (a dict, json-encoded) with, when
    ``array_key`` is given, a last key holding a JSON array streamed from ``chunks`` (each a
    comma-separated run of already encoded elements). Written as UTF-8; gzip for ``.gz``.

    Returns:
        Number of (uncompressed) bytes written.
    """
    text = _dumps(head)
    if array_key is None:
        data = text.encode("utf-8")
        with open_output(path) as f:
            f.write(data)
        return len(data)
    with open_output(path) as f:
        sink = _BackgroundWriter(f)
        try:
            data = (text[:-1] + ("," if len(head) else "") + _dumps(array_key) + ":[\n").encode("utf-8")
            sink.write(data)
            written = len(data)
            first = True
            for chunk in chunks:
                if not chunk:
                    continue
                data = (chunk if first else ",\n" + chunk).encode("utf-8")
                first = False
                sink.write(data)
                written += len(data)
            sink.write(b"\n]}\n")
            written += 4
        finally:
            sink.close()
    return written


# --------------------------------------------------------------------------- nesting repair


def _siblings(start, end, parent, row) -> np.ndarray:
    """For each interval, the previous one (in start order) with the same row and parent."""
    n = len(parent)
    by = np.lexsort((-end, start, parent, row))
    prev = np.full(n, -1, dtype=np.int64)
    same = (parent[by][1:] == parent[by][:-1]) & (row[by][1:] == row[by][:-1])
    prev[by[1:][same]] = by[:-1][same]
    return prev


def _nest_rows(start, end, row, parent=None) -> tuple[np.ndarray, int]:
    """Parents of intervals nested per row, after clamping partial overlaps (counted).

    ``parent`` may be passed when already known (the analysis' CPU nesting) and is used
    unless the intervals overlap partially.
    """
    if parent is not None and len(start) and not _has_partial_overlap(start, end, parent):
        return parent, 0
    nest = nest_intervals(start, end, row)
    if not len(nest.partial_overlaps):
        return nest.parent, 0
    clamped = _clamp_partial_overlaps(start, end, row, nest)
    return nest_intervals(start, end, row).parent, clamped


def _has_partial_overlap(start, end, parent) -> bool:
    has = parent >= 0
    return bool(np.any(end[has] > end[parent[has]]))


def _clamp_partial_overlaps(start, end, row, nest) -> int:
    """Clamp each range that starts inside an open range and ends after it to that range's
    end (a child's end never exceeds its parent's). Only rows with overlaps are walked."""
    bad_rows = np.unique(row[nest.partial_overlaps.reshape(-1)])
    order = nest.order
    in_bad = np.isin(row[order], bad_rows)
    idx = order[in_bad].tolist()
    rows = row[order][in_bad].tolist()
    starts = start[order][in_bad].tolist()
    ends = {i: e for i, e in zip(idx, end[order][in_bad].tolist())}
    clamped = 0
    stack: list[int] = []
    current = None
    for i, r, s in zip(idx, rows, starts):
        if r != current:
            stack, current = [], r
        while stack and ends[stack[-1]] <= s:
            stack.pop()
        if stack and ends[i] > ends[stack[-1]]:
            ends[i] = ends[stack[-1]]
            end[i] = ends[i]
            clamped += 1
        stack.append(i)
    return clamped


def _fix_reader_rounding(start, end, parent, prev, max_rounds: int = 64) -> int:
    """Trim ends by 1 ns where a reader's arithmetic would break the nesting.

    Two reader models are checked: (a) ``ts + dur`` in float64 microseconds (chrome://tracing,
    HTA), (b) ``int(ts * 1000) + int(dur * 1000)`` (Perfetto's JSON importer). Under both, a
    child must end no later than its parent and a slice no later than its next sibling starts.
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


# --------------------------------------------------------------------------- the trace


@dataclass
class ChromeTrace:
    """A profile laid out as Chrome trace events, ready to encode.

    Attributes:
        header: every top-level key except ``traceEvents`` (schemaVersion, deviceProperties,
            distributedInfo, displayTimeUnit, baseTimeNanoseconds, traceName, otherData).
        stats: counts — events per kind (``counter_samples``: allocated-bytes samples left
            after coalescing), ``clamped_overlaps``, ``rounding_fixes``.
    """

    header: dict
    stats: dict
    _sections: list = field(repr=False, default_factory=list)

    def iter_event_chunks(self, chunk_events: int = CHUNK_EVENTS) -> Iterator[str]:
        """Encoded events, a chunk at a time (comma-separated JSON objects)."""
        for section in self._sections:
            yield from section(chunk_events)

    def events(self) -> list[dict]:
        """All trace events as dicts (parsed back from the encoded chunks)."""
        out: list[dict] = []
        for chunk in self.iter_event_chunks():
            out.extend(json.loads("[" + chunk + "]"))
        return out

    def to_dict(self) -> dict:
        """The whole trace object, as a JSON parser would return it."""
        d = json.loads(_dumps(self.header))
        d["traceEvents"] = self.events()
        return d

    def write(self, path) -> int:
        """Write to ``path`` (``.json`` or ``.json.gz``); returns uncompressed bytes written."""
        return write_json(path, self.header, "traceEvents", self.iter_event_chunks())


def _device_index(name: str) -> int:
    if ":" in name:
        try:
            return int(name.rsplit(":", 1)[1])
        except ValueError:
            return 0
    return 0


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
    for index, device in sorted(set(used) | {(_device_index(d), d) for d in given
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


def chrome_trace(data: "ProfileData", distributed_info: dict | None = None,
                 trace_name: str | None = None) -> ChromeTrace:
    """Lay a profile out as Chrome trace events (see the module docstring).

    Args:
        data: the profile (``prof.profile_data`` or ``profiler.load(path)``).
        distributed_info: ``distributedInfo`` (default ``{"rank": 0, "world_size": 1}``, or
            ``metadata["distributed_info"]`` when the profile has one).
        trace_name: ``traceName`` (default: from the metadata, else "gradtrace profile").
    Returns:
        A :class:`ChromeTrace`; ``.write(path)`` writes it.
    """
    cols = data.event_columns
    mem = data.memory_columns
    meta = data.metadata
    strings = data.strings
    a = data.analysis
    n = data.n_events
    start = cols["start_ns"].astype(np.int64)
    end = cols["end_ns"].astype(np.int64)
    thread = cols["thread_id"].astype(np.int64)
    scope = cols["scope"]

    # ---- GPU rows: events with a device interval, per (device, stream).
    dev_start = cols["device_start_ns"].astype(np.int64)
    dev_end = cols["device_end_ns"].astype(np.int64)
    gpu = np.flatnonzero((dev_start >= 0) & (dev_end >= dev_start))
    dev_name = {int(d): strings[int(d)] for d in np.unique(cols["device_id"][gpu])}
    gpu_dev = np.array([_device_index(dev_name[int(d)]) for d in cols["device_id"][gpu]],
                       dtype=np.int64).reshape(-1)
    mem_dev_names = {int(d): strings[int(d)] for d in np.unique(mem["device_id"])}
    devices = sorted({int(i) for i in gpu_dev.tolist()}
                     | {_device_index(s) for s in mem_dev_names.values() if s.startswith("cuda")})
    mem_thread = mem["thread_id"].astype(np.int64)
    # Perfetto reads tid 0 as "no thread": shift thread ids up when a profile has ids < 1
    # (the collector numbers threads from 1, so this is for hand-made profiles).
    lowest = min([1] + np.unique(thread).tolist()[:1] + np.unique(mem_thread).tolist()[:1])
    tid_shift = 1 - lowest
    thread, mem_thread = thread + tid_shift, mem_thread + tid_shift
    cpu_threads = sorted(set(np.unique(thread).tolist()) | set(np.unique(mem_thread).tolist()))

    gpu_pid = {d: d + 1 for d in devices}
    cpu_pid = meta.get("pid")
    if type(cpu_pid) is not int or not 0 < cpu_pid < 2**31:   # not bool: "pid": True is no JSON
        cpu_pid = 1
    while cpu_pid in gpu_pid.values():
        cpu_pid = max(gpu_pid.values()) + 1

    # Stream ids: 7 for the default stream, then 8, 9... in order of first use; shifted above
    # every CPU thread id so that no tid means two rows.
    raw_stream = cols["stream"][gpu].astype(np.int64)
    stream_base = max([DEFAULT_STREAM_TID] + [t + 1 for t in cpu_threads])
    stream_tid = np.zeros(len(gpu), dtype=np.int64)
    stream_rows: dict[tuple[int, int], int] = {}
    for d in devices:
        on_d = np.flatnonzero(gpu_dev == d)
        handles, first = np.unique(raw_stream[on_d], return_index=True)
        ranked = sorted(zip(handles.tolist(), first.tolist()), key=lambda hf: (hf[0] != 0, hf[1]))
        label = {h: stream_base + k + (0 if 0 in handles else 1) for k, (h, _) in enumerate(ranked)}
        for h, lab in label.items():
            stream_rows[(d, lab)] = h
        stream_tid[on_d] = np.array([label[h] for h in raw_stream[on_d].tolist()], dtype=np.int64)

    # ---- One table of intervals (CPU events, then device intervals), nested per row.
    m = len(gpu)
    iv_start = np.concatenate([start, dev_start[gpu]])
    iv_end = np.concatenate([end, dev_end[gpu]])
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
    cpu_parent, clamped_cpu = _nest_rows(iv_start[:n], iv_end[:n], row[:n],
                                         a.parent if len(a.partial_overlaps) == 0 else None)
    gpu_parent, clamped_gpu = _nest_rows(iv_start[n:], iv_end[n:], row[n:])
    parent = np.concatenate([cpu_parent, np.where(gpu_parent >= 0, gpu_parent + n, -1)])
    clamped = clamped_cpu + clamped_gpu
    prev = _siblings(iv_start, iv_end, parent, row)
    rounding = _fix_reader_rounding(iv_start, iv_end, parent, prev)
    iv_dur = iv_end - iv_start

    # Device intervals containing other device intervals are annotations, not kernels.
    has_gpu_child = np.zeros(m, dtype=bool)
    has_gpu_child[gpu_parent[gpu_parent >= 0]] = True
    is_kernel = ~has_gpu_child

    # ---- Flows.
    fwd_of = a.forward_event
    bwd = np.flatnonzero(fwd_of >= 0)
    fwd = fwd_of[bwd]
    flow_pts = _flow_points(iv_start, iv_end, parent,
                            np.concatenate([fwd, bwd, gpu, n + np.arange(m)]).astype(np.int64))
    k = len(bwd)
    fwd_pt, bwd_pt, cpu_pt, gpu_pt = (flow_pts[:k], flow_pts[k:2 * k], flow_pts[2 * k:2 * k + m],
                                      flow_pts[2 * k + m:])

    # ---- Header.
    wall = meta.get("wall_clock_base_ns")
    t0 = meta.get("start_time_ns")
    base_time = (int(wall) + base_ns - int(t0)) if isinstance(wall, int) and isinstance(t0, int) else base_ns
    dist = dict(distributed_info if distributed_info is not None
                else meta.get("distributed_info") or {"rank": 0, "world_size": 1})
    stats = {
        "cpu_events": int(n), "device_events": int(m), "kernels": int(is_kernel.sum()),
        "fwdbwd_flows": int(k), "ac2g_flows": int(m), "memory_events": int(len(mem["time_ns"])),
        "clamped_overlaps": int(clamped), "rounding_fixes": int(rounding),
    }
    header = {
        "schemaVersion": SCHEMA_VERSION,
        "deviceProperties": _device_properties(meta, [(d, f"cuda:{d}") for d in devices]),
        "distributedInfo": dist,
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": int(base_time),
        "traceName": str(trace_name if trace_name is not None
                         else meta.get("trace_name", "gradtrace profile")),
        "otherData": {"exporter": "gradtrace", "gradtrace_version": meta.get("gradtrace_version"),
                      **{k_: v for k_, v in stats.items() if k_ in ("clamped_overlaps", "rounding_fixes")}},
    }

    pid_s = str(cpu_pid)
    names = _Lookup(strings, cols["name_id"], json_string)
    trace = ChromeTrace(header, stats)

    # ---- Metadata events (process and thread names, sort order).
    def metadata_section(chunk_events):
        lines = []
        first_cpu_tid = cpu_threads[0] if cpu_threads else 1
        proc = f"CPU (pid {meta['pid']})" if type(meta.get("pid")) is int else "CPU"
        lines.append(_meta_event("process_name", cpu_pid, first_cpu_tid, {"name": proc}))
        lines.append(_meta_event("process_sort_index", cpu_pid, first_cpu_tid, {"sort_index": 0}))
        for t in cpu_threads:
            lines.append(_meta_event("thread_name", cpu_pid, t, {"name": f"CPU thread {t - tid_shift}"}))
            lines.append(_meta_event("thread_sort_index", cpu_pid, t, {"sort_index": int(t)}))
        for d in devices:
            tids = sorted(lab for (dd, lab) in stream_rows if dd == d) or [stream_base]
            lines.append(_meta_event("process_name", gpu_pid[d], tids[0], {"name": f"cuda:{d}"}))
            lines.append(_meta_event("process_sort_index", gpu_pid[d], tids[0], {"sort_index": d + 1}))
            for lab in sorted(lab for (dd, lab) in stream_rows if dd == d):
                lines.append(_meta_event("thread_name", gpu_pid[d], lab,
                                         {"name": f"cuda:{d} stream {lab}"}))
                lines.append(_meta_event("thread_sort_index", gpu_pid[d], lab, {"sort_index": lab}))
        yield ",\n".join(lines)

    # ---- CPU complete events.
    cat_of_scope = np.array([CAT_CPU_OP, CAT_CPU_OP, CAT_USER_ANNOTATION], dtype=object)
    scope_i = np.clip(scope.astype(np.int64), 0, 2)
    # One prefix per (scope category, name, thread): '{"ph":"X","cat":..,"name":..,"pid":..,"tid":..,'
    pkey = (cols["name_id"].astype(np.int64) * 3 + (scope_i == Scope.USER_SCOPE)) * (2**32) + thread
    ukeys, pinv = np.unique(pkey, return_inverse=True)
    pinv = pinv.reshape(-1)
    prefixes = np.empty(len(ukeys), dtype=object)
    for j, key in enumerate(ukeys.tolist()):
        tid = key % (2**32)
        nid, user = divmod(key // (2**32), 3)
        cat = CAT_USER_ANNOTATION if user else CAT_CPU_OP
        prefixes[j] = f'{{"ph":"X","cat":"{cat}","name":{names.table[nid + 1]},"pid":{pid_s},"tid":{tid},'
    dims = _Lookup(strings, cols["shapes_id"], lambda s: ',"Input Dims":' + _compact_json(s))
    types = _Lookup(strings, cols["dtypes_id"], lambda s: ',"Input type":' + _compact_json(s))
    with_stack = bool(meta.get("with_stack")) or bool((cols["stack_id"] >= 0).any())
    stack_ids = a.stack_id if with_stack else None
    stacks = (_Lookup(strings, stack_ids, lambda s: ',"Call stack":' + json_string(s.replace("\n", ";")))
              if with_stack else None)
    seq = cols["sequence_nr"].astype(np.int64)
    fwd_tid = np.where(scope == Scope.BACKWARD_FUNCTION, cols["fwd_thread_id"], 0).astype(np.int64)
    corr_of = np.full(n, -1, dtype=np.int64)
    corr_of[gpu] = gpu + 1

    def cpu_section(chunk_events):
        for lo in range(0, n, chunk_events):
            hi = min(n, lo + chunk_events)
            sl = slice(lo, hi)
            extra = dims(cols["shapes_id"][sl].astype(np.int64))
            s_ = seq[sl]
            if (s_ >= 0).any():
                part = np.full(hi - lo, "", dtype=object)
                w = np.flatnonzero(s_ >= 0)
                part[w] = [f',"Sequence number":{q},"Fwd thread id":{f}'
                           for q, f in zip(s_[w].tolist(), fwd_tid[sl][w].tolist())]
                extra = part + extra
            if (cols["dtypes_id"][sl] >= 0).any():
                extra = extra + types(cols["dtypes_id"][sl].astype(np.int64))
            if stacks is not None:
                extra = extra + stacks(stack_ids[sl].astype(np.int64))
            c_ = corr_of[sl]
            if (c_ >= 0).any():
                part = np.full(hi - lo, "", dtype=object)
                w = np.flatnonzero(c_ >= 0)
                part[w] = [f',"correlation":{c}' for c in c_[w].tolist()]
                extra = extra + part
            tq, tr = _us_parts(iv_start[sl])
            dq, dr = _us_parts(iv_dur[sl])
            yield ",\n".join([
                f'{p}"ts":{a_}{b_},"dur":{c_}{d_},"args":{{"External id":{e_}{x_}}}}}'
                for p, a_, b_, c_, d_, e_, x_ in zip(prefixes[pinv[sl]].tolist(), tq, tr, dq, dr,
                                                     range(lo + 1, hi + 1), extra.tolist())])

    # ---- Device intervals (kernels and GPU annotations).
    def gpu_section(chunk_events):
        for lo in range(0, m, chunk_events):
            hi = min(m, lo + chunk_events)
            ev = gpu[lo:hi]
            tq, tr = _us_parts(iv_start[n + lo:n + hi])
            dq, dr = _us_parts(iv_dur[n + lo:n + hi])
            cats = np.where(is_kernel[lo:hi], CAT_KERNEL, CAT_GPU_USER_ANNOTATION).tolist()
            yield ",\n".join([
                f'{{"ph":"X","cat":"{c}","name":{names.table[nid + 1]},"pid":{gpu_pid[d]},"tid":{t},'
                f'"ts":{a_}{b_},"dur":{c_}{d_},"args":{{"External id":{e + 1},"correlation":{e + 1},'
                f'"device":{d},"stream":{t}}}}}'
                for c, nid, d, t, a_, b_, c_, d_, e in zip(
                    cats, cols["name_id"][ev].tolist(), gpu_dev[lo:hi].tolist(),
                    stream_tid[lo:hi].tolist(), tq, tr, dq, dr, ev.tolist())])

    # ---- Flows: fwdbwd (forward op -> backward node), ac2g (CPU op -> device interval).
    def flow_lines(cat, ids, src_pid, src_tid, src_ts, dst_pid, dst_tid, dst_ts):
        sq, sr = _us_parts(src_ts)
        fq, fr = _us_parts(dst_ts)
        return [
            f'{{"ph":"s","id":{i},"pid":{sp},"tid":{st},"ts":{a_}{b_},"cat":"{cat}","name":"{cat}"}},\n'
            f'{{"ph":"f","id":{i},"pid":{dp},"tid":{dt},"ts":{c_}{d_},"cat":"{cat}","name":"{cat}","bp":"e"}}'
            for i, sp, st, a_, b_, dp, dt, c_, d_ in zip(
                ids, src_pid, src_tid, sq, sr, dst_pid, dst_tid, fq, fr)]

    def fwdbwd_section(chunk_events):
        for lo in range(0, k, chunk_events):
            hi = min(k, lo + chunk_events)
            f_, b_ = fwd[lo:hi], bwd[lo:hi]
            yield ",\n".join(flow_lines(
                CAT_FWDBWD, (n + m + b_ + 1).tolist(), iv_pid[f_].tolist(), iv_tid[f_].tolist(),
                fwd_pt[lo:hi], iv_pid[b_].tolist(), iv_tid[b_].tolist(), bwd_pt[lo:hi]))

    def ac2g_section(chunk_events):
        for lo in range(0, m, chunk_events):
            hi = min(m, lo + chunk_events)
            ev = gpu[lo:hi]
            rows_ = n + np.arange(lo, hi)
            yield ",\n".join(flow_lines(
                CAT_AC2G, (ev + 1).tolist(), iv_pid[ev].tolist(), iv_tid[ev].tolist(), cpu_pt[lo:hi],
                iv_pid[rows_].tolist(), iv_tid[rows_].tolist(), gpu_pt[lo:hi]))

    # ---- Memory: [memory] instants on the allocating thread, and allocated-bytes counters.
    n_mem = len(mem["time_ns"])
    mem_dev = mem["device_id"].astype(np.int64)
    dev_is_cuda = {d: s.startswith("cuda") for d, s in mem_dev_names.items()}
    type_tbl = np.zeros(len(strings) + 1, dtype=np.int64)
    index_tbl = np.full(len(strings) + 1, -1, dtype=np.int64)
    for d, s_ in mem_dev_names.items():
        type_tbl[d], index_tbl[d] = (1, _device_index(s_)) if dev_is_cuda[d] else (0, -1)
    mem_type, mem_index = type_tbl[mem_dev], index_tbl[mem_dev]
    counter_key = {d: json_string(s) for d, s in mem_dev_names.items()}
    counter_pid = {d: (gpu_pid[_device_index(s)] if dev_is_cuda[d] else cpu_pid)
                   for d, s in mem_dev_names.items()}
    counter_tid = {}
    for d, s in mem_dev_names.items():
        if dev_is_cuda[d]:
            di = _device_index(s)
            counter_tid[d] = min([lab for (dd, lab) in stream_rows if dd == di] or [stream_base])
        else:
            counter_tid[d] = cpu_threads[0]
    mem_rel = mem["time_ns"].astype(np.int64) - base_ns
    samples = _counter_samples(mem_rel, mem_dev, mem["total_allocated"].astype(np.int64))
    stats["counter_samples"] = int(len(samples))

    def memory_section(chunk_events):
        for lo in range(0, n_mem, chunk_events):
            hi = min(n_mem, lo + chunk_events)
            tq, tr = _us_parts(mem_rel[lo:hi])
            yield ",\n".join([
                f'{{"ph":"i","cat":"{CAT_CPU_INSTANT}","name":"{MEMORY_EVENT_NAME}","pid":{pid_s},'
                f'"tid":{t},"ts":{a_}{b_},"args":{{"Device Type":{dt},"Device Id":{di},"Addr":{ad},'
                f'"Bytes":{by},"Total Allocated":{tot}}}}}'
                for t, a_, b_, dt, di, ad, by, tot in zip(
                    mem_thread[lo:hi].tolist(), tq, tr, mem_type[lo:hi].tolist(),
                    mem_index[lo:hi].tolist(), mem["addr"][lo:hi].tolist(), mem["bytes"][lo:hi].tolist(),
                    mem["total_allocated"][lo:hi].tolist())])

    def counter_section(chunk_events):
        for lo in range(0, len(samples), chunk_events):
            rec = samples[lo:lo + chunk_events]
            tq, tr = _us_parts(mem_rel[rec])
            yield ",\n".join([
                f'{{"ph":"C","name":"{MEMORY_COUNTER_NAME}","pid":{counter_pid[d]},"tid":{counter_tid[d]},'
                f'"ts":{a_}{b_},"args":{{{counter_key[d]}:{tot}}}}}'
                for d, a_, b_, tot in zip(mem_dev[rec].tolist(), tq, tr,
                                          mem["total_allocated"][rec].tolist())])

    trace._sections = [metadata_section, cpu_section, gpu_section, fwdbwd_section, ac2g_section,
                       memory_section, counter_section]
    return trace


def _meta_event(name: str, pid: int, tid: int, args: dict) -> str:
    return _dumps({"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args})


def export_chrome_trace(data: "ProfileData", path, distributed_info: dict | None = None,
                        trace_name: str | None = None) -> ChromeTrace:
    """Write ``data`` as a Chrome trace to ``path`` (gzip when it ends in ``.gz``).

    Returns:
        The :class:`ChromeTrace` written (its ``stats`` count repaired overlaps and roundings).
    """
    trace = chrome_trace(data, distributed_info=distributed_info, trace_name=trace_name)
    trace.write(os.fspath(path))
    return trace
