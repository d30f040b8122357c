"""Trace events to integer columns: the per-event half of :mod:`.torch_trace_reader`.

A :class:`Sink` takes events in file order and appends a few integers per event to ``array``
buffers; strings (names, shapes, dtypes, device names) are interned into one table in order of
first appearance, threads likewise. Events come in two forms:

* **typed** (:class:`Event`, the fast path): a batch decoded by msgspec straight into structs
  that hold only the fields an import uses, each with the type Kineto writes. No dict is
  built, unknown keys are skipped in C, and the types are guaranteed, so the Python work per
  event is a handful of attribute reads and appends.
* **dicts** (:meth:`Sink.add`): anything the typed schema refuses (a string where Kineto
  writes an int, ``NaN``, a lone surrogate, numbers beyond double range...) is decoded by the
  standard library and handled one dict at a time, with the same rules.

Both paths give the same columns for the same event: the typed one only ever sees events whose
every used field has a type for which the two paths provably agree (tests compare them on
every sample and on hostile files).
"""
from __future__ import annotations

import json
import re
from array import array

import msgspec
import numpy as np
from msgspec import Raw, Struct, field

from .validate import parse_shapes

__all__ = ["Sink", "Event", "decode_events", "CPU_CATEGORIES", "GPU_CATEGORIES", "CPU_FIELDS", "GPU_FIELDS",
           "GPU_FLOAT_FIELDS", "MEMORY_FIELDS", "INT64_MAX"]

INT64_MAX = 2**63 - 1
_TIME_LIMIT = 2**62              # ns; keeps start + duration inside int64
_JSON_INT_LISTS = re.compile(r"[\[\]\d, -]*")

# Category codes of CPU-side complete events (lower-cased "cat"; the capitalised names are
# older traces' spellings).
CPU_CATEGORIES = {"cpu_op": 0, "operator": 0, "user_annotation": 1, "python_function": 2,
                  "cuda_runtime": 3, "runtime": 3, "cuda_driver": 3}
GPU_CATEGORIES = {"kernel": 0, "gpu_memcpy": 1, "memcpy": 1, "gpu_memset": 2, "memset": 2}

# Column name -> array typecode. Interned ids and thread indices are int32 (a table of 2**31
# strings is not a trace), codes int8: narrower columns are most of the import's memory.
CPU_FIELDS = {"cat": "b", "name_id": "i", "thread": "i", "start_ns": "q", "dur_ns": "q", "seq": "q",
              "fwd_tid": "q", "ext_id": "q", "shapes_id": "i", "dtypes_id": "i", "py_id": "q",
              "py_parent": "q", "correlation": "q"}
GPU_FIELDS = ("cat", "name_id", "start_ns", "dur_ns", "device", "stream", "correlation", "ext_id", "context",
              "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers_per_thread",
              "shared_memory", "bytes")
# Kineto's arg names of the launch values (CUPTI's activity records).
_GPU_INT_ARGS = (("registers per thread", "registers_per_thread"), ("shared memory", "shared_memory"),
                 ("bytes", "bytes"))
_GPU_FLOAT_ARGS = (("blocks per SM", "blocks_per_sm"), ("warps per SM", "warps_per_sm"),
                   ("est. achieved occupancy %", "occupancy_pct"), ("memory bandwidth (GB/s)", "bandwidth_gbps"))
GPU_FLOAT_FIELDS = tuple(name for _, name in _GPU_FLOAT_ARGS)
_GPU_TYPECODES = dict({k: "q" for k in GPU_FIELDS}, cat="b", name_id="i", **{k: "d" for k in GPU_FLOAT_FIELDS})
MEMORY_FIELDS = {"time_ns": "q", "bytes": "q", "total_allocated": "q", "device_id": "i", "addr": "q", "thread": "i"}


# --------------------------------------------------------------------------- the typed schema

