"""The Modules and Ranks pages in headless Chromium, with screenshots under test-artifacts/viewer/."""
from __future__ import annotations

from pathlib import Path

import pytest

from gradtrace import profiler, viewer
from gradtrace.profiler.module_tree import flatten, module_tree
from gradtrace.viewer import ranks_page

from .test_browser import assert_clean, cell_texts, grid_count, plot_traces, start, wait_until
from .workloads import workload_profile
from tests.profiler.rank_traces import write_rank_traces

pytestmark = pytest.mark.browser
TRACE = Path(__file__).resolve().parents[1] / "profiler" / "data" / "torch_mlp_cpu.json.gz"


@pytest.fixture(scope="module")
def gpt_profile(tmp_path_factory):
    """gradtrace demo gpt --steps 3 --with-modules, in Python (autograd.models' tiny GPT)."""
    return str(workload_profile(tmp_path_factory.mktemp("gpt") / "gpt.gtprof", "gpt", steps=3))


def _icicle_labels(dash_duo):
    return dash_duo.driver.execute_script(
        "const gd = document.querySelector('#mod-figure .js-plotly-plot');"
        "return gd && gd._fullData ? Array.from(gd._fullData[0].labels) : null;")


def test_modules_page_of_a_torch_trace(dash_duo, shot):
    app = viewer.create_app(TRACE)
    start(dash_duo, app, "/modules")
    wait_until(lambda: grid_count(dash_duo, "mod-grid") == 5, what="5 tree rows")
    names = wait_until(lambda: cell_texts(dash_duo, "mod-grid", "module"), what="module cells")
    assert [n.strip("\u2003 ") for n in names] == ["Sequential_0", "Linear_0", "ReLU_0", "Linear_1", "(no module)"]
    labels = wait_until(lambda: _icicle_labels(dash_duo), what="icicle")
    assert {"Sequential_0", "Linear_0", "Linear_1", "(no module)"} <= set(labels)
    assert "gt-tab-active" in dash_duo.find_element("#nav-modules").get_attribute("class")
    shot("modules_torch_trace")
    # Backward only: the figure is redrawn with the backward times.
    dash_duo.find_element("#mod-phase input[value='backward']").click()
    wait_until(lambda: "Backward CPU time" in dash_duo.driver.execute_script(
        "return document.querySelector('#mod-figure .gtitle').textContent"), what="backward icicle")
    assert_clean(dash_duo)


def test_modules_page_of_a_gradtrace_gpt(dash_duo, gpt_profile, shot):
    app = viewer.create_app(gpt_profile)
    start(dash_duo, app, "/modules")
    n = len(flatten(module_tree(profiler.load(gpt_profile))))
    wait_until(lambda: grid_count(dash_duo, "mod-grid") == n, what=f"{n} tree rows")
    names = wait_until(lambda: cell_texts(dash_duo, "mod-grid", "module"), what="module cells")
    assert names[0] == "TinyGPT" and any(t.strip("\u2003 ") == "TransformerBlock #2" for t in names)
    wait_until(lambda: "TinyGPT" in (_icicle_labels(dash_duo) or []), what="icicle")
    assert_clean(dash_duo)
    shot("modules_gpt")


def test_ranks_page_of_a_run_folder(dash_duo, tmp_path, shot):
    write_rank_traces(tmp_path)
    view, summary = ranks_page.open_run(tmp_path)
    app = viewer.create_app(view, ranks=summary)
    start(dash_duo, app, "/ranks")
    traces = wait_until(lambda: plot_traces(dash_duo, "rk-steps"), what="step bars")
    assert [name for _, name, _ in traces] == ["rank 0", "rank 1"]
    table = dash_duo.find_element("#rk-table").text
    assert "1.250" in table and "wall clock" in table
    slowest = dash_duo.find_element("#rk-slowest").text
    assert "ProfilerStep#2 1 1.500 0.500" in " ".join(slowest.split())
    assert not dash_duo.find_elements("#rk-single")
    assert_clean(dash_duo)
    shot("ranks_run_folder")
