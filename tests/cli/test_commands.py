"""``table``, ``export``, ``diff``, ``demo``, ``bench``, ``--version``/``--help`` end to end, and bad input."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest

from tests.cli.conftest import ROOT, cli_env, run_cli


def test_version_and_help():
    res = run_cli("--version")
    assert res.returncode == 0 and res.stdout.startswith("gradtrace ")
    for command in ("demo", "run", "table", "export", "view", "diff", "bench"):
        res = run_cli(command, "--help")
        assert res.returncode == 0, command
        assert "example" in res.stdout and f"gradtrace {command}" in res.stdout


def test_no_command_prints_help_and_exits_2():
    res = run_cli()
    assert res.returncode == 2 and "COMMAND" in res.stdout


def test_demo_end_to_end(tmp_path):
    res = run_cli("demo", "mlp", "--steps", "2", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    # The demo takes the GPU when one is usable (as on a GPU machine, or the CuPy stand-in).
    from gradtrace.autograd import backend

    expected = "device: cuda" if backend.cuda_is_available() else "device: cpu"
    assert expected in out.splitlines()[0]
    assert "step 2/2  loss" in out                      # progress, one line per step in a log
    assert "Operators (key_averages)" in out and "Self CPU time total" in out
    assert "Forward + backward cost per forward op" in out and "AddmmBackward0" in out
    saved = list((tmp_path / "gradtrace-runs").glob("mlp-*.gtprof"))
    assert len(saved) == 1 and f"profile saved to {saved[0].relative_to(tmp_path)}" in out
    assert "gradtrace view" in out and "gradtrace export" in out
    assert max(len(line) for line in out.splitlines()) <= 100


@pytest.mark.parametrize("workload", ["cnn", "gpt"])
def test_demo_other_workloads(tmp_path, workload):
    res = run_cli("demo", workload, "--steps", "1", "--out", tmp_path / "w.gtprof")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "w.gtprof").stat().st_size > 0


def test_table_end_to_end(demo_profile):
    res = run_cli("table", demo_profile, "--sort", "cpu_time_total", "--limit", "5")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split()[0] == "Name" and "Self CPU %" in lines[0]       # torch's names, one line
    assert len([ln for ln in lines if "%" in ln and "  " in ln]) >= 5
    for group in ("shape", "stack", "module", "forward-op"):
        res = run_cli("table", demo_profile, "--group-by", group, "--limit", "5")
        assert res.returncode == 0, (group, res.stderr)
    res = run_cli("table", demo_profile, "--group-by", "module")
    assert "Linear" in res.stdout and "Sequential" in res.stdout
    res = run_cli("table", demo_profile, "--device-rows", "--limit", "3")
    assert "Device" in res.stdout and " cpu " in res.stdout


def test_table_json(demo_profile):
    res = run_cli("table", demo_profile, "--json", "--limit", "4", "--sort", "count")
    rows = json.loads(res.stdout)
    assert len(rows) == 4 and rows[0]["count"] >= rows[-1]["count"]
    assert {"name", "self_cpu_time_total", "cpu_time_total", "count"} <= set(rows[0])
    rows = json.loads(run_cli("table", demo_profile, "--json", "--group-by", "forward-op").stdout)
    assert rows[0]["name"] == "linear" and "forward_backward_cpu_time_total" in rows[0]


def test_plain_when_no_color_is_set(demo_profile):
    res = run_cli("table", demo_profile, "--limit", "3", env=cli_env(NO_COLOR="1"))
    assert "\x1b[" not in res.stdout and all(ord(c) < 128 for c in res.stdout)


def test_export_chrome_stacks_speedscope(demo_profile, tmp_path):
    gz = tmp_path / "trace.json.gz"
    res = run_cli("export", demo_profile, "--chrome", gz)
    assert res.returncode == 0, res.stderr
    trace = json.loads(gzip.decompress(gz.read_bytes()))
    assert trace["traceEvents"]
    folded = tmp_path / "out.folded"
    assert run_cli("export", demo_profile, "--stacks", folded, "--metric", "self_cpu_time_total").returncode == 0
    assert all(line.rsplit(" ", 1)[1].isdigit() for line in folded.read_text().splitlines())
    ss = tmp_path / "out.speedscope.json"
    assert run_cli("export", demo_profile, "--speedscope", ss).returncode == 0
    assert "speedscope" in json.loads(ss.read_text())["$schema"]


def test_bench_quick_one_script():
    kept = ROOT / "benchmarks" / "results" / "engine_overhead.json"
    before = kept.stat().st_mtime_ns if kept.exists() else None
    res = run_cli("bench", "--quick", "--only", "engine_overhead")
    assert res.returncode == 0, res.stderr
    assert "results not kept" in res.stdout
    assert (kept.stat().st_mtime_ns if kept.exists() else None) == before   # the checkout is untouched
    assert "== engine_overhead" in res.stdout and "--repeats 1" in res.stdout
    assert "engine_overhead  ok" in res.stdout
    assert "numpy" in res.stdout                        # the script's own table is shown


def test_quick_flags_include_a_zero_minimum_time_where_a_script_has_one():
    """compiled_backward.py measures for at least --min-time seconds per workload; --quick
    turns that off, as it turns repeats down."""
    from gradtrace.cli.bench import quick_flags
    help_text = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "compiled_backward.py"),
                                "--help"], capture_output=True, text=True, check=True).stdout
    flags = quick_flags(help_text)
    assert flags[flags.index("--repeats") + 1] == "1"
    assert flags[flags.index("--min-time") + 1] == "0"


_FAKE_BENCH = """\
import argparse, json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _results import RESULTS_DIR
p = argparse.ArgumentParser(); p.add_argument("--json", default=None); args = p.parse_args()
with open(os.path.join(RESULTS_DIR, "side.json"), "w") as f:   # a script that ignores --json
    f.write("{}")
