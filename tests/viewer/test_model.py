"""The viewer's data layer as pure functions: rows, phases, timeline windows, graph, loading."""
from __future__ import annotations

import base64

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradtrace import profiler
from gradtrace.profiler import Scope, synthetic
from gradtrace.viewer.graph import colour_scale
from gradtrace.viewer.loading import UploadError, decode_upload
from gradtrace.viewer.model import ProfileView, phase_of_events, step_phase_sums
from gradtrace.viewer.timeline import TimelineIndex, _merge_runs

F, B, U = int(Scope.FUNCTION), int(Scope.BACKWARD_FUNCTION), int(Scope.USER_SCOPE)


@pytest.fixture(scope="module")
def mlp(profiles):
    return ProfileView(profiler.load(profiles["mlp"]), "mlp")


@pytest.fixture(scope="module")
def small():
    """step > forward > (linear > matmul), backward > MmBackward0, optimizer > sub."""
    events = [
        {"name": "ProfilerStep#0", "start": 0, "end": 100, "scope": U},
        {"name": "forward", "start": 1, "end": 40, "scope": U},
        {"name": "linear", "start": 2, "end": 30, "sequence_nr": -1},
        {"name": "matmul", "start": 3, "end": 20, "sequence_nr": 0, "shapes": [[2, 3], [3, 4]]},
        {"name": "backward", "start": 41, "end": 80, "scope": U},
        {"name": "MmBackward0", "start": 42, "end": 70, "scope": B, "sequence_nr": 0, "fwd_thread_id": 1},
        {"name": "AccumulateGrad", "start": 71, "end": 75, "scope": B},
        {"name": "Optimizer.step#SGD.step", "start": 81, "end": 95, "scope": U},
        {"name": "sub", "start": 82, "end": 90},
    ]
    memory = [{"time": 4, "bytes": 32, "addr": 1}, {"time": 50, "bytes": 64, "addr": 2},
              {"time": 60, "bytes": -32, "addr": 1}]
    return ProfileView(synthetic.from_events(events, memory, {"profile_memory": True}), "small")


def test_rows_agree_with_key_averages(mlp):
    rows = {r["name"]: r for r in mlp.rows("name")}
    ka = mlp.data.key_averages(merge_steps=True)       # as the CLI table: one ProfilerStep#* row
    assert set(rows) == {r.key for r in ka}
    for r in ka:
        row = rows[r.key]
        assert row["count"] == r.count
        for field in ("self_cpu_time_total", "cpu_time_total", "self_cuda_time_total", "cpu_memory_usage",
                      "self_cpu_memory_usage", "flops"):
            if field in row:
                assert row[field] == pytest.approx(getattr(r, field)), (r.key, field)
    assert sum(r["self_cpu_time_total_percent"] for r in rows.values()) == pytest.approx(100.0)


@pytest.mark.parametrize("group_by, field", [("shape", "input_shapes"), ("module", "module"),
                                             ("stack", "stack"), ("call_site", "stack")])
def test_groupings_split_name_rows(mlp, group_by, field):
    by_name = {r["name"]: r["count"] for r in mlp.rows("name")}
    rows = mlp.rows(group_by)
    assert len(rows) >= len(by_name)
    total = {}
    for r in rows:
        total[r["name"]] = total.get(r["name"], 0) + r["count"]
        assert field in r
    assert total == by_name
    # Drill-down: each row's events are exactly its calls.
    for r in rows:
        assert len(mlp.events_of_row(group_by, r["id"])) == r["count"]


def test_module_grouping_names_modules(mlp):
    modules = {(r["name"], r["module"]) for r in mlp.rows("module")}
    assert ("matmul", "Linear") in modules and ("matmul", "Head") in modules
    # A backward node belongs to its forward op's module.
    assert ("TanhBackward0", "Linear") in modules


def test_phases(small):
    phase = phase_of_events(small.data)
    names = [small.data.name_of(i) for i in range(small.data.n_events)]
    by_name = dict(zip(names, phase.tolist()))
    assert by_name["ProfilerStep#0"] == -1
    assert by_name["matmul"] == by_name["linear"] == by_name["forward"] == 0
    assert by_name["MmBackward0"] == by_name["AccumulateGrad"] == 1
    assert by_name["sub"] == 2
    split = small.phase_split("cpu")
    assert split.total == int(small.data.analysis.self_cpu_ns.sum())
    assert split.forward == 39 and split.optimizer == 14


