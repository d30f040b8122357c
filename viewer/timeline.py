"""Timeline data: lanes per thread and per device stream, windowed and aggregated.

A profile can hold a million ranges; the browser gets at most a few tens of thousands of
line segments at a time. For the visible window ``[x0, x1]``:

* ranges that cover at least ``(x1 - x0) / resolution`` are drawn one by one (with a name
  on hover and a click target);
* shorter ranges of one row are merged into runs (a gap longer than one "pixel" ends a run)
  and drawn as grey "N events" segments — zooming in splits them again;
* if even that is too much, the pixel threshold grows until the budget holds.

Level of detail (Perfetto's mipmap idea, with merged runs as the summary of a bucket): the
runs of the wide windows are precomputed once per zoom level, each level twice as coarse as
the one below it, the coarser built from the finer (a run at one gap is a union of runs at
a smaller gap), so a query over a zoomed-out window of a ten-million-event profile merges a
few thousand precomputed runs instead of every range in it. Only narrow windows, which hold
few ranges, read the ranges themselves.

Each kind of range (forward op, backward node, user scope, device interval, merged run) is
one WebGL line trace of ``[start, end, NaN]`` segments: one trace per kind keeps the browser
fast (a trace per event or ``px.timeline`` bars are orders of magnitude slower).
"""
from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field

import numpy as np

from gradtrace.profiler import Scope

from .model import ProfileView

__all__ = ["Lane", "TimelineIndex", "Window", "KINDS", "LEVELS"]

# Zoom levels with precomputed runs: windows from the whole profile down to 1/2**(LEVELS-1)
# of it. Narrower windows hold few enough ranges to merge on the fly.
LEVELS = 8

# Kind of a segment: its trace name and colour.
KINDS = {
    0: ("forward op", "#3b82f6"),
    1: ("backward node", "#f97316"),
    2: ("user scope", "#94a3b8"),
    3: ("device (CUDA)", "#16a34a"),
}
MERGED_COLOUR = "#64748b"


@dataclass(frozen=True)
class Lane:
    """One horizontal band: a thread (CPU ranges, one row per nesting depth) or a stream."""

    label: str
    first_row: int
    rows: int


@dataclass
class Window:
    """Segments to draw for one visible window (times in ns from the profile start)."""

    x0: int
    x1: int
    # Individually drawn ranges.
    start: np.ndarray
    end: np.ndarray
    row: np.ndarray
    kind: np.ndarray
    event: np.ndarray
    # Merged runs of short ranges.
    merged_start: np.ndarray
    merged_end: np.ndarray
    merged_row: np.ndarray
    merged_count: np.ndarray
    merged_kind: np.ndarray
    n_in_window: int = 0
    min_duration_ns: int = 0
    notes: list = field(default_factory=list)

    @property
    def n_segments(self) -> int:
        return len(self.start) + len(self.merged_start)


