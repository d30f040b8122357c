"""Chrome trace export: schema, nesting, flows, memory, GPU rows, hostile names, gzip, streaming,
and the round trip live profile -> saved file -> trace."""
import gzip
import hashlib
import json
import math
import re
from collections import Counter, defaultdict
from decimal import Decimal

import jsonschema
import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace import profiler
from gradtrace.profiler import Scope, synthetic
from gradtrace.profiler import chrome_trace as ct

# --------------------------------------------------------------------------- schema

_ID = {"type": "integer", "minimum": 1}
_TIME = {"type": "number", "minimum": 0}
_EVENT_COMMON = {"ph": {"type": "string"}, "pid": _ID, "tid": _ID, "name": {"type": "string"}}
TRACE_SCHEMA = {
    "type": "object",
    "required": ["schemaVersion", "deviceProperties", "distributedInfo", "displayTimeUnit",
                 "baseTimeNanoseconds", "traceName", "traceEvents"],
    "properties": {
        "schemaVersion": {"type": "integer", "minimum": 1},
        "deviceProperties": {"type": "array", "items": {
            "type": "object", "required": ["id", "name"],
            "properties": {"id": {"type": "integer", "minimum": 0}, "name": {"type": "string"},
                           "totalGlobalMem": {"type": "integer"}, "computeMajor": {"type": "integer"},
                           "computeMinor": {"type": "integer"}, "numSms": {"type": "integer"}}}},
        "distributedInfo": {"type": "object", "required": ["rank", "world_size"],
                            "properties": {"rank": {"type": "integer"}, "world_size": {"type": "integer"}}},
        "displayTimeUnit": {"enum": ["ms", "ns"]},
        "baseTimeNanoseconds": {"type": "integer", "minimum": 0},
        "traceName": {"type": "string"},
        "traceEvents": {"type": "array", "items": {"oneOf": [
            {"type": "object", "additionalProperties": False,
             "required": ["ph", "cat", "name", "pid", "tid", "ts", "dur", "args"],
             "properties": {**_EVENT_COMMON, "ph": {"const": "X"},
                            "cat": {"enum": ["cpu_op", "user_annotation", "kernel", "gpu_user_annotation"]},
                            "ts": _TIME, "dur": _TIME,
                            "args": {"type": "object", "required": ["External id"],
                                     "properties": {
                                         "External id": _ID, "Sequence number": {"type": "integer", "minimum": 0},
                                         "Fwd thread id": {"type": "integer", "minimum": 0},
                                         "Input Dims": {"type": "array"}, "Input type": {"type": "array"},
                                         "Call stack": {"type": "string"}, "correlation": _ID,
                                         "stream": _ID, "device": {"type": "integer", "minimum": 0}}}}},
            {"type": "object", "additionalProperties": False,
             "required": ["ph", "id", "cat", "name", "pid", "tid", "ts"],
             "properties": {**_EVENT_COMMON, "ph": {"enum": ["s", "f"]}, "id": _ID,
                            "cat": {"enum": ["fwdbwd", "ac2g"]}, "ts": _TIME, "bp": {"const": "e"}}},
            {"type": "object", "additionalProperties": False,
             "required": ["ph", "cat", "name", "pid", "tid", "ts", "args"],
             "properties": {**_EVENT_COMMON, "ph": {"const": "i"}, "s": {"const": "t"},
                            "cat": {"const": "cpu_instant_event"}, "name": {"const": "[memory]"}, "ts": _TIME,
                            "args": {"type": "object", "additionalProperties": False,
                                     "required": ["Device Type", "Device Id", "Addr", "Bytes", "Total Allocated"],
                                     "properties": {k: {"type": "integer"} for k in
                                                    ["Device Type", "Device Id", "Addr", "Bytes", "Total Allocated"]}}}},
            {"type": "object", "additionalProperties": False,
             "required": ["ph", "name", "pid", "tid", "ts", "args"],
             "properties": {**_EVENT_COMMON, "ph": {"const": "C"}, "ts": _TIME,
                            "args": {"type": "object", "minProperties": 1,
                                     "additionalProperties": {"type": "integer"}}}},
            {"type": "object", "additionalProperties": False, "required": ["ph", "name", "pid", "tid", "args"],
             "properties": {**_EVENT_COMMON, "ph": {"const": "M"},
                            "name": {"enum": ["process_name", "process_sort_index", "thread_name",
                                              "thread_sort_index"]},
                            "args": {"type": "object"}}},
        ]}},
    },
}


# --------------------------------------------------------------------------- helpers


def mlp_step(x, w1, b1, w2, b2):
    with profiler.record_function("forward"):
        h = (x @ w1 + b1).tanh()
        out = h @ w2 + b2
        loss = (out * out).mean()
    with profiler.record_function("backward"):
        loss.backward()


def make_mlp(seed=0):
    ag.manual_seed(seed)
    return (ag.randn(8, 16), ag.randn(16, 32, requires_grad=True), ag.zeros(32, requires_grad=True),
            ag.randn(32, 4, requires_grad=True), ag.zeros(4, requires_grad=True))


@pytest.fixture(scope="module")
def engine_prof():
    params = make_mlp()
    with profiler.profile(record_shapes=True, profile_memory=True, with_stack=True,
                          schedule=profiler.schedule(wait=0, warmup=0, active=3, repeat=1)) as prof:
        for _ in range(3):
            mlp_step(*params)
            prof.step()
    assert prof.profile_data is not None
    return prof


