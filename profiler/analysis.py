"""Derived per-event quantities: parents, self/total times, forward↔backward links, memory.

Everything here is a pure function of a profile's columns (see :mod:`profiler.records`); the
result is cached on :class:`profiler.data.ProfileData` and never written to disk.

Definitions (all times integer nanoseconds):

* CPU total = end - start; self CPU = CPU total - Σ children's CPU total.
* CUDA total of an event with a device interval = that interval; of an event without one, the
  sum of its children's CUDA totals. Self CUDA = CUDA total - Σ children's CUDA total (0 for
  events without a device interval). Both sums therefore telescope: Σ self over all events =
  Σ total over top-level events.
* Device activities of a torch trace (kernels, memcpys, memsets: ``gpu_events``) are leaves:
  placed as zero-length events at the start of their launch, they never parent each other,
  so the kernels of one CUDA-graph launch (all at one instant) each keep their own device
  time, and Σ self CUDA = Σ kernel + memcpy + memset time.
* A self time below zero (children longer than the parent: clock skew between callbacks, or
  device intervals on concurrent streams) is clamped to 0 and counted.
* A backward event links to the forward event with the same (sequence_nr, thread): its
  ``sequence_nr`` and ``fwd_thread_id`` against the forward op's ``sequence_nr`` and
  ``thread_id`` (the latest-starting one when several share them, as PyTorch decides; see
  :mod:`profiler.pairing`). It inherits that op's input shapes and stack; ops run inside a
  backward node inherit the node's stack.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from .flops import estimate_flops
from .nesting import Nesting, innermost_containing, nest_in_pieces
from .pairing import pair_backward
from .records import Scope

__all__ = ["EventAnalysis", "analyze", "depth_levels"]


@dataclass(frozen=True)
class EventAnalysis:
    """Per-event arrays (indexed like the event columns) and a few counters.

    Attributes:
        parent, depth: nesting forest (see :mod:`profiler.nesting`).
        cpu_total_ns, self_cpu_ns, cuda_total_ns, self_cuda_ns: int64 times.
        forward_event: for backward events, index of the forward event they belong to; else -1.
        backward_ancestor: nearest enclosing (or own) backward event, -1 when none.
        shapes_id, stack_id: string ids after inheritance from the forward op (-1: none).
        flops: int64 estimate (0 when unknown or when the profile has no shapes).
        self_cpu_memory, cpu_memory, self_cuda_memory, cuda_memory: bytes allocated minus
            freed inside the event itself / inside it and its descendants.
        memory_event: for each memory record, the event it is attributed to (-1: none).
        partial_overlaps: (k, 2) event index pairs that overlap without nesting.
        cpu_clock_skew, cuda_clock_skew: how many self times were clamped at 0.
        unlinked_backward: backward events (with a sequence_nr) whose forward op is not in
            the profile (it ran before profiling started).
    """

    parent: np.ndarray
    depth: np.ndarray
    cpu_total_ns: np.ndarray
    self_cpu_ns: np.ndarray
    cuda_total_ns: np.ndarray
    self_cuda_ns: np.ndarray
    forward_event: np.ndarray
    backward_ancestor: np.ndarray
    shapes_id: np.ndarray
    stack_id: np.ndarray
    flops: np.ndarray
    self_cpu_memory: np.ndarray
    cpu_memory: np.ndarray
    self_cuda_memory: np.ndarray
    cuda_memory: np.ndarray
    memory_event: np.ndarray
    partial_overlaps: np.ndarray
    cpu_clock_skew: int
    cuda_clock_skew: int
    unlinked_backward: int

    @property
    def top_level(self) -> np.ndarray:
        """Boolean mask of events without a parent."""
        return self.parent < 0


def depth_levels(depth: np.ndarray) -> list[np.ndarray]:
    """Event indices grouped by nesting depth, top level (depth 1) first.

    The one helper for passes over the forest: top-down (a child reads its parent's value)
    walks the list forwards, bottom-up (a parent sums its children) walks it backwards.

    Args:
        depth: per-event depth, 1 for top-level events (see :mod:`profiler.nesting`).
    Returns:
        ``levels[d - 1]`` holds the events of depth ``d``, each level in event order.
    """
    if len(depth) == 0:
        return []
    # Depths are small: as 8- or 16-bit keys the stable sort is numpy's radix sort (a third of
    # the time of int32's merge sort at 10M events).
    low, top = int(depth.min()), int(depth.max())
    small = np.uint8 if top < 2**8 else np.uint16 if top < 2**16 else np.int64
    key = depth.astype(small if low >= 0 else np.int64, copy=False)
    by_depth = np.argsort(key, kind="stable")
    bounds = np.searchsorted(depth[by_depth], np.arange(1, top + 2))
    return [by_depth[bounds[d]:bounds[d + 1]] for d in range(len(bounds) - 1)]


def _depth_of(parent: np.ndarray) -> np.ndarray:
    """Depth (1 for roots) from parents, by pointer jumping: log(max depth) vector passes."""
    depth = np.ones(len(parent), dtype=np.int64)
    anc = parent.astype(np.int64).copy()
    # Invariant: true depth[i] = depth[i] + true depth[anc[i]] (0 when anc[i] < 0).
    while True:
        has = np.flatnonzero(anc >= 0)
        if not len(has):
            return depth
        a = anc[has]
        depth[has] = depth[has] + depth[a]
        anc[has] = anc[a]


def _device_leaves(parent: np.ndarray, depth: np.ndarray, leaves: np.ndarray):
    """(parent, depth) with the events ``leaves`` never a parent: a child of a leaf moves up
    to the leaf's nearest ancestor that is not one (zero-length events at one instant nest in
    each other; device activities must not)."""
    is_leaf = np.zeros(len(parent), dtype=bool)
    is_leaf[leaves] = True
    parent = parent.copy()
    moved = np.flatnonzero((parent >= 0) & is_leaf[np.maximum(parent, 0)])
    if not len(moved):
        return parent, depth
    while len(moved):
        parent[moved] = parent[parent[moved]]
        moved = moved[(parent[moved] >= 0) & is_leaf[np.maximum(parent[moved], 0)]]
    return parent, _depth_of(parent)


def _children_sum(values: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Σ values of each event's direct children (exact for sums below 2**53)."""
    has = parent >= 0
    sums = np.bincount(parent[has], weights=values[has], minlength=len(values))
    return np.rint(sums).astype(np.int64)


