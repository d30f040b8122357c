"""The torch trace reader: the same columns as the reference reader (the json.loads one it
replaced) on real and generated traces, odd values and mutated files; the parallel read (plain
ranges, gzip pieces) the same as one pass; errors and fallbacks; peak memory per event flat in
the trace's size; the builder's nesting in pieces the same as at once."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradtrace.profiler import ProfileFormatError
from gradtrace.profiler import torch_trace_reader as reader
from gradtrace.profiler.nesting import nest_in_pieces, nest_intervals
from gradtrace.profiler.synthetic_trace import write_torch_trace

from . import kineto_samples as ks
from . import reference_trace_reader as reference

DATA = Path(__file__).parent / "data"


def _same(new: reader.RawTrace, old) -> None:
    assert new.strings == old.strings
    assert new.threads == old.threads and new.thread_names == old.thread_names
    assert new.header == old.header and new.skipped == old.skipped and new.n_events == old.n_events
    for table in ("cpu", "gpu", "memory"):
        a, b = getattr(new, table), getattr(old, table)
        assert list(a) == list(b), table
        for name in a:
            assert np.array_equal(a[name], b[name], equal_nan=a[name].dtype.kind == "f"), (table, name)


def _plain(tmp_path, gz_path: Path) -> Path:
    out = tmp_path / gz_path.name.removesuffix(".gz")
    out.write_bytes(gzip.decompress(gz_path.read_bytes()))
    return out


@pytest.mark.parametrize("path", ks.gpu_traces(), ids=lambda p: p.name)
def test_samples_read_as_the_reference_reads_them(tmp_path, path):
    _same(reader.read_trace(path), reference.read_trace(path))
    # The same file plain, cut into parts read by two processes.
    plain = _plain(tmp_path, path)
    _same(_parallel(plain, 3), reference.read_trace(path))


@pytest.mark.parametrize("name", ["torch_mlp_cpu.json.gz", "torch_mlp_cpu_plain.json"])
def test_fixtures_read_as_the_reference_reads_them(name):
    _same(reader.read_trace(DATA / name), reference.read_trace(DATA / name))


def _parallel(path, workers):
    """read_trace in ``workers`` parts whatever the file's size."""
    old = reader._PART_BYTES
    reader._PART_BYTES = 1
    try:
        return reader.read_trace(path, workers=workers)
    finally:
        reader._PART_BYTES = old


@pytest.mark.parametrize("gz", [False, True])
def test_generated_trace_in_parts_as_in_one_pass(tmp_path, gz, monkeypatch):
    """Plain: byte ranges read by the workers; gzip: pieces of ~100 events handed out in turn
    (small chunks, so that the workers get many each)."""
    monkeypatch.setattr(reader, "_CHUNK", 1 << 15)
    path = tmp_path / ("g.json.gz" if gz else "g.json")
    write_torch_trace(path, 20_000, gz=gz)
    old = reference.read_trace(path)
    _same(reader.read_trace(path, workers=1), old)
    _same(_parallel(path, 4), old)


def _odd_events():
    """Events whose values the typed schema refuses or that sit at its edges."""
    op = {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 2, "ts": 10, "dur": 5,
          "args": {"External id": 3, "Input Dims": [[2, 3]], "Input type": ["float"]}}
    kernel = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 11.5, "dur": 2,
              "args": {"device": 0, "stream": 7, "correlation": 4, "grid": [1, 2, 3], "block": [4, 5, 6],
                       "blocks per SM": 1.5, "registers per thread": 32}}
    events = [op, kernel]
    for change in ({"name": "\u00e9t\u00e9 },\n{ \\\"x"}, {"ts": "soon"}, {"dur": None}, {"pid": "Spans"},
                   {"tid": [1]}, {"cat": "CPU_OP"}, {"cat": None}, {"ts": 2**70}, {"ts": 1e300},
                   {"args": []}, {"args": {"External id": "0x10", "Sequence number": 2**64}},
                   {"args": {"Input Dims": [[1.5]], "Input type": [1, "a"]}},
                   {"args": {"Input Dims": "x", "external id": 9}}, {"name": None}, {"ph": 5},
                   # the schema's int64 bounds, and the ids just beyond them
                   {"args": {"Sequence number": 2**63 - 1, "Fwd thread id": -(2**63 - 1), "Python id": 0}},
                   {"args": {"Sequence number": -(2**63)}}, {"args": {"Fwd thread id": 2**63}},
                   {"args": {"Python parent id": 2**63, "correlation": -(2**63)}}):
        events.append(dict(op, **change))
    for change in ({"args": dict(kernel["args"], grid=[1.0, 2, 3], stream="7")},
                   {"args": dict(kernel["args"], device=None, correlation=2**63)},
                   {"args": dict(kernel["args"], **{"est. achieved occupancy %": 1e13})}, {"pid": 3, "args": None},
                   # the launch counts' and estimates' bounds, and values just outside them
                   {"args": dict(kernel["args"], grid=[1, -1, 2], block=[2**48, 1, 2**48 + 1])},
                   {"args": dict(kernel["args"], **{"registers per thread": -5, "shared memory": 0, "bytes": 2**48})},
                   {"args": dict(kernel["args"], **{"blocks per SM": -0.5, "warps per SM": 1e12,
                                                    "memory bandwidth (GB/s)": 0})},
                   {"args": dict(kernel["args"], **{"warps per SM": 999999999999.9, "device": -2})}):
        events.append(dict(kernel, **change))
    mem = {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 2, "ts": 12,
           "args": {"Bytes": 64, "Total Allocated": 64, "Device Type": 1, "Device Id": 2, "Addr": 8}}
    events += [mem, dict(mem, args={"Bytes": "x"}), dict(mem, args=None), dict(mem, ph="I", ts=None),
               dict(mem, args={"Device Type": 1, "Device Id": -3, "Addr": 2**63}),
               {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}},
               {"ph": "s", "cat": "ac2g", "id": 1}, 5, None, [1], {"ph": "X"}]
    return events


