"""The Kernels page and the Overview's GPU sections in headless Chromium, with screenshots
under test-artifacts/viewer/ (a real 5-step GPU trace when present, else the hand-built one)."""
from __future__ import annotations

from pathlib import Path

import pytest

from gradtrace import viewer
from gradtrace.viewer import kernels_page

from .test_browser import assert_clean, grid_count, plot_traces, start, wait_until
from tests.profiler.gpu_traces import write_gpu_trace

pytestmark = pytest.mark.browser
SAMPLE = Path(__file__).resolve().parents[2].parent / "shared" / "kineto-samples" / "gpu_5steps_rank0.json.gz"


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return SAMPLE if SAMPLE.exists() else write_gpu_trace(tmp_path_factory.mktemp("gpu") / "gpu.json")


def _cut_names(dash_duo) -> list:
    """Name cells whose text does not fit their cell (shown with an ellipsis)."""
    return dash_duo.driver.execute_script(
        "return Array.from(document.querySelectorAll(\"#kn-grid .ag-row [col-id='name']\"))"
        ".filter(c => { const v = c.querySelector('.ag-cell-value') || c; return v.scrollWidth > v.clientWidth + 1; })"
        ".map(c => c.textContent);")


def _empty_space(dash_duo) -> float:
    """Pixels of the grid's body right of its last column."""
    return dash_duo.driver.execute_script(
        "const v = document.querySelector('#kn-grid .ag-center-cols-viewport');"
        "const c = document.querySelector('#kn-grid .ag-center-cols-container');"
        "return v.clientWidth - c.getBoundingClientRect().width;")


def _name_column_width(dash_duo) -> float:
    return dash_duo.driver.execute_script(
        "return document.querySelector(\"#kn-grid .ag-header-cell[col-id='name']\").getBoundingClientRect().width;")


def test_kernels_page(dash_duo, trace, shot):
    app = viewer.create_app(trace)
    start(dash_duo, app, "/kernels")
    n = wait_until(lambda: grid_count(dash_duo, "kn-grid"), what="kernel rows")
    assert "gt-tab-active" in dash_duo.find_element("#nav-kernels").get_attribute("class")
    # Names are cut only when the column is at its widest bound, never with room beside them
    # (waited for: the grid sizes its columns after its first rows are drawn).
    def names_fit():
        cut = _cut_names(dash_duo)
        return not cut or (_name_column_width(dash_duo) >= kernels_page._NAME_PX[1] - 2 and _empty_space(dash_duo) <= 2)

    wait_until(names_fit, what="names cut only at the column's widest",
               show=lambda: (_name_column_width(dash_duo), _empty_space(dash_duo), _cut_names(dash_duo)[:2]))
    shot("kernels")
    # The search matches the full name: "ncclDevComm" is only in NCCL kernels' parameter lists.
    search = dash_duo.find_element("#kn-search")
    search.send_keys("ncclDevComm\n")
    wait_until(lambda: 0 < grid_count(dash_duo, "kn-grid") < n, what="rows of NCCL kernels")
    search.clear()
    search.send_keys(" \n")
    # + launching op: a column of op names appears.
    dash_duo.find_element("#kn-group input[value='op']").click()
    dash_duo.wait_for_element("#kn-grid .ag-header-cell[col-id='op']", timeout=15)
    assert dash_duo.find_elements("#kn-memcpy-grid") and dash_duo.find_elements("#kn-collective-grid")
    assert_clean(dash_duo)
    shot("kernels_by_op")
    dash_duo.driver.execute_script("document.querySelector('#kn-memcpy').scrollIntoView()")
    shot("kernels_copies_collectives")


def test_overview_of_a_gpu_trace(dash_duo, trace, shot):
    app = viewer.create_app(trace)
    start(dash_duo, app)
    dash_duo.wait_for_element("#ov-gpu", timeout=20)
    cards = dash_duo.find_element("#ov-gpu").text
    for title in ("GPU UTILIZATION", "SM EFFICIENCY", "ACHIEVED OCCUPANCY", "TENSOR CORES"):
        assert title in cards.upper()
    traces = wait_until(lambda: plot_traces(dash_duo, "ov-gpu-steps"), what="step breakdown")
    assert [name for _, name, _ in traces][:2] == ["Kernel", "Memcpy"]
    wait_until(lambda: plot_traces(dash_duo, "ov-gpu-util"), what="utilization over time")
    wait_until(lambda: plot_traces(dash_duo, "ov-gpu-idle"), what="idle time by cause")
    assert dash_duo.find_element("#ov-recommendations").text
    assert_clean(dash_duo)
    dash_duo.driver.execute_script("document.querySelector('#ov-gpu').scrollIntoView()")
    shot("overview_gpu")
    dash_duo.driver.execute_script("document.querySelector('#ov-recommendations').scrollIntoView()")
    shot("overview_gpu_recommendations")
