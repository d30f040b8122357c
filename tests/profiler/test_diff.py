"""profiler.diff: per op name and per forward op (with its backward cost)."""
import pytest

from gradtrace import profiler
from gradtrace.profiler import Scope, synthetic
from gradtrace.profiler.profile_diff import ProfileDiff

from .test_chrome_trace import make_mlp, mlp_step

B = Scope.BACKWARD_FUNCTION


def step_events(t0, matmul_us=10, relu_bwd_us=4, extra_op=None):
    """One hand-made training step (times in us -> ns)."""
    u = 1000
    ev = [
        {"name": "step", "start": t0, "end": t0 + 100 * u, "scope": Scope.USER_SCOPE},
        {"name": "matmul", "start": t0 + 1 * u, "end": t0 + (1 + matmul_us) * u, "sequence_nr": 0},
        {"name": "relu", "start": t0 + 30 * u, "end": t0 + 33 * u, "sequence_nr": 1},
        {"name": "ReluBackward0", "start": t0 + 40 * u, "end": t0 + (40 + relu_bwd_us) * u,
         "scope": B, "sequence_nr": 1, "fwd_thread_id": 1},
        {"name": "MmBackward0", "start": t0 + 50 * u, "end": t0 + 58 * u,
         "scope": B, "sequence_nr": 0, "fwd_thread_id": 1},
    ]
    if extra_op:
        ev.append({"name": extra_op, "start": t0 + 60 * u, "end": t0 + 65 * u})
    return ev


def profile_of(**kw):
    return synthetic.from_events(step_events(0, **kw))


def test_diff_with_itself_is_all_zeros():
    params = make_mlp()
    with profiler.profile() as prof:
        mlp_step(*params)
    for by in ("name", "forward_backward"):
        d = profiler.diff(prof, prof.profile_data, by=by)
        assert isinstance(d, ProfileDiff) and len(d) > 0
        for row in d.rows():
            assert row["status"] == "both" and row["count_delta"] == 0
            for key, value in row.items():
                if key.endswith("_delta"):
                    assert value == 0
                if key.endswith("_rel"):
                    assert value in (0.0, None)
        assert "Self CPU time total" in d.table()


def test_diff_detects_a_planted_slowdown():
    a = profile_of(matmul_us=10)
    b = profile_of(matmul_us=25)
    d = profiler.diff(a, b)
    top = d[0]
    assert top.name == "matmul" and top.status == "both"
    assert top.delta("self_cpu_time_total") == pytest.approx(15.0)
    assert top.relative("self_cpu_time_total") == pytest.approx(1.5)
    # the enclosing step's self time shrinks by as much: second largest change
    assert d[1].name == "step" and d[1].delta("self_cpu_time_total") == pytest.approx(-15.0)
    assert all(r.delta("self_cpu_time_total") == 0 for r in list(d)[2:])
    text = d.table()
    assert "matmul" in text and "+150.00%" in text
    row = d.rows()[0]
    assert row["self_cpu_time_total_a"] == pytest.approx(10.0)
    assert row["self_cpu_time_total_b"] == pytest.approx(25.0)
    assert row["self_cpu_time_total_delta"] == pytest.approx(15.0)


def test_forward_backward_view_charges_backward_slowdown_to_the_forward_op():
    a = profile_of(relu_bwd_us=4)
    b = profile_of(relu_bwd_us=9)
    d = profiler.diff(a, b, by="forward_backward")
    assert d.sort_by == "forward_backward_cpu_time_total"
    top = d[0]
    assert top.name == "relu"
    assert top.delta("backward_cpu_time_total") == pytest.approx(5.0)
    assert top.delta("forward_backward_cpu_time_total") == pytest.approx(5.0)
    assert top.delta("cpu_time_total") == 0
    assert {r.name for r in d} == {"matmul", "relu"}
    assert "Fwd+Bwd CPU" in d.table()


def test_ops_on_one_side_only_are_marked():
    a = profile_of(extra_op="dropout")
    b = profile_of(extra_op="gelu")
    d = profiler.diff(a, b)
    status = {r.name: r.status for r in d}
    assert status["dropout"] == "only_a" and status["gelu"] == "only_b"
    assert status["matmul"] == "both"
    gelu = next(r for r in d if r.name == "gelu")
    assert gelu.count_a == 0 and gelu.count_b == 1 and gelu.relative("self_cpu_time_total") is None
    text = d.table()
    assert "B only" in text and "A only" in text and "new" in text and "gone" in text
    # largest absolute changes first: the 5 us ops that appear/disappear
    assert {d[0].name, d[1].name} == {"dropout", "gelu"}


def test_diff_reads_saved_profiles(tmp_path):
    a, b = profile_of(matmul_us=10), profile_of(matmul_us=12)
    a.save(tmp_path / "a.gtprof")
    b.save(tmp_path / "b.gtprof")
    from_files = profiler.diff(str(tmp_path / "a.gtprof"), tmp_path / "b.gtprof").rows()
    assert from_files == profiler.diff(a, b).rows()


def test_bad_arguments():
    a = profile_of()
    with pytest.raises(ValueError, match="by="):
        profiler.diff(a, a, by="stack")
    with pytest.raises(ValueError, match="sort_by"):
        profiler.diff(a, a, sort_by="nope")
    with pytest.raises(TypeError):
        profiler.diff(a, 42)
    with pytest.raises(ValueError, match="unknown metrics"):
        profiler.diff(a, a).table(metrics=["flops"])


def test_cuda_columns_appear_when_a_profile_has_device_time():
    from .test_chrome_trace import gpu_profile

    g = gpu_profile()
    d = profiler.diff(g, g)
    assert d.has_cuda and "Self CUDA A" in d.table()
    assert "Self CUDA A" not in profiler.diff(profile_of(), profile_of()).table()
