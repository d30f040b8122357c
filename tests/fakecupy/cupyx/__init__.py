"""``cupyx.scatter_add`` for the NumPy-backed CuPy stand-in (see ``../cupy/__init__.py``)."""
import numpy as _np

import cupy as _cupy


def scatter_add(a, slices, value):
    """``a[slices] += value`` with repeated indices summed, as a kernel on the current stream."""
    if type(a) is not _cupy.ndarray:
        raise TypeError(f"scatter_add needs a cupy.ndarray, got {type(a).__name__}")
    _cupy._launch(_np.add.at, (a._a, _cupy._host(slices, False), _cupy._host(value, True)), {},
                  ((a, value),))
