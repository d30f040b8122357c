"""schedule(): PyTorch's step semantics; profile(schedule=...): which steps end up recorded,
ProfilerStep#N ranges, on_trace_ready per cycle, and the file-per-cycle handler."""
import pytest

import gradtrace.autograd as ag
from gradtrace import profiler
from gradtrace.profiler import ProfilerAction as A

N, W, R, S = A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE

SCHEDULES = [
    (dict(wait=1, warmup=1, active=2), [N, W, R, S, N, W, R, S, N, W]),
    (dict(wait=0, warmup=0, active=1), [S, S, S, S]),
    (dict(wait=1, warmup=1, active=2, repeat=1), [N, W, R, S, N, N, N, N]),
    (dict(wait=2, warmup=0, active=1, repeat=2, skip_first=3), [N, N, N, N, N, S, N, N, S, N, N, N]),
    (dict(wait=0, warmup=2, active=3), [W, W, R, R, S, W, W, R]),
]


@pytest.mark.parametrize("kwargs, actions", SCHEDULES)
def test_schedule_actions(kwargs, actions):
    fn = profiler.schedule(**kwargs)
    assert [fn(step) for step in range(len(actions))] == actions


def test_schedule_positional_like_the_issue():
    assert profiler.schedule(1, 1, 2)(3) is S


@pytest.mark.parametrize("kwargs", [dict(wait=-1, warmup=0, active=1), dict(wait=0, warmup=0, active=0),
                                    dict(wait=0, warmup=0, active=1, repeat=-2)])
def test_schedule_rejects_bad_values(kwargs):
    with pytest.raises(ValueError):
        profiler.schedule(**kwargs)


def _run(schedule, n_steps, **kwargs):
    """Run n_steps training 'steps', each doing one op inside a record_function("work{i}")."""
    cycles = []

    def ready(prof):
        data = prof.profile_data
        names = [e.name for e in data.events()]
        cycles.append({
            "work": sorted(int(n[4:]) for n in names if n.startswith("work")),
            "steps": sorted(int(n.split("#")[1]) for n in names if n.startswith("ProfilerStep#")),
            "step_num": prof.step_num,
            "data": data,
        })

    x = ag.randn(4)
    with profiler.profile(schedule=schedule, on_trace_ready=ready, **kwargs) as prof:
        for i in range(n_steps):
            with profiler.record_function(f"work{i}"):
                x * 2.0
            prof.step()
    return prof, cycles


def test_recorded_steps_follow_the_schedule():
    sched = profiler.schedule(wait=1, warmup=1, active=2, repeat=2, skip_first=1)
    prof, cycles = _run(sched, 12)
    # skip 0; cycle 1: wait 1, warmup 2, record 3-4; cycle 2: wait 5, warmup 6, record 7-8.
    assert [c["work"] for c in cycles] == [[3, 4], [7, 8]]
    assert [c["steps"] for c in cycles] == [[3, 4], [7, 8]]
    # Like PyTorch, on_trace_ready runs inside step(), after step_num moved to the next step.
    assert [c["step_num"] for c in cycles] == [5, 9]
    assert [c["data"].metadata["steps"] for c in cycles] == [[3, 4], [7, 8]]
    assert prof.profile_data is cycles[-1]["data"]


def test_step_ranges_contain_the_step_work():
    _, cycles = _run(profiler.schedule(wait=0, warmup=0, active=3, repeat=1), 5)
    data = cycles[0]["data"]
    steps = data.step_ranges()
    assert [name for name, _, _ in steps] == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]
    events = data.events()
    for e in events:
        if e.name.startswith("work"):
            assert e.cpu_parent.name == f"ProfilerStep#{e.name[4:]}"
    # The step ranges are the top level; everything else nests in them.
    assert {e.name for e in events if e.cpu_parent is None} == {n for n, _, _ in steps}


def test_stop_inside_a_recording_cycle_delivers_it():
    _, cycles = _run(profiler.schedule(wait=1, warmup=0, active=5), 3)
    assert [c["work"] for c in cycles] == [[1, 2]]


def test_stop_in_warmup_delivers_nothing():
    _, cycles = _run(profiler.schedule(wait=1, warmup=5, active=1), 3)
    assert cycles == []


def test_save_profile_handler_writes_one_file_per_cycle(tmp_path):
    handler = profiler.save_profile_handler(tmp_path / "runs", worker_name="w0")
    x = ag.randn(4)
    with profiler.profile(schedule=profiler.schedule(wait=0, warmup=1, active=1, repeat=3),
                          on_trace_ready=handler) as prof:
        for i in range(8):
            with profiler.record_function(f"work{i}"):
                x + 1.0
            prof.step()
    files = sorted((tmp_path / "runs").glob("*.gtprof"))
    assert [f.name.split(".")[1] for f in files] == ["step1", "step3", "step5"]
    assert all(f.name.startswith("w0.") for f in files)
    works = [[e.name for e in profiler.load(f).events() if e.name.startswith("work")] for f in files]
    assert works == [["work1"], ["work3"], ["work5"]]



def test_every_step_records_a_step_range_without_a_schedule():
    """As torch's profiler under a schedule, but always: ProfilerStep#N spans from one step()
    to the next, so time between ops (a data-loading sleep) belongs to a step."""
    import time

    x = ag.randn(4)
    with profiler.profile() as prof:
        for _ in range(3):
            time.sleep(0.002)                   # outside every op, inside the step
            x * 2.0
            prof.step()
    data = prof.profile_data
    names = [n for n, _, _ in data.step_ranges()]
    assert names == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]
    (_, s0, e0), (_, s1, _) = data.step_ranges()[:2]
    assert e0 <= s1 and e0 - s0 >= 2_000_000        # the sleep is inside step 0
    # Merged, the steps are one row holding the time outside ops.
    merged = {r.key: r for r in data.key_averages(merge_steps=True)}
    assert merged["ProfilerStep#*"].count == 4
    assert merged["ProfilerStep#*"].self_cpu_time_total >= 3 * 2000


def test_no_step_call_no_step_range():
    x = ag.randn(4)
    with profiler.profile() as prof:
        x * 2.0
    assert prof.profile_data.step_ranges() == []
