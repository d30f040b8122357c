"""Importing one torch.profiler trace as a version-5 profile: what ``gradtrace import`` does,
for one trace or for each rank of a folder (:mod:`.rank_import`).

In two passes, so that its peak memory is one pass's: the trace is read and its analyses and
tables written (:func:`.fileformat.save` without the GPU summary); the profile is let go; the
GPU summary is then computed from the written file, whose columns are mapped, and stored in it
(:func:`add_gpu_summary`). In one pass the summary's temporaries (about 500 MB at 10M
events) came on top of the trace's columns and their analysis: 1.7 GB of peak at 10M events.
The file is written under a temporary name and renamed when both passes are done.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

__all__ = ["import_trace", "add_gpu_summary"]


def import_trace(trace, out, *, compress: bool = False, keep: Callable | None = None,
                 load: Callable | None = None) -> dict:
    """Import ``trace`` into the profile ``out``.

    Args:
        keep: called with the read profile before it is let go; its result is returned under
            ``"kept"`` (what a caller still needs of it, e.g. the pairing summary).
        load: reads the trace (default ``profiler.load``; the CLI's turns errors into one line).
    Returns:
        ``{"events", "memory_records", "metadata", "kept"}`` of the imported profile.
    Raises:
        ProfileFormatError: the trace cannot be read; OSError: ``out`` cannot be written.
    """
    from . import fileformat  # noqa: PLC0415
    from .data import load as load_file  # noqa: PLC0415

    out = Path(out)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.import")
    data = (load or load_file)(trace)
    result = {"events": data.n_events, "memory_records": data.n_memory_records,
              "metadata": dict(data.metadata), "kept": keep(data) if keep is not None else None}
    try:
        fileformat.save(data, tmp, compress=compress, gpu_summary=False)
        del data
        add_gpu_summary(tmp)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    return result


def add_gpu_summary(path) -> bool:
    """Compute the GPU summary of a version-5 file written without one, from the file itself
    (its columns mapped, their pages handed back), and store it there
    (:func:`.mapped.store_gpu_summary`).

    Returns:
        True when a summary was stored (False: no device time, or one is there already).
    """
    from . import mapped, stored  # noqa: PLC0415
    from .data import load  # noqa: PLC0415

    data = load(path, defer_checks=True)
    if not data.has_device_time or data.has_stored_gpu_summary:
        return False
    blob = stored.gpu_summary_blob(data)
    data.release_pages()
    del data
    if blob is None:
        return False
    mapped.store_gpu_summary(path, blob)
    return True
