"""Stream a PyTorch profiler (Kineto) Chrome trace into flat integer columns.

The file (plain or gzip JSON: an object with ``traceEvents``, or a bare array of events) is
read in chunks of text, never whole; each chunk's complete events are decoded by one call of
a C parser straight into typed structs (:mod:`.torch_trace_events`), whose few fields are
appended at once to integer ``array`` columns; strings are interned. No event dict is kept,
and none is built at all unless an event does not fit Kineto's types.

**Parser.** msgspec's typed ``Struct`` decoding, chosen by measurement (``benchmarks/
torch_trace_import.py --parsers``: parse only, CPU seconds, events per CPU second on a generated
1M-event trace / the real ``gpu_5steps_rank0`` sample): json.loads 264k / 367k, orjson 3.8
(dicts) 338k / 443k, msgspec to dicts 316k / 418k, ijson's yajl2_c backend 333k / 412k,
msgspec to typed structs 1,138k / 1,833k. Building a dict per event is what the others pay
for (a newer orjson cannot avoid it); the typed decoder skips unused keys in C and builds
none, so parsing is a fifth of an import's time and the columns' Python work the rest.

**Parallel.** Kineto writes one event after another, each closed by ``},`` and a newline. A
plain file of some size is cut at such places into one part per core, each part parsed by a
process into columns with a string table of its own; the parts are merged in file order by
remapping ids, which gives the table a single pass gives (strings in order of first use). A
newline is never inside a JSON string, so a cut either falls between two events or leaves a
part that does not parse; then, and for any other layout or error, the file is read again
in one process, which alone words the errors. A gzip file cannot be cut before it is
inflated: it is inflated in this process and its text handed out to the workers in pieces;
read in one process, it is inflated in a thread (zlib lets go of the GIL) while the parser runs.

:mod:`profiler.torch_trace` turns the result (:class:`RawTrace`) into a ProfileData.
"""
from __future__ import annotations

import codecs
import gzip
import json
import multiprocessing
import os
import queue
import re
import shutil
import sys
import tempfile
import threading
import zlib
from dataclasses import dataclass, field

import numpy as np

from .torch_trace_events import (CPU_CATEGORIES, CPU_FIELDS, GPU_CATEGORIES, GPU_FIELDS, GPU_FLOAT_FIELDS,
                                 MEMORY_FIELDS, Sink, decode_events)
from .validate import ProfileFormatError

__all__ = ["RawTrace", "read_trace", "CPU_CATEGORIES", "GPU_CATEGORIES"]

_CHUNK = 1 << 22               # bytes read per chunk (text decoded per read)
_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
# A cut between two events: "}", a comma, a newline, the next event's "{".
_CUT = re.compile(rb"\}[ \t\r]*,[ \t\r]*\n[ \t\r\n]*\{")
_PART_BYTES = 32 << 20           # a file below two of these is read in one process
_MAX_WORKERS = 8

CPU_OP, USER_ANNOTATION, PYTHON_FUNCTION, RUNTIME = 0, 1, 2, 3
_ID_COLUMNS = {"cpu": ("name_id", "shapes_id", "dtypes_id"), "gpu": ("name_id",), "memory": ("device_id",)}


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
    Ids, thread indices and codes are int32/int8 (``torch_trace_events.CPU_FIELDS``...),
    the rest int64 (float64 for the launch estimates).
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


# --------------------------------------------------------------------------- bytes in


class _Range:
    """The bytes ``[start, stop)`` of a file (to its end when ``stop`` is None), between
    ``prefix`` and ``suffix``: one part of a cut file, given the brackets of an array."""

    def __init__(self, path, start: int, stop: int | None, prefix=b"[", suffix=b"]"):
        self.file = open(path, "rb")
        self.file.seek(start)
        self.left = None if stop is None else stop - start
        self.head, self.tail = prefix, suffix

    def read(self, n: int) -> bytes:
        if self.head:
            out, self.head = self.head, b""
            return out
        want = n if self.left is None else min(n, self.left)
        data = self.file.read(want) if want else b""
        if self.left is not None:
            self.left -= len(data)
        if not data:
            out, self.tail = self.tail, b""
            return out
        return data

    def close(self):
        self.file.close()