def load_json(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    return json.loads(raw.decode("utf-8")), raw


def ns(value) -> int:
    """Microseconds as written (a Decimal from the file) -> exact integer ns."""
    return int(Decimal(str(value)) * 1000)


def x_rows(events):
    rows = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            rows[(e["pid"], e["tid"])].append(e)
    return rows


def reader_models(e):
    """End and start of a slice as three readers compute them: exact ns, float us sum,
    Perfetto-style truncation to integer ns."""
    ts, dur = float(e["ts"]), float(e["dur"])
    return ({"start": ns(e["ts"]), "end": ns(e["ts"]) + ns(e["dur"])},
            {"start": ts, "end": ts + dur},
            {"start": int(ts * 1000.0), "end": int(ts * 1000.0) + int(dur * 1000.0)})


def assert_perfect_nesting(events):
    """Per (pid, tid): sorted by (start, -dur), every slice either nests inside the open one
    or starts at/after its end — under every reader model."""
    for row in x_rows(events).values():
        for model in range(3):
            spans = sorted((reader_models(e)[model]["start"], -reader_models(e)[model]["end"])
                           for e in row)
            stack = []
            for s, neg_end in spans:
                end = -neg_end
                while stack and stack[-1] <= s:
                    stack.pop()
                assert not stack or end <= stack[-1], f"partial overlap in row (model {model})"
                stack.append(end)


def enclosing(rows, pid, tid, t):
    """The deepest X slice of a row open at time t (ns): where a flow event binds."""
    best = None
    for e in rows[(pid, tid)]:
        s = ns(e["ts"])
        end = s + ns(e["dur"])
        if s <= t < end or s == t == end:
            if best is None or (s, -end) > (ns(best["ts"]), -(ns(best["ts"]) + ns(best["dur"]))):
                best = e
    return best


def check_flows(events):
    by_id = defaultdict(list)
    for e in events:
        if e["ph"] in "sf":
            by_id[(e["cat"], e["id"])].append(e)
    for (cat, _), pair in by_id.items():
        assert sorted(p["ph"] for p in pair) == ["f", "s"], pair
        s, f = sorted(pair, key=lambda p: p["ph"] != "s")
        assert s["name"] == f["name"] == cat and f["bp"] == "e"
    return by_id


# --------------------------------------------------------------------------- engine profiles


def test_engine_trace_matches_schema_and_guarantees(engine_prof, tmp_path):
    path = tmp_path / "trace.json"
    trace = engine_prof.export_chrome_trace(path)
    obj, raw = load_json(path)
    jsonschema.validate(obj, TRACE_SCHEMA)
    assert obj["distributedInfo"] == {"rank": 0, "world_size": 1}
    assert obj["deviceProperties"] == []
    events = obj["traceEvents"]
    assert_perfect_nesting(events)
    assert all(e["pid"] != 0 and e["tid"] != 0 for e in events)
    # ts/dur are microseconds written exactly from ns: at most three decimals, no trailing zeros.
    for m in re.finditer(rb'"(ts|dur)":([0-9.eE+-]+)', raw):
        assert re.fullmatch(rb"(0|[1-9]\d*)(\.\d{0,2}[1-9])?", m.group(2)), m.group(0)
    data = engine_prof.profile_data
    xs = [e for e in events if e["ph"] == "X"]
    assert len(xs) == data.n_events == trace.stats["cpu_events"]
    cats = Counter(e["cat"] for e in xs)
    n_user = int((data.event_columns["scope"] == Scope.USER_SCOPE).sum())
    assert cats["user_annotation"] == n_user and cats["cpu_op"] == data.n_events - n_user
    assert {e["name"] for e in xs if e["cat"] == "user_annotation"} >= {
        "forward", "backward", "ProfilerStep#0", "ProfilerStep#2"}
    names = {(e["name"], e["args"].get("name")) for e in events if e["ph"] == "M"}
    assert ("thread_name", "CPU thread 1") in names
    matmul = next(e for e in xs if e["name"] == "matmul")
    assert matmul["args"]["Input Dims"] == [[8, 16], [16, 32]]
    assert matmul["args"]["Input type"] == ["float32", "float32"]
    assert matmul["args"]["Fwd thread id"] == 0 and "test_chrome_trace.py" in matmul["args"]["Call stack"]


def test_every_backward_node_has_one_fwdbwd_flow_from_its_forward_op(engine_prof, tmp_path):
    data = engine_prof.profile_data
    engine_prof.export_chrome_trace(tmp_path / "t.json")
    obj, _ = load_json(tmp_path / "t.json")
    events = obj["traceEvents"]
    rows = x_rows(events)
    flows = check_flows(events)
    fwdbwd = [pair for (cat, _), pair in flows.items() if cat == "fwdbwd"]
    cols = data.event_columns
    linked_bwd = np.flatnonzero((cols["scope"] == Scope.BACKWARD_FUNCTION) & (cols["sequence_nr"] >= 0))
    assert len(linked_bwd) > 0 and len(fwdbwd) == len(linked_bwd)
    ends = Counter()
    for pair in fwdbwd:
        s = next(p for p in pair if p["ph"] == "s")
        f = next(p for p in pair if p["ph"] == "f")
        src = enclosing(rows, s["pid"], s["tid"], ns(s["ts"]))
        dst = enclosing(rows, f["pid"], f["tid"], ns(f["ts"]))
        assert src["cat"] == "cpu_op" and dst["cat"] == "cpu_op"
        assert dst["name"].endswith("Backward0") or dst["name"].endswith("Backward1")
        assert src["args"]["Sequence number"] == dst["args"]["Sequence number"]
        assert src["tid"] == dst["args"]["Fwd thread id"]
        assert src["args"]["Fwd thread id"] == 0
        ends[dst["args"]["External id"]] += 1
    # exactly one flow per backward node
    assert sorted(ends) == sorted((linked_bwd + 1).tolist()) and set(ends.values()) == {1}


def test_round_trip_saved_profile_exports_the_same_trace(engine_prof, tmp_path):
    engine_prof.export_chrome_trace(tmp_path / "live.json")
    engine_prof.save(tmp_path / "run.gtprof")
    loaded = profiler.load(tmp_path / "run.gtprof")
    loaded.export_chrome_trace(tmp_path / "loaded.json")
    live, live_raw = load_json(tmp_path / "live.json")
    again, again_raw = load_json(tmp_path / "loaded.json")
    assert live == again and live_raw == again_raw
    in_memory = ct.chrome_trace(engine_prof.profile_data).to_dict()
    assert in_memory == live


def test_gzip_output_equals_plain(engine_prof, tmp_path):
    engine_prof.export_chrome_trace(tmp_path / "t.json")
    engine_prof.export_chrome_trace(tmp_path / "t.json.gz")
    with open(tmp_path / "t.json.gz", "rb") as f:
        assert f.read(2) == b"\x1f\x8b"
    assert load_json(tmp_path / "t.json.gz") == load_json(tmp_path / "t.json")


def test_stable_ordering_and_streamed_chunks(tmp_path):
    data = synthetic.training_profile(3000, threads=2)
    trace = ct.chrome_trace(data)
    chunks = list(trace.iter_event_chunks(chunk_events=97))
    assert len(chunks) > 20
    small = [e for c in chunks for e in json.loads("[" + c + "]")]
    assert small == trace.events()
    trace.write(tmp_path / "a.json")
    ct.chrome_trace(data).write(tmp_path / "b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    obj, _ = load_json(tmp_path / "a.json")
    jsonschema.validate(obj, TRACE_SCHEMA)
    assert_perfect_nesting(obj["traceEvents"])
    check_flows(obj["traceEvents"])


def test_reference_workloads(tmp_path):
    from gradtrace.autograd import models

    assert set(models.WORKLOADS) == {"mlp", "cnn", "gpt"}
    for name in models.WORKLOADS:
        wl = models.make_workload(name, device="cpu", seed=0)
        wl.train_step()
        with profiler.profile(record_shapes=True) as prof:
            wl.train_step()
        prof.export_chrome_trace(tmp_path / f"{name}.json")
        obj, _ = load_json(tmp_path / f"{name}.json")
        jsonschema.validate(obj, TRACE_SCHEMA)
        assert_perfect_nesting(obj["traceEvents"])
        flows = check_flows(obj["traceEvents"])
        n_links = int((prof.profile_data.analysis.forward_event >= 0).sum())
        assert sum(1 for (cat, _) in flows if cat == "fwdbwd") == n_links


# --------------------------------------------------------------------------- hand-made profiles

HOSTILE = [
    'quote " and \\ backslash', "tab\tnew\nline\rreturn", "nul\x00bell\x07esc\x1b",
    "ünïcödé ✓ 漢字 🚀", "line\u2028sep\u2029", "lone \ud800 surrogate", "", "a;b c",
    "</script><script>alert(1)</script>", "\\u0041 not an escape",
]


def test_hostile_names_are_valid_utf8_json(tmp_path):
    events = [{"name": n, "start": 10 * i, "end": 10 * i + 5, "scope": Scope.USER_SCOPE if i % 2 else Scope.FUNCTION,
               "shapes": [[i]], "dtypes": [n]} for i, n in enumerate(HOSTILE)]
    data = synthetic.from_events(events, metadata={"trace_name": 'my "trace" ✓'})
    path = tmp_path / "t.json"
    data.export_chrome_trace(path)
    raw = path.read_bytes()
    raw.decode("utf-8")                                   # strict UTF-8
    assert "ünïcödé ✓ 漢字 🚀".encode() in raw             # not \u escaped (Perfetto shows escapes literally)
    assert b"\\u00fc" not in raw
    obj = json.loads(raw)
    jsonschema.validate(obj, TRACE_SCHEMA)
    got = [e["name"] for e in obj["traceEvents"] if e["ph"] == "X"]
    expected = [n.replace("\ud800", "\ufffd") for n in HOSTILE]   # lone surrogates: U+FFFD
    assert got == expected
    assert obj["traceName"] == 'my "trace" ✓'
    assert [e["args"]["Input type"][0] for e in obj["traceEvents"] if e["ph"] == "X"] == expected


def test_partial_overlaps_are_clamped_and_counted():
    data = synthetic.from_events([
        {"name": "outer", "start": 0, "end": 100},
        {"name": "a", "start": 10, "end": 50},
        {"name": "b", "start": 40, "end": 80},        # starts inside a, ends after it
        {"name": "c", "start": 90, "end": 130},       # ends after outer
    ])
    trace = ct.chrome_trace(data)
    assert trace.stats["clamped_overlaps"] == 2
    assert trace.header["otherData"]["clamped_overlaps"] == 2
    events = trace.events()
    assert_perfect_nesting(events)
    dur = {e["name"]: ns(e["dur"]) for e in events if e["ph"] == "X"}
    assert dur == {"outer": 100, "a": 40, "b": 10, "c": 10}


def test_reader_rounding_is_repaired():
    """Touching boundaries far from the base: float ts + dur and per-field truncation would
    make a slice end after its parent or its next sibling; ends are trimmed by 1 ns."""
    rng = np.random.default_rng(0)
    events, t = [], 0
    for _ in range(3000):
        s, e = t, t + int(rng.integers(2, 5000))
        events.append({"name": "p", "start": s, "end": e})
        events.append({"name": "c", "start": s + int(rng.integers(1, e - s)), "end": e})
        t = e
    data = synthetic.from_events(events)
    trace = ct.chrome_trace(data)
    assert trace.stats["rounding_fixes"] > 0
    assert_perfect_nesting(trace.events())


def gpu_profile():
    """Two devices, two streams on cuda:0, a composite op whose device interval contains its
    children's, backward nodes with device time, CUDA memory."""
    big = 0x55D1A2B3C4D0
    ev = [
        {"name": "ProfilerStep#0", "start": 0, "end": 10_000, "scope": Scope.USER_SCOPE},
        {"name": "linear", "start": 100, "end": 2_000, "device": "cuda:0", "sequence_nr": -1,
         "device_start": 1_000, "device_end": 5_000},
        {"name": "matmul", "start": 200, "end": 900, "device": "cuda:0", "sequence_nr": 0,
         "device_start": 1_100, "device_end": 3_000, "shapes": [[4, 8], [8, 8]]},
        {"name": "add", "start": 1_000, "end": 1_800, "device": "cuda:0", "sequence_nr": 1,
         "device_start": 3_000, "device_end": 4_900},
        {"name": "relu", "start": 2_100, "end": 2_500, "device": "cuda:0", "stream": big,
         "sequence_nr": 2, "device_start": 5_000, "device_end": 5_500},
        {"name": "mul", "start": 2_600, "end": 2_900, "device": "cuda:1", "sequence_nr": 3,
         "device_start": 5_100, "device_end": 5_300},
        {"name": "ReluBackward0", "start": 3_000, "end": 3_500, "scope": Scope.BACKWARD_FUNCTION,
         "device": "cuda:0", "stream": big, "sequence_nr": 2, "fwd_thread_id": 1,
         "device_start": 6_000, "device_end": 6_400},
        {"name": "AddBackward0", "start": 3_600, "end": 3_900, "scope": Scope.BACKWARD_FUNCTION,
         "device": "cuda:0", "sequence_nr": 1, "fwd_thread_id": 1,
         "device_start": 6_500, "device_end": 6_700},
        {"name": "MmBackward0", "start": 4_000, "end": 4_900, "scope": Scope.BACKWARD_FUNCTION,
         "device": "cuda:0", "sequence_nr": 0, "fwd_thread_id": 1,
         "device_start": 6_800, "device_end": 7_900},
    ]
    mem = [{"time": 250, "bytes": 128, "device": "cuda:0", "addr": 4096},
           {"time": 1_100, "bytes": 128, "device": "cuda:0", "addr": 8192},
           {"time": 2_700, "bytes": 64, "device": "cuda:1", "addr": 64},
           {"time": 4_500, "bytes": -128, "device": "cuda:0", "addr": 4096},
           {"time": 4_600, "bytes": 32, "device": "cpu", "addr": 1}]
    meta = {"activities": ["cpu", "cuda"], "pid": 4242,
            "device_properties": {"cuda:0": {"name": "NVIDIA H100", "total_memory": 80 * 2**30,
                                             "compute_capability": [9, 0], "multi_processor_count": 132}}}
    return synthetic.from_events(ev, mem, meta)


def test_gpu_rows_kernels_and_ac2g_flows(tmp_path):
    data = gpu_profile()
    data.export_chrome_trace(tmp_path / "gpu.json", distributed_info={"rank": 3, "world_size": 8})
    obj, _ = load_json(tmp_path / "gpu.json")
    jsonschema.validate(obj, TRACE_SCHEMA)
    assert obj["distributedInfo"] == {"rank": 3, "world_size": 8}
    props = {p["id"]: p for p in obj["deviceProperties"]}
    assert props[0] == {"id": 0, "name": "NVIDIA H100", "totalGlobalMem": 80 * 2**30,
                        "computeMajor": 9, "computeMinor": 0, "numSms": 132}
    assert props[1]["name"] == "cuda:1"
    events = obj["traceEvents"]
    assert_perfect_nesting(events)
    assert all(e["pid"] != 0 and e["tid"] != 0 for e in events)
    dev = [e for e in events if e["ph"] == "X" and e["cat"] in ("kernel", "gpu_user_annotation")]
    assert len(dev) == 8
    by_name = {e["name"]: e for e in events if e["ph"] == "X" and e["cat"] == "kernel"}
    # linear's device interval contains matmul's and add's: an annotation, not a kernel
    assert [e["name"] for e in dev if e["cat"] == "gpu_user_annotation"] == ["linear"]
    assert by_name["matmul"]["pid"] == 1 and by_name["matmul"]["tid"] == ct.DEFAULT_STREAM_TID
    assert by_name["relu"]["pid"] == 1 and by_name["relu"]["tid"] == ct.DEFAULT_STREAM_TID + 1
    assert by_name["mul"]["pid"] == 2 and by_name["mul"]["args"]["device"] == 1
    for k in by_name.values():               # what HTA reads from kernel rows
        assert {"stream", "device", "correlation", "External id"} <= set(k["args"])
        assert k["args"]["stream"] == k["tid"] > 0
    assert ns(by_name["matmul"]["ts"]) == 1_100 and ns(by_name["matmul"]["dur"]) == 1_900
    names = {(e["pid"], e["tid"], e["name"]): e["args"] for e in events if e["ph"] == "M"}
    assert names[(1, 7, "thread_name")] == {"name": "cuda:0 stream 7"}
    assert names[(1, 7, "process_name")] == {"name": "cuda:0"}
    assert names[(4242, 1, "process_name")] == {"name": "CPU (pid 4242)"}
    # ac2g: CPU op -> its device interval, same correlation on both ends
    rows = x_rows(events)
    flows = check_flows(events)
    ac2g = [pair for (cat, _), pair in flows.items() if cat == "ac2g"]
    assert len(ac2g) == 8
    for pair in ac2g:
        s = next(p for p in pair if p["ph"] == "s")
        f = next(p for p in pair if p["ph"] == "f")
        cpu = enclosing(rows, s["pid"], s["tid"], ns(s["ts"]))
        gpu = enclosing(rows, f["pid"], f["tid"], ns(f["ts"]))
        assert cpu["pid"] == 4242 and gpu["pid"] in (1, 2)
        assert cpu["name"] == gpu["name"]
        assert cpu["args"]["correlation"] == gpu["args"]["correlation"] == s["id"]
    assert sum(1 for (cat, _) in flows if cat == "fwdbwd") == 3
    # memory: one instant per record, counters of allocated bytes per device on its process
    inst = [e for e in events if e["ph"] == "i"]
    assert [(e["args"]["Device Type"], e["args"]["Device Id"], e["args"]["Bytes"]) for e in inst] == [
        (1, 0, 128), (1, 0, 128), (1, 1, 64), (1, 0, -128), (0, -1, 32)]
    assert [e["args"]["Total Allocated"] for e in inst] == [128, 256, 64, 128, 32]
    counters = [(e["pid"], e["args"]) for e in events if e["ph"] == "C"]
    assert counters == [(1, {"cuda:0": 128}), (1, {"cuda:0": 256}), (2, {"cuda:1": 64}),
                        (1, {"cuda:0": 128}), (4242, {"cpu": 32})]


def test_cpu_memory_instants_and_counters(engine_prof):
    data = engine_prof.profile_data
    events = ct.chrome_trace(data).events()
    inst = [e for e in events if e["ph"] == "i"]
    # Kind records have no torch event: one instant per allocation and free.
    mem = {k: v[data.memory_columns["category"] == 0] for k, v in data.memory_columns.items()}
    assert len(inst) == len(mem["bytes"]) > 0
    assert [e["args"]["Bytes"] for e in inst] == mem["bytes"].tolist()
    assert all(e["args"]["Device Type"] == 0 and e["args"]["Device Id"] == -1 for e in inst)
    assert all("s" not in e for e in inst)              # thread scope: the format's default
    base_ns = min(int(data.event_columns["start_ns"].min()), int(mem["time_ns"].min()))
    counters = [(ns(e["ts"]), e["args"]["cpu"]) for e in events if e["ph"] == "C"]
    assert counters == expected_counter_samples(
        [(t - base_ns, "cpu", v) for t, v in zip(mem["time_ns"].tolist(), mem["total_allocated"].tolist())])["cpu"]
    assert max(v for _, v in counters) == int(mem["total_allocated"].max())


def expected_counter_samples(records):
    """Reference for the counter coalescing, written plainly: ``records`` are (time ns, device,
    total) in record order; per device, the last record of each microsecond, without repeats
    of the previous sample, plus the first record at the device's maximum."""
    by_dev = defaultdict(list)
    for t, d, v in records:
        by_dev[d].append((t, v))
    out = {}
    for d, recs in by_dev.items():
        peak = max(v for _, v in recs)
        first_peak = next(i for i, (_, v) in enumerate(recs) if v == peak)
        kept = []
        for i, (t, v) in enumerate(recs):
            last_of_us = i + 1 == len(recs) or recs[i + 1][0] // 1000 != t // 1000
            if (last_of_us or i == first_peak) and not (kept and kept[-1][1] == v):
                kept.append((t, v))
        out[d] = kept
    return out


def counter_value_at(samples, t_ns):
    """The value a counter track shows at ``t_ns``: the last sample at or before it."""
    before = [v for ts, v in samples if ts <= t_ns]
    return before[-1] if before else None


def test_counter_samples_keep_each_microsecond_final_value_and_the_peak():
    mem = [
        {"time": 1_100, "bytes": 100, "device": "cuda:0"},   # us 1: 100 -> 300 -> 250
        {"time": 1_200, "bytes": 200, "device": "cuda:0"},   # peak of cuda:0 (300), mid-us
        {"time": 1_900, "bytes": -50, "device": "cuda:0"},
        {"time": 1_950, "bytes": 8, "device": "cuda:1"},     # other device, same us: own sample
        {"time": 2_000, "bytes": 40, "device": "cuda:0"},    # us 2: 290 -> 250, back to us 1's value
        {"time": 2_999, "bytes": -40, "device": "cuda:0"},
        {"time": 3_000, "bytes": 5, "device": "cuda:0"},     # us 3: 255 (alone in its us)
        {"time": 7_500, "bytes": 0, "device": "cuda:0"},     # us 7: 255 again, a repeat
        {"time": 7_600, "bytes": -8, "device": "cuda:1"},
    ]
    data = synthetic.from_events([{"name": "step", "start": 0, "end": 10_000}], mem,
                                 {"activities": ["cpu", "cuda"]})
    trace = ct.chrome_trace(data)
    events = trace.events()
    inst = [e for e in events if e["ph"] == "i"]
    assert [e["args"]["Total Allocated"] for e in inst] == [100, 300, 250, 8, 290, 250, 255, 255, 0]
    counters = defaultdict(list)
    for e in events:
        if e["ph"] == "C":
            (device, value), = e["args"].items()
            counters[device].append((ns(e["ts"]), value))
    assert counters == {"cuda:0": [(1_200, 300), (1_900, 250), (3_000, 255)],
                        "cuda:1": [(1_950, 8), (7_600, 0)]}
    assert trace.stats["counter_samples"] == 5 and trace.stats["memory_events"] == 9
    records = [(m["time"], m["device"], v) for m, v in
               zip(mem, [e["args"]["Total Allocated"] for e in inst])]
    assert counters == expected_counter_samples(records)


def test_counter_coalescing_is_exact_at_microsecond_resolution():
    """Random bursts on two devices: at the end of every microsecond the counter shows the
    device's true total, its maximum is the true peak, and no sample repeats the previous."""
    rng = np.random.default_rng(1)
    times = np.sort(rng.integers(0, 40_000, size=3000))
    devices = rng.choice(["cuda:0", "cpu"], size=3000)
    sizes = rng.integers(-64, 128, size=3000)
    mem = [{"time": int(t), "bytes": int(b), "device": str(d)} for t, b, d in zip(times, sizes, devices)]
    data = synthetic.from_events([{"name": "step", "start": 0, "end": 40_000}], mem)
    events = ct.chrome_trace(data).events()
    counters = defaultdict(list)
    for e in events:
        if e["ph"] == "C":
            (device, value), = e["args"].items()
            counters[device].append((ns(e["ts"]), value))
    truth = defaultdict(list)
    for e in events:
        if e["ph"] == "i":
            truth["cpu" if e["args"]["Device Type"] == 0 else "cuda:0"].append(
                (ns(e["ts"]), e["args"]["Total Allocated"]))
    assert sum(map(len, counters.values())) < len(mem) // 2
    for device, recs in truth.items():
        samples = counters[device]
        assert {t for t, _ in samples} <= {t for t, _ in recs}
        assert max(v for _, v in samples) == max(v for _, v in recs)
        assert all(a[1] != b[1] for a, b in zip(samples, samples[1:]))
        for us in range(recs[0][0] // 1000, 41):
            end = us * 1000 + 999
            assert counter_value_at(samples, end) == counter_value_at(recs, end), (device, us)


def test_times_are_written_exactly_without_trailing_zeros(tmp_path):
    data = synthetic.from_events([{"name": "a", "start": 0, "end": 3_000},
                                  {"name": "b", "start": 12_500, "end": 12_501},
                                  {"name": "c", "start": 20_340, "end": 1_020_340}],
                                 memory=[{"time": 7_010, "bytes": 8}])
    data.export_chrome_trace(tmp_path / "t.json")
    raw = (tmp_path / "t.json").read_bytes()
    assert b'"ts":0,"dur":3,' in raw
    assert b'"ts":12.5,"dur":0.001,' in raw
    assert b'"ts":20.34,"dur":1000,' in raw
    assert b'"ts":7.01,' in raw
    events = json.loads(raw)["traceEvents"]
    assert [(ns(e["ts"]), ns(e["dur"])) for e in events if e["ph"] == "X"] == [
        (0, 3_000), (12_500, 1), (20_340, 1_000_000)]


def test_times_are_relative_to_base_time_in_microseconds():
    data = synthetic.from_events([{"name": "a", "start": 5_000_123, "end": 5_002_124},
                                  {"name": "b", "start": 5_003_000, "end": 5_003_001}],
                                 metadata={"start_time_ns": 5_000_000, "wall_clock_base_ns": 1_700_000_000_000_000_000})
    trace = ct.chrome_trace(data)
    assert trace.header["baseTimeNanoseconds"] == 1_700_000_000_000_000_123
    xs = [e for e in trace.events() if e["ph"] == "X"]
    assert [(e["ts"], e["dur"]) for e in xs] == [(0.0, 2.001), (2.877, 0.001)]


def test_thread_id_zero_is_never_written():
    data = synthetic.from_events([{"name": "a", "start": 0, "end": 10, "thread": 0},
                                  {"name": "b", "start": 0, "end": 10, "thread": 1}],
                                 memory=[{"time": 5, "bytes": 8, "thread": 0}])
    events = ct.chrome_trace(data).events()
    assert all(e["tid"] >= 1 and e["pid"] >= 1 for e in events)
    names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert names == {1: "CPU thread 0", 2: "CPU thread 1"}


def test_empty_profile_exports(tmp_path):
    data = synthetic.from_events([])
    data.export_chrome_trace(tmp_path / "e.json")
    obj, _ = load_json(tmp_path / "e.json")
    jsonschema.validate(obj, TRACE_SCHEMA)


def test_write_json_streams_chunks(tmp_path):
    seen = []

    def chunks():
        for k in range(3):
            seen.append(k)
            yield ",".join(json.dumps({"k": k, "i": i}) for i in range(2))
        yield ""

    n = ct.write_json(tmp_path / "s.json", {"a": "✓"}, "items", chunks())
    raw = (tmp_path / "s.json").read_bytes()
    assert n == len(raw) and seen == [0, 1, 2]
    assert json.loads(raw) == {"a": "✓", "items": [{"k": k, "i": i} for k in range(3) for i in range(2)]}


# --------------------------------------------------------------------------- GPU


@pytest.mark.cuda
def test_real_gpu_run_exports_kernels_and_flows(tmp_path):
    x = ag.randn(256, 256, device="cuda", requires_grad=True)
    w = ag.randn(256, 256, device="cuda", requires_grad=True)
    for _ in range(2):
        ((x @ w).relu().sum()).backward()
    with profiler.profile(activities=["cpu", "cuda"], record_shapes=True, profile_memory=True) as prof:
        ((x @ w).relu().sum()).backward()
    prof.export_chrome_trace(tmp_path / "gpu.json.gz")
    obj, _ = load_json(tmp_path / "gpu.json.gz")
    jsonschema.validate(obj, TRACE_SCHEMA)
    events = obj["traceEvents"]
    assert_perfect_nesting(events)
    kernels = [e for e in events if e["ph"] == "X" and e["cat"] == "kernel"]
    assert kernels and all(e["pid"] >= 1 and e["tid"] >= ct.DEFAULT_STREAM_TID for e in kernels)
    flows = check_flows(events)
    n_dev = int((prof.profile_data.event_columns["device_start_ns"] >= 0).sum())
    assert sum(1 for (cat, _) in flows if cat == "ac2g") == n_dev
    assert obj["deviceProperties"] and obj["deviceProperties"][0]["id"] == 0
    assert any(e["ph"] == "C" and "cuda:0" in e["args"] for e in events)
    assert not math.isnan(sum(float(e["dur"]) for e in kernels))


# --------------------------------------------------------------------------- byte-identical output

# sha256 of the exported bytes (uncompressed), recorded from the exporter as it was before it was
# split into a layout step and an encoder (one 293-line function); the split must not change a
# byte. A deliberate change of the format updates these with a note in the commit message.


def gpu_training_profile():
    """A tiled training profile whose events (two in three) also ran on a device: two devices,
    two streams per device, threads sharing streams (so device rows overlap partially and get
    clamped), backward nodes with device time."""
    data = synthetic.training_profile(6000, threads=3)
    cols = {k: v.copy() for k, v in data.event_columns.items()}
    strings = list(data.strings) + ["cuda:0", "cuda:1"]
    n = data.n_events
    i = np.arange(n)
    on_dev = i % 3 != 0
    cols["device_id"] = np.where(on_dev, len(strings) - 2 + (i % 2), cols["device_id"]).astype(np.int32)
    cols["stream"] = np.where(on_dev, np.where(cols["thread_id"] % 2 == 0, 0, 0x7F00AB), 0).astype(np.int64)
    shift = 300 + (i % 7) * 11
    cols["device_start_ns"] = np.where(on_dev, cols["start_ns"] + shift, -1).astype(np.int64)
    cols["device_end_ns"] = np.where(on_dev, cols["end_ns"] + shift + (i % 5), -1).astype(np.int64)
    mem = {k: v.copy() for k, v in data.memory_columns.items()}
    mem["device_id"] = np.where(np.arange(len(mem["time_ns"])) % 2 == 0, len(strings) - 2,
                                mem["device_id"]).astype(mem["device_id"].dtype)
    meta = dict(data.metadata, pid=777, activities=["cpu", "cuda"], wall_clock_base_ns=1_700_000_000_123_456_789,
                start_time_ns=int(cols["start_ns"].min()) - 5)
    return profiler.data.ProfileData(cols, mem, strings, meta)


def rounding_profile():
    rng = np.random.default_rng(0)
    events, t = [], 0
    for _ in range(3000):
        s, e = t, t + int(rng.integers(2, 5000))
        events.append({"name": "p", "start": s, "end": e})
        events.append({"name": "c", "start": s + int(rng.integers(1, e - s)), "end": e})
        t = e
    return synthetic.from_events(events)


GOLDEN_PROFILES = {
    "training_3000x2": lambda: synthetic.training_profile(3000, threads=2),
    "training_20000": lambda: synthetic.training_profile(20_000),
    "gpu_hand_made": gpu_profile,
    "gpu_training": gpu_training_profile,
    "hostile_names": lambda: synthetic.from_events(
        [{"name": n, "start": 10 * i, "end": 10 * i + 5, "scope": Scope.USER_SCOPE if i % 2 else Scope.FUNCTION,
          "shapes": [[i]], "dtypes": [n], "stack": [f"f{i}.py(1): {n}", "main.py(2): <module>"]}
         for i, n in enumerate(HOSTILE)], metadata={"trace_name": 'my "trace" ✓', "with_stack": True}),
    "partial_overlaps": lambda: synthetic.from_events([
        {"name": "outer", "start": 0, "end": 100}, {"name": "a", "start": 10, "end": 50},
        {"name": "b", "start": 40, "end": 80}, {"name": "c", "start": 90, "end": 130}]),
    "reader_rounding": rounding_profile,
    "thread_zero": lambda: synthetic.from_events(
        [{"name": "a", "start": 0, "end": 10, "thread": 0}, {"name": "b", "start": 0, "end": 10, "thread": 1}],
        memory=[{"time": 5, "bytes": 8, "thread": 0}]),
    "empty": lambda: synthetic.from_events([]),
}

GOLDEN_CHROME_SHA256 = {
    "empty": "52a7ba52f8cc0f15d6167bc395f6ffd32c38f0977a283995009c13104f426bea",
    "empty+args": "44a1e7bc8c435e3d48ed74d989171df7a9840a546a14e7c205fc38474023befc",
    "gpu_hand_made": "5a5e44b23d274ced72ca947a6063fb797ad02f44d55cabef13282e049a43bf99",
    "gpu_hand_made+args": "fddeb7ae266689871eedee39305132d72dafa8247f7e315a656bd8d1af2bc4d5",
    # gpu_training: recorded again when the kernel definition moved to profiler.device (issue
    # 30), the only change: a device interval that partially overlaps another of its stream
    # (threads sharing a stream) contains none, so it is a ``kernel`` as in the GPU analyses;
    # the export had called it an annotation after clamping the other into it.
    "gpu_training": "94c6f72a27ca25a39bb6c774c19b23e553bff9f2bdc83a36494e2c983e532b24",
    "gpu_training+args": "8d0d4bd4d0e12947a4d3f115e8a90981b210e9176974483ce3416312f75652dc",
    # hostile_names: recorded after the split with lone surrogates as U+FFFD (issue 15), the
    # only change: the unsplit exporter wrote "?" there.
    "hostile_names": "049b2473e2f3e5bdfa10527ef684d6ec64ce431b7e00a3f65802efda1e76c440",
    "hostile_names+args": "663aece1d7b0e41b6447ba6fcda30ab40f9ac4d49803d08ed080deaf9822b1d3",
    "partial_overlaps": "035a91d6a5ba587d6844912af0a18a8883ae82a7f2099d5718e1c81ae011d401",
    "partial_overlaps+args": "ebe7c49b79344722762829e122106de61f8d31e43ea705041b8fd222a6f93f03",
    "reader_rounding": "f8c920035e66c213ef48986440230216a2e986c6147fb7bdba525ae47aa8b3a7",
    "reader_rounding+args": "1186f47a26b450de888a584d08ff4f1e149b7ade6eb85203da0226cb4f3c7d9d",
    "thread_zero": "cced20f94b381b6916deaf3410c677937d1b5f1bfbd5242aa40942a25a5ea1de",
    "thread_zero+args": "9736e7b616fb66c104aea9e0ac784300e2ecd6eff410de34d18e4c690c39ed0b",
    "training_20000": "29c7dff2aee4eb2dbc3295f61512fa98b99564d6e9acb71055837b865035cc6b",
    "training_20000+args": "b92b88e5946b6e643aee27690e6d852dbc967a3b3a66c71eff1719b75e6e0352",
    "training_3000x2": "4ed34b69a783188f6155941a908797a2a91bc45fde0568a8b6fbeba7dda071c1",
    "training_3000x2+args": "ea7fae6ee8c52a4ece6b500ad134747f91930db9fbd3a4dfe4000f770e75a4aa",
}


def sha256_of_export(data, path, **kwargs) -> str:
    data.export_chrome_trace(path, **kwargs)
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("name", sorted(GOLDEN_PROFILES))
def test_export_is_byte_identical_to_the_unsplit_exporter(name, tmp_path):
    data = GOLDEN_PROFILES[name]()
    got = sha256_of_export(data, tmp_path / "t.json")
    assert got == GOLDEN_CHROME_SHA256[name]
    obj, _ = load_json(tmp_path / "t.json")
    jsonschema.validate(obj, TRACE_SCHEMA)
    assert_perfect_nesting(obj["traceEvents"])
    # Explicit header arguments, and gzip (compared uncompressed: gzip stores a time stamp).
    kwargs = {"distributed_info": {"rank": 1, "world_size": 2}, "trace_name": "named"}
    data.export_chrome_trace(tmp_path / "t.json.gz", **kwargs)
    with gzip.open(tmp_path / "t.json.gz", "rb") as f:
        unzipped = f.read()
    assert hashlib.sha256(unzipped).hexdigest() == GOLDEN_CHROME_SHA256[name + "+args"]


def test_layout_is_plain_data_and_leaves_the_profile_unchanged():
    """The layout step decides everything as numbers; the encoder only formats them. Clamping
    and rounding repairs work on copies: the profile's own columns are not touched."""
    from gradtrace.profiler.chrome_layout import chrome_layout

    data = GOLDEN_PROFILES["gpu_training"]()
    before = {k: v.copy() for k, v in data.event_columns.items()}
    layout = chrome_layout(data)
    assert all(np.array_equal(before[k], data.event_columns[k]) for k in before)
    assert layout.stats["clamped_overlaps"] > 0 and layout.stats["rounding_fixes"] > 0
    assert len(layout.cpu.ts) == layout.stats["cpu_events"] == data.n_events
    assert len(layout.device.ts) == layout.stats["device_events"]
    assert int(layout.device.is_kernel.sum()) == layout.stats["kernels"]
    assert len(layout.fwdbwd.id) == layout.stats["fwdbwd_flows"]
    assert len(layout.counters.ts) == layout.stats["counter_samples"]
    assert (layout.cpu.dur >= 0).all() and (layout.device.dur >= 0).all()
    # The encoder writes what the layout holds: first CPU event, times in exact microseconds.
    first = next(e for e in ct.ChromeTrace(layout.header, layout.stats, layout).events() if e["ph"] == "X")
    assert (ns(first["ts"]), ns(first["dur"])) == (int(layout.cpu.ts[0]), int(layout.cpu.dur[0]))
    assert first["tid"] == int(layout.cpu.tid[0]) and first["pid"] == layout.cpu.pid == 777
