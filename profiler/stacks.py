"""Flame-graph exports: folded stacks (flamegraph.pl, speedscope, inferno) and speedscope JSON.

**Folded stacks** (:func:`folded_stacks`, :func:`export_stacks`): one line per distinct stack,
``frame;frame;...;leaf <integer microseconds>``, outermost frame first. An event's stack is

* its Python call site (``with_stack``; outermost frame first): the event's own, a backward
  node's forward op's (through the exact (sequence_nr, thread) correlation, so a backward node
  sits under the line of user code that created its node), an op inside a backward node its
  node's, otherwise the nearest enclosing event's;
* followed by the op nesting from the top-level range down to the event itself
  (``ProfilerStep#3;forward;linear;matmul``).

The value is the event's self time (``self_cpu_time_total`` or ``self_cuda_time_total``).
Events with identical stacks are summed in nanoseconds first; the conversion to whole
microseconds then distributes rounding per leaf name (largest remainder), so that the values
of all lines ending in a name add up to that name's self time in ``key_averages()`` rounded
to the microsecond. Frames are sanitised: ``;`` becomes ``,`` and whitespace ``_``.

**Speedscope** (:func:`speedscope`, :func:`export_speedscope`): speedscope's file format with
one "evented" profile per CPU thread and per device stream (nanoseconds), opening and closing
each range; ranges that overlap partially are clamped into their parent as in the Chrome trace.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from .jsonfile import open_output, write_json
from .nesting import nest_rows
from .records import device_index

if TYPE_CHECKING:  # pragma: no cover
    from .data import ProfileData

__all__ = ["folded_stacks", "export_stacks", "speedscope", "export_speedscope", "sanitize_frame",
           "METRICS", "SPEEDSCOPE_SCHEMA_URL"]

METRICS = {"self_cpu_time_total": "self_cpu_ns", "self_cuda_time_total": "self_cuda_ns",
           "self_device_time_total": "self_cuda_ns"}
SPEEDSCOPE_SCHEMA_URL = "https://www.speedscope.app/file-format-schema.json"
_WHITESPACE = re.compile(r"\s")


def sanitize_frame(frame: str) -> str:
    """A frame that cannot break the folded format: no ``;``, no whitespace, not empty."""
    return _WHITESPACE.sub("_", frame.replace(";", ",")) or "?"


def _levels(depth: np.ndarray) -> list[np.ndarray]:
    """Event indices per depth (1, 2, ...)."""
    if len(depth) == 0:
        return []
    by = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[by], np.arange(1, int(depth.max()) + 2))
    return [by[bounds[d]:bounds[d + 1]] for d in range(len(bounds) - 1)]


def _chain_ids(parent: np.ndarray, name_id: np.ndarray, levels) -> tuple[np.ndarray, list]:
    """Intern each event's chain of names (top-level range ... event) as a trie node id.

    Returns (chain id per event, trie as a list of (parent node, name id))."""
    chain = np.full(len(parent), -1, dtype=np.int64)
    trie: list[tuple[int, int]] = []
    for idx in levels:
        up = np.where(parent[idx] >= 0, chain[np.maximum(parent[idx], 0)], -1)
        pairs = np.stack([up, name_id[idx].astype(np.int64)], axis=1)
        uniq, inv = np.unique(pairs, axis=0, return_inverse=True)
        base = len(trie)
        trie.extend((int(p), int(nm)) for p, nm in uniq.tolist())
        chain[idx] = base + inv.reshape(-1)
    return chain, trie


def _inherit_down(values: np.ndarray, parent: np.ndarray, levels) -> np.ndarray:
    """values[i] where >= 0, else the nearest ancestor's (top-down)."""
    out = values.astype(np.int64).copy()
    for idx in levels[1:]:
        missing = idx[out[idx] < 0]
        out[missing] = out[parent[missing]]
    return out


def folded_stacks(data: "ProfileData", metric: str = "self_cpu_time_total") -> list[str]:
    """Folded-stack lines (``a;b;c 123``), sorted; see the module docstring.

    Args:
        data: a profile (live or loaded).
        metric: ``self_cpu_time_total`` or ``self_cuda_time_total``.
    Returns:
        Lines without newlines; lines whose value rounds to 0 us are left out.
    """
    if metric not in METRICS:
        raise ValueError(f"metric={metric!r} is not one of: {', '.join(METRICS)}")
    a = data.analysis
    cols = data.event_columns
    values = getattr(a, METRICS[metric]).astype(np.int64)
    if data.n_events == 0:
        return []
    levels = _levels(a.depth)
    name_id = cols["name_id"].astype(np.int64)
    chain, trie = _chain_ids(a.parent, name_id, levels)
    stack = _inherit_down(a.stack_id, a.parent, levels)

    pick = np.flatnonzero(values > 0)
    if len(pick) == 0:
        return []
    keys = np.stack([stack[pick], chain[pick]], axis=1)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    ns = np.bincount(inv, weights=values[pick], minlength=len(uniq)).astype(np.int64)
    leaf = np.array([trie[c][1] for c in uniq[:, 1].tolist()], dtype=np.int64)

    # Whole microseconds per line, rounding distributed per leaf name (largest remainder).
    us = ns // 1000
    rem = ns % 1000
    groups, ginv = np.unique(leaf, return_inverse=True)
    ginv = ginv.reshape(-1)
    group_ns = np.bincount(ginv, weights=ns, minlength=len(groups)).astype(np.int64)
    target = (group_ns + 500) // 1000
    deficit = target - np.bincount(ginv, weights=us, minlength=len(groups)).astype(np.int64)
    order = np.lexsort((-rem, ginv))
    first_of_group = np.searchsorted(ginv[order], np.arange(len(groups)))
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order)) - first_of_group[ginv[order]]
    us = us + (rank < deficit[ginv])

    names = [sanitize_frame(s) for s in data.strings]
    chain_text: dict[int, str] = {}

    def chain_str(node: int) -> str:
        parts = []
        while node >= 0 and node not in chain_text:
            parts.append(node)
            node = trie[node][0]
        text = chain_text.get(node, "") if node >= 0 else ""
        for nd in reversed(parts):
            text = f"{text};{names[trie[nd][1]]}" if text else names[trie[nd][1]]
            chain_text[nd] = text
        return text

    frames_text: dict[int, str] = {-1: ""}
    lines = []
    for (sid, node), value in zip(uniq.tolist(), us.tolist()):
        if value <= 0:
            continue
        if sid not in frames_text:
            frames_text[sid] = ";".join(sanitize_frame(f) for f in reversed(data.stack_of(sid)))
        head = frames_text[sid]
        body = chain_str(node)
        lines.append(f"{head};{body} {value}" if head else f"{body} {value}")
    lines.sort()
    return lines


