"""The collector: a RecordFunction range sink that keeps each range's row, turned into
columns when the profile is first read.

While profiling, each closing range extends one flat list with its row (the sink is that
list's ``extend``: one C call, atomic under the GIL, so threads need no lock and there is no
Python frame per range; the row carries its thread id and its end time). The row is the list
the engine built as the range opened (``record_function.ROW_*``); nothing else happens per
event: no interning, no event objects, no device synchronisation, and the row itself is
dropped. :meth:`Collector.finish` ends the recording (and resolves the GPU ranges: each got a
pair of CUDA events on the op's stream, all read after one synchronize); the first
:meth:`Collector.profile_data` slices the flat lists into columns, interns names and input
descriptions once per distinct value, and reads the backward nodes the ranges ran once for
the graph's edges.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from array import array
from itertools import chain, compress, repeat
from operator import attrgetter, is_not

import numpy as np

from gradtrace.autograd import backend, grad_mode
from gradtrace.autograd import memory as engine_memory
from gradtrace.autograd import record_function as rf
from gradtrace.autograd.node import AccumulateGrad

from . import cupti_activity
from .data import ProfileData
from .fileformat import gradtrace_version
from .gpu_events import activity_events, device_name_ids, gpu_table, lookup
from .nesting import innermost_containing, nest_intervals
from .records import EVENT_COLUMNS, MEMORY_COLUMNS, NO_DEVICE_TIME, Scope, empty_columns

__all__ = ["Collector", "record_function", "gpu_available"]

# The engine's USER_SCOPE range, re-exported as profiler.record_function.
record_function = rf.record_function


def gpu_available() -> bool:
    """True when the engine can use a CUDA GPU (then "cuda" is a default activity)."""
    return backend.cuda_is_available()

def _device_properties(name: str) -> dict:
    """The GPU's properties for trace viewers; just its name if the device cannot be asked."""
    try:
        return backend.device_properties(name)
    except backend.DeviceError:
        return {"id": int(name.partition(":")[2] or 0), "name": name}


# A row's context when a range has a stack or a GPU pair: [stack id, start event, end event].
_CTX_STACK, _CTX_EV_START, _CTX_EV_END = range(3)
# Row layout of the per-thread memory buffers.
_M_TIME, _M_BYTES, _M_TOTAL, _M_DEVICE, _M_ADDR, _M_CATEGORY = range(6)
_MEMORY_WIDTH = 6

_INT64_MAX = 2**63 - 1
_UINT64 = 2**64
# Frames from these directories are the engine or the profiler, not the user's call site.
_INTERNAL_DIRS = tuple(
    os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (rf, sys.modules[__name__])
)
# ...except the reference workloads, which are model code like the user's own.
_USER_CODE_DIRS = (os.path.join(os.path.dirname(os.path.abspath(rf.__file__)), "models") + os.sep,)
_MAX_STACK_DEPTH = 32
_next_edges = attrgetter("next_edges")


