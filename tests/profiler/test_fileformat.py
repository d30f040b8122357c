"""The profile file: exact round trip, compactness, one-line rejection of bad files, and
loading without the engine."""
import json
import re
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from gradtrace import profiler
from gradtrace.profiler import ProfileFormatError
from gradtrace.profiler.fileformat import MAGIC, SCHEMA_VERSION
from gradtrace.profiler.synthetic import from_events, training_profile

REPO = Path(__file__).resolve().parents[2]


def _assert_same(a, b):
    assert a.strings == b.strings
    for name in a.event_columns:
        assert a.event_columns[name].dtype == b.event_columns[name].dtype
        np.testing.assert_array_equal(a.event_columns[name], b.event_columns[name])
    for name in a.memory_columns:
        np.testing.assert_array_equal(a.memory_columns[name], b.memory_columns[name])
    meta = dict(b.metadata)
    assert meta.pop("schema_version") == SCHEMA_VERSION
    meta.pop("gradtrace_version", None)
    expected = dict(a.metadata)
    expected.pop("gradtrace_version", None)
    assert meta == expected


def test_round_trip_is_exact(tmp_path):
    data = training_profile(10_000, threads=3)
    path = tmp_path / "run.gtprof"
    data.save(path)
    loaded = profiler.load(path)
    _assert_same(data, loaded)
    assert loaded.table() == data.table()
    assert loaded.forward_backward_summary().to_dicts() == data.forward_backward_summary().to_dicts()


def test_round_trip_of_extreme_values(tmp_path):
    data = from_events([
        {"name": "ünïcode \"quoted\"\n name", "start": -5, "end": 2**53 - 5, "sequence_nr": 2**62,
         "stream": -(2**63), "device": "cuda:3", "device_start": 0, "device_end": 2**53 - 5,
         "shapes": [[1, 2]], "dtypes": ["float32"], "stack": ["a.py(1): f", "b.py(2): g"]},
        {"name": "empty", "start": 0, "end": 0},
    ], memory=[{"time": 1, "bytes": -(2**40), "addr": 2**63 - 1}], metadata={"nested": {"a": [1, 2]}})
    path = tmp_path / "x.gtprof"
    data.save(path)
    _assert_same(data, profiler.load(path))


def test_empty_profile_round_trips(tmp_path):
    data = from_events([])
    data.save(tmp_path / "e.gtprof")
    loaded = profiler.load(tmp_path / "e.gtprof")
    assert loaded.n_events == 0 and loaded.key_averages() == []
    assert "Self CPU time total: 0.000us" in loaded.table()


@pytest.mark.parametrize("how", [{"compress": True}, {"version": 4}])
def test_compact_on_disk(tmp_path, how):
    """The transport forms (version 5 compressed, analyses included; the version-4 zlib
    layout) stay under 64 bytes per event; the mapped form trades size for opening fast."""
    data = training_profile(100_000, threads=4)
    path = tmp_path / "big.gtprof"
    data.save(path, **how)
    assert path.stat().st_size / data.n_events <= 64
    assert profiler.load(path).key_averages().to_dicts() == data.key_averages().to_dicts()


def test_no_pickle_anywhere():
    source = (REPO / "profiler" / "fileformat.py").read_text()
    assert "pickle" not in source.replace("pickle-free", "")
    assert "allow_pickle=True" not in source


def _saved(tmp_path) -> tuple[Path, bytes]:
    """A version-4 file: the cases below edit that layout (test_mapped_format edits version 5)."""
    path = tmp_path / "good.gtprof"
    training_profile(2_000).save(path, version=4)
    return path, path.read_bytes()


def _header(blob):
    _, _, n = struct.unpack_from("<8sII", blob)
    return json.loads(blob[16:16 + n]), 16 + n


def _rejects(path, pattern):
    with pytest.raises(ProfileFormatError) as info:
        profiler.load(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path) + ": ")
    assert re.search(pattern, message), message
    assert isinstance(info.value, ValueError)