class TimelineIndex:
    """All ranges of a profile as segments on rows, sorted for fast window queries.

    Args:
        view: the profile.
        max_depth: nesting rows per thread (deeper ranges are drawn on the last row).
    """

    def __init__(self, view: ProfileView, max_depth: int = 8):
        # Built for ten-million-event profiles: narrow integer columns (rows, kinds and event
        # numbers fit in 32 bits or less), one sort on a combined key, no per-event Python.
        data, a, cols = view.data, view.data.analysis, view.data.event_columns
        origin = view.time_origin_ns
        self.view = view
        threads = np.asarray(view.threads, dtype=np.int64)
        depth = (np.minimum(a.depth, max_depth) - 1).astype(np.int32)  # 0-based
        thread_rank = np.searchsorted(threads, cols["thread_id"]).astype(np.int32)
        # Rows: each thread gets as many rows as its deepest range needs (a count per
        # thread and depth, rather than a slow np.maximum.at).
        rows_per_thread = np.ones(len(threads), dtype=np.int64)
        if data.n_events:
            seen = np.bincount(thread_rank.astype(np.int64) * max_depth + np.clip(depth, 0, max_depth - 1),
                               minlength=len(threads) * max_depth).reshape(len(threads), max_depth) > 0
            rows_per_thread = np.maximum(max_depth - np.argmax(seen[:, ::-1], axis=1), 1)
        first_row = np.concatenate([[0], np.cumsum(rows_per_thread)[:-1]]) if len(threads) else np.zeros(0, np.int64)
        self.lanes = [Lane(f"thread {t}", int(first_row[k]), int(rows_per_thread[k]))
                      for k, t in enumerate(threads.tolist())]
        row = (first_row.astype(np.int32)[thread_rank] + depth if data.n_events else np.zeros(0, np.int32))
        del depth, thread_rank
        # Temporaries are dropped as soon as used: at 7.7M ranges each int64 column is 62 MB,
        # and the server's peak memory is this constructor's (739 MB of temporaries before).
        scope = cols["scope"]
        kind = np.full(len(scope), 2, np.int8)
        kind[scope == Scope.FUNCTION] = 0
        kind[scope == Scope.BACKWARD_FUNCTION] = 1
        del scope
        start = cols["start_ns"] - origin
        end = cols["end_ns"] - origin
        event = np.arange(data.n_events, dtype=np.int32)

        # Device intervals: one lane per (device, stream), a single row.
        has_dev = np.flatnonzero((cols["device_start_ns"] >= 0) & (cols["device_end_ns"] >= 0))
        next_row = int(first_row[-1] + rows_per_thread[-1]) if len(threads) else 0
        if len(has_dev):
            key = cols["device_id"][has_dev].astype(np.int64) * (1 << 40) + cols["stream"][has_dev].astype(np.int64)
            uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
            del key
            for k, at in enumerate(has_dev[first].tolist()):
                dev_name = data.strings[int(cols["device_id"][at])]
                self.lanes.append(Lane(f"{dev_name} stream {int(cols['stream'][at])}", next_row + k, 1))
            row = np.concatenate([row, (next_row + inv.reshape(-1)).astype(np.int32)])
            del inv
            kind = np.concatenate([kind, np.full(len(has_dev), 3, np.int8)])
            start = np.concatenate([start, cols["device_start_ns"][has_dev] - origin])
            end = np.concatenate([end, cols["device_end_ns"][has_dev] - origin])
            event = np.concatenate([event, has_dev.astype(np.int32)])
        del has_dev
        self.n_rows = sum(lane.rows for lane in self.lanes)
        start, end = start.astype(np.int64, copy=False), end.astype(np.int64, copy=False)
        # Sorted by row, then kind, then start (short ranges merge with their own kind only):
        # one argsort of a combined key; the lane's number sits above any start time.
        lane_key = row * 8 + kind
        self.x_max = int(end.max()) if len(end) else 1
        shift = max(int(start.max()) + 1, 1) if len(start) else 1
        if len(start) and int(lane_key.max()) < (np.iinfo(np.int64).max // shift):
            packed = lane_key.astype(np.int64)
            packed *= shift
            packed += start
            order = np.argsort(packed)
            del packed
        else:       # a span too long to pack beside the lane: three keys
            order = np.lexsort((start, kind, row))
        self.start = start[order]
        del start
        self.end = end[order]
        del end
        self.row, self.kind, self.event = row[order], kind[order], event[order]
        del row, kind, event
        self.lane_key = lane_key[order]
        del lane_key, order
        # Ranges longest first: those at least one pixel long are a prefix.
        duration = self.end - self.start
        duration *= -1                               # negated: ascending is longest first
        self.by_duration = np.argsort(duration).astype(np.int32)
        self._neg_sorted_duration = duration[self.by_duration]    # ascending, for searchsorted
        np.negative(duration, out=duration)
        # Where each lane (row and kind) begins, and its longest range: a window's ranges in a
        # lane start between ``lo - longest`` and ``hi``, two binary searches in its starts.
        first = np.flatnonzero(np.r_[True, self.lane_key[1:] != self.lane_key[:-1]]) if len(duration) else \
            np.zeros(0, np.int64)
        self._lane_first = np.r_[first, len(duration)]
        self._lane_longest = np.maximum.reduceat(duration, first) if len(first) else np.zeros(0, np.int64)
        self._levels: dict = {}
        self._levels_lock = threading.Lock()

    @property
    def duration(self) -> np.ndarray:
        """Each range's length (ns), in index order (computed: not kept beside start and end)."""
        return self.end - self.start

    def __len__(self) -> int:
        return len(self.start)

    def query(self, x0: float | None = None, x1: float | None = None, budget: int = 20_000,
              resolution: int = 2_000) -> Window:
        """Segments for the window ``[x0, x1]`` (ns from the profile start; None: all).

        Args:
            budget: at most this many segments (individual + merged) are returned.
            resolution: about how many pixels wide the plot is; ranges shorter than a pixel
                are merged.
        """
        lo = 0 if x0 is None else int(max(0, x0))
        hi = self.x_max if x1 is None else int(min(self.x_max, x1))
        if hi <= lo:
            hi = lo + 1
        first_pixel = pixel = max(1, (hi - lo) // max(resolution, 1))
        while True:
            big, runs, n_in = self._segments(lo, hi, pixel, resolution)
            if len(big) + len(runs[0]) <= budget or pixel >= (hi - lo):
                break
            pixel *= 2
        notes = [f"ranges shorter than {pixel / 1e3:.1f} us are merged at this zoom"] if pixel > first_pixel else []
        return Window(
            x0=lo, x1=hi, start=self.start[big], end=self.end[big], row=self.row[big],
            kind=self.kind[big], event=self.event[big],
            merged_start=runs[0], merged_end=runs[1], merged_row=runs[2] // 8, merged_count=runs[3],
            merged_kind=(runs[2] % 8).astype(np.int8),
            n_in_window=n_in, min_duration_ns=int(pixel), notes=notes)

    def _segments(self, lo: int, hi: int, pixel: int, resolution: int):
        """(ranges drawn one by one, merged runs, ranges in the window) for one pixel size."""
        level = self._level_for(pixel, resolution)
        if level is None:   # a narrow window: its ranges, the short ones merged now
            in_win = self._in_window(lo, hi)
            short = (self.end[in_win] - self.start[in_win]) < pixel
            big, small = in_win[~short], in_win[short]
            runs = _merge_runs(self.start[small], self.end[small], self.lane_key[small], pixel)
            return big, runs, len(in_win)
        long = self.by_duration[:self._longer_than(pixel)]
        big = np.sort(long[(self.start[long] < hi) & (self.end[long] > lo)])
        lvl_pixel, (rs, re, rk, rc) = level
        pick = (rs < hi) & (re > lo)
        # Ranges long at the level's pixel but short at this one are not in its runs.
        mid = self.by_duration[self._longer_than(pixel):self._longer_than(lvl_pixel)]
        mid = mid[(self.start[mid] < hi) & (self.end[mid] > lo)]
        start = np.concatenate([rs[pick], self.start[mid]])
        end = np.concatenate([re[pick], self.end[mid]])
        key = np.concatenate([rk[pick], self.lane_key[mid]])
        count = np.concatenate([rc[pick], np.ones(len(mid), np.int64)])
        order = np.lexsort((start, key))
        runs = _merge_runs(start[order], end[order], key[order], pixel, count[order])
        return big, runs, int(count.sum()) + len(big)

    def _in_window(self, lo: int, hi: int) -> np.ndarray:
        """Indices (ascending) of the ranges that overlap ``[lo, hi)``, found lane by lane
        without reading the ranges outside the window."""
        parts = []
        for k in range(len(self._lane_first) - 1):
            a, b = int(self._lane_first[k]), int(self._lane_first[k + 1])
            starts = self.start[a:b]
            i = a + int(np.searchsorted(starts, lo - int(self._lane_longest[k]), side="left"))
            j = a + int(np.searchsorted(starts, hi, side="left"))
            if j > i:
                parts.append(i + np.flatnonzero(self.end[i:j] > lo))
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def _longer_than(self, pixel: int) -> int:
        """How many ranges last at least ``pixel`` ns (a prefix of ``by_duration``)."""
        return int(np.searchsorted(self._neg_sorted_duration, -pixel, side="right"))

    def _level_for(self, pixel: int, resolution: int):
        """The precomputed (pixel, runs) of the coarsest level no coarser than ``pixel``;
        None when ``pixel`` is finer than every level."""
        full = max(1, self.x_max // max(resolution, 1))
        if pixel < full >> (LEVELS - 1) or len(self) < 50_000:   # small profiles need no levels
            return None
        level = min(int(np.log2(max(full / pixel, 1.0))), LEVELS - 1)
        while (full >> level) > pixel:
            level += 1
        key = (resolution, level)
        if key not in self._levels:
            with self._levels_lock:     # concurrent requests build the levels once
                if key not in self._levels:
                    self._build_levels(resolution, full)
        return self._levels[key]

    def _build_levels(self, resolution: int, full: int) -> None:
        """Runs at every level, from the finest up: each level merges the one below it and
        the ranges that were long there but are short at its pixel."""
        below = None
        for level in range(LEVELS - 1, -1, -1):
            pixel = max(1, full >> level)
            if below is None:
                short = np.flatnonzero((self.end - self.start) < pixel)
                runs = _merge_runs(self.start[short], self.end[short], self.lane_key[short], pixel)
            else:
                lo_px, (rs, re, rk, rc) = below
                mid = self.by_duration[self._longer_than(pixel):self._longer_than(lo_px)]
                start = np.concatenate([rs, self.start[mid]])
                end = np.concatenate([re, self.end[mid]])
                key = np.concatenate([rk, self.lane_key[mid]])
                count = np.concatenate([rc, np.ones(len(mid), np.int64)])
                order = np.lexsort((start, key))
                runs = _merge_runs(start[order], end[order], key[order], pixel, count[order])
            below = (pixel, runs)
            self._levels[(resolution, level)] = below

    @functools.cached_property
    def event_row(self) -> np.ndarray:
        """Row of each event's CPU range (for drawing links)."""
        out = np.full(self.view.data.n_events, -1, dtype=np.int32)
        cpu = self.kind != 3
        out[self.event[cpu]] = self.row[cpu]
        return out


def _merge_runs(start, end, row, gap, count=None):
    """Merge consecutive segments of a row (input sorted by row, then start) whose gap is
    below ``gap``; ``count``: ranges each segment stands for (1 each by default). Returns
    (start, end, row, count) of the runs."""
    if len(start) == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty, empty
    # Ranges of one row may nest when max_depth clipped them, so compare with the running
    # max of the ends so far in the row (shifting each row above the previous keeps the
    # running max from leaking across rows).
    shift = row.astype(np.int64) * (int(end.max()) + 1)
    run_end = np.maximum.accumulate(end + shift) - shift
    new_run = np.ones(len(start), dtype=bool)
    new_run[1:] = (row[1:] != row[:-1]) | (start[1:] - run_end[:-1] > gap)
    first = np.flatnonzero(new_run)
    counts = (np.diff(np.r_[first, len(start)]) if count is None
              else np.add.reduceat(np.asarray(count, dtype=np.int64), first))
    ends = np.maximum.reduceat(end, first)
    return start[first], ends, row[first], counts
