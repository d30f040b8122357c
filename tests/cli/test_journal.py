"""A profile written step by step (issue 31): a process killed mid-run keeps its completed
steps — killed by SIGKILL, or a rank stopped by the launcher's MPI_Abort."""
from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace import profiler
from gradtrace.profiler import mapped
from tests.cli.conftest import ROOT, cli_env, run_cli


def _train_steps(prof, steps: int) -> None:
    from gradtrace.autograd import nn

    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    for k in range(steps):
        (model(ag.tensor(np.full((3, 4), 0.1 * k, dtype=np.float32))) ** 2).mean().backward()
        prof.step()


def _keys(data) -> set:
    cols = data.event_columns
    return {(data.strings[int(n)], int(s), int(e), int(t)) for n, s, e, t in
            zip(cols["name_id"], cols["start_ns"], cols["end_ns"], cols["thread_id"])}


def test_the_journal_holds_each_completed_step_as_the_final_profile_does(tmp_path):
    path = tmp_path / "p.gtprof"
    copy = tmp_path / "after3.gtprof"
    with profiler.profile(record_shapes=True, profile_memory=True, with_stack=True) as prof:
        prof.journal(path)
        _train_steps(prof, 3)
        copy.write_bytes(path.read_bytes())       # what a process killed now would leave
        _train_steps(prof, 2)
    final = prof.profile_data
    partial = profiler.load(copy)
    assert partial.metadata["incomplete"] is True and partial.metadata["steps"] == [0, 2]
    assert [name for name, _, _ in partial.step_ranges()] == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]
    step2_end = dict((n, e) for n, _, e in final.step_ranges())["ProfilerStep#2"]
    closed = {k for k in _keys(final) if k[2] <= step2_end}
    assert _keys(partial) == closed
    stacks = {partial.strings[int(k)] for k in set(partial.event_columns["stack_id"].tolist()) if k >= 0}
    assert stacks and stacks <= set(final.strings)
    assert partial.n_memory_records == int(np.count_nonzero(final.memory_columns["time_ns"] <= step2_end))


def test_an_append_cut_short_leaves_the_previous_steps(tmp_path):
    path = tmp_path / "p.gtprof"
    with profiler.profile() as prof:
        prof.journal(path)
        _train_steps(prof, 2)
        two = path.read_bytes()
        _train_steps(prof, 1)
        three = path.read_bytes()
    for cut in (1, 40, (len(three) - len(two)) // 2, len(three) - len(two) - 1):
        torn = tmp_path / f"torn{cut}.gtprof"
        torn.write_bytes(three[:len(three) - cut])
        assert profiler.load(torn).metadata["steps"] == [0, 1], cut
    assert two == three[:len(two)]                # nothing written before is rewritten
    assert three.endswith(mapped.END_MAGIC)


SLEEPER = """\
import sys, time
import numpy as np
import gradtrace.autograd as ag
from gradtrace import profiler
from gradtrace.autograd import nn
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
for step in range(100):
    (model(ag.tensor(np.ones((3, 4), dtype=np.float32))) ** 2).mean().backward()
    profiler.current().step()
    if step == 4:
        open(sys.argv[1], "w").write("5 steps done")
        time.sleep(300)
"""


def test_sigkill_keeps_the_completed_steps(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SLEEPER)
    out, ready = tmp_path / "run.gtprof", tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, "-m", "gradtrace.cli", "run", "--out", str(out), "--memory",
                             str(script), str(ready)], cwd=ROOT, env=cli_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not ready.exists():
            assert proc.poll() is None, "the script ended before its fifth step"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    data = profiler.load(out)
    assert data.metadata["incomplete"] is True and data.metadata["steps"] == [0, 4]
    assert [name for name, _, _ in data.step_ranges()] == [f"ProfilerStep#{k}" for k in range(5)]
    assert run_cli("table", out).returncode == 0


@pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None
                    or not (shutil.which("mpirun") or shutil.which("mpirun", path=os.path.dirname(sys.executable))),
                    reason="needs mpi4py and Open MPI's mpirun (pip install 'gradtrace[mpi]')")
def test_a_rank_stopped_by_mpi_abort_keeps_its_completed_steps(tmp_path):
    body = textwrap.dedent("""\
        import numpy as np
        import gradtrace.autograd as ag
        from gradtrace import profiler
        from gradtrace.autograd import distributed as dist
        dist.init_process_group("mpi", timeout=120)
        for step in range(10):
            if step == 5 and dist.get_rank() == 1:
                raise ValueError("bad batch at step 5")
            dist.all_reduce(ag.tensor([1.0]))
            profiler.current().step()
        """)
    script = tmp_path / "train.py"
    script.write_text(body)
    run_dir = tmp_path / "run"
    res = run_cli("run", "--nproc", "2", "--out", run_dir, script, cwd=tmp_path, timeout=100)
    assert res.returncode != 0 and "rank 1 failed: ValueError: bad batch at step 5" in res.stderr, res.stderr
    rank0 = profiler.load(run_dir / "rank0.gtprof")          # killed by MPI_Abort
    assert rank0.metadata["steps"][1] >= 4
    assert {f"ProfilerStep#{k}" for k in range(5)} <= {name for name, _, _ in rank0.step_ranges()}
    assert rank0.metadata["distributed_info"]["rank"] == 0
    rank1 = profiler.load(run_dir / "rank1.gtprof")          # saved whole by the failing rank
    assert "incomplete" not in rank1.metadata


def test_a_run_that_ends_replaces_its_journal_with_the_complete_profile(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SLEEPER.replace("if step == 4:", "if step == 2:\n        break\n    if False:"))
    out = tmp_path / "run.gtprof"
    res = run_cli("run", "--out", out, "--quiet", script, tmp_path / "unused", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    data = profiler.load(out)
    assert "incomplete" not in data.metadata and data.metadata["steps"] == [0, 3]
    assert data._stored_summaries                  # the complete file: analyses stored
    assert not list(tmp_path.glob("*.tmp"))
