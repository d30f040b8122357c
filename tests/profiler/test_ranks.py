"""profiler/ranks.py on hand-written intervals (the run-folder path is tested end to end in
tests/cli/test_run_nproc.py)."""
from gradtrace.profiler.ranks import merge, overlap_ns


def test_merge_joins_overlapping_and_touching_intervals_and_drops_empty_ones():
    assert merge([[5, 7], [0, 2], [1, 3], [3, 4], [8, 8]]) == [[0, 4], [5, 7]]


def test_overlap_of_two_interval_lists():
    comm = merge([[0, 10], [20, 30]])
    compute = merge([[5, 25]])
    assert overlap_ns(comm, compute) == 5 + 5
    assert overlap_ns(comm, [[40, 50]]) == 0
    assert overlap_ns(comm, comm) == 20
