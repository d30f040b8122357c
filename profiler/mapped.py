"""Profile format version 5: columns laid out to be memory-mapped, analyses stored beside them.

Layout (integers little-endian; docs/profile-format.md has the full description)::

    preamble   16 bytes   magic b"\\x93GTPROF\\n", schema_version uint32 (5), flags uint32 (0)
    blobs      each column, the string table and the stored analyses, at an offset that is
               a multiple of 64 (cache-line and SIMD aligned), raw little-endian values
               (``np.frombuffer`` over the ``mmap`` gives the column without a copy), or zlib
               when the file was written for transport (``compress=True``)
    footer     UTF-8 JSON: metadata, the tables (rows; per column its offset, length, dtype,
               codec), the string table's blob, the stored analyses
    trailer    32 bytes   footer offset uint64, footer length uint64, CRC-32 of the footer
               uint32, reserved uint32, end magic b"GTPEND5\\n"

The footer is at the end so that a writer can append: a profile written step by step
(:mod:`profiler.journal`) appends each step's blobs, then a new footer and trailer that
describe everything so far. A reader takes the last valid trailer; the bytes after it are an
append cut short (a killed process), ignored.

Reading maps the file and checks, before any value is used: the trailer and footer (CRC),
every blob's offset (aligned, after the preamble, before the footer), length (rows × the
schema's itemsize, no dtype but the schema's), codec; then the columns' values
(:func:`validate.validate_profile`, row windows at a time, each window's pages handed back
to the kernel after its check so that resident memory stays bounded) and the stored analyses'
invariants (:mod:`profiler.stored`). A file that fails any check is one
:class:`ProfileFormatError`.
"""
from __future__ import annotations

import ctypes
import json
import mmap
import os
import platform
import struct
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from . import stored
from .records import EDGE_COLUMNS, EVENT_COLUMNS, GPU_COLUMNS, MEMORY_COLUMNS, NODE_COLUMNS, empty_columns
from .validate import ProfileFormatError, valid_text, validate_profile

if TYPE_CHECKING:  # pragma: no cover
    from .data import ProfileData

__all__ = ["VERSION", "save", "read", "write_blobs", "footer_bytes", "TRAILER", "END_MAGIC", "ALIGN"]

VERSION = 5
ALIGN = 64
PREAMBLE = struct.Struct("<8sII")
TRAILER = struct.Struct("<QQII8s")
END_MAGIC = b"GTPEND5\n"
# The tables and the ProfileData attribute holding each, in file order.
TABLES = {"events": (EVENT_COLUMNS, "event_columns"), "memory": (MEMORY_COLUMNS, "memory_columns"),
          "nodes": (NODE_COLUMNS, "node_columns"), "edges": (EDGE_COLUMNS, "edge_columns"),
          "gpu": (GPU_COLUMNS, "gpu_columns")}
# A footer above this is no footer (a real one is a few kB plus the stored table rows).
MAX_FOOTER = 256 << 20
# How far back a reader looks for an earlier trailer when the last append was cut short.
_MAX_TRAILER_SEARCH = 64
_COMPRESSION_LEVEL = 1
# Rows per validation window: its temporaries stay a few MB at any profile size.
WINDOW_ROWS = 1 << 20


class BlobWriter:
    """Appends aligned blobs to an open file and describes each (offset, length, codec)."""

    def __init__(self, f, offset: int, compress: bool = False):
        self.f, self.offset, self.compress = f, offset, compress

    def put(self, raw) -> dict:
        pad = -self.offset % ALIGN
        if pad:
            self.f.write(b"\0" * pad)
            self.offset += pad
        raw = memoryview(raw).cast("B")
        info = {"offset": self.offset, "raw_length": len(raw)}
        if self.compress:
            packed = zlib.compress(raw, _COMPRESSION_LEVEL)
            info.update(codec="zlib", length=len(packed), crc32=zlib.crc32(raw))
            raw = packed
        else:
            info.update(codec="raw", length=len(raw))
        self.f.write(raw)
        self.offset += len(raw)
        return info


def write_blobs(writer: BlobWriter, tables: dict) -> dict:
    """Each table's columns as blobs; returns the footer's ``tables`` entry.

    Args:
        tables: table name -> (schema, {column -> array}).
    """
    out = {}
    for name, (schema, columns) in tables.items():
        entries = []
        for col, dtype in schema.items():
            values = np.ascontiguousarray(columns[col], dtype=dtype)
            entries.append(dict(writer.put(values), name=col, dtype=dtype.str))
        out[name] = {"rows": len(columns[next(iter(schema))]), "columns": entries}
    return out


