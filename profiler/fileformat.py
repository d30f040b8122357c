"""The gradtrace profile file: one self-contained, columnar, pickle-free file per profile.

Version 5 (:mod:`profiler.mapped`, what :func:`save` writes) lays the columns out to be
memory-mapped and stores the expensive analyses beside them. Versions 1-4, the layout below,
are still read, and written by ``save(..., version=4)`` (the compact zlib layout).

Layout of versions 1-4 (all integers little-endian; see docs/profile-format.md)::

    magic           8 bytes   b"\\x93GTPROF\\n"
    schema_version  uint32
    header_length   uint32
    header          header_length bytes of UTF-8 JSON
    payload         zlib blobs, one per column and one for the string table

The JSON header holds the metadata and, for each blob, its offset in the payload, compressed
and raw lengths, CRC-32 of the raw bytes, dtype and encoding. Columns whose values grow
slowly are delta-encoded before compression (a timestamp becomes a small step), which is what
keeps a profile without stacks well under 64 bytes per event. Decoding is exact (int64
arithmetic wraps the same way both directions), so a profile round-trips bit for bit.
"""
from __future__ import annotations

import functools

import json
import mmap
import os
import struct
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .records import COLUMN_DEFAULTS, EDGE_COLUMNS, EVENT_COLUMNS, GPU_COLUMNS, MEMORY_COLUMNS, NODE_COLUMNS, empty_columns
if TYPE_CHECKING:  # pragma: no cover
    from .data import ProfileData

from . import journal, mapped
from .validate import ProfileFormatError, ValidProfile, valid_text, validate_profile

__all__ = ["MAGIC", "SCHEMA_VERSION", "FILE_SUFFIX", "ProfileFormatError", "save", "read",
           "gradtrace_version"]

MAGIC = b"\x93GTPROF\n"
# 2: the backward graph (nodes, edges); 3: memory kinds; 4: GPU activities (kernel launch
# arguments); 5: the memory-mapped layout with stored analyses. Every earlier version is read.
SCHEMA_VERSION = 5
# The last version of the zlib layout below.
LEGACY_VERSION = 4
FILE_SUFFIX = ".gtprof"
_PREAMBLE = struct.Struct("<8sII")
_COMPRESSION_LEVEL = 1   # fast enough to save every cycle; still far below 64 B/event
# How each column is stored before compression: "delta" (difference to the previous row) or
# "minus:<column>" (difference to another column of the same row); default "raw".
_ENCODINGS = {
    "events": {"start_ns": "delta", "end_ns": "minus:start_ns"},
    "memory": {"time_ns": "delta", "total_allocated": "delta"},
    "nodes": {"event": "delta"},
    "edges": {},
    "gpu": {"event": "delta"},
}
# The tables of each schema version, in file order.
_TABLES = {
    "events": (EVENT_COLUMNS, 1), "memory": (MEMORY_COLUMNS, 1),
    "nodes": (NODE_COLUMNS, 2), "edges": (EDGE_COLUMNS, 2), "gpu": (GPU_COLUMNS, 4),
}
# The ProfileData attribute holding each table.
_ATTRIBUTES = {"events": "event_columns", "memory": "memory_columns", "nodes": "node_columns",
               "edges": "edge_columns", "gpu": "gpu_columns"}
_ALLOWED_DTYPES = {"|i1", "<i2", "<i4", "<i8", "<f4"}
# zlib can inflate ~1000:1; this writer (level 1) stays under ~230:1 per column and ~15:1 per
# file for real profiles. Blobs declaring more than this many times the file's size are refused
# before anything is inflated: a small file cannot make the reader allocate gigabytes.
MAX_EXPANSION = 256


@functools.cache
def gradtrace_version() -> str:
    """The installed version (read once: the metadata lookup costs a millisecond)."""
    try:
        from importlib.metadata import version  # noqa: PLC0415

        return version("gradtrace")
    except Exception:  # not installed as a distribution (running from a checkout)
        return "0.1.0+checkout"


def _encode(name: str, col: np.ndarray, table: dict, encoding: str) -> np.ndarray:
    if encoding == "delta":
        out = col.astype(np.int64)
        return np.diff(out, prepend=np.int64(0)) if len(out) else out
    if encoding.startswith("minus:"):
        return col.astype(np.int64) - table[encoding[6:]].astype(np.int64)
    return col


