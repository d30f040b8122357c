"""One row, column and format layer: the Python table, the CLI and the dashboard grid take
their columns from profiler.columns, and group modules with one attribution."""
import re

import pytest

from . import needs_dashboard
from gradtrace.profiler import Scope, columns
from gradtrace.profiler.format import format_bytes, format_percent, format_time, pick_time_unit
from gradtrace.profiler.synthetic import from_events

F, B, U = Scope.FUNCTION, Scope.BACKWARD_FUNCTION, Scope.USER_SCOPE


def _profile():
    """CUDA time, CPU and CUDA memory, FLOPs, shapes, stacks and nn.Module ranges."""
    return from_events([
        {"name": "nn.Module: Net", "start": 0, "end": 10_000, "scope": U},
        {"name": "nn.Module: Linear", "start": 100, "end": 6_000, "scope": U},
        {"name": "linear", "start": 200, "end": 5_000, "sequence_nr": 0, "shapes": [[8, 4], [4, 4]],
         "stack": ["m.py(3): forward"]},
        {"name": "matmul", "start": 300, "end": 4_000, "device": "cuda:0", "device_start": 400,
         "device_end": 3_400, "shapes": [[8, 4], [4, 4]], "stack": ["m.py(3): forward"]},
        {"name": "relu", "start": 7_000, "end": 8_000, "sequence_nr": 1, "shapes": [[8, 4]]},
        {"name": "ReluBackward0", "start": 11_000, "end": 12_000, "scope": B, "sequence_nr": 1,
         "fwd_thread_id": 1},
        {"name": "MmBackward0", "start": 12_000, "end": 14_000, "scope": B, "sequence_nr": 0, "fwd_thread_id": 1},
        {"name": "mul", "start": 12_500, "end": 13_000},
        {"name": "AccumulateGrad", "start": 14_000, "end": 15_000, "scope": B, "sequence_nr": 7,
         "fwd_thread_id": 1},
    ], memory=[{"time": 350, "bytes": 4096, "device": "cuda:0"}, {"time": 7_500, "bytes": 128}],
        metadata={"profile_memory": True, "with_flops": True, "record_shapes": True, "with_stack": True})


def _table_headers(text):
    lines = text.splitlines()
    sep = next(i for i, line in enumerate(lines) if line.startswith("-"))
    widths = [len(d) for d in lines[sep].split("  ")]
    out, pos = [], 0
    for w in widths:
        out.append(lines[sep + 1][pos:pos + w].strip())
        pos += w + 2
    return out


def _flops(headers):
    """A FLOPs header names its scale ("Total KFLOPs"), as PyTorch's does."""
    return [re.sub(r"^Total [KMGTP]?FLOPs$", "Total FLOPs", h) for h in headers]


def _cli_headers(renderable):
    """First renderable of the Group is the rich Table; its headers without the unit lines."""
    table = renderable.renderables[0] if hasattr(renderable, "renderables") else renderable
    return [re.sub(r" \((s|ms|us)\)$", "", " ".join(str(c.header).split("\n"))) for c in table.columns]


@pytest.mark.parametrize("group", ["name", "shape", "stack"])
def test_python_table_cli_and_grid_share_the_column_spec(group):
    needs_dashboard()
    from gradtrace.cli.commands import profile_tables
    from gradtrace.viewer import operators_page as pages
    from gradtrace.viewer.model import ProfileView

    data = _profile()
    kwargs = {"name": {}, "shape": {"group_by_input_shape": True}, "stack": {"group_by_stack_n": 1}}[group]
    key_avgs = data.key_averages(**kwargs)
    specs = key_avgs.columns()
    headers = [s.header for s in specs]
    # The Python table(): exactly the spec's headers (FLOPs names its scale, as PyTorch).
    assert _flops(_table_headers(key_avgs.table())) == headers
    assert headers[:6] == ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    # The CLI: the spec's headers, in order, minus those left out to fit 100 characters (named).
    rendered = profile_tables(data, group_by=group, stack_n=1, plain=True)
    cli = _flops(_cli_headers(rendered))
    left_out = [h for h in headers if h not in cli]
    assert [h for h in headers if h in cli] == cli
    if left_out:
        assert "left out to fit: " + ", ".join(left_out) in str(rendered.renderables[-1])
    # The dashboard: one grid column per spec (plus the scope), field = id, header = header.
    view = ProfileView(data)
    grid_group = group
    grid = [c for c in pages.operator_columns(view, grid_group, "both", "self") if c["field"] != "scope"]
    assert [c["field"] for c in grid] == [s.id for s in specs]
    assert [c["headerName"] for c in grid] == headers
    # The same values under the same ids: --json and the grid rows.
    from gradtrace.cli.commands import table_json

    row = next(r for r in table_json(data, limit=0) if r["name"] == "matmul")
    grid_row = next(r for r in view.rows("name") if r["name"] == "matmul")
    for spec in data.key_averages().columns():
        if spec.kind != "text":
            assert row[spec.id] == pytest.approx(grid_row[spec.id]), spec.id


