"""The timeline in headless Chromium on a 3-step GPT and a 100-step run: names on the slices
that hold them, a click anywhere on a slice selects it, rows labelled by thread and depth, the
plot fills the page, zoom to a step. Screenshots: test-artifacts/viewer/."""
from __future__ import annotations

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By

from gradtrace import viewer

from .test_browser import assert_clean, start, wait_until
from .test_graph_browser import gpt, gpt100  # noqa: F401 - the profiles, made once per module

pytestmark = pytest.mark.browser


def _bar_texts(dash_duo) -> list[str]:
    """Names drawn on bars (plotly removes the ones that do not fit at the minimum size)."""
    return dash_duo.driver.execute_script(
        "return Array.from(document.querySelectorAll('#tl-graph .barlayer .bartext'))"
        ".filter(t => t.textContent && getComputedStyle(t).display !== 'none' && t.getBBox().width > 0)"
        ".map(t => t.textContent);")


def _choose_step(dash_duo, text):
    dash_duo.find_element("#tl-step").click()
    ActionChains(dash_duo.driver).send_keys(text).perform()
    option = wait_until(lambda: [o for o in dash_duo.driver.find_elements(By.CSS_SELECTOR, "[role='option']")
                                 if text in o.text], what=f"{text} in the list")
    option[0].click()


def _click_bar_middle(dash_duo, name):
    """Click the middle of the widest drawn bar named ``name`` (not near its ends)."""
    box = dash_duo.driver.execute_script(
        "const bars = Array.from(document.querySelectorAll('#tl-graph .barlayer .point'))"
        ".filter(p => p.querySelector('.bartext') && p.querySelector('.bartext').textContent === arguments[0]);"
        "bars.sort((a, b) => b.getBoundingClientRect().width - a.getBoundingClientRect().width);"
        "const r = bars[0].getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2, r.width];", name)
    plot = dash_duo.find_element("#tl-graph .nsewdrag")
    rect = plot.rect
    ActionChains(dash_duo.driver).move_to_element(plot).move_by_offset(
        round(box[0] - (rect["x"] + rect["width"] / 2)), round(box[1] - (rect["y"] + rect["height"] / 2))).click().perform()
    return box[2]


def test_timeline_readable_and_clickable(dash_duo, gpt, shot):  # noqa: F811
    app = viewer.create_app(gpt)
    start(dash_duo, app, "/timeline")
    wait_until(lambda: dash_duo.driver.execute_script(
        "return document.querySelectorAll('#tl-graph .barlayer .point').length"), what="bars")
    # The plot fills the page below the toolbar.
    height = dash_duo.driver.execute_script("return document.querySelector('#tl-graph').getBoundingClientRect().height")
    assert height >= 0.6 * dash_duo.driver.execute_script("return window.innerHeight"), height
    ticks = [t.text for t in dash_duo.driver.find_elements(By.CSS_SELECTOR, "#tl-graph .ytick text")]
    assert "thread 1 · depth 0" in ticks and "thread 1 · depth 1" in ticks, ticks
    assert "ProfilerStep#1" in _bar_texts(dash_duo)
    shot("timeline_gpt_whole")

    _choose_step(dash_duo, "ProfilerStep#2")
    # Zoomed to step 2: the x axis starts where step 2 does, its backward nodes are named.
    wait_until(lambda: dash_duo.driver.execute_script(
        "return document.querySelector('#tl-graph .js-plotly-plot')._fullLayout.xaxis.range[0]") > 1,
        what="zoomed to step 2")
    names = _bar_texts(dash_duo)
    assert len(names) >= 8 and "ProfilerStep#2" in names, names
    shot("timeline_gpt_step")

    # Zoom (as a drag would) onto the step's longest backward node: its name is drawn.
    name = dash_duo.driver.execute_script(
        "const gd = document.querySelector('#tl-graph .js-plotly-plot');"
        "const t = gd._fullData.find(t => t.name === 'backward node'); let k = 0;"
        "const x = Array.from(t.x), base = Array.from(t.base);"
        "const lo = gd._fullLayout.xaxis.range[0], hi = gd._fullLayout.xaxis.range[1];"
        "for (let i = 0; i < x.length; i++) if (base[i] > lo && base[i] < hi && x[i] > x[k]) k = i;"
        "Plotly.relayout(gd, {'xaxis.range': [base[k] - x[k] * 0.6, base[k] + x[k] * 1.6]});"
        "return t.hovertext[k].match(/<b>(.*?)<\\/b>/)[1];")   # the full name (a label may be shortened)
    wait_until(lambda: name in _bar_texts(dash_duo), what=f"{name} named", show=lambda: _bar_texts(dash_duo)[:20])
    names = _bar_texts(dash_duo)
    # A click in the middle of a wide backward slice selects it: details and its forward op.
    backward_name = name
    width = _click_bar_middle(dash_duo, backward_name)
    assert width > 40
    wait_until(lambda: backward_name in dash_duo.find_element("#tl-details").text, what="details",
               show=lambda: dash_duo.find_element("#tl-details").text[:200])
    wait_until(lambda: "link" in dash_duo.find_element("#tl-status").text, what="link drawn")
    shot("timeline_gpt_selected")
    assert_clean(dash_duo)


def test_timeline_100_steps(dash_duo, gpt100, shot):  # noqa: F811
    app = viewer.create_app(gpt100)
    start(dash_duo, app, "/timeline")
    wait_until(lambda: dash_duo.driver.execute_script(
        "return document.querySelectorAll('#tl-graph .barlayer .point').length"), what="bars", timeout=30)
    # 36,500 ranges: the short ones merged into runs, the long ones drawn as bars (a step is
    # 14 px wide here: too narrow for its name, which is not drawn).
    assert "merged" in dash_duo.find_element("#tl-status").text
    shot("timeline_gpt100_whole")
    _choose_step(dash_duo, "ProfilerStep#57")
    wait_until(lambda: "ProfilerStep#57" in _bar_texts(dash_duo) and dash_duo.driver.execute_script(
        "return document.querySelector('#tl-graph .js-plotly-plot')._fullLayout.xaxis.range[0]") > 1,
        what="step 57 named", show=lambda: _bar_texts(dash_duo)[:10])
    assert len(_bar_texts(dash_duo)) >= 8
    shot("timeline_gpt100_step")
    assert_clean(dash_duo)
