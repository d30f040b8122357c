"""Folded stacks and speedscope export."""
import gzip
import hashlib
import json
from collections import Counter

import jsonschema
import pytest

from gradtrace import profiler
from gradtrace.profiler import Scope, synthetic
from gradtrace.profiler.stacks import export_speedscope, folded_stacks, sanitize_frame, speedscope

from .test_chrome_trace import GOLDEN_PROFILES, gpu_profile, make_mlp, mlp_step

# The parts of speedscope's file-format-schema.json that an evented file uses.
SPEEDSCOPE_SCHEMA = {
    "type": "object",
    "required": ["$schema", "shared", "profiles"],
    "properties": {
        "$schema": {"const": "https://www.speedscope.app/file-format-schema.json"},
        "shared": {"type": "object", "required": ["frames"], "properties": {"frames": {
            "type": "array", "items": {"type": "object", "required": ["name"], "properties": {
                "name": {"type": "string"}, "file": {"type": "string"},
                "line": {"type": "number"}, "col": {"type": "number"}}}}}},
        "profiles": {"type": "array", "items": {
            "type": "object",
            "required": ["type", "name", "unit", "startValue", "endValue", "events"],
            "properties": {
                "type": {"const": "evented"}, "name": {"type": "string"},
                "unit": {"enum": ["none", "nanoseconds", "microseconds", "milliseconds", "seconds", "bytes"]},
                "startValue": {"type": "number"}, "endValue": {"type": "number"},
                "events": {"type": "array", "items": {
                    "type": "object", "required": ["type", "at", "frame"],
                    "properties": {"type": {"enum": ["O", "C"]}, "at": {"type": "number"},
                                   "frame": {"type": "integer", "minimum": 0}}}}}}},
        "name": {"type": "string"}, "activeProfileIndex": {"type": "number"},
        "exporter": {"type": "string"},
    },
}


@pytest.fixture(scope="module")
def engine_data():
    params = make_mlp()
    with profiler.profile(record_shapes=True, with_stack=True) as prof:
        for _ in range(3):
            mlp_step(*params)
    return prof.profile_data


def parse_folded(lines):
    """(frames, value) per line; value an integer number of microseconds."""
    out = []
    for line in lines:
        stack, value = line.rsplit(" ", 1)
        assert value.isdigit() and " " not in stack and "\n" not in stack
        out.append((stack.split(";"), int(value)))
    return out


def assert_totals_match_table(data, lines, metric):
    per_leaf = Counter()
    for frames, value in parse_folded(lines):
        per_leaf[frames[-1]] += value
    table = Counter()
    for row in data.key_averages():
        table[sanitize_frame(row.key)] += getattr(row, metric)
    for name, us in table.items():
        assert abs(per_leaf[name] - us) <= 0.5, (name, per_leaf[name], us)
    assert set(per_leaf) <= set(table)


@pytest.mark.parametrize("metric", ["self_cpu_time_total"])
def test_folded_totals_equal_table_self_times_engine(engine_data, tmp_path, metric):
    path = tmp_path / "stacks.txt"
    engine_data.export_stacks(path, metric)
    lines = path.read_text().splitlines()
    assert lines == folded_stacks(engine_data, metric)
    assert_totals_match_table(engine_data, lines, metric)


def test_folded_totals_equal_table_on_large_synthetic_profile():
    data = synthetic.training_profile(50_000, threads=3)
    assert_totals_match_table(data, folded_stacks(data), "self_cpu_time_total")


def test_folded_cuda_metric():
    data = gpu_profile()
    lines = folded_stacks(data, "self_cuda_time_total")
    assert lines
    assert_totals_match_table(data, lines, "self_cuda_time_total")
    with pytest.raises(ValueError, match="metric"):
        folded_stacks(data, "wall_time")


def test_python_stack_first_then_op_nesting_and_backward_under_forward_call_site(engine_data):
    parsed = parse_folded(folded_stacks(engine_data))
    here = "test_chrome_trace.py"
    matmul = [f for f, _ in parsed if f[-1] == "matmul"]
    assert matmul
    for frames in matmul:
        # Python frames (outermost first) ... then the op nesting: forward;matmul
        assert frames[-2:] == ["forward", "matmul"]
        assert here in frames[-3]
    # A backward node sits under the call site of the forward op that created it: the two
    # matmuls (two lines of mlp_step) give two MmBackward0 stacks, one under each line.
    cols = engine_data.event_columns
    a = engine_data.analysis
    sites = {sanitize_frame(engine_data.stack_of(int(cols["stack_id"][int(a.forward_event[i])]))[0])
             for i in range(engine_data.n_events)
             if engine_data.name_of(i) == "MmBackward0" and a.forward_event[i] >= 0}
    assert len(sites) == 2
    mm_bwd = [f for f, _ in parsed if f[-1] == "MmBackward0"]
    assert {frames[-3] for frames in mm_bwd} == sites
    for frames in mm_bwd:
        assert frames[-2:] == ["backward", "MmBackward0"]


def test_frames_are_sanitised():
    data = synthetic.from_events([
        {"name": "a; b\nc", "start": 0, "end": 100_000, "scope": Scope.USER_SCOPE,
         "stack": ["my file.py(3): f g", "main.py(1): <module>"]},
        {"name": "op\tx", "start": 10_000, "end": 40_000},
    ])
    lines = folded_stacks(data)
    assert lines == ["main.py(1):_<module>;my_file.py(3):_f_g;a,_b_c 70",
                     "main.py(1):_<module>;my_file.py(3):_f_g;a,_b_c;op_x 30"]
    parse_folded(lines)