@pytest.mark.parametrize("layout", ["compact", "kineto"])
def test_odd_values_read_as_the_reference_reads_them(tmp_path, layout):
    events = _odd_events()
    path = tmp_path / "odd.json"
    if layout == "compact":
        path.write_text(json.dumps({"traceEvents": events, "traceName": "odd"}))
    else:   # one event per line, repeated so that the file is cut into parts
        body = ",\n".join(json.dumps(e) for e in events * 50)
        path.write_text('{"schemaVersion": 1, "traceEvents": [\n' + body + '\n], "traceName": "odd"}')
    old = reference.read_trace(path)
    _same(reader.read_trace(path, workers=1), old)
    _same(_parallel(path, 3), old)


def test_a_cut_inside_an_event_falls_back_to_one_pass(tmp_path):
    """Lines that look like cuts inside an event (a list of objects, one per line): the part
    does not parse, and the file is read again in one process."""
    event = {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1,
             "args": {"Input Dims": [[1]]}}
    inner = '"args": {"list": [{"a": 1},\n  {"b": 2},\n  {"c": 3}]}'
    body = ",\n".join(json.dumps(dict(event, ts=k)).replace('"args": {"Input Dims": [[1]]}', inner)
                      for k in range(200))
    path = tmp_path / "nested.json"
    path.write_text('{"traceEvents": [\n' + body + '\n]}')
    _same(_parallel(path, 4), reference.read_trace(path))


@pytest.mark.parametrize("content, pattern", [
    (b'{"traceEvents": [\n{"ph": "X"},\n{"ph": "X"},\n{"ph": "X", "ts": 1, "dur"', "truncated"),
    (b'{"traceEvents": [\n{"ph": "X"},\n{"ph": "X", "name": "\xff"},\n{"ph": "X"}\n]}', "not UTF-8"),
    (b'{"traceEvents": [\n{"ph": "X"},\n{"ph": "X"},\n{"ph": "X"}\n]} tail', "text after the end"),
    (b'{"traceEvents": [\n{"ph": "X"},\n{"ph": "X"},\n{"ph": "X", "args": ' + b"[" * 100_000 + b"]" * 100_000
     + b"}\n]}", "nested too deeply"),
    (b'{"traceEvents": [\n{"ph": "X"},\n{"ph": "X"},\n{"ph": "X", "ts": ' + b"1" * 5000 + b"}\n]}", "bad value"),
], ids=["truncated", "utf8", "tail", "deep", "digits"])
def test_errors_are_the_one_pass_errors(tmp_path, content, pattern):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    for read in (lambda: reader.read_trace(path, workers=1), lambda: _parallel(path, 3)):
        with pytest.raises(ProfileFormatError, match=pattern) as info:
            read()
        assert str(info.value).startswith(str(path) + ": ") and "\n" not in str(info.value)


