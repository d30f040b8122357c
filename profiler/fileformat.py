"""The gradtrace profile file: one self-contained, columnar, pickle-free file per profile.

Layout (all integers little-endian; see docs/profile-format.md)::

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

import json
import os
import struct
import zlib
from pathlib import Path

import numpy as np

from .data import ProfileData
from .records import EVENT_COLUMNS, MEMORY_COLUMNS

__all__ = ["MAGIC", "SCHEMA_VERSION", "FILE_SUFFIX", "ProfileFormatError", "save", "load",
           "gradtrace_version"]

MAGIC = b"\x93GTPROF\n"
SCHEMA_VERSION = 1
FILE_SUFFIX = ".gtprof"
_PREAMBLE = struct.Struct("<8sII")
_COMPRESSION_LEVEL = 1   # fast enough to save every cycle; still far below 64 B/event
# How each column is stored before compression: "delta" (difference to the previous row) or
# "minus:<column>" (difference to another column of the same row); default "raw".
_ENCODINGS = {
    "events": {"start_ns": "delta", "end_ns": "minus:start_ns"},
    "memory": {"time_ns": "delta", "total_allocated": "delta"},
}
_ALLOWED_DTYPES = {"|i1", "<i2", "<i4", "<i8"}


class ProfileFormatError(ValueError):
    """A file is not a readable gradtrace profile. The message is one line: path and problem."""

    def __init__(self, path, problem: str):
        self.path = str(path)
        self.problem = " ".join(str(problem).split())
        super().__init__(f"{self.path}: {self.problem}")


def gradtrace_version() -> str:
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


def save(data: ProfileData, path) -> None:
    """Write ``data`` to ``path`` (atomically: a temporary file renamed into place)."""
    path = Path(path)
    payload: list[bytes] = []
    offset = 0
    tables = {}
    for table_name, columns, schema in (("events", data.event_columns, EVENT_COLUMNS),
                                        ("memory", data.memory_columns, MEMORY_COLUMNS)):
        entries = []
        for name, dtype in schema.items():
            encoding = _ENCODINGS[table_name].get(name, "raw")
            stored = np.ascontiguousarray(_encode(name, columns[name], columns, encoding))
            info, offset = _blob(stored.tobytes(), payload, offset)
            info.update(name=name, dtype=stored.dtype.str, encoding=encoding, final_dtype=dtype.str)
            entries.append(info)
        tables[table_name] = {"rows": len(columns[next(iter(schema))]), "columns": entries}
    strings_info, offset = _blob(json.dumps(data.strings, ensure_ascii=False).encode("utf-8"),
                                 payload, offset)
    strings_info["count"] = len(data.strings)
    metadata = dict(data.metadata)
    metadata["schema_version"] = SCHEMA_VERSION
    metadata.setdefault("gradtrace_version", gradtrace_version())
    header = json.dumps({"metadata": metadata, "tables": tables, "strings": strings_info,
                         "payload_length": offset}, ensure_ascii=True).encode("ascii")
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(_PREAMBLE.pack(MAGIC, SCHEMA_VERSION, len(header)))
        f.write(header)
        for blob in payload:
            f.write(blob)
    os.replace(tmp, path)


def _read_blob(path, payload: bytes, info: dict, what: str) -> bytes:
    start, length = info["offset"], info["length"]
    if start < 0 or start + length > len(payload):
        raise ProfileFormatError(path, f"truncated profile: {what} lies beyond the end of the file")
    try:
        raw = zlib.decompress(payload[start:start + length])
    except zlib.error as exc:
        raise ProfileFormatError(path, f"corrupted profile: {what} does not decompress ({exc})") from None
    if len(raw) != info["raw_length"] or zlib.crc32(raw) != info["crc32"]:
        raise ProfileFormatError(path, f"corrupted profile: {what} fails its checksum")
    return raw


def _read_table(path, payload: bytes, table: dict, schema: dict, table_name: str) -> dict:
    rows = table["rows"]
    by_name = {c["name"]: c for c in table["columns"]}
    decoded: dict[str, np.ndarray] = {}
    for name, dtype in schema.items():
        info = by_name.get(name)
        if info is None:
            raise ProfileFormatError(path, f"corrupted profile: {table_name} column {name!r} is missing")
        stored_dtype = info["dtype"]
        if stored_dtype not in _ALLOWED_DTYPES or info["final_dtype"] != dtype.str:
            raise ProfileFormatError(path, f"corrupted profile: {table_name} column {name!r} has dtype {stored_dtype}")
        raw = _read_blob(path, payload, info, f"{table_name} column {name!r}")
        col = np.frombuffer(raw, dtype=np.dtype(stored_dtype))
        if len(col) != rows:
            raise ProfileFormatError(path, f"corrupted profile: {table_name} column {name!r} has "
                                           f"{len(col)} rows, expected {rows}")
        encoding = info.get("encoding", "raw")
        if encoding not in ("raw", "delta") and not (encoding.startswith("minus:") and encoding[6:] in decoded):
            raise ProfileFormatError(path, f"corrupted profile: unknown encoding {encoding!r}")
        decoded[name] = _decode(col, decoded, encoding, dtype)
    return decoded


def _check_ids(path, events: dict, memory: dict, n_strings: int) -> None:
    """String ids must point into the string table (analysis indexes with them)."""
    checks = [(events["name_id"], 0), (events["device_id"], 0), (events["shapes_id"], -1),
              (events["dtypes_id"], -1), (events["stack_id"], -1), (memory["device_id"], 0)]
    for col, low in checks:
        if len(col) and (col.min() < low or col.max() >= n_strings):
            raise ProfileFormatError(path, "corrupted profile: a string id points outside the string table")
    if len(events["start_ns"]) and np.any(events["end_ns"] < events["start_ns"]):
        raise ProfileFormatError(path, "corrupted profile: an event ends before it starts")


def load(path) -> ProfileData:
    """Read a profile file written by :func:`save` (or ``prof.save``), or a torch.profiler
    Chrome trace (JSON or gzip; see :mod:`profiler.torch_trace`).

    Raises:
        ProfileFormatError: the file is not a profile, is truncated or corrupted, or was
            written by a newer gradtrace (its schema version is higher than this one reads).
    """
    path = Path(path)
    from .torch_trace import is_torch_trace, load_torch_trace  # noqa: PLC0415 - module cycle

    if is_torch_trace(path):   # a torch.profiler Chrome trace, told apart by its content
        return load_torch_trace(path)
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise ProfileFormatError(path, f"cannot read file ({exc.strerror or exc})") from None
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
    try:
        header = json.loads(blob[_PREAMBLE.size:header_end].decode("ascii"))
        payload_length = int(header["payload_length"])
        tables, strings_info, metadata = header["tables"], header["strings"], header["metadata"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ProfileFormatError(path, f"corrupted profile: unreadable header ({exc})") from None
    payload = memoryview(blob)[header_end:]
    if len(payload) < payload_length:
        raise ProfileFormatError(path, f"truncated profile: expected {header_end + payload_length} bytes, "
                                       f"file has {len(blob)}")
    if len(payload) > payload_length:
        raise ProfileFormatError(path, f"corrupted profile: {len(payload) - payload_length} unexpected "
                                       f"bytes after the payload")
    try:
        events = _read_table(path, payload, tables["events"], EVENT_COLUMNS, "events")
        memory = _read_table(path, payload, tables["memory"], MEMORY_COLUMNS, "memory")
        strings = json.loads(_read_blob(path, payload, strings_info, "string table").decode("utf-8"))
    except ProfileFormatError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise ProfileFormatError(path, f"corrupted profile: {exc}") from None
    if not isinstance(strings, list) or not all(isinstance(s, str) for s in strings):
        raise ProfileFormatError(path, "corrupted profile: the string table is not a list of strings")
    _check_ids(path, events, memory, len(strings))
    return ProfileData(events, memory, strings, metadata)