def test_without_stacks_lines_are_the_op_nesting():
    data = synthetic.from_intervals([[0, 10_000], [1_000, 3_000], [3_000, 4_000]], names=["step", "mm", "add"])
    assert folded_stacks(data) == ["step 7", "step;add 1", "step;mm 2"]


def check_evented(doc):
    jsonschema.validate(doc, SPEEDSCOPE_SCHEMA)
    n_frames = len(doc["shared"]["frames"])
    for prof in doc["profiles"]:
        stack, last = [], prof["startValue"]
        for ev in prof["events"]:
            assert ev["at"] >= last and 0 <= ev["frame"] < n_frames
            last = ev["at"]
            if ev["type"] == "O":
                stack.append(ev["frame"])
            else:
                assert stack.pop() == ev["frame"]
        assert not stack and last <= prof["endValue"]


def test_speedscope_export_is_valid_and_balanced(engine_data, tmp_path):
    engine_data.export_speedscope(tmp_path / "s.json")
    doc = json.loads((tmp_path / "s.json").read_text(encoding="utf-8"))
    check_evented(doc)
    assert doc == json.loads(json.dumps(speedscope(engine_data)))
    opens = sum(1 for p in doc["profiles"] for e in p["events"] if e["type"] == "O")
    assert opens == engine_data.n_events


def test_speedscope_gpu_streams_and_overlaps(tmp_path):
    data = gpu_profile()
    doc = speedscope(data)
    check_evented(doc)
    assert [p["name"] for p in doc["profiles"]][:1] == ["CPU thread 1"]
    assert len(doc["profiles"]) == 4          # CPU thread, cuda:0 x 2 streams, cuda:1
    overlapping = synthetic.from_events([{"name": "a", "start": 0, "end": 10},
                                         {"name": "b", "start": 5, "end": 20}])
    check_evented(speedscope(overlapping))
    overlapping.export_speedscope(tmp_path / "o.json.gz")
    with gzip.open(tmp_path / "o.json.gz", "rt", encoding="utf-8") as f:
        check_evented(json.load(f))


def test_saved_profile_exports_the_same_stacks(engine_data, tmp_path):
    engine_data.save(tmp_path / "p.gtprof")
    loaded = profiler.load(tmp_path / "p.gtprof")
    assert folded_stacks(loaded) == folded_stacks(engine_data)
    assert speedscope(loaded) == speedscope(engine_data)


def test_live_profile_methods(tmp_path):
    params = make_mlp()
    with profiler.profile() as prof:
        mlp_step(*params)
    prof.export_stacks(tmp_path / "a.folded")
    prof.export_speedscope(tmp_path / "a.speedscope.json")
    assert (tmp_path / "a.folded").read_text().strip()
    check_evented(json.loads((tmp_path / "a.speedscope.json").read_text(encoding="utf-8")))


# sha256 of folded stacks (both metrics) and speedscope JSON, recorded before the Chrome trace
# exporter was split (stacks.py shares its nesting repair): the split must not change a byte.
GOLDEN_STACKS_SHA256 = {
    "empty": "6af2197fa46179d67dc252a491eeb46afc982be36c65231b85e7c42f7ecacad1",
    "gpu_hand_made": "88602beaffc957b2375189466b0a4be826fedd15143014a6b2d1e201dcf9b2bc",
    "gpu_training": "65ff34c45f7b4145b23e8bcf102e29b4cec8b24702905c1ab05920baab5c38d6",
    # hostile_names: recorded after the split with lone surrogates as U+FFFD (issue 15), the
    # only change: the unsplit exporter wrote "?" there.
    "hostile_names": "d0cbc37e507c471f03b5e2cde2d5a8293d7755938b5ef450bf7c2b45ab05924d",
    "partial_overlaps": "eb258a80049e9559b0528abccb9b3f89b60464ec68bc16ad6fb340c4889302ae",
    "reader_rounding": "95ac9c2295cb84b2a08cdb6f92d1b56ee3c1b975ec5b27fd5c5717f516d8aee2",
    "thread_zero": "3b8cb09e3621affda95ce531e184158e303fa122e06ef8ab4cfe64338767695e",
    "training_20000": "af3252ecf23397410c35621d7f4f194f424f7d680fd3a1ef9617cf225ac1b7f8",
    "training_3000x2": "48d0ddbcb1f3cb95440b701c29149193f18734f93c4031939106e62a85affa6b",
}


def stacks_fingerprint(data, tmp_path) -> str:
    h = hashlib.sha256()
    for metric in ("self_cpu_time_total", "self_cuda_time_total"):
        h.update("\n".join(folded_stacks(data, metric)).encode("utf-8") + b"\0")
    export_speedscope(data, tmp_path / "s.json")
    h.update((tmp_path / "s.json").read_bytes())
    return h.hexdigest()


@pytest.mark.parametrize("name", sorted(GOLDEN_PROFILES))
def test_stacks_are_byte_identical_to_before_the_split(name, tmp_path):
    data = GOLDEN_PROFILES[name]()
    assert stacks_fingerprint(data, tmp_path) == GOLDEN_STACKS_SHA256[name]
    if data.n_events:
        check_evented(json.loads((tmp_path / "s.json").read_bytes()))
