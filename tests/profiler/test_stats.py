"""profiler.stats and the statistical columns of profiler.diff: per-step samples, the test, verdicts."""
from pathlib import Path

import numpy as np
import pytest

from gradtrace import profiler
from gradtrace.profiler import Scope, stats, synthetic

from . import kineto_samples as ks
from .regression_workload import record_interleaved

U = 1000  # ns per us


def steps_profile(n_steps, matmul_us=100.0, noise=0.05, seed=0, empty_last=False):
    """``n_steps`` ProfilerStep ranges of 1 ms: matmul (noisy), relu inside forward, a
    backward node; times in ns."""
    rng = np.random.default_rng(seed)
    events, t = [], 0
    for i in range(n_steps):
        mm = int(matmul_us * U * rng.lognormal(0.0, noise))
        events += [
            {"name": f"ProfilerStep#{i}", "start": t, "end": t + 1000 * U, "scope": Scope.USER_SCOPE},
            {"name": "forward", "start": t + 1 * U, "end": t + 500 * U, "scope": Scope.USER_SCOPE},
            {"name": "matmul", "start": t + 2 * U, "end": t + 2 * U + mm, "sequence_nr": 2 * i},
            {"name": "relu", "start": t + 400 * U, "end": t + 450 * U, "sequence_nr": 2 * i + 1},
            {"name": "ReluBackward0", "start": t + 600 * U, "end": t + 650 * U,
             "scope": Scope.BACKWARD_FUNCTION, "sequence_nr": 2 * i + 1, "fwd_thread_id": 1},
        ]
        t += 1000 * U
    if empty_last:
        events.append({"name": f"ProfilerStep#{n_steps}", "start": t, "end": t + 5 * U,
                       "scope": Scope.USER_SCOPE})
    return synthetic.from_events(events)


def test_the_fewest_steps_for_a_verdict_follow_from_the_exact_test():
    # two-sided Mann-Whitney U: smallest p = 2 / C(n_a + n_b, n_a)
    assert stats.min_steps(0.05) == 4            # 2 / 70 = 0.029; with 3 a side 2 / 20 = 0.1
    assert not stats.significance_possible(3, 3)
    assert stats.significance_possible(2, 8)     # 2 / 45 = 0.044
    assert not stats.significance_possible(1, 30)
    assert stats.min_steps(0.01) == 5            # 2 / 252 = 0.008; 2 / 70 > 0.01


def test_per_step_samples_are_self_times_per_step_and_empty_steps_are_dropped():
    s = stats.step_samples(steps_profile(5, noise=0.0, empty_last=True))
    assert s.n_steps == 5                        # the empty trailing step is no sample
    np.testing.assert_array_equal(s.step_ns, np.full(5, 1000 * U))
    ops = dict(zip(s.names["op"], s.values["op"].T))
    np.testing.assert_array_equal(ops["matmul"], np.full(5, 100 * U))
    # forward's self time excludes matmul and relu inside it: no double counting
    np.testing.assert_array_equal(ops["forward"], np.full(5, (499 - 100 - 50) * U))
    assert "ProfilerStep#0" not in ops           # the step row stands for the step ranges
    phases = dict(zip(s.names["phase"], s.values["phase"].T))
    np.testing.assert_array_equal(phases["backward"], np.full(5, 50 * U))
    assert (phases["forward"] + phases["backward"] + phases["other"] == 1000 * U).all()


def test_a_planted_slowdown_is_slower_and_an_identical_run_unchanged():
    a = steps_profile(20, seed=1)
    d = profiler.diff(a, steps_profile(20, matmul_us=130.0, seed=2))
    matmul = next(r for r in d if r.name == "matmul")
    assert matmul.verdict == "slower" and matmul.stats.ci_low > 1.0
    assert matmul.ratio == pytest.approx(1.3, rel=0.1)
    same = profiler.diff(a, steps_profile(20, seed=3))
    assert [r.name for r in same.tested() if r.verdict != "unchanged"] == []
    assert same.regressions(0) == []


def test_rows_under_the_share_are_shown_but_not_tested():
    d = profiler.diff(steps_profile(10, seed=1), steps_profile(10, seed=2), min_share=0.2)
    relu = next(r for r in d if r.name == "relu")           # 5% of the step
    assert relu.stats is not None and not relu.stats.tested and relu.verdict is None
    assert relu.to_dict()["ratio"] == pytest.approx(1.0)


