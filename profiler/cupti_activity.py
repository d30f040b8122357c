"""Kernel-level recording of gradtrace's own CUDA profiles through CUPTI's Activity API.

CuPy has no kernel-launch hook, so the collector's per-op CUDA events give op-level device
intervals only. CUPTI (NVIDIA's profiling interface, the one Kineto uses under
torch.profiler) reports every kernel, memcpy and memset the device ran, with its launch
configuration, and every CUDA runtime/driver API call with the correlation id that ties a
kernel to its launch. This module is the only one that imports NVIDIA's ``cupti-python``
(``from cupti import cupti``), lazily, when a profile asks for kernel recording:

* :class:`ActivitySession` starts and stops a CUPTI activity session around a profile:
  kernels (``CONCURRENT_KERNEL``), ``MEMCPY``, ``MEMSET``, ``RUNTIME`` and ``DRIVER`` API
  calls. CUPTI hands full buffers to a callback; each record is appended there to compact
  flat integer arrays (:class:`ActivityRecords`: no per-record object is kept). ``stop``
  flushes what is still buffered.
* Clock alignment: CUPTI's timestamps are on CUPTI's clock, the profile's on
  ``time.perf_counter_ns``. :class:`ClockFit` maps one to the other from paired samples (the
  two clocks read back to back) taken at start and at stop: a linear fit, because the two
  clocks may differ by an offset *and* run at slightly different rates (CUPTI's default clock
  is not slewed by NTP as CLOCK_MONOTONIC is), so an offset taken once would drift over a
  long profile; two samples at the ends bound the error over the whole of it.
* Names as Kineto writes them: kernel names demangled (:func:`demangle`, libstdc++'s
  ``__cxa_demangle`` through ctypes; the raw name where it fails), memcpys as
  ``Memcpy HtoD (Pageable -> Device)`` and memsets as ``Memset (Device)``
  (:func:`memcpy_name`, :func:`memset_name`), API calls by their callback name without the
  version suffix (``cudaLaunchKernel``).

:func:`activity_columns` turns the records into the profile's raw activity columns
(:mod:`.gpu_events`) and its API calls; the collector places them like a torch-trace import.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import re
import threading
import time
from array import array
from functools import lru_cache

import numpy as np

from .occupancy import launch_estimates
from .records import GpuKind

__all__ = ["load_cupti", "unavailable_reason", "ActivitySession", "ActivityRecords", "ClockFit", "clock_sample",
           "activity_columns", "demangle", "memcpy_name", "memset_name", "api_call_name", "NOT_INSTALLED", "RUNTIME",
           "DRIVER", "SKIPPED_RUNTIME", "KEPT_DRIVER"]

NOT_INSTALLED = ("cupti-python is not installed: pip install 'gradtrace[cuda12]' (CUDA 12) "
                 "or 'gradtrace[cuda13]' (CUDA 13)")
RUNTIME, DRIVER = 0, 1          # the API domain of a call record
# The runtime calls Kineto leaves out of torch.profiler traces: made around every op (CuPy
# calls cudaGetDevice a few times per op: 572 of 851 API records of a 3-step MLP on an H200),
# no work on the device. And the driver calls kept: those that launch work or copy (CuPy's
# own kernels are cuLaunchKernel calls); the other driver calls only cost records.
SKIPPED_RUNTIME = ("cudaGetDevice", "cudaSetDevice", "cudaGetLastError", "cudaEventCreate",
                   "cudaEventCreateWithFlags", "cudaEventDestroy")
KEPT_DRIVER = ("cuLaunch", "cuGraphLaunch", "cuMemcpy", "cuMemset")

_loaded: dict = {}
_load_lock = threading.Lock()


def load_cupti():
    """``cupti.cupti`` (NVIDIA's cupti-python), imported once; None when it cannot be.

    Returns:
        (module or None, reason or None): the reason says why it is unavailable.
    """
    with _load_lock:
        if "module" not in _loaded:
            try:
                from cupti import cupti  # noqa: PLC0415 - optional: only when kernels are recorded
                _loaded["module"], _loaded["reason"] = cupti, None
            except ImportError as exc:
                missing = getattr(exc, "name", None) or ""
                reason = NOT_INSTALLED if missing in ("cupti", "cupti.cupti") \
                    else f"cupti-python could not be imported ({exc}); see docs/gpu-analysis.md"
                _loaded["module"], _loaded["reason"] = None, reason
            except Exception as exc:  # a broken install or a CUPTI library that does not load
                _loaded["module"], _loaded["reason"] = None, f"cupti-python could not be loaded: {exc}"
        return _loaded["module"], _loaded["reason"]


def unavailable_reason() -> str | None:
    """Why kernel recording cannot run here (None when cupti-python imports)."""
    return load_cupti()[1]


# ----------------------------------------------------------------------------- names

# CUpti_ActivityMemcpyKind and CUpti_ActivityMemoryKind values, as Kineto spells them
# (libkineto cupti_strings.cpp): C enums, stable across CUPTI versions.
_MEMCPY_KINDS = ("Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP")
_MEMORY_KINDS = ("Unknown", "Pageable", "Pinned", "Device", "Array", "Managed", "Device Static", "Managed Static")


def _kind_name(names: tuple, value: int, unknown: str) -> str:
    return names[value] if 0 <= value < len(names) else unknown


def memcpy_name(copy_kind: int, src_kind: int, dst_kind: int) -> str:
    """Kineto's name of a memcpy: ``Memcpy HtoD (Pageable -> Device)``.

    Args:
        copy_kind: CUpti_ActivityMemcpyKind.
        src_kind, dst_kind: CUpti_ActivityMemoryKind of the source and the destination.
    Returns:
        The name.
    """
    return (f"Memcpy {_kind_name(_MEMCPY_KINDS, copy_kind, '<unknown>')} "
            f"({_kind_name(_MEMORY_KINDS, src_kind, 'Unrecognized')} -> "
            f"{_kind_name(_MEMORY_KINDS, dst_kind, 'Unrecognized')})")


def memset_name(memory_kind: int) -> str:
    """Kineto's name of a memset: ``Memset (Device)`` (``memory_kind``: CUpti_ActivityMemoryKind)."""
    return f"Memset ({_kind_name(_MEMORY_KINDS, memory_kind, 'Unrecognized')})"


_API_SUFFIX = re.compile(r"(_v\d+)?(_pt(sz|ds))?$")


def api_call_name(raw: str) -> str:
    """A runtime/driver callback name as PyTorch's tables show it: ``cudaLaunchKernel_v7000``
    -> ``cudaLaunchKernel``, ``cudaMemcpyAsync_ptsz_v7000`` -> ``cudaMemcpyAsync``."""
    name = re.sub(r"_v\d+$", "", raw)
    return _API_SUFFIX.sub("", name) or raw


@lru_cache(maxsize=1)
def _demangler():
    """(``__cxa_demangle``, libc ``free``) through ctypes, or None where libstdc++ is absent."""
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("stdc++") or "libstdc++.so.6")
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = lib.__cxa_demangle
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_void_p        # a malloc'ed buffer we free ourselves
    fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.free.restype = None
    return fn, libc.free


@lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """The demangled form of a C++ symbol (CUPTI's kernel names are mangled:
    ``_Z10add_kernelPfS_i`` -> ``add_kernel(float*, float*, int)``), as Kineto shows them.

    Args:
        name: a kernel name, mangled or not.
    Returns:
        The demangled name; ``name`` itself when it is not a mangled C++ name or libstdc++
        cannot be loaded.
    """
    if not name.startswith("_Z"):
        return name
    found = _demangler()
    if found is None:
        return name
    fn, free = found
    status = ctypes.c_int(-1)
    ptr = fn(name.encode("utf-8", "surrogateescape"), None, None, ctypes.byref(status))
    if not ptr:
        return name
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace") if status.value == 0 else name
    finally:
        free(ptr)


# ----------------------------------------------------------------------------- clocks


def clock_sample(cupti_now, perf_now=time.perf_counter_ns, tries: int = 5) -> tuple[int, int]:
    """A pair (CUPTI ns, perf_counter ns) read back to back: of ``tries`` reads, the one whose
    perf_counter reads around the CUPTI read were closest, paired with their midpoint.

    Args:
        cupti_now: CUPTI's clock (``cupti.get_timestamp``).
        perf_now: the profile's clock.
    Returns:
        (cupti_ns, perf_ns).
    """
    best = None
    for _ in range(tries):
        before = perf_now()
        c = cupti_now()
        after = perf_now()
        if best is None or after - before < best[0]:
            best = (after - before, int(c), (before + after) // 2)
    return best[1], best[2]


class ClockFit:
    """perf_counter ns = offset + slope × CUPTI ns, fitted through the samples taken at the
    start and the end of the profile (one sample: slope 1, an offset only)."""

    def __init__(self, samples: list[tuple[int, int]]):
        if not samples:
            raise ValueError("ClockFit needs at least one (cupti_ns, perf_ns) sample")
        (c0, p0), (c1, p1) = samples[0], samples[-1]
        # Too close together to tell a rate from the read jitter: offset only.
        self.slope = (p1 - p0) / (c1 - c0) if c1 - c0 > 1_000_000 else 1.0
        self.c0, self.p0 = c0, p0

    def to_perf_ns(self, t) -> np.ndarray:
        """CUPTI timestamps (array) on the perf_counter axis, int64 ns."""
        t = np.asarray(t, dtype=np.int64)
        return self.p0 + np.rint((t - self.c0) * self.slope).astype(np.int64)


# ----------------------------------------------------------------------------- records

# Flat row layouts of ActivityRecords' buffers (int64).
KERNEL_FIELDS = ("start", "end", "device_id", "context_id", "stream_id", "correlation_id", "grid_x", "grid_y",
                 "grid_z", "block_x", "block_y", "block_z", "registers_per_thread", "static_shared_memory",
                 "dynamic_shared_memory", "name", "graph_id")
COPY_FIELDS = ("kind", "start", "end", "device_id", "context_id", "stream_id", "correlation_id", "bytes", "name",
               "graph_id")
CALL_FIELDS = ("domain", "cbid", "start", "end", "thread_id", "correlation_id")


class ActivityRecords:
    """CUPTI activity records as flat int64 arrays, one per record family (kernels, copies
    and sets, API calls), and the distinct names. Appending a record is a few attribute reads
    and one ``array.extend``."""

    def __init__(self):
        self.kernels = array("q")
        self.copies = array("q")
        self.calls = array("q")
        self.names: list[str] = []
        self._name_ids: dict[str, int] = {}
        self.dropped_kinds: dict[int, int] = {}     # kind -> records of kinds not used

    def name_id(self, name: str) -> int:
        sid = self._name_ids.get(name)
        if sid is None:
            sid = self._name_ids[name] = len(self.names)
            self.names.append(name)
        return sid

    def add_kernel(self, k) -> None:
        self.kernels.extend((k.start, k.end, k.device_id, k.context_id, k.stream_id, k.correlation_id, k.grid_x,
                             k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z, k.registers_per_thread,
                             k.static_shared_memory, k.dynamic_shared_memory, self.name_id(k.name),
                             getattr(k, "graph_id", 0)))

    def add_memcpy(self, m) -> None:
        self.copies.extend((int(GpuKind.MEMCPY), m.start, m.end, m.device_id, m.context_id, m.stream_id,
                            m.correlation_id, m.bytes, self.name_id(memcpy_name(m.copy_kind, m.src_kind, m.dst_kind)),
                            getattr(m, "graph_id", 0)))

    def add_memset(self, m) -> None:
        self.copies.extend((int(GpuKind.MEMSET), m.start, m.end, m.device_id, m.context_id, m.stream_id,
                            m.correlation_id, m.bytes, self.name_id(memset_name(m.memory_kind)),
                            getattr(m, "graph_id", 0)))

    def add_call(self, domain: int, a) -> None:
        self.calls.extend((domain, a.cbid, a.start, a.end, a.thread_id, a.correlation_id))

    def table(self, which: str) -> dict[str, np.ndarray]:
        """One family's records as columns (``kernels``, ``copies`` or ``calls``)."""
        fields = {"kernels": KERNEL_FIELDS, "copies": COPY_FIELDS, "calls": CALL_FIELDS}[which]
        flat = np.frombuffer(getattr(self, which), dtype=np.int64) if len(getattr(self, which)) \
            else np.zeros(0, np.int64)
        rows = flat.reshape(-1, len(fields))
        return {name: rows[:, k] for k, name in enumerate(fields)}


class ActivitySession:
    """A CUPTI activity session around one profile.

    Args:
        cupti: the ``cupti.cupti`` module (:func:`load_cupti`).
        buffer_size: bytes of each activity buffer CUPTI asks for.
    """

    def __init__(self, cupti, buffer_size: int = 8 * 1024 * 1024):
        self.cupti = cupti
        self.buffer_size = buffer_size
        self.records = ActivityRecords()
        self.clock_samples: list[tuple[int, int]] = []
        self._kinds: list = []
        self._api_off: list = []     # (activity_enable_*_api, cbid) turned off by this session
        self._lock = threading.Lock()
        self._call_names: dict[tuple[int, int], str] = {}
        self._active = False

    def _buffer_requested(self):
        # 0 records: as many as fit (a record limit makes CUPTI ask for buffers over and over).
        return self.buffer_size, 0

    def _buffer_completed(self, activities) -> None:
        """CUPTI's callback with a full (or flushed) buffer's records: each is appended to the
        flat arrays here; the record objects are not kept."""
        cupti = self.cupti
        kind = cupti.ActivityKind
        kernel_kinds = (kind.CONCURRENT_KERNEL, kind.KERNEL)
        memcpy, memset, runtime, driver = kind.MEMCPY, kind.MEMSET, kind.RUNTIME, kind.DRIVER
        records = self.records
        with self._lock:        # CUPTI may complete buffers from its own thread
            for a in activities:
                k = a.kind
                if k in kernel_kinds:
                    records.add_kernel(a)
                elif k == runtime:
                    records.add_call(RUNTIME, a)
                elif k == driver:
                    records.add_call(DRIVER, a)
                elif k == memcpy:
                    records.add_memcpy(a)
                elif k == memset:
                    records.add_memset(a)
                else:
                    records.dropped_kinds[int(k)] = records.dropped_kinds.get(int(k), 0) + 1

    def start(self) -> None:
        """Register the buffer callbacks, enable the activity kinds, take the first clock sample."""
        cupti = self.cupti
        kind = cupti.ActivityKind
        cupti.activity_register_callbacks(self._buffer_requested, self._buffer_completed)
        self._kinds = []
        try:
            for k in (kind.CONCURRENT_KERNEL, kind.MEMCPY, kind.MEMSET, kind.RUNTIME, kind.DRIVER):
                cupti.activity_enable(k)
                self._kinds.append(k)
        except Exception:
            self._disable()
            raise
        self.api_records = self._filter_api_records()
        self._active = True
        self.clock_samples = [clock_sample(cupti.get_timestamp)]

    def _filter_api_records(self) -> str:
        """Turn off, in CUPTI, the records of the API calls the profile leaves out
        (:data:`SKIPPED_RUNTIME`, driver calls other than :data:`KEPT_DRIVER`), so that they
        cost nothing while recording; the collector leaves them out too where this fails."""
        cupti = self.cupti
        refused, error = 0, None
        try:
            switches = ((cupti.RuntimeApiTraceCbid, lambda n: n not in SKIPPED_RUNTIME, cupti.activity_enable_runtime_api),
                        (cupti.DriverApiTraceCbid, lambda n: n.startswith(KEPT_DRIVER), cupti.activity_enable_driver_api))
        except AttributeError as exc:       # an older cupti-python: every call recorded, filtered after
            return f"all ({type(exc).__name__}: {exc})"
        for enum, keep, enable in switches:
            for cbid in enum:
                if cbid.name.startswith("cu") and not keep(api_call_name(cbid.name)):
                    # One at a time: CUPTI refuses some ids it lists (ERROR_INVALID_PARAMETER
                    # on an H200, CUPTI 13.4) and the others still turn off.
                    try:
                        enable(int(cbid), 0)
                    except Exception as exc:  # noqa: BLE001 - that id stays recorded, filtered after
                        refused, error = refused + 1, error or exc
                        continue
                    self._api_off.append((enable, int(cbid)))
        if error is not None and not self._api_off:
            return f"all ({type(error).__name__}: {error})"
        return f"filtered ({refused} ids refused: {type(error).__name__}: {error})" if refused else "filtered"

    def clear(self) -> None:
        """Drop what was recorded so far (the profiler's warm-up), keep recording."""
        self.cupti.activity_flush_all(1)
        with self._lock:
            self.records = ActivityRecords()
        self.clock_samples = [clock_sample(self.cupti.get_timestamp)]

    def stop(self) -> ActivityRecords:
        """Flush the buffered records (the caller synchronized the devices first, so that every
        kernel launched has completed), end the session and take the last clock sample.

        Returns:
            The records of the whole session.
        """
        if not self._active:
            return self.records
        self.clock_samples.append(clock_sample(self.cupti.get_timestamp))
        try:
            self.cupti.activity_flush_all(1)      # forced: incomplete buffers too
        finally:
            self._disable()
        return self.records

    def _disable(self) -> None:
        for k in self._kinds:
            try:
                self.cupti.activity_disable(k)
            except Exception:  # already disabled (a failed start): nothing left to undo
                pass
        # The API records turned off are turned back on: CUPTI's setting outlives the session,
        # and another of its users in this process (torch.profiler's Kineto) expects them.
        for enable, cbid in self._api_off:
            enable(cbid, 1)
        self._kinds, self._api_off = [], []
        self._active = False

    def clock(self) -> ClockFit:
        """The fit from CUPTI's clock to perf_counter ns (:class:`ClockFit`)."""
        return ClockFit(self.clock_samples)

    def call_name(self, domain: int, cbid: int) -> str:
        """The runtime/driver API call's name, from CUPTI's callback name of its cbid."""
        key = (domain, cbid)
        name = self._call_names.get(key)
        if name is None:
            cupti = self.cupti
            dom = cupti.CallbackDomain.RUNTIME_API if domain == RUNTIME else cupti.CallbackDomain.DRIVER_API
            try:
                raw = cupti.get_callback_name(dom, cbid)
            except Exception:
                enum = cupti.RuntimeApiTraceCbid if domain == RUNTIME else cupti.DriverApiTraceCbid
                try:
                    raw = enum(cbid).name
                except ValueError:
                    raw = f"{'cuda' if domain == RUNTIME else 'cu'}Call#{cbid}"
            name = self._call_names[key] = api_call_name(raw if isinstance(raw, str) else raw.decode())
        return name

    def stream_id(self, handle: int) -> int | None:
        """CUPTI's id of the stream whose handle the profile stores (None: CUPTI cannot say)."""
        try:
            return int(self.cupti.get_stream_id_ex(0, handle, 0))
        except Exception:
            return None


# ----------------------------------------------------------------------------- to columns


def activity_columns(records: ActivityRecords, clock: ClockFit, call_name, intern, stream_of: dict | None = None,
                     device_properties: dict | None = None) -> tuple[dict, dict]:
    """The API calls and the raw activity columns (:mod:`.gpu_events`) of CUPTI records.

    Args:
        records: the session's records.
        clock: CUPTI ns -> perf_counter ns.
        call_name: ``(domain, cbid) -> name`` of an API call (:meth:`ActivitySession.call_name`).
        intern: the profile's string interning (name -> id).
        stream_of: CUPTI stream id -> the stream handle the profile stores for it; an id not
            in it is kept as CUPTI's id.
        device_properties: device index -> properties (Kineto's names), for the launch
            estimates (:func:`.occupancy.launch_estimates`).
    Returns:
        (calls, activities): calls has ``name_id``, ``start_ns``, ``end_ns``, ``os_thread``,
        ``correlation``, ``domain`` per API call; activities are raw activity columns, kernels
        first, then copies and sets, each in device start order.
    """
    stream_of = stream_of or {}
    device_properties = device_properties or {}
    c = records.table("calls")
    call_names = {key: intern(call_name(*key)) for key in set(zip(c["domain"].tolist(), c["cbid"].tolist()))}
    calls = {
        "name_id": np.fromiter((call_names[k] for k in zip(c["domain"].tolist(), c["cbid"].tolist())), np.int64,
                               len(c["cbid"])),
        "start_ns": clock.to_perf_ns(c["start"]), "end_ns": clock.to_perf_ns(np.maximum(c["end"], c["start"])),
        "os_thread": c["thread_id"].astype(np.int64), "correlation": c["correlation_id"].astype(np.int64),
        "domain": c["domain"].astype(np.int8),
    }
    name_ids = np.array([intern(demangle(s) if s.startswith("_Z") else s) for s in records.names] or [0], np.int64)
    k, m = records.table("kernels"), records.table("copies")
    nk, nm = len(k["start"]), len(m["start"])

    def both(kernel_col, copy_col):
        return np.concatenate([np.asarray(kernel_col, np.int64), np.asarray(copy_col, np.int64)])

    start = clock.to_perf_ns(both(k["start"], m["start"]))
    end = clock.to_perf_ns(both(np.maximum(k["end"], k["start"]), np.maximum(m["end"], m["start"])))
    streams = both(k["stream_id"], m["stream_id"])
    if stream_of and len(streams):
        streams = np.array([stream_of.get(s, s) for s in streams.tolist()], dtype=np.int64)
    minus = np.full(nm, -1, np.int64)
    grid = np.stack([k["grid_x"], k["grid_y"], k["grid_z"]], axis=1)
    block = np.stack([k["block_x"], k["block_y"], k["block_z"]], axis=1)
    shared = k["static_shared_memory"] + k["dynamic_shared_memory"]
    blocks = np.full(nk, np.nan)
    warps = np.full(nk, np.nan)
    occupancy = np.full(nk, np.nan)
    for dev in np.unique(k["device_id"]).tolist():
        pick = k["device_id"] == dev
        b, w, o = launch_estimates(device_properties.get(int(dev)), grid[pick], block[pick],
                                   k["registers_per_thread"][pick], shared[pick])
        blocks[pick], warps[pick], occupancy[pick] = b, w, o
    dur = end - start
    copy_bytes = m["bytes"].astype(np.int64)
    copy_dur = dur[nk:]
    # Kineto's "memory bandwidth (GB/s)": bytes per ns; undefined for a zero duration.
    bandwidth = np.where(copy_dur > 0, copy_bytes / np.maximum(copy_dur, 1), np.nan)
    nan = np.full(nm, np.nan)
    activities = {
        "cat": both(np.full(nk, int(GpuKind.KERNEL)), m["kind"]).astype(np.int8),
        "name_id": name_ids[both(k["name"], m["name"])] if nk + nm else np.zeros(0, np.int64),
        "start_ns": start, "dur_ns": dur, "device": both(k["device_id"], m["device_id"]),
        "stream": streams, "correlation": both(k["correlation_id"], m["correlation_id"]),
        "context": both(k["context_id"], m["context_id"]),
        "grid_x": both(k["grid_x"], minus), "grid_y": both(k["grid_y"], minus), "grid_z": both(k["grid_z"], minus),
        "block_x": both(k["block_x"], minus), "block_y": both(k["block_y"], minus),
        "block_z": both(k["block_z"], minus),
        "registers_per_thread": both(k["registers_per_thread"], minus),
        "shared_memory": both(shared, minus),
        "blocks_per_sm": np.concatenate([blocks, nan]), "warps_per_sm": np.concatenate([warps, nan]),
        "occupancy_pct": np.concatenate([occupancy, nan]),
        "bytes": both(np.full(nk, -1), copy_bytes),
        "bandwidth_gbps": np.concatenate([np.full(nk, np.nan), bandwidth]),
    }
    return calls, activities
