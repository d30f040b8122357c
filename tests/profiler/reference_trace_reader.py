"""The torch trace reader as it was before the typed, parallel one (commit 2aef58d), kept only
as the reference its replacement must agree with (tests/profiler/test_trace_reader.py).

Stream a PyTorch profiler (Kineto) Chrome trace into flat integer columns.

The file (plain or gzip JSON: an object with ``traceEvents``, or a bare array of events) is
read in chunks and decoded one event at a time with the C JSON scanner, so memory holds one
chunk of text and the columns, never the whole list of event dicts. Each event is turned at
once into a few integers appended to ``array`` buffers; strings (names, shapes, dtypes) are
interned into one string table whose ids are the final ``*_id`` values of the profile.

:mod:`profiler.torch_trace` turns the result (:class:`RawTrace`) into a ProfileData.
"""
from __future__ import annotations

import codecs
import gzip
import json
import re
import zlib
from array import array
from dataclasses import dataclass, field

import numpy as np

from gradtrace.profiler.validate import ProfileFormatError, parse_shapes

__all__ = ["RawTrace", "read_trace", "CPU_CATEGORIES", "GPU_CATEGORIES"]

_CHUNK = 1 << 22               # characters of text decoded per read
_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_INT64_MAX = 2**63 - 1
_TIME_LIMIT = 2**62              # ns; keeps start + duration inside int64
_JSON_INT_LISTS = re.compile(r"[\[\]\d, -]*")

# Category codes of CPU-side complete events (lower-cased "cat"; the capitalised names are
# older traces' spellings).
CPU_CATEGORIES = {"cpu_op": 0, "operator": 0, "user_annotation": 1, "python_function": 2,
                  "cuda_runtime": 3, "runtime": 3, "cuda_driver": 3}
CPU_OP, USER_ANNOTATION, PYTHON_FUNCTION, RUNTIME = 0, 1, 2, 3
GPU_CATEGORIES = {"kernel": 0, "gpu_memcpy": 1, "memcpy": 1, "gpu_memset": 2, "memset": 2}


@dataclass
class RawTrace:
    """What one pass over a trace file collects. Times are integer nanoseconds.

    ``cpu`` columns (complete events of CPU threads): cat (CPU_CATEGORIES code), name_id,
    thread (index into ``threads``), start_ns, dur_ns, seq, fwd_tid, ext_id, shapes_id,
    dtypes_id, py_id, py_parent, correlation.
    ``gpu`` columns (kernels, memcpy, memset): cat, name_id, start_ns, dur_ns, device,
    stream, correlation, ext_id, context and the launch arguments of ``records.GPU_COLUMNS``
    (-1, or NaN for the float ones, where the event does not give them).
    ``memory`` columns (``[memory]`` instants): time_ns, bytes, total_allocated, device_id
    (string id), addr, thread.
    """

    strings: list = field(default_factory=list)
    threads: list = field(default_factory=list)        # (pid, tid) per thread index
    thread_names: dict = field(default_factory=dict)   # (pid, tid) -> name
    header: dict = field(default_factory=dict)         # the top-level keys other than traceEvents
    cpu: dict = field(default_factory=dict)
    gpu: dict = field(default_factory=dict)
    memory: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)        # category -> count of events not imported
    n_events: int = 0


_CPU_FIELDS = ("cat", "name_id", "thread", "start_ns", "dur_ns", "seq", "fwd_tid", "ext_id",
               "shapes_id", "dtypes_id", "py_id", "py_parent", "correlation")
_GPU_FIELDS = ("cat", "name_id", "start_ns", "dur_ns", "device", "stream", "correlation", "ext_id", "context",
               "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers_per_thread",
               "shared_memory", "bytes")
# Kineto's arg names of the launch values (CUPTI's activity records).
_GPU_INT_ARGS = (("registers per thread", "registers_per_thread"), ("shared memory", "shared_memory"),
                 ("bytes", "bytes"))
_GPU_FLOAT_ARGS = (("blocks per SM", "blocks_per_sm"), ("warps per SM", "warps_per_sm"),
                   ("est. achieved occupancy %", "occupancy_pct"), ("memory bandwidth (GB/s)", "bandwidth_gbps"))
_GPU_FLOAT_FIELDS = tuple(field for _, field in _GPU_FLOAT_ARGS)
_MEMORY_FIELDS = ("time_ns", "bytes", "total_allocated", "device_id", "addr", "thread")


