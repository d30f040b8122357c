"""Chrome trace export: a profile as Kineto-style JSON for Perfetto, chrome://tracing and HTA.

Two steps. :func:`~.chrome_layout.chrome_layout` decides where every event goes — processes
and rows, nesting repair, flows, counters, metadata — and returns plain data (see that module
for the layout). This module encodes a layout as JSON text without deciding anything:
:func:`chrome_trace` returns a :class:`ChromeTrace` (the header dict plus the events, encoded
chunk by chunk when asked), and :func:`~.jsonfile.write_json` is the one writer that puts it
in a file (``.json``, or gzip for ``.json.gz``).

Times: ``ts``/``dur`` are microseconds written exactly from integer nanoseconds (no float
rounding): at most three decimals, without trailing zeros (``12.5`` for 12,500 ns, ``3`` for
3,000 ns; every JSON reader parses them to the same double as ``12.500``/``3.000``).

Strings: every string (names, shapes, stacks) goes through :func:`~.jsonfile.json_string`
once per string id, so the text is valid JSON and UTF-8 whatever the names hold.

Size: one compact JSON object per line, no spaces, and no field a reader defaults the same
way: ``[memory]`` instants carry no ``"s"`` (thread scope is the Trace Event Format's default
in chrome://tracing and Perfetto alike).

Speed: per-event text is assembled with f-strings from numpy columns formatted once per
chunk. A million-event profile writes in a few seconds with a bounded amount of extra memory.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

import numpy as np

from .chrome_layout import DEFAULT_STREAM_TID, ChromeLayout, Flows, chrome_layout
from .jsonfile import json_dumps, json_string, open_output, write_json
from .validate import loads_shallow

if TYPE_CHECKING:  # pragma: no cover
    from .data import ProfileData

# open_output, write_json, json_string and DEFAULT_STREAM_TID live in .jsonfile and
# .chrome_layout; they stay importable from here, where callers have found them so far.
__all__ = ["ChromeTrace", "chrome_trace", "export_chrome_trace", "encode_events", "write_json",
           "open_output", "json_string", "DEFAULT_STREAM_TID"]

CHUNK_EVENTS = 32_768           # events encoded per chunk (bounds the writer's memory)
# Fraction of a microsecond per ns remainder, trailing zeros dropped: 0 -> "", 500 -> ".5".
_FRAC = np.array([f".{i:03d}".rstrip("0").rstrip(".") for i in range(1000)], dtype=object)

# Categories and names (Kineto's spelling).
CAT_CPU_OP = "cpu_op"
CAT_USER_ANNOTATION = "user_annotation"
CAT_KERNEL = "kernel"
CAT_GPU_USER_ANNOTATION = "gpu_user_annotation"
CAT_CPU_INSTANT = "cpu_instant_event"
MEMORY_EVENT_NAME = "[memory]"
MEMORY_COUNTER_NAME = "Allocated bytes"


# --------------------------------------------------------------------------- the trace


@dataclass
class ChromeTrace:
    """A profile laid out as Chrome trace events, ready to encode.

    Attributes:
        header: every top-level key except ``traceEvents`` (schemaVersion, deviceProperties,
            distributedInfo, displayTimeUnit, baseTimeNanoseconds, traceName, otherData).
        stats: counts — events per kind (``counter_samples``: allocated-bytes samples left
            after coalescing), ``clamped_overlaps``, ``rounding_fixes``.
        layout: the :class:`~.chrome_layout.ChromeLayout` the events are encoded from.
    """

    header: dict
    stats: dict
    layout: ChromeLayout

    def iter_event_chunks(self, chunk_events: int = CHUNK_EVENTS) -> Iterator[str]:
        """Encoded events, a chunk at a time (comma-separated JSON objects)."""
        return encode_events(self.layout, chunk_events)

    def events(self) -> list[dict]:
        """All trace events as dicts (parsed back from the encoded chunks)."""
        out: list[dict] = []
        for chunk in self.iter_event_chunks():
            out.extend(json.loads("[" + chunk + "]"))
        return out

    def to_dict(self) -> dict:
        """The whole trace object, as a JSON parser would return it."""
        d = json.loads(json_dumps(self.header))
        d["traceEvents"] = self.events()
        return d

    def write(self, path) -> int:
        """Write to ``path`` (``.json`` or ``.json.gz``); returns uncompressed bytes written."""
        return write_json(path, self.header, "traceEvents", self.iter_event_chunks())


def chrome_trace(data: "ProfileData", distributed_info: dict | None = None,
                 trace_name: str | None = None) -> ChromeTrace:
    """Lay a profile out as Chrome trace events (see :mod:`.chrome_layout`).

    Args:
        data: the profile (``prof.profile_data`` or ``profiler.load(path)``).
        distributed_info: ``distributedInfo`` (default ``{"rank": 0, "world_size": 1}``, or
            ``metadata["distributed_info"]`` when the profile has one).
        trace_name: ``traceName`` (default: from the metadata, else "gradtrace profile").
    Returns:
        A :class:`ChromeTrace`; ``.write(path)`` writes it.
    """
    layout = chrome_layout(data, distributed_info=distributed_info, trace_name=trace_name)
    return ChromeTrace(layout.header, layout.stats, layout)


def export_chrome_trace(data: "ProfileData", path, distributed_info: dict | None = None,
                        trace_name: str | None = None) -> ChromeTrace:
    """Write ``data`` as a Chrome trace to ``path`` (gzip when it ends in ``.gz``).

    Returns:
        The :class:`ChromeTrace` written (its ``stats`` count repaired overlaps and roundings).
    """
    trace = chrome_trace(data, distributed_info=distributed_info, trace_name=trace_name)
    trace.write(os.fspath(path))
    return trace


# --------------------------------------------------------------------------- the encoder


def encode_events(layout: ChromeLayout, chunk_events: int = CHUNK_EVENTS) -> Iterator[str]:
    """The trace events of ``layout`` as JSON text, in the order of the layout's fields.

    Args:
        layout: from :func:`~.chrome_layout.chrome_layout`.
        chunk_events: events (a flow counts its two ends as one) per chunk at most.
    Returns:
        An iterator of chunks, each a ``",\\n"``-separated run of JSON objects (no brackets).
    """
    yield ",\n".join(json_dumps(e) for e in layout.metadata_events)
    yield from _encode_cpu(layout, chunk_events)
    yield from _encode_device(layout, chunk_events)
    yield from _encode_flows(layout.fwdbwd, chunk_events)
    yield from _encode_flows(layout.ac2g, chunk_events)
    yield from _encode_memory(layout, chunk_events)
    yield from _encode_counters(layout, chunk_events)


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


def _compact_json(text: str) -> str:
    """Re-encode a JSON document from the string table (shapes, dtypes) without spaces; text
    that is not JSON, or nests too deep to parse and re-encode without recursing past
    Python's limit (``[`` * 10,000), is written as a JSON string instead."""
    value = loads_shallow(text)
    return json_string(text) if value is None and text.strip() != "null" else json_dumps(value)


