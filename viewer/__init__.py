"""gradtrace viewer: a Dash dashboard over a saved profile file.

``create_app(profile_or_path)`` builds the app (a factory: callbacks are registered on the
app, not globally); ``serve(path)`` runs it on 127.0.0.1. The pages are the modules of
``viewer.app.PAGES``, in tab order (:data:`PAGE_TITLES`). The viewer reads only the profile
file (``profiler.load``) and never imports the engine.
"""
from __future__ import annotations

from .app import PAGES, create_app
from .loading import DEFAULT_MAX_UPLOAD_MB, UploadError
from .server import serve

PAGE_TITLES = [page.TITLE for page in PAGES]

__all__ = ["create_app", "serve", "PAGE_TITLES", "DEFAULT_MAX_UPLOAD_MB", "UploadError"]