if args.json:
    with open(args.json, "w") as f:
        json.dump({"ok": 1}, f)
print("tiny done")
"""


@pytest.mark.parametrize("save", [False, True])
def test_bench_writes_results_only_with_save(tmp_path, save):
    bench = tmp_path / "benchmarks"
    (bench / "results").mkdir(parents=True)
    (bench / "_results.py").write_text((ROOT / "benchmarks" / "_results.py").read_text())
    (bench / "tiny.py").write_text(_FAKE_BENCH)
    res = run_cli("bench", "--dir", bench, *(["--save"] if save else []))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "tiny done" in res.stdout
    written = sorted(p.name for p in (bench / "results").iterdir())
    assert written == (["side.json", "tiny.json"] if save else [])
    assert ("results kept in" if save else "results not kept") in res.stdout


def test_table_per_step_and_merged_steps(tmp_path):
    """``gradtrace run`` without --schedule: each step() is a ProfilerStep#N; the table merges
    them into ProfilerStep#* unless --per-step; diff merges the same way."""
    script = tmp_path / "steps.py"
    script.write_text("import time\nfrom gradtrace import autograd as ag, profiler\n"
                      "x = ag.randn(8, requires_grad=True)\n"
                      "for _ in range(4):\n    time.sleep(0.01)\n    (x * x).sum().backward()\n"
                      "    profiler.current().step()\n")
    out = tmp_path / "steps.gtprof"
    res = run_cli("run", "-q", "-o", out, script)
    assert res.returncode == 0, res.stderr
    merged = json.loads(run_cli("table", out, "--json", "--limit", "0").stdout)
    names = [r["name"] for r in merged]
    assert "ProfilerStep#*" in names and not any(n.startswith("ProfilerStep#") and n[-1].isdigit() for n in names)
    step = next(r for r in merged if r["name"] == "ProfilerStep#*")
    assert step["count"] == 5 and step["self_cpu_time_total"] >= 4 * 10_000   # the sleeps are step time
    per_step = json.loads(run_cli("table", out, "--json", "--limit", "0", "--per-step").stdout)
    assert {f"ProfilerStep#{k}" for k in range(4)} <= {r["name"] for r in per_step}
    diff_rows = json.loads(run_cli("diff", out, out, "--json", "--limit", "0").stdout)
    assert [r["name"] for r in diff_rows].count("ProfilerStep#*") == 1
    diff_rows = json.loads(run_cli("diff", out, out, "--json", "--limit", "0", "--per-step").stdout)
    assert sum(r["name"].startswith("ProfilerStep#") for r in diff_rows) == 5