def test_row_details_counterparts(small):
    rows = {r["name"]: r for r in small.rows("name")}
    d = small.row_details("name", rows["matmul"]["id"])
    assert d["n_calls"] == 1 and d["shapes"][0]["text"] == "[[2, 3], [3, 4]]"
    assert [c["name"] for c in d["counterparts"]] == ["MmBackward0"]
    d = small.row_details("name", rows["MmBackward0"]["id"])
    assert d["counterparts"][0]["relation"] == "forward op" and d["counterparts"][0]["name"] == "matmul"


def test_fwdbwd_rows_and_sentence(small, mlp):
    rows = {r["name"]: r for r in small.fwdbwd_rows("name")}
    assert rows["matmul"]["backward_cpu_time_total"] == pytest.approx(0.028)  # 28 ns, in us
    assert rows["linear"]["forward_backward_cpu_time_total"] == pytest.approx((28 + 28) / 1e3)
    assert "biggest cost" in mlp.biggest_cost_sentence()


def test_memory_by_op(small):
    """Freed: how much of the op's own allocations was freed later, wherever the free ran
    (matmul's 32 bytes are freed inside MmBackward0)."""
    rows = {r["name"]: r for r in small.memory_by_op()}
    assert rows["matmul"] == {"name": "matmul", "allocated": 32, "freed": 32, "net": 0, "allocations": 1}
    assert rows["MmBackward0"] == {"name": "MmBackward0", "allocated": 64, "freed": 0, "net": 64, "allocations": 1}


def test_memory_by_op_frees_in_a_real_profile(mlp):
    rows = mlp.memory_by_op()
    assert rows and sum(r["freed"] for r in rows) > 0          # not always 0 B
    assert all(0 <= r["freed"] <= r["allocated"] and r["net"] == r["allocated"] - r["freed"] for r in rows)


def test_step_phases_add_up_to_each_step(small, mlp):
    (step,) = small.step_phases()
    assert step["step"] == "ProfilerStep#0" and step["duration"] == 100
    assert sum(step[p] for p in ("forward", "backward", "optimizer", "other")) == 100
    assert step["backward"] > 0 and step["optimizer"] > 0 and step["other"] > 0
    for st in mlp.step_phases():
        assert st["other"] >= 0 and sum(st[p] for p in ("forward", "backward", "optimizer", "other")) >= st["duration"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 30)), min_size=1, max_size=8),
       st.lists(st.tuples(st.integers(0, 90), st.integers(-1, 2), st.integers(0, 1000)), max_size=60))
def test_step_phase_sums_by_slices_are_the_sums_by_search(steps, events):
    """Events in start order summed a slice per step, against a step found per event:
    steps that overlap, touch, start together or hold no event; events before, between,
    after and at the edges of steps."""
    starts = np.sort(np.array([s for s, _ in steps], dtype=np.int64))
    ends = starts + np.array([d for _, d in steps], dtype=np.int64)
    events = sorted(events)
    ev_start = np.array([e[0] for e in events], dtype=np.int64)
    phase = np.array([e[1] for e in events], dtype=np.int8)
    self_ns = np.array([e[2] for e in events], dtype=np.int64)
    search = step_phase_sums(starts, ends, ev_start, phase, self_ns, by_slices=False)
    assert np.array_equal(step_phase_sums(starts, ends, ev_start, phase, self_ns, by_slices=True), search)
    assert np.array_equal(step_phase_sums(starts, ends, ev_start, phase, self_ns), search)


def test_operator_rows_merge_steps_unless_per_step(mlp):
    merged = [r["name"] for r in mlp.rows("name")]
    per_step = [r["name"] for r in mlp.rows("name", per_step=True)]
    n_steps = len(mlp.data.step_ranges())
    assert n_steps >= 2
    assert merged.count("ProfilerStep#*") == 1 and not any(n[-1].isdigit() and n.startswith("ProfilerStep#") for n in merged)
    assert sum(n.startswith("ProfilerStep#") for n in per_step) == n_steps


def test_merge_runs():
    start = np.array([0, 10, 100, 0, 5])
    end = np.array([5, 20, 110, 4, 9])
    row = np.array([0, 0, 0, 1, 1])
    s, e, r, c = _merge_runs(start, end, row, gap=10)
    assert s.tolist() == [0, 100, 0] and e.tolist() == [20, 110, 9]
    assert r.tolist() == [0, 0, 1] and c.tolist() == [2, 1, 2]


