"""Per-thread interval nesting: which range is the parent of which.

Pure functions over integer arrays. Two events of one thread either nest (one contains the
other) or follow each other; an event's parent is the innermost event of its thread that
contains it. A range that *ends* at ``t`` does not contain a range that *starts* at ``t``:
``[[1, 3], [3, 4]]`` are siblings.

The fast path is vectorised (sorts and binary searches, no Python loop over events):

1. sort each thread's events by (start, -end);
2. depth of an event = events of its thread open at its start, counted with one binary search
   into the sorted end times;
3. parent = the last earlier event of the same thread one level up (another binary search).

The result is then *verified*: every child inside its parent and consecutive events of one
depth disjoint. That proves the thread's ranges are properly nested. A thread that fails
(partial overlaps such as ``[0, 5]`` and ``[3, 8]``, which real traces can contain when a
range is closed out of order) is redone with an explicit stack that reports each partial
overlap instead of dropping it.

The exports need a *repaired* forest instead (a Chrome trace or a flame graph cannot draw a
range that sticks out of its parent): :func:`nest_rows` clamps each partial overlap into the
enclosing range, counts the repairs, and nests again.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Nesting", "nest_intervals", "nest_in_pieces", "nest_rows", "innermost_containing", "PIECE"]

#: Events nested at once by :func:`nest_in_pieces` (a dozen int64 temporaries of this length).
PIECE = 1 << 16


@dataclass(frozen=True)
class Nesting:
    """Result of :func:`nest_intervals`; all arrays are indexed by event index.

    Attributes:
        parent: index of the innermost containing event of the same thread, -1 for top level.
        depth: 1 for top-level events, parent's depth + 1 otherwise.
        order: event indices sorted by (thread, start, -end, index).
        partial_overlaps: (k, 2) array of event index pairs ``(a, b)`` where ``a`` starts
            first and ends strictly inside ``b``.
    """

    parent: np.ndarray
    depth: np.ndarray
    order: np.ndarray
    partial_overlaps: np.ndarray


def _dense_threads(thread_id: np.ndarray) -> np.ndarray:
    _, dense = np.unique(thread_id, return_inverse=True)
    return dense.astype(np.int64).reshape(-1)


def nest_intervals(start_ns, end_ns, thread_id) -> Nesting:
    """Compute the per-thread nesting forest of ``[start_ns[i], end_ns[i]]`` intervals.

    Args:
        start_ns, end_ns: integer arrays (end >= start).
        thread_id: integer array; events of different threads never nest.
    Returns:
        A :class:`Nesting`.
    """
    start = np.asarray(start_ns, dtype=np.int64)
    end = np.asarray(end_ns, dtype=np.int64)
    thread = np.asarray(thread_id, dtype=np.int64)
    n = len(start)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Nesting(empty, empty.copy(), empty.copy(), np.zeros((0, 2), dtype=np.int64))
    if np.any(end < start):
        bad = int(np.flatnonzero(end < start)[0])
        raise ValueError(f"event {bad} ends before it starts ({start[bad]} > {end[bad]})")

    tdense = _dense_threads(thread)
    # ~end = -end - 1: no overflow at int64 min. lexsort is stable: ties keep index order
    # (no index key, which cost an 8-byte array and a sort pass per event).
    order = np.lexsort((~end, start, tdense))
    s, e, t = start[order], end[order], tdense[order]

    # One key space for "thread, then time": times are offset to start at 0 so that
    # thread * span + time cannot overflow for any realistic profile.
    tmin = int(min(s.min(), e.min()))
    span = int(max(s.max(), e.max())) - tmin + 1
    if (int(t[-1]) + 1) * span >= 2**62:
        # Only the order of times matters below: their ranks nest the same, in a small range.
        s, e = _ranks(s, e)
        tmin, span = 0, 2 * n
    start_key = t * span + (s - tmin)
    end_key = t * span + (e - tmin)   # sorted in place below: only its order statistics matter
    pos = np.arange(n, dtype=np.int64)

    # depth = starts so far in this thread - ends at or before my start; zero-length events
    # at my start time still count as open (they "end" after the starts of that instant).
    end_key.sort()
    depth = pos + 1 - np.searchsorted(end_key, start_key, side="right")
    del end_key
    zero_len = np.sort(start_key[s == e])
    if len(zero_len):
        depth += (np.searchsorted(zero_len, start_key, side="right")
                  - np.searchsorted(zero_len, start_key, side="left"))
    del start_key, zero_len

    # Parent: the last earlier event one level up; previous same-level event for the check.
    level_key = np.sort(depth * n + pos)
    slot = np.searchsorted(level_key, (depth - 1) * n + pos) - 1
    cand = level_key[np.maximum(slot, 0)]
    parent_pos = np.where((depth > 1) & (slot >= 0) & (cand // n == depth - 1), cand % n, -1)
    slot = np.searchsorted(level_key, depth * n + pos) - 1
    cand = level_key[np.maximum(slot, 0)]
    prev_pos = np.where((slot >= 0) & (cand // n == depth), cand % n, -1)
    del level_key, slot, cand

    has_parent = parent_pos >= 0
    pp = np.maximum(parent_pos, 0)
    bad = (depth > 1) & ~(has_parent & (t[pp] == t) & (e <= e[pp]))
    pv = np.maximum(prev_pos, 0)
    bad |= (prev_pos >= 0) & (t[pv] == t) & (e[pv] > s) & ~((s == e) & (e[pv] == s))

    parent_sorted = parent_pos
    depth_sorted = depth
    overlaps: list[tuple[int, int]] = []
    if bad.any():
        parent_sorted = parent_pos.copy()
        depth_sorted = depth.copy()
        for thread_dense in np.unique(t[bad]):
            lo, hi = np.searchsorted(t, [thread_dense, thread_dense + 1])
            _stack_nest(s, e, int(lo), int(hi), parent_sorted, depth_sorted, overlaps)

    parent = np.full(n, -1, dtype=np.int64)
    has = parent_sorted >= 0
    parent[order[has]] = order[parent_sorted[has]]
    depth_out = np.empty(n, dtype=np.int64)
    depth_out[order] = depth_sorted
    pairs = (order[np.array(overlaps, dtype=np.int64).reshape(-1, 2)]
             if overlaps else np.zeros((0, 2), dtype=np.int64))
    return Nesting(parent, depth_out, order, pairs)


def nest_in_pieces(start_ns, end_ns, thread_id, piece: int | None = None) -> Nesting:
    """:func:`nest_intervals`, the same nesting, computed a piece at a time.

    ``nest_intervals`` holds a dozen int64 temporaries of its input's length: at millions of
    events, the largest memory of an import or an analysis. A thread's ranges, in start order,
    are cut where every earlier range has ended strictly before the next one starts: nothing
    contains or overlaps anything across a cut, so each piece (whole training steps, or runs
    of top-level ranges, of about ``piece`` events) nests on its own.

    Returns:
        A :class:`Nesting` equal to ``nest_intervals``' (the partial overlaps in the same
        order), with int32 index arrays (int64 from 2**31 events on).
    """
    start = np.asarray(start_ns)
    end = np.asarray(end_ns)
    thread = np.asarray(thread_id)
    n = len(start)
    piece = piece or PIECE
    index = np.int32 if n < 2**31 else np.int64
    if n <= piece:
        nest = nest_intervals(start, end, thread)
        return Nesting(nest.parent.astype(index), nest.depth.astype(index), nest.order.astype(index),
                       nest.partial_overlaps)
    order = np.lexsort((start, thread)).astype(index)
    parent = np.full(n, -1, dtype=index)
    depth = np.empty(n, dtype=index)
    overlaps = []
    for lo, hi in _pieces(start, end, thread, order, piece):
        idx = order[lo:hi].copy()                # order[lo:hi] is rewritten below
        nest = nest_intervals(start[idx], end[idx], thread[idx])
        has = nest.parent >= 0
        parent[idx[has]] = idx[nest.parent[has]]
        depth[idx] = nest.depth
        # The piece's order is its events' (thread, start, -end, index) order; pieces follow
        # each other in (thread, start) order, so together they are the whole order.
        order[lo:hi] = idx[nest.order]
        if len(nest.partial_overlaps):
            overlaps.append(idx[nest.partial_overlaps].astype(np.int64))
    pairs = np.concatenate(overlaps) if overlaps else np.zeros((0, 2), dtype=np.int64)
    return Nesting(parent, depth, order, pairs)


def _pieces(start, end, thread, order, piece: int):
    """(lo, hi) bounds in ``order`` (events by thread, then start) of pieces that nest on their
    own: each ends at a cut, and holds about ``piece`` events where cuts allow."""
    t_sorted = thread[order]
    threads_at = np.flatnonzero(t_sorted[1:] != t_sorted[:-1]) + 1
    del t_sorted
    n = len(order)
    for lo, hi in zip([0, *threads_at.tolist()], [*threads_at.tolist(), n]):
        s = start[order[lo:hi]]
        reach = np.maximum.accumulate(end[order[lo:hi]])
        cuts = np.flatnonzero(reach[:-1] < s[1:]) + 1 + lo
        del s, reach
        at = lo
        while at < hi:
            k = np.searchsorted(cuts, at + piece, side="right")
            if k > 0 and cuts[k - 1] > at:   # the last cut within a piece's length
                nxt = int(cuts[k - 1])
            else:                            # none: this piece runs to the next cut
                j = np.searchsorted(cuts, at, side="right")
                nxt = int(cuts[j]) if j < len(cuts) else hi
            yield at, nxt
            at = nxt


def _ranks(*arrays: np.ndarray) -> list[np.ndarray]:
    """Each array's values replaced by their rank among all values (same order, same ties)."""
    values = np.unique(np.concatenate(arrays))
    return [np.searchsorted(values, a).astype(np.int64) for a in arrays]


def _stack_nest(s, e, lo, hi, parent, depth, overlaps) -> None:
    """Nest sorted positions ``lo:hi`` (one thread) with a stack; record partial overlaps.

    An open range that ends strictly inside a later range is reported as a partial overlap
    and is not that range's parent; it stays open for later ranges that fit inside it.
    """
    stack: list[int] = []
    s_l = s.tolist()
    e_l = e.tolist()
    for i in range(lo, hi):
        si, ei = s_l[i], e_l[i]
        # Close ranges that ended before i (a zero-length range at si stays open: same rule
        # as the vectorised path).
        while stack and (e_l[stack[-1]] < si or (e_l[stack[-1]] == si and s_l[stack[-1]] < si)):
            stack.pop()
        p = -1
        for k in range(len(stack) - 1, -1, -1):
            j = stack[k]
            ej = e_l[j]
            if ej >= ei:
                p = j
                break
            if ej > si:
                overlaps.append((j, i))
        parent[i] = p
        depth[i] = depth[p] + 1 if p >= 0 else 1
        stack.append(i)


def nest_rows(start, end, row, parent=None) -> tuple[np.ndarray, int]:
    """Parents of intervals nested per row, after clamping partial overlaps; for the exports.

    A range that starts inside an open range and ends after it is clamped to that range's end
    (a child's end never exceeds its parent's), so that the result nests perfectly.

    Args:
        start: int64 start times.
        end: int64 end times; **clamped in place** where a range overlaps its parent partially.
        row: int64 row (thread or stream) of each interval; rows never nest into each other.
        parent: the parents when already known (the analysis' CPU nesting); used unless the
            intervals overlap partially.
    Returns:
        (parent index per interval, -1 at the top; number of ends clamped).
    """
    if parent is not None and len(start) and not _has_partial_overlap(end, parent):
        return parent, 0
    nest = nest_intervals(start, end, row)
    if not len(nest.partial_overlaps):
        return nest.parent, 0
    clamped = _clamp_partial_overlaps(start, end, row, nest)
    return nest_intervals(start, end, row).parent, clamped


