"""The History page in headless Chromium: two clicks on the trend compare two runs."""
from __future__ import annotations

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By

from gradtrace import viewer
from gradtrace.profiler import history
from tests.profiler.test_stats import steps_profile

from .test_browser import assert_clean, cell_texts, grid_count, plot_traces, start, wait_until

pytestmark = pytest.mark.browser


def test_two_clicks_on_the_trend_show_the_diff_of_two_runs(dash_duo, tmp_path, shot):
    store = tmp_path / "runs.sqlite"
    with history.RunStore(store) as s:
        for i in range(10):
            s.add(steps_profile(8, matmul_us=100 if i < 5 else 140, seed=i), f"r{i}.gtprof", {"commit": f"c{i}"})
    app = viewer.create_app(steps_profile(8, seed=0), store=store)
    start(dash_duo, app, "/history")
    wait_until(lambda: plot_traces(dash_duo, "hist-trend"), what="the trend")
    dash_duo.select_dcc_dropdown("#hist-series", value="op: matmul")
    wait_until(lambda: "from run #6" in dash_duo.find_element("#hist-cps").text, what="the change point")
    points = dash_duo.driver.find_elements(By.CSS_SELECTOR, "#hist-trend .scatterlayer .trace:first-child .point")
    assert len(points) == 10
    for k in (1, 8):       # run #2, then run #9
        ActionChains(dash_duo.driver).move_to_element(points[k]).click().perform()
        points = wait_until(lambda: dash_duo.driver.find_elements(
            By.CSS_SELECTOR, "#hist-trend .scatterlayer .trace:first-child .point"), what="points")
    wait_until(lambda: grid_count(dash_duo, "hist-diff-grid"), what="the diff grid")
    names = cell_texts(dash_duo, "hist-diff-grid", "name")
    verdicts = cell_texts(dash_duo, "hist-diff-grid", "verdict")
    assert dict(zip(names, verdicts)).get("matmul") == "slower"
    assert "#9" in dash_duo.find_element("#hist-diff-caption").text
    shot("history")
    assert_clean(dash_duo)