def export_stacks(data: "ProfileData", path, metric: str = "self_cpu_time_total") -> None:
    """Write :func:`folded_stacks` to ``path`` (one line each; gzip when it ends in ``.gz``)."""
    lines = folded_stacks(data, metric)
    with open_output(path) as f:
        for lo in range(0, len(lines), 65536):
            f.write(("\n".join(lines[lo:lo + 65536]) + "\n").encode("utf-8"))


# --------------------------------------------------------------------------- speedscope


def _evented(start, end, parent, frame, idx) -> list[dict]:
    """Open/close events of the ranges ``idx`` (one row, in start order)."""
    events = []
    stack: list[int] = []
    for i in idx:
        p = parent[i]
        while stack and stack[-1] != p:
            top = stack.pop()
            events.append({"type": "C", "frame": frame[top], "at": end[top]})
        events.append({"type": "O", "frame": frame[i], "at": start[i]})
        stack.append(i)
    while stack:
        top = stack.pop()
        events.append({"type": "C", "frame": frame[top], "at": end[top]})
    return events


def speedscope(data: "ProfileData", name: str | None = None) -> dict:
    """The profile in speedscope's file format (evented profiles, nanoseconds).

    Args:
        data: a profile (live or loaded).
        name: the file's ``name`` (default "gradtrace profile").
    Returns:
        A JSON-ready dict.
    """
    cols = data.event_columns
    a = data.analysis
    n = data.n_events
    start = cols["start_ns"].astype(np.int64)
    end = cols["end_ns"].astype(np.int64)
    thread = cols["thread_id"].astype(np.int64)
    base = int(start.min()) if n else 0
    name_id = cols["name_id"].astype(np.int64)
    used, frame_of = np.unique(name_id, return_inverse=True)
    frames = [{"name": data.strings[int(s)]} for s in used.tolist()]
    frame_of = frame_of.reshape(-1)

    profiles = []
    # CPU threads (the analysis' nesting; partial overlaps clamped).
    s_, e_ = start - base, end - base
    parent, _ = nest_rows(s_, e_, thread, a.parent if len(a.partial_overlaps) == 0 else None)
    rows = [("CPU thread", t, np.flatnonzero(thread == t)) for t in np.unique(thread).tolist()]
    # Device streams.
    ds, de = cols["device_start_ns"].astype(np.int64), cols["device_end_ns"].astype(np.int64)
    gpu = np.flatnonzero((ds >= 0) & (de >= ds))
    g_parent = np.zeros(0, dtype=np.int64)
    g_start = g_end = g_row = np.zeros(0, dtype=np.int64)
    if len(gpu):
        dev = np.array([device_index(data.strings[int(d)]) for d in cols["device_id"][gpu]], dtype=np.int64)
        g_row = dev * (2**40) + np.unique(cols["stream"][gpu], return_inverse=True)[1].reshape(-1)
        g_start, g_end = ds[gpu] - base, de[gpu] - base
        order = np.lexsort((-g_end, g_start))
        gpu, g_start, g_end, g_row = gpu[order], g_start[order], g_end[order], g_row[order]
        g_parent, _ = nest_rows(g_start, g_end, g_row)

    def add_profile(title, s, e, par, frame, idx):
        if len(idx) == 0:
            return
        events = _evented(s.tolist(), e.tolist(), par.tolist(), frame.tolist(), idx.tolist())
        profiles.append({"type": "evented", "name": title, "unit": "nanoseconds",
                         "startValue": int(s[idx].min()), "endValue": int(e[idx].max()),
                         "events": events})

    for title, t, idx in rows:
        add_profile(f"{title} {t}", s_, e_, parent, frame_of, idx)
    for r in np.unique(g_row).tolist():
        idx = np.flatnonzero(g_row == r)
        device = r // (2**40)
        raw = int(cols["stream"][gpu[idx[0]]])
        add_profile(f"cuda:{device} stream {raw:#x}" if raw else f"cuda:{device} default stream",
                    g_start, g_end, g_parent, frame_of[gpu], idx)
    return {
        "$schema": SPEEDSCOPE_SCHEMA_URL,
        "shared": {"frames": frames},
        "profiles": profiles,
        "name": name or str(data.metadata.get("trace_name", "gradtrace profile")),
        "activeProfileIndex": 0,
        "exporter": f"gradtrace {data.metadata.get('gradtrace_version') or ''}".strip(),
    }


def export_speedscope(data: "ProfileData", path, name: str | None = None) -> None:
    """Write :func:`speedscope` as JSON to ``path`` (gzip when it ends in ``.gz``)."""
    write_json(path, speedscope(data, name))