class _Prefetch:
    """Reads the chunks of ``file`` in a thread, a few ahead: gzip's inflating (which frees
    the GIL) overlaps the parsing."""

    def __init__(self, file):
        self.file = file
        self.chunks: queue.Queue = queue.Queue(maxsize=2)
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop:
            try:
                data = self.file.read(_CHUNK)
            except BaseException as exc:   # noqa: BLE001 - handed to the reader, raised there
                self.chunks.put(exc)
                return
            self.chunks.put(data)
            if not data:
                return

    def read(self, n: int) -> bytes:
        item = self.chunks.get()
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self):
        self.stop = True
        try:                       # let a blocked put finish so the thread sees ``stop``
            self.chunks.get_nowait()
        except queue.Empty:
            pass
        self.thread.join()


# --------------------------------------------------------------------------- text


class _Text:
    """Decoded text of a (possibly gzip) file, read chunk by chunk; ``buf[pos:]`` is unread."""

    def __init__(self, path, source=None):
        self.path = path
        self._raw = None
        if source is None:
            try:
                raw = open(path, "rb")
            except OSError as exc:
                raise ProfileFormatError(path, f"cannot read file ({exc.strerror or exc})") from None
            magic = raw.read(2)
            raw.seek(0)
            self.gzip = magic == b"\x1f\x8b"
            self._raw = raw
            source = _Prefetch(gzip.GzipFile(fileobj=raw, mode="rb")) if self.gzip else raw
        else:
            self.gzip = False
        self.file = source
        self.decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="strict")
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.bytes_read = 0
        self.slow_until = 0   # before this position, decode one event at a time (see batch)

    def close(self):
        self.file.close()
        if self._raw is not None:
            self._raw.close()

    def byte_offset(self) -> int:
        """The file offset of ``pos`` (plain files)."""
        pending = self.decoder.getstate()[0]
        return self.bytes_read - len(pending) - len(self.buf[self.pos:].encode("utf-8"))

    def more(self) -> bool:
        """Append the next chunk; False at the end of the file."""
        if self.eof:
            return False
        try:
            data = self.file.read(_CHUNK)
        except (EOFError, OSError, zlib.error) as exc:
            raise ProfileFormatError(self.path, f"truncated or corrupted gzip data ({exc})") from None
        self.bytes_read += len(data)
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

    def batch(self, sink: Sink) -> bool:
        """Add to ``sink`` the complete events from ``pos`` to the last ``}`` followed by ``,``
        in the buffer, decoded by one call of the parser (no Python work per event but the
        columns'); False when there are none.

        A cut inside an event or a string leaves an unclosed object or string, so a slice that
        parses as an array is exactly a run of whole events. The typed decoder takes it unless
        a value does not fit Kineto's types; then the standard library decodes dicts; when
        that fails too (a ``},`` inside a string), the rest of the buffer goes one event at a
        time.
        """
        if self.pos < self.slow_until:
            return False
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
            return False
        text = "[" + buf[pos:cut + 1] + "]"
        events = decode_events(text)
        if events is not None:
            snap = sink.snapshot()
            try:
                sink.add_events(events)
                self.pos = cut + 1
                return True
            except (ValueError, RecursionError):   # an Input Dims json refuses: the dict path
                sink.rollback(snap)
        del events
        try:
            events = json.loads(text)
        except (ValueError, RecursionError):
            self.slow_until = len(buf)
            return False
        del text
        _add_dicts(sink, events)
        self.pos = cut + 1
        return True

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
            except ValueError as exc:   # e.g. an integer of more digits than Python converts
                raise ProfileFormatError(self.path, f"not a valid torch trace: bad value {where} ({exc})") from None
            # A number that ends the buffer may go on in the next chunk.
            if end == len(self.buf) and not self.eof and self.more():
                continue
            self.pos = end
            return obj