def _optional_args(values: np.ndarray, make) -> np.ndarray | None:
    """``make(v)`` where ``values >= 0``, '' elsewhere; None when no value is set."""
    w = np.flatnonzero(values >= 0)
    if len(w) == 0:
        return None
    part = np.full(len(values), "", dtype=object)
    part[w] = make(w)
    return part


def _encode_cpu(layout: ChromeLayout, chunk_events: int) -> Iterator[str]:
    ev, strings = layout.cpu, layout.strings
    n = len(ev.ts)
    names = _Lookup(strings, ev.name_id, json_string)
    # One prefix per (category, name, thread): '{"ph":"X","cat":..,"name":..,"pid":..,"tid":..,'
    pkey = (ev.name_id * 3 + ev.user_scope) * (2**32) + ev.tid
    ukeys, pinv = np.unique(pkey, return_inverse=True)
    pinv = pinv.reshape(-1)
    prefixes = np.empty(len(ukeys), dtype=object)
    for j, key in enumerate(ukeys.tolist()):
        tid = key % (2**32)
        nid, user = divmod(key // (2**32), 3)
        cat = CAT_USER_ANNOTATION if user else CAT_CPU_OP
        prefixes[j] = f'{{"ph":"X","cat":"{cat}","name":{names.table[nid + 1]},"pid":{ev.pid},"tid":{tid},'
    dims = _Lookup(strings, ev.shapes_id, lambda s: ',"Input Dims":' + _compact_json(s))
    types = _Lookup(strings, ev.dtypes_id, lambda s: ',"Input type":' + _compact_json(s))
    stacks = (_Lookup(strings, ev.stack_id, lambda s: ',"Call stack":' + json_string(s.replace("\n", ";")))
              if ev.stack_id is not None else None)
    for lo in range(0, n, chunk_events):
        hi = min(n, lo + chunk_events)
        sl = slice(lo, hi)
        # args after "External id", in this order: sequence, shapes, dtypes, stack, correlation.
        extra = dims(ev.shapes_id[sl])
        seq, fwd_tid = ev.sequence_nr[sl], ev.fwd_thread_id[sl]
        part = _optional_args(seq, lambda w: [f',"Sequence number":{q},"Fwd thread id":{f}'
                                              for q, f in zip(seq[w].tolist(), fwd_tid[w].tolist())])
        if part is not None:
            extra = part + extra
        if (ev.dtypes_id[sl] >= 0).any():
            extra = extra + types(ev.dtypes_id[sl])
        if stacks is not None:
            extra = extra + stacks(ev.stack_id[sl])
        corr = ev.correlation[sl]
        part = _optional_args(corr, lambda w: [f',"correlation":{c}' for c in corr[w].tolist()])
        if part is not None:
            extra = extra + part
        tq, tr = _us_parts(ev.ts[sl])
        dq, dr = _us_parts(ev.dur[sl])
        yield ",\n".join([
            f'{p}"ts":{a_}{b_},"dur":{c_}{d_},"args":{{"External id":{e_}{x_}}}}}'
            for p, a_, b_, c_, d_, e_, x_ in zip(prefixes[pinv[sl]].tolist(), tq, tr, dq, dr,
                                                 range(lo + 1, hi + 1), extra.tolist())])


def _encode_device(layout: ChromeLayout, chunk_events: int) -> Iterator[str]:
    ev = layout.device
    m = len(ev.ts)
    names = _Lookup(layout.strings, ev.name_id, json_string)
    for lo in range(0, m, chunk_events):
        hi = min(m, lo + chunk_events)
        tq, tr = _us_parts(ev.ts[lo:hi])
        dq, dr = _us_parts(ev.dur[lo:hi])
        cats = np.where(ev.is_kernel[lo:hi], CAT_KERNEL, CAT_GPU_USER_ANNOTATION).tolist()
        yield ",\n".join([
            f'{{"ph":"X","cat":"{c}","name":{names.table[nid + 1]},"pid":{p},"tid":{t},'
            f'"ts":{a_}{b_},"dur":{c_}{d_},"args":{{"External id":{e + 1},"correlation":{e + 1},'
            f'"device":{d},"stream":{t}}}}}'
            for c, nid, p, d, t, a_, b_, c_, d_, e in zip(
                cats, ev.name_id[lo:hi].tolist(), ev.pid[lo:hi].tolist(), ev.device[lo:hi].tolist(),
                ev.tid[lo:hi].tolist(), tq, tr, dq, dr, ev.event[lo:hi].tolist())])


def _encode_flows(flows: Flows, chunk_events: int) -> Iterator[str]:
    cat = flows.category
    for lo in range(0, len(flows.id), chunk_events):
        sl = slice(lo, lo + chunk_events)
        sq, sr = _us_parts(flows.src_ts[sl])
        fq, fr = _us_parts(flows.dst_ts[sl])
        yield ",\n".join([
            f'{{"ph":"s","id":{i},"pid":{sp},"tid":{st},"ts":{a_}{b_},"cat":"{cat}","name":"{cat}"}},\n'
            f'{{"ph":"f","id":{i},"pid":{dp},"tid":{dt},"ts":{c_}{d_},"cat":"{cat}","name":"{cat}","bp":"e"}}'
            for i, sp, st, a_, b_, dp, dt, c_, d_ in zip(
                flows.id[sl].tolist(), flows.src_pid[sl].tolist(), flows.src_tid[sl].tolist(), sq, sr,
                flows.dst_pid[sl].tolist(), flows.dst_tid[sl].tolist(), fq, fr)])


def _encode_memory(layout: ChromeLayout, chunk_events: int) -> Iterator[str]:
    ev = layout.memory
    for lo in range(0, len(ev.ts), chunk_events):
        sl = slice(lo, lo + chunk_events)
        tq, tr = _us_parts(ev.ts[sl])
        yield ",\n".join([
            f'{{"ph":"i","cat":"{CAT_CPU_INSTANT}","name":"{MEMORY_EVENT_NAME}","pid":{ev.pid},'
            f'"tid":{t},"ts":{a_}{b_},"args":{{"Device Type":{dt},"Device Id":{di},"Addr":{ad},'
            f'"Bytes":{by},"Total Allocated":{tot}}}}}'
            for t, a_, b_, dt, di, ad, by, tot in zip(
                ev.tid[sl].tolist(), tq, tr, ev.device_type[sl].tolist(), ev.device_index[sl].tolist(),
                ev.addr[sl].tolist(), ev.bytes[sl].tolist(), ev.total_allocated[sl].tolist())])


def _encode_counters(layout: ChromeLayout, chunk_events: int) -> Iterator[str]:
    ev = layout.counters
    series = _Lookup(layout.strings, ev.device_name_id, json_string)
    for lo in range(0, len(ev.ts), chunk_events):
        sl = slice(lo, lo + chunk_events)
        tq, tr = _us_parts(ev.ts[sl])
        yield ",\n".join([
            f'{{"ph":"C","name":"{MEMORY_COUNTER_NAME}","pid":{p},"tid":{t},'
            f'"ts":{a_}{b_},"args":{{{key}:{v}}}}}'
            for p, t, key, a_, b_, v in zip(ev.pid[sl].tolist(), ev.tid[sl].tolist(),
                                            series(ev.device_name_id[sl]).tolist(), tq, tr,
                                            ev.value[sl].tolist())])
