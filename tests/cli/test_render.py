"""Tables rendered as text: Console(file=StringIO(), width=100, color_system=None) (STYLE 11)."""
from __future__ import annotations

import subprocess
import sys
from io import StringIO

import pytest
from rich.console import Console

from gradtrace.cli.commands import profile_tables, table_json
from gradtrace.cli.errors import CLIError
from gradtrace.cli.render import diff_table, emit, header_lines, short_site, spec_table
from gradtrace.profiler.format import pick_time_unit
from tests.cli.conftest import ROOT
from tests.cli.profiles import hand_made


def text(renderable, plain=True) -> str:
    console = Console(file=StringIO(), width=100, color_system=None)
    emit(console, renderable, plain)
    return console.file.getvalue()


OPERATORS = """\
Name            Self CPU %  Self CPU (ms)  CPU total %  CPU total (ms)  # of Calls
----------------------------------------------------------------------------------
matmul              30.00%          3.000       30.00%           3.000           1
AddmmBackward0      25.00%          2.500       25.00%           2.500           1
ProfilerStep#1      22.00%          2.200      100.00%          10.000           1
linear              10.00%          1.000       40.00%           4.000           1
ReluBackward0        8.00%          0.800        8.00%           0.800           1
relu                 5.00%          0.500        5.00%           0.500           1
Self CPU time total: 10.000ms
6 events, devices cpu
left out to fit: CPU time avg (--json has every column)
"""

FORWARD_BACKWARD = """\
Forward + backward cost per forward op
                                              Bwd CPU   Fwd+Bwd    Fwd+Bwd
         # of  Self CPU  CPU total  Bwd Self    total  Self CPU  CPU total  # Bwd
Name    Calls      (ms)       (ms)  CPU (ms)     (ms)      (ms)       (ms)  Calls  Backward Nodes
-------------------------------------------------------------------------------------------------
linear      1     1.000      4.000     2.500    2.500     3.500      6.500      1  AddmmBackward0
matmul      1     3.000      3.000     0.000    0.000     3.000      3.000      0
relu        1     0.500      0.500     0.800    0.800     1.300      1.300      1  ReluBackward0
Self: the op's own time and that of the backward nodes it created itself; over all rows it adds up
to at most the profile total. Total: with the ops inside it and their backward nodes (cross_entropy
includes its log_softmax), so rows overlap, as CPU total does.
"""

SHAPES = """\
Name            Self CPU %  Self CPU (ms)  CPU total (ms)  # of Calls  Input Shapes
------------------------------------------------------------------------------------------
ProfilerStep#1      22.00%          2.200          10.000           1  []
linear              10.00%          1.000           4.000           1  [[64, 32], [32, 8]]
matmul              30.00%          3.000           3.000           1  [[64, 32], [32, 8]]
relu                 5.00%          0.500           0.500           1  [[64, 8]]
ReluBackward0        8.00%          0.800           0.800           1  [[64, 8]]
AddmmBackward0      25.00%          2.500           2.500           1  [[64, 32], [32, 8]]
Self CPU time total: 10.000ms
6 events, devices cpu
left out to fit: CPU total %, CPU time avg (--json has every column)
"""


def test_operator_table_text():
    assert text(profile_tables(hand_made(), plain=True)) == OPERATORS


def test_forward_backward_table_text():
    assert text(profile_tables(hand_made(), plain=True, group_by="forward-op")) == FORWARD_BACKWARD


def test_shape_table_sorted_by_count_keeps_first_seen_order_for_ties():
    assert text(profile_tables(hand_made(), plain=True, group_by="shape", sort_by="count")) == SHAPES


def test_limit_and_units_per_column():
    out = text(profile_tables(hand_made(scale=1000), plain=True, limit=2))
    lines = out.splitlines()
    assert lines[0].count("(s)") == 3                            # seconds once the values are large
    assert [ln.split()[0] for ln in lines[2:4]] == ["matmul", "AddmmBackward0"]
    assert lines[4].startswith("Self CPU time total: 10.000s")


