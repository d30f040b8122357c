"""A profile written step by step, so that a process killed mid-run keeps its completed steps.

While ``gradtrace run`` profiles, its output file is a *journal*: a version-5 file
(:mod:`profiler.mapped`) to which every ``prof.step()`` appends one part — the events that
closed and the memory records made since the previous part, and the strings first used in
them — then a new footer (``"journal": true``, the list of parts) and trailer. Nothing written
before is rewritten, and the trailer goes last: killed at any moment (by the launcher's
``MPI_Abort``, SIGKILL, the OOM killer), the file ends either with a complete trailer or with
a part cut short after one, which the reader skips (:func:`mapped.read` takes the last valid
trailer). When the run ends normally the journal is replaced by the complete profile
(``ProfileData.save``, atomic), with its backward graph, device times and stored analyses.

A journal keeps, per completed step, the events (host times, names, shapes, stacks), memory
records and strings. It does not keep what is only known at stop: device (CUDA) times, which
are resolved once at stop, never per step, and the backward graph's edges. A loaded journal
is marked ``metadata["incomplete"] = True``.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import mapped
from .records import EVENT_COLUMNS, MEMORY_COLUMNS, empty_columns
from .validate import ProfileFormatError, valid_text

__all__ = ["Journal", "read_parts"]

_TABLES = {"events": EVENT_COLUMNS, "memory": MEMORY_COLUMNS}


class Journal:
    """An open journal file: :meth:`append` one part per completed step.

    Args:
        path: the profile file to write. A file there from before is removed now (it would
            pass for this run's); the journal is created by the first part, so a process that
            completes no step leaves no file.
    """

    def __init__(self, path):
        self.path = Path(path)
        self.path.unlink(missing_ok=True)
        self._file = None
        self._end = mapped.PREAMBLE.size        # where the next part goes (after the last trailer)
        self._parts: list[dict] = []
        self.strings_written = 0

    def _open(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "wb")
        self._file.write(mapped.PREAMBLE.pack(b"\x93GTPROF\n", mapped.VERSION, 0))
        return self._file

    def append(self, events: dict, memory: dict, new_strings: list, metadata: dict) -> None:
        """Append one part and a footer describing every part so far.

        Args:
            events, memory: the part's rows (``records.EVENT_COLUMNS`` / ``MEMORY_COLUMNS``).
            new_strings: the strings added to the profile's table since the last part (ids
                continue from the strings already written).
            metadata: the profile's metadata as of this part.
        """
        f = self._file or self._open()
        f.seek(self._end)
        writer = mapped.BlobWriter(f, self._end)
        tables = mapped.write_blobs(writer, {"events": (EVENT_COLUMNS, events), "memory": (MEMORY_COLUMNS, memory)})
        text = json.dumps([valid_text(s) for s in new_strings], ensure_ascii=False).encode("utf-8")
        strings = dict(writer.put(text), count=len(new_strings))
        self._parts.append({"tables": tables, "strings": strings})
        self.strings_written += len(new_strings)
        footer = mapped.footer_bytes({"metadata": metadata, "journal": True, "parts": self._parts})
        pad = -writer.offset % mapped.ALIGN
        f.write(b"\0" * pad)
        offset = writer.offset + pad
        # One write for footer and trailer: the trailer is the last thing to reach the file.
        f.write(footer + mapped.trailer_bytes(offset, footer))
        f.flush()           # to the kernel: a killed process keeps it (no fsync: not a crash-proof disk)
        self._end = offset + len(footer) + mapped.TRAILER.size

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def read_parts(mf, footer: dict) -> tuple[dict, dict, list]:
    """The events, memory records and strings of a journal's parts, joined and put in the
    order a profile keeps them (events in start order, the outer of two equal ranges first,
    as the collector orders them; memory in time order)."""
    path = mf.path
    parts = footer.get("parts")
    if not isinstance(parts, list) or not all(isinstance(p, dict) and isinstance(p.get("tables"), dict)
                                              for p in parts):
        raise ProfileFormatError(path, "corrupted profile: the journal's parts are malformed")
    pieces = {name: [] for name in _TABLES}
    strings: list = []
    for k, part in enumerate(parts):
        for name, schema in _TABLES.items():
            pieces[name].append(mapped.read_table(mf, part["tables"].get(name), f"part {k} {name}", schema))
        info = part.get("strings")
        try:
            more = json.loads(bytes(mf.blob(info, f"part {k} string table")).decode("utf-8", "surrogatepass"))
        except (ValueError, RecursionError) as exc:
            raise ProfileFormatError(path, f"corrupted profile: unreadable string table ({type(exc).__name__})") from None
        if not isinstance(more, list) or not isinstance(info, dict) or info.get("count") != len(more):
            raise ProfileFormatError(path, f"corrupted profile: part {k}'s string table is malformed")
        strings += more
    events = {name: np.concatenate([p[name] for p in pieces["events"]]) if parts else empty_columns(EVENT_COLUMNS)[name]
              for name in EVENT_COLUMNS}
    memory = {name: np.concatenate([p[name] for p in pieces["memory"]]) if parts else empty_columns(MEMORY_COLUMNS)[name]
              for name in MEMORY_COLUMNS}
    # A range open across a step (an outer scope) closes in a later part: sort as the collector
    # does — start, then the longer first, then thread, then the later-closing first.
    position = np.arange(len(events["start_ns"]))
    order = np.lexsort((-position, events["thread_id"], -events["end_ns"], events["start_ns"]))
    events = {name: col[order] for name, col in events.items()}
    by_time = np.argsort(memory["time_ns"], kind="stable")
    memory = {name: col[by_time] for name, col in memory.items()}
    return events, memory, strings
