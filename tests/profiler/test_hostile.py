"""Issue 15's hostile files, one by one, and property tests of the loader and of nesting.

Each case is a file ``profiler.load`` must refuse with one line (``ProfileFormatError``), or
a profile with unencodable text that must save and load back."""
from __future__ import annotations

import json
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from . import needs_dashboard
from gradtrace import profiler
from gradtrace.profiler import ProfileFormatError
from gradtrace.profiler.analysis import analyze
from gradtrace.profiler.fileformat import MAGIC
from gradtrace.profiler.nesting import nest_intervals
from gradtrace.profiler.records import valid_text
from gradtrace.profiler.synthetic import from_events

from .fuzzing import exercise

_PREAMBLE = struct.Struct("<8sII")


def _parts(blob: bytes):
    _, version, n = _PREAMBLE.unpack_from(blob)
    return version, json.loads(blob[16:16 + n]), blob[16 + n:]


def _file(tmp_path, header: dict, payload: bytes, name="bad.gtprof", raw_header: bytes | None = None):
    text = raw_header if raw_header is not None else json.dumps(header).encode("ascii")
    path = tmp_path / name
    path.write_bytes(_PREAMBLE.pack(MAGIC, 1, len(text)) + text + payload)
    return path


def _good(tmp_path):
    data = from_events([{"name": "mul", "start": 0, "end": 10, "shapes": [[2, 3]], "stack": ["a.py(1): f"]},
                        {"name": "add", "start": 2, "end": 4}],
                       memory=[{"time": 3, "bytes": 64}], metadata={"devices": ["cpu"], "pid": 7})
    path = tmp_path / "good.gtprof"
    data.save(path, version=4)       # the cases edit the version-4 layout
    return _parts(path.read_bytes())


def _with_string(tmp_path, old: str, text: str):
    """The good file with string ``old`` replaced by ``text`` (blob re-checksummed)."""
    _, header, payload = _good(tmp_path)
    info = header["strings"]
    strings = json.loads(zlib.decompress(payload[info["offset"]:info["offset"] + info["length"]]))
    strings[strings.index(old)] = text
    raw = json.dumps(strings).encode()
    packed = zlib.compress(raw)
    info.update(offset=len(payload), length=len(packed), raw_length=len(raw), crc32=zlib.crc32(raw))
    header["payload_length"] = len(payload) + len(packed)
    return header, payload + packed


def _with_column(tmp_path, table: str, name: str, values):
    _, header, payload = _good(tmp_path)
    info = next(c for c in header["tables"][table]["columns"] if c["name"] == name)
    info["encoding"] = "raw" if info["encoding"] != "delta" else "delta"
    raw = np.asarray(values, dtype=np.dtype(info["dtype"])).tobytes()
    packed = zlib.compress(raw)
    info.update(offset=len(payload), length=len(packed), raw_length=len(raw), crc32=zlib.crc32(raw))
    header["payload_length"] = len(payload) + len(packed)
    return header, payload + packed


def _rejected(path, pattern: str):
    with pytest.raises(ProfileFormatError) as info:
        profiler.load(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(path) + ": ")
    assert pattern in message, message


# --------------------------------------------------------------------------- header and metadata


@pytest.mark.parametrize("edit, pattern", [
    (lambda h: h["events_columns_0"].update(encoding=None), "unknown encoding"),
    (lambda h: h["events_columns_0"].update(encoding=5), "unknown encoding"),
    (lambda h: h.update(payload_length=float("inf")), "invalid 'payload_length'"),
    (lambda h: h.update(metadata=5), "metadata is int"),
    (lambda h: h["metadata"].update(devices=[None]), "'devices' must be a list of strings"),
    (lambda h: h["metadata"].update(devices=5), "'devices' must be a list of strings"),
    (lambda h: h["metadata"].update(steps=5), "'steps' must be"),
    (lambda h: h["metadata"].update(pid=True), "'pid' must be an integer"),
    (lambda h: h["events_columns_0"].update(raw_length=-1), "invalid 'raw_length'"),
    (lambda h: h["events_columns_0"].update(offset="0"), "invalid 'offset'"),
    (lambda h: h["tables"].update(events=[]), "events table is malformed"),
    (lambda h: h["events_columns_0"].update(dtype=["<i8"]), "has dtype"),
])
def test_wrong_header_values_are_one_line_errors(tmp_path, edit, pattern):
    version, header, payload = _good(tmp_path)

    class View(dict):   # lets the table above name the first event column
        pass

    header = View(header)
    header["events_columns_0"] = header["tables"]["events"]["columns"][0]
    edit(header)
    del header["events_columns_0"]
    _rejected(_file(tmp_path, dict(header), payload), pattern)


def test_header_nested_without_end(tmp_path):
    _, header, payload = _good(tmp_path)
    text = json.dumps(header).encode().replace(b'"metadata": {', b'"metadata": {"x": ' + b"[" * 100_000
                                              + b"]" * 100_000 + b", ", 1)
    _rejected(_file(tmp_path, header, payload, raw_header=text), "unreadable header")