def test_plain_output_has_no_box_drawing_and_fits_100_columns(demo_profile):
    from gradtrace import profiler

    data = profiler.load(demo_profile)
    for group in ("name", "shape", "stack", "module", "forward-op"):
        out = text(profile_tables(data, plain=True, group_by=group, device_rows=group == "name"))
        assert all(ord(ch) < 128 for ch in out), group
        assert max(len(line) for line in out.splitlines()) <= 100, group
        assert "\x1b[" not in out


def _gpu_trace_profile(tmp_path):
    from gradtrace import profiler
    from tests.profiler.gpu_traces import write_gpu_trace

    return profiler.load(write_gpu_trace(tmp_path / "gpu.json"))


def _header(out: str) -> list[str]:
    """The header lines of a plain table (above its ASCII rule)."""
    lines = out.splitlines()
    return lines[:next(k for k, ln in enumerate(lines) if set(ln) == {"-"})]


@pytest.mark.parametrize("width, one_line, left_out", [
    (100, False, ["CPU time avg", "CUDA time avg"]),     # main columns kept: their names wrap
    (160, True, ["CPU time avg", "CUDA time avg"]),      # secondary columns go first
    (200, True, []),
])
def test_torch_column_names_on_one_line_when_the_width_allows(tmp_path, width, one_line, left_out):
    data = _gpu_trace_profile(tmp_path)
    console = Console(file=StringIO(), width=width, color_system=None)
    emit(console, profile_tables(data, plain=True, width=width), True)
    out = console.file.getvalue()
    header = _header(out)
    assert max(len(ln) for ln in out.splitlines()) <= width
    assert (len(header) == 1) == one_line
    if one_line:
        for name in ("Self CPU %", "Self CUDA %", "CPU total %", "# of Calls", "Self CUDA (us)"):
            assert name in header[0]
        assert header[0].index("Self CPU %") >= 32 + 2           # kernel names stay readable
    note = next((ln for ln in out.splitlines() if ln.startswith("left out to fit: ")), "")
    assert note == (f"left out to fit: {', '.join(left_out)} (--json has every column)" if left_out else "")


def test_table_command_header_on_one_line_at_200_columns(tmp_path):
    from tests.cli.conftest import cli_env, run_cli
    from tests.profiler.gpu_traces import write_gpu_trace

    trace = write_gpu_trace(tmp_path / "gpu.json")
    res = run_cli("table", trace, env=cli_env(COLUMNS="200"))
    assert res.returncode == 0, res.stderr
    header = _header(res.stdout)
    assert len(header) == 1 and "Self CPU %" in header[0] and "Self CUDA %" in header[0]


def test_rich_mode_highlights_heaviest_rows():
    console = Console(file=StringIO(), width=100, color_system="truecolor", force_terminal=True)
    console.print(profile_tables(hand_made(), plain=False))
    out = console.file.getvalue()
    assert "\x1b[" in out                       # styled
    first_row = next(line for line in out.splitlines() if "matmul" in line)
    assert "\x1b[1;31m" in first_row or "\x1b[1m\x1b[31m" in first_row   # bold red: heaviest


def test_numbers_are_right_aligned():
    rows = OPERATORS.splitlines()[2:8]
    calls_end = {len(r) for r in rows}
    assert len(calls_end) == 1                  # every row ends at the same column


def test_pick_time_unit():
    assert pick_time_unit([0.5, 999.0]) == "us"
    assert pick_time_unit([1500.0]) == "ms"
    assert pick_time_unit([2e6, 1.0]) == "s"
    assert pick_time_unit([]) == "us"


def test_short_site():
    assert short_site("/a/b/train.py(12): step") == "train.py(12): step"
    assert short_site("<no frame>") == "<no frame>"


def test_merge_steps():
    from gradtrace.profiler.synthetic import training_profile

    data = training_profile(2000)
    merged = data.key_averages(merge_steps=True)
    steps = [r for r in data.key_averages() if r.key.startswith("ProfilerStep#")]
    assert len(steps) > 1
    row = next(r for r in merged if r.key.startswith("ProfilerStep#"))
    assert row.key == "ProfilerStep#*" and sum(r.key.startswith("ProfilerStep#") for r in merged) == 1
    assert row.count == sum(r.count for r in steps)
    assert row.cpu_time_total == pytest.approx(sum(r.cpu_time_total for r in steps))