def footer_bytes(footer: dict) -> bytes:
    return json.dumps(footer, ensure_ascii=True, default=str).encode("ascii")


def trailer_bytes(offset: int, footer: bytes) -> bytes:
    return TRAILER.pack(offset, len(footer), zlib.crc32(footer), 0, END_MAGIC)


def save(data: "ProfileData", path, *, compress: bool = False, metadata: dict | None = None,
         release_memory: bool = False) -> None:
    """Write ``data`` in version 5, with its analyses, atomically (a temporary file renamed).

    Args:
        compress: zlib every blob (a smaller file to move; it is read by inflating, not mapped).
        metadata: the metadata to write (the caller's, with schema_version set).
        release_memory: read the file back as it is written (:class:`_ReadBack`): ``data``'s
            columns and analysis become views of it, the memory they held is given back, and
            each table's pages are handed back after it. An import's choice (its peak was every
            column beside every analysis array); ignored with ``compress`` and off POSIX.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    strings = [valid_text(s) for s in data.strings]
    with open(tmp, "wb") as f:
        f.write(PREAMBLE.pack(b"\x93GTPROF\n", VERSION, 0))
        writer = BlobWriter(f, PREAMBLE.size, compress)
        tables = write_blobs(writer, {name: (schema, getattr(data, attr)) for name, (schema, attr) in TABLES.items()})
        read_back = _ReadBack(f, tmp) if release_memory and not compress and os.name == "posix" else None
        if read_back is not None:
            read_back.columns(data, tables)
        strings_info = dict(writer.put(json.dumps(strings, ensure_ascii=False).encode("utf-8")), count=len(strings))
        analysis = stored.write_analysis(data, writer, read_back=read_back)
        footer = footer_bytes({"metadata": metadata if metadata is not None else data.metadata,
                               "tables": tables, "strings": strings_info, "analysis": analysis})
        pad = -writer.offset % ALIGN
        f.write(b"\0" * pad)
        offset = writer.offset + pad
        f.write(footer)
        f.write(trailer_bytes(offset, footer))
    os.replace(tmp, path)


try:
    _LIBC = ctypes.CDLL("libc.so.6") if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc" else None
except OSError:
    _LIBC = None


def _trim_heap() -> None:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``).

    glibc serves blocks of up to 32 MiB from its heap once such blocks have been freed, and
    keeps what is freed there: the columns just swapped for views stayed resident as free heap
    (400 MB of a 5M-event import) until this. Elsewhere (musl, macOS) nothing is done.
    """
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


class _ReadBack:
    """The file being written, mapped as it grows: a profile's arrays are swapped for views of
    the blobs just written, so the memory they held goes back to the system, and the pages an
    analysis reads are handed back after it (they stay in the page cache). The views outlive
    the rename: they map the file's inode, not its name."""

    def __init__(self, f, path: Path):
        self.f, self.path, self.maps = f, path, []

    def _map(self) -> MappedFile:
        self.f.flush()
        with open(self.path, "rb") as r:
            mm = mmap.mmap(r.fileno(), 0, access=mmap.ACCESS_READ)
        mf = MappedFile(self.path, mm, len(mm), None)
        self.maps.append(mf)
        return mf

    def columns(self, data: "ProfileData", tables: dict) -> None:
        mf = self._map()
        for name, (schema, attr) in TABLES.items():
            setattr(data, attr, read_table(mf, tables[name], name, schema))
        data._release = self.release
        _trim_heap()

    def analysis(self, data: "ProfileData", entry: dict) -> None:
        data.__dict__["analysis"] = stored.analysis_views(self._map(), entry, data.analysis)  # (cached_property's slot)
        self.release()
        _trim_heap()

    def release(self) -> None:
        for mf in self.maps:
            mf.release()


# --------------------------------------------------------------------------- reading


def _int(path, info, key: str, what: str, low: int = 0, high: int = 2**63) -> int:
    value = info.get(key) if isinstance(info, dict) else None
    if type(value) is not int or not low <= value < high:
        raise ProfileFormatError(path, f"corrupted profile: {what} has an invalid {key!r}")
    return value


