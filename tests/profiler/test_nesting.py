"""Interval nesting on hand-written cases: one table drives the vectorised path and the
stack fallback, and a brute-force definition checks random laminar families."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradtrace.profiler.nesting import Nesting, _stack_nest, innermost_containing, nest_in_pieces, nest_intervals

# (intervals, threads or None for all 1, expected parents, expected depths)
CASES = [
    ("nest and siblings", [[0, 10], [1, 3], [3, 4]], None, [-1, 0, 0], [1, 2, 2]),
    ("deep chain", [[0, 10], [1, 9], [2, 8], [3, 7]], None, [-1, 0, 1, 2], [1, 2, 3, 4]),
    ("back to back top level", [[0, 2], [2, 4], [4, 6]], None, [-1, -1, -1], [1, 1, 1]),
    ("same start, longer first", [[0, 5], [0, 10]], None, [1, -1], [2, 1]),
    ("same end", [[0, 10], [5, 10]], None, [-1, 0], [1, 2]),
    ("identical intervals nest in stored order", [[0, 10], [0, 10]], None, [-1, 0], [1, 2]),
    ("zero length inside", [[0, 10], [5, 5]], None, [-1, 0], [1, 2]),
    ("zero length at a parent's end is a sibling", [[0, 10], [10, 10]], None, [-1, -1], [1, 1]),
    ("zero length at a child's start", [[0, 10], [3, 6], [3, 3]], None, [-1, 0, 1], [1, 2, 3]),
    ("unsorted input", [[3, 4], [0, 10], [1, 3]], None, [1, -1, 1], [2, 1, 2]),
    ("threads never nest", [[0, 10], [1, 3], [2, 4]], [1, 2, 1], [-1, -1, 0], [1, 1, 2]),
    ("two threads, same shape", [[0, 10], [1, 3], [0, 10], [1, 3]], [1, 1, 2, 2], [-1, 0, -1, 2], [1, 2, 1, 2]),
]


def _check(result: Nesting, parents, depths):
    assert result.parent.tolist() == parents
    assert result.depth.tolist() == depths


@pytest.mark.parametrize("label, intervals, threads, parents, depths", CASES, ids=[c[0] for c in CASES])
def test_nesting_cases(label, intervals, threads, parents, depths):
    iv = np.array(intervals)
    threads = threads or [1] * len(iv)
    result = nest_intervals(iv[:, 0], iv[:, 1], threads)
    _check(result, parents, depths)
    assert len(result.partial_overlaps) == 0


@pytest.mark.parametrize("label, intervals, threads, parents, depths", CASES, ids=[c[0] for c in CASES])
def test_stack_fallback_agrees(label, intervals, threads, parents, depths):
    """The explicit stack (used for threads with partial overlaps) gives the same forest."""
    iv = np.array(intervals)
    threads = np.array(threads or [1] * len(iv))
    order = np.lexsort((np.arange(len(iv)), -iv[:, 1], iv[:, 0], threads))
    s, e, t = iv[order, 0], iv[order, 1], threads[order]
    parent = np.full(len(iv), -1)
    depth = np.zeros(len(iv), dtype=np.int64)
    overlaps = []
    for thread in np.unique(t):
        lo, hi = np.searchsorted(t, [thread, thread + 1])
        _stack_nest(s, e, int(lo), int(hi), parent, depth, overlaps)
    got_parent = np.full(len(iv), -1)
    got_parent[order[parent >= 0]] = order[parent[parent >= 0]]
    got_depth = np.empty(len(iv), dtype=np.int64)
    got_depth[order] = depth
    assert got_parent.tolist() == parents
    assert got_depth.tolist() == depths
    assert overlaps == []


def test_partial_overlap_is_reported_not_dropped():
    # [0, 5] and [3, 8] overlap without nesting; [6, 7] sits inside [3, 8] only.
    result = nest_intervals(np.array([0, 3, 6]), np.array([5, 8, 7]), np.array([1, 1, 1]))
    assert result.partial_overlaps.tolist() == [[0, 1]]
    assert result.parent.tolist() == [-1, -1, 1]
    assert result.depth.tolist() == [1, 1, 2]


def test_partial_overlap_keeps_the_enclosing_parent():
    # [2, 12] sticks out of [0, 10] and overlaps [1, 3]; [4, 5] nests in [2, 12].
    result = nest_intervals(np.array([0, 1, 2, 4]), np.array([10, 3, 12, 5]), np.ones(4))
    assert sorted(map(tuple, result.partial_overlaps.tolist())) == [(0, 2), (1, 2)]
    assert result.parent.tolist() == [-1, 0, -1, 2]


def test_overlap_in_one_thread_does_not_disturb_another():
    starts = np.array([0, 3, 0, 1])
    ends = np.array([5, 8, 10, 3])
    result = nest_intervals(starts, ends, np.array([1, 1, 2, 2]))
    assert result.partial_overlaps.tolist() == [[0, 1]]
    assert result.parent.tolist() == [-1, -1, -1, 2]


def test_end_before_start_is_an_error():
    with pytest.raises(ValueError, match="ends before it starts"):
        nest_intervals(np.array([5]), np.array([4]), np.array([1]))


def test_empty():
    result = nest_intervals(np.zeros(0), np.zeros(0), np.zeros(0))
    assert len(result.parent) == 0 and result.partial_overlaps.shape == (0, 2)


def _random_laminar(rng, n_roots=30, max_children=3, depth=5):
    """Random properly nested intervals, built top-down; returns list of (start, end, parent)."""
    out = []

    def build(lo, hi, parent, level):
        if level > depth or hi - lo < 4:
            return
        k = int(rng.integers(0, max_children + 1))
        cuts = np.sort(rng.choice(np.arange(lo, hi + 1), size=2 * k, replace=True))
        for a, b in zip(cuts[0::2], cuts[1::2]):
            out.append((int(a), int(b), parent))
            build(int(a), int(b), len(out) - 1, level + 1)

    t = 0
    for _ in range(n_roots):
        length = int(rng.integers(1, 1000))
        out.append((t, t + length, -1))
        build(t, t + length, len(out) - 1, 1)
        t += length + int(rng.integers(0, 3))
    return out


def _brute_force_parents(starts, ends):
    """Innermost container by definition (ties broken like the sort: longer, then earlier)."""
    n = len(starts)
    order = sorted(range(n), key=lambda i: (starts[i], -ends[i], i))
    rank = {i: r for r, i in enumerate(order)}
    parents = []
    for i in range(n):
        best = -1
        for j in range(n):
            if j == i or rank[j] > rank[i]:
                continue
            zero_open = starts[j] == ends[j] == starts[i]
            contains = starts[j] <= starts[i] and ends[i] <= ends[j] and (ends[j] > starts[i] or zero_open)
            if contains and (best < 0 or rank[j] > rank[best]):
                best = j
        parents.append(best)
    return parents


@pytest.mark.parametrize("seed", range(5))
def test_random_laminar_matches_definition(seed):
    rng = np.random.default_rng(seed)
    rows = _random_laminar(rng)
    perm = rng.permutation(len(rows))
    starts = np.array([rows[i][0] for i in perm])
    ends = np.array([rows[i][1] for i in perm])
    result = nest_intervals(starts, ends, np.ones(len(rows)))
    assert result.parent.tolist() == _brute_force_parents(starts.tolist(), ends.tolist())
    assert len(result.partial_overlaps) == 0


def test_innermost_containing():
    starts, ends, threads = np.array([0, 1, 3, 20]), np.array([10, 3, 4, 30]), np.array([1, 1, 1, 2])
    nesting = nest_intervals(starts, ends, threads)
    times = np.array([0, 2, 3, 5, 11, 25, 25, 2])
    qthreads = np.array([1, 1, 1, 1, 1, 2, 1, 7])
    got = innermost_containing(nesting, starts, ends, threads, times, qthreads)
    # t=3 is the end of [1, 3] and the start of [3, 4]: the later-starting range wins.
    assert got.tolist() == [0, 1, 2, 0, -1, 3, -1, -1]


def _innermost_by_definition(nesting, starts, ends, threads, times, qthreads) -> list[int]:
    """The rule read literally: of the query's thread, the last range in ``order`` that starts
    at or before t; then its ancestors until one still holds t."""
    order = nesting.order.tolist()
    out = []
    for t, th in zip(times.tolist(), qthreads.tolist()):
        cand = next((i for i in reversed(order) if threads[i] == th and starts[i] <= t), -1)
        while cand >= 0 and ends[cand] < t:
            cand = int(nesting.parent[cand])
        out.append(cand)
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 20), st.integers(1, 3)), max_size=40),
       st.lists(st.tuples(st.integers(-2, 85), st.integers(1, 4)), max_size=20),
       st.integers(1, 8))
def test_innermost_containing_is_its_definition(raw, queries, piece):
    """Any intervals (partial overlaps too) and queries, on both nestings (int64 indices at
    once, int32 in pieces): one answer, the rule's."""
    starts = np.array([s for s, _, _ in raw], dtype=np.int64)
    ends = starts + np.array([d for _, d, _ in raw], dtype=np.int64)
    threads = np.array([t for _, _, t in raw], dtype=np.int32)
    times = np.array([t for t, _ in queries], dtype=np.int64)
    qthreads = np.array([q for _, q in queries], dtype=np.int32)
    for nesting in (nest_intervals(starts, ends, threads), nest_in_pieces(starts, ends, threads, piece=piece)):
        got = innermost_containing(nesting, starts, ends, threads, times, qthreads)
        assert got.tolist() == _innermost_by_definition(nesting, starts.tolist(), ends.tolist(),
                                                        threads.tolist(), times, qthreads)
