"""``gradtrace diff --fail-on-regression PCT``: the CI gate's exit statuses, and the verdicts in
the text and JSON output."""
import json

import pytest

from gradtrace.cli.main import main

from ..profiler.test_stats import steps_profile


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Saved profiles of 20 steps: a baseline, the same code again, matmul 30% slower, 2 steps."""
    d = tmp_path_factory.mktemp("gate")
    paths = {}
    for name, prof in (("base", steps_profile(20, seed=1)), ("same", steps_profile(20, seed=2)),
                       ("slow", steps_profile(20, matmul_us=130, seed=3)), ("short", steps_profile(2, seed=4))):
        paths[name] = d / f"{name}.gtprof"
        prof.save(paths[name])
    return paths


def test_the_gate_passes_an_unchanged_run(runs, capsys):
    assert main(["diff", str(runs["base"]), str(runs["same"]), "--fail-on-regression", "5"]) == 0
    assert "regression" not in capsys.readouterr().err


def test_the_gate_fails_a_slowdown_above_the_threshold_and_names_it(runs, capsys):
    assert main(["diff", str(runs["base"]), str(runs["slow"]), "--fail-on-regression", "5"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gradtrace diff: regression over 5%: op matmul 1.")


def test_the_gate_passes_a_slowdown_below_the_threshold(runs):
    # matmul is ~30% slower: its interval's lower end is under 1.5
    assert main(["diff", str(runs["base"]), str(runs["slow"]), "--fail-on-regression", "50"]) == 0


@pytest.mark.parametrize("args, message", [
    (lambda r: [r["short"], r["short"]], "short.gtprof: 2 ProfilerStep ranges; --fail-on-regression needs at least 4"),
    (lambda r: [r["base"], r["base"].with_name("nope.gtprof")], "nope.gtprof: no such file"),
    (lambda r: [r["base"], r["same"], "--min-share", "-1"], "--min-share -1: give a percentage"),
])
def test_the_gate_refuses_bad_input_with_one_line_and_status_2(runs, capsys, args, message):
    argv = ["diff", *map(str, args(runs))]
    if "--fail-on-regression" not in argv:
        argv += ["--fail-on-regression", "5"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_text_and_json_carry_the_verdicts(runs, capsys):
    assert main(["diff", str(runs["base"]), str(runs["slow"])]) == 0
    out = capsys.readouterr().out
    matmul = next(line for line in out.splitlines() if line.startswith("matmul"))
    assert "slower" in matmul and "1.2" in matmul
    assert "Verdict" in out and "step time" in out
    assert main(["diff", str(runs["base"]), str(runs["slow"]), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    matmul = next(r for r in rows if r["name"] == "matmul")
    assert matmul["kind"] == "op" and matmul["verdict"] == "slower" and matmul["ci_low"] > 1.0
    assert "self_cpu_time_total_delta" in matmul
    step = next(r for r in rows if r["kind"] == "step")
    assert step["verdict"] == "unchanged"