def _decode(col: np.ndarray, decoded: dict, encoding: str, dtype: np.dtype) -> np.ndarray:
    if encoding == "delta":
        return np.cumsum(col, dtype=np.int64).astype(dtype, copy=False)
    if encoding.startswith("minus:"):
        return (col.astype(np.int64) + decoded[encoding[6:]].astype(np.int64)).astype(dtype, copy=False)
    return col


def _blob(raw: bytes, payload: list, offset: int) -> tuple[dict, int]:
    packed = zlib.compress(raw, _COMPRESSION_LEVEL)
    payload.append(packed)
    info = {"offset": offset, "length": len(packed), "raw_length": len(raw), "crc32": zlib.crc32(raw)}
    return info, offset + len(packed)


def save(data: "ProfileData", path, *, compress: bool = False, version: int | None = None,
         release_memory: bool = False) -> None:
    """Write ``data`` to ``path`` (atomically: a temporary file renamed into place).

    Args:
        compress: version 5 with every blob zlib-compressed (smaller to move; read by
            inflating instead of mapping).
        version: 5 (default) or 4, the previous zlib layout (for older readers).
        release_memory: version 5: ``data``'s arrays become views of the file as it is
            written, and their memory is given back (an import: see :func:`.mapped.save`).
            The file must not then be overwritten in place while ``data`` is used.
    """
    version = SCHEMA_VERSION if version is None else version
    metadata = dict(data.metadata)
    metadata.setdefault("gradtrace_version", gradtrace_version())
    metadata.pop("incomplete", None)
    if version >= mapped.VERSION:
        metadata["schema_version"] = mapped.VERSION
        mapped.save(data, path, compress=compress, metadata=metadata, release_memory=release_memory)
    else:
        _save_legacy(data, path, min(version, LEGACY_VERSION), metadata)


def _save_legacy(data: "ProfileData", path, version: int, metadata: dict) -> None:
    path = Path(path)
    payload: list[bytes] = []
    offset = 0
    tables = {}
    for table_name, (schema, since) in _TABLES.items():
        if since > version:
            continue
        columns = getattr(data, _ATTRIBUTES[table_name])
        entries = []
        for name, dtype in schema.items():
            encoding = _ENCODINGS[table_name].get(name, "raw")
            stored = np.ascontiguousarray(_encode(name, columns[name], columns, encoding))
            info, offset = _blob(stored.tobytes(), payload, offset)
            info.update(name=name, dtype=stored.dtype.str, encoding=encoding, final_dtype=dtype.str)
            entries.append(info)
        tables[table_name] = {"rows": len(columns[next(iter(schema))]), "columns": entries}
    # Text UTF-8 cannot hold (lone surrogates) is saved as U+FFFD rather than losing the file.
    strings = [valid_text(s) for s in data.strings]
    strings_info, offset = _blob(json.dumps(strings, ensure_ascii=False).encode("utf-8"), payload, offset)
    strings_info["count"] = len(strings)
    metadata["schema_version"] = version
    header = json.dumps({"metadata": metadata, "tables": tables, "strings": strings_info,
                         "payload_length": offset}, ensure_ascii=True, default=str).encode("ascii")
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(_PREAMBLE.pack(MAGIC, version, len(header)))
        f.write(header)
        for blob in payload:
            f.write(blob)
    os.replace(tmp, path)


def _field(path, info, key: str, what: str, low: int = 0, high: int = 2**63) -> int:
    """``info[key]`` as an integer in ``[low, high)``, or a ProfileFormatError."""
    value = info.get(key) if isinstance(info, dict) else None
    if type(value) is not int or not low <= value < high:
        raise ProfileFormatError(path, f"corrupted profile: {what} has an invalid {key!r}")
    return value


