"""The app's state: the loaded profiles by id, and what a page is drawn from.

Profiles live on the server, keyed by an opaque id; the browser holds only that id
(``dcc.Store``). Each profile's analyses live in its own cache (``view.cache``,
:mod:`viewer.cache`), so dropping a profile drops them.
"""
from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass

from .model import ProfileView

__all__ = ["MAIN", "Registry", "PageContext"]

MAIN = "main"      # the key of the profile the server was started on


class Registry:
    """Loaded profiles by id, and the app-wide inputs of the pages.

    Uploads beyond ``capacity`` push out the oldest upload (the startup profile stays).

    Args:
        capacity: uploads kept.
        max_upload_mb: largest upload accepted (the pages' upload buttons say it).
        ranks: a run folder's :func:`profiler.ranks.summarize_run` (the Ranks page), or None.
        history: the run store (a path) of the History page, or None.
    """

    def __init__(self, capacity: int = 4, max_upload_mb: float = 100.0, ranks: dict | None = None, history=None):
        self._views: OrderedDict[str, ProfileView] = OrderedDict()
        self._lock = threading.Lock()
        self.capacity = capacity
        self.max_upload_mb = max_upload_mb
        self.max_bytes = int(max_upload_mb * 1e6)
        self.ranks = ranks
        self.history = history

    def add(self, view: ProfileView, key: str | None = None) -> str:
        key = key or f"u{uuid.uuid4().hex}"
        with self._lock:
            self._views[key] = view
            uploads = [k for k in self._views if k != MAIN]
            while len(uploads) > self.capacity:
                self._views.pop(uploads.pop(0), None)
        return key

    def get(self, key) -> ProfileView | None:
        if not isinstance(key, str):
            return None
        with self._lock:
            return self._views.get(key)


@dataclass(frozen=True)
class PageContext:
    """What a page's ``layout`` is drawn from: the open profile, and the app's state."""

    view: ProfileView
    registry: Registry
    compare_key: str | None = None