def _subtree_sum(values: np.ndarray, parent: np.ndarray, levels: list[np.ndarray]) -> np.ndarray:
    """values[i] + Σ over all descendants of i, accumulated from the deepest level up."""
    total = values.astype(np.int64).copy()
    for idx in reversed(levels[1:]):
        np.add.at(total, parent[idx], total[idx])
    return total


def _cuda_times(dev_start, dev_end, parent, levels):
    has_dev = (dev_start >= 0) & (dev_end >= 0)
    if not has_dev.any():
        zeros = _shared_zeros(dev_start.astype(np.int64, copy=False))
        return zeros, zeros, 0
    own = np.where(has_dev, dev_end - dev_start, 0).astype(np.int64, copy=False)
    total = own.copy()
    child_sum = np.zeros(len(own), dtype=np.int64)
    for d in range(len(levels), 0, -1):
        idx = levels[d - 1]
        # Children (level d+1) are final; an event without its own interval takes theirs.
        total[idx] = np.where(has_dev[idx], own[idx], child_sum[idx])
        if d > 1:
            np.add.at(child_sum, parent[idx], total[idx])
    self_cuda = np.where(has_dev, own - child_sum, 0)
    skew = int(np.count_nonzero(self_cuda < 0))
    return total, np.maximum(self_cuda, 0), skew


def _backward_ancestor(scope, parent, levels) -> np.ndarray:
    is_bwd = scope == Scope.BACKWARD_FUNCTION
    anc = np.where(is_bwd, np.arange(len(scope), dtype=np.int32), np.int32(-1))
    if not is_bwd.any():
        return anc
    for idx in levels[1:]:
        anc[idx] = np.where(is_bwd[idx], idx, anc[parent[idx]])
    return anc


def _shared_zeros(like: np.ndarray) -> np.ndarray:
    """A read-only array of zeros shaped as ``like`` (an analysis array that is all zeros): one
    zero repeated, no memory (``np.zeros`` is not resident only while the allocator hands out
    fresh pages; one from its heap is cleared, page by page)."""
    return np.broadcast_to(np.zeros((), like.dtype), like.shape)


