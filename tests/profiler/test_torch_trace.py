"""The torch.profiler (Kineto) trace importer: real traces, format variants, repairs, bad input."""
import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gradtrace import profiler
from gradtrace.profiler import ProfileFormatError, Scope
from gradtrace.profiler.torch_trace import (OVERRUN_TOLERANCE_NS, forward_backward_pairing,
                                            import_warnings, is_torch_trace)
from gradtrace.profiler import load as load_torch_trace

from . import kineto_samples as ks

DATA = Path(__file__).parent / "data"
FIXTURE = DATA / "torch_mlp_cpu.json.gz"          # record_shapes, with_stack, with_modules, memory
PLAIN = DATA / "torch_mlp_cpu_plain.json"         # no options


def _raw(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def _names(data, scope=None):
    cols = data.event_columns
    pick = np.arange(data.n_events) if scope is None else np.flatnonzero(cols["scope"] == scope)
    return [data.name_of(i) for i in pick]


def _flow_pairs(trace):
    """(forward (tid, ts_ns), backward (tid, ts_ns)) from the trace's fwdbwd flows."""
    starts, ends = {}, {}
    for e in trace["traceEvents"]:
        if e.get("cat") == "fwdbwd":
            (starts if e["ph"] == "s" else ends)[e["id"]] = round(e["ts"] * 1000)
    return {(starts[k], ends[k]) for k in starts if k in ends}


def _write(tmp_path, events, name="t.json", header=None, gz=False):
    doc = dict(header or {}, traceEvents=events)
    path = tmp_path / name
    text = json.dumps(doc)
    if gz:
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)
    return path


def _op(name, ts, dur, tid=1, cat="cpu_op", **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 10, "tid": tid, "ts": ts, "dur": dur, "args": args}


# --------------------------------------------------------------------------- real traces


def test_fixture_maps_ops_scopes_modules_shapes_stacks_memory():
    data = profiler.load(FIXTURE)
    meta = data.metadata
    assert meta["source"] == "torch_trace"
    assert meta["record_shapes"] and meta["with_stack"] and meta["with_modules"] and meta["profile_memory"]
    assert [s[0] for s in data.step_ranges()] == ["ProfilerStep#1", "ProfilerStep#2"]
    user = set(_names(data, Scope.USER_SCOPE))
    assert {"forward", "backward", "Optimizer.step#SGD.step", "nn.Module: Linear_0", "nn.Module: Linear_1",
            "nn.Module: ReLU_0"} <= user                     # module instances kept as named
    backward = set(_names(data, Scope.BACKWARD_FUNCTION))
    assert {"MseLossBackward0", "AddmmBackward0", "TBackward0", "ReluBackward0"} <= backward
    assert "autograd::engine::evaluate_function: AddmmBackward0" in backward
    assert "aten::addmm" in _names(data, Scope.FUNCTION)
    # python_function frames are stacks, not events.
    assert not any(n.startswith("torch/") for n in _names(data))
    addmm = next(e for e in data.events() if e.name == "aten::addmm")
    assert addmm.input_shapes == [[32], [8, 16], [16, 32], [], []]
    assert addmm.stack[0].startswith("record_torch_traces.py(") and addmm.stack[0].endswith(": train")
    assert len(_raw(FIXTURE)["traceEvents"]) == meta["torch_trace"]["events_in_file"]
    mem = data.memory_columns
    assert data.n_memory_records == 55 and {data.strings[int(d)] for d in mem["device_id"]} == {"cpu"}
    assert np.all(np.diff(mem["time_ns"]) >= 0)
    assert import_warnings(data) == []
    # ts are relative to baseTimeNanoseconds: the wall clock of the first event is their sum.
    assert meta["wall_clock_base_ns"] == _raw(FIXTURE)["baseTimeNanoseconds"] + meta["start_time_ns"]