def test_truncated_gzip_in_one_pass_and_in_pieces(tmp_path):
    path = tmp_path / "g.json.gz"
    write_torch_trace(path, 30_000, gz=True)
    blob = path.read_bytes()
    path.write_bytes(blob[:len(blob) * 2 // 3])
    for read in (lambda: reader.read_trace(path, workers=1), lambda: _parallel(path, 3)):
        with pytest.raises(ProfileFormatError, match="truncated"):
            read()


# --------------------------------------------------------------------------- memory

_PEAK = r"""
import resource, sys
from gradtrace import profiler
from gradtrace.profiler.synthetic_trace import write_torch_trace
path, n = sys.argv[1], int(sys.argv[2])
n = write_torch_trace(path, n)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
data = profiler.load(path)
data.save(path + ".gtprof", release_memory=True)     # all that `gradtrace import` does
data.table(row_limit=5)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(n, before * 1024, after * 1024)
"""


def _peak(path, n) -> tuple[int, int]:
    """(events, peak RSS growth in bytes) of importing a generated trace (reading it, saving
    it with its analyses, printing a table) in a fresh process (one part: the parallel
    workers' memory would not be counted)."""
    env = dict(os.environ, GRADTRACE_TRACE_WORKERS="1")
    out = subprocess.run([sys.executable, "-c", _PEAK, str(path), str(n)], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    events, before, after = map(int, out.stdout.split())
    return events, after - before


def test_peak_memory_per_event_does_not_grow_with_the_trace(tmp_path):
    """Importing 4x the events costs at most ~4x the memory: what grows with the trace is its
    columns, never its text or a list of its events. The small run's fixed costs (imports,
    chunk buffers, caches) make its per-event figure the larger one, so the check is that
    the large run's is not above it, with a 15% margin for the allocator."""
    small_n, small = _peak(tmp_path / "small.json", 60_000)
    large_n, large = _peak(tmp_path / "large.json", 240_000)
    per_small, per_large = small / small_n, large / large_n
    assert per_large <= per_small * 1.15, (per_small, per_large)


# --------------------------------------------------------------------------- the builder's nesting

@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 400), st.integers(0, 60), st.integers(1, 3)), max_size=80),
       st.integers(1, 12))
def test_nesting_in_pieces_is_nesting_at_once(raw, piece):
    """Parents, depths, order and partial overlaps (in order) of any intervals are those of
    one call; the index arrays are int32."""
    start = np.array([s for s, _, _ in raw], dtype=np.int64)
    end = start + np.array([d for _, d, _ in raw], dtype=np.int64)
    thread = np.array([t for _, _, t in raw], dtype=np.int32)
    whole = nest_intervals(start, end, thread)
    pieces = nest_in_pieces(start, end, thread, piece=piece)
    for name in ("parent", "depth", "order"):
        got = getattr(pieces, name)
        assert got.dtype == np.int32 and np.array_equal(got, getattr(whole, name)), name
    assert pieces.partial_overlaps.tolist() == whole.partial_overlaps.tolist()


# --------------------------------------------------------------------------- mutated traces


def _outcome(read, path):
    try:
        return read(path)
    except ProfileFormatError as exc:
        message = str(exc)
        assert "\n" not in message and message.startswith(str(path) + ": "), message
        return "rejected"


def test_mutated_traces_read_as_the_reference_reads_them(tmp_path):
    """Byte flips, cuts and splices of a Kineto-layout trace: one pass, the parallel read and
    the reference reader load the same columns or all reject the file."""
    import random

    seed = tmp_path / "seed.json"
    write_torch_trace(seed, 1_500)
    blob = seed.read_bytes()
    rng = random.Random(31)
    for i in range(45):
        b = bytearray(blob)
        kind = i % 3
        if kind == 0:
            for _ in range(rng.choice([1, 2, 8])):
                b[rng.randrange(len(b))] = rng.choice(b'{}[],:"\\0123456789.e-ntf \n\xff')
        elif kind == 1:
            del b[rng.randrange(len(b)):]
        else:
            at, frm = rng.randrange(len(b)), rng.randrange(len(b))
            b[at:at] = blob[frm:frm + rng.randrange(200)]
        path = tmp_path / f"m{i}.json"
        path.write_bytes(bytes(b))
        try:
            expected = reference.read_trace(path)
        except reference.ProfileFormatError:
            expected = "rejected"
        except ValueError:          # the reference let json's digit limit through: not ours
            expected = "rejected"
        for read in (lambda p: reader.read_trace(p, workers=1), lambda p: _parallel(p, 3)):
            got = _outcome(read, path)
            if expected == "rejected" or got == "rejected":
                assert got == expected, (i, kind)
            else:
                _same(got, expected)
        path.unlink()


@pytest.mark.parametrize("broken", ["tempfile", "processes"])
def test_no_temporary_files_or_processes_reads_in_one_process(tmp_path, monkeypatch, broken):
    path = tmp_path / "g.json"
    write_torch_trace(path, 3_000)

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(*((reader.tempfile, "mkdtemp", fail) if broken == "tempfile" else (reader, "_context", fail)))
    _same(_parallel(path, 3), reference.read_trace(path))
