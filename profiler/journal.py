"""A profile written step by step, so that a process killed mid-run keeps its completed steps.

While ``gradtrace run`` profiles, its output file is a *journal*: a version-5 file
(:mod:`profiler.mapped`) to which every ``prof.step()`` appends one part — the events that
closed and the memory records made since the previous part, and the strings first used in
them — then a new footer (``"journal": true``: the part, the metadata so far, and where the
previous footer lies, with its CRC) and trailer. An append costs the size of its step, not
of the journal: footers form a chain back to the first part. Nothing written before is
rewritten, and the trailer goes last: killed at any moment (by the launcher's
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
import zlib
from pathlib import Path

import numpy as np

from . import mapped
from .records import EVENT_COLUMNS, MEMORY_COLUMNS
from .validate import ProfileFormatError, valid_text, validate_profile

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
        self._parts = 0
        self._previous = None                   # the last footer's place and CRC
        self.strings_written = 0

    def _open(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "wb")
        self._file.write(mapped.PREAMBLE.pack(b"\x93GTPROF\n", mapped.VERSION, 0))
        return self._file

    def append(self, events: dict, memory: dict, new_strings: list, metadata: dict,
               collectives: list | None = None) -> None:
        """Append one part and a footer that links it to the previous one.

        Args:
            events, memory: the part's rows (``records.EVENT_COLUMNS`` / ``MEMORY_COLUMNS``).
            new_strings: the strings added to the profile's table since the last part (ids
                continue from the strings already written).
            metadata: the profile's metadata as of this part (the last part's is the one read).
            collectives: the ``distributed_collectives`` entries of this part's step (each
                part keeps its own; the reader joins them).
        """
        f = self._file or self._open()
        f.seek(self._end)
        writer = mapped.BlobWriter(f, self._end)
        tables = mapped.write_blobs(writer, {"events": (EVENT_COLUMNS, events), "memory": (MEMORY_COLUMNS, memory)})
        text = json.dumps([valid_text(s) for s in new_strings], ensure_ascii=False).encode("utf-8")
        strings = dict(writer.put(text), count=len(new_strings))
        self.strings_written += len(new_strings)
        self._parts += 1
        footer = mapped.footer_bytes({"metadata": metadata, "journal": True, "parts": self._parts,
                                      "part": {"tables": tables, "strings": strings,
                                               "collectives": collectives or []},
                                      "previous": self._previous})
        pad = -writer.offset % mapped.ALIGN
        f.write(b"\0" * pad)
        offset = writer.offset + pad
        # One write for footer and trailer: the trailer is the last thing to reach the file.
        f.write(footer + mapped.trailer_bytes(offset, footer))
        f.flush()           # to the kernel: a killed process keeps it (no fsync: not a crash-proof disk)
        self._previous = {"offset": offset, "length": len(footer), "crc32": zlib.crc32(footer)}
        self._end = offset + len(footer) + mapped.TRAILER.size

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def _chain(mf, footer: dict) -> list[dict]:
    """The parts of a journal, first to last, by following each footer's ``previous`` link
    (each linked footer checked: inside the file, before the one that links it, its CRC)."""
    path = mf.path
    count = footer.get("parts")
    if type(count) is not int or not 1 <= count <= len(mf.mm) // mapped.ALIGN:
        raise ProfileFormatError(path, "corrupted profile: the journal's part count is invalid")
    parts, limit = [], mf.data_end
    for k in range(count, 0, -1):
        part, link = footer.get("part"), footer.get("previous")
        if footer.get("parts") != k or not isinstance(part, dict) or not isinstance(part.get("tables"), dict) \
                or not isinstance(part.get("collectives"), list):
            raise ProfileFormatError(path, f"corrupted profile: the journal's part {k - 1} is malformed")
        parts.append(part)
        if k == 1:
            if link is not None:
                raise ProfileFormatError(path, "corrupted profile: the journal's first part links to another")
            break
        offset = mapped._int(path, link, "offset", f"the journal's link to part {k - 2}")
        length = mapped._int(path, link, "length", f"the journal's link to part {k - 2}")
        crc = mapped._int(path, link, "crc32", f"the journal's link to part {k - 2}", high=2**32)
        if offset < mapped.PREAMBLE.size or offset + length > limit or length > mapped.MAX_FOOTER \
                or zlib.crc32(mf.mm[offset:offset + length]) != crc:
            raise ProfileFormatError(path, f"corrupted profile: the journal's footer of part {k - 2} "
                                           "is not where its link says")
        try:
            footer = json.loads(mf.mm[offset:offset + length].decode("ascii"))
        except (ValueError, RecursionError) as exc:
            raise ProfileFormatError(path, "corrupted profile: unreadable journal footer "
                                           f"({type(exc).__name__})") from None
        if not isinstance(footer, dict):
            raise ProfileFormatError(path, f"corrupted profile: the journal's footer of part {k - 2} is malformed")
        limit = offset
    return parts[::-1]


def read_parts(mf, footer: dict) -> tuple[dict, dict, list, list]:
    """The events, memory records, strings and collectives of a journal's parts, joined and
    put in the order a profile keeps them (events in start order, the outer of two equal
    ranges first, as the collector orders them; memory in time order)."""
    path = mf.path
    parts = _chain(mf, footer)
    pieces = {name: [] for name in _TABLES}
    strings: list = []
    collectives: list = []
    for k, part in enumerate(parts):
        for name, schema in _TABLES.items():
            pieces[name].append(mapped.read_table(mf, part["tables"].get(name), f"part {k} {name}", schema))
        info = part.get("strings")
        try:
            more = json.loads(bytes(mf.blob(info, f"part {k} string table")).decode("utf-8", "surrogatepass"))
        except (ValueError, RecursionError) as exc:
            raise ProfileFormatError(path, "corrupted profile: unreadable string table "
                                           f"({type(exc).__name__})") from None
        if not isinstance(more, list) or not isinstance(info, dict) or info.get("count") != len(more):
            raise ProfileFormatError(path, f"corrupted profile: part {k}'s string table is malformed")
        strings += more
        collectives += part["collectives"]
    events = {name: np.concatenate([p[name] for p in pieces["events"]]) for name in EVENT_COLUMNS}
    memory = {name: np.concatenate([p[name] for p in pieces["memory"]]) for name in MEMORY_COLUMNS}
    # A range open across a step (an outer scope) closes in a later part: sort as the collector
    # does — start, then the longer first, then thread, then the later-closing first.
    position = np.arange(len(events["start_ns"]))
    order = np.lexsort((-position, events["thread_id"], -events["end_ns"], events["start_ns"]))
    events = {name: col[order] for name, col in events.items()}
    by_time = np.argsort(memory["time_ns"], kind="stable")
    memory = {name: col[by_time] for name, col in memory.items()}
    return events, memory, strings, collectives


def read(path, mm, footer_offset: int, footer: dict, max_raw_bytes: int | None):
    """A journal: its parts joined, checked as any profile; no stored analysis (it is computed
    on use). Bytes after the last complete part are the part being written when the process
    ended, ignored. Returns (ValidProfile, None), as :func:`mapped.read`."""
    mf = mapped.MappedFile(Path(path), mm, footer_offset, max_raw_bytes)
    events, memory, strings, collectives = read_parts(mf, footer)
    metadata = footer["metadata"]
    if isinstance(metadata, dict):
        metadata = dict(metadata, incomplete=True)
        if collectives:
            metadata["distributed_collectives"] = collectives
    return validate_profile(path, events, memory, strings, metadata), None