def test_metadata_nested_deeper_than_sixteen(tmp_path):
    _, header, payload = _good(tmp_path)
    deep: list = []
    for _ in range(40):
        deep = [deep]
    header["metadata"]["x"] = deep
    _rejected(_file(tmp_path, header, payload), "nested deeper")


# --------------------------------------------------------------------------- contents


@pytest.mark.parametrize("shapes", ["[[8,", "5", "[[1e400]]", "[[-1]]", "[[1.5]]", "[[true]]", "[" * 5000])
def test_malformed_input_shapes_are_refused(tmp_path, shapes):
    _rejected(_file(tmp_path, *_with_string(tmp_path, "[[2, 3]]", shapes)), "input shapes")


def test_shapes_are_parsed_once_into_integer_lists(tmp_path):
    _, header, payload = _good(tmp_path)
    data = profiler.load(_file(tmp_path, header, payload, name="ok.gtprof"))
    assert data.input_shapes_of(int(data.event_columns["shapes_id"][0])) == [[2, 3]]
    assert data.key_averages(group_by_input_shape=True)[0].input_shapes == [[2, 3]]


@pytest.mark.parametrize("table, column, values, pattern", [
    ("events", "start_ns", [0, 2**62], "span"),               # 2**62 ns apart
    ("events", "scope", [3, 0], "unknown event scope 3"),
    ("events", "end_ns", [10, 1], "ends before it starts"),
    ("events", "device_start_ns", [5, -1], "device interval"),
    ("memory", "time_ns", [-(2**63)], "span"),
    ("memory", "bytes", [2**62], "out of range"),
    ("events", "name_id", [0, 99], "string id"),
])
def test_contents_no_later_code_can_handle_are_refused(tmp_path, table, column, values, pattern):
    _rejected(_file(tmp_path, *_with_column(tmp_path, table, column, values)), pattern)


def test_decompression_bomb_is_refused_without_inflating(tmp_path):
    """A column whose blob inflates to 1 GiB but declares its real size: stopped at the size."""
    import tracemalloc

    _, header, payload = _good(tmp_path)
    comp = zlib.compressobj(9)
    bomb = b"".join(comp.compress(b"\0" * (1 << 20)) for _ in range(1024)) + comp.flush()
    info = header["tables"]["events"]["columns"][0]
    info.update(offset=len(payload), length=len(bomb))
    header["payload_length"] = len(payload) + len(bomb)
    path = _file(tmp_path, header, payload + bomb)
    tracemalloc.start()
    try:
        _rejected(path, "fails its checksum")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20
    # Declaring the full size instead is refused from the sizes alone.
    info.update(raw_length=1 << 30)
    _rejected(_file(tmp_path, header, payload + bomb, name="bomb2.gtprof"), "decompression bomb")


def test_cli_shows_one_line_and_exit_2_for_a_bad_file(tmp_path):
    path = _file(tmp_path, *_with_string(tmp_path, "[[2, 3]]", "[[8,"))
    for argv in (["table", str(path)], ["table", str(path), "--json"],
                 ["export", str(path), "--chrome", str(tmp_path / "t.json")],
                 ["diff", str(path), str(path)]):
        proc = subprocess.run([sys.executable, "-m", "gradtrace.cli", *argv], capture_output=True, text=True)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
        assert "input shapes" in proc.stderr


def test_dashboard_upload_of_a_bad_file_is_a_message(tmp_path):
    needs_dashboard()
    import base64

    from gradtrace.viewer.loading import UploadError, decode_upload

    path = _file(tmp_path, *_with_column(tmp_path, "events", "scope", [3, 0]))
    contents = "data:application/octet-stream;base64," + base64.b64encode(path.read_bytes()).decode()
    with pytest.raises(UploadError, match="unknown event scope 3"):
        decode_upload(contents, "x.gtprof", 64_000_000)


# --------------------------------------------------------------------------- unencodable text


def test_lone_surrogates_are_saved_as_replacement_characters(tmp_path):
    name = "op in /tmp/dir\udcff\udcfe"
    data = from_events([{"name": name, "start": 0, "end": 5, "stack": ["/x\udcff/t.py(3): f"]}],
                       metadata={"trace_name": "run \ud800"})
    data.save(tmp_path / "s.gtprof")
    loaded = profiler.load(tmp_path / "s.gtprof")
    assert loaded.name_of(0) == valid_text(name) == "op in /tmp/dir\ufffd\ufffd"
    assert loaded.stack_of(int(loaded.event_columns["stack_id"][0])) == ["/x\ufffd/t.py(3): f"]
    assert loaded.metadata["trace_name"] == "run \ufffd"
    loaded.export_chrome_trace(tmp_path / "t.json")
    trace = json.loads((tmp_path / "t.json").read_bytes().decode("utf-8"))
    assert [e["name"] for e in trace["traceEvents"] if e["ph"] == "X"] == ["op in /tmp/dir\ufffd\ufffd"]


def test_json_string_agrees_with_the_export():
    from gradtrace.profiler.chrome_trace import json_string

    assert json.loads(json_string("a\ud800b")) == "a\ufffdb"


# --------------------------------------------------------------------------- properties


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300))
def test_any_bytes_load_or_raise_one_error(tmp_path, blob):
    path = tmp_path / "any.gtprof"
    path.write_bytes(blob)
    exercise(path, cli=False, viewer=False)
    path.write_bytes(MAGIC + blob)
    exercise(path, cli=False, viewer=False)


_saved = {}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_edits_of_a_real_file_load_or_raise_one_error(tmp_path, data):
    if "blob" not in _saved:
        from gradtrace.profiler.synthetic import training_profile

        training_profile(60).save(tmp_path / "seed.gtprof")
        _saved["blob"] = (tmp_path / "seed.gtprof").read_bytes()
    blob = bytearray(_saved["blob"])
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(blob) - 1))
        blob[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(len(blob) // 2, len(blob)))
    path = tmp_path / "edit.gtprof"
    path.write_bytes(bytes(blob[:cut]))
    exercise(path, cli=False, viewer=False)


_times = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_times, _times, st.integers(1, 3)), max_size=40))
def test_nesting_of_any_intervals(raw):
    """Any int64 intervals (even 2**63 apart): children lie inside their parents, on their thread."""
    start = np.array([min(a, b) for a, b, _ in raw], dtype=np.int64)
    end = np.array([max(a, b) for a, b, _ in raw], dtype=np.int64)
    thread = np.array([t for _, _, t in raw], dtype=np.int64)
    nesting = nest_intervals(start, end, thread)
    for i, p in enumerate(nesting.parent.tolist()):
        if p >= 0:
            assert thread[p] == thread[i] and start[p] <= start[i] and end[i] <= end[p]
            assert nesting.depth[i] == nesting.depth[p] + 1
        else:
            assert nesting.depth[i] == 1


@st.composite
def _intervals(draw):
    """Random intervals within a profile's time range, on up to three threads, in start order."""
    n = draw(st.integers(0, 30))
    rows = []
    for _ in range(n):
        s = draw(st.integers(0, 10_000))
        rows.append((s, s + draw(st.integers(0, 3_000)), draw(st.integers(1, 3))))
    rows.sort(key=lambda r: (r[0], -r[1]))
    return rows


@settings(max_examples=300, deadline=None)
@given(_intervals())
def test_self_times_add_up_to_the_top_level_totals(rows):
    data = from_events([{"name": f"op{i % 4}", "start": s, "end": e, "thread": t}
                        for i, (s, e, t) in enumerate(rows)])
    a = analyze(data.event_columns, data.memory_columns, data.strings)
    assert (a.self_cpu_ns >= 0).all()
    top = int(a.cpu_total_ns[a.parent < 0].sum())
    if a.cpu_clock_skew == 0:
        assert int(a.self_cpu_ns.sum()) == top
    else:   # clamping at 0 only ever adds
        assert int(a.self_cpu_ns.sum()) > top
    for i, p in enumerate(a.parent.tolist()):
        if p >= 0:
            s, e, t = rows[i]
            ps, pe, pt = rows[p]
            assert t == pt and ps <= s and e <= pe


def test_loading_does_not_import_the_engine(tmp_path):
    _, header, payload = _good(tmp_path)
    path = _file(tmp_path, header, payload, name="ok.gtprof")
    code = ("import sys; from gradtrace import profiler; profiler.load(sys.argv[1]).table(); "
            "assert 'gradtrace.autograd' not in sys.modules")
    subprocess.run([sys.executable, "-c", code, str(path)], check=True)


@pytest.mark.parametrize("column", ["shapes", "dtypes"])
def test_deeply_nested_input_strings_export_without_recursion(tmp_path, column):
    """Issue 31: ``[`` * 10,000 as an input description made the Chrome export (which
    re-encodes shapes and dtypes) raise RecursionError. Too deep to parse is text."""
    from gradtrace.cli.main import main

    deep = "[" * 10_000 + "]" * 10_000
    data = from_events([{"name": "mul", "start": 0, "end": 10, "shapes": [[2]], "dtypes": ["float32"]}])
    sid = int(data.event_columns[f"{column}_id"][0])
    data.strings[sid] = deep
    data.export_chrome_trace(tmp_path / "t.json")
    trace = json.loads((tmp_path / "t.json").read_text())
    key = "Input Dims" if column == "shapes" else "Input type"
    assert [e["args"][key] for e in trace["traceEvents"] if e.get("name") == "mul"] == [deep]
    path = tmp_path / "p.gtprof"
    data.save(path)
    if column == "dtypes":     # dtypes are free text: the file loads, and exports the same way
        assert main(["export", str(path), "--chrome", str(tmp_path / "c.json")]) == 0
        json.loads((tmp_path / "c.json").read_text())
    else:                      # shapes are checked: the loader refuses them in one line
        with pytest.raises(ProfileFormatError, match="input shapes"):
            profiler.load(path)
