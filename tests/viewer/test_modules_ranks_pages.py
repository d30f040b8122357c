"""The Modules and Ranks pages as components and figures (the browser tests drive them live)."""
from __future__ import annotations

from pathlib import Path

import pytest

from gradtrace import profiler, viewer
from gradtrace.profiler.module_tree import flatten, module_tree
from gradtrace.viewer import modules_page, ranks_page
from gradtrace.viewer.app import PAGES
from gradtrace.viewer.model import ProfileView
from tests.profiler.rank_traces import write_rank_traces

TRACE = Path(__file__).resolve().parents[1] / "profiler" / "data" / "torch_mlp_cpu.json.gz"


def _find(component, id_):
    """The component with this id in a Dash tree (None when absent)."""
    if getattr(component, "id", None) == id_:
        return component
    children = getattr(component, "children", None)
    for child in children if isinstance(children, (list, tuple)) else [children]:
        if child is not None and not isinstance(child, (str, int, float)):
            found = _find(child, id_)
            if found is not None:
                return found
    return None


def test_nav_has_modules_after_forward_backward_and_ranks_last():
    paths = [p.PATH for p in PAGES]
    assert paths[paths.index("/forward-backward") + 1] == "/modules" and paths[-1] == "/ranks"
    app = viewer.create_app(profiler.load(TRACE))
    assert _find(app.layout, "nav-modules") is not None and _find(app.layout, "nav-ranks") is not None


def test_modules_page_grid_is_the_indented_tree():
    view = ProfileView(profiler.load(TRACE))
    grid = _find(modules_page.page(view), "mod-grid")
    names = [r["module"] for r in grid.rowData]
    assert names == ["Sequential_0", "\u2003Linear_0", "\u2003ReLU_0", "\u2003Linear_1", "(no module)"]
    headers = [c["headerName"] for c in grid.columnDefs]
    assert headers[:7] == ["Module", "Fwd Self CPU", "Fwd CPU total", "Bwd Self CPU", "Bwd CPU total",
                           "Fwd+Bwd CPU total", "Fwd+Bwd CPU %"] and headers[-1] == "# of Calls"
    assert sum(r["forward_backward_cpu_time_total_percent"] for r in grid.rowData if r["depth"] == 0) == \
        pytest.approx(100.0)


@pytest.mark.parametrize("phase", list(modules_page.PHASES))
def test_icicle_boxes_hold_their_children(phase):
    data = profiler.load(TRACE)
    roots = module_tree(data)
    fig = modules_page.icicle_figure(roots, data.total_average().self_cpu_time_total, phase)
    trace = fig.data[0]
    value = dict(zip(trace.ids, trace.values))
    for node_id, parent in zip(trace.ids, trace.parents):
        if parent:
            kids = [v for i, p, v in zip(trace.ids, trace.parents, trace.values) if p == node_id]
            assert value[node_id] >= sum(kids)
    assert len(trace.ids) == len(flatten(roots)) + 1 and trace.ids[0] == modules_page.ALL


def test_modules_page_without_module_ranges_says_how_to_record_them():
    from gradtrace.profiler.synthetic import from_events

    page = modules_page.page(ProfileView(from_events([{"name": "mul", "start": 0, "end": 10}])))
    assert "with_modules=True" in page.children[0].children


def test_ranks_page_of_a_run_folder(tmp_path):
    write_rank_traces(tmp_path)
    view, summary = ranks_page.open_run(tmp_path)
    assert view.label == f"{tmp_path.name} (rank 0 of 2)"
    fig = ranks_page.step_figure(summary)
    assert [t.name for t in fig.data] == ["rank 0", "rank 1"]
    assert list(fig.data[1].y) == [1.0, 1.5]
    assert list(fig.data[1].marker.line.width) == [0, 3]        # rank 1 is the slowest in step 2
    assert list(fig.data[0].marker.line.width) == [0, 0]        # step 1: a tie, no straggler
    breakdown = ranks_page.breakdown_figure(summary)
    assert [t.name for t in breakdown.data] == ["compute", "exposed communication", "idle"]
    assert list(breakdown.data[0].x) == [0.4, 0.6]
    page = ranks_page.page(summary)
    assert _find(page, "rk-single") is None and _find(page, "rk-table") is not None


def test_ranks_page_of_one_profile_is_one_rank():
    view = ProfileView(profiler.load(TRACE))
    summary = ranks_page.summary_of(view)
    assert [r["rank"] for r in summary["ranks"]] == [0] and len(summary["steps"]) == 2
    assert _find(ranks_page.page(summary, single=True), "rk-single") is not None


def test_the_page_and_the_cli_show_the_same_ranks_tables(tmp_path):
    """One row builder (profiler.ranks.rank_table/step_table): the Ranks page's cells are the
    CLI's, Start spread included."""
    import io

    from rich.console import Console

    from gradtrace.cli.ranks import rank_tables
    from gradtrace.profiler.ranks import rank_table, step_table

    write_rank_traces(tmp_path)
    _, summary = ranks_page.open_run(tmp_path)
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(rank_tables(summary, plain=True))
    text = out.getvalue()
    page = ranks_page.page(summary)
    for section_id, (columns, rows) in (("rk-table", rank_table(summary)), ("rk-slowest", step_table(summary))):
        table = _find(page, section_id).children[-1]
        assert [th.children for th in table.children[0].children.children] == [c.header for c in columns]
        assert [[td.children for td in tr.children] for tr in table.children[1].children] == rows
        for col in columns:
            assert col.header in text
        for row in rows:
            assert all(cell in text for cell in row)
    assert "Start spread (ms)" in text


def test_ranks_page_of_a_long_profile_draws_a_bounded_page():
    """Tens of thousands of steps: at most MAX_STEP_BARS bars per rank and STEP_TABLE_ROWS rows
    (the page with one bar and one row per step hung the browser at 10M events)."""
    from gradtrace.profiler import synthetic
    from gradtrace.viewer.figures import MAX_STEP_BARS

    data = synthetic.training_profile(1_500_000, threads=1)
    summary = ranks_page.summary_of(ProfileView(data))
    assert len(summary["steps"]) > MAX_STEP_BARS
    fig = ranks_page.step_figure(summary)
    assert all(len(t.x) <= MAX_STEP_BARS for t in fig.data)
    page = ranks_page.page(summary, single=True)
    table = next(c for c in page.children if getattr(c, "id", None) == "rk-slowest")
    assert str(table).count("Tr(") <= ranks_page.STEP_TABLE_ROWS + 1
