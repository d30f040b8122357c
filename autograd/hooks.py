"""Removable handles: every registration in gradtrace returns one (STYLE 6); and
:data:`GRAPH_EPOCH`, which hook registrations on nodes and on leaf tensors move."""
from __future__ import annotations

import itertools

_next_id = itertools.count(1).__next__

#: Moves whenever a node or a leaf may have gained a hook (``Node._extras``,
#: ``Tensor.register_hook`` on a leaf, ``register_post_accumulate_grad_hook``) or a backward
#: starts (whose nodes may release their saved tensors, ``engine.backward_scope``): never per
#: node. While it has not moved since a forward recorded its nodes, none of them and none of
#: their leaves can have changed in those ways, and compiled autograd completes that forward's
#: key without looking at each node again (``compiled_autograd.key.Recording.finish``).
#: (Here, below both node.py and _tensor.py, since both move it; node.py re-exports it.)
GRAPH_EPOCH = [0]


class RemovableHandle:
    """Removes one registration from the dict it was put in, by id; a context manager too.

    Registrations live in plain dicts keyed by handle id, so removal is O(1) and a hook
    registered twice is two entries, not one name overwritten.
    """

    __slots__ = ("id", "_table", "_on_remove")

    def __init__(self, table: dict, on_remove=None):
        self.id = _next_id()
        self._table = table
        self._on_remove = on_remove

    def remove(self) -> None:
        table, self._table = self._table, None
        if table is not None and table.pop(self.id, None) is not None and self._on_remove:
            self._on_remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False

    def __repr__(self):
        return f"RemovableHandle(id={self.id}, active={self._table is not None})"


def register(table: dict, fn, on_remove=None) -> RemovableHandle:
    """Put ``fn`` into ``table`` under a fresh id and return the handle that removes it."""
    if not callable(fn):
        raise TypeError(f"hook must be callable, got {type(fn).__name__}")
    handle = RemovableHandle(table, on_remove)
    table[handle.id] = fn
    return handle
