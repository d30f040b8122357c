"""``gradtrace run``: argv and __main__, exit status, exceptions, schedule, Ctrl-C."""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

from gradtrace import profiler
from tests.cli.conftest import ROOT, TIMEOUT, cli_env, run_cli

TRAIN = """\
import gradtrace.autograd as ag
x = ag.randn(16, 8, requires_grad=True)
((x * 2).tanh().sum()).backward()
"""


def script(tmp_path, body: str, name: str = "script.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def names(path) -> set:
    return {r.key for r in profiler.load(path).key_averages()}


def test_run_passes_arguments_and_main(tmp_path):
    s = script(tmp_path, TRAIN + """
import sys, json
print("ARGV", json.dumps(sys.argv), __name__)
""")
    out = tmp_path / "p.gtprof"
    res = run_cli("run", "--out", out, s, "--lr", "0.1", "-x", "pos", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert f'ARGV ["{s}", "--lr", "0.1", "-x", "pos"] __main__' in res.stdout
    assert {"mul", "tanh", "sum", "TanhBackward0"} <= names(out)
    assert "Self CPU time total" in res.stdout                  # the table at the end
    assert f"profile saved to {out}" in res.stderr


def test_run_sees_its_own_directory_on_sys_path(tmp_path):
    (tmp_path / "helper_mod.py").write_text("VALUE = 41\n")
    s = script(tmp_path, "import helper_mod\nprint('VALUE', helper_mod.VALUE + 1)\n")
    res = run_cli("run", "-q", "--out", tmp_path / "p.gtprof", s)     # cwd is the repo, not tmp
    assert res.returncode == 0, res.stderr
    assert "VALUE 42" in res.stdout


def test_run_script_that_raises_keeps_partial_profile(tmp_path):
    s = script(tmp_path, TRAIN + """
def fail():
    raise ValueError("broken on purpose")
fail()
""")
    out = tmp_path / "p.gtprof"
    res = run_cli("run", "-q", "--out", out, s)
    assert res.returncode == 1
    assert "Traceback (most recent call last)" in res.stderr
    assert "ValueError: broken on purpose" in res.stderr
    assert "cli/" not in res.stderr.split("Traceback")[1].split("ValueError")[0]   # only the script's frames
    assert "partial profile saved" in res.stderr
    assert "TanhBackward0" in names(out)


def test_run_preserves_exit_status(tmp_path):
    s = script(tmp_path, TRAIN + "import sys\nsys.exit(3)\n")
    out = tmp_path / "p.gtprof"
    res = run_cli("run", "-q", "--out", out, s)
    assert res.returncode == 3
    assert out.exists() and "mul" in names(out)


def test_run_with_schedule_and_step(tmp_path):
    s = script(tmp_path, """
    import gradtrace.autograd as ag
    from gradtrace import cli
    x = ag.randn(8, 4, requires_grad=True)
    assert cli.current_profile() is not None
    for i in range(7):
        (x * 2).sum().backward()
        cli.step()
    """)
    out = tmp_path / "p.gtprof"
    res = run_cli("run", "-q", "--schedule", "1,1,2,1", "--record-shapes", "--out", out, s)
    assert res.returncode == 0, res.stderr
    data = profiler.load(out)
    assert data.metadata["steps"] == [2, 3]
    assert [name for name, _, _ in data.step_ranges()] == ["ProfilerStep#2", "ProfilerStep#3"]
    assert data.metadata["record_shapes"] is True


def test_run_with_schedule_and_profiler_current_step(tmp_path):
    """The public way: profiler.current() is the profile gradtrace run records, and its
    step() drives --schedule; cli.current_profile() is the same object."""
    s = script(tmp_path, """
    import gradtrace.autograd as ag
    from gradtrace import cli, profiler
    prof = profiler.current()
    assert prof is not None and cli.current_profile() is prof
    x = ag.randn(8, 4, requires_grad=True)
    for i in range(7):
        with profiler.record_function(f"iteration{i}"):
            (x * 2).sum().backward()
        profiler.current().step()
    print("STEPS", prof.step_num)
    """)
    out = tmp_path / "p.gtprof"
    res = run_cli("run", "-q", "--schedule", "1,1,2,1", "--out", out, s)
    assert res.returncode == 0, res.stderr
    assert "STEPS 7" in res.stdout
    data = profiler.load(out)
    assert data.metadata["steps"] == [2, 3]
    assert [name for name, _, _ in data.step_ranges()] == ["ProfilerStep#2", "ProfilerStep#3"]
    assert {"iteration2", "iteration3", "SumBackward0"} <= names(out)
    assert not {"iteration0", "iteration1", "iteration4"} & names(out)


def test_schedule_that_never_records_names_the_public_step(tmp_path):
    s = script(tmp_path, TRAIN)          # never steps: the schedule stays in its wait phase
    out = tmp_path / "p.gtprof"
    res = run_cli("run", "-q", "--schedule", "1,1,2", "--out", out, s)
    assert res.returncode == 0, res.stderr
    assert "nothing was recorded" in res.stderr and "profiler.current().step()" in res.stderr
    assert not out.exists()


def test_session_profile_is_profiler_current(tmp_path):
    from gradtrace import cli
    from gradtrace.cli.session import ProfileOptions, Session

    assert profiler.current() is None and cli.current_profile() is None
    session = Session(ProfileOptions(), tmp_path / "p.gtprof")
    prof = session.start()
    try:
        assert profiler.current() is prof and cli.current_profile() is prof
        cli.step()
        assert prof.step_num == 1
    finally:
        session.stop()
    assert profiler.current() is None and cli.current_profile() is None
    cli.step()                            # no profile running: nothing happens


def test_step_outside_gradtrace_is_a_no_op():
    res = subprocess.run([sys.executable, "-c", "from gradtrace import cli, profiler; cli.step(); "
                          "print(cli.current_profile(), profiler.current())"],
                         cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT)
    assert res.returncode == 0 and res.stdout.strip() == "None None"


def test_ctrl_c_saves_partial_profile_and_exits_130(tmp_path):
    s = script(tmp_path, """
    import gradtrace.autograd as ag
    x = ag.randn(8, 4, requires_grad=True)
    i = 0
    while True:
        (x * 2).sum().backward()
        i += 1
        if i == 3:
            print("READY", flush=True)
    """)
    out = tmp_path / "p.gtprof"
    # The child gets Ctrl-C's default disposition, as under a terminal: a test run started in
    # the background (`cmd &` in a script) inherits SIGINT *ignored*, and Python then installs
    # no KeyboardInterrupt handler, so the signal would never arrive.
    proc = subprocess.Popen([sys.executable, "-m", "gradtrace.cli", "run", "-q", "--out", str(out), str(s)],
                            cwd=ROOT, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        line = proc.stdout.readline()          # bounded: the script prints READY after 3 steps
        assert line.strip() == "READY", (line, proc.stderr.read() if proc.poll() is not None else "")
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=TIMEOUT)
    err = proc.stderr.read()
    assert rc == 130, err
    assert "Traceback" not in err and "interrupted; partial profile saved" in err
    assert "SumBackward0" in names(out)
