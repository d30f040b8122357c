"""backend.scatter_add (embedding's and indexing's backward) sums repeated indices exactly as
NumPy's ``add.at`` does, on its sorted-rows fast path and off it."""
import numpy as np
import pytest

from gradtrace.autograd import backend

RNG = np.random.default_rng(0)

# (target shape, index, values shape): 1-D row indices take the fast path; negative indices
# alias rows counted from the end; the rest (tuples, broadcast values) fall back to add.at.
CASES = [
    ((96, 8), RNG.integers(0, 96, 1024), (1024, 8)),
    ((5, 3, 2), np.array([4, -1, 0, 4, -5, 2]), (6, 3, 2)),
    ((7,), np.array([1, 1, 6, -1]), (4,)),
    ((4, 3), np.array([2, 2, 0], np.uint8), (3, 3)),
    ((4, 3), np.array([1, 1]), (1, 3)),
    ((4, 3), (np.array([0, 0, 3]), np.array([1, 1, 2])), (3,)),
]


@pytest.mark.parametrize("shape, index, vshape", CASES)
def test_scatter_add_matches_add_at(shape, index, vshape):
    values = RNG.standard_normal(vshape)
    got, want = np.zeros(shape), np.zeros(shape)
    backend.scatter_add(np, got, index, values)
    np.add.at(want, index, values)
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=1e-15)