class Collector:
    """Install a range sink on :meth:`start`, remove it and build a ProfileData on :meth:`stop`."""

    def __init__(self, activities: set[str], record_shapes: bool, profile_memory: bool,
                 with_stack: bool, with_flops: bool, with_modules: bool, record_kernels: bool | None = False):
        self.activities = set(activities)
        # Kernel recording (CUPTI): None = when it can run, True = required, False = off.
        self.record_kernels = record_kernels
        self._kernel_session = None     # a cupti_activity.ActivitySession while it records
        self._kernel_reason = None      # why kernels are not recorded (a "cuda" profile)
        self.record_shapes = record_shapes or with_flops  # FLOPs are computed from shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_flops = with_flops
        self.with_modules = with_modules
        self._lock = threading.Lock()
        # The rows of the closed ranges laid end to end, all threads: backward nodes apart
        # from the rest, so that stop reads nodes from the one list that has them.
        self._ranges: list = []
        self._backward: list = []
        self._memory: dict[int, array] = {}      # thread id -> memory rows (int64, flat)
        self._strings: list[str] = []
        self._string_ids: dict[str, int] = {}
        self._devices: dict[object, int] = {}
        self._inputs: dict[tuple, int] = {}
        self._stacks: dict[tuple, int] = {}
        self._gpu_base: dict[str, tuple] = {}   # device -> (cpu ns, base event)
        self._build_lock = threading.Lock()
        self._data: ProfileData | None = None   # built by profile_data()
        self._handles: list = []
        self._start_ns = 0
        self._wall_start_ns = 0
        # The first row of each flat list that _parts reads: 0, except while a journal part
        # (the rows since the previous step) is built.
        self._base = (0, 0)
        self._journal_base = (0, 0)
        self._journal_memory: dict[int, int] = {}   # thread id -> memory rows journaled
        self._journal_ns = None                     # when the last part was taken

    # ------------------------------------------------------------------ interning

    def _intern_string(self, s: str) -> int:
        with self._lock:
            sid = self._string_ids.get(s)
            if sid is None:
                sid = self._string_ids[s] = len(self._strings)
                self._strings.append(s)
            return sid

    def _intern_in(self, table: dict, key) -> int:
        with self._lock:
            return table.setdefault(key, len(table))

    def _capture_stack(self) -> int:
        frames = []
        f = sys._getframe(1)
        while f is not None and len(frames) < _MAX_STACK_DEPTH:
            code = f.f_code
            name = code.co_filename
            if not name.startswith(_INTERNAL_DIRS) or name.startswith(_USER_CODE_DIRS):
                frames.append((code, f.f_lineno))
            f = f.f_back
        key = tuple(frames)
        sid = self._stacks.get(key)
        return sid if sid is not None else self._intern_in(self._stacks, key)

    # ------------------------------------------------------------------ the sink

    def _make_sink(self, rows: list):
        """A sink's ``(end, start)`` laying its rows end to end in ``rows``: ``start`` is None
        in the common CPU case, where a range needs nothing when it opens."""
        extend = rows.extend
        # With kernel recording the device time is the kernels' (exact): no CUDA event pairs.
        gpu = "cuda" in self.activities and backend.cuda_is_available() and self._kernel_session is None
        with_stack = self.with_stack
        if not gpu and not with_stack:
            return extend, None

        capture_stack = self._capture_stack
        gpu_start = self._gpu_start
        stack_scopes = (int(Scope.FUNCTION), int(Scope.USER_SCOPE))
        Event = backend.Event
        ctx_index = rf.ROW_CTX

        # The stack is taken as the range opens, where the caller's frame still points at the
        # calling line; the CUDA start event is recorded then too.
        def start(scope, stream):
            stack_id = capture_stack() if with_stack and scope in stack_scopes else -1
            ev = None
            if gpu and stream is not None and stream.native is not None:
                ev = gpu_start(stream)
            return [stack_id, ev, None]

        def end(row):
            ctx = row[ctx_index]
            if ctx[_CTX_EV_START] is not None:
                stream = row[rf.ROW_STREAM]
                ev_end = ctx[_CTX_EV_END] = Event(stream.device)
                ev_end.record(stream)
            extend(row)

        return end, start

    def _gpu_start(self, stream):
        device = str(stream.device)
        if device not in self._gpu_base:
            # Device times are measured from one base event per device, recorded before the
            # first range on that device; its CPU time anchors them on the CPU clock.
            base = backend.Event(stream.device)
            base.record(stream)
            self._gpu_base[device] = (time.perf_counter_ns(), base)
        ev = backend.Event(stream.device)
        ev.record(stream)
        return ev

    def _make_memory_callback(self):
        perf = time.perf_counter_ns
        buffers = self._memory
        current_thread_id = rf.current_thread_id
        devices = self._devices

        def on_memory(device_type, device_index, addr, nbytes, total_allocated, category=0):
            t = perf()
            tid = current_thread_id()
            buf = buffers.get(tid)
            if buf is None:
                with self._lock:
                    buf = buffers.setdefault(tid, array("q"))
            key = (device_type, device_index)
            device_id = devices.get(key)
            if device_id is None:
                device_id = intern_device_key(key)
            buf.extend((t, nbytes, total_allocated, device_id, addr, category))

        def intern_device_key(key):
            device_type, index = key
            name = "cpu" if device_type == "cpu" else f"{device_type}:{index}"
            sid = self._intern_string(name)
            devices[key] = sid
            return sid

        self._on_memory = on_memory
        return on_memory

    def _record_live_memory(self) -> None:
        """Record the storage alive as recording starts (a model's parameters, the optimizer's
        state, made before): an allocation each, then its kind when known, at this moment, so
        that the profile's kinds cover all the memory and add up to its total."""
        running: dict = {}
        for device_type, index, addr, nbytes, category in engine_memory.live_allocations():
            key = (device_type, index)
            running[key] = running.get(key, 0) + nbytes
            self._on_memory(device_type, index, addr, nbytes, running[key])
            if category:
                self._on_memory(device_type, index, addr, 0, running[key], category)

    # ------------------------------------------------------------------ lifecycle

    def _start_kernel_recording(self) -> None:
        """Start CUPTI's activity session when kernels are to be recorded, else note why not
        (``record_kernels=True`` and it cannot run: an error saying how to fix it)."""
        reason = None
        if self.record_kernels is False:
            reason = "record_kernels=False"
        elif "cuda" not in self.activities:
            reason = "'cuda' is not among the profiler's activities"
        elif not backend.cuda_is_available():
            reason = "no usable CUDA GPU"
        else:
            cupti, reason = cupti_activity.load_cupti()
            if cupti is not None:
                session = cupti_activity.ActivitySession(cupti)
                try:
                    session.start()
                except Exception as exc:  # CUPTI refuses (another profiler holds it, old driver)
                    reason = f"CUPTI's activity API could not start: {exc}"
                else:
                    self._kernel_session = session
        if reason is not None and self.record_kernels:
            raise RuntimeError(f"record_kernels=True, but kernels cannot be recorded: {reason}")
        self._kernel_reason = reason

    def start(self) -> None:
        self._wall_start_ns = time.time_ns()
        self._start_ns = time.perf_counter_ns()
        self._start_kernel_recording()
        backward = rf.RecordScope.BACKWARD_FUNCTION
        for rows, scopes in ((self._ranges, [s for s in rf.RecordScope if s is not backward]),
                             (self._backward, [backward])):
            end, start = self._make_sink(rows)
            self._handles.append(rf.add_range_sink(end, start=start, scopes=scopes,
                                                   needs_inputs=self.record_shapes))
        if self.profile_memory:
            self._handles.append(rf.add_memory_callback(self._make_memory_callback()))
            self._record_live_memory()

    def clear(self) -> None:
        """Drop what was collected so far (warm-up steps) but keep collecting."""
        with self._lock:
            self._ranges.clear()
            self._backward.clear()
            for tid in list(self._memory):
                self._memory[tid] = array("q")
            self._journal_base, self._journal_memory, self._journal_ns = (0, 0), {}, None
        self._wall_start_ns = time.time_ns()
        self._start_ns = time.perf_counter_ns()
        if self._kernel_session is not None:
            self._kernel_session.clear()
        if self.profile_memory:
            self._record_live_memory()

    def remove_callbacks(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        if self._kernel_session is not None and self._kernel_session._active:
            self._kernel_session.stop()    # a profiler released without finishing

    def stop(self, extra_metadata: dict | None = None) -> ProfileData:
        """Stop recording and build the profile now (:meth:`finish`, then :meth:`profile_data`)."""
        self.finish(extra_metadata)
        return self.profile_data()

    def finish(self, extra_metadata: dict | None = None) -> None:
        """Stop recording: remove the sinks, resolve the GPU times (the one synchronize) and
        note what must be read now. The rows are kept as they are and become a ProfileData
        on the first :meth:`profile_data` (torch.profiler too builds its events on first
        read), so leaving a profiled region costs little more than the recording did; until
        then the profile holds the backward nodes that ran, for the graph's edges."""
        self._end_ns = time.perf_counter_ns()
        self.remove_callbacks()
        # A range still open in another thread closes into the lists after this: not ours.
        self._lengths = (len(self._ranges), len(self._backward))
        self._device_region_ns = self._resolve_gpu_times()
        self._kernel_records = None
        if self._kernel_session is not None:
            # Every kernel launched has completed after this, so the flush has them all.
            for index in range(backend.device_count()):
                backend.synchronize(f"cuda:{index}")
            self._kernel_records = self._kernel_session.stop()
            self._native_threads = grad_mode.native_thread_ids()
        # A rank of a process group: its backend, rank and world size ("distributed_info",
        # which the Chrome trace shows as distributedInfo) and its collectives' arguments.
        dist = sys.modules.get("gradtrace.autograd.distributed")
        self._late_metadata = dist.profile_metadata(self._start_ns, self._end_ns) if dist else {}
        self._late_metadata.update(extra_metadata or {})

    def profile_data(self) -> ProfileData:
        """The profile of what :meth:`finish` ended, built on the first call (any thread)."""
        with self._build_lock:
            if self._data is None:
                self._data = self._build()
                # Let the rows go now: each row starts with its sink's end, which for a CPU
                # profile is these lists' own ``extend``, so a list only dropped would be a
                # cycle left to the cyclic GC (a gen-2 pass of ~100 ms after a 20k-op profile,
                # landing in whatever runs next). Emptied, they are freed by reference count.
                self._ranges.clear()
                self._backward.clear()
                self._ranges, self._backward, self._memory = [], [], {}
            return self._data

    def _build(self) -> ProfileData:
        events, node_of_event = self._event_columns()
        gpu = None
        recorded = self._kernel_records is not None
        if recorded:
            events, node_of_event, gpu, kernel_counts = self._with_kernels(events, node_of_event)
        nodes, edges = self._graph_columns(node_of_event)
        memory = self._memory_columns()
        metadata = self._metadata(self._end_ns)
        metadata["device_region_ns"] = self._device_region_ns
        gpus = sorted(d for d in metadata["devices"] if d.startswith("cuda"))
        if gpus:
            metadata["device_properties"] = [_device_properties(d) for d in gpus]
        if "cuda" in self.activities:
            # Whether the gpu table holds the kernels, and if not why (`gradtrace gpu` says it).
            metadata["kernel_recording"] = recorded
            if not recorded:
                metadata["kernel_recording_reason"] = self._kernel_reason or "not started"
            else:
                metadata["kernel_recording_counts"] = kernel_counts
        metadata.update(self._late_metadata)
        return ProfileData(events, memory, self._strings, metadata, node_columns=nodes, edge_columns=edges,
                           gpu_columns=gpu)

    # ------------------------------------------------------------------ kernels (CUPTI)

    def _with_kernels(self, events: dict, node_of_event: np.ndarray) -> tuple[dict, np.ndarray, dict, dict]:
        """The events with CUPTI's API calls and device activities added, built as a torch-trace
        import builds them (:mod:`.gpu_events`): each call an op of its thread, each kernel,
        memcpy and memset a zero-CPU-time event at the start of its launching call with its
        device interval; and the gpu table of the activities.

        Returns:
            (events, node id of each event, gpu table, counts for the metadata).
        """
        session, records = self._kernel_session, self._kernel_records
        self._kernel_records = None
        devices = sorted(set(records.table("kernels")["device_id"].tolist())
                         | set(records.table("copies")["device_id"].tolist()))
        props = {d: _device_properties(f"cuda:{d}") for d in devices}
        # Streams as the profile stores them (the handle), from CUPTI's stream ids: only the
        # handles of ops on a CUDA device (a CPU stream's id is no CUDA handle, and CUPTI
        # dereferences what it is given: a CPU stream's crashed the process on an H200).
        on_gpu = np.isin(events["device_id"], [i for i, s in enumerate(self._strings) if s.startswith("cuda")])
        stream_of = {}
        for handle in np.unique(events["stream"][on_gpu]).tolist():
            sid = session.stream_id(int(handle))
            if sid is not None:
                stream_of.setdefault(sid, int(handle))
        calls, acts = cupti_activity.activity_columns(records, session.clock(), session.call_name,
                                                      self._intern_string, stream_of, props)
        # The calls made while recording; a driver call only where it launched device work (the
        # runtime calls are what PyTorch's tables show; CuPy's own kernels are driver launches).
        launched = np.isin(calls["correlation"], acts["correlation"])
        # By the ids the calls' names already have (interning them would add unused strings).
        skipped = np.isin(calls["name_id"], [self._string_ids[n] for n in cupti_activity.SKIPPED_RUNTIME
                                             if n in self._string_ids])
        keep = (calls["start_ns"] >= self._start_ns) & (calls["start_ns"] <= self._end_ns) \
            & (((calls["domain"] == cupti_activity.RUNTIME) & ~skipped) | launched)
        # Runtime calls first: where a driver call shares a runtime call's correlation, the
        # kernel belongs to the runtime call (lookup takes the first row of a key).
        order = np.flatnonzero(keep)
        order = order[np.argsort(calls["domain"][order], kind="stable")]
        calls = {name: col[order] for name, col in calls.items()}
        thread, unmatched = self._logical_threads(calls["os_thread"], events["thread_id"])
        # A call ends within the range it started in: the two clocks agree to within the fit's
        # error, and a call overrunning its op by that much would break the nesting.
        if len(events["start_ns"]) and len(thread):
            nest = nest_intervals(events["start_ns"], events["end_ns"], events["thread_id"])
            inner = innermost_containing(nest, events["start_ns"], events["end_ns"], events["thread_id"],
                                         calls["start_ns"], thread)
            found = inner >= 0
            calls["end_ns"][found] = np.minimum(calls["end_ns"][found], events["end_ns"][inner[found]])
        n_calls, n_acts = len(calls["start_ns"]), len(acts["cat"])
        launcher = lookup(calls["correlation"], np.ones(n_calls, bool), acts["correlation"])
        orphan_thread = int(max(events["thread_id"].max(initial=0), thread.max(initial=0))) + 1
        act_events = activity_events(acts, launcher, calls["start_ns"], thread, orphan_thread,
                                     device_name_ids(acts["device"], self._intern_string))
        cpu = self._intern_string("cpu")
        for d in devices:      # the metadata's device list names the devices of the activities too
            self._devices.setdefault(("cupti", d), self._intern_string(f"cuda:{d}"))
        call_events = {
            "name_id": calls["name_id"], "start_ns": calls["start_ns"], "end_ns": calls["end_ns"],
            "thread_id": thread, "scope": np.full(n_calls, int(Scope.FUNCTION)), "sequence_nr": np.full(n_calls, -1),
            "fwd_thread_id": np.zeros(n_calls, np.int64), "device_id": np.full(n_calls, cpu),
            "stream": np.zeros(n_calls, np.int64), "device_start_ns": np.full(n_calls, NO_DEVICE_TIME),
            "device_end_ns": np.full(n_calls, NO_DEVICE_TIME), "shapes_id": np.full(n_calls, -1),
            "dtypes_id": np.full(n_calls, -1), "stack_id": np.full(n_calls, -1),
        }
        n = len(events["start_ns"])
        # Activities before calls: of a call and its zero-length kernel at one instant (a call
        # of zero length), the later row comes first below, so the call is the parent.
        merged = {name: np.concatenate([events[name], act_events[name], call_events[name]]).astype(dtype, copy=False)
                  for name, dtype in EVENT_COLUMNS.items()}
        index = np.arange(len(merged["start_ns"]))
        # The collector's event order (_event_columns): start; the longer first; thread; the
        # later row first.
        order = np.lexsort((-index, merged["thread_id"], -merged["end_ns"], merged["start_ns"]))
        merged = {name: col[order] for name, col in merged.items()}
        node = np.concatenate([node_of_event, np.full(n_acts + n_calls, -1, np.int64)])[order]
        position = np.empty(len(order), np.int64)
        position[order] = index
        gpu = gpu_table(acts, position[n:n + n_acts])
        counts = {"api_calls": int(n_calls), "gpu_events": int(n_acts),
                  "gpu_events_without_launch": int(np.count_nonzero(launcher < 0)),
                  "dropped_records": {str(k): v for k, v in records.dropped_kinds.items()},
                  "api_records": getattr(session, "api_records", None)}
        if (launcher < 0).any():
            counts["orphan_gpu_thread"] = orphan_thread
        if unmatched:       # threads the engine never ran on (CUDA's own), or ids of a new kind
            counts["unmatched_os_threads"] = unmatched
        return merged, node, gpu, counts

    def _logical_threads(self, os_thread: np.ndarray, event_threads: np.ndarray) -> tuple[np.ndarray, list]:
        """The logical thread id of each OS thread id (CUPTI's API records): the thread's own
        where the engine noted it (grad_mode.native_thread_ids), else a new id after all
        the profile's, in order of first appearance; and the OS ids matched by no thread."""
        by_native = {}
        for logical, natives in sorted(self._native_threads.items()):
            for native in natives:               # whichever id the records use
                by_native[native] = logical      # a reused OS id: the later thread
        next_id = int(max(event_threads.max(initial=0), max(by_native.values(), default=0))) + 1
        natives, first, inverse = np.unique(os_thread, return_index=True, return_inverse=True)
        logical = np.empty(len(natives), np.int64)
        unmatched: list[int] = []
        for k in np.argsort(first, kind="stable").tolist():     # once per OS thread
            found = by_native.get(int(natives[k]))
            if found is None:
                unmatched.append(int(natives[k]))
                found, next_id = next_id, next_id + 1
            logical[k] = found
        return (logical[inverse.reshape(-1)] if len(os_thread) else np.zeros(0, np.int64)), unmatched

    def _metadata(self, end_ns: int) -> dict:
        return {
            "gradtrace_version": gradtrace_version(),
            "activities": sorted(self.activities),
            "devices": sorted({self._strings[i] for i in set(self._devices.values())}),
            "record_shapes": self.record_shapes, "profile_memory": self.profile_memory,
            # The memory records carry kinds (records.MemoryCategory); older files do not.
            "memory_categories": self.profile_memory,
            "with_stack": self.with_stack, "with_flops": self.with_flops,
            "with_modules": self.with_modules,
            "start_time_ns": self._start_ns, "end_time_ns": end_ns,
            "wall_clock_base_ns": self._wall_start_ns,
            "pid": os.getpid(),
        }

    # ------------------------------------------------------------------ the journal (issue 31)

    def journal_step(self, journal, steps: list) -> None:
        """Append the ranges closed and the memory recorded since the last call to ``journal``
        (a :class:`.journal.Journal`), as one part: the rows become columns as at stop (the
        same code, over the new rows only), without device times (resolved at stop only).

        Args:
            steps: [first, last] step of the recording so far (the metadata's ``steps``).
        """
        now = time.perf_counter_ns()
        base = self._journal_base
        lengths = (len(self._ranges), len(self._backward))   # whole rows: each extend is one C call
        self._base, self._lengths, self._device_times = base, lengths, {}
        try:
            events, _ = self._event_columns()
        finally:
            self._base = (0, 0)
            del self._lengths, self._device_times
            self._graph_nodes, self._node_table = [], None    # the graph is read at stop
        self._journal_base = lengths
        metadata = self._metadata(now)
        metadata["steps"] = list(steps)
        collectives = []
        dist = sys.modules.get("gradtrace.autograd.distributed")
        if dist is not None:
            # This step's collectives go with its part (all of them in every footer would
            # make an append cost the whole run so far).
            group = dist.profile_metadata(self._journal_ns or self._start_ns, now)
            collectives = [e for e in group.pop("distributed_collectives", [])
                           if self._journal_ns is None or e["start_ns"] > self._journal_ns]
            metadata.update(group)
        self._journal_ns = now
        memory = self._memory_since_journal()
        journal.append(events, memory, self._strings[journal.strings_written:], metadata, collectives)

    def _memory_since_journal(self) -> dict:
        parts, threads = [], []
        for tid, buf in list(self._memory.items()):
            done = self._journal_memory.get(tid, 0)
            # A slice copies (the buffer keeps growing in its thread; a view would pin it).
            chunk = buf[done * _MEMORY_WIDTH:]
            rows = len(chunk) // _MEMORY_WIDTH
            if rows:
                parts.append(np.frombuffer(chunk, dtype=np.int64)[:rows * _MEMORY_WIDTH].reshape(-1, _MEMORY_WIDTH))
                threads.append(np.full(rows, tid, dtype=np.int64))
            self._journal_memory[tid] = done + rows
        return self._memory_table(parts, threads)

    def _parts(self, k: int) -> tuple[list, list]:
        """Field ``k`` (``rf.ROW_*``) of the other ranges and of the backward ones: slices of
        the flat lists, which copy no row."""
        width = rf.ROW_END + 1
        n_other, n_backward = self._lengths
        base_other, base_backward = self._base
        return self._ranges[base_other + k:n_other:width], self._backward[base_backward + k:n_backward:width]

    def _field(self, k: int) -> list:
        """Field ``k`` of every range, the other ranges first (the events' raw order)."""
        other, backward = self._parts(k)
        return other + backward

    # ------------------------------------------------------------------ building columns

    def _resolve_gpu_times(self) -> dict:
        """Each device's recorded region, and each range's pair of CUDA events as device
        start/end ns on the CPU axis (``self._device_times``: range index -> (start, end))."""
        self._device_times = {}
        region = {}
        for device, (cpu_base, base) in self._gpu_base.items():
            final = backend.Event(base.device).record()
            backend.synchronize(base.device)      # the one synchronize of the whole profile
            region[device] = backend.elapsed_ns(base, final)
        if self._gpu_base:
            for k, ctx in enumerate(self._field(rf.ROW_CTX)):
                if ctx is not None and ctx[_CTX_EV_START] is not None and ctx[_CTX_EV_END] is not None:
                    ev_start, ev_end = ctx[_CTX_EV_START], ctx[_CTX_EV_END]
                    cpu_base, base = self._gpu_base[str(ev_start.device)]
                    self._device_times[k] = (cpu_base + backend.elapsed_ns(base, ev_start),
                                             cpu_base + backend.elapsed_ns(base, ev_end))
        return region

    def _event_columns(self) -> tuple[dict, np.ndarray]:
        """The events table, and the graph node id of each event (-1: none).

        Each field is sliced out of the two flat lists (the other ranges, then the backward
        ones) without copying the rows; every column is then built by C loops (``map``,
        ``np.fromiter``, a ``count`` that finds a column of one value), and a Python function
        runs once per distinct value at most."""
        width = rf.ROW_END + 1
        n_other = (self._lengths[0] - self._base[0]) // width
        n = n_other + (self._lengths[1] - self._base[1]) // width
        self._graph_nodes: list = []    # node id -> one node object with that id
        self._node_table = None         # node objects by id(), for the edges (_node_ids)
        if not n:
            return empty_columns(EVENT_COLUMNS), np.zeros(0, np.int64)
        field = self._field

        def ints(k):
            # Each list apart: a part of one value (a thread id, the backward scope) is a count.
            return np.concatenate(tuple(map(_int_column, self._parts(k))))

        name_id = _ids_of(field(rf.ROW_NAME), self._intern_string)
        devices = {d: self._intern_string(str(d) if d is not None else "cpu")
                   for d in set(field(rf.ROW_DEVICE))}
        self._devices.update(devices)
        device_id = _ids_of(field(rf.ROW_DEVICE), devices.__getitem__)
        stream = _ids_by_identity(field(rf.ROW_STREAM), lambda s: getattr(s, "ptr", 0))
        other_seq, backward_seq = self._parts(rf.ROW_SEQ)
        seq = np.concatenate((_int_column(other_seq), _backward_seq(backward_seq)))
        inputs_id = np.full(n, -1, np.int64)
        if self.record_shapes:
            # By id(): equal descriptions are mostly one object (record_function keeps one
            # per distinct description), so the distinct objects are few, and hashing a
            # nested tuple per range would cost more than the rest of the column. Each
            # distinct object is interned by value, so equal ones still share an id.
            descriptions = field(rf.ROW_INPUTS)
            keys = list(map(id, descriptions))
            ids = {k: -1 if d is None else self._intern_in(self._inputs, d)
                   for k, d in dict(zip(keys, descriptions)).items()}
            inputs_id = np.fromiter(map(ids.__getitem__, keys), np.int64, n)
        stack = np.full(n, -1, np.int64)
        dev = np.full((n, 2), -1, np.int64)
        if self.with_stack or self._device_times:
            for k, ctx in enumerate(field(rf.ROW_CTX)):
                if ctx is not None:
                    stack[k] = ctx[_CTX_STACK]
            for k, times in self._device_times.items():
                dev[k] = times
        scope = ints(rf.ROW_SCOPE)
        thread = ints(rf.ROW_TID)
        start = ints(rf.ROW_START)
        end = ints(rf.ROW_END)
        node = np.full(n, -1, np.int64)
        node[n_other:] = self._node_ids(self._parts(rf.ROW_NODE)[1], name_id[n_other:])
        order = np.arange(n)
        if not self.with_modules:
            # Module ranges ("nn.Module: Linear") are kept only when asked for.
            module_ids = [i for i, s in enumerate(self._strings) if s.startswith("nn.Module:")]
            if module_ids:
                order = np.flatnonzero(~(np.isin(name_id, module_ids) & (scope == Scope.USER_SCOPE)))
        # Start order; of two ranges of one thread with the same start and end, the one that
        # closed later (the outer one, further down its list) comes first, so nesting sees the
        # parent before the child.
        order = order[np.lexsort((-order, thread[order], -end[order], start[order]))]
        shapes_id, dtypes_id = self._input_string_ids(inputs_id[order])
        return {
            "name_id": name_id[order], "start_ns": start[order], "end_ns": end[order],
            "thread_id": thread[order], "scope": scope[order],
            "sequence_nr": seq[order],
            "fwd_thread_id": ints(rf.ROW_FWD_TID)[order],
            "device_id": device_id[order], "stream": stream[order],
            "device_start_ns": dev[order, 0], "device_end_ns": dev[order, 1],
            "shapes_id": shapes_id, "dtypes_id": dtypes_id,
            "stack_id": self._stack_string_ids(stack[order]),
        }, node[order]

    def _node_ids(self, nodes: list, name_id: np.ndarray) -> np.ndarray:
        """The profile's node id of each backward range: one per node object, except that
        every AccumulateGrad of one leaf shares the leaf's id (PyTorch numbers them all
        2**64-1, and the engine makes a new one whenever the old graph is gone); ids in order
        of first run. Keeps one node per id (``self._graph_nodes``) and every node object's
        id() with its node id, sorted (``self._node_table``), for the edges."""
        n = len(nodes)
        objects = np.fromiter(map(id, nodes), np.int64, n)
        keys = objects
        # AccumulateGrad by name first (a column already built), then by type.
        acc_name = self._string_ids.get("AccumulateGrad")
        candidates = np.flatnonzero(name_id == acc_name).tolist() if acc_name is not None else ()
        accumulate = [k for k in candidates if nodes[k].__class__ is AccumulateGrad]
        if accumulate:
            keys = objects.copy()
            keys[accumulate] = [id(nodes[k].variable) for k in accumulate]
        ids = np.arange(n)
        by_object = np.argsort(objects)
        sorted_keys = objects[by_object] if keys is objects else np.sort(keys)
        if n > 1 and (sorted_keys[1:] == sorted_keys[:-1]).any():
            # A node run twice (retain_graph), or a leaf's AccumulateGrads: first-run order.
            _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
            rank = np.empty(len(first), np.int64)
            rank[np.argsort(first)] = np.arange(len(first))
            ids = rank[inverse.ravel()]
            self._graph_nodes = [nodes[k] for k in np.sort(first).tolist()]
        else:
            self._graph_nodes = list(nodes)
        self._node_table = (objects[by_object], ids[by_object])
        return ids

    def _graph_columns(self, node_of_event: np.ndarray) -> tuple[dict, dict]:
        """The nodes table (which node each backward event ran) and the edges between nodes
        that ran: read once here, from the nodes kept since their ranges closed."""
        events = np.flatnonzero(node_of_event >= 0)
        nodes = {"event": events, "node_id": node_of_event[events]}
        graph_nodes, self._graph_nodes = self._graph_nodes, []   # let the graph go
        table, self._node_table = self._node_table, None
        edge_lists = list(map(_next_edges, graph_nodes))
        src = np.repeat(np.arange(len(graph_nodes), dtype=np.int64),
                        np.fromiter(map(len, edge_lists), np.int64, len(edge_lists)))
        flat = list(chain.from_iterable(edge_lists))
        if flat.count(None):               # None: no gradient flows there
            present = np.fromiter(map(is_not, flat, repeat(None)), bool, len(flat))
            src = src[present]
            flat = list(compress(flat, present))
        next_nodes, input_nr = zip(*flat) if flat else ((), ())
        dst = np.full(len(flat), -1, np.int64)
        if flat:
            objects, ids = table
            wanted = np.fromiter(map(id, next_nodes), np.int64, len(flat))
            at = np.minimum(np.searchsorted(objects, wanted), len(objects) - 1)
            found = objects[at] == wanted
            dst[found] = ids[at[found]]
        keep = dst >= 0                    # a next node that never ran is not in the profile
        edges = {"node_id": src[keep], "next_node_id": dst[keep],
                 "input_nr": np.fromiter(input_nr, np.int32, len(flat))[keep]}
        return nodes, edges

    def _input_string_ids(self, inputs_ids: np.ndarray):
        n = len(self._inputs)
        shapes_map = np.full(n + 1, -1, dtype=np.int64)   # slot n maps -1 to -1
        dtypes_map = np.full(n + 1, -1, dtype=np.int64)
        for key, k in self._inputs.items():
            shapes_map[k] = self._intern_string(json.dumps([list(shape) for shape, _ in key]))
            dtypes_map[k] = self._intern_string(json.dumps([dtype for _, dtype in key]))
        return shapes_map[inputs_ids], dtypes_map[inputs_ids]

    def _stack_string_ids(self, stack_keys: np.ndarray) -> np.ndarray:
        # A snapshot: while a journal part is built, other threads still intern stacks (the
        # part's rows have theirs already: a stack is interned as its range opens).
        stacks = list(self._stacks.items())
        mapping = np.full(len(stacks) + 1, -1, dtype=np.int64)
        for key, k in stacks:
            frames = [f"{code.co_filename}({line}): {code.co_name}" for code, line in key]
            mapping[k] = self._intern_string("\n".join(frames)) if frames else -1
        return mapping[stack_keys]

    def _memory_columns(self) -> dict:
        parts, threads = [], []
        for tid, buf in self._memory.items():
            rows = np.frombuffer(buf, dtype=np.int64).reshape(-1, _MEMORY_WIDTH)
            parts.append(rows)
            threads.append(np.full(len(rows), tid, dtype=np.int64))
        return self._memory_table(parts, threads)

    @staticmethod
    def _memory_table(parts: list, threads: list) -> dict:
        if not parts or not sum(len(p) for p in parts):
            return empty_columns(MEMORY_COLUMNS)
        rows = np.concatenate(parts)
        thread = np.concatenate(threads)
        order = np.argsort(rows[:, _M_TIME], kind="stable")
        rows, thread = rows[order], thread[order]
        return {"time_ns": rows[:, _M_TIME], "bytes": rows[:, _M_BYTES],
                "total_allocated": rows[:, _M_TOTAL], "device_id": rows[:, _M_DEVICE],
                "addr": rows[:, _M_ADDR], "thread_id": thread, "category": rows[:, _M_CATEGORY]}


def _int_column(values) -> np.ndarray:
    n = len(values)
    if n and values.count(values[0]) == n:     # one value (a thread, a scope): no pass
        return np.full(n, values[0], np.int64)
    return np.fromiter(values, np.int64, n)


def _ids_of(values, id_of) -> np.ndarray:
    """``id_of(v)`` for each of ``values`` as int64, computed once per distinct value (few:
    names, devices, streams), so the per-range work is one C loop."""
    n = len(values)
    if n and values.count(values[0]) == n:     # one device, one stream: no second pass
        return np.full(n, id_of(values[0]), np.int64)
    ids = {v: id_of(v) for v in set(values)}
    return np.fromiter(map(ids.__getitem__, values), np.int64, n)


def _backward_seq(values) -> np.ndarray:
    """Backward nodes' sequence numbers as int64: AccumulateGrad's 2**64-1 (no forward op)
    becomes -1 by reading the column as uint64."""
    try:
        return np.fromiter(values, np.uint64, len(values)).view(np.int64)
    except OverflowError:          # a negative number: not from the engine, but keep it
        return np.array([s - _UINT64 if s > _INT64_MAX else s for s in values], np.int64)


def _ids_by_identity(values, id_of) -> np.ndarray:
    """:func:`_ids_of` for objects told apart by identity (streams: their own ``__eq__`` and
    ``__hash__`` are Python code, too slow to run per range)."""
    keys = list(map(id, values))
    if keys.count(keys[0]) == len(keys):
        return np.full(len(keys), id_of(values[0]), np.int64)
    objects = dict(zip(keys, values))
    return _ids_of(keys, lambda key: id_of(objects[key]))