def _has_partial_overlap(end, parent) -> bool:
    has = parent >= 0
    return bool(np.any(end[has] > end[parent[has]]))


def _clamp_partial_overlaps(start, end, row, nest: Nesting) -> int:
    """Clamp (in place) each range that starts inside an open range and ends after it to that
    range's end; returns how many were clamped. Only rows with overlaps are walked."""
    bad_rows = np.unique(row[nest.partial_overlaps.reshape(-1)])
    order = nest.order
    in_bad = np.isin(row[order], bad_rows)
    idx = order[in_bad].tolist()
    rows = row[order][in_bad].tolist()
    starts = start[order][in_bad].tolist()
    ends = {i: e for i, e in zip(idx, end[order][in_bad].tolist())}
    clamped = 0
    stack: list[int] = []
    current = None
    for i, r, s in zip(idx, rows, starts):
        if r != current:
            stack, current = [], r
        while stack and ends[stack[-1]] <= s:
            stack.pop()
        if stack and ends[i] > ends[stack[-1]]:
            ends[i] = ends[stack[-1]]
            end[i] = ends[i]
            clamped += 1
        stack.append(i)
    return clamped


def innermost_containing(nesting: Nesting, start_ns, end_ns, thread_id, times, threads) -> np.ndarray:
    """For each (time, thread), the innermost event of that thread whose [start, end] holds it.

    Used to attribute memory records to ops. Returns event indices, -1 where none.
    """
    start = np.asarray(start_ns)
    end = np.asarray(end_ns)
    times = np.asarray(times, dtype=np.int64)
    threads = np.asarray(threads)
    thread = np.asarray(thread_id)
    out = np.full(len(times), -1, dtype=np.int64)
    if len(start) == 0 or len(times) == 0:
        return out
    order = nesting.order
    # ``order`` runs by thread, then start: per thread asked about, one binary search over
    # its own starts (no thread-and-time keys over every event: they were the largest
    # temporaries here).
    t_sorted = thread[order]
    by_thread = np.argsort(threads, kind="stable")
    q_sorted = threads[by_thread]
    at = np.flatnonzero(q_sorted[1:] != q_sorted[:-1]) + 1
    for q_lo, q_hi in zip([0, *at.tolist()], [*at.tolist(), len(q_sorted)]):
        t = q_sorted[q_lo]
        lo, hi = int(np.searchsorted(t_sorted, t, side="left")), int(np.searchsorted(t_sorted, t, side="right"))
        if hi <= lo:
            continue
        q = by_thread[q_lo:q_hi]
        slot = np.searchsorted(start[order[lo:hi]], times[q], side="right") - 1
        found = slot >= 0
        out[q[found]] = order[lo + slot[found]]
    del t_sorted, by_thread, q_sorted
    # The last range starting before t may have ended; its ancestors are the next candidates.
    cand = out
    active = np.flatnonzero(cand >= 0)
    while len(active):
        c = cand[active]
        outside = end[c] < times[active]
        cand[active[outside]] = nesting.parent[c[outside]]
        active = active[outside]
        active = active[cand[active] >= 0]
    return cand
