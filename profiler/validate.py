"""The contract between a profile reader and everything after it.

A reader (the ``.gtprof`` loader, the torch-trace importer) either hands on a profile that every
analysis, table, export and dashboard page can handle, or raises :class:`ProfileFormatError`
with one line naming the file and what is wrong. :func:`validate_profile` is that check, in
one place: it looks at everything later code trusts — metadata types, string ids, scopes,
times (range and order), device intervals, input-shape strings — and nothing else. Later code
may then index, subtract and format without guarding.

Text is repaired, not refused: a lone surrogate (a file name that was not valid UTF-8, read
with ``surrogateescape``) cannot be written as UTF-8, so :func:`valid_text` makes it U+FFFD,
here and when saving; the exports do the same.
"""
from __future__ import annotations

import json
import re
from typing import NamedTuple

import numpy as np

from .records import (EDGE_COLUMNS, EVENT_COLUMNS, GPU_COLUMNS, MEMORY_COLUMNS, NODE_COLUMNS, GpuKind, MemoryCategory,
                      Scope, empty_columns, valid_text)

__all__ = ["ProfileFormatError", "ValidProfile", "validate_profile", "valid_text", "parse_shapes",
           "loads_shallow", "json_depth", "MAX_TIME_SPAN_NS", "MAX_METADATA_DEPTH", "MAX_JSON_DEPTH"]

# Times of one profile lie within 2**53 ns (104 days) of each other: durations and their sums
# stay exact in float64 and far from int64 overflow, and any time fits the nesting keys.
MAX_TIME_SPAN_NS = 2**53
# |time| bound, so that differences of any two times fit in int64.
_MAX_ABS_TIME_NS = 2**62
MAX_METADATA_DEPTH = 16
_MAX_BYTES = 2**48
# A tensor dimension above 2**40 is no real tensor; the bound keeps FLOP estimates (products of
# a few dimensions) inside int64.
_MAX_DIM = 2**40
_MAX_RANK = 16
# Strings of the string table that hold JSON (input shapes, input dtypes) nest a few levels
# (inputs, tensor lists, dims); Python's json parser and encoder recurse once per level, so a
# string nested deeper than this is text, never parsed.
MAX_JSON_DEPTH = 32
# A JSON string literal (escapes included): its brackets are not structure.
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


class ProfileFormatError(ValueError):
    """A file is not a readable gradtrace profile. The message is one line: path and problem."""

    def __init__(self, path, problem: str):
        self.path = valid_text(str(path))
        self.problem = " ".join(valid_text(str(problem)).split())
        super().__init__(f"{self.path}: {self.problem}")

    def __reduce__(self):
        # Raised in a worker process (parallel imports): rebuilt from its two parts.
        return (type(self), (self.path, self.problem))


