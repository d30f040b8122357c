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
from typing import Annotated

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
# batch to the dict path (where absent and null differ in a few places, e.g. "dur"). An id-like
# int is an ``_I64`` with the default the dict path's rule gives for an absent key: a value
# beyond int64 is a type error too, so the typed path appends what it reads, unchecked.
_I64 = Annotated[int, msgspec.Meta(ge=-INT64_MAX, le=INT64_MAX)]
# So are a launch count outside :func:`_count`'s range and an estimate outside :func:`_measure`'s.
_COUNT = Annotated[int, msgspec.Meta(ge=0, le=2**48)]
_MEASURE = Annotated[float, msgspec.Meta(ge=0, lt=1e12)]
_NAN = float("nan")


class Args(Struct, gc=False):
    seq: _I64 = field(name="Sequence number", default=-1)
    fwd_tid: _I64 = field(name="Fwd thread id", default=0)
    ext_id: _I64 = field(name="External id", default=None)
    ext_id_lower: _I64 = field(name="external id", default=-1)
    py_id: _I64 = field(name="Python id", default=-1)
    py_parent: _I64 = field(name="Python parent id", default=-1)
    correlation: _I64 = -1
    dims: Raw = field(name="Input Dims", default=None)       # kept as JSON text: interned by it
    types: Raw = field(name="Input type", default=None)
    device: _I64 = -1
    stream: _I64 = None
    context: _I64 = -1
    grid: list[_COUNT] = None
    block: list[_COUNT] = None
    registers_per_thread: _COUNT = field(name="registers per thread", default=-1)
    shared_memory: _COUNT = field(name="shared memory", default=-1)
    bytes: _COUNT = -1
    blocks_per_sm: _MEASURE = field(name="blocks per SM", default=_NAN)
    warps_per_sm: _MEASURE = field(name="warps per SM", default=_NAN)
    occupancy_pct: _MEASURE = field(name="est. achieved occupancy %", default=_NAN)
    bandwidth_gbps: _MEASURE = field(name="memory bandwidth (GB/s)", default=_NAN)
    mem_bytes: _I64 = field(name="Bytes", default=0)
    total_allocated: _I64 = field(name="Total Allocated", default=0)
    device_type: _I64 = field(name="Device Type", default=0)
    device_id: _I64 = field(name="Device Id", default=0)
    addr: _I64 = field(name="Addr", default=0)
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

        The hot loop of an import (a few microseconds an event, most of its time): CPU ops,
        the bulk of a trace, are appended here, with the tables' lookups and the columns'
        ``append`` bound once per batch. Their ids need no check: the schema refuses any
        beyond int64 (the batch then takes the dict path, whose rules give the same columns).

        Raises:
            ValueError, RecursionError: an ``Input Dims``/``Input type`` value the standard
                library refuses; nothing of the batch was added only if the caller took a
                snapshot (see :meth:`snapshot`).
        """
        self.n_events += len(events)
        x_kind, x_kinds = self._x_kind, self.x_kinds
        string_ids, thread_ids, raw_ids = self.string_ids, self.thread_ids, self.raw_ids
        c = self.cpu
        (cat_, name_, thread_, start_, dur_, seq_, fwd_, ext_, shapes_, dtypes_, py_id_, py_parent_,
         corr_) = (c[k].append for k in CPU_FIELDS)
        for ev in events:
            ph = ev.ph
            if ph == "X":
                cat = ev.cat if ev.cat is not None else ""
                kind = x_kinds.get(cat)
                table, code = kind if kind is not None else x_kind(cat)
                if table == "cpu":
                    name, ts = ev.name, ev.ts
                    times = _times(ts, ev.dur) if ts is not None else None
                    if times is None or name is None:
                        self.skip("(event without ts or name)")
                        continue
                    a = ev.args
                    if a is None:
                        a = _NO_ARGS
                    name_id = string_ids.get(name)
                    if name_id is None:
                        name_id = self.string(name)
                    tix = thread_ids.get((ev.pid, ev.tid))
                    if tix is None:
                        tix = self.thread(ev.pid, ev.tid)
                    dims, types, ext = a.dims, a.types, a.ext_id
                    # Interned in this order (name, shapes, dtypes): strings in order of first use.
                    shapes = dtypes = -1
                    if dims is not None:
                        shapes = raw_ids.get(("s", bytes(dims)))
                        if shapes is None or shapes < 0:
                            shapes = self._raw_list(dims, "s")
                    if types is not None:
                        dtypes = raw_ids.get(("t", bytes(types)))
                        if dtypes is None or dtypes < 0:
                            dtypes = self._raw_list(types, "t")
                    cat_(code)
                    name_(name_id)
                    thread_(tix)
                    start_(times[0])
                    dur_(times[1])
                    seq_(a.seq)
                    fwd_(a.fwd_tid)
                    ext_(ext if ext is not None else a.ext_id_lower)
                    shapes_(shapes)
                    dtypes_(dtypes)
                    py_id_(a.py_id)
                    py_parent_(a.py_parent)
                    corr_(a.correlation)
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

    def _gpu_event(self, ev: Event, code: int) -> None:
        times = _times(ev.ts, ev.dur) if ev.ts is not None else None
        name = ev.name
        if times is None or name is None:
            return self.skip("(event without ts or name)")
        a = ev.args if ev.args is not None else _NO_ARGS
        grid, block = a.grid, a.block
        if grid is None or len(grid) != 3:
            grid = _NO_DIMS
        if block is None or len(block) != 3:
            block = _NO_DIMS
        values = (code, self.string(name), times[0], times[1],
                  a.device if a.device >= 0 else max(_int(ev.pid, 0), 0),
                  a.stream if a.stream is not None else _int(ev.tid, 0),
                  a.correlation, a.ext_id if a.ext_id is not None else a.ext_id_lower, a.context,
                  *grid, *block, a.registers_per_thread, a.shared_memory, a.bytes,
                  a.blocks_per_sm, a.warps_per_sm, a.occupancy_pct, a.bandwidth_gbps)
        for column, v in zip(self.gpu.values(), values, strict=True):
            column.append(v)
        return None

    def _memory_event(self, ev: Event) -> None:
        a = ev.args
        times = _times(ev.ts, ev.dur) if ev.ts is not None else None
        if a is None or times is None:
            return self.skip("[memory] (without args or ts)")
        m = self.mem
        m["time_ns"].append(times[0])
        m["bytes"].append(a.mem_bytes)
        m["total_allocated"].append(a.total_allocated)
        # c10::DeviceType: 0 CPU, 1 CUDA; ROCm builds report their GPUs as CUDA too.
        m["device_id"].append(self.string("cpu" if a.device_type == 0 else f"cuda:{max(a.device_id, 0)}"))
        m["addr"].append(a.addr)
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
_NO_DIMS = (-1, -1, -1)