def _int(value, default=-1) -> int:
    """An id-like arg as an int: ints pass, hex/decimal strings are parsed, the rest is default."""
    if value.__class__ is int:
        return value if -_INT64_MAX <= value <= _INT64_MAX else default
    if isinstance(value, str):
        try:
            v = int(value, 0)
        except ValueError:
            return default
        return v if -_INT64_MAX <= v <= _INT64_MAX else default
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


def _thread_key(ev: dict) -> tuple:
    """(pid, tid) as given when they are ints or strings (Kineto writes both), else as text."""
    pid, tid = ev.get("pid"), ev.get("tid")
    return (pid if isinstance(pid, (int, str)) else str(pid), tid if isinstance(tid, (int, str)) else str(tid))


class _Text:
    """Decoded text of a (possibly gzip) file, read chunk by chunk; ``buf[pos:]`` is unread."""

    def __init__(self, path):
        self.path = path
        try:
            raw = open(path, "rb")
        except OSError as exc:
            raise ProfileFormatError(path, f"cannot read file ({exc.strerror or exc})") from None
        magic = raw.read(2)
        raw.seek(0)
        self.file = gzip.GzipFile(fileobj=raw, mode="rb") if magic == b"\x1f\x8b" else raw
        self._raw = raw
        self.decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="strict")
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.slow_until = 0   # before this position, decode one event at a time (see batch)

    def close(self):
        self.file.close()
        self._raw.close()

    def more(self) -> bool:
        """Append the next chunk; False at the end of the file."""
        if self.eof:
            return False
        try:
            data = self.file.read(_CHUNK)
        except (EOFError, OSError, zlib.error) as exc:
            raise ProfileFormatError(self.path, f"truncated or corrupted gzip data ({exc})") from None
        try:
            text = self.decoder.decode(data, final=not data)
        except UnicodeDecodeError:
            raise ProfileFormatError(self.path, "not a torch trace: the file is not UTF-8 text") from None
        if not data:
            self.eof = True
        self.slow_until = max(self.slow_until - self.pos, 0)
        self.buf = self.buf[self.pos:] + text
        self.pos = 0
        return bool(data) or bool(text)

    def skip_ws(self) -> str:
        """Skip whitespace; the next character ('' at the end of the file)."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def expect(self, chars: str, where: str) -> str:
        c = self.skip_ws()
        if not c or c not in chars:
            found = "the end of the file" if not c else repr(c)
            raise ProfileFormatError(self.path, f"not a valid torch trace: expected {' or '.join(map(repr, chars))} "
                                                f"{where}, found {found} (truncated file?)")
        self.pos += 1
        return c

    def batch(self) -> list | None:
        """The complete events from ``pos`` to the last ``}`` followed by ``,`` in the buffer,
        decoded by one ``json.loads`` (no Python work per event); None when there are none.

        A cut inside an event or a string leaves an unclosed object or string, so a slice that
        parses as an array is exactly a run of whole events. When it does not parse (a
        ``},`` inside a string), the rest of the buffer goes one event at a time.
        """
        if self.pos < self.slow_until:
            return None
        buf, pos = self.buf, self.pos
        cut = buf.rfind("}", pos)
        for _ in range(64):   # in Kineto's layout a "}," is among the last few "}"
            if cut <= pos:
                break
            after = _WS.match(buf, cut + 1).end()
            if after < len(buf) and buf[after] == ",":
                break
            cut = buf.rfind("}", pos, cut)
        else:
            cut = -1
        if cut <= pos:
            self.slow_until = len(buf)
            return None
        try:
            events = json.loads("[" + buf[pos:cut + 1] + "]")
        except (ValueError, RecursionError):
            self.slow_until = len(buf)
            return None
        self.pos = cut + 1
        return events

    def value(self, where: str):
        """Decode one JSON value, reading more text until it is complete."""
        self.skip_ws()
        while True:
            try:
                obj, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if self.more():
                    continue
                raise ProfileFormatError(self.path, f"not a valid torch trace: bad JSON {where} "
                                                    f"({exc.msg}; truncated file?)") from None
            # A number that ends the buffer may go on in the next chunk.
            if end == len(self.buf) and not self.eof and self.more():
                continue
            self.pos = end
            return obj


def read_trace(path) -> RawTrace:
    """Read a torch trace file into a :class:`RawTrace`.

    Raises:
        ProfileFormatError: the file is not a torch trace, or is truncated or malformed.
    """
    text = _Text(path)
    try:
        return _read(text, path)
    except RecursionError:
        raise ProfileFormatError(path, "not a valid torch trace: nested too deeply") from None
    finally:
        text.close()


def _read(text: _Text, path) -> RawTrace:
    sink = _Sink()
    c = text.expect("{[", "at the start")
    if c == "[":
        _events(text, sink)
    else:
        seen_events = False
        if text.skip_ws() == "}":
            text.pos += 1
        else:
            while True:
                key = text.value("in the header")
                if not isinstance(key, str):
                    raise ProfileFormatError(path, "not a valid torch trace: a header key is not a string")
                text.expect(":", f"after {key!r}")
                if key == "traceEvents":
                    text.expect("[", "at the start of traceEvents")
                    _events(text, sink)
                    seen_events = True
                else:
                    sink.raw.header[key] = text.value(f"in {key!r}")
                if text.expect(",}", "between header keys") == "}":
                    break
        if not seen_events:
            raise ProfileFormatError(path, "not a gradtrace profile or torch trace (JSON without traceEvents)")
    if text.skip_ws():
        raise ProfileFormatError(path, "not a valid torch trace: text after the end of the JSON")
    return sink.finish()


def _events(text: _Text, sink: "_Sink") -> None:
    """Consume the events of an array whose '[' was just read, through its ']'."""
    add = sink.add
    if text.skip_ws() == "]":
        text.pos += 1
        return
    while True:
        events = text.batch() or [text.value("in traceEvents")]
        for ev in events:
            if ev.__class__ is dict:
                add(ev)
            else:
                sink.skip("(not an object)")
        if text.expect(",]", "between events") == "]":
            return


class _Sink:
    """Turns event dicts into column values as they are decoded."""

    def __init__(self):
        self.raw = RawTrace()
        self.cpu = {k: array("q") for k in _CPU_FIELDS}
        self.gpu = {k: array("q") for k in _GPU_FIELDS}
        self.gpu.update({k: array("d") for k in _GPU_FLOAT_FIELDS})
        self.mem = {k: array("q") for k in _MEMORY_FIELDS}
        self.string_ids: dict[str, int] = {}
        self.thread_ids: dict[tuple, int] = {}
        self.dtypes_ids: dict[tuple, int] = {}
        self.shapes_ids: dict[str, int] = {}
        self.skipped: dict[str, int] = {}

    def string(self, s: str) -> int:
        sid = self.string_ids.get(s)
        if sid is None:
            sid = self.string_ids[s] = len(self.raw.strings)
            self.raw.strings.append(s)
        return sid

    def thread(self, ev: dict) -> int:
        key = (ev.get("pid"), ev.get("tid"))
        try:
            tid = self.thread_ids.get(key)
        except TypeError:          # an unhashable pid or tid
            key, tid = None, None
        if tid is None:
            norm = _thread_key(ev)
            tid = self.thread_ids.get(norm)
            if tid is None:
                tid = self.thread_ids[norm] = len(self.raw.threads)
                self.raw.threads.append(norm)
            if key is not None:
                self.thread_ids[key] = tid
        return tid

    def skip(self, cat: str) -> None:
        self.skipped[cat] = self.skipped.get(cat, 0) + 1

    def add(self, ev: dict) -> None:
        self.raw.n_events += 1
        ph = ev.get("ph")
        if ph == "X":
            cat = str(ev.get("cat", "")).lower()
            code = CPU_CATEGORIES.get(cat)
            if code is not None:
                return self._cpu(ev, code)
            code = GPU_CATEGORIES.get(cat)
            if code is not None:
                return self._gpu(ev, code)
        elif ph in ("i", "I") and ev.get("name") == "[memory]":
            return self._memory(ev)
        elif ph == "M":
            if ev.get("name") == "thread_name":
                args = ev.get("args")
                if isinstance(args, dict) and isinstance(args.get("name"), str):
                    self.raw.thread_names[_thread_key(ev)] = args["name"]
            return None
        self.skip(str(ev.get("cat") or f"ph={ph}"))
        return None

    def _times(self, ev: dict) -> tuple[int, int] | None:
        """(start, duration) in ns, or None when ``ts``/``dur`` are not usable numbers."""
        ts, dur = ev.get("ts"), ev.get("dur", 0)
        # Microseconds, ints or floats carrying nanosecond fractions.
        try:
            start, dur = round(ts * 1000), max(round(dur * 1000), 0)
        except (TypeError, ValueError, OverflowError):
            return None
        if not (-_TIME_LIMIT < start < _TIME_LIMIT and dur < _TIME_LIMIT):
            return None
        return start, dur

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

    def _cpu(self, ev: dict, code: int) -> None:
        times = self._times(ev)
        name = ev.get("name")
        if times is None or name.__class__ is not str:
            return self.skip("(event without ts or name)")
        args = ev.get("args")
        if args.__class__ is not dict:
            args = {}
        # The hot loop of an import: one pass of dict lookups and appends per event; ids go
        # through _int only when they are not plain ints (the common case skips the call).
        ids = [args.get("Sequence number", -1), args.get("Fwd thread id", 0),
               args.get("External id", args.get("external id", -1)), args.get("Python id", -1),
               args.get("Python parent id", -1), args.get("correlation", -1)]
        for k, v in enumerate(ids):
            if v.__class__ is not int or not -_INT64_MAX <= v <= _INT64_MAX:
                ids[k] = _int(v, 0 if k == 1 else -1)
        dims = args.get("Input Dims")
        types = args.get("Input type")
        c = self.cpu
        c["cat"].append(code)
        c["name_id"].append(self.string(name))
        c["thread"].append(self.thread(ev))
        c["start_ns"].append(times[0])
        c["dur_ns"].append(times[1])
        c["seq"].append(ids[0])
        c["fwd_tid"].append(ids[1])
        c["ext_id"].append(ids[2])
        c["shapes_id"].append(self._shapes(dims) if dims.__class__ is list else -1)
        c["dtypes_id"].append(self._dtypes(types) if types.__class__ is list else -1)
        c["py_id"].append(ids[3])
        c["py_parent"].append(ids[4])
        c["correlation"].append(ids[5])
        return None

    def _dtypes(self, types: list) -> int:
        try:
            key = tuple(types)
            sid = self.dtypes_ids.get(key)
        except TypeError:   # unhashable items: not a list of type names
            return -1
        if sid is None:
            sid = self.dtypes_ids[key] = self.string(json.dumps(types))
        return sid

    def _gpu(self, ev: dict, code: int) -> None:
        times = self._times(ev)
        name = ev.get("name")
        if times is None or not isinstance(name, str):
            return self.skip("(event without ts or name)")
        start, dur = times
        args = ev.get("args")
        if args.__class__ is not dict:
            args = {}
        g = self.gpu
        g["cat"].append(code)
        g["name_id"].append(self.string(name))
        g["start_ns"].append(start)
        g["dur_ns"].append(dur)
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

    def _memory(self, ev: dict) -> None:
        args = ev.get("args")
        times = self._times(ev)
        if args.__class__ is not dict or times is None:
            return self.skip("[memory] (without args or ts)")
        m = self.mem
        m["time_ns"].append(times[0])
        m["bytes"].append(_int(args.get("Bytes"), 0))
        m["total_allocated"].append(_int(args.get("Total Allocated"), 0))
        device_type = _int(args.get("Device Type"), 0)
        device_index = max(_int(args.get("Device Id"), 0), 0)
        # c10::DeviceType: 0 CPU, 1 CUDA; ROCm builds report their GPUs as CUDA too.
        device = "cpu" if device_type == 0 else f"cuda:{device_index}"
        m["device_id"].append(self.string(device))
        m["addr"].append(_int(args.get("Addr"), 0))
        m["thread"].append(self.thread(ev))
        return None

    def finish(self) -> RawTrace:
        raw = self.raw
        raw.cpu = {k: np.frombuffer(v, dtype=np.int64) if len(v) else np.zeros(0, np.int64)
                   for k, v in self.cpu.items()}
        raw.gpu = {k: np.frombuffer(v, dtype=np.dtype(v.typecode)) if len(v) else np.zeros(0, np.dtype(v.typecode))
                   for k, v in self.gpu.items()}
        raw.memory = {k: np.frombuffer(v, dtype=np.int64) if len(v) else np.zeros(0, np.int64)
                      for k, v in self.mem.items()}
        raw.skipped = dict(sorted(self.skipped.items()))
        return raw