def _flops(cols, strings, shapes_id) -> np.ndarray:
    n = len(shapes_id)
    flops = np.zeros(n, dtype=np.int64)
    has = np.flatnonzero(shapes_id >= 0)
    if len(has) == 0:
        return flops
    pairs = cols["name_id"][has].astype(np.int64) * (len(strings) + 1) + shapes_id[has]
    uniq, inv = np.unique(pairs, return_inverse=True)
    per_pair = np.array(
        [estimate_flops(strings[int(k) // (len(strings) + 1)],
                        json.loads(strings[int(k) % (len(strings) + 1)])) for k in uniq],
        dtype=np.int64)
    flops[has] = per_pair[inv.reshape(-1)]
    return flops


def analyze(cols: dict, memory: dict, strings: list, with_flops: bool = False,
            gpu_events: np.ndarray | None = None) -> EventAnalysis:
    """Run every analysis pass over a profile's event and memory columns.

    ``gpu_events``: the events that are device activities (``records.GPU_COLUMNS["event"]``),
    leaves of the nesting.
    """
    # Read in place where the columns are int64 already (a copy of each is 80 MB at 10M events).
    start = cols["start_ns"].astype(np.int64, copy=False)
    end = cols["end_ns"].astype(np.int64, copy=False)
    n = len(start)
    # In pieces, with int32 indices (a profile has < 2**31 events and strings): nesting all
    # events at once held a dozen int64 temporaries per event, an import's peak.
    nest = nest_in_pieces(start, end, cols["thread_id"])
    parent, depth = nest.parent, nest.depth
    if gpu_events is not None and len(gpu_events):
        parent, depth = _device_leaves(parent, depth, np.asarray(gpu_events, dtype=np.int64))
        parent, depth = parent.astype(np.int32, copy=False), depth.astype(np.int32, copy=False)
        nest = Nesting(parent, depth, nest.order, nest.partial_overlaps)
    levels = depth_levels(depth)

    cpu_total = end - start
    self_cpu = cpu_total - _children_sum(cpu_total, parent)
    cpu_skew = int(np.count_nonzero(self_cpu < 0))
    self_cpu = np.maximum(self_cpu, 0)

    cuda_total, self_cuda, cuda_skew = _cuda_times(
        cols["device_start_ns"].astype(np.int64, copy=False), cols["device_end_ns"].astype(np.int64, copy=False),
        parent, levels)

    pairing = pair_backward(cols)
    forward_event, unlinked = pairing.forward_event(n).astype(np.int32), pairing.matched_none
    linked = np.flatnonzero(forward_event >= 0)
    # The columns themselves unless something is inherited (a copy is 4 bytes an event).
    shapes_id = cols["shapes_id"].astype(np.int32, copy=False)
    if len(linked):
        shapes_id = shapes_id.copy()
        shapes_id[linked] = shapes_id[forward_event[linked]]
    bwd_anc = _backward_ancestor(cols["scope"], parent, levels)
    stack_id = cols["stack_id"].astype(np.int32, copy=False)
    if (stack_id >= 0).any():
        stack_id = stack_id.copy()
        if len(linked):
            stack_id[linked] = stack_id[forward_event[linked]]
        inside = np.flatnonzero((bwd_anc >= 0) & (bwd_anc != np.arange(n, dtype=np.int32)))
        stack_id[inside] = stack_id[bwd_anc[inside]]
        del inside
    del linked

    flops = (_flops(cols, strings, cols["shapes_id"].astype(np.int64)) if with_flops
             else _shared_zeros(start))

    mem_event = innermost_containing(nest, start, end, cols["thread_id"],
                                     memory["time_ns"], memory["thread_id"]).astype(np.int32)
    overlaps = nest.partial_overlaps
    del nest                                      # its sort order: only the attribution reads it
    is_cuda_string = np.array([s.startswith("cuda") for s in strings], dtype=bool)
    mem_dev = memory["device_id"].astype(np.int64)
    mem_is_cuda = is_cuda_string[mem_dev] if len(mem_dev) else np.zeros(0, bool)
    attributed = mem_event >= 0
    self_mem = []
    for on_cuda in (False, True):
        pick = attributed & (mem_is_cuda == on_cuda)
        sums = np.bincount(mem_event[pick], weights=memory["bytes"][pick], minlength=n)
        self_mem.append(np.rint(sums).astype(np.int64))
    # Without memory records on a device its arrays are zeros: one read-only zero repeated.
    cpu_mem, cuda_mem = (_subtree_sum(m, parent, levels) if m.any() else _shared_zeros(m) for m in self_mem)
    self_mem = [m if m.any() else _shared_zeros(m) for m in self_mem]

    return EventAnalysis(
        parent=parent, depth=depth,
        cpu_total_ns=cpu_total, self_cpu_ns=self_cpu,
        cuda_total_ns=cuda_total, self_cuda_ns=self_cuda,
        forward_event=forward_event, backward_ancestor=bwd_anc,
        shapes_id=shapes_id, stack_id=stack_id, flops=flops,
        self_cpu_memory=self_mem[0], cpu_memory=cpu_mem,
        self_cuda_memory=self_mem[1], cuda_memory=cuda_mem,
        memory_event=mem_event, partial_overlaps=overlaps,
        cpu_clock_skew=cpu_skew, cuda_clock_skew=cuda_skew, unlinked_backward=unlinked,
    )