def test_schedule_run_leaves_one_file(tmp_path):
    script = tmp_path / "steps.py"
    script.write_text("from gradtrace import autograd as ag, profiler\nx = ag.randn(8)\n"
                      "for _ in range(6):\n    x * 2.0\n    profiler.current().step()\n")
    out = tmp_path / "runs" / "s.gtprof"
    res = run_cli("run", "-q", "--schedule", "0,0,6", "-o", out, script)
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in out.parent.iterdir()) == ["s.gtprof"]


def test_forward_op_sort_keys_are_the_tables(small_profile):
    for key in ("self_cpu_time_total", "cpu_time_total", "count", "forward_backward_self_cpu_time_total"):
        table = run_cli("table", small_profile, "--group-by", "forward-op", "--sort", key)
        diff = run_cli("diff", small_profile, small_profile, "--by", "forward-op", "--sort", key)
        assert table.returncode == 0 and diff.returncode == 0, (key, table.stderr, diff.stderr)


def test_table_width_follows_columns_and_names_are_shortened(demo_profile):
    narrow = run_cli("table", demo_profile, "--group-by", "stack", env=cli_env(COLUMNS="90")).stdout
    wide = run_cli("table", demo_profile, "--group-by", "stack", env=cli_env(COLUMNS="160")).stdout
    assert max(map(len, narrow.splitlines())) <= 90
    assert 100 < max(map(len, wide.splitlines())) <= 160
    assert all(ord(ch) < 128 for ch in narrow)              # plain: "..." not "…"
    full = {r["name"] for r in json.loads(run_cli("table", demo_profile, "--json", "--limit", "0").stdout)}
    assert all(len(n) <= 160 for n in full)


@pytest.mark.parametrize("width", [80, 100, 160])
def test_table_memory_splits_by_kind_and_fits_the_terminal(demo_profile, width):
    res = run_cli("table", demo_profile, "--memory", env=cli_env(COLUMNS=str(width)))
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert max(map(len, out.splitlines())) <= width
    assert "Memory by kind" in out and "Memory by op" in out and "peak on cpu:" in out
    kinds = [line.split()[1] for line in out.split("Memory by op")[0].splitlines() if line.startswith("cpu ")]
    assert {"parameter", "optimizer", "gradient", "activation", "temporary"} <= set(kinds)
    assert "AccumulateGrad" in out
    by_module = run_cli("table", demo_profile, "--memory", "--group-by", "module").stdout
    assert "Memory by module" in by_module and "Linear" in by_module


def test_table_memory_json_adds_up(demo_profile):
    res = json.loads(run_cli("table", demo_profile, "--memory", "--json", "--limit", "0").stdout)
    kinds = {k["kind"]: k for k in res["by_kind"]}
    assert {"parameter", "gradient", "activation", "temporary"} <= set(kinds)
    assert kinds["activation"]["freed"] == kinds["activation"]["allocated"] > 0
    fixed = ("name", "allocated", "freed", "net", "allocations")
    for row in res["rows"]:
        assert row["allocated"] == sum(v for k, v in row.items() if k not in fixed)
        assert row["net"] == row["allocated"] - row["freed"]
    acc = next(r for r in res["rows"] if r["name"] == "AccumulateGrad")
    assert acc["gradient"] == acc["allocated"]


def test_diff_end_to_end(demo_profile, tmp_path):
    other = tmp_path / "b.gtprof"
    assert run_cli("demo", "mlp", "--steps", "1", "--out", other).returncode == 0
    res = run_cli("diff", demo_profile, other, "--limit", "5")
    assert res.returncode == 0, res.stderr
    assert "Change" in res.stdout and "Self CPU time total: A " in res.stdout
    assert "red: B slower, green: B faster" in res.stdout
    res = run_cli("diff", demo_profile, other, "--by", "forward-op", "--json", "--limit", "3")
    rows = json.loads(res.stdout)
    ops = [r for r in rows if r["kind"] == "op"]          # then the step, phase, ... rows
    assert len(ops) == 3 and "forward_backward_cpu_time_total_delta" in rows[0] and rows[:3] == ops


# --------------------------------------------------------------------------- bad input


def _corrupted(src, dst):
    raw = bytearray(src.read_bytes())
    raw[-10] ^= 0xFF
    dst.write_bytes(bytes(raw))
    return dst


