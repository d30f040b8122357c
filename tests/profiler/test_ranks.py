"""profiler/ranks.py on hand-written intervals and on a folder of torch traces, one per rank
(the gradtrace run-folder path is tested end to end in tests/cli/test_run_nproc.py)."""
import json

import pytest

from gradtrace.profiler.ranks import COMMUNICATION, intersect, load_run, merge, overlap_ns, summarize_run
from tests.profiler.rank_traces import EXPECTED, rank_trace, write_rank_traces


def test_merge_joins_overlapping_and_touching_intervals_and_drops_empty_ones():
    assert merge([[5, 7], [0, 2], [1, 3], [3, 4], [8, 8]]) == [[0, 4], [5, 7]]


def test_overlap_of_two_interval_lists():
    comm = merge([[0, 10], [20, 30]])
    compute = merge([[5, 25]])
    assert overlap_ns(comm, compute) == 5 + 5
    assert overlap_ns(comm, [[40, 50]]) == 0
    assert overlap_ns(comm, comm) == 20


# --------------------------------------------------------------------------- torch traces, one per rank

def test_intersect_of_two_interval_lists():
    assert intersect(merge([[0, 10], [20, 30]]), merge([[5, 25]])) == [[5, 10], [20, 25]]
    assert intersect([[0, 1]], [[2, 3]]) == []


@pytest.mark.parametrize("name, is_comm", [
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", True), ("record_param_comms", True), ("nccl:all_reduce", True),
    ("c10d::allreduce_", True), ("gloo:broadcast", True), ("c10d::_reduce_scatter_base_", True),
    ("c10d::allgather_", True), ("mpi:wait", True), ("aten::broadcast_tensors", False), ("aten::mm", False),
    ("ampere_sgemm_128x64_nn", False)])
def test_communication_names(name, is_comm):
    assert (COMMUNICATION.search(name) is not None) is is_comm


def test_folder_of_torch_traces_per_rank_and_step(tmp_path):
    write_rank_traces(tmp_path)
    profiles = load_run(tmp_path)
    assert list(profiles) == [0, 1]                      # ranks from distributedInfo, not the file names
    summary = summarize_run(profiles)
    keys = ("step_ns", "compute_ns", "communication_ns", "exposed_ns", "hidden_ns", "idle_ns")
    for rank, rows in EXPECTED.items():
        got = [tuple(r[k] / 1e3 for k in keys) for r in summary["step_times"] if r["rank"] == rank]
        assert got == [pytest.approx(row) for row in rows], rank
    assert [(s["step"], s["slowest_rank"], s["spread_ns"]) for s in summary["steps"]] == [
        ("ProfilerStep#1", 0, 0), ("ProfilerStep#2", 1, 500_000)]
    rank1 = summary["ranks"][1]
    assert rank1["step_ns"] == 1_250_000 and rank1["slowest_in"] == 1
    assert rank1["hidden_share"] == pytest.approx(200 / 900)
    # Common clock: baseTimeNanoseconds; rank 1's trace starts 50 us later.
    assert summary["clock"].startswith("wall clock")
    starts = {(r["rank"], r["step"]): r["start_ns"] for r in summary["step_times"]}
    assert starts[0, "ProfilerStep#1"] == 0 and starts[1, "ProfilerStep#1"] == 50_000
    assert starts[1, "ProfilerStep#2"] == 1_050_000
    assert summary["basis"] == {0: "device", 1: "device"}
    for r in summary["step_times"]:   # the parts of a step add up to it
        assert r["memory_ns"] == 0     # no memcpy or memset in these traces
        assert r["compute_ns"] + r["exposed_ns"] + r["memory_ns"] + r["idle_ns"] == r["step_ns"]