def _read_blob(path, payload, info: dict, what: str) -> bytes:
    """Inflate one blob, never past its declared length (a zlib bomb stops there)."""
    start = _field(path, info, "offset", what)
    length = _field(path, info, "length", what)
    raw_length = _field(path, info, "raw_length", what)
    crc = _field(path, info, "crc32", what, high=2**32)
    if start + length > len(payload):
        raise ProfileFormatError(path, f"truncated profile: {what} lies beyond the end of the file")
    inflate = zlib.decompressobj()
    try:
        raw = inflate.decompress(payload[start:start + length], raw_length + 1)
    except zlib.error as exc:
        raise ProfileFormatError(path, f"corrupted profile: {what} does not decompress ({exc})") from None
    if len(raw) != raw_length or not inflate.eof or zlib.crc32(raw) != crc:
        raise ProfileFormatError(path, f"corrupted profile: {what} fails its checksum")
    return raw


def _read_table(path, payload, table, schema: dict, table_name: str, schema_version: int) -> dict:
    if not isinstance(table, dict) or not isinstance(table.get("columns"), list):
        raise ProfileFormatError(path, f"corrupted profile: the {table_name} table is malformed")
    rows = _field(path, table, "rows", f"the {table_name} table")
    by_name = {c.get("name"): c for c in table["columns"] if isinstance(c, dict) and isinstance(c.get("name"), str)}
    decoded: dict[str, np.ndarray] = {}
    for name, dtype in schema.items():
        what = f"{table_name} column {name!r}"
        info = by_name.get(name)
        since, default = COLUMN_DEFAULTS.get((table_name, name), (0, 0))
        if info is None and schema_version < since:
            decoded[name] = np.full(rows, default, dtype=dtype)   # an older file: not recorded
            continue
        if info is None:
            raise ProfileFormatError(path, f"corrupted profile: {what} is missing")
        stored_dtype = info.get("dtype")
        if not isinstance(stored_dtype, str) or stored_dtype not in _ALLOWED_DTYPES or info.get("final_dtype") != dtype.str:
            raise ProfileFormatError(path, f"corrupted profile: {what} has dtype {str(stored_dtype)[:20]}")
        encoding = info.get("encoding", "raw")
        if encoding not in ("raw", "delta") and not (
                isinstance(encoding, str) and encoding.startswith("minus:") and encoding[6:] in decoded):
            raise ProfileFormatError(path, f"corrupted profile: {what} has unknown encoding {str(encoding)[:30]!r}")
        # Sizes agree before anything is inflated or allocated.
        if _field(path, info, "raw_length", what) != rows * np.dtype(stored_dtype).itemsize:
            raise ProfileFormatError(path, f"corrupted profile: {what} does not hold {rows} rows")
        col = np.frombuffer(_read_blob(path, payload, info, what), dtype=np.dtype(stored_dtype))
        decoded[name] = _decode(col, decoded, encoding, dtype)
    return decoded


def _parse_header(path, text: bytes):
    try:
        header = json.loads(text.decode("ascii"))
    except (ValueError, RecursionError) as exc:   # RecursionError: nested without end
        raise ProfileFormatError(path, f"corrupted profile: unreadable header ({type(exc).__name__})") from None
    if not isinstance(header, dict) or not all(k in header for k in ("metadata", "tables", "strings")):
        raise ProfileFormatError(path, "corrupted profile: the header lacks metadata, tables or strings")
    if not isinstance(header["tables"], dict) or not isinstance(header["strings"], dict):
        raise ProfileFormatError(path, "corrupted profile: the header's tables or strings are malformed")
    return header


def _check_expansion(path, header: dict, file_size: int, max_raw_bytes: int | None) -> None:
    """Refuse declared sizes no honest file has, before inflating anything."""
    infos = [header["strings"]] + [c for t in header["tables"].values() if isinstance(t, dict)
                                   if isinstance(t.get("columns"), list) for c in t["columns"] if isinstance(c, dict)]
    declared = sum(i["raw_length"] for i in infos if type(i.get("raw_length")) is int and i["raw_length"] > 0)
    limit = MAX_EXPANSION * file_size + (1 << 20)
    if max_raw_bytes is not None:
        limit = min(limit, max_raw_bytes)
    if declared > limit:
        raise ProfileFormatError(path, f"corrupted profile: its blobs declare {declared:,} bytes, more than "
                                       f"{limit:,} for a {file_size:,}-byte file (a decompression bomb?)")


