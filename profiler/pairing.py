"""Forward/backward pairing: which forward op created the autograd node a backward range ran.

The one implementation, used by the analysis (``EventAnalysis.forward_event``: a backward
event inherits its forward op's shapes and stack) and by the torch-trace importer's report of
how the pairing went (``torch_trace.forward_backward_pairing``, ``gradtrace import``).

A backward event is matched on (sequence number, thread): its ``sequence_nr`` and
``fwd_thread_id`` against a forward op's ``sequence_nr`` and ``thread_id``. In a gradtrace
profile that key is exact, one forward op per node. PyTorch gives several forward ops one
sequence number (an op that creates no node reads the counter without taking it: ``linear``
around ``t``, ``matmul`` around ``mm``); like PyTorch, the latest-starting candidate is taken
as the node's creator. Events are in start order, so that is the last candidate of its key.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .records import Scope

__all__ = ["Pairing", "pair_backward"]


@dataclass(frozen=True)
class Pairing:
    """How backward ops pair with forward ops through (sequence number, forward thread).

    Attributes:
        backward: indices of backward events with a sequence number.
        candidates_start, candidates_stop: ``forward_sorted[start:stop]`` are each backward
            event's candidate forward events.
        forward_sorted: forward event indices ordered by key, then start.
        chosen: the forward event used (``data.analysis.forward_event``), -1 when none.
    """

    backward: np.ndarray
    candidates_start: np.ndarray
    candidates_stop: np.ndarray
    forward_sorted: np.ndarray
    chosen: np.ndarray

    @property
    def n_candidates(self) -> np.ndarray:
        return self.candidates_stop - self.candidates_start

    @property
    def matched_one(self) -> int:
        return int(np.count_nonzero(self.n_candidates == 1))

    @property
    def matched_several(self) -> int:
        return int(np.count_nonzero(self.n_candidates > 1))

    @property
    def matched_none(self) -> int:
        return int(np.count_nonzero(self.n_candidates == 0))

    def candidates(self, k: int) -> np.ndarray:
        """Forward event indices that the k-th backward event could belong to."""
        return self.forward_sorted[self.candidates_start[k]:self.candidates_stop[k]]

    def forward_event(self, n_events: int) -> np.ndarray:
        """Per event (``n_events`` of them): the chosen forward event of a backward event, -1
        for every other event and for a backward event without one."""
        out = np.full(n_events, -1, dtype=np.int64)
        out[self.backward] = self.chosen
        return out

    def summary(self) -> str:
        n = len(self.backward)
        return (f"{n} backward ops: {self.matched_one} matched one forward op, {self.matched_several} "
                f"matched several (the latest-starting one is used, as PyTorch does), "
                f"{self.matched_none} none")


def pair_backward(cols: dict) -> Pairing:
    """Candidates and choice of forward op for every backward event with a sequence number.

    Args:
        cols: event columns (``records.EVENT_COLUMNS``; ``scope``, ``sequence_nr``,
            ``thread_id`` and ``fwd_thread_id`` are read), events in start order.
    Returns:
        A :class:`Pairing`.
    """
    scope = cols["scope"]
    seq = cols["sequence_nr"].astype(np.int64)
    fwd = np.flatnonzero((scope == Scope.FUNCTION) & (seq >= 0))
    bwd = np.flatnonzero((scope == Scope.BACKWARD_FUNCTION) & (seq >= 0))
    # One integer key per (sequence number, thread): threads numbered densely among those used.
    threads = np.unique(np.concatenate([cols["thread_id"][fwd], cols["fwd_thread_id"][bwd]]).astype(np.int64))
    width = max(len(threads), 1)
    fwd_key = seq[fwd] * width + np.searchsorted(threads, cols["thread_id"][fwd])
    bwd_key = seq[bwd] * width + np.searchsorted(threads, cols["fwd_thread_id"][bwd])
    order = np.argsort(fwd_key, kind="stable")   # stable: a key's candidates stay in start order
    sorted_keys = fwd_key[order]
    lo = np.searchsorted(sorted_keys, bwd_key, side="left")
    hi = np.searchsorted(sorted_keys, bwd_key, side="right")
    forward_sorted = fwd[order]
    chosen = np.where(hi > lo, forward_sorted[np.maximum(hi - 1, 0)] if len(fwd) else -1, -1).astype(np.int64)
    return Pairing(bwd, lo, hi, forward_sorted, chosen)
