"""The collector: RecordFunction callbacks that append raw integers, turned into columns at stop.

This is the only profiler module that imports the engine. While profiling, each closing range
appends one fixed-width row of integers (packed with one ``struct`` call) to an
``array.array('q')`` owned by the thread that ran it (so rows from different threads never
interleave, and no lock is taken per event). Names,
devices, input descriptions and stacks are interned into dicts the first time they are seen.
Nothing else happens per event: no event objects, no device synchronisation. GPU ranges get a
pair of CUDA events recorded on the op's stream; all of them are resolved after one
synchronize when the collector stops.
"""
from __future__ import annotations

import json
import os
import struct
import sys
import threading
import time
from array import array

import numpy as np

from gradtrace.autograd import backend
from gradtrace.autograd import memory as engine_memory
from gradtrace.autograd import record_function as rf

from .data import ProfileData
from .fileformat import gradtrace_version
from gradtrace.autograd.node import AccumulateGrad

from .records import EVENT_COLUMNS, MEMORY_COLUMNS, Scope, empty_columns

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


# Row layout of the per-thread event buffers.
_NAME, _SCOPE, _START, _END, _SEQ, _FWD_TID, _DEVICE, _STREAM, _GPU_PAIR, _INPUTS, _STACK, _NODE = range(12)
_EVENT_WIDTH = 12
_ROW = struct.Struct(f"={_EVENT_WIDTH}q")   # native order, like array("q")
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


class _ThreadBuffers:
    __slots__ = ("events", "memory", "gpu_events", "nodes")

    def __init__(self):
        self.events = array("q")
        self.memory = array("q")
        self.gpu_events: list = []
        # The autograd nodes the backward ranges ran, kept (alive, so that ``id()`` stays
        # unique) until stop reads their edges: one append per backward range, nothing more.
        self.nodes: list = []