def test_node_sequence_number_kept_once_and_pairing_follows_pytorch():
    data = profiler.load(FIXTURE)
    cols = data.event_columns
    seq_named = {data.name_of(i) for i in np.flatnonzero((cols["sequence_nr"] >= 0)
                                                         & (cols["scope"] == Scope.BACKWARD_FUNCTION))}
    assert not any(n.startswith("autograd::engine::evaluate_function") for n in seq_named)
    pairing = forward_backward_pairing(data)
    assert (len(pairing.backward), pairing.matched_one, pairing.matched_several, pairing.matched_none) == (12, 6, 6, 0)
    assert pairing.summary().startswith("12 backward ops: 6 matched one forward op, 6 matched several")
    chosen = {data.name_of(b): data.name_of(f) for b, f in zip(pairing.backward, pairing.chosen)}
    assert chosen["TBackward0"] == "aten::t" and chosen["MseLossBackward0"] == "aten::mse_loss"
    k = int(np.flatnonzero(np.array([data.name_of(b) for b in pairing.backward]) == "TBackward0")[0])
    assert {data.name_of(i) for i in pairing.candidates(k)} == {"aten::linear", "aten::t"}
    # The choice is the one PyTorch drew as fwdbwd flows.
    start = cols["start_ns"]
    assert {(int(start[f]), int(start[b])) for b, f in zip(pairing.backward, pairing.chosen)} == _flow_pairs(_raw(FIXTURE))


def test_plain_and_gzip_and_options_off():
    data = profiler.load(PLAIN)
    meta = data.metadata
    assert not (meta["record_shapes"] or meta["with_stack"] or meta["with_modules"] or meta["profile_memory"])
    assert data.n_events == 242 and forward_backward_pairing(data).matched_none == 0
    assert "aten::addmm" in data.table(row_limit=0)


def test_amd_sample_kernels_attributed_and_pairs_match_flows():
    path = ks.AMD
    data = profiler.load(path)
    counts = data.metadata["torch_trace"]
    assert counts["gpu_events"] == 16 and counts["gpu_events_without_launch"] == 0
    cols, a = data.event_columns, data.analysis
    gpu = np.flatnonzero(cols["device_start_ns"] >= 0)
    busy = int((cols["device_end_ns"][gpu] - cols["device_start_ns"][gpu]).sum())
    assert int(a.self_cuda_ns.sum()) == busy                       # nothing counted twice
    assert int(a.cuda_total_ns[a.top_level].sum()) == busy
    assert {data.strings[int(d)] for d in cols["device_id"][gpu]} == {"cuda:2"}
    addmm = next(e for e in data.events() if e.name == "aten::addmm")
    assert addmm.cuda_time_total == pytest.approx(6.88 + 17.6, abs=1e-3)   # its two kernels
    pairing = forward_backward_pairing(data)
    start = cols["start_ns"]
    assert {(int(start[f]), int(start[b])) for b, f in zip(pairing.backward, pairing.chosen)} == _flow_pairs(_raw(path))
    # The autograd thread's ops name the main thread (RecordFunction id 1) as their forward thread.
    assert set(cols["fwd_thread_id"][pairing.backward].tolist()) == {1}
    assert data.metadata["torch_trace"]["threads"]["1"]["name"].endswith("(python3)")


@pytest.mark.parametrize("path", [ks.CUPTI, ks.SIMPLE_ADD], ids=lambda p: p.name)
def test_cuda_samples_load_and_tabulate(path):
    data = profiler.load(path)
    counts = data.metadata["torch_trace"]
    assert counts["events"] == data.n_events > 100
    assert counts["gpu_events_without_launch"] == 0
    a = data.analysis
    assert int(a.self_cuda_ns.sum()) == int(a.cuda_total_ns[a.top_level].sum())
    assert "aten::empty" in data.table(row_limit=0)


# --------------------------------------------------------------------------- format variants


def test_detection_by_content(tmp_path):
    events = [_op("aten::add", 1.5, 2.25)]
    for path in (_write(tmp_path, events, "a.json"), _write(tmp_path, events, "b.pt.trace.gz", gz=True)):
        assert is_torch_trace(path)
        assert profiler.load(path).name_of(0) == "aten::add"
    saved = tmp_path / "x.gtprof"
    profiler.load(tmp_path / "a.json").save(saved)
    assert not is_torch_trace(saved)
    assert profiler.load(saved).name_of(0) == "aten::add"