def _add_dicts(sink: Sink, events: list) -> None:
    for ev in events:
        if ev.__class__ is dict:
            sink.add(ev)
        else:
            sink.skip("(not an object)")


# --------------------------------------------------------------------------- one pass


def read_trace(path, workers: int | None = None) -> RawTrace:
    """Read a torch trace file into a :class:`RawTrace`.

    Args:
        path: the trace (``.json``, or gzip).
        workers: processes to parse a large plain file with; default: the environment's
            ``GRADTRACE_TRACE_WORKERS``, else the usable cores (at most 8). 1 reads in this
            process only.
    Raises:
        ProfileFormatError: the file is not a torch trace, or is truncated or malformed.
    """
    if workers is None and os.environ.get("GRADTRACE_TRACE_WORKERS", "").isdigit():
        workers = int(os.environ["GRADTRACE_TRACE_WORKERS"])
    if workers is None:
        workers = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1,
                      _MAX_WORKERS)
    if multiprocessing.current_process().daemon:   # a pool's worker may not start processes
        workers = 1
    if workers > 1:
        try:
            with open(path, "rb") as f:
                # A gzip trace inflates 10-20 times: its text is taken as 10 times the file.
                size = os.fstat(f.fileno()).st_size * (10 if f.read(2) == b"\x1f\x8b" else 1)
        except OSError:
            size = 0
        workers = min(workers, size // _PART_BYTES)
    try:
        if workers > 1:
            try:
                return _read_file(path, workers)
            except _Fallback:
                pass
        return _read_file(path, 1)
    except RecursionError:
        raise ProfileFormatError(path, "not a valid torch trace: nested too deeply") from None


def _read_file(path, workers: int) -> RawTrace:
    text = _Text(path)
    try:
        return _read(text, path, _Parallel(path, workers, text.gzip) if workers > 1 else None)
    finally:
        text.close()


def _read(text: _Text, path, parallel: "_Parallel | None") -> RawTrace:
    sink = Sink()
    header: dict = {}
    c = text.expect("{[", "at the start")
    if c == "[":
        if parallel is not None:
            return parallel.run(text, header, "array")
        _events(text, sink)
    else:
        if text.skip_ws() == "}":
            text.pos += 1
            raise ProfileFormatError(path, "not a gradtrace profile or torch trace (JSON without traceEvents)")
        while True:
            key = _key(text, path)
            if key == "traceEvents":
                text.expect("[", "at the start of traceEvents")
                if parallel is not None:
                    return parallel.run(text, header, "object")
                _events(text, sink)
                _members(text, sink, header, path, seen_events=True)
                break
            header[key] = text.value(f"in {key!r}")
            if text.expect(",}", "between header keys") == "}":
                raise ProfileFormatError(path, "not a gradtrace profile or torch trace (JSON without traceEvents)")
    _end(text, path)
    return _finish(sink, header)


def _key(text: _Text, path) -> str:
    key = text.value("in the header")
    if not isinstance(key, str):
        raise ProfileFormatError(path, "not a valid torch trace: a header key is not a string")
    text.expect(":", f"after {key!r}")
    return key


def _members(text: _Text, sink: Sink, header: dict, path, seen_events: bool) -> None:
    """The rest of the top-level object after a member's value, through its '}'."""
    while text.expect(",}", "between header keys") == ",":
        key = _key(text, path)
        if key == "traceEvents":
            text.expect("[", "at the start of traceEvents")
            _events(text, sink)
            seen_events = True
        else:
            header[key] = text.value(f"in {key!r}")
    if not seen_events:
        raise ProfileFormatError(path, "not a gradtrace profile or torch trace (JSON without traceEvents)")


def _end(text: _Text, path) -> None:
    if text.skip_ws():
        raise ProfileFormatError(path, "not a valid torch trace: text after the end of the JSON")


def _events(text: _Text, sink: Sink) -> None:
    """Consume the events of an array whose '[' was just read, through its ']'."""
    if text.skip_ws() == "]":
        text.pos += 1
        return
    while True:
        if not text.batch(sink):
            _add_dicts(sink, [text.value("in traceEvents")])
        if text.expect(",]", "between events") == "]":
            return


def _finish(sink: Sink, header: dict) -> RawTrace:
    cpu, gpu, memory = sink.columns()
    return RawTrace(strings=sink.strings, threads=sink.threads, thread_names=sink.thread_names, header=header,
                    cpu=cpu, gpu=gpu, memory=memory, skipped=dict(sorted(sink.skipped.items())),
                    n_events=sink.n_events)


# --------------------------------------------------------------------------- parts in parallel


class _Fallback(Exception):
    """The parallel read gave up: read the file again in one process."""


def _context():
    return multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")


class _Parallel:
    """Parses the events after the header in worker processes.

    A plain file is cut into one byte range per worker, each read by its worker. A gzip file
    is inflated here and its text handed out in pieces of whole events, in turn, to the
    workers (parsing costs several times inflating). Either way a worker parses its pieces
    in file order into one :class:`Sink` and notes where each piece ends in it; the merge
    puts the pieces back in file order.
    """

    def __init__(self, path, workers: int, gz: bool):
        self.path = path
        self.workers = workers
        self.gz = gz

    def cuts(self, start: int) -> list[tuple[int, int | None]]:
        """[(part start, part stop)]: byte ranges of whole events from ``start``; the last one
        runs to the end of the file."""
        size = os.path.getsize(self.path)
        parts, begin = [], start
        with open(self.path, "rb") as f:
            for k in range(1, self.workers):
                target = max(start + (size - start) * k // self.workers, begin)
                f.seek(target)
                window = f.read(1 << 20)
                m = _CUT.search(window)
                if m is None:
                    continue
                parts.append((begin, target + m.start() + 1))
                begin = target + m.end() - 1
        parts.append((begin, None))
        return parts

    def run(self, text: _Text, header: dict, form: str) -> RawTrace:
        """Parse the events from ``text.pos`` (just after the array's '[').

        Raises:
            _Fallback: the file does not cut, a part does not parse, or processes or temporary
                files cannot be had: the caller reads the file in one process.
        """
        try:
            folder = tempfile.mkdtemp(prefix="gradtrace-trace-")
        except OSError:
            raise _Fallback from None
        try:
            results = self._stream(text, form, folder) if self.gz else self._ranges(text, form, folder)
            if any(r is None for r in results):
                raise _Fallback
            return _merge(results, header)
        except (OSError, ValueError, RuntimeError, multiprocessing.ProcessError):
            raise _Fallback from None      # no processes or no room for the columns' files
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _ranges(self, text: _Text, form: str, folder: str) -> list:
        parts = self.cuts(text.byte_offset())
        if len(parts) < 2:
            raise _Fallback
        jobs = [(str(self.path), a, b, k == len(parts) - 1, form, folder, k) for k, (a, b) in enumerate(parts)]
        with _context().Pool(len(parts)) as pool:
            return pool.map(_parse_range, jobs, chunksize=1)

    def _stream(self, text: _Text, form: str, folder: str) -> list:
        ctx = _context()
        results = ctx.Queue()
        inboxes = [ctx.Queue(maxsize=2) for _ in range(self.workers)]   # at most 2 pieces waiting each
        procs = [ctx.Process(target=_parse_pieces, args=(str(self.path), inbox, results, form, folder, k), daemon=True)
                 for k, inbox in enumerate(inboxes)]
        for proc in procs:
            proc.start()
        try:
            try:
                for index, (piece, last) in enumerate(_pieces(text)):
                    _put(inboxes[index % self.workers], (index, piece, last), procs)
                for inbox in inboxes:
                    _put(inbox, None, procs)
                out = [_get(results, procs) for _ in procs]
            except Exception:    # noqa: BLE001 - a broken file or worker: the one-process read decides
                for proc in procs:
                    proc.terminate()
                raise _Fallback from None
        finally:
            for proc in procs:
                proc.join()
        return [r for _, r in sorted(out, key=lambda item: item[0])]


def _put(inbox, item, procs) -> None:
    """``inbox.put(item)``, giving up when a worker has died (it would never take it)."""
    while True:
        try:
            return inbox.put(item, timeout=1)
        except queue.Full:
            if not all(p.is_alive() for p in procs):
                raise RuntimeError("a trace worker died") from None


def _get(results, procs):
    while True:
        try:
            return results.get(timeout=1)
        except queue.Empty:
            if any(p.exitcode not in (None, 0) for p in procs):
                raise RuntimeError("a trace worker died") from None


def _pieces(text: _Text):
    """(bytes, last) pieces of the rest of ``text``'s file: runs of whole events cut after a
    ``},`` + newline before a ``{``, each a few MB; the last piece runs to the end."""
    buf = text.buf[text.pos:].encode("utf-8") + text.decoder.getstate()[0]
    text.buf, text.pos = "", 0
    while True:
        data = text.file.read(_CHUNK)
        if not data:
            yield buf, True
            return
        buf += data
        cut = _last_cut(buf, 0)
        if cut is not None:
            yield buf[:cut[0]], False
            buf = buf[cut[1]:]
        elif len(buf) > 16 * _CHUNK:     # no cut in 64 MB: not Kineto's layout
            raise ValueError("no event boundary")


def _last_cut(buf: bytes, floor: int):
    """(end of the piece, start of the next) at the last cut in ``buf[floor:]``, or None."""
    last = None
    for start in (max(floor, len(buf) - (1 << 20)), floor):   # the last MB holds one, as a rule
        for last in _CUT.finditer(buf, start):
            pass
        if last is not None:
            return last.start() + 1, last.end() - 1
    return None


def _parse_text(path, source, last: bool, form: str, sink: Sink) -> dict | None:
    """Parse one part (its events, and when ``last`` the rest of the file) into ``sink``;
    the header keys met after the events; None when the part does not parse."""
    text = _Text(path, source)
    header: dict = {}
    try:
        text.expect("[", "")
        _events(text, sink)
        if last and form == "object":
            _members(text, sink, header, path, seen_events=True)
        _end(text, path)
    except Exception:   # noqa: BLE001 - any failure: the one-process read decides and words it
        return None
    finally:
        text.close()
    return header


def _piece_record(index: int, sink: Sink, names_before: dict) -> dict:
    """Where piece ``index`` ends in the worker's sink: column lengths, table sizes, and the
    thread names it set."""
    return {"index": index, "lengths": {(t, k): len(v) for t, b in (("cpu", sink.cpu), ("gpu", sink.gpu),
                                                                    ("memory", sink.mem)) for k, v in b.items()},
            "strings": len(sink.strings), "threads": len(sink.threads),
            "names": {k: v for k, v in sink.thread_names.items() if names_before.get(k) != v}}


def _worker_result(sink: Sink, pieces: list, header: dict, folder: str, worker: int) -> dict:
    files = {}
    for table, buffers in (("cpu", sink.cpu), ("gpu", sink.gpu), ("memory", sink.mem)):
        for name, buf in buffers.items():
            file = os.path.join(folder, f"{worker}-{table}-{name}")
            with open(file, "wb") as f:
                buf.tofile(f)
            files[(table, name)] = (file, buf.typecode)
    return {"strings": sink.strings, "threads": sink.threads, "skipped": sink.skipped, "n_events": sink.n_events,
            "header": header, "files": files, "pieces": pieces}


def _parse_range(job) -> dict | None:
    """In a worker: parse one byte range of a plain file into column files."""
    path, start, stop, last, form, folder, index = job
    sink = Sink()
    header = _parse_text(path, _Range(path, start, stop, suffix=b"" if last else b"]"), last, form, sink)
    if header is None:
        return None
    return _worker_result(sink, [_piece_record(index, sink, {})], header, folder, index)


class _Bytes:
    def __init__(self, *parts: bytes):
        self.parts = [p for p in parts if p]

    def read(self, n: int) -> bytes:
        return self.parts.pop(0) if self.parts else b""

    def close(self):
        self.parts = []


def _parse_pieces(path, inbox, results, form: str, folder: str, worker: int) -> None:
    """In a worker: parse the pieces sent to ``inbox`` (until None), then put the result."""
    sink, pieces, header, failed = Sink(), [], {}, False
    while True:
        item = inbox.get()
        if item is None:
            break
        index, piece, last = item
        if failed:
            continue                          # keep draining: the sender must not block
        names = dict(sink.thread_names)
        got = _parse_text(path, _Bytes(b"[", piece, b"" if last else b"]"), last, form, sink)
        del piece, item
        if got is None:
            failed = True
            continue
        header.update(got)
        pieces.append(_piece_record(index, sink, names))
    results.put((worker, None if failed else _worker_result(sink, pieces, header, folder, worker)))


def _intern(new: list, table: list, ids: dict, remap: list) -> None:
    """Append to ``remap`` the merged id of each entry of ``new`` (a worker's strings or
    threads, in its order): its index in ``table``, where an entry not seen before is
    appended (``ids``: entry -> index)."""
    for item in new:
        i = ids.get(item)
        if i is None:
            i = ids[item] = len(table)
            table.append(item)
        remap.append(i)


def _merge(results: list[dict], header: dict) -> RawTrace:
    """One RawTrace from the workers' pieces put back in file order: strings and threads
    interned in order of first use (what one pass gives: a piece's new entries are those it
    met first, in its order), ids remapped, columns read into place."""
    strings: list = []
    string_ids: dict = {}
    threads: list = []
    thread_ids: dict = {}
    thread_names: dict = {}
    skipped: dict = {}
    n_events = 0
    sremap = [[] for _ in results]
    tremap = [[] for _ in results]
    order = sorted((rec["index"], w) for w, r in enumerate(results) for rec in r["pieces"])
    records = {(rec["index"], w): rec for w, r in enumerate(results) for rec in r["pieces"]}
    slices = []                                  # (worker, {column: (from, to)}) in file order
    done = [dict.fromkeys(results[0]["files"], 0) if results else {} for _ in results]
    for index, w in order:
        rec, r = records[(index, w)], results[w]
        _intern(r["strings"][len(sremap[w]):rec["strings"]], strings, string_ids, sremap[w])
        _intern(r["threads"][len(tremap[w]):rec["threads"]], threads, thread_ids, tremap[w])
        thread_names.update(rec["names"])
        slices.append((w, {key: (done[w][key], n) for key, n in rec["lengths"].items()}))
        done[w] = dict(rec["lengths"])
    for r in results:
        for cat, n in r["skipped"].items():
            skipped[cat] = skipped.get(cat, 0) + n
        n_events += r["n_events"]
        header.update(r["header"])
    maps = [(np.array(sm, dtype=np.int32), np.array(tm, dtype=np.int32)) for sm, tm in zip(sremap, tremap)]
    tables: dict = {"cpu": {}, "gpu": {}, "memory": {}}
    for table, names in (("cpu", CPU_FIELDS), ("gpu", GPU_FIELDS + GPU_FLOAT_FIELDS), ("memory", MEMORY_FIELDS)):
        for name in names:
            key = (table, name)
            dtype = np.dtype(results[0]["files"][key][1])
            parts = [np.fromfile(r["files"][key][0], dtype=dtype) for r in results]   # this column only
            for r in results:
                os.unlink(r["files"][key][0])
            column = np.empty(sum(len(p) for p in parts), dtype=dtype)
            at = 0
            for w, spans in slices:
                a, b = spans[key]
                part = column[at:at + b - a]
                part[:] = parts[w][a:b]
                if name in _ID_COLUMNS[table]:
                    valid = part >= 0
                    part[valid] = maps[w][0][part[valid]]
                elif name == "thread":
                    part[:] = maps[w][1][part]
                at += b - a
            del parts
            tables[table][name] = column
    return RawTrace(strings=strings, threads=threads, thread_names=thread_names, header=header,
                    cpu=tables["cpu"], gpu=tables["gpu"], memory=tables["memory"],
                    skipped=dict(sorted(skipped.items())), n_events=n_events)