# ``None`` defaults mean "the key is absent"; a JSON null is a type error, which sends the
# batch to the dict path (where absent and null differ in a few places, e.g. "dur").
class Args(Struct, gc=False):
    seq: int = field(name="Sequence number", default=None)
    fwd_tid: int = field(name="Fwd thread id", default=None)
    ext_id: int = field(name="External id", default=None)
    ext_id_lower: int = field(name="external id", default=None)
    py_id: int = field(name="Python id", default=None)
    py_parent: int = field(name="Python parent id", default=None)
    correlation: int = None
    dims: Raw = field(name="Input Dims", default=None)       # kept as JSON text: interned by it
    types: Raw = field(name="Input type", default=None)
    device: int = None
    stream: int = None
    context: int = None
    grid: list[int] = None
    block: list[int] = None
    registers_per_thread: int = field(name="registers per thread", default=None)
    shared_memory: int = field(name="shared memory", default=None)
    bytes: int = None
    blocks_per_sm: int | float = field(name="blocks per SM", default=None)
    warps_per_sm: int | float = field(name="warps per SM", default=None)
    occupancy_pct: int | float = field(name="est. achieved occupancy %", default=None)
    bandwidth_gbps: int | float = field(name="memory bandwidth (GB/s)", default=None)
    mem_bytes: int = field(name="Bytes", default=None)
    total_allocated: int = field(name="Total Allocated", default=None)
    device_type: int = field(name="Device Type", default=None)
    device_id: int = field(name="Device Id", default=None)
    addr: int = field(name="Addr", default=None)
    label: str = field(name="name", default=None)           # thread_name metadata


class Event(Struct, gc=False):
    ph: str = None
    cat: str = None
    name: str = None
    pid: int | str = None
    tid: int | str = None
    ts: int | float = None
    dur: int | float = 0
    args: Args = None


_DECODER = msgspec.json.Decoder(list[Event])


def decode_events(text):
    """The events of ``text`` (a JSON array, str or bytes) as :class:`Event` structs; None when
    some value does not fit the typed schema (then the caller decodes dicts)."""
    try:
        return _DECODER.decode(text)
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        return None


# --------------------------------------------------------------------------- value rules


def _int(value, default=-1) -> int:
    """An id-like arg as an int: ints pass, hex/decimal strings are parsed, the rest is default."""
    if value.__class__ is int:
        return value if -INT64_MAX <= value <= INT64_MAX else default
    if isinstance(value, str):
        try:
            v = int(value, 0)
        except ValueError:
            return default
        return v if -INT64_MAX <= v <= INT64_MAX else default
    if isinstance(value, float) and value == value and abs(value) < 2**62:
        return int(value)
    return default


def _count(value) -> int:
    """A launch value that counts something (threads, registers, bytes): an int in
    [0, 2**48], else -1 (not given, or not a count)."""
    if value.__class__ is int and 0 <= value <= 2**48:
        return value
    if isinstance(value, float) and value == value and 0 <= value <= 2**48 and value == int(value):
        return int(value)
    return -1


def _measure(value) -> float:
    """A launch estimate (blocks per SM, occupancy %, GB/s): a finite non-negative number
    below 1e12, else NaN."""
    if value.__class__ in (int, float) and 0 <= value < 1e12:
        return float(value)
    return float("nan")


def _times(ts, dur) -> tuple[int, int] | None:
    """(start, duration) in ns from microseconds (ints, or floats carrying nanosecond
    fractions), or None when they are not usable numbers."""
    try:
        start, dur = round(ts * 1000), max(round(dur * 1000), 0)
    except (TypeError, ValueError, OverflowError):
        return None
    if not (-_TIME_LIMIT < start < _TIME_LIMIT and dur < _TIME_LIMIT):
        return None
    return start, dur


_PLAIN = (int, str)


def _norm(value):
    """A pid or tid as given when an int or a string (Kineto writes both), else as text."""
    return value if value.__class__ in _PLAIN else str(value)


# --------------------------------------------------------------------------- the sink