class MappedFile:
    """The mapped bytes of one file and the checks that turn a blob's description into an
    array over them."""

    def __init__(self, path: Path, mm, data_end: int, max_raw_bytes: int | None):
        self.path, self.mm, self.data_end = path, mm, data_end
        # zlib blobs (a compressed file) inflate to at most this much in all.
        self.budget = min(256 * len(mm) + (1 << 20), max_raw_bytes if max_raw_bytes is not None else 2**62)
        self.ranges: list[tuple[int, int]] = []

    def blob(self, info, what: str, raw_length: int | None = None):
        """The bytes of one blob (a zero-copy view of the map for raw ones)."""
        path = self.path
        offset = _int(path, info, "offset", what)
        length = _int(path, info, "length", what)
        declared = _int(path, info, "raw_length", what)
        if raw_length is not None and declared != raw_length:
            raise ProfileFormatError(path, f"corrupted profile: {what} does not hold the rows its table declares")
        if offset % ALIGN or offset < PREAMBLE.size:
            raise ProfileFormatError(path, f"corrupted profile: {what} is not at a {ALIGN}-byte aligned offset")
        if offset + length > self.data_end:
            raise ProfileFormatError(path, f"truncated profile: {what} lies beyond the end of the data")
        codec = info.get("codec")
        if codec == "raw":
            if length != declared:
                raise ProfileFormatError(path, f"corrupted profile: {what} has a raw length unlike its length")
            self.ranges.append((offset, length))
            return memoryview(self.mm)[offset:offset + length]
        if codec != "zlib":
            raise ProfileFormatError(path, f"corrupted profile: {what} has unknown codec {str(codec)[:20]!r}")
        crc = _int(path, info, "crc32", what, high=2**32)
        self.budget -= declared
        if self.budget < 0:
            raise ProfileFormatError(path, f"corrupted profile: its blobs declare more bytes than a "
                                           f"{len(self.mm):,}-byte file holds (a decompression bomb?)")
        inflate = zlib.decompressobj()
        try:
            raw = inflate.decompress(self.mm[offset:offset + length], declared + 1)
        except zlib.error as exc:
            raise ProfileFormatError(path, f"corrupted profile: {what} does not decompress ({exc})") from None
        if len(raw) != declared or not inflate.eof or zlib.crc32(raw) != crc:
            raise ProfileFormatError(path, f"corrupted profile: {what} fails its checksum")
        return raw

    def column(self, info, what: str, dtype: np.dtype, rows: int) -> np.ndarray:
        if not isinstance(info, dict) or info.get("dtype") != dtype.str:
            found = info.get("dtype") if isinstance(info, dict) else None
            raise ProfileFormatError(self.path, f"corrupted profile: {what} has dtype {str(found)[:20]}, "
                                                f"not {dtype.str}")
        return np.frombuffer(self.blob(info, what, rows * dtype.itemsize), dtype=dtype)

    def release(self) -> None:
        """Hand the pages read so far back to the kernel: they stay in the page cache and
        come back on the next touch, but stop counting in this process's resident memory."""
        page = mmap.PAGESIZE
        for offset, length in self.ranges:
            start = offset - offset % page
            if length:
                try:
                    self.mm.madvise(mmap.MADV_DONTNEED, start, offset + length - start)
                except (AttributeError, OSError, ValueError):   # no madvise here: keep them
                    return


def read_table(mf: MappedFile, table, name: str, schema: dict) -> dict:
    if not isinstance(table, dict) or not isinstance(table.get("columns"), list):
        raise ProfileFormatError(mf.path, f"corrupted profile: the {name} table is malformed")
    rows = _int(mf.path, table, "rows", f"the {name} table")
    by_name = {c.get("name"): c for c in table["columns"] if isinstance(c, dict) and isinstance(c.get("name"), str)}
    out = {}
    for col, dtype in schema.items():
        what = f"{name} column {col!r}"
        if col not in by_name:
            raise ProfileFormatError(mf.path, f"corrupted profile: {what} is missing")
        out[col] = mf.column(by_name[col], what, dtype, rows)
    return out


def _valid_trailer(mm, start: int) -> tuple[int, int] | None:
    """(footer offset, length) of the trailer at ``start`` when its magic, reserved field,
    bounds and the CRC of the footer it points at all agree; else None."""
    offset, length, crc, reserved, magic = TRAILER.unpack_from(mm, start)
    if magic == END_MAGIC and reserved == 0 and PREAMBLE.size <= offset and offset + length <= start \
            and length <= MAX_FOOTER and zlib.crc32(mm[offset:offset + length]) == crc:
        return offset, length
    return None


