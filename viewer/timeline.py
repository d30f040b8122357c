"""Timeline data: lanes per thread and per device stream, windowed and aggregated.

A profile can hold a million ranges; the browser gets at most a few tens of thousands of
line segments at a time. For the visible window ``[x0, x1]``:

* ranges that cover at least ``(x1 - x0) / resolution`` are drawn one by one (with a name
  on hover and a click target);
* shorter ranges of one row are merged into runs (a gap longer than one "pixel" ends a run)
  and drawn as grey "N events" segments — zooming in splits them again;
* if even that is too much, the pixel threshold grows until the budget holds.

Each kind of range (forward op, backward node, user scope, device interval, merged run) is
one WebGL line trace of ``[start, end, NaN]`` segments: one trace per kind keeps the browser
fast (a trace per event or ``px.timeline`` bars are orders of magnitude slower).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from gradtrace.profiler import Scope

from .model import ProfileView

__all__ = ["Lane", "TimelineIndex", "Window", "KINDS"]

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
        data, a, cols = view.data, view.data.analysis, view.data.event_columns
        origin = view.time_origin_ns
        self.view = view
        threads = np.asarray(view.threads, dtype=np.int64)
        depth = np.minimum(a.depth.astype(np.int64), max_depth) - 1  # 0-based
        thread_rank = np.searchsorted(threads, cols["thread_id"].astype(np.int64))
        # Rows: each thread gets as many rows as its deepest range needs.
        rows_per_thread = np.ones(len(threads), dtype=np.int64)
        if data.n_events:
            np.maximum.at(rows_per_thread, thread_rank, depth + 1)
        first_row = np.concatenate([[0], np.cumsum(rows_per_thread)[:-1]]) if len(threads) else np.zeros(0, np.int64)
        self.lanes = [Lane(f"thread {t}", int(first_row[k]), int(rows_per_thread[k]))
                      for k, t in enumerate(threads.tolist())]
        row = first_row[thread_rank] + depth if data.n_events else np.zeros(0, np.int64)
        kind = np.where(cols["scope"] == Scope.FUNCTION, 0,
                        np.where(cols["scope"] == Scope.BACKWARD_FUNCTION, 1, 2)).astype(np.int8)
        start = cols["start_ns"].astype(np.int64) - origin
        end = cols["end_ns"].astype(np.int64) - origin
        event = np.arange(data.n_events, dtype=np.int64)

        # Device intervals: one lane per (device, stream), a single row.
        has_dev = np.flatnonzero((cols["device_start_ns"] >= 0) & (cols["device_end_ns"] >= 0))
        next_row = int(first_row[-1] + rows_per_thread[-1]) if len(threads) else 0
        if len(has_dev):
            key = cols["device_id"][has_dev].astype(np.int64) * (1 << 40) + cols["stream"][has_dev].astype(np.int64)
            uniq, inv = np.unique(key, return_inverse=True)
            for k, u in enumerate(uniq.tolist()):
                first = has_dev[np.flatnonzero(inv.reshape(-1) == k)[0]]
                dev_name = data.strings[int(cols["device_id"][first])]
                self.lanes.append(Lane(f"{dev_name} stream {int(cols['stream'][first])}", next_row + k, 1))
            row = np.concatenate([row, next_row + inv.reshape(-1)])
            kind = np.concatenate([kind, np.full(len(has_dev), 3, np.int8)])
            start = np.concatenate([start, cols["device_start_ns"][has_dev].astype(np.int64) - origin])
            end = np.concatenate([end, cols["device_end_ns"][has_dev].astype(np.int64) - origin])
            event = np.concatenate([event, has_dev])
        self.n_rows = sum(lane.rows for lane in self.lanes)
        # Sorted by row, then kind, then start: short ranges merge with their own kind only.
        order = np.lexsort((start, kind, row))
        self.start, self.end = start[order], end[order]
        self.row, self.kind, self.event = row[order], kind[order], event[order]
        self.duration = self.end - self.start
        self.x_max = int(self.end.max()) if len(self.end) else 1

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
        in_win = np.flatnonzero((self.start < hi) & (self.end > lo)) if len(self) else np.zeros(0, np.int64)
        pixel = max(1, (hi - lo) // max(resolution, 1))
        notes = []
        while True:
            long_mask = self.duration[in_win] >= pixel
            big, small = in_win[long_mask], in_win[~long_mask]
            lane_key = self.row[small] * 8 + self.kind[small]
            runs = _merge_runs(self.start[small], self.end[small], lane_key, pixel)
            if len(big) + len(runs[0]) <= budget or pixel >= (hi - lo):
                break
            pixel *= 2
        if pixel > max(1, (hi - lo) // max(resolution, 1)):
            notes.append(f"ranges shorter than {pixel / 1e3:.1f} us are merged at this zoom")
        return Window(
            x0=lo, x1=hi, start=self.start[big], end=self.end[big], row=self.row[big],
            kind=self.kind[big], event=self.event[big],
            merged_start=runs[0], merged_end=runs[1], merged_row=runs[2] // 8, merged_count=runs[3],
            merged_kind=(runs[2] % 8).astype(np.int8),
            n_in_window=len(in_win), min_duration_ns=int(pixel), notes=notes)

    @functools.cached_property
    def event_row(self) -> np.ndarray:
        """Row of each event's CPU range (for drawing links)."""
        out = np.full(self.view.data.n_events, -1, dtype=np.int64)
        cpu = self.kind != 3
        out[self.event[cpu]] = self.row[cpu]
        return out


def _merge_runs(start, end, row, gap):
    """Merge consecutive segments of a row (input sorted by row, then start) whose gap is
    below ``gap``. Returns (start, end, row, count) of the runs."""
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
    counts = np.diff(np.r_[first, len(start)])
    ends = np.maximum.reduceat(end, first)
    return start[first], ends, row[first], counts