def test_diff_headers_come_from_the_spec():
    needs_dashboard()
    from gradtrace import profiler
    from gradtrace.viewer.compare import diff_table

    data = _profile()
    d = profiler.diff(data, data)
    assert all(d.metrics[m] == columns.COLUMNS[m].header for m in d.metrics)
    _, cols, _ = diff_table(data, data)
    headers = {c["headerName"] for c in cols}
    assert {"# of Calls A", "Self CPU A", "CPU total Δ%"} <= headers


def test_module_attribution_is_one_in_cli_and_dashboard():
    needs_dashboard()
    from gradtrace.cli.commands import table_json
    from gradtrace.viewer.model import ProfileView

    data = _profile()
    tree = table_json(data, group_by="module", limit=0)
    cli, stack = {}, list(tree)     # the module tree's nodes, by class ("Linear #2" is a Linear)
    while stack:
        node = stack.pop()
        cli[node["module"].split(" #")[0]] = node
        stack.extend(node["children"])
    grid = {}
    for r in ProfileView(data).rows("module"):
        grid[r["module"]] = grid.get(r["module"], 0.0) + r["self_cpu_time_total"]
    assert set(cli) == set(grid) == {"Net", "Linear", "(no module)"}
    for module, self_cpu in grid.items():
        assert cli[module]["self_cpu_time_total"] == pytest.approx(self_cpu)
    by_name = {(r.key, r.module) for r in data.key_averages(group_by_module=True)}
    # Backward nodes (and ops inside them) go with their forward op's module; an unlinked
    # backward node with none.
    assert {("MmBackward0", "Linear"), ("mul", "Linear"), ("ReluBackward0", "Net"),
            ("AccumulateGrad", "(no module)")} <= by_name
    # Self times add up: every event is charged to exactly one module.
    total = data.total_average().self_cpu_time_total
    assert sum(r["self_cpu_time_total"] for r in cli.values()) == pytest.approx(total)
    assert sum(r["forward_backward_cpu_time_total_percent"] for r in tree) == pytest.approx(100.0)
    assert cli["Net"]["forward_backward_cpu_time_total"] == pytest.approx(cli["Net"]["self_cpu_time_total"]
                                                                          + cli["Linear"]["self_cpu_time_total"])


def test_group_by_device_sums_to_name_rows():
    data = _profile()
    by_device = data.key_averages(group_by_device=True)
    assert {(r.key, r.device) for r in by_device} >= {("matmul", "cuda:0"), ("linear", "cpu")}
    assert sum(r.self_cpu_time_total for r in by_device) == pytest.approx(data.key_averages().self_cpu_time_total)
    rows = data.key_averages()
    for r in rows:
        assert sum(d.count for d in by_device if d.key == r.key) == r.count


def test_events_of_a_row_are_its_calls():
    data = _profile()
    key_avgs = data.key_averages(group_by_module=True)
    for k, r in enumerate(key_avgs):
        events = key_avgs.events_of(k)
        assert len(events) == r.count and {data.name_of(int(e)) for e in events} == {r.key}


@pytest.mark.parametrize("values, unit", [([0.5, 999.0], "us"), ([1500.0], "ms"), ([2e6, 1.0], "s"),
                                          ([], "us"), ([-2000.0], "ms")])
def test_pick_time_unit(values, unit):
    assert pick_time_unit(values) == unit


def test_formatters():
    assert format_time(1234.5, "ms", suffix=False) == "1.234"
    assert format_time(998.5) == "998.500us"
    assert format_bytes(1536 * 1024) == "1.50 MB" and format_bytes(1023) == "1023 B"
    assert format_percent(1, 3) == "33.33%" and format_percent(1, 0) == "0.00%"


def test_grid_byte_formatter_spells_units_as_python():
    """The dashboard formats in the browser; its units are the ones of profiler.format."""
    needs_dashboard()
    from gradtrace.viewer.app import ASSETS

    js = (ASSETS / "dashAgGridFunctions.js").read_text()
    for unit in ('" GB"', '" MB"', '" KB"', '" B"'):
        assert unit in js
    assert "Mb" not in js and "Kb" not in js


def test_every_column_kind_and_need_is_known():
    needs = {"", "cuda", "memory", "memory_kinds", "cuda_memory", "shapes", "stack", "flops", "module", "device",
             "scope"}
    for spec in columns.COLUMNS.values():
        assert spec.kind in columns.KINDS and spec.needs in needs, spec
    for ids in (columns.OPERATOR_COLUMNS, columns.FORWARD_BACKWARD_COLUMNS, columns.MODULE_COLUMNS,
                columns.MEMORY_BY_OP_COLUMNS, columns.MEMORY_KIND_COLUMNS):
        assert all(i in columns.COLUMNS for i in ids)
