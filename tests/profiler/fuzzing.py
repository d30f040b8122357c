"""Mutated profile files, and everything a user can do with one, for the fuzz test and
``benchmarks/fuzz_profiles.py``.

:func:`seed_files` writes a few real profiles; :func:`mutate` derives a hostile file from one
(byte flips, truncations, splices, garbage, and structure-aware edits that keep the container
valid — a header value replaced, a column's values rewritten and re-checksummed, a string
replaced, a decompression bomb); :func:`exercise` loads it and, if it loads, runs what the CLI
and the dashboard run on it. The contract under test: a file is either rejected with a
``ProfileFormatError`` or every consumer works; anything else is a crash.
"""
from __future__ import annotations

import contextlib
import io
import json
import random
import struct
import tempfile
import zlib
from pathlib import Path

import numpy as np

from gradtrace import profiler
from gradtrace.profiler import ProfileFormatError, Scope
from gradtrace.profiler import mapped
from gradtrace.profiler.fileformat import MAGIC
from gradtrace.profiler.journal import Journal
from gradtrace.profiler.synthetic import from_events, training_profile

__all__ = ["seed_files", "mutate", "exercise", "MUTATORS"]

_PREAMBLE = struct.Struct("<8sII")

# Values that broke, or could break, code that trusted the file.
HOSTILE_VALUES = [None, True, False, 0, -1, 5, 2**31, -(2**31) - 1, 2**62, 2**63 - 1, -(2**63), 2**64,
                  1e400, -1e400, float("nan"), 0.5, "", "x", "\ud800", "cuda:0", [], [None], [1, 2],
                  [[1, 2]], {}, {"a": 1}, "raw", "delta", "minus:start_ns", "minus:end_ns", "|O", "<f8"]
HOSTILE_STRINGS = ["[[8,", "5", "[[1e400]]", "[[-1, 2]]", "[[1.5]]", "[null]", "{}", "[[true]]",
                   '[["a"]]', "[[" + "9" * 400 + "]]", "[" * 5000,
                   "[" * 10_000 + "]" * 10_000, '[{"a":' * 3000 + "1" + "}]" * 3000, "\ud800", "\udcff\n\udcfe", "",
                   "ProfilerStep#x", "ProfilerStep#" + "9" * 40, "nn.Module: ", "nn.Module: \ud800",
                   "<script>alert(1)</script>", "a\x00b", "\u202e" * 3, "x" * 100_000]
HOSTILE_INTS = [0, -1, 1, 2, 3, 127, -128, 2**31 - 1, -(2**31), 2**62, -(2**62), 2**63 - 1, -(2**63)]


# --------------------------------------------------------------------------- seeds


def _cuda_profile():
    events = []
    for step in range(3):
        t = step * 1000
        events += [
            {"name": f"ProfilerStep#{step}", "start": t, "end": t + 900, "scope": Scope.USER_SCOPE},
            {"name": "matmul", "start": t + 10, "end": t + 100, "sequence_nr": step, "device": "cuda:0",
             "stream": 7, "device_start": t + 20, "device_end": t + 300, "shapes": [[4, 4], [4, 4]],
             "dtypes": ["float32", "float32"], "stack": ["a.py(1): f", "b.py(2): g"]},
            {"name": "nn.Module: Linear", "start": t + 110, "end": t + 200, "scope": Scope.USER_SCOPE},
            {"name": "add", "start": t + 120, "end": t + 130, "thread": 2, "shapes": [[4], []]},
            {"name": "MmBackward0", "start": t + 400, "end": t + 500, "scope": Scope.BACKWARD_FUNCTION,
             "sequence_nr": step, "fwd_thread_id": 1, "device": "cuda:0", "stream": 7,
             "device_start": t + 420, "device_end": t + 800},
        ]
    # In time order, as a profile keeps them (out of order, the seed itself was refused).
    memory = [{"time": 15, "bytes": 64, "device": "cuda:0"}, {"time": 125, "bytes": 16, "thread": 2},
              {"time": 450, "bytes": -64, "device": "cuda:0"}]
    return from_events(events, memory, {"activities": ["cpu", "cuda"], "profile_memory": True,
                                         "record_shapes": True, "with_stack": True, "with_flops": True,
                                         "devices": ["cpu", "cuda:0"], "steps": [0, 2], "pid": 42})


def seed_files(folder) -> list[bytes]:
    """The bytes of a few real profiles (CPU training, CUDA with shapes/stacks/memory, empty),
    each in the version-4 zlib layout and in the version-5 mapped layout."""
    folder = Path(folder)
    seeds = []
    for i, data in enumerate([training_profile(300, threads=2), _cuda_profile(), from_events([])]):
        for version in (4, 5):
            path = folder / f"seed{i}-v{version}.gtprof"
            data.save(path, version=version)
            seeds.append(path.read_bytes())
    path = folder / "seed-compressed.gtprof"          # version 5 with zlib blobs (transport)
    _cuda_profile().save(path, compress=True)
    seeds.append(path.read_bytes())
    seeds.append(_journal_seed(folder / "seed-journal.gtprof"))
    return seeds


def _journal_seed(path) -> bytes:
    """A journal of three parts (a profile written step by step), the last one cut short."""
    data = training_profile(300, threads=2)
    journal = Journal(path)
    events, memory = data.event_columns, data.memory_columns
    n, m = data.n_events, data.n_memory_records
    for k in range(3):
        part = slice(k * n // 3, (k + 1) * n // 3)
        mem = slice(k * m // 3, (k + 1) * m // 3)
        journal.append({c: v[part] for c, v in events.items()}, {c: v[mem] for c, v in memory.items()},
                       data.strings[journal.strings_written:] if k == 0 else [], dict(data.metadata))
    journal.close()
    blob = path.read_bytes()
    return blob[:len(blob) - 50]


# --------------------------------------------------------------------------- version 5


def is_mapped(blob: bytes) -> bool:
    return len(blob) >= 16 and _PREAMBLE.unpack_from(blob)[1] == mapped.VERSION


def split_mapped(blob: bytes) -> tuple[dict, bytes]:
    """(footer, the bytes before it) of a version-5 file (of a journal cut short: of its last
    complete part)."""
    end = blob.rfind(mapped.END_MAGIC) + len(mapped.END_MAGIC)
    offset, length, _, _, _ = mapped.TRAILER.unpack_from(blob, end - mapped.TRAILER.size)
    return json.loads(blob[offset:offset + length]), blob[:offset]


def join_mapped(footer: dict, body: bytes) -> bytes:
    """A version-5 file of ``body`` (preamble and blobs) and a new footer and trailer."""
    body = body + b"\0" * (-len(body) % mapped.ALIGN)
    text = mapped.footer_bytes(footer)
    return body + text + mapped.trailer_bytes(len(body), text)


def edited_mapped(tmp_path, data, edit) -> Path:
    """``data`` saved in the mapped format under ``tmp_path``, then ``edit(footer, body)``
    applied to its footer (a dict) and body (a bytearray) and written back: a hostile file."""
    path = tmp_path / "p.gtprof"
    data.save(path)
    footer, body = split_mapped(path.read_bytes())
    body = bytearray(body)
    edit(footer, body)
    path.write_bytes(join_mapped(footer, bytes(body)))
    return path


def mapped_columns(footer: dict) -> list[dict]:
    """Every column entry of a footer: the tables' (a journal's: its last part's) and the
    stored analysis's."""
    tables = list(footer["part"]["tables"].values()) if footer.get("journal") else list(footer["tables"].values())
    out = [c for t in tables for c in t["columns"]]
    analysis = footer.get("analysis") or {}
    return out + [c for k in ("events", "memory", "overlaps") for c in analysis.get(k, {}).get("columns", [])]


def _mapped_column_edit(rng, blob):
    """Rewrite values of one column or stored analysis array in place (the footer unchanged:
    a version-5 file has no checksum over raw columns, its values are checked instead)."""
    footer, body = split_mapped(blob)
    cols = [c for c in mapped_columns(footer) if c["length"] and c.get("codec") == "raw"]
    if not cols:
        return blob
    info = rng.choice(cols)
    dtype = np.dtype(info["dtype"])
    values = np.frombuffer(body[info["offset"]:info["offset"] + info["length"]], dtype=dtype).copy()
    if rng.random() < 0.7:
        for _ in range(rng.choice([1, 2, 5])):
            values[rng.randrange(len(values))] = np.array(rng.choice(HOSTILE_INTS)).astype(dtype)
    else:
        rng.shuffle(values)
    body = body[:info["offset"]] + values.tobytes() + body[info["offset"] + info["length"]:]
    return join_mapped(footer, body)


def _mapped_footer_edit(rng, blob):
    """A footer value replaced (offsets, lengths, dtypes, rows, stored tables, metadata)."""
    footer, body = split_mapped(blob)
    paths = [p for p in _walk(footer) if p]
    path = rng.choice(paths)
    target = footer
    for k in path[:-1]:
        target = target[k]
    if rng.random() < 0.1 and isinstance(target, dict):
        del target[path[-1]]
    else:
        value = rng.choice(HOSTILE_VALUES)
        if isinstance(target[path[-1]], int) and rng.random() < 0.6:
            value = target[path[-1]] + rng.choice([-1, 1, 8, -64, 64, 1 << 20])
        target[path[-1]] = value
    return join_mapped(footer, body)


# --------------------------------------------------------------------------- the container


def _split(blob: bytes):
    magic, version, header_length = _PREAMBLE.unpack_from(blob)
    header = json.loads(blob[_PREAMBLE.size:_PREAMBLE.size + header_length])
    return version, header, blob[_PREAMBLE.size + header_length:]


def _join(version: int, header: dict, payload: bytes, deep: int = 0) -> bytes:
    text = json.dumps(header, allow_nan=True).encode("ascii")
    text = text.replace(b'"@DEEP@"', b"[" * deep + b"]" * deep)
    return _PREAMBLE.pack(MAGIC, version, len(text)) + text + payload



def _blob_infos(header: dict) -> list[dict]:
    infos = [c for t in header["tables"].values() for c in t["columns"]]
    return infos + [header["strings"]]


def _replace_blob(header: dict, payload: bytes, info: dict, raw: bytes, packed: bytes | None = None) -> bytes:
    """Put a new blob at the end of the payload and point ``info`` at it (checksums right)."""
    packed = zlib.compress(raw, 1) if packed is None else packed
    info.update(offset=len(payload), length=len(packed), raw_length=len(raw), crc32=zlib.crc32(raw))
    payload = payload + packed
    header["payload_length"] = len(payload)
    return payload


# --------------------------------------------------------------------------- mutators


def _flip(rng, blob):
    b = bytearray(blob)
    for _ in range(rng.choice([1, 1, 2, 4, 16])):
        i = rng.randrange(len(b))
        b[i] = rng.randrange(256) if rng.random() < 0.5 else b[i] ^ (1 << rng.randrange(8))
    return bytes(b)


def _truncate(rng, blob):
    return blob[:rng.randrange(len(blob))]


def _splice(rng, blob, other):
    i, j = sorted(rng.randrange(len(blob) + 1) for _ in range(2))
    k = rng.randrange(len(other) + 1)
    return blob[:i] + other[k:k + rng.randrange(64)] + blob[j:]


def _garbage(rng, blob):
    n = rng.choice([0, 1, 7, 16, 100, 5000])
    junk = bytes(rng.randrange(256) for _ in range(n))
    return (MAGIC + junk) if rng.random() < 0.5 else junk


def _walk(obj, path=()):
    yield path
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _walk(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _walk(v, path + (i,))


def _header_edit(rng, blob):
    version, header, payload = _split(blob)
    paths = [p for p in _walk(header) if p]
    path = rng.choice(paths)
    target = header
    for k in path[:-1]:
        target = target[k]
    if rng.random() < 0.15 and isinstance(target, dict):
        del target[path[-1]]
    else:
        value = rng.choice(HOSTILE_VALUES)
        if isinstance(target.get(path[-1]) if isinstance(target, dict) else None, int) and rng.random() < 0.5:
            value = target[path[-1]] + rng.choice([-1, 1, 8, -8, 1 << 20])
        target[path[-1]] = value
    if rng.random() < 0.05:   # a header nested deeper than any recursive parser goes
        header["metadata"] = "@DEEP@"
        return _join(version, header, payload, deep=rng.choice([500, 100_000]))
    return _join(version, header, payload)


def _metadata_edit(rng, blob):
    version, header, payload = _split(blob)
    key = rng.choice(["devices", "steps", "pid", "activities", "start_time_ns", "end_time_ns",
                      "wall_clock_base_ns", "device_region_ns", "record_shapes", "with_flops",
                      "profile_memory", "with_stack", "device_properties", "distributed_info",
                      "trace_name", "gradtrace_version", "schema_version", "options"])
    header["metadata"][key] = rng.choice(HOSTILE_VALUES + [[None], [5, 1], ["cpu", 3], {"cuda:0": "x"},
                                                           [{"name": None}], ["\ud800"]])
    if rng.random() < 0.1:
        header["metadata"] = rng.choice(HOSTILE_VALUES)
    return _join(version, header, payload)


def _column_edit(rng, blob):
    """Rewrite one column's stored values (valid container, checksums right, wrong contents)."""
    version, header, payload = _split(blob)
    table = rng.choice(["events", "memory"])
    cols = header["tables"][table]["columns"]
    info = rng.choice(cols)
    raw = zlib.decompress(payload[info["offset"]:info["offset"] + info["length"]])
    values = np.frombuffer(raw, dtype=np.dtype(info["dtype"])).copy()
    choice = rng.random()
    if choice < 0.6 and len(values):
        for _ in range(rng.choice([1, 2, 5])):
            values[rng.randrange(len(values))] = np.array(rng.choice(HOSTILE_INTS)).astype(values.dtype)
    elif choice < 0.75:
        values = values[:rng.randrange(len(values) + 1)] if len(values) else np.zeros(3, values.dtype)
    elif choice < 0.9 and len(values):
        rng.shuffle(values)
    else:
        values = np.array([rng.choice(HOSTILE_INTS) for _ in range(len(values))]).astype(values.dtype)
    if rng.random() < 0.1:
        header["tables"][table]["rows"] = len(values)
    payload = _replace_blob(header, payload, info, values.tobytes())
    return _join(version, header, payload)


def _string_edit(rng, blob):
    version, header, payload = _split(blob)
    info = header["strings"]
    strings = json.loads(zlib.decompress(payload[info["offset"]:info["offset"] + info["length"]]))
    r = rng.random()
    if r < 0.8 and strings:
        strings[rng.randrange(len(strings))] = rng.choice(HOSTILE_STRINGS)
    elif r < 0.9:
        strings = rng.choice([{}, "x", [1, 2], [None], strings[:1]])
    else:
        strings = strings + [rng.choice(HOSTILE_STRINGS)]
    raw = json.dumps(strings).encode()
    if rng.random() < 0.2:
        raw = raw.replace(b'\\ud800', b'\xed\xa0\x80')   # a surrogate encoded as raw bytes
    payload = _replace_blob(header, payload, info, raw)
    return _join(version, header, payload)


def _bomb(rng, blob):
    """A blob that inflates far beyond its declared raw length."""
    version, header, payload = _split(blob)
    info = rng.choice(_blob_infos(header))
    size = rng.choice([1 << 20, 64 << 20, 1 << 30])
    packed, crc = _zeros_blob(size)
    raw_length = info.get("raw_length", 0) if rng.random() < 0.5 else size
    info.update(offset=len(payload), length=len(packed), raw_length=raw_length,
                crc32=crc if rng.random() < 0.5 else 0)
    payload = payload + packed
    header["payload_length"] = len(payload)
    return _join(version, header, payload)


_ZEROS: dict[int, tuple[bytes, int]] = {}


def _zeros_blob(size: int) -> tuple[bytes, int]:
    """zlib of ``size`` zero bytes (about size/1000 bytes), built in chunks and cached."""
    if size not in _ZEROS:
        comp, crc, chunk = zlib.compressobj(9), 0, b"\0" * (1 << 20)
        parts = []
        for _ in range(size // len(chunk)):
            parts.append(comp.compress(chunk))
            crc = zlib.crc32(chunk, crc)
        _ZEROS[size] = (b"".join(parts) + comp.flush(), crc)
    return _ZEROS[size]


MUTATORS = {"flip": _flip, "truncate": _truncate, "splice": _splice, "garbage": _garbage,
            "header": _header_edit, "metadata": _metadata_edit, "column": _column_edit,
            "string": _string_edit, "bomb": _bomb,
            "mapped_footer": _mapped_footer_edit, "mapped_column": _mapped_column_edit}
_WEIGHTS = {"flip": 3, "truncate": 2, "splice": 2, "garbage": 1, "header": 4, "metadata": 3,
            "column": 5, "string": 3, "bomb": 0.3, "mapped_footer": 4, "mapped_column": 5}
# Which mutators edit which layout's structure (the others work on any bytes).
_LEGACY_ONLY = {"header", "metadata", "column", "string", "bomb"}
_MAPPED_ONLY = {"mapped_footer", "mapped_column"}


def mutate(rng: random.Random, seeds: list[bytes]) -> tuple[str, bytes]:
    """One hostile file derived from a seed; returns (mutator name, bytes)."""
    blob = rng.choice(seeds)
    skip = _LEGACY_ONLY if is_mapped(blob) else _MAPPED_ONLY
    names = [n for n in _WEIGHTS if n not in skip]
    name = rng.choices(names, weights=[_WEIGHTS[n] for n in names])[0]
    if name == "splice":
        return name, _splice(rng, blob, rng.choice(seeds))
    out = MUTATORS[name](rng, blob)
    structured = [n for n in names if n not in ("flip", "truncate", "splice", "garbage", "bomb")]
    if rng.random() < 0.2 and name in structured:
        try:   # a second edit, where the first left a container it can still parse
            out = MUTATORS[rng.choice(structured)](rng, out)
        except (ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError, zlib.error,
                struct.error):
            pass
    return name, out


# --------------------------------------------------------------------------- the consumers


def exercise(path, *, cli: bool = True, viewer: bool = True) -> str:
    """Load ``path``; if it loads, run what users run on it. Returns "rejected" or "loaded".

    Raises whatever a consumer raises (a crash), or AssertionError when an output is wrong.
    """
    try:
        data = profiler.load(path)
    except ProfileFormatError as exc:
        message = str(exc)
        assert "\n" not in message and message.startswith(str(path)), message
        return "rejected"
    data.key_averages()
    data.key_averages(group_by_input_shape=True, group_by_stack_n=2)
    data.table(group_by_input_shape=True)
    json.dumps(data.rows())
    json.dumps(data.forward_backward_summary().to_dicts())
    data.total_average()
    data.step_ranges()
    with tempfile.TemporaryDirectory() as tmp:
        data.export_chrome_trace(Path(tmp) / "t.json")
        json.loads((Path(tmp) / "t.json").read_text(encoding="utf-8"))
        data.export_stacks(Path(tmp) / "s.folded")
        data.export_speedscope(Path(tmp) / "s.json")
        json.loads((Path(tmp) / "s.json").read_text(encoding="utf-8"))
        data.save(Path(tmp) / "again.gtprof")
        profiler.load(Path(tmp) / "again.gtprof")
        if cli:
            _run_cli(["table", str(path)])
            json.loads(_run_cli(["table", str(path), "--json"]))
            _run_cli(["table", str(path), "--group-by", "forward-op", "--json"])
            _run_cli(["export", str(path), "--chrome", str(Path(tmp) / "c.json")])
            json.loads((Path(tmp) / "c.json").read_text(encoding="utf-8"))
    if viewer:
        _view(path)
    return "loaded"


def _run_cli(argv: list[str]) -> str:
    from gradtrace.cli.main import main  # noqa: PLC0415

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    assert status == 0, f"gradtrace {' '.join(argv)} exited {status}: {err.getvalue()}"
    return out.getvalue()


def _view(path) -> None:
    from gradtrace.viewer import operators_page, overview_page  # noqa: PLC0415
    from gradtrace.viewer.loading import load_path  # noqa: PLC0415
    from gradtrace.viewer.model import ProfileView  # noqa: PLC0415

    view = ProfileView(load_path(path), Path(path).name)
    overview_page.page(view)
    operators_page.page(view)