def test_byte_order_mark_and_whitespace(tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf\n  " + json.dumps({"traceEvents": [_op("aten::add", 1, 1)]}).encode())
    assert is_torch_trace(path) and _names(profiler.load(path)) == ["aten::add"]


def test_bare_array_float_times_and_old_spellings(tmp_path):
    events = [
        _op("aten::mm", 100.251, 10.125, cat="Operator", **{"external id": 7}),
        _op("cudaLaunchKernel", 101, 2, cat="Runtime", correlation=5),
        {"ph": "X", "cat": "Kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 120.5, "dur": 3.125,
         "args": {"device": 0, "stream": 7, "correlation": 5, "external id": 7}},
    ]
    path = tmp_path / "bare.json"
    path.write_text(json.dumps(events))
    data = profiler.load(path)
    cols = data.event_columns
    i = _names(data).index("aten::mm")
    assert cols["start_ns"][i] == 100_251 and cols["end_ns"][i] == 110_376   # integer ns
    k = _names(data).index("gemm")
    assert (cols["device_start_ns"][k], cols["device_end_ns"][k]) == (120_500, 123_625)
    assert data.analysis.parent[k] == _names(data).index("cudaLaunchKernel")
    assert data.events()[i].cuda_time_total == pytest.approx(3.125)


def test_gpu_event_found_by_external_id_when_runtime_missing(tmp_path):
    events = [_op("aten::relu", 10, 5, **{"External id": 3}),
              {"ph": "X", "cat": "kernel", "name": "relu_kernel", "pid": 0, "tid": 7, "ts": 20, "dur": 1,
               "args": {"device": 0, "stream": 7, "correlation": 99, "External id": 3}}]
    data = profiler.load(_write(tmp_path, events))
    k = _names(data).index("relu_kernel")
    assert data.name_of(data.analysis.parent[k]) == "aten::relu"


def test_gpu_event_without_launch_is_kept_and_counted(tmp_path):
    events = [_op("aten::relu", 10, 5),
              {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7, "ts": 20, "dur": 4,
               "args": {"device": 1, "stream": 7, "correlation": 5}}]
    data = profiler.load(_write(tmp_path, events))
    assert data.metadata["torch_trace"]["gpu_events_without_launch"] == 1
    assert data.total_average().self_cuda_time_total == pytest.approx(4)
    assert any("1 of 1 GPU events have no launching op" in w for w in import_warnings(data))


def test_memory_records_from_instants(tmp_path):
    mem = {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 10, "tid": 1}
    events = [_op("aten::empty", 10, 5),
              dict(mem, ts=11, args={"Bytes": 512, "Total Allocated": 512, "Device Type": 1, "Device Id": 0, "Addr": 64}),
              dict(mem, ts=30, args={"Bytes": -512, "Total Allocated": 0, "Device Type": 1, "Device Id": 0, "Addr": 64})]
    data = profiler.load(_write(tmp_path, events))
    assert data.memory_columns["bytes"].tolist() == [512, -512]
    assert data.has_cuda_memory
    assert data.events()[0].self_cuda_memory_usage == 512


def test_forward_thread_numbered_from_one(tmp_path):
    """The forward thread gets the RecordFunction id that backward ops name, even when another
    thread's first event comes earlier."""
    events = [_op("loader", 0, 1, tid=55, cat="user_annotation"),
              _op("aten::mul", 10, 5, tid=77, **{"Sequence number": 3, "Fwd thread id": 0}),
              _op("MulBackward0", 30, 5, tid=99, **{"Sequence number": 3, "Fwd thread id": 1})]
    data = profiler.load(_write(tmp_path, events))
    pairing = forward_backward_pairing(data)
    assert pairing.matched_one == 1 and data.name_of(pairing.chosen[0]) == "aten::mul"


# --------------------------------------------------------------------------- repairs


def test_small_overrun_clamped_large_overrun_set_aside(tmp_path):
    events = [_op("ProfilerStep#1", 0, 100, cat="user_annotation"),
              _op("aten::a", 10, 90.5),            # ends 0.5 us after the step: clamped
              _op("aten::b", 150, 50),
              _op("aten::c", 190, 40)]             # overruns aten::b by 30 us: set aside
    data = profiler.load(_write(tmp_path, events))
    counts = data.metadata["torch_trace"]
    assert counts["clamped_into_parent"] == 1 and counts["set_aside_overlapping"] == 1
    assert "aten::c" not in _names(data)
    i = _names(data).index("aten::a")
    assert data.event_columns["end_ns"][i] == 100_000 and data.analysis.parent[i] == 0
    assert len(data.analysis.partial_overlaps) == 0
    warnings = import_warnings(data)
    assert any(w.startswith("1 events set aside") for w in warnings)
    assert OVERRUN_TOLERANCE_NS == 1000


def test_dangling_python_parent_ids_and_cycles(tmp_path):
    py = {"ph": "X", "cat": "python_function", "pid": 10, "tid": 1}
    events = [dict(py, name="train.py(3): step", ts=0, dur=100, args={"Python id": 1, "Python parent id": 2}),
              dict(py, name="train.py(9): loop", ts=0, dur=100, args={"Python id": 2, "Python parent id": 1}),
              dict(py, name="train.py(5): inner", ts=5, dur=50, args={"Python id": 3, "Python parent id": 42}),
              _op("aten::add", 10, 5)]
    data = profiler.load(_write(tmp_path, events))
    assert data.events()[0].stack == ["train.py(5): inner"]


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("content, pattern", [
    (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur"', r"truncated"),
    (b'{"traceEvents": [1, 2,, 3]}', r"bad JSON"),
    (b'{"schemaVersion": 1}', r"not a gradtrace profile or torch trace \(JSON without traceEvents\)"),
    (b'{"traceEvents": [{"ph": "M", "name": "process_name"}]}', r"nor a torch trace with profiler events"),
    (b'[{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1}] trailing', r"text after the end"),
    (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "\xff\xfe", "ts": 1}]}', r"not UTF-8"),
])
def test_bad_traces_raise_one_line_naming_the_file(tmp_path, content, pattern):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(ProfileFormatError, match=pattern) as info:
        profiler.load(path)
    assert str(info.value).startswith(str(path) + ": ") and "\n" not in str(info.value)