def _find_trailer(path, mm) -> tuple[int, int, bool]:
    """(footer offset, footer length, cut short) of the last valid trailer.

    The last bytes of the file are normally one; when an append was cut short (a process
    killed while writing a step), an earlier trailer still describes every complete step,
    found by looking back for its end magic (a bounded number of candidates).
    """
    size = len(mm)
    if size < PREAMBLE.size + TRAILER.size:
        raise ProfileFormatError(path, "truncated profile: file ends before its trailer")
    found = _valid_trailer(mm, size - TRAILER.size)
    if found:
        return found[0], found[1], False
    # The end of the file holds a trailer's magic whose checks fail: a damaged file, not a cut.
    damaged = mm[size - len(END_MAGIC):] == END_MAGIC
    end = size - 1
    for _ in range(_MAX_TRAILER_SEARCH):
        at = mm.rfind(END_MAGIC, PREAMBLE.size, end)
        if at < PREAMBLE.size + TRAILER.size - len(END_MAGIC):
            break
        found = _valid_trailer(mm, at + len(END_MAGIC) - TRAILER.size)
        if found:
            return found[0], found[1], True
        end = at + len(END_MAGIC) - 1
    if damaged:
        raise ProfileFormatError(path, "corrupted profile: its trailer or footer fails its checks")
    raise ProfileFormatError(path, "truncated profile: no valid footer (the file was cut short or overwritten)")


def read_footer(path, mm) -> tuple[int, int, bool, object]:
    """(offset, length, cut short?, decoded footer) of the last valid footer of a version-5
    file: a journal's (:func:`is_journal`) or a profile's."""
    offset, length, cut_short = _find_trailer(path, mm)
    try:
        footer = json.loads(mm[offset:offset + length].decode("ascii"))
    except (ValueError, RecursionError) as exc:
        raise ProfileFormatError(path, f"corrupted profile: unreadable footer ({type(exc).__name__})") from None
    return offset, length, cut_short, footer


def is_journal(footer) -> bool:
    """True for the footer of a journal (:mod:`profiler.journal`): read by it, not here."""
    return isinstance(footer, dict) and footer.get("journal") is True and "metadata" in footer


def read(path, mm, max_raw_bytes: int | None = None, defer_checks: bool = False, found=None):
    """Check and read a mapped version-5 file; returns (ValidProfile, stored analysis or None).

    Args:
        defer_checks: check the stored per-event analysis on its first use rather than now
            (:func:`stored.read_analysis`).
        found: :func:`read_footer`'s answer when the caller has read it already.
    """
    offset, length, cut_short, footer = found or read_footer(path, mm)
    if not isinstance(footer, dict) or not isinstance(footer.get("tables"), dict) \
            or not isinstance(footer.get("strings"), dict) or "metadata" not in footer:
        raise ProfileFormatError(path, "corrupted profile: the footer lacks metadata, tables or strings")
    if cut_short:
        raise ProfileFormatError(path, f"corrupted profile: {len(mm) - offset - length - TRAILER.size} "
                                       "unexpected bytes after the footer")
    mf = MappedFile(Path(path), mm, offset, max_raw_bytes)
    tables = {name: read_table(mf, footer["tables"].get(name), name, schema) if name in footer["tables"]
              or name in ("events", "memory") else empty_columns(schema)
              for name, (schema, _) in TABLES.items()}
    try:
        strings = json.loads(bytes(mf.blob(footer["strings"], "string table")).decode("utf-8", "surrogatepass"))
    except (ValueError, RecursionError) as exc:
        raise ProfileFormatError(path, f"corrupted profile: unreadable string table ({type(exc).__name__})") from None
    mf.release()
    parts = validate_profile(path, tables["events"], tables["memory"], strings, footer["metadata"], tables["nodes"],
                             tables["edges"], tables["gpu"], window_rows=WINDOW_ROWS, after_window=mf.release)
    analysis = footer.get("analysis")
    kept = None
    if analysis is not None:
        kept = stored.read_analysis(mf, analysis, parts, window_rows=WINDOW_ROWS, defer=defer_checks)
    mf.release()
    return parts, kept