BAD = [
    # (name, argv builder, expected message part)
    ("missing file", lambda p, t: ["table", t / "nope.gtprof"], "no such file"),
    ("directory", lambda p, t: ["table", t], "is a directory"),
    ("not a profile", lambda p, t: ["table", _write(t / "x.json", b'{"a": 1}')], "not a gradtrace profile"),
    ("truncated", lambda p, t: ["table", _write(t / "t.gtprof", p.read_bytes()[:200])], "truncated profile"),
    ("corrupted", lambda p, t: ["table", _corrupted(p, t / "c.gtprof")], "corrupted profile"),
    ("unknown sort key", lambda p, t: ["table", p, "--sort", "fastest"], "unknown sort key 'fastest'"),
    ("unknown group", lambda p, t: ["table", p, "--group-by", "colour"], "unknown group 'colour'"),
    ("unknown workload", lambda p, t: ["demo", "resnet"], "unknown workload 'resnet'"),
    ("export missing file", lambda p, t: ["export", t / "nope.gtprof", "--chrome", t / "o.json"], "no such file"),
    ("export to a directory", lambda p, t: ["export", p, "--chrome", t], "is a directory"),
    ("export bad metric", lambda p, t: ["export", p, "--stacks", t / "s", "--metric", "x"], "metric"),
    ("view missing file", lambda p, t: ["view", t / "nope.gtprof", "--no-browser"], "no such file"),
    ("diff missing file", lambda p, t: ["diff", p, t / "nope.gtprof"], "nope.gtprof"),
    ("diff bad sort", lambda p, t: ["diff", p, p, "--sort", "fastest"], "unknown sort key 'fastest'"),
    ("run missing script", lambda p, t: ["run", t / "nope.py"], "no such file"),
    ("run bad schedule", lambda p, t: ["run", "--schedule", "1,x", t / "nope.py"], "--schedule"),
    ("unknown option", lambda p, t: ["table", p, "--colour"], "unrecognized arguments"),
    ("bench unknown", lambda p, t: ["bench", "--only", "nope"], "unknown benchmark nope"),
    # A sort or grouping the profile has no data for names the option that records it.
    ("sort flops unrecorded", lambda p, t: ["table", p, "--sort", "flops"], "--with-flops"),
    ("sort cuda unrecorded", lambda p, t: ["table", p, "--sort", "self_cuda_time_total"], "cuda activity"),
    ("sort memory unrecorded", lambda p, t: ["table", p, "--sort", "cpu_memory_usage"], "--memory"),
    ("diff sort cuda unrecorded", lambda p, t: ["diff", p, p, "--sort", "cuda_time_total"], "cuda activity"),
    ("group by module unrecorded", lambda p, t: ["table", p, "--group-by", "module"], "--with-modules"),
    ("memory unrecorded", lambda p, t: ["table", p, "--memory"], "record it with --memory"),
    ("forward-op unknown sort", lambda p, t: ["table", p, "--group-by", "forward-op", "--sort", "flops"],
     "for forward-op rows"),
    ("negative limit", lambda p, t: ["table", p, "--limit", "-3"], "--limit: must be 0"),
    ("diff negative limit", lambda p, t: ["diff", p, p, "--limit", "-1"], "--limit: must be 0"),
    ("export into a missing folder", lambda p, t: ["export", p, "--chrome", t / "missing" / "x.json"],
     "does not exist"),
]


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("name, argv, message", BAD, ids=[b[0] for b in BAD])
def test_bad_input_one_line_exit_2(small_profile, tmp_path, name, argv, message):
    res = run_cli(*argv(small_profile, tmp_path))
    assert res.returncode == 2, (res.stdout, res.stderr)
    err = res.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert message in err and "Traceback" not in err
    assert err.startswith("gradtrace")


def test_device_cuda_without_gpu(tmp_path):
    from gradtrace.autograd import cuda_is_available

    if cuda_is_available():
        pytest.skip("a GPU is usable here")
    res = run_cli("demo", "mlp", "--device", "cuda", "--steps", "1", cwd=tmp_path)
    assert res.returncode == 2
    assert len(res.stderr.strip().splitlines()) == 1
    assert "no usable CUDA GPU" in res.stderr and "--device cpu" in res.stderr
    assert not (tmp_path / "gradtrace-runs").exists()


def test_console_script_entry_point_is_cli_main():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'gradtrace = "gradtrace.cli.main:main"' in text
    assert os.path.exists(ROOT / "cli" / "__main__.py")