def test_truncated_gzip(tmp_path):
    blob = FIXTURE.read_bytes()
    path = tmp_path / "cut.json.gz"
    path.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(ProfileFormatError, match=r"truncated"):
        profiler.load(path)


def test_hostile_ids_and_times(tmp_path):
    events = [dict(_op("aten::a", 1, 1), pid=[1], tid={"x": 1}),
              _op("aten::b", 3e15, 1, tid=2), _op("aten::c", 1, 1e300), _op("aten::d", float("nan"), 1)]
    path = tmp_path / "h.json"
    path.write_text(json.dumps({"traceEvents": events}))
    with pytest.raises(ProfileFormatError, match=r"its times span .* more than"):
        profiler.load(path)
    del events[1]
    path.write_text(json.dumps({"traceEvents": events}))
    assert _names(profiler.load(path)) == ["aten::a"]


def test_odd_values_are_skipped_not_fatal(tmp_path):
    events = [_op("aten::a", "soon", 1), _op(None, 1, 1), _op("aten::b", 1, 1, **{"Sequence number": "x",
              "Input Dims": [["a"]], "Input type": [[1]]}), "not an event", {"ph": "X"}]
    data = profiler.load(_write(tmp_path, events))
    assert _names(data) == ["aten::b"]
    assert data.events()[0].input_shapes is None          # not sizes: dropped and counted
    skipped = data.metadata["torch_trace"]["skipped_categories"]
    assert skipped["(event without ts or name)"] == 2 and skipped["(Input Dims that are not sizes)"] == 1


# --------------------------------------------------------------------------- the profile behind it


def test_saved_import_round_trips_and_exports(tmp_path):
    data = profiler.load(FIXTURE)
    out = tmp_path / "run.gtprof"
    data.save(out)
    again = profiler.load(out)
    for k, v in data.event_columns.items():
        assert np.array_equal(v, again.event_columns[k]), k
    assert again.metadata["torch_trace"]["events"] == data.n_events
    data.export_chrome_trace(tmp_path / "t.json")
    assert profiler.load(tmp_path / "t.json").n_events > 0       # our own export reads back
    data.export_speedscope(tmp_path / "s.json")
    data.export_stacks(tmp_path / "f.folded")
    assert (tmp_path / "f.folded").read_text().strip()


def test_import_does_not_load_the_engine():
    code = ("import sys\nfrom gradtrace import profiler\n"
            f"d = profiler.load({str(FIXTURE)!r})\nd.table(); d.forward_backward_summary()\n"
            "assert 'gradtrace.autograd' not in sys.modules and 'torch' not in sys.modules\nprint('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
