"""Serving the dashboard: :func:`serve` (waitress) on 127.0.0.1 by default."""
from __future__ import annotations

import ipaddress
import logging
import sys
import warnings
from pathlib import Path
from typing import Callable

from . import ranks_page
from .app import create_app, warm_up
from .loading import DEFAULT_MAX_UPLOAD_MB, load_path
from .model import ProfileView

__all__ = ["serve", "THREADS"]

# waitress worker threads: requests served at once. Analyses and page layouts are computed once
# per profile and shared (viewer.cache), so requests mostly serialize JSON under the GIL: more
# threads than cores do not add speed, but a request waiting for a cold analysis holds its
# thread, and too few threads then stall the quick pages behind it. 16 clients on a 1M-event
# profile (benchmarks/viewer_concurrency.py, 2 cores): warm p95 <= 2 s on every page with 4,
# 8 or 16 threads (within noise); 8 keeps cold waits from blocking the other pages.
THREADS = 8


def serve(path, host: str = "127.0.0.1", port: int = 8050, *, compare=None, store=None,
          max_upload_mb: float = DEFAULT_MAX_UPLOAD_MB, verbose: bool = False,
          on_listening: Callable[[str], object] | None = None, data=None) -> None:
    """Load ``path`` (or take ``data``, the profile already loaded from it) and serve the
    dashboard with waitress until interrupted.

    Binds to 127.0.0.1 unless ``host`` says otherwise; any other address prints a warning
    (the dashboard has no authentication: whoever reaches the port reads the profile).
    waitress is a production WSGI server: no development-server banner, and its request log
    (one line per request) is shown only when ``verbose``.

    Raises:
        viewer.UploadError: the file cannot be read (one line: file name and problem).
        OSError: the address cannot be bound (e.g. the port is in use); raised before
            anything is printed.

    Args:
        on_listening: called with the URL once the port is bound (e.g. to open a browser).
    """
    from waitress.server import create_server  # noqa: PLC0415 - only when serving

    ranks = None
    if ranks_page.is_run_dir(path):   # a run folder: rank profiles or torch traces, one per rank
        view, ranks = ranks_page.open_run(path)
    else:
        view = ProfileView(data if data is not None else load_path(path), Path(path).name)
    app = create_app(view, compare=compare, max_upload_mb=max_upload_mb, ranks=ranks, store=store)
    warm_up(app)      # the expensive analyses, in the background, while the port opens
    wsgi = app.server
    if verbose:
        wsgi = _log_requests(app.server)
    logging.getLogger("waitress").setLevel(logging.INFO if verbose else logging.ERROR)
    server = create_server(wsgi, host=host, port=port, threads=THREADS)   # binds now: OSError if busy
    if not _is_loopback(host):
        message = (f"gradtrace view: serving on {host}:{port}, reachable from other machines. The "
                   f"dashboard has no authentication; anyone who can connect can read this profile.")
        warnings.warn(message, stacklevel=2)
        print(f"WARNING: {message}", file=sys.stderr)
    url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}/"
    print(f"gradtrace view: {Path(path).name} on {url} (Ctrl-C to stop)", file=sys.stderr)
    if on_listening is not None:
        on_listening(url)
    try:
        server.run()
    finally:
        server.close()


def _log_requests(wsgi):
    """A WSGI app that prints one line per request (method, path, status) to stderr."""
    def logged(environ, start_response):
        def start(status, headers, exc_info=None):
            print(f"{environ.get('REQUEST_METHOD')} {environ.get('PATH_INFO')} {status}", file=sys.stderr)
            return start_response(status, headers, exc_info)
        return wsgi(environ, start)
    return logged


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