def test_timeline_window_is_bounded():
    view = ProfileView(synthetic.training_profile(300_000), "big")
    index = TimelineIndex(view)
    assert len(index) == 300_000
    full = index.query(budget=5_000)
    assert full.n_in_window == 300_000
    assert 0 < full.n_segments <= 5_000
    assert full.merged_count.sum() + len(full.start) == 300_000
    # Zoomed in far enough, every range is drawn one by one.
    lo = int(index.start[len(index) // 2])
    zoom = index.query(lo, lo + 20_000, budget=5_000)
    assert len(zoom.merged_start) == 0 and 0 < len(zoom.start) == zoom.n_in_window
    assert (zoom.start < lo + 20_000).all() and (zoom.end > lo).all()
    # Lanes: one band per thread, rows = nesting depth.
    assert [lane.label for lane in index.lanes] == ["thread 1", "thread 2", "thread 3", "thread 4"]


def test_timeline_window_search_finds_exactly_the_overlapping_ranges():
    """The lane-by-lane binary search returns what a scan of every range would."""
    view = ProfileView(synthetic.training_profile(50_000), "mid")
    index = TimelineIndex(view)
    rng = np.random.default_rng(0)
    for _ in range(50):
        lo = int(rng.integers(-1_000, index.x_max))
        hi = lo + int(rng.choice([1, 1_000, 100_000, index.x_max]))
        found = index._in_window(lo, hi)
        assert np.array_equal(found, np.flatnonzero((index.start < hi) & (index.end > lo))), (lo, hi)


def test_timeline_levels_cover_every_range():
    """The precomputed zoom levels draw the same long ranges as merging on the fly, and every
    short range of the window lies inside a merged run of its row and kind."""
    view = ProfileView(synthetic.training_profile(200_000), "big")
    index = TimelineIndex(view)
    for lo_frac, width_frac in ((0.0, 1.0), (0.2, 0.5), (0.4, 0.05), (0.5, 0.01)):
        lo = int(index.x_max * lo_frac)
        hi = lo + max(1, int(index.x_max * width_frac))
        pixel = max(1, (hi - lo) // 2_000)
        assert index._level_for(pixel, 2_000) is not None
        big, runs, _ = index._segments(lo, hi, pixel, 2_000)
        in_win = np.flatnonzero((index.start < hi) & (index.end > lo))
        long = in_win[index.duration[in_win] >= pixel]
        assert sorted(big.tolist()) == sorted(long.tolist())
        short = in_win[index.duration[in_win] < pixel]
        rs, re, rk, rc = runs
        for k in short[:: max(1, len(short) // 500)]:
            inside = (rk == index.lane_key[k]) & (rs <= index.start[k]) & (re >= index.end[k])
            assert inside.any(), (lo_frac, width_frac, k)
        assert rc.sum() >= len(short)


def test_colour_scale():
    assert colour_scale([]) == []
    c = colour_scale([0, 10, 1000, 100_000])
    assert c == ["#fff7bc", "#fff7bc", "#fe9929", "#8c2d04"]  # log scale from the smallest positive


def _data_url(raw: bytes) -> str:
    return "data:application/octet-stream;base64," + base64.b64encode(raw).decode()


def test_decode_upload(profiles, tmp_path):
    raw = open(profiles["mlp"], "rb").read()
    data = decode_upload(_data_url(raw), "C:\\Users\\me\\run.gtprof", max_bytes=10 << 20)
    assert data.n_events > 0
    with pytest.raises(UploadError, match=r"^bad\.gtprof: ") as err:
        decode_upload(_data_url(open(profiles["bad"], "rb").read()), "/secret/dir/bad.gtprof", 10 << 20)
    assert "/secret" not in str(err.value) and "/tmp" not in str(err.value)
    with pytest.raises(UploadError, match="upload limit.*gradtrace view run.gtprof"):
        decode_upload(_data_url(raw), "run.gtprof", max_bytes=100)
    with pytest.raises(UploadError, match="not valid base64"):
        decode_upload("data:x;base64,@@@@", "run.gtprof", 1 << 20)
    with pytest.raises(UploadError, match="not a gradtrace profile"):
        decode_upload(_data_url(b'{"traceEvents": []}'), "trace.json", 1 << 20)
    with pytest.raises(UploadError, match="empty"):
        decode_upload(None, "x", 1 << 20)