def read(path, *, max_raw_bytes: int | None = None, defer_checks: bool = False):
    """Read and check a profile file written by :func:`save` (or ``prof.save``); the
    arguments and errors are :func:`profiler.load`'s, which makes the ProfileData.

    Returns:
        (ValidProfile, the stored analyses of a version-5 file or None).
    """
    path = Path(path)
    try:
        with open(path, "rb") as f:
            try:
                # A map costs nothing until read; the arrays over it keep it open.
                blob = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except (ValueError, OSError):       # empty, or not a regular file (a pipe)
                blob = f.read()
    except OSError as exc:
        raise ProfileFormatError(path, f"cannot read file ({exc.strerror or exc})") from None
    except MemoryError:
        raise ProfileFormatError(path, "not enough memory to read the file") from None
    if len(blob) >= _PREAMBLE.size and blob[:len(MAGIC)] == MAGIC and \
            _PREAMBLE.unpack_from(blob)[1] == mapped.VERSION:
        try:
            found = mapped.read_footer(path, blob)
            if mapped.is_journal(found[3]):   # a rank's profile written step by step
                return journal.read(path, blob, found[0], found[3], max_raw_bytes)
            return mapped.read(path, blob, max_raw_bytes, defer_checks, found=found)
        except MemoryError:
            raise ProfileFormatError(path, "not enough memory to load this profile") from None
    return _read_legacy(path, blob, max_raw_bytes), None


def _read_legacy(path, blob, max_raw_bytes: int | None) -> ValidProfile:
    if len(blob) < _PREAMBLE.size:
        if MAGIC.startswith(blob[:len(MAGIC)]) and blob:
            raise ProfileFormatError(path, "truncated profile: file ends inside the preamble")
        raise ProfileFormatError(path, "not a gradtrace profile (file too short, no magic bytes)")
    magic, schema_version, header_length = _PREAMBLE.unpack_from(blob)
    if magic != MAGIC:
        raise ProfileFormatError(path, "not a gradtrace profile (bad magic bytes)")
    if schema_version > SCHEMA_VERSION:
        raise ProfileFormatError(path, f"profile schema version {schema_version} is newer than this "
                                       f"gradtrace reads (up to {SCHEMA_VERSION}); upgrade gradtrace")
    if schema_version < 1:
        raise ProfileFormatError(path, f"corrupted profile: invalid schema version {schema_version}")
    header_end = _PREAMBLE.size + header_length
    if header_end > len(blob):
        raise ProfileFormatError(path, f"truncated profile: header needs {header_end} bytes, "
                                       f"file has {len(blob)}")
    header = _parse_header(path, blob[_PREAMBLE.size:header_end])
    payload_length = _field(path, header, "payload_length", "the header")
    payload = memoryview(blob)[header_end:] if blob else memoryview(b"")
    if len(payload) < payload_length:
        raise ProfileFormatError(path, f"truncated profile: expected {header_end + payload_length} bytes, "
                                       f"file has {len(blob)}")
    if len(payload) > payload_length:
        raise ProfileFormatError(path, f"corrupted profile: {len(payload) - payload_length} unexpected "
                                       f"bytes after the payload")
    _check_expansion(path, header, len(blob), max_raw_bytes)
    tables = header["tables"]
    try:
        # A table newer than the file's schema is empty (a version 1 file has no graph).
        read_tables = {name: _read_table(path, payload, tables.get(name), schema, name, schema_version)
                       if schema_version >= since else empty_columns(schema)
                       for name, (schema, since) in _TABLES.items()}
        text = _read_blob(path, payload, header["strings"], "string table").decode("utf-8", "surrogatepass")
        strings = json.loads(text)
    except ProfileFormatError:
        raise
    except (ValueError, RecursionError) as exc:   # UnicodeDecodeError, JSONDecodeError
        raise ProfileFormatError(path, f"corrupted profile: unreadable string table ({type(exc).__name__})") from None
    except MemoryError:
        raise ProfileFormatError(path, "not enough memory to load this profile") from None
    return validate_profile(path, read_tables["events"], read_tables["memory"], strings, header["metadata"],
                            read_tables["nodes"], read_tables["edges"], read_tables["gpu"])
