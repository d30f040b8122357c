"""Reading profiles for the dashboard: from a path given on the command line, or from an
upload (``dcc.Upload`` hands the file to the server as a base64 data URL).

Uploads are capped (default 64 MB: the browser holds the whole file in memory, base64 is a
third bigger, and the callback body carries it again), and so is what an upload may inflate
to (``UPLOAD_EXPANSION`` times the cap); bigger profiles are opened with ``gradtrace view FILE``. Parsing goes through :func:`profiler.load`, the safe reader (no
pickle, checksums, id bounds): a bad file becomes a one-line message for the page, never a
traceback. Nothing here opens a path that came from the browser: an upload is written to a
fresh private temporary file, read, and deleted.
"""
from __future__ import annotations

import base64
import binascii
import os
import tempfile
from pathlib import Path

from gradtrace import profiler
from gradtrace.profiler import ProfileData, ProfileFormatError

__all__ = ["DEFAULT_MAX_UPLOAD_MB", "UploadError", "decode_upload", "load_path", "too_big_message"]

DEFAULT_MAX_UPLOAD_MB = 64
# An upload's columns may inflate to at most this many times the upload cap (real profiles
# inflate about 12 times): what a small, hostile file can make the server allocate is bounded
# by the cap, not by what the file claims.
UPLOAD_EXPANSION = 16


class UploadError(ValueError):
    """A profile could not be opened; ``str(err)`` is the message shown in the page."""


def too_big_message(filename: str, size: int, max_bytes: int) -> str:
    return (f"{filename}: {size / 1e6:.1f} MB is more than the {max_bytes / 1e6:.0f} MB upload limit. "
            f"Open big profiles from a terminal instead: gradtrace view {filename}")


def _display_name(filename: str | None) -> str:
    # Only the last path component: the page must not echo paths back.
    name = os.path.basename(str(filename or "upload").replace("\\", "/")) or "upload"
    return name[:200]


def decode_upload(contents: str | None, filename: str | None, max_bytes: int) -> ProfileData:
    """Parse a ``dcc.Upload`` data URL into a profile.

    Args:
        contents: ``"data:<mime>;base64,<data>"``.
        filename: the name the browser reported (only shown, never opened).
        max_bytes: refuse files larger than this.
    Raises:
        UploadError: with a one-line message for the page.
    """
    name = _display_name(filename)
    if not contents or "," not in contents:
        raise UploadError(f"{name}: empty upload")
    header, b64 = contents.split(",", 1)
    if ";base64" not in header:
        raise UploadError(f"{name}: the browser did not send the file as base64")
    approx_size = len(b64) * 3 // 4
    if approx_size > max_bytes:
        raise UploadError(too_big_message(name, approx_size, max_bytes))
    try:
        raw = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise UploadError(f"{name}: the upload is not valid base64") from None
    del contents, b64   # the decoded copy is all that is needed from here on
    fd, tmp = tempfile.mkstemp(prefix="gradtrace-upload-", suffix=".gtprof")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        del raw
        return _load(Path(tmp), name, max_raw_bytes=UPLOAD_EXPANSION * max_bytes)
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def load_path(path) -> ProfileData:
    """Load a profile file named by the user who started the server."""
    return _load(Path(path), os.path.basename(str(path)))


def _load(path: Path, name: str, max_raw_bytes: int | None = None) -> ProfileData:
    try:
        data = profiler.load(path, max_raw_bytes=max_raw_bytes)
        data.analysis  # noqa: B018 - analyse now, so a bad profile fails here and not in a page
        return data
    except ProfileFormatError as exc:
        raise UploadError(f"{name}: {exc.problem}") from None
    except MemoryError:
        raise UploadError(f"{name}: not enough memory to load this profile") from None
    except Exception as exc:  # noqa: BLE001 - any parser failure is a message, not a traceback
        raise UploadError(f"{name}: could not read this profile ({type(exc).__name__})") from None