def test_rank_from_file_name_and_first_step_clock(tmp_path):
    for rank in (0, 1):
        doc = rank_trace(rank, with_rank=False)
        del doc["baseTimeNanoseconds"]
        for e in doc["traceEvents"]:
            e["ts"] += 7_000 * rank     # unrelated clocks: align on the first ProfilerStep
        (tmp_path / f"job_rank_{rank}.pt.trace.json").write_text(json.dumps(doc))
    summary = summarize_run(load_run(tmp_path))
    assert [r["rank"] for r in summary["ranks"]] == [0, 1]
    assert summary["clock"].startswith("first ProfilerStep")
    assert {r["start_ns"] for r in summary["step_times"] if r["step"] == "ProfilerStep#1"} == {0}


def test_rank_missing_or_repeated_is_an_error(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(rank_trace(0, with_rank=False)))
    with pytest.raises(ValueError, match="no rank"):
        load_run(tmp_path)
    (tmp_path / "a.json").write_text(json.dumps(rank_trace(0)))
    (tmp_path / "b.json").write_text(json.dumps(rank_trace(0)))
    with pytest.raises(ValueError, match="rank 0 in a.json, b.json"):
        load_run(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="nor torch traces"):
        load_run(empty)


def test_host_breakdown_of_a_cpu_trace(tmp_path):
    """Without GPU work, communication is the host's collective ops (gloo)."""
    ev = [{"ph": "X", "cat": c, "name": n, "pid": 1, "tid": 1, "ts": t, "dur": d, "args": {}}
          for c, n, t, d in (("user_annotation", "ProfilerStep#1", 0, 1000), ("cpu_op", "aten::mm", 100, 300),
                             ("cpu_op", "record_param_comms", 500, 200), ("cpu_op", "gloo:all_reduce", 510, 150))]
    (tmp_path / "rank0.json").write_text(json.dumps({"traceEvents": ev, "distributedInfo": {"rank": 0}}))
    summary = summarize_run(load_run(tmp_path))
    row = summary["step_times"][0]
    assert (row["compute_ns"], row["communication_ns"], row["exposed_ns"], row["idle_ns"]) == (
        300_000, 200_000, 200_000, 500_000)
    assert summary["basis"] == {0: "host"}


def test_gradtrace_ranks_share_the_process_groups_start_barrier():
    """Each rank's profile records when it left init_process_group's barrier; the run's
    clock starts there, whatever each process's perf_counter origin (machines differ)."""
    from gradtrace.profiler import synthetic
    from gradtrace.profiler.ranks import common_clock

    def rank(r, barrier_ns):
        return synthetic.from_events([{"name": "ProfilerStep#1", "start": barrier_ns + 1000, "end": barrier_ns + 5000,
                                       "scope": 2}],
                                     metadata={"distributed_info": {"backend": "mpi", "rank": r, "world_size": 2,
                                                                    "start_barrier_ns": barrier_ns}})

    offsets, clock = common_clock({0: rank(0, 10_000_000), 1: rank(1, 987_654_321)})
    assert clock == "the process group's start barrier"
    assert offsets == {0: -10_000_000, 1: -987_654_321}   # both steps start 1 us after it


def test_device_steps_follow_hta_memcpy_is_not_compute(tmp_path):
    """A rank's device breakdown is HTA's: memcpys and memsets are memory, not compute."""
    from gradtrace.profiler import load
    from gradtrace.profiler.ranks import rank_steps

    from . import gpu_traces as gt

    step1, step2 = rank_steps(load(gt.write_gpu_trace(tmp_path / "trace.json")))
    # Step 1 [0, 100]: compute kernels [20, 50] + [70, 90]; NCCL [88, 98], 8 us alone; memcpy 5 +
    # memset 2; idle 35. Step 2 [100, 170]: the sgemm kernel [110, 170].
    assert {k: v / 1000 for k, v in step1.items() if k.endswith("_ns") and k != "start_ns"} == {
        "step_ns": 100, "compute_ns": 50, "communication_ns": 10, "exposed_ns": 8, "hidden_ns": 2,
        "memory_ns": 7, "idle_ns": 35}
    assert (step2["compute_ns"], step2["memory_ns"], step2["idle_ns"]) == (60_000, 0, 10_000)
