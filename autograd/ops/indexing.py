"""Indexing by slices, integers, integer arrays and boolean masks."""
from __future__ import annotations

from .. import backend
from ..dispatch import defop


def is_basic_index(key) -> bool:
    """True when ``key`` uses only ints, slices, None and Ellipsis (so the result is a view)."""
    items = key if isinstance(key, tuple) else (key,)
    return all(k is None or k is Ellipsis or isinstance(k, (int, slice)) for k in items)


def _index_backward(xp, g, shape, key):
    """Gradient of ``x[key]``: zeros of x's shape with ``g`` added at ``key`` (repeats summed)."""
    z = xp.zeros(shape, dtype=g.dtype)
    if is_basic_index(key):
        z[key] = g
    else:
        backend.scatter_add(xp, z, key, g)
    return z


defop("index", lambda xp, x, key: x[key],
      (lambda F, g, out, x, key: F.index_backward(g, shape=x.shape, key=key),), meta=(0,),
      view=lambda key: is_basic_index(key))
defop("index_backward", _index_backward,
      (lambda F, g, out, x, shape, key: F.index(g, key=key),))
