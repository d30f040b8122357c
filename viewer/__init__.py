"""gradtrace viewer: a Dash dashboard over a saved profile file.

``create_app(profile_or_path)`` builds the app (a factory: callbacks are registered on the
app, not globally); ``serve(path)`` runs it on 127.0.0.1. Pages: Overview, Operators,
Forward + backward, Timeline, Autograd graph, Memory, Compare. The viewer reads only the
profile file (``profiler.load``) and never imports the engine.
"""
from __future__ import annotations

from .app import create_app, serve
from .loading import DEFAULT_MAX_UPLOAD_MB, UploadError

__all__ = ["create_app", "serve", "DEFAULT_MAX_UPLOAD_MB", "UploadError"]