def test_rejects_foreign_file(tmp_path):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": []}))
    # JSON is read as a torch trace (profiler.torch_trace); this one has no events.
    _rejects(path, r"not a gradtrace profile, nor a torch trace with profiler events")


def test_rejects_empty_and_tiny_files(tmp_path):
    path = tmp_path / "empty.gtprof"
    path.write_bytes(b"")
    _rejects(path, "not a gradtrace profile")
    path.write_bytes(MAGIC[:5])
    _rejects(path, "truncated")


def test_rejects_missing_file(tmp_path):
    _rejects(tmp_path / "nope.gtprof", "cannot read file")


@pytest.mark.parametrize("keep", [10, 20, 100, -1, -200])
def test_rejects_truncated(tmp_path, keep):
    path, blob = _saved(tmp_path)
    path.write_bytes(blob[:keep])
    _rejects(path, "truncated")


def test_rejects_newer_schema(tmp_path):
    path, blob = _saved(tmp_path)
    path.write_bytes(blob[:8] + struct.pack("<I", SCHEMA_VERSION + 1) + blob[12:])
    _rejects(path, rf"schema version {SCHEMA_VERSION + 1} is newer .* upgrade gradtrace")


def test_rejects_flipped_payload_byte(tmp_path):
    path, blob = _saved(tmp_path)
    header, start = _header(blob)
    col = header["tables"]["events"]["columns"][1]
    corrupt = bytearray(blob)
    corrupt[start + col["offset"] + col["length"] // 2] ^= 0xFF
    path.write_bytes(bytes(corrupt))
    _rejects(path, "corrupted profile: events column 'start_ns'")


def test_rejects_garbage_header(tmp_path):
    path, blob = _saved(tmp_path)
    _, start = _header(blob)
    path.write_bytes(blob[:16] + b"{" * (start - 16) + blob[start:])
    _rejects(path, "corrupted profile: unreadable header")


def test_rejects_trailing_bytes(tmp_path):
    path, blob = _saved(tmp_path)
    path.write_bytes(blob + b"extra")
    _rejects(path, "5 unexpected bytes")


def test_rejects_string_ids_out_of_range(tmp_path):
    path, blob = _saved(tmp_path)
    header, start = _header(blob)
    payload = bytearray(blob[start:])
    info = header["strings"]
    small = json.dumps(["only"]).encode()
    packed = zlib.compress(small)
    # Replace the string table with a one-entry table placed at the end of the payload.
    info.update(offset=len(payload), length=len(packed), raw_length=len(small), crc32=zlib.crc32(small))
    payload += packed
    header["payload_length"] = len(payload)
    head = json.dumps(header).encode()
    path.write_bytes(MAGIC + struct.pack("<II", 4, len(head)) + head + bytes(payload))
    _rejects(path, "string id points outside the string table")


def test_load_does_not_import_the_engine(tmp_path):
    path = tmp_path / "p.gtprof"
    training_profile(1_000).save(path)
    code = (
        "import sys\nfrom gradtrace import profiler\n"
        f"d = profiler.load({str(path)!r})\n"
        "d.table(); d.key_averages(group_by_input_shape=True); d.forward_backward_summary().table()\n"
        "d.events()[0].cpu_children; d.total_average(); d.rows()\n"
        "assert 'gradtrace.autograd' not in sys.modules, 'autograd was imported'\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_format_is_documented():
    doc = (REPO / "docs" / "profile-format.md").read_text()
    for word in ("magic", "schema_version", "delta", "crc32", "start_ns", "total_allocated",
                 "ProfileFormatError"):
        assert word in doc


def test_only_the_collector_imports_the_engine():
    offenders = []
    for path in (REPO / "profiler").glob("*.py"):
        for line in path.read_text().splitlines():
            stripped = line.strip()
            if stripped.startswith(("import gradtrace.autograd", "from gradtrace.autograd", "from gradtrace import autograd")) and path.name != "collector.py":
                offenders.append(f"{path.name}: {stripped}")
    assert offenders == []
