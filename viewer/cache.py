"""One cache for a loaded profile's analyses, shared by every page and request.

The dashboard serves many requests at once (waitress threads) over one profile. An analysis
(the operator table, the timeline index, the module tree, the ranks summary…) is computed once
per loaded profile: the first request that needs it computes it, the others asking at the same
time wait for that result instead of computing it again under the GIL. A failed computation is
not cached: its error goes to the request that ran it, and the next request tries again.

The cache lives on the :class:`~viewer.model.ProfileView` (``view.cache``), so it is bounded by
the profile's own lifetime: when the app's registry drops an upload, its analyses go with it.
"""
from __future__ import annotations

import logging
import threading
from typing import Callable, Hashable, Iterable, TypeVar

__all__ = ["AnalysisCache", "cached", "warm"]

T = TypeVar("T")
_log = logging.getLogger(__name__)


class AnalysisCache:
    """Values by key, each computed once even when many threads ask for it together."""

    def __init__(self):
        self._values: dict[Hashable, object] = {}
        self._locks: dict[Hashable, threading.Lock] = {}
        self._guard = threading.Lock()      # only around creating a key's lock

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        """The value of ``key``, computing it with ``build()`` if no one has yet.

        Args:
            key: what the value is (e.g. ``("rows", "name", False)``).
            build: computes it; called at most once per key unless it raises.
        Returns:
            The cached value.
        Raises:
            Whatever ``build`` raises (nothing is cached then).
        """
        try:
            return self._values[key]        # the common case: no lock at all
        except KeyError:
            pass
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        # One lock per key: a slow analysis does not hold up requests for the others.
        with lock:
            if key in self._values:         # computed while this thread waited
                return self._values[key]
            value = build()
            self._values[key] = value
            return value

    def __contains__(self, key: Hashable) -> bool:
        return key in self._values


def cached(view, key: Hashable, build: Callable[[], T]) -> T:
    """``view.cache.get(key, build)``: one analysis of a loaded profile, computed once.

    After computing it, the pages of the profile's mapped file that it read are handed back
    (``ProfileData.release_pages``): an analysis keeps its result, the server does not keep
    the whole file resident (a 10M-event profile's file is 1-1.5 GB).
    """
    def build_and_release() -> T:
        try:
            return build()
        finally:
            view.data.release_pages()

    return view.cache.get(key, build_and_release)


def warm(tasks: Iterable[Callable[[], object]], name: str = "gradtrace-warm") -> threading.Thread:
    """Run ``tasks`` one after the other in a background thread (each fills the cache).

    A task that fails is logged and skipped: the page that needs it computes it again and
    shows the error there.

    Returns:
        The started daemon thread (``join()`` it to wait for the warm-up).
    """
    def run():
        for task in tasks:
            try:
                task()
            except Exception:  # noqa: BLE001 - a warm-up never takes the server down
                _log.debug("warm-up task %r failed", task, exc_info=True)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread
