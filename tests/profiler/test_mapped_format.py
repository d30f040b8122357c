"""Profile format version 5 (issue 31): mapped columns, stored analyses, and the loader's
contract on hostile version-5 files (one ProfileFormatError naming the file and the problem)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gradtrace import profiler
from gradtrace.profiler import ProfileFormatError, analysis, mapped
from gradtrace.profiler.synthetic import training_profile

from .fuzzing import _cuda_profile, edited_mapped, join_mapped, mapped_columns, split_mapped

_ARRAYS = ("parent", "depth", "cpu_total_ns", "self_cpu_ns", "cuda_total_ns", "self_cuda_ns", "forward_event",
           "backward_ancestor", "shapes_id", "stack_id", "flops", "self_cpu_memory", "cpu_memory",
           "self_cuda_memory", "cuda_memory", "memory_event", "partial_overlaps")


@pytest.fixture(scope="module")
def profiles():
    return {"training": training_profile(3_000, threads=2), "cuda": _cuda_profile()}


@pytest.mark.parametrize("name", ["training", "cuda"])
@pytest.mark.parametrize("compress", [False, True])
def test_round_trip_keeps_columns_and_analyses(tmp_path, profiles, name, compress):
    data = profiles[name]
    path = tmp_path / "p.gtprof"
    data.save(path, compress=compress)
    back = profiler.load(path)
    assert back.metadata["schema_version"] == 5
    for attr in ("event_columns", "memory_columns", "node_columns", "edge_columns", "gpu_columns"):
        for col, values in getattr(data, attr).items():
            np.testing.assert_array_equal(getattr(back, attr)[col], values, err_msg=f"{attr} {col}")
    for field in _ARRAYS:
        np.testing.assert_array_equal(getattr(back.analysis, field), getattr(data.analysis, field), err_msg=field)
    for grouping in ({"merge_steps": False}, {"merge_steps": True}, {"group_by_input_shape": True},
                     {"group_by_device": True}, {"group_by_device": True, "merge_steps": True}):
        assert back.key_averages(**grouping).to_dicts() == data.key_averages(**grouping).to_dicts()
    assert back.table(sort_by="self_cpu_time_total") == data.table(sort_by="self_cpu_time_total")
    assert back.forward_backward_summary().to_dicts() == data.forward_backward_summary().to_dicts()


def test_columns_are_mapped_and_aligned(tmp_path, profiles):
    path = tmp_path / "p.gtprof"
    profiles["training"].save(path)
    footer, _ = split_mapped(path.read_bytes())
    assert all(c["offset"] % 64 == 0 and c["codec"] == "raw" for c in mapped_columns(footer))
    back = profiler.load(path)
    start = back.event_columns["start_ns"]
    assert not start.flags.owndata and not start.flags.writeable    # a view of the read-only map
    assert back.analysis.parent.ctypes.data % 64 == 0


def test_reopening_recomputes_no_analysis(tmp_path, profiles, monkeypatch):
    path = tmp_path / "p.gtprof"
    profiles["training"].save(path)

    def refuse(*args, **kwargs):
        raise AssertionError("the analysis was recomputed")

    monkeypatch.setattr(analysis, "analyze", refuse)
    monkeypatch.setattr(profiler.data, "analyze", refuse)
    back = profiler.load(path)
    back.table()
    back.key_averages(group_by_input_shape=True).table()
    back.forward_backward_summary().table()
    back.children_of(0)
    assert back.key_averages().events_of(0).tolist()   # rows still know their events


def test_stored_rows_know_their_events(tmp_path, profiles):
    path = tmp_path / "p.gtprof"
    data = profiles["training"]
    data.save(path)
    back, fresh = profiler.load(path).key_averages(), data.key_averages()
    for row in range(len(fresh)):
        assert back.events_of(row).tolist() == fresh.events_of(row).tolist()


@pytest.mark.parametrize("table, grouping", [
    ("shape_merged", {"group_by_input_shape": True, "merge_steps": True}),
    ("shape_per_step", {"group_by_input_shape": True, "merge_steps": False}),
    ("device_merged", {"group_by_device": True, "merge_steps": True})])
def test_a_file_without_an_optional_table_computes_it(tmp_path, profiles, table, grouping):
    data = profiles["training"]
    path = tmp_path / "p.gtprof"
    data.save(path)
    footer, body = split_mapped(path.read_bytes())
    assert table in footer["analysis"]["summaries"]
    del footer["analysis"]["summaries"][table]
    path.write_bytes(join_mapped(footer, body))
    back = profiler.load(path)
    assert back.key_averages(**grouping).to_dicts() == data.key_averages(**grouping).to_dicts()


def test_version_4_still_loads(tmp_path, profiles):
    path = tmp_path / "p.gtprof"
    profiles["cuda"].save(path, version=4)
    back = profiler.load(path)
    assert back.metadata["schema_version"] == 4
    assert back.table() == profiles["cuda"].table()


# --------------------------------------------------------------------------- hostile files



def _column(footer, name, stored=False):
    entries = footer["analysis"]["events"]["columns"] if stored else footer["tables"]["events"]["columns"]
    return next(c for c in entries if c["name"] == name)


def _poke(body, info, row, value):
    """Write ``value`` into row ``row`` of a raw column, in place."""
    dtype = np.dtype(info["dtype"])
    at = info["offset"] + row * dtype.itemsize
    body[at:at + dtype.itemsize] = np.array([value], dtype).tobytes()


def _set(footer, name, key, value, stored=False):
    _column(footer, name, stored)[key] = value


CASES = [
    ("offset beyond the file", lambda f, b: _set(f, "start_ns", "offset", 1 << 40), r"beyond the end"),
    ("length beyond the file", lambda f, b: f["tables"]["events"].update(rows=1 << 30), r"does not hold the rows"),
    ("misaligned", lambda f, b: _set(f, "start_ns", "offset", _column(f, "start_ns")["offset"] + 8),
     r"not at a 64-byte aligned offset"),
    ("dtype lie", lambda f, b: _set(f, "start_ns", "dtype", "<i4"), r"has dtype <i4, not <i8"),
    ("object dtype", lambda f, b: _set(f, "start_ns", "dtype", "|O"), r"has dtype \|O"),
    ("unknown codec", lambda f, b: _set(f, "start_ns", "codec", "lz4"), r"unknown codec"),
    ("missing column", lambda f, b: f["tables"]["events"]["columns"].pop(0), r"name_id' is missing"),
    ("parent out of range", lambda f, b: _poke(b, _column(f, "parent", True), 5, 10**6), r"parent out of range"),
    ("parent after child", lambda f, b: _poke(b, _column(f, "parent", True), 5, 7), r"parent that starts after"),
    ("parent cycle", lambda f, b: _poke(b, _column(f, "parent", True), 5, 5), r"parent out of range"),
    ("depth lie", lambda f, b: _poke(b, _column(f, "depth", True), 9, 40), r"nesting unlike its columns"),
    ("self time above total", lambda f, b: _poke(b, _column(f, "self_cpu_ns", True), 3, 10**15),
     r"self CPU time outside"),
    ("pairing lie", lambda f, b: _poke(b, _column(f, "forward_event", True), 4, 0), r"pairs a backward event|"
                                                                                     r"forward"),
    ("table count", lambda f, b: f["analysis"]["summaries"]["merged"]["rows"][0][1].__setitem__(0, 10**6),
     r"table counts"),
    ("table value", lambda f, b: f["analysis"]["summaries"]["per_step"]["rows"][0][1].__setitem__(2, -5.0),
     r"value out of range"),
    ("table total", lambda f, b: f["analysis"]["summaries"]["merged"].update(self_cpu_ns=1),
     r"totals differ"),
    ("forward-op count", lambda f, b: f["analysis"]["forward_backward"][0].__setitem__(2, 10**9),
     r"forward \+ backward table with invalid counts"),
    ("forward-op value", lambda f, b: f["analysis"]["forward_backward"][0][5].__setitem__(0, float("nan")),
     r"forward \+ backward row with a value out of range"),
    ("stored rows", lambda f, b: f["analysis"]["events"].update(rows=3), r"does not have \d+ rows"),
    ("counters", lambda f, b: f["analysis"]["counters"].update(cpu_clock_skew=-1), r"invalid counters"),
]


@pytest.mark.parametrize("what, edit, problem", CASES, ids=[c[0] for c in CASES])
def test_hostile_version_5_files_are_one_line_errors(tmp_path, profiles, what, edit, problem):
    path = edited_mapped(tmp_path, profiles["training"], edit)
    with pytest.raises(ProfileFormatError) as info:
        profiler.load(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    assert re.search(problem, message), message


def test_deferred_checks_fail_on_first_use_and_the_cli_says_one_line(tmp_path, profiles):
    path = edited_mapped(tmp_path, profiles["training"], lambda f, b: _poke(b, _column(f, "depth", True), 9, 40))
    data = profiler.load(path, defer_checks=True)
    data.table()                      # the stored table needs no per-event array
    data.forward_backward_summary().table()
    with pytest.raises(ProfileFormatError, match="nesting unlike its columns"):
        data.key_averages(group_by_stack_n=1)
    out = subprocess.run([sys.executable, "-m", "gradtrace.cli", "export", str(path), "--chrome",
                          str(tmp_path / "t.json")],
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "nesting unlike its columns" in out.stderr, out.stderr


@pytest.mark.parametrize("cut", [1, 31, 32, 100, 4096])
def test_truncated_version_5_files_are_refused(tmp_path, profiles, cut):
    path = tmp_path / "p.gtprof"
    profiles["training"].save(path)
    blob = path.read_bytes()
    path.write_bytes(blob[:-cut])
    with pytest.raises(ProfileFormatError, match="truncated profile"):
        profiler.load(path)


def test_bytes_after_the_trailer_are_refused(tmp_path, profiles):
    path = tmp_path / "p.gtprof"
    profiles["training"].save(path)
    path.write_bytes(path.read_bytes() + mapped.END_MAGIC + b"x" * 40)
    with pytest.raises(ProfileFormatError, match="unexpected bytes after the footer"):
        profiler.load(path)


def test_a_footer_checksum_mismatch_is_refused(tmp_path, profiles):
    path = tmp_path / "p.gtprof"
    profiles["training"].save(path)
    blob = bytearray(path.read_bytes())
    footer, body = split_mapped(bytes(blob))
    at = len(body) + 10
    blob[at] = ord(" ") if blob[at] != ord(" ") else ord("\t")
    path.write_bytes(bytes(blob))
    with pytest.raises(ProfileFormatError, match="corrupted profile: its trailer or footer fails its checks"):
        profiler.load(path)


def test_format_version_5_is_documented():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "profile-format.md").read_text()
    for word in ("version 5", "GTPEND5", "64-byte", "memory-mapped", "stored analysis", "defer_checks",
                 "journal"):
        assert word in doc, word


def test_any_loadable_profile_reopens_with_its_stored_analysis(tmp_path):
    """The stored analysis's invariants hold for every profile the columns' check lets
    through, e.g. two ranges with one start listed inner first (the parent at a later row)."""
    from gradtrace.profiler.synthetic import from_events

    data = from_events([{"name": "inner", "start": 0, "end": 5}, {"name": "outer", "start": 0, "end": 10},
                        {"name": "x", "start": 2, "end": 3}])
    assert data.analysis.parent.tolist()[0] == 1
    path = tmp_path / "p.gtprof"
    data.save(path)
    back = profiler.load(path)
    assert back.analysis.parent.tolist() == data.analysis.parent.tolist()
    assert back.table() == data.table()


def _torch_trace_profile(tmp_path):
    from gradtrace.profiler.synthetic_trace import write_torch_trace

    path = tmp_path / "trace.json"
    if not path.exists():
        write_torch_trace(path, 4_000)
    return profiler.load(path)


@pytest.mark.parametrize("make", [lambda _: training_profile(3_000, threads=2), lambda _: _cuda_profile(),
                                  _torch_trace_profile], ids=["training", "cuda", "torch trace"])
def test_saving_with_release_memory_writes_the_same_file_and_keeps_the_profile(tmp_path, make):
    """``release_memory=True`` (what an import saves with) writes the same bytes; the profile
    then holds views of that file instead of its own arrays, and answers as before."""
    kept, released = make(tmp_path), make(tmp_path)
    plain, lean = tmp_path / "plain.gtprof", tmp_path / "lean.gtprof"
    kept.save(plain)
    released.save(lean, release_memory=True)
    assert lean.read_bytes() == plain.read_bytes()
    for attr in ("event_columns", "memory_columns", "gpu_columns"):
        for col, values in getattr(released, attr).items():
            assert not values.flags.owndata and not values.flags.writeable, (attr, col)
            np.testing.assert_array_equal(values, getattr(kept, attr)[col])
    for field in _ARRAYS:
        got = getattr(released.analysis, field)
        np.testing.assert_array_equal(got, getattr(kept.analysis, field), err_msg=field)
    # Every per-event array the file stores is now a view of it (the rest: all zeros, shared).
    assert not released.analysis.parent.flags.owndata and not released.analysis.self_cpu_ns.flags.owndata
    assert released.table(sort_by="self_cpu_time_total") == kept.table(sort_by="self_cpu_time_total")
    assert released.key_averages(group_by_stack_n=2).to_dicts() == kept.key_averages(group_by_stack_n=2).to_dicts()
    assert released.forward_backward_summary().to_dicts() == kept.forward_backward_summary().to_dicts()
    if kept.has_device_time:
        assert released.gpu_summary() == kept.gpu_summary()
    released.release_pages()
    # Saved again (to the same path: the views map the old file, which the rename keeps).
    released.save(lean)
    assert lean.read_bytes() == plain.read_bytes()
    assert released.table() == kept.table()


@pytest.mark.parametrize("options", [{"compress": True}, {"version": 4}])
def test_release_memory_leaves_a_file_that_is_not_mapped_alone(tmp_path, options):
    """A compressed or version-4 file is not mapped: the profile keeps its own arrays."""
    data = training_profile(500)
    start = data.event_columns["start_ns"]
    data.save(tmp_path / "p.gtprof", release_memory=True, **options)
    assert data.event_columns["start_ns"] is start and start.flags.writeable
    assert profiler.load(tmp_path / "p.gtprof").table() == data.table()