class Collector:
    """Install callbacks on :meth:`start`, remove them and build a ProfileData on :meth:`stop`."""

    def __init__(self, activities: set[str], record_shapes: bool, profile_memory: bool,
                 with_stack: bool, with_flops: bool, with_modules: bool):
        self.activities = set(activities)
        self.record_shapes = record_shapes or with_flops  # FLOPs are computed from shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_flops = with_flops
        self.with_modules = with_modules
        self._lock = threading.Lock()
        self._buffers: dict[int, _ThreadBuffers] = {}
        self._strings: list[str] = []
        self._string_ids: dict[str, int] = {}
        self._devices: dict[object, int] = {}
        self._inputs: dict[tuple, int] = {}
        self._stacks: dict[tuple, int] = {}
        self._gpu_base: dict[str, tuple] = {}   # device -> (cpu ns, base event)
        self._handles: list = []
        self._start_ns = 0
        self._wall_start_ns = 0

    # ------------------------------------------------------------------ interning

    def _intern_string(self, s: str) -> int:
        with self._lock:
            sid = self._string_ids.get(s)
            if sid is None:
                sid = self._string_ids[s] = len(self._strings)
                self._strings.append(s)
            return sid

    def _intern_device(self, device) -> int:
        sid = self._intern_string(str(device) if device is not None else "cpu")
        self._devices[device] = sid
        return sid

    def _intern_in(self, table: dict, key) -> int:
        with self._lock:
            return table.setdefault(key, len(table))

    def _thread_buffers(self, thread_id: int) -> _ThreadBuffers:
        with self._lock:
            return self._buffers.setdefault(thread_id, _ThreadBuffers())

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

    # ------------------------------------------------------------------ callbacks

    def _make_callbacks(self):
        perf = time.perf_counter_ns
        buffers = self._buffers
        string_ids = self._string_ids
        devices = self._devices
        inputs_table = self._inputs
        new_buffers = self._thread_buffers
        intern_string = self._intern_string
        intern_device = self._intern_device
        intern_in = self._intern_in
        record_shapes = self.record_shapes
        with_stack = self.with_stack
        capture_stack = self._capture_stack
        gpu = "cuda" in self.activities and backend.cuda_is_available()
        gpu_start = self._gpu_start
        stack_scopes = (int(Scope.FUNCTION), int(Scope.USER_SCOPE))
        Event = backend.Event
        # One row as bytes in one call: array.extend with a tuple converts item by item and
        # costs about three times as much.
        pack_row = _ROW.pack

        def write_row(rec, t_start, t_end, pair, stack_id):
            """Append one range to its thread's rows, interning its strings on first sight."""
            buf = buffers.get(rec.thread_id) or new_buffers(rec.thread_id)
            name_id = string_ids.get(rec.name)
            if name_id is None:
                name_id = intern_string(rec.name)
            device_id = devices.get(rec.device)
            if device_id is None:
                device_id = intern_device(rec.device)
            seq = rec.sequence_nr
            if seq > _INT64_MAX:               # AccumulateGrad's 2**64-1: no forward op
                seq -= _UINT64
            inputs_id = -1
            if record_shapes and rec.inputs is not None:
                key = tuple(rec.inputs)
                inputs_id = inputs_table.get(key)
                if inputs_id is None:
                    inputs_id = intern_in(inputs_table, key)
            stream = rec.stream
            node = rec.node
            node_ix = -1
            if node is not None:
                node_ix = len(buf.nodes)
                buf.nodes.append(node)
            buf.events.frombytes(pack_row(
                name_id, rec.scope, t_start, t_end, seq, rec.fwd_thread_id, device_id,
                stream.ptr if stream is not None else 0, pair, inputs_id, stack_id, node_ix))

        if not gpu and not with_stack:
            # The common CPU case: the context is just the start time, and there is no GPU
            # pair and no stack to store.
            def start(rec):
                return perf()

            def end(rec, ctx):
                write_row(rec, ctx, perf(), -1, -1)

            return start, end

        # The context is (start ns, start CUDA event or None, stack id). The stack is taken
        # at the start, where the caller's frame still points at the calling line.
        def start(rec):
            stack_id = capture_stack() if with_stack and rec.scope in stack_scopes else -1
            stream = rec.stream
            if gpu and stream is not None and stream.native is not None:
                t0, ev = gpu_start(stream)
                return (t0, ev, stack_id)
            return (perf(), None, stack_id)

        def end(rec, ctx):
            t_end = perf()
            pair = -1
            stack_id = -1
            if ctx.__class__ is tuple:
                ctx, ev_start, stack_id = ctx
                if ev_start is not None:
                    stream = rec.stream
                    ev_end = Event(stream.device)
                    ev_end.record(stream)
                    buf = buffers.get(rec.thread_id) or new_buffers(rec.thread_id)
                    buf.gpu_events.append((ev_start, ev_end))
                    pair = len(buf.gpu_events) - 1
            write_row(rec, ctx, t_end, pair, stack_id)

        return start, end

    def _gpu_start(self, stream):
        device = str(stream.device)
        if device not in self._gpu_base:
            # Device times are measured from one base event per device, recorded before the
            # first range on that device; its CPU time anchors them on the CPU clock.
            base = backend.Event(stream.device)
            base.record(stream)
            self._gpu_base[device] = (time.perf_counter_ns(), base)
        ev = backend.Event(stream.device)
        t0 = time.perf_counter_ns()
        ev.record(stream)
        return t0, ev

    def _make_memory_callback(self):
        perf = time.perf_counter_ns
        buffers = self._buffers
        new_buffers = self._thread_buffers
        current_thread_id = rf.current_thread_id
        devices = self._devices

        def on_memory(device_type, device_index, addr, nbytes, total_allocated, category=0):
            t = perf()
            tid = current_thread_id()
            buf = buffers.get(tid) or new_buffers(tid)
            key = (device_type, device_index)
            device_id = devices.get(key)
            if device_id is None:
                device_id = intern_device_key(key)
            buf.memory.extend((t, nbytes, total_allocated, device_id, addr, category))

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

    def start(self) -> None:
        self._wall_start_ns = time.time_ns()
        self._start_ns = time.perf_counter_ns()
        start, end = self._make_callbacks()
        self._handles.append(rf.add_global_callback(start, end, needs_inputs=self.record_shapes))
        if self.profile_memory:
            self._handles.append(rf.add_memory_callback(self._make_memory_callback()))
            self._record_live_memory()

    def clear(self) -> None:
        """Drop what was collected so far (warm-up steps) but keep collecting."""
        with self._lock:
            for tid in list(self._buffers):
                self._buffers[tid] = _ThreadBuffers()
        self._wall_start_ns = time.time_ns()
        self._start_ns = time.perf_counter_ns()
        if self.profile_memory:
            self._record_live_memory()

    def remove_callbacks(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def stop(self, extra_metadata: dict | None = None) -> ProfileData:
        """Remove the callbacks, resolve GPU times and return the collected profile."""
        end_ns = time.perf_counter_ns()
        self.remove_callbacks()
        device_region_ns = self._resolve_gpu_times()
        events, node_of_event = self._event_columns()
        nodes, edges = self._graph_columns(node_of_event)
        memory = self._memory_columns()
        metadata = {
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
            "device_region_ns": device_region_ns,
            "pid": os.getpid(),
        }
        gpus = sorted(d for d in metadata["devices"] if d.startswith("cuda"))
        if gpus:
            metadata["device_properties"] = [_device_properties(d) for d in gpus]
        # A rank of a process group: its backend, rank and world size ("distributed_info",
        # which the Chrome trace shows as distributedInfo) and its collectives' arguments.
        dist = sys.modules.get("gradtrace.autograd.distributed")
        if dist is not None:
            metadata.update(dist.profile_metadata(self._start_ns, end_ns))
        metadata.update(extra_metadata or {})
        return ProfileData(events, memory, self._strings, metadata, node_columns=nodes, edge_columns=edges)

    # ------------------------------------------------------------------ building columns

    def _resolve_gpu_times(self) -> dict:
        """Turn each range's pair of CUDA events into device start/end ns on the CPU axis."""
        self._device_times = {}
        region = {}
        for device, (cpu_base, base) in self._gpu_base.items():
            final = backend.Event(base.device).record()
            backend.synchronize(base.device)      # the one synchronize of the whole profile
            region[device] = backend.elapsed_ns(base, final)
        for tid, buf in self._buffers.items():
            times = []
            for ev_start, ev_end in buf.gpu_events:
                cpu_base, base = self._gpu_base[str(ev_start.device)]
                times.append((cpu_base + backend.elapsed_ns(base, ev_start),
                              cpu_base + backend.elapsed_ns(base, ev_end)))
            self._device_times[tid] = times
        return region

    def _event_columns(self) -> tuple[dict, np.ndarray]:
        """The events table, and the graph node id of each event (-1: none)."""
        parts, threads, device_times = [], [], []
        self._graph_nodes: list = []   # node id -> one node object with that id
        node_ids: dict[int, int] = {}
        for tid, buf in self._buffers.items():
            rows = np.frombuffer(buf.events, dtype=np.int64).reshape(-1, _EVENT_WIDTH)
            ids = np.array([self._node_id(n, node_ids) for n in buf.nodes] + [-1], dtype=np.int64)
            rows = rows.copy()
            rows[:, _NODE] = ids[rows[:, _NODE]]     # buffer index -> profile node id
            parts.append(rows)
            threads.append(np.full(len(rows), tid, dtype=np.int64))
            times = np.array(self._device_times.get(tid) or [], dtype=np.int64).reshape(-1, 2)
            pair = rows[:, _GPU_PAIR]
            dev = np.full((len(rows), 2), -1, dtype=np.int64)
            dev[pair >= 0] = times[pair[pair >= 0]]
            device_times.append(dev)
        if not parts:
            return empty_columns(EVENT_COLUMNS), np.zeros(0, np.int64)
        rows = np.concatenate(parts)
        thread = np.concatenate(threads)
        dev = np.concatenate(device_times)
        row_in_thread = np.concatenate([np.arange(len(p)) for p in parts])
        if not self.with_modules:
            # Module ranges ("nn.Module: Linear") are kept only when asked for.
            module_ids = [i for i, s in enumerate(self._strings) if s.startswith("nn.Module:")]
            keep = ~(np.isin(rows[:, _NAME], module_ids) & (rows[:, _SCOPE] == Scope.USER_SCOPE))
            rows, thread, dev, row_in_thread = rows[keep], thread[keep], dev[keep], row_in_thread[keep]
        # Start order; of two ranges with the same start and end the one that closed later
        # (the outer one) comes first, so nesting sees the parent before the child.
        order = np.lexsort((-row_in_thread, thread, -rows[:, _END], rows[:, _START]))
        rows, thread, dev = rows[order], thread[order], dev[order]
        shapes_id, dtypes_id = self._input_string_ids(rows[:, _INPUTS])
        stack_id = self._stack_string_ids(rows[:, _STACK])
        return {
            "name_id": rows[:, _NAME], "start_ns": rows[:, _START], "end_ns": rows[:, _END],
            "thread_id": thread, "scope": rows[:, _SCOPE], "sequence_nr": rows[:, _SEQ],
            "fwd_thread_id": rows[:, _FWD_TID], "device_id": rows[:, _DEVICE],
            "stream": rows[:, _STREAM], "device_start_ns": dev[:, 0], "device_end_ns": dev[:, 1],
            "shapes_id": shapes_id, "dtypes_id": dtypes_id, "stack_id": stack_id,
        }, rows[:, _NODE]

    def _node_id(self, node, node_ids: dict) -> int:
        """The profile's id of ``node``: one per node object, except that every AccumulateGrad
        of one leaf shares the leaf's id (PyTorch numbers them all 2**64-1, and the engine
        makes a new one whenever the old graph is gone)."""
        key = id(node.variable) if node.__class__ is AccumulateGrad else id(node)
        nid = node_ids.get(key)
        if nid is None:
            nid = node_ids[key] = len(self._graph_nodes)
            self._graph_nodes.append(node)
        return nid

    def _graph_columns(self, node_of_event: np.ndarray) -> tuple[dict, dict]:
        """The nodes table (which node each backward event ran) and the edges between nodes
        that ran: read once here, from the nodes kept since their ranges closed."""
        events = np.flatnonzero(node_of_event >= 0)
        nodes = {"event": events, "node_id": node_of_event[events]}
        ids = {id(n): k for k, n in enumerate(self._graph_nodes)}
        ids.update((id(n.variable), k) for k, n in enumerate(self._graph_nodes) if n.__class__ is AccumulateGrad)
        src, dst, input_nr = [], [], []
        for k, node in enumerate(self._graph_nodes):
            for edge in node.next_edges:
                if edge is None:
                    continue
                nxt = edge[0]
                j = ids.get(id(nxt.variable) if nxt.__class__ is AccumulateGrad else id(nxt))
                if j is not None:            # a next node that never ran is not in the profile
                    src.append(k)
                    dst.append(j)
                    input_nr.append(edge[1])
        self._graph_nodes = []                # let the graph go
        edges = {"node_id": np.array(src, np.int64), "next_node_id": np.array(dst, np.int64),
                 "input_nr": np.array(input_nr, np.int32)}
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
        mapping = np.full(len(self._stacks) + 1, -1, dtype=np.int64)
        for key, k in self._stacks.items():
            frames = [f"{code.co_filename}({line}): {code.co_name}" for code, line in key]
            mapping[k] = self._intern_string("\n".join(frames)) if frames else -1
        return mapping[stack_keys]

    def _memory_columns(self) -> dict:
        parts, threads = [], []
        for tid, buf in self._buffers.items():
            rows = np.frombuffer(buf.memory, dtype=np.int64).reshape(-1, _MEMORY_WIDTH)
            parts.append(rows)
            threads.append(np.full(len(rows), tid, dtype=np.int64))
        if not parts or not sum(len(p) for p in parts):
            return empty_columns(MEMORY_COLUMNS)
        rows = np.concatenate(parts)
        thread = np.concatenate(threads)
        order = np.argsort(rows[:, _M_TIME], kind="stable")
        rows, thread = rows[order], thread[order]
        return {"time_ns": rows[:, _M_TIME], "bytes": rows[:, _M_BYTES],
                "total_allocated": rows[:, _M_TOTAL], "device_id": rows[:, _M_DEVICE],
                "addr": rows[:, _M_ADDR], "thread_id": thread, "category": rows[:, _M_CATEGORY]}