def test_json_rows_are_plain_dicts():
    rows = table_json(hand_made(), sort_by="self_cpu_time_total", limit=3)
    assert [r["name"] for r in rows] == ["matmul", "AddmmBackward0", "ProfilerStep#1"]
    assert rows[0]["self_cpu_time_total"] == pytest.approx(3000.0)
    fb = table_json(hand_made(), group_by="forward-op")
    assert fb[0]["name"] == "linear" and fb[0]["backward_names"] == ["AddmmBackward0"]


@pytest.mark.parametrize("kwargs, message", [
    (dict(sort_by="fastest"), "unknown sort key 'fastest'"),
    (dict(group_by="colour"), "unknown group 'colour'"),
    (dict(group_by="stack"), "no call stacks; record it with --with-stack"),
    (dict(group_by="module"), "no nn.Module ranges; record it with --with-modules"),
])
def test_bad_table_options(kwargs, message):
    with pytest.raises(CLIError, match=message.replace("(", r"\(")):
        profile_tables(hand_made(), **kwargs)


def _slower_relu():
    from gradtrace.profiler import Scope
    from gradtrace.profiler.synthetic import from_events

    events = [dict(name="matmul", start=0, end=1_000_000), dict(name="relu", start=2_000_000, end=4_000_000),
              dict(name="softmax", start=5_000_000, end=5_500_000)]
    return from_events(events), from_events([dict(name="matmul", start=0, end=250_000),
                                             dict(name="relu", start=1_000_000, end=4_000_000),
                                             dict(name="conv2d", start=5_000_000, end=5_100_000,
                                                  scope=Scope.FUNCTION)])


DIFF = """\
            # of     # of  Self CPU  Self CPU  Change   Change  CPU total
Name     Calls A  Calls B    A (ms)    B (ms)    (ms)        %   change %
-------------------------------------------------------------------------
relu           1        1     2.000     3.000  +1.000  +50.00%    +50.00%
matmul         1        1     1.000     0.250  -0.750  -75.00%    -75.00%
softmax        1        -     0.500     0.000  -0.500     gone       gone
conv2d         -        1     0.000     0.100  +0.100      new        new
Self CPU time total: A 3.500ms, B 3.350ms (-4.29%)
4 rows, sorted by the size of the change in self_cpu_time_total; red: B slower, green: B faster
"""


def test_diff_table_text_and_colours():
    from gradtrace import profiler

    a, b = _slower_relu()
    result = profiler.diff(a, b)
    out = text(diff_table(result, plain=True))
    assert out == DIFF
    console = Console(file=StringIO(), width=100, color_system="truecolor", force_terminal=True)
    console.print(diff_table(result, plain=False))
    lines = console.file.getvalue().splitlines()
    assert "\x1b[31m" in next(ln for ln in lines if "relu" in ln)        # regression: red
    assert "\x1b[32m" in next(ln for ln in lines if "matmul" in ln)      # improvement: green


def test_forward_backward_table_rich_fits():
    summary = hand_made().forward_backward_summary()
    out = text(spec_table(list(summary), summary.columns()), plain=False)
    assert max(len(line) for line in out.splitlines()) <= 100


def test_operator_table_without_rows():
    key_avgs = hand_made().key_averages()
    out = text(spec_table([], key_avgs.columns(), key_avgs.totals, footer=["Self CPU time total: 0.000us"]))
    assert "Self CPU time total" in out and "Name" in out


def test_rendering_a_loaded_profile_does_not_import_the_engine(small_profile):
    code = ("import sys, io\nfrom gradtrace import profiler\nimport gradtrace.cli.render, gradtrace.cli.commands\n"
            "from rich.console import Console\n"
            f"data = profiler.load({str(small_profile)!r})\n"
            "c = Console(file=io.StringIO(), width=100, color_system=None)\n"
            "c.print(gradtrace.cli.commands.profile_tables(data, plain=True, group_by='forward-op'))\n"
            "c.print(gradtrace.cli.commands.profile_tables(data, plain=True))\n"
            "sys.exit(1 if 'gradtrace.autograd' in sys.modules else 0)\n")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr


def test_render_module_imports_only_profiler_and_rich():
    from tests.test_architecture import imported_names

    ours = imported_names(ROOT / "cli" / "render.py")
    assert ours - {"__future__", "os", "sys", "typing"} == {"profiler", "rich"}