def test_too_few_steps_says_how_many_are_needed():
    d = profiler.diff(steps_profile(3, seed=1), steps_profile(3, matmul_us=300, seed=2))
    assert {r.verdict for r in d.tested()} == {"too few steps"}
    assert "at least 4 per run" in d.stats_note()
    none = profiler.diff(synthetic.from_events([{"name": "x", "start": 0, "end": 10}]),
                         synthetic.from_events([{"name": "x", "start": 0, "end": 20}]))
    assert none.tested() == [] and none.components == []      # no steps: nothing to test
    assert "no verdicts" in none.stats_note()


def test_json_rows_keep_their_fields_and_gain_the_statistics():
    d = profiler.diff(steps_profile(8, seed=1), steps_profile(8, seed=2))
    row = next(r for r in d.rows() if r["name"] == "matmul")
    for key in ("self_cpu_time_total_a", "self_cpu_time_total_rel", "count_delta", "ratio", "ci_low",
                "ci_high", "p_value", "q_value", "verdict"):
        assert key in row
    kinds = {c["kind"] for c in d.component_rows()}
    assert kinds == {"step", "phase"}
    assert "Verdict" in d.table()


def test_the_same_profiles_give_the_same_intervals():
    a, b = steps_profile(12, seed=1), steps_profile(12, seed=2)
    assert profiler.diff(a, b).rows() == profiler.diff(a, b).rows()


def test_a_custom_op_that_busy_waits_longer_is_slower_with_an_interval_above_one():
    a, b = record_interleaved(slow_b=1.3, steps=50)
    d = profiler.diff(a, b)
    spin = next(r for r in d if r.name == "Spin")
    assert spin.verdict == "slower", spin.stats
    assert spin.stats.ci_low > 1.0 and spin.stats.q_value < 0.05
    assert "Spin" in {r.name for r in d.regressions(0)}


def test_two_runs_of_one_workload_flag_nothing_over_one_percent_of_the_step():
    a, b = record_interleaved(slow_b=1.0, steps=50, seed=1)
    # alpha 0.001, not 0.05: at 0.05 a correct test flags an A/A pair in up to 5% of runs (the
    # benchmark measures that rate); this test checks for a systematic bias, without flaking.
    d = profiler.diff(a, b, alpha=0.001)
    flagged = [(r.kind, r.name, r.ratio, r.ci) for r in d.tested() if r.verdict in ("slower", "faster")]
    assert flagged == []
    assert any(r.tested and r.kind == "op" for r in d.tested())


def test_the_forward_op_view_tests_forward_plus_backward_self_time():
    d = profiler.diff(steps_profile(12, seed=1), steps_profile(12, matmul_us=150, seed=2), by="forward_backward")
    rows = {r.name: r for r in d}
    assert rows["matmul"].verdict == "slower"
    assert rows["relu"].verdict == "unchanged"
    # relu's row carries its backward node: 50 us forward + 50 us ReluBackward0 per step
    relu = stats.step_samples(steps_profile(4, seed=1), by="forward_backward")
    np.testing.assert_array_equal(relu.values["op"][:, relu.names["op"].index("relu")], np.full(4, 100 * U))


STEP_TRACES = [ks.GPU_1STEP] + ([ks.FIVE_STEPS] if ks.FIVE_STEPS.exists() else [])


@pytest.mark.parametrize("path", STEP_TRACES, ids=lambda p: p.name)
def test_a_gpu_trace_has_kernel_rows_on_the_device_clock(path):
    data = profiler.load(path)
    s = stats.step_samples(data, "cuda")
    assert s.n_steps == len(data.step_ranges()) and len(s.names["kernel"]) > 50
    # each kernel counts once, in the step of its launch: over all steps, no more kernel time
    # than the trace's device time
    total = data.total_average().self_cuda_time_total * 1e3
    assert s.values["kernel"].sum() <= total + 1
    d = profiler.diff(data, data, sort_by="self_cuda_time_total")
    assert d.clock == "cuda"
    # A verdict needs steps: the five-step original has enough, one step has none to test.
    if stats.significance_possible(s.n_steps, s.n_steps):
        assert any(c.kind == "kernel" and c.tested for c in d.components)
        assert {r.verdict for r in d.tested()} == {"unchanged"}
    else:
        assert {r.verdict for r in d.tested()} == {"too few steps"}