class Sink:
    """Columns, string table and counts of the events added so far (one part of a file)."""

    def __init__(self):
        self.cpu = {k: array(t) for k, t in CPU_FIELDS.items()}
        self.gpu = {k: array(t) for k, t in _GPU_TYPECODES.items()}
        self.mem = {k: array(t) for k, t in MEMORY_FIELDS.items()}
        self.strings: list[str] = []
        self.string_ids: dict[str, int] = {}
        self.threads: list[tuple] = []                 # (pid, tid) per thread index
        self.thread_ids: dict[tuple, int] = {}
        self.thread_names: dict[tuple, str] = {}
        self.dtypes_ids: dict[tuple, int] = {}
        self.shapes_ids: dict[str, int] = {}
        self.raw_ids: dict[bytes, int] = {}            # Input Dims / Input type JSON text -> id
        self.skipped: dict[str, int] = {}
        self.n_events = 0
        self.x_kinds: dict = {}                        # "cat" of an X event -> (table, code)

    # ---- tables

    def string(self, s: str) -> int:
        sid = self.string_ids.get(s)
        if sid is None:
            sid = self.string_ids[s] = len(self.strings)
            self.strings.append(s)
        return sid

    def thread(self, pid, tid) -> int:
        """The index of thread (pid, tid), numbered in order of first appearance."""
        if pid.__class__ in _PLAIN and tid.__class__ in _PLAIN:
            key = (pid, tid)
        else:   # other values as their text: True, 1.0 and 1 are three threads, in any order
            key = (_norm(pid), _norm(tid))
        index = self.thread_ids.get(key)
        if index is None:
            index = self.thread_ids[key] = len(self.threads)
            self.threads.append(key)
        return index

    def skip(self, cat: str) -> None:
        self.skipped[cat] = self.skipped.get(cat, 0) + 1

    def _x_kind(self, cat) -> tuple:
        """("cpu" | "gpu" | None, code) of a complete event of category ``cat`` (cached)."""
        try:
            kind = self.x_kinds.get(cat)
            cache = True
        except TypeError:                              # an unhashable "cat"
            kind, cache = None, False
        if kind is None:
            low = str(cat).lower()
            if low in CPU_CATEGORIES:
                kind = ("cpu", CPU_CATEGORIES[low])
            elif low in GPU_CATEGORIES:
                kind = ("gpu", GPU_CATEGORIES[low])
            else:
                kind = (None, 0)
            if cache:
                self.x_kinds[cat] = kind
        return kind

    def _shapes(self, dims: list) -> int:
        s = str(dims)
        sid = self.shapes_ids.get(s)
        if sid is None:
            # str() of nested int lists is already JSON; anything else goes through json.
            if not _JSON_INT_LISTS.fullmatch(s):
                try:
                    s = json.dumps(dims)
                except (TypeError, ValueError):
                    s = ""
            if parse_shapes(s) is None:   # not sizes: the op keeps no shapes, counted
                self.skip("(Input Dims that are not sizes)")
                return -1
            sid = self.shapes_ids[str(dims)] = self.string(s)
        return sid

    def _dtypes(self, types: list) -> int:
        try:
            hash(tuple(types))
            s = json.dumps(types)
        except (TypeError, ValueError):   # unhashable items: not a list of type names
            return -1
        # Keyed by the text, not the tuple: ["a", 1] and ["a", 1.0] are two lists whichever
        # comes first (a tuple key made them one, named after the first seen).
        sid = self.dtypes_ids.get(s)
        if sid is None:
            sid = self.dtypes_ids[s] = self.string(s)
        return sid

    def _raw_list(self, raw: Raw, kind: str) -> int:
        """The shapes or dtypes id of an ``Input Dims``/``Input type`` value given as JSON text.

        The same text always gives the same id, so it is looked up by the text; a text seen
        for the first time is decoded by the standard library and goes through the dict
        path's rules (json's view of the value decides, as it does there)."""
        text = bytes(raw)
        key = (kind, text)
        sid = self.raw_ids.get(key)
        if sid is None:
            if not text.startswith(b"["):
                sid = -1
            else:
                value = json.loads(text)     # errors: the caller's batch goes the dict path
                if kind == "s":
                    before = self.skipped.get("(Input Dims that are not sizes)", 0)
                    sid = self._shapes(value)
                    if self.skipped.get("(Input Dims that are not sizes)", 0) != before:
                        self.raw_ids[key] = -2       # not sizes: counted at each occurrence
                        return -1
                else:
                    sid = self._dtypes(value)
            self.raw_ids[key] = sid
        elif sid == -2:
            self.skip("(Input Dims that are not sizes)")
            return -1
        return sid

    # ---- typed events

    def add_events(self, events: list) -> None:
        """Add a batch of :class:`Event` structs (from :func:`decode_events`).

        Raises:
            ValueError, RecursionError: an ``Input Dims``/``Input type`` value the standard
                library refuses; nothing of the batch was added only if the caller took a
                snapshot (see :meth:`snapshot`).
        """
        self.n_events += len(events)
        x_kind = self._x_kind
        for ev in events:
            ph = ev.ph
            if ph == "X":
                table, code = x_kind(ev.cat if ev.cat is not None else "")
                if table == "cpu":
                    self._cpu_event(ev, code)
                    continue
                if table == "gpu":
                    self._gpu_event(ev, code)
                    continue
            elif ph == "i" or ph == "I":
                if ev.name == "[memory]":
                    self._memory_event(ev)
                    continue
            elif ph == "M":
                if ev.name == "thread_name" and ev.args is not None and ev.args.label is not None:
                    self.thread_names[(_norm(ev.pid), _norm(ev.tid))] = ev.args.label
                continue
            cat = ev.cat
            self.skip(str(cat or f"ph={ph}"))

    def _cpu_event(self, ev: Event, code: int) -> None:
        times = _times(ev.ts, ev.dur) if ev.ts is not None else None
        name = ev.name
        if times is None or name is None:
            return self.skip("(event without ts or name)")
        a = ev.args
        if a is None:
            a = _NO_ARGS
        seq, fwd, ext, py_id, py_parent, corr = a.seq, a.fwd_tid, a.ext_id, a.py_id, a.py_parent, a.correlation
        if ext is None:
            ext = a.ext_id_lower
        c = self.cpu
        c["cat"].append(code)
        c["name_id"].append(self.string(name))
        c["thread"].append(self.thread(ev.pid, ev.tid))
        c["start_ns"].append(times[0])
        c["dur_ns"].append(times[1])
        c["seq"].append(-1 if seq is None else _int(seq))
        c["fwd_tid"].append(0 if fwd is None else _int(fwd, 0))
        c["ext_id"].append(-1 if ext is None else _int(ext))
        c["shapes_id"].append(-1 if a.dims is None else self._raw_list(a.dims, "s"))
        c["dtypes_id"].append(-1 if a.types is None else self._raw_list(a.types, "t"))
        c["py_id"].append(-1 if py_id is None else _int(py_id))
        c["py_parent"].append(-1 if py_parent is None else _int(py_parent))
        c["correlation"].append(-1 if corr is None else _int(corr))
        return None

    def _gpu_event(self, ev: Event, code: int) -> None:
        times = _times(ev.ts, ev.dur) if ev.ts is not None else None
        name = ev.name
        if times is None or name is None:
            return self.skip("(event without ts or name)")
        a = ev.args if ev.args is not None else _NO_ARGS
        g = self.gpu
        g["cat"].append(code)
        g["name_id"].append(self.string(name))
        g["start_ns"].append(times[0])
        g["dur_ns"].append(times[1])
        device = -1 if a.device is None else _int(a.device)
        g["device"].append(device if device >= 0 else max(_int(ev.pid, 0), 0))
        g["stream"].append(_int(a.stream, _int(ev.tid, 0)))
        g["correlation"].append(-1 if a.correlation is None else _int(a.correlation))
        ext = a.ext_id if a.ext_id is not None else a.ext_id_lower
        g["ext_id"].append(-1 if ext is None else _int(ext))
        g["context"].append(-1 if a.context is None else _int(a.context))
        for dims, axes in ((a.grid, ("grid_x", "grid_y", "grid_z")), (a.block, ("block_x", "block_y", "block_z"))):
            ok = dims is not None and len(dims) == 3
            for k, axis in enumerate(axes):
                g[axis].append(_count(dims[k]) if ok else -1)
        g["registers_per_thread"].append(_count(a.registers_per_thread))
        g["shared_memory"].append(_count(a.shared_memory))
        g["bytes"].append(_count(a.bytes))
        g["blocks_per_sm"].append(_measure(a.blocks_per_sm))
        g["warps_per_sm"].append(_measure(a.warps_per_sm))
        g["occupancy_pct"].append(_measure(a.occupancy_pct))
        g["bandwidth_gbps"].append(_measure(a.bandwidth_gbps))
        return None

    def _memory_event(self, ev: Event) -> None:
        a = ev.args
        times = _times(ev.ts, ev.dur) if ev.ts is not None else None
        if a is None or times is None:
            return self.skip("[memory] (without args or ts)")
        m = self.mem
        m["time_ns"].append(times[0])
        m["bytes"].append(_int(a.mem_bytes, 0))
        m["total_allocated"].append(_int(a.total_allocated, 0))
        device_type = _int(a.device_type, 0)
        device_index = max(_int(a.device_id, 0), 0)
        # c10::DeviceType: 0 CPU, 1 CUDA; ROCm builds report their GPUs as CUDA too.
        m["device_id"].append(self.string("cpu" if device_type == 0 else f"cuda:{device_index}"))
        m["addr"].append(_int(a.addr, 0))
        m["thread"].append(self.thread(ev.pid, ev.tid))
        return None

    # ---- event dicts (whatever the typed schema refuses)

    def add(self, ev: dict) -> None:
        """Add one event decoded by the standard library."""
        self.n_events += 1
        ph = ev.get("ph")
        if ph == "X":
            table, code = self._x_kind(ev.get("cat", ""))
            if table == "cpu":
                return self._cpu_dict(ev, code)
            if table == "gpu":
                return self._gpu_dict(ev, code)
        elif ph in ("i", "I") and ev.get("name") == "[memory]":
            return self._memory_dict(ev)
        elif ph == "M":
            if ev.get("name") == "thread_name":
                args = ev.get("args")
                if isinstance(args, dict) and isinstance(args.get("name"), str):
                    self.thread_names[(_norm(ev.get("pid")), _norm(ev.get("tid")))] = args["name"]
            return None
        self.skip(str(ev.get("cat") or f"ph={ph}"))
        return None

    def _cpu_dict(self, ev: dict, code: int) -> None:
        times = _times(ev.get("ts"), ev.get("dur", 0))
        name = ev.get("name")
        if times is None or name.__class__ is not str:
            return self.skip("(event without ts or name)")
        args = ev.get("args")
        if args.__class__ is not dict:
            args = {}
        dims = args.get("Input Dims")
        types = args.get("Input type")
        c = self.cpu
        c["cat"].append(code)
        c["name_id"].append(self.string(name))
        c["thread"].append(self.thread(ev.get("pid"), ev.get("tid")))
        c["start_ns"].append(times[0])
        c["dur_ns"].append(times[1])
        c["seq"].append(_int(args.get("Sequence number", -1)))
        c["fwd_tid"].append(_int(args.get("Fwd thread id", 0), 0))
        c["ext_id"].append(_int(args.get("External id", args.get("external id", -1))))
        c["shapes_id"].append(self._shapes(dims) if dims.__class__ is list else -1)
        c["dtypes_id"].append(self._dtypes(types) if types.__class__ is list else -1)
        c["py_id"].append(_int(args.get("Python id", -1)))
        c["py_parent"].append(_int(args.get("Python parent id", -1)))
        c["correlation"].append(_int(args.get("correlation", -1)))
        return None

    def _gpu_dict(self, ev: dict, code: int) -> None:
        times = _times(ev.get("ts"), ev.get("dur", 0))
        name = ev.get("name")
        if times is None or not isinstance(name, str):
            return self.skip("(event without ts or name)")
        args = ev.get("args")
        if args.__class__ is not dict:
            args = {}
        g = self.gpu
        g["cat"].append(code)
        g["name_id"].append(self.string(name))
        g["start_ns"].append(times[0])
        g["dur_ns"].append(times[1])
        device = _int(args.get("device"))
        g["device"].append(device if device >= 0 else max(_int(ev.get("pid"), 0), 0))
        g["stream"].append(_int(args.get("stream"), _int(ev.get("tid"), 0)))
        g["correlation"].append(_int(args.get("correlation")))
        ext = args.get("External id")
        g["ext_id"].append(_int(ext if ext is not None else args.get("external id")))
        g["context"].append(_int(args.get("context")))
        for key, axes in (("grid", ("grid_x", "grid_y", "grid_z")), ("block", ("block_x", "block_y", "block_z"))):
            dims = args.get(key)
            ok = dims.__class__ is list and len(dims) == 3
            for k, axis in enumerate(axes):
                g[axis].append(_count(dims[k]) if ok else -1)
        for key, column in _GPU_INT_ARGS:
            g[column].append(_count(args.get(key)))
        for key, column in _GPU_FLOAT_ARGS:
            g[column].append(_measure(args.get(key)))
        return None

    def _memory_dict(self, ev: dict) -> None:
        args = ev.get("args")
        times = _times(ev.get("ts"), ev.get("dur", 0))
        if args.__class__ is not dict or times is None:
            return self.skip("[memory] (without args or ts)")
        m = self.mem
        m["time_ns"].append(times[0])
        m["bytes"].append(_int(args.get("Bytes"), 0))
        m["total_allocated"].append(_int(args.get("Total Allocated"), 0))
        device_type = _int(args.get("Device Type"), 0)
        device_index = max(_int(args.get("Device Id"), 0), 0)
        m["device_id"].append(self.string("cpu" if device_type == 0 else f"cuda:{device_index}"))
        m["addr"].append(_int(args.get("Addr"), 0))
        m["thread"].append(self.thread(ev.get("pid"), ev.get("tid")))
        return None

    # ---- batches that may fail half-way

    def snapshot(self) -> tuple:
        """What :meth:`rollback` needs to undo the events added after this call."""
        return ({k: len(v) for k, v in self.cpu.items()}, {k: len(v) for k, v in self.gpu.items()},
                {k: len(v) for k, v in self.mem.items()}, len(self.strings), len(self.threads),
                dict(self.thread_names), dict(self.skipped), self.n_events)

    def rollback(self, snap: tuple) -> None:
        cpu, gpu, mem, n_strings, n_threads, names, skipped, n_events = snap
        for table, lengths in ((self.cpu, cpu), (self.gpu, gpu), (self.mem, mem)):
            for k, n in lengths.items():
                del table[k][n:]
        for s in self.strings[n_strings:]:
            del self.string_ids[s]
        del self.strings[n_strings:]
        for key in [k for k, v in self.thread_ids.items() if v >= n_threads]:
            del self.thread_ids[key]
        del self.threads[n_threads:]
        for cache in (self.shapes_ids, self.dtypes_ids, self.raw_ids):
            for key in [k for k, v in cache.items() if v >= n_strings]:
                del cache[key]
        self.thread_names, self.skipped, self.n_events = names, skipped, n_events

    def columns(self) -> tuple[dict, dict, dict]:
        """(cpu, gpu, memory) columns as numpy arrays over the buffers (no copy)."""
        def table(buffers):
            return {k: np.frombuffer(v, dtype=np.dtype(v.typecode)) if len(v) else np.zeros(0, np.dtype(v.typecode))
                    for k, v in buffers.items()}
        return table(self.cpu), table(self.gpu), table(self.mem)


_NO_ARGS = Args()
