"""The collector: a RecordFunction range sink that keeps each range's row, turned into
columns at stop.

While profiling, each closing range extends one flat list with its row (the sink is that
list's ``extend``: one C call, atomic under the GIL, so threads need no lock and there is no
Python frame per range; the row carries its thread id and its end time). The row is the list the engine built as the range opened
(``record_function.ROW_*``); nothing else happens per event: no interning, no event objects,
no device synchronisation, and the row itself is dropped. At stop the flat list is sliced
into columns, names and input descriptions interned once per distinct value, and
the backward nodes the ranges ran are read once for the graph's edges. GPU ranges get a pair
of CUDA events recorded on the op's stream; all of them are resolved after one synchronize
when the collector stops.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from array import array
from itertools import chain, compress, repeat
from operator import attrgetter, is_, is_not

import numpy as np

from gradtrace.autograd import backend
from gradtrace.autograd import memory as engine_memory
from gradtrace.autograd import record_function as rf
from gradtrace.autograd.node import AccumulateGrad

from .data import ProfileData
from .fileformat import gradtrace_version
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
                 with_stack: bool, with_flops: bool, with_modules: bool):
        self.activities = set(activities)
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
        gpu = "cuda" in self.activities and backend.cuda_is_available()
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

    def start(self) -> None:
        self._wall_start_ns = time.time_ns()
        self._start_ns = time.perf_counter_ns()
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
        """Each device's recorded region, and each range's pair of CUDA events as device
        start/end ns on the CPU axis (``self._device_times``: range index -> (start, end))."""
        self._device_times = {}
        region = {}
        for device, (cpu_base, base) in self._gpu_base.items():
            final = backend.Event(base.device).record()
            backend.synchronize(base.device)      # the one synchronize of the whole profile
            region[device] = backend.elapsed_ns(base, final)
        if self._gpu_base:
            width = rf.ROW_END + 1
            for k, ctx in enumerate((self._ranges + self._backward)[rf.ROW_CTX::width]):
                if ctx is not None and ctx[_CTX_EV_START] is not None and ctx[_CTX_EV_END] is not None:
                    ev_start, ev_end = ctx[_CTX_EV_START], ctx[_CTX_EV_END]
                    cpu_base, base = self._gpu_base[str(ev_start.device)]
                    self._device_times[k] = (cpu_base + backend.elapsed_ns(base, ev_start),
                                             cpu_base + backend.elapsed_ns(base, ev_end))
        return region

    def _event_columns(self) -> tuple[dict, np.ndarray]:
        """The events table, and the graph node id of each event (-1: none).

        The rows are transposed once; every column is then built by C loops (``map``,
        ``np.fromiter``), and a Python function runs once per distinct value at most."""
        self._graph_nodes: list = []   # node id -> one node object with that id
        self._node_of_object: dict = {}
        width = rf.ROW_END + 1
        n_other = len(self._ranges) // width
        n = n_other + len(self._backward) // width
        if not n:
            return empty_columns(EVENT_COLUMNS), np.zeros(0, np.int64)
        flat = self._ranges + self._backward
        cols = [flat[k::width] for k in range(width)]      # the rows, transposed
        del flat
        name_id = _ids_of(cols[rf.ROW_NAME], self._intern_string)
        devices = {d: self._intern_string(str(d) if d is not None else "cpu")
                   for d in set(cols[rf.ROW_DEVICE])}
        self._devices.update(devices)
        device_id = _ids_of(cols[rf.ROW_DEVICE], devices.__getitem__)
        # Streams by identity: their own __hash__ is Python code, too slow to run per range.
        stream = _ids_by_identity(cols[rf.ROW_STREAM], lambda s: getattr(s, "ptr", 0))
        seq = np.empty(n, np.int64)
        seq[:n_other] = _int_column(cols[rf.ROW_SEQ][:n_other])
        seq[n_other:] = _backward_seq(cols[rf.ROW_SEQ][n_other:])
        inputs_id = np.full(n, -1, np.int64)
        if self.record_shapes:
            # By id(): equal descriptions are mostly one object (record_function keeps one
            # per distinct description), so the distinct objects are few, and hashing a
            # nested tuple per range would cost more than the rest of the column. Each
            # distinct object is interned by value, so equal ones still share an id.
            descriptions = cols[rf.ROW_INPUTS]
            keys = list(map(id, descriptions))
            ids = {k: -1 if d is None else self._intern_in(self._inputs, d)
                   for k, d in dict(zip(keys, descriptions)).items()}
            inputs_id = np.fromiter(map(ids.__getitem__, keys), np.int64, n)
        stack = np.full(n, -1, np.int64)
        dev = np.full((n, 2), -1, np.int64)
        if self.with_stack or self._device_times:
            for k, ctx in enumerate(cols[rf.ROW_CTX]):
                if ctx is not None:
                    stack[k] = ctx[_CTX_STACK]
            for k, times in self._device_times.items():
                dev[k] = times
        scope = _int_column(cols[rf.ROW_SCOPE])
        thread = _int_column(cols[rf.ROW_TID])
        start = _int_column(cols[rf.ROW_START])
        end = _int_column(cols[rf.ROW_END])
        node = np.full(n, -1, np.int64)
        node[n_other:] = self._node_ids(cols[rf.ROW_NODE][n_other:])
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
            "fwd_thread_id": _int_column(cols[rf.ROW_FWD_TID])[order],
            "device_id": device_id[order], "stream": stream[order],
            "device_start_ns": dev[order, 0], "device_end_ns": dev[order, 1],
            "shapes_id": shapes_id, "dtypes_id": dtypes_id,
            "stack_id": self._stack_string_ids(stack[order]),
        }, node[order]

    def _node_ids(self, nodes) -> np.ndarray:
        """The profile's node id of each backward range: one per node object, except that
        every AccumulateGrad of one leaf shares the leaf's id (PyTorch numbers them all
        2**64-1, and the engine makes a new one whenever the old graph is gone). Keeps one node
        per id (``self._graph_nodes``) and, by ``id()``, the node id of every node object
        (``self._node_of_object``), for the edges."""
        n = len(nodes)
        objects = list(map(id, nodes))
        keys = objects
        accumulate = np.flatnonzero(np.fromiter(map(type, nodes), object, n) == AccumulateGrad)
        if len(accumulate):
            keys = objects.copy()
            for k in accumulate:
                keys[k] = id(nodes[k].variable)
        number = dict(zip(keys, range(n)))
        if len(number) == n:           # every range ran its own node: ids in order of running
            self._graph_nodes = list(nodes)
            for k in accumulate:       # the AccumulateGrad objects themselves, for the edges
                number[objects[k]] = int(k)
            self._node_of_object = number
            return np.arange(n)
        number = dict(zip(dict.fromkeys(keys), range(n)))   # in order of first run
        ids = list(map(number.__getitem__, keys))
        self._graph_nodes = list(dict(zip(keys, nodes)).values())
        self._node_of_object = dict(zip(objects, ids))
        return np.array(ids, np.int64)

    def _graph_columns(self, node_of_event: np.ndarray) -> tuple[dict, dict]:
        """The nodes table (which node each backward event ran) and the edges between nodes
        that ran: read once here, from the nodes kept since their ranges closed."""
        events = np.flatnonzero(node_of_event >= 0)
        nodes = {"event": events, "node_id": node_of_event[events]}
        graph_nodes, self._graph_nodes = self._graph_nodes, []   # let the graph go
        node_of_object, self._node_of_object = self._node_of_object, {}
        edge_lists = list(map(_next_edges, graph_nodes))
        src = np.repeat(np.arange(len(graph_nodes), dtype=np.int64),
                        np.fromiter(map(len, edge_lists), np.int64, len(edge_lists)))
        flat = list(chain.from_iterable(edge_lists))
        present = list(map(is_not, flat, repeat(None)))    # None: no gradient flows there
        if not all(present):
            src = src[np.fromiter(present, bool, len(present))]
            flat = list(compress(flat, present))
        next_nodes, input_nr = zip(*flat) if flat else ((), ())
        dst = np.fromiter(map(node_of_object.get, map(id, next_nodes), repeat(-1)), np.int64, len(flat))
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
        mapping = np.full(len(self._stacks) + 1, -1, dtype=np.int64)
        for key, k in self._stacks.items():
            frames = [f"{code.co_filename}({line}): {code.co_name}" for code, line in key]
            mapping[k] = self._intern_string("\n".join(frames)) if frames else -1
        return mapping[stack_keys]

    def _memory_columns(self) -> dict:
        parts, threads = [], []
        for tid, buf in self._memory.items():
            rows = np.frombuffer(buf, dtype=np.int64).reshape(-1, _MEMORY_WIDTH)
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


def _int_column(values) -> np.ndarray:
    return np.fromiter(values, np.int64, len(values))


def _ids_of(values, id_of) -> np.ndarray:
    """``id_of(v)`` for each of ``values`` as int64, computed once per distinct value (few:
    names, devices, streams), so the per-range work is one C loop."""
    distinct = set(values)
    if len(distinct) == 1:          # one device, one stream: no second pass
        return np.full(len(values), id_of(distinct.pop()), np.int64)
    ids = {v: id_of(v) for v in distinct}
    return np.fromiter(map(ids.__getitem__, values), np.int64, len(values))


def _backward_seq(values) -> np.ndarray:
    """Backward nodes' sequence numbers as int64: AccumulateGrad's 2**64-1 (no forward op)
    becomes -1 by reading the column as uint64."""
    try:
        return np.fromiter(values, np.uint64, len(values)).view(np.int64)
    except OverflowError:          # a negative number: not from the engine, but keep it
        return np.array([s - _UINT64 if s > _INT64_MAX else s for s in values], np.int64)


def _ids_by_identity(values, id_of, few: int = 4) -> np.ndarray:
    """:func:`_ids_of` for values told apart by identity, when they are few (streams): one C
    pass of ``is`` per distinct object; past ``few`` of them, by ``id()``."""
    n = len(values)
    out = np.empty(n, np.int64)
    todo = np.ones(n, bool)
    for _ in range(few):
        k = int(todo.argmax())
        if not todo[k]:
            return out
        v = values[k]
        same = np.fromiter(map(is_, values, repeat(v)), bool, n)
        out[same] = id_of(v)
        todo &= ~same
    if todo.any():
        keys = list(map(id, values))
        objects = dict(zip(keys, values))
        out[todo] = _ids_of(keys, lambda key: id_of(objects[key]))[todo]
    return out
