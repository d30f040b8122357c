"""``gradtrace gpu``: the GPU summary, the kernel view, run folders, and one-line errors."""
from __future__ import annotations

import io
import json

from rich.console import Console

from tests.cli.conftest import run_cli
from tests.profiler import gpu_traces as gt
from tests.profiler.rank_traces import write_rank_traces


def test_summary_of_a_trace(tmp_path):
    trace = gt.write_gpu_trace(tmp_path / "trace.json")
    res = run_cli("gpu", trace)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "cuda:0: 2 steps, 170.000us" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("GPU utilization"))
    assert "69.41%" in line and "TensorBoard plugin" in line
    assert any(ln.split()[:2] == ["All", "steps"] and ln.split()[2:4] == ["170.000", "110.000"]
               for ln in out.splitlines())                                  # time, kernel (us)
    assert "- off_tensor_cores (cuda:0)" in out and "pin_memory" in out
    summary = json.loads(run_cli("gpu", trace, "--json").stdout)
    dev = summary["devices"]["cuda:0"]
    assert dev["temporal"] == {"compute_us": 110.0, "non_compute_us": 15.0, "idle_us": 45.0}
    assert {r["rule"] for r in summary["recommendations"]} >= {"off_tensor_cores", "pageable_copies"}


def test_kernel_view(tmp_path):
    trace = gt.write_gpu_trace(tmp_path / "trace.json")
    res = run_cli("gpu", trace, "--kernels", "--by-op")
    assert res.returncode == 0, res.stderr
    rows = res.stdout.splitlines()
    sgemm = next(ln for ln in rows if "aten::mm" in ln)
    assert sgemm.startswith("ampere_sgemm_128x64_tn ") and sgemm.split()[2] == "2"   # name, op, calls
    assert not any(ln.startswith("void ") for ln in rows)
    assert any(ln.split()[:4] == ["cuda:0", "HtoD", "pageable", "1"] for ln in rows)
    assert any("AllReduce" in ln and "RING" in ln and "LL" in ln for ln in rows)
    full = json.loads(run_cli("gpu", trace, "--kernels", "--json").stdout)
    assert {k["name"] for k in full["kernels"]} >= {gt.SGEMM, gt.ELEMENTWISE, gt.NCCL}   # full names
    assert full["memcpy"][0]["kind"] in ("HtoD", "Memset")


def test_run_folder(tmp_path):
    write_rank_traces(tmp_path)
    res = run_cli("gpu", tmp_path)
    assert res.returncode == 0, res.stderr
    assert "GPU per rank" in res.stdout and "rank 1, cuda:0" in res.stdout
    summaries = json.loads(run_cli("gpu", tmp_path, "--json").stdout)
    assert sorted(summaries) == ["0", "1"]
    assert summaries["1"]["devices"]["cuda:0"]["comm_comp_overlap_pct"] is not None


def test_errors_are_one_line(tmp_path, small_profile):
    for args in (["gpu", small_profile], ["gpu", tmp_path / "missing.json"]):
        res = run_cli(*args)
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "no GPU work" in run_cli("gpu", small_profile).stderr


def test_tables_render_in_120_columns(tmp_path):
    from gradtrace.cli.gpu import kernel_tables, summary_tables
    from gradtrace.profiler import load
    from gradtrace.profiler.kernels import collective_table, kernel_table, memcpy_table

    data = load(gt.write_gpu_trace(tmp_path / "trace.json"))
    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(summary_tables(data.gpu_summary(), plain=True))
    console.print(kernel_tables(kernel_table(data), memcpy_table(data), collective_table(data), plain=True,
                                width=120))
    text = console.file.getvalue()
    assert all(len(line) <= 120 for line in text.splitlines())
    assert "Est. SM efficiency" in text and "ampere_sgemm_128x64_tn " in text and "void " not in text


def test_help():
    res = run_cli("gpu", "--help")
    assert res.returncode == 0 and "examples:" in res.stdout and "gradtrace gpu trace.json.gz --kernels" in res.stdout


def test_per_step_tables_show_the_longest_steps_of_a_long_run():
    from gradtrace.cli.gpu import STEP_ROWS, shown_steps

    steps = [{"step": f"ProfilerStep#{k}", "step_us": float((k * 7919) % 1000)} for k in range(10 * STEP_ROWS)]
    shown = shown_steps(steps)
    assert len(shown) == STEP_ROWS
    assert [s["step"] for s in shown] == [s["step"] for s in steps if s in shown]      # in step order
    assert min(s["step_us"] for s in shown) >= sorted((s["step_us"] for s in steps), reverse=True)[STEP_ROWS - 1]
    assert shown_steps(steps[:3]) == steps[:3]