def json_depth(text: str) -> int:
    """How deep the brackets of a JSON text nest (0 for a scalar), by one pass without
    recursion: string literals removed, then a running count of openers minus closers."""
    bare = _JSON_STRING.sub("", text)
    if "[" not in bare and "{" not in bare:
        return 0
    codes = np.frombuffer(bare.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    step = ((codes == ord("[")) | (codes == ord("{"))).astype(np.int64) - \
        ((codes == ord("]")) | (codes == ord("}")))
    return int(np.cumsum(step).max())


def loads_shallow(text: str, max_depth: int = MAX_JSON_DEPTH):
    """``json.loads(text)``, or None when the text is not JSON or nests deeper than
    ``max_depth`` (checked first, so that neither the parser nor a later ``json.dumps`` of
    the value recurses past Python's limit: a RecursionError is not a parse error)."""
    if json_depth(text) > max_depth:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def parse_shapes(text: str) -> list[list[int]] | None:
    """Input shapes from their string form (``"[[8, 16], []]"``), or None when malformed.

    A well-formed value is a JSON list with one entry per input: a shape (a list of
    integers in ``[0, 2**40)``), or for a tensor-list input (``aten::cat``'s, in torch traces)
    a list of shapes, as PyTorch's ``Input Dims`` has it.
    """
    if len(text) > 100_000:   # no huge parse
        return None
    value = loads_shallow(text)
    if not isinstance(value, list):
        return None
    for entry in value:
        if not isinstance(entry, list):
            return None
        shapes = entry if entry and all(isinstance(s, list) for s in entry) else [entry]
        if not all(_is_shape(s) for s in shapes):
            return None
    return value


def _is_shape(shape) -> bool:
    return (isinstance(shape, list) and len(shape) <= _MAX_RANK
            and all(type(d) is int and 0 <= d < _MAX_DIM for d in shape))


# --------------------------------------------------------------------------- metadata


def _is_int(v) -> bool:
    return type(v) is int and -(2**63) <= v < 2**63


def _list_of(kind):
    return lambda v: isinstance(v, list) and all(isinstance(x, kind) and type(x) is not bool for x in v)


# Known keys and what later code assumes about them; unknown keys are kept untouched.
_METADATA_TYPES = {
    "schema_version": (_is_int, "an integer"),
    "gradtrace_version": (lambda v: isinstance(v, str), "a string"),
    "trace_name": (lambda v: isinstance(v, str), "a string"),
    "activities": (_list_of(str), "a list of strings"),
    "devices": (_list_of(str), "a list of strings"),
    "start_time_ns": (_is_int, "an integer"),
    "end_time_ns": (_is_int, "an integer"),
    "wall_clock_base_ns": (_is_int, "an integer"),
    "pid": (_is_int, "an integer"),
    "steps": (lambda v: isinstance(v, list) and len(v) == 2 and all(map(_is_int, v)), "[first, last] integers"),
    "device_region_ns": (lambda v: isinstance(v, dict) and all(map(_is_int, v.values())),
                         "an object of integers"),
    "device_properties": (lambda v: (isinstance(v, list) and all(isinstance(p, dict) for p in v))
                          or (isinstance(v, dict) and all(isinstance(p, dict) for p in v.values())),
                          "a list or object of objects"),
    "distributed_info": (lambda v: isinstance(v, dict), "an object"),
    **{flag: (lambda v: isinstance(v, bool), "true or false")
       for flag in ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules",
                    "synthetic", "memory_categories")},
}


def _clean_json(value, depth: int = 0):
    """A JSON value with its strings made valid UTF-8 and NaN/Infinity (which ``json.dumps``
    writes but strict JSON readers refuse) made null.

    Raises:
        ValueError: nested deeper than ``MAX_METADATA_DEPTH``.
    """
    if depth > MAX_METADATA_DEPTH:
        raise ValueError(f"is nested deeper than {MAX_METADATA_DEPTH} levels")
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, dict):
        return {valid_text(str(k)): _clean_json(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean_json(v, depth + 1) for v in value]
    return value


def validate_metadata(path, metadata) -> dict:
    """The metadata object checked (known keys' types) and cleaned (strings, depth).

    Raises:
        ProfileFormatError: not an object, a known key of the wrong type, or nesting deeper
            than ``MAX_METADATA_DEPTH``.
    """
    if not isinstance(metadata, dict):
        raise ProfileFormatError(path, f"corrupted profile: metadata is {type(metadata).__name__}, not an object")
    try:
        metadata = _clean_json(metadata)
    except ValueError as exc:
        raise ProfileFormatError(path, f"corrupted profile: metadata {exc}") from None
    for key, (ok, what) in _METADATA_TYPES.items():
        if key in metadata and not ok(metadata[key]):
            raise ProfileFormatError(path, f"corrupted profile: metadata {key!r} must be {what}, "
                                           f"not {json.dumps(metadata[key])[:40]}")
    return metadata


# --------------------------------------------------------------------------- columns


def _windows(n: int, size: int | None):
    """``(lo, hi)`` row windows covering ``range(n)`` (one window when ``size`` is None)."""
    size = max(n, 1) if size is None else size
    for lo in range(0, n, size):
        yield lo, min(lo + size, n)


def _part(table: dict, lo: int, hi: int) -> dict:
    return {name: col[lo:hi] for name, col in table.items()}


def _check_ids(path, events: dict, n_strings: int) -> None:
    """String ids must point into the string table (analysis indexes with them)."""
    for name, low in (("name_id", 0), ("device_id", 0), ("shapes_id", -1), ("dtypes_id", -1), ("stack_id", -1)):
        col = events[name]
        if len(col) and (col.min() < low or col.max() >= n_strings):
            raise ProfileFormatError(path, "corrupted profile: a string id points outside the string table")


def _check_event_times(path, events: dict, before: int | None) -> list:
    """Order and intervals of a window of events (``before``: the previous window's last
    start); returns the window's times, whose overall span is checked at the end."""
    start, end = events["start_ns"], events["end_ns"]
    dev_start, dev_end = events["device_start_ns"], events["device_end_ns"]
    if np.any(end < start):
        raise ProfileFormatError(path, "corrupted profile: an event ends before it starts")
    if np.any(np.diff(start) < 0) or (before is not None and len(start) and start[0] < before):
        raise ProfileFormatError(path, "corrupted profile: events are not in start order")
    has_dev = dev_start != -1
    if np.any(has_dev != (dev_end != -1)) or np.any(dev_start[has_dev] < 0) or \
            np.any(dev_end[has_dev] < dev_start[has_dev]):
        raise ProfileFormatError(path, "corrupted profile: an event has an invalid device interval")
    return [start, end, dev_start[has_dev], dev_end[has_dev]]


def _extent(times: list, span: list) -> None:
    """Widen ``span`` ([low, high] or [None, None]) to cover ``times``."""
    for c in times:
        if len(c):
            low, high = int(c.min()), int(c.max())
            span[0] = low if span[0] is None else min(span[0], low)
            span[1] = high if span[1] is None else max(span[1], high)


def _check_span(path, span: list) -> None:
    low, high = span
    if low is None:
        return
    if low < -_MAX_ABS_TIME_NS or high > _MAX_ABS_TIME_NS or high - low > MAX_TIME_SPAN_NS:
        raise ProfileFormatError(path, f"corrupted profile: its times span {high - low} ns, more than "
                                       f"the {MAX_TIME_SPAN_NS} ns (104 days) a profile may cover")


def _check_memory(path, memory: dict, n_strings: int, before: int | None) -> None:
    device = memory["device_id"]
    if len(device) and (device.min() < 0 or device.max() >= n_strings):
        raise ProfileFormatError(path, "corrupted profile: a string id points outside the string table")
    time = memory["time_ns"]
    if np.any(np.diff(time) < 0) or (before is not None and len(time) and time[0] < before):
        raise ProfileFormatError(path, "corrupted profile: memory records are not in time order")
    # Sizes beyond 2**48 bytes (256 TiB) are no allocation; the bound keeps sums in int64.
    for name in ("bytes", "total_allocated"):
        col = memory[name]
        if len(col) and (int(col.min()) < -_MAX_BYTES or int(col.max()) > _MAX_BYTES):
            raise ProfileFormatError(path, f"corrupted profile: a memory record's {name} is out of range")
    category, size = memory["category"], memory["bytes"]
    if len(category) and (int(category.min()) < 0 or int(category.max()) > max(MemoryCategory)):
        raise ProfileFormatError(path, "corrupted profile: a memory record's category is out of range")
    if np.any((category != 0) & (size != 0)):
        raise ProfileFormatError(path, "corrupted profile: a memory record with a category has bytes")


_SCOPES = np.array([int(s) for s in Scope])


def _check_scopes(path, events: dict) -> None:
    scope = events["scope"]
    known = np.isin(scope, _SCOPES)
    if not np.all(known):
        raise ProfileFormatError(path, f"corrupted profile: unknown event scope {int(scope[~known][0])}")


def _check_shapes(path, shape_ids, strings: list[str]) -> dict[int, list]:
    shapes = {}
    for sid in shape_ids:
        if sid < 0:
            continue
        parsed = parse_shapes(strings[sid])
        if parsed is None:
            raise ProfileFormatError(path, f"corrupted profile: input shapes {strings[sid][:40]!r} are not "
                                           "a list of lists of sizes")
        shapes[sid] = parsed
    return shapes


def _check_rows(path, events: dict, memory: dict, strings: list, window_rows, after_window) -> dict:
    """Every per-row check of the events and memory tables, a window of rows at a time
    (the temporaries stay the size of a window; ``after_window`` may release its pages);
    returns the parsed input shapes."""
    span: list = [None, None]
    # Which shapes ids occur (ids are in [-1, len(strings)) once _check_ids passed): a table,
    # not np.unique, which sorts or hashes every row.
    has_shapes = np.zeros(len(strings) + 1, dtype=bool)
    before = None
    for lo, hi in _windows(len(events["start_ns"]), window_rows):
        part = _part(events, lo, hi)
        _check_ids(path, part, len(strings))
        _check_scopes(path, part)
        _extent(_check_event_times(path, part, before), span)
        before = int(part["start_ns"][-1])
        has_shapes[part["shapes_id"].astype(np.int64) + 1] = True
        if after_window is not None:
            after_window()
    before = None
    for lo, hi in _windows(len(memory["time_ns"]), window_rows):
        part = _part(memory, lo, hi)
        _check_memory(path, part, len(strings), before)
        _extent([part["time_ns"]], span)
        before = int(part["time_ns"][-1])
        if after_window is not None:
            after_window()
    _check_span(path, span)
    return _check_shapes(path, (np.flatnonzero(has_shapes[1:])).tolist(), strings)


def _check_graph(path, events: dict, nodes: dict, edges: dict) -> None:
    """The backward graph's ids: each node row names a distinct backward event and a node id
    in ``[0, n)`` (ids are dense), each edge two node ids that occur in the nodes table."""
    event, node_id = nodes["event"], nodes["node_id"]
    n_events = len(events["start_ns"])
    if len(event):
        if event.min() < 0 or event.max() >= n_events or len(np.unique(event)) != len(event):
            raise ProfileFormatError(path, "corrupted profile: a graph node's event is out of range or repeated")
        if np.any(events["scope"][event] != Scope.BACKWARD_FUNCTION):
            raise ProfileFormatError(path, "corrupted profile: a graph node's event is not a backward node")
        if node_id.min() < 0 or node_id.max() >= len(event):
            raise ProfileFormatError(path, "corrupted profile: a graph node id is out of range")
    known = np.unique(node_id)
    for col in (edges["node_id"], edges["next_node_id"]):
        if len(col) and not np.all(np.isin(col, known)):
            raise ProfileFormatError(path, "corrupted profile: a graph edge names a node that is not in the profile")
    if len(edges["input_nr"]) and edges["input_nr"].min() < 0:
        raise ProfileFormatError(path, "corrupted profile: a graph edge has a negative input_nr")


def _check_gpu(path, events: dict, gpu: dict, window_rows: int | None = None, after_window=None) -> None:
    """Device activities: distinct events in ascending order, each a zero-length host event
    with a device interval (a leaf of the nesting), known kinds and sane launch values.
    In row windows, each followed by ``after_window``: the activities' events are gathered
    from all over the event columns, whose pages a mapped file then hands back (a 10M-event
    import's 1.3M activities held 230 MB of them at once)."""
    n_events, kinds = len(events["start_ns"]), [int(k) for k in GpuKind]
    before = -1
    # An eighth of the event windows: a window of activities spans a stretch of events ~5x longer.
    for lo, hi in _windows(len(gpu["event"]), window_rows and max(1, window_rows // 8)):
        part = _part(gpu, lo, hi)
        event = part["event"]
        if event.min() < 0 or event.max() >= n_events or event[0] <= before or np.any(np.diff(event) <= 0):
            raise ProfileFormatError(path, "corrupted profile: a GPU activity's event is out of range or out of order")
        before = int(event[-1])
        if np.any(events["start_ns"][event] != events["end_ns"][event]) or np.any(events["device_start_ns"][event] < 0):
            raise ProfileFormatError(path, "corrupted profile: a GPU activity's event is not a zero-length "
                                           "event with a device interval")
        if not np.all(np.isin(part["kind"], kinds)):
            raise ProfileFormatError(path, "corrupted profile: a GPU activity has an unknown kind")
        for name, dt in GPU_COLUMNS.items():
            col = part[name]
            if dt.kind == "f":
                if np.any(~np.isnan(col) & ~((col >= 0) & (col < 1e12))):
                    raise ProfileFormatError(path, f"corrupted profile: a GPU activity's {name} is out of range")
            elif name not in ("event", "kind", "correlation") and (col.min() < -1 or col.max() > _MAX_BYTES):
                raise ProfileFormatError(path, f"corrupted profile: a GPU activity's {name} is out of range")
        if after_window is not None:
            after_window()


class ValidProfile(NamedTuple):
    """A profile's checked parts, in ``ProfileData``'s argument order."""

    event_columns: dict
    memory_columns: dict
    strings: list
    metadata: dict
    input_shapes: dict
    node_columns: dict
    edge_columns: dict
    gpu_columns: dict


def validate_profile(path, events: dict, memory: dict, strings, metadata, nodes: dict | None = None,
                     edges: dict | None = None, gpu: dict | None = None, *, window_rows: int | None = None,
                     after_window=None):
    """Check a profile's parts: what every analysis, export and page trusts.

    Args:
        path: the file the parts came from (named in errors).
        events, memory: column name -> numpy array (``records.EVENT_COLUMNS`` /
            ``MEMORY_COLUMNS``, equal lengths within a table).
        strings: the string table (a list of str).
        metadata: the metadata object.
        nodes, edges: the backward graph (``records.NODE_COLUMNS`` / ``EDGE_COLUMNS``);
            None: the profile has none (schema 1, a torch trace).
        gpu: device activities (``records.GPU_COLUMNS``); None: none (schema < 4).
        window_rows: check the events and memory rows this many at a time (None: all at
            once); the result is the same, the temporaries are bounded.
        after_window: called after each window (a mapped file hands the pages back).
    Returns:
        A :class:`ValidProfile`: the parts, strings made valid UTF-8 and input shapes parsed,
        ready for ``ProfileData(*parts)`` (:func:`profiler.load` builds it; this module stays
        below ProfileData so that importers can use it).
    Raises:
        ProfileFormatError: with one line saying what is wrong.
    """
    if not isinstance(strings, list) or not all(isinstance(s, str) for s in strings):
        raise ProfileFormatError(path, "corrupted profile: the string table is not a list of strings")
    nodes = nodes if nodes is not None else empty_columns(NODE_COLUMNS)
    edges = edges if edges is not None else empty_columns(EDGE_COLUMNS)
    gpu = gpu if gpu is not None else empty_columns(GPU_COLUMNS)
    if "category" not in memory:     # a torch trace: no kinds
        memory = dict(memory, category=np.zeros(len(memory.get("time_ns", ())), dtype=np.int8))
    for table, schema, what in ((events, EVENT_COLUMNS, "events"), (memory, MEMORY_COLUMNS, "memory"),
                                (nodes, NODE_COLUMNS, "nodes"), (edges, EDGE_COLUMNS, "edges"),
                                (gpu, GPU_COLUMNS, "gpu")):
        if set(table) != set(schema) or len({len(c) for c in table.values()}) > 1:
            raise ProfileFormatError(path, f"corrupted profile: the {what} columns do not match the schema")
    metadata = validate_metadata(path, metadata)
    strings = [valid_text(s) for s in strings]
    shapes = _check_rows(path, events, memory, strings, window_rows, after_window)
    _check_graph(path, events, nodes, edges)
    _check_gpu(path, events, gpu, window_rows, after_window)
    return ValidProfile(events, memory, strings, metadata, shapes, nodes, edges, gpu)
