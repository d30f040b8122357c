"""The autograd graph page in headless Chromium on a 3-step GPT and a 100-step run: it opens
readable, search highlights and centres, a click shows a node and its counterpart, a group
collapses and expands, the step selector switches steps. Screenshots: test-artifacts/viewer/."""
from __future__ import annotations

import time

import pytest
from selenium.common.exceptions import MoveTargetOutOfBoundsException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from gradtrace import viewer

from .test_browser import assert_clean, start, wait_until
from .workloads import workload_profile

pytestmark = pytest.mark.browser

CY = "const cy = document.querySelector('#gr-cyto')._cyreg.cy;"


@pytest.fixture(scope="module")
def gpt(tmp_path_factory):
    return str(workload_profile(tmp_path_factory.mktemp("gpt") / "gpt3.gtprof", "gpt", steps=3))


@pytest.fixture(scope="module")
def gpt100(tmp_path_factory):
    return str(workload_profile(tmp_path_factory.mktemp("gpt100") / "gpt100.gtprof", "gpt", steps=100))


def _cy(dash_duo, js):
    return dash_duo.driver.execute_script(CY + js)


def _ready(dash_duo):
    """Wait until the graph is drawn and its first view set (zoom no longer Cytoscape's 1)."""
    return wait_until(lambda: dash_duo.driver.execute_script(
        "const c = document.querySelector('#gr-cyto'); const cy = c && c._cyreg && c._cyreg.cy;"
        "return cy && cy.nodes().length && cy.zoom() !== 1 ? [cy.nodes().length, cy.zoom()] : null;"),
        what="graph drawn")


def _click_node(dash_duo, selector_js):
    """Click a node where it is drawn (offsets from the canvas's centre, which every Selenium
    version moves to the same way). The canvas is scrolled to the middle of the window first:
    typing in the search box can scroll the page so that the canvas's centre, where the move
    starts, lies outside the window ("move target out of bounds").
    A graph still settling (a layout or a viewport animation after the last callback) can move
    the node between reading its position and the click: then the node is centred again and
    the click retried, a few times."""
    for attempt in range(5):
        canvas = dash_duo.find_element("#gr-cyto")
        dash_duo.driver.execute_script("arguments[0].scrollIntoView({block: 'center', "
                                       "inline: 'center'});", canvas)
        dx, dy = _cy(dash_duo, f"const n = {selector_js}; cy.stop(); cy.center(n); const p = n.renderedPosition();"
                               "return [p.x - cy.width() / 2, p.y - cy.height() / 2];")
        try:
            ActionChains(dash_duo.driver).move_to_element(canvas).move_by_offset(round(dx), round(dy)).click().perform()
            return
        except MoveTargetOutOfBoundsException:
            if attempt == 4:
                raise
            time.sleep(0.3)


def _legible_labels(dash_duo) -> int:
    """Nodes in the viewport whose label is drawn at 9 px or more."""
    return _cy(dash_duo, "const ext = cy.extent(); return cy.nodes().filter(n => !n.isParent() &&"
                         " n.position('x') > ext.x1 && n.position('x') < ext.x2 && n.position('y') > ext.y1 &&"
                         " n.position('y') < ext.y2).length * (cy.zoom() * 12 >= 9 ? 1 : 0);")


def test_graph_opens_readable_and_reacts(dash_duo, gpt, shot):
    app = viewer.create_app(gpt)
    start(dash_duo, app, "/graph")
    n_nodes, zoom = _ready(dash_duo)
    assert zoom >= 0.45, zoom                       # labels 12 px * zoom: at least ~5.4 px... and
    assert _legible_labels(dash_duo) >= 8           # ...at least 8 nodes readable in the first view
    edges = _cy(dash_duo, "return [cy.edges('.flow').length, cy.edges('.created').length, cy.nodes('.group').length,"
                          " cy.nodes('.collapsed').length, cy.nodes('.accumulate').length];")
    flow, created, groups, collapsed, acc = edges
    assert flow > 20 and created > 10 and groups + collapsed > 3 and acc > 0, edges
    shot("graph_gpt_first_view")

    # Search in the first view finds the collapsed groups that hold a match.
    search = dash_duo.find_element("#gr-search")
    search.send_keys("MmBackward0\n")
    wait_until(lambda: "match" in dash_duo.find_element("#gr-search-status").text, what="search status")
    assert _cy(dash_duo, "return cy.nodes('.found').length;") >= 1

    # A click on a collapsed group expands it: more nodes.
    before = _cy(dash_duo, "return cy.nodes().length;")
    _cy(dash_duo, "cy.center(cy.nodes('.collapsed')[0]); return 1;")
    _click_node(dash_duo, "cy.nodes('.collapsed')[0]")
    wait_until(lambda: _cy(dash_duo, "return cy.nodes().length;") > before, what="group expanded",
               show=lambda: _cy(dash_duo, "return [cy.nodes().length, cy.nodes(':selected').map(n => n.id())];"))

    # Expand all; search again: every (Add|B)mmBackward0 highlighted, the first centred.
    dash_duo.find_element("#gr-expand").click()
    wait_until(lambda: _cy(dash_duo, "return cy.nodes('.collapsed').length;") == 0, what="expanded")
    shot("graph_gpt_expanded")
    search.send_keys(Keys.CONTROL, "a")
    search.send_keys("MmBackward\n")
    # The first match is selected and centred (AddmmBackward0 and attention's BmmBackward0 match).
    wait_until(lambda: _cy(dash_duo, "const n = cy.nodes('.found:selected')[0]; const p = n.renderedPosition();"
                                     "return Math.abs(p.x - cy.width()/2) < 40 && Math.abs(p.y - cy.height()/2) < 40;"),
               what="found node centred")
    assert _cy(dash_duo, "return cy.nodes('.found').length;") >= 4
    shot("graph_gpt_search")

    # A click on the found node: its times, edges and the forward op that created it.
    _cy(dash_duo, "cy.center(cy.nodes('.found').filter(n => n.data('label') === 'BmmBackward0')[0]); return 1;")
    _click_node(dash_duo, "cy.nodes('.found').filter(n => n.data('label') === 'BmmBackward0')[0]")
    dash_duo.wait_for_text_to_equal("#gr-details-name", "BmmBackward0", timeout=10)
    details = dash_duo.find_element("#gr-details").text
    for word in ("self CPU", "created by forward op", "matmul", "gradient flows into", "graph node id", "input shapes"):
        assert word in details, details
    shot("graph_gpt_details")
    assert_clean(dash_duo)


def _group_overlaps(dash_duo) -> list:
    """Pairs of group boxes, neither inside the other, whose drawn boxes (titles included)
    overlap."""
    return _cy(dash_duo, """
        const boxes = cy.nodes('.group').map(g => [g, g.boundingBox({includeLabels: true})]);
        const out = [];
        for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
          const [a, p] = boxes[i], [b, q] = boxes[j];
          if (a.ancestors().contains(b) || b.ancestors().contains(a)) continue;
          if (p.x1 < q.x2 && q.x1 < p.x2 && p.y1 < q.y2 && q.y1 < p.y2) out.push([a.data('label'), b.data('label')]);
        }
        return out;""")


def test_search_opens_collapsed_groups_and_group_boxes_never_overlap(dash_duo, gpt, shot):
    app = viewer.create_app(gpt)
    start(dash_duo, app, "/graph")
    _ready(dash_duo)
    assert _group_overlaps(dash_duo) == []
    # A name that only a collapsed group holds in the first view.
    hidden = _cy(dash_duo, """
        const shown = new Set(cy.nodes().filter(n => !n.isParent() && !n.hasClass('collapsed')).map(n => n.data('label')));
        for (const g of cy.nodes('.collapsed')) for (const m of g.data('members').split(' '))
          if (!shown.has(m) && m.endsWith('Backward0')) return m;
        return null;""")
    assert hidden, "the first view should hide some backward node in a collapsed group"
    search = dash_duo.find_element("#gr-search")
    search.send_keys(hidden + "\n")

    def revealed():
        return _cy(dash_duo, f"""
        const n = cy.nodes('.found:selected').filter(n => n.data('label') === '{hidden}')[0];
        if (!n) return null;
        const p = n.renderedPosition();
        return [p.x > 0 && p.x < cy.width() && p.y > 0 && p.y < cy.height(), n.parent().length];""")

    def seen():
        return _cy(dash_duo, "return [document.querySelector('#gr-search').value, "
                             "cy.nodes('.found').map(n => n.data('label')), cy.nodes('.collapsed').length]")
    # The groups around it open; it is marked, selected and in view. (Once, on a loaded
    # machine, the search was never submitted: the box is submitted again before failing.)
    try:
        found = wait_until(revealed, timeout=10.0, what=f"{hidden} revealed and selected", show=seen)
    except AssertionError:
        search.send_keys("\n")
        found = wait_until(revealed, what=f"{hidden} revealed and selected after a second Enter", show=seen)
    assert found[0], _cy(dash_duo, f"const n = cy.nodes('.found:selected')[0]; return [n.data('label'), n.renderedPosition(), cy.width(), cy.height(), cy.zoom(), cy.pan()]")
    assert f"for \u201c{hidden}\u201d" in dash_duo.find_element("#gr-search-status").text
    assert _group_overlaps(dash_duo) == []
    shot("graph_gpt_search_opens_group")

    # Every group open: boxes nest, side by side or one under the other, never overlapping.
    search.send_keys(Keys.CONTROL, "a")
    search.send_keys(Keys.BACKSPACE, "\n")
    wait_until(lambda: dash_duo.find_element("#gr-search-status").text == "", what="search cleared")
    dash_duo.find_element("#gr-expand").click()
    wait_until(lambda: _cy(dash_duo, "return cy.nodes('.collapsed').length;") == 0, what="expanded",
               show=lambda: [dash_duo.find_element("#gr-status").text, dash_duo.find_element("#gr-search-status").text,
                             _cy(dash_duo, "return cy.nodes('.collapsed').map(n => [n.id(), n.data('kind'), n.isParent()])")])
    n_groups = _cy(dash_duo, "return cy.nodes('.group').length;")
    assert n_groups > 20
    assert _group_overlaps(dash_duo) == []
    # The top of the first TransformerBlock at a zoom where labels are still legible.
    _cy(dash_duo, "const bb = cy.nodes('.group').filter(g => g.data('label') === 'TransformerBlock')[0].boundingBox();"
                  "cy.zoom(0.55); cy.pan({x: cy.width() / 2 - (bb.x1 + bb.x2) / 2 * 0.55, y: 20 - bb.y1 * 0.55});"
                  "return 1;")
    shot("graph_gpt_groups_expanded")
    assert_clean(dash_duo)


def test_graph_100_steps(dash_duo, gpt100, shot):
    app = viewer.create_app(gpt100)
    start(dash_duo, app, "/graph")
    _ready(dash_duo)
    before = _cy(dash_duo, "return cy.nodes().map(n => n.id()).join();")
    dash_duo.find_element("#gr-step").click()
    ActionChains(dash_duo.driver).send_keys("ProfilerStep#100").perform()
    # The dropdown lists a few options at a time; the search leaves the one wanted.
    option = wait_until(lambda: [o for o in dash_duo.driver.find_elements(By.CSS_SELECTOR, "[role='option']")
                                 if "ProfilerStep#100" in o.text], what="step 100 in the list",
                        show=lambda: [o.text for o in dash_duo.driver.find_elements(By.CSS_SELECTOR, "[role='option']")][:5])
    option[0].click()
    wait_until(lambda: "ProfilerStep#100" in dash_duo.find_element("#gr-step").text, what="step 100 chosen",
               show=lambda: dash_duo.find_element("#gr-step").get_attribute("outerHTML")[:1500])
    # A new step: other events, so other element ids.
    wait_until(lambda: _cy(dash_duo, "return cy.nodes().map(n => n.id()).join();") != before, what="step 100 drawn")
    n_nodes, zoom = _ready(dash_duo)
    assert zoom >= 0.45 and _legible_labels(dash_duo) >= 8
    shot("graph_gpt100_last_step")
    assert_clean(dash_duo)


@pytest.fixture(scope="module")
def chain1000(tmp_path_factory):
    """One step of 500 forward ops and their 500 backward nodes, in 50 modules."""
    import gradtrace.autograd as ag
    from gradtrace import profiler

    ag.manual_seed(0)
    w = ag.randn(8, 8).requires_grad_()
    with profiler.profile(with_modules=True) as prof:
        with profiler.record_function("ProfilerStep#0"):
            y = ag.randn(4, 8)
            for _ in range(50):
                with profiler.record_function("nn.Module: Block"):
                    for _ in range(5):
                        y = (y @ w).tanh()
            y.sum().backward()
    path = tmp_path_factory.mktemp("chain") / "chain.gtprof"
    prof.save(path)
    return str(path)


def test_graph_thousand_nodes_renders(dash_duo, chain1000, shot):
    app = viewer.create_app(chain1000)
    start(dash_duo, app, "/graph")
    _ready(dash_duo)
    dash_duo.driver.execute_script("window._t0 = performance.now();")
    dash_duo.find_element("#gr-expand").click()
    n = wait_until(lambda: _cy(dash_duo, "return cy.nodes().length >= 1000 ? cy.nodes().length : 0;"),
                   what="1,000 nodes drawn", timeout=60)
    # Time from the click to the drawn graph, measured in the page (printed, not asserted).
    ms = dash_duo.driver.execute_script("return performance.now() - window._t0;")
    print(f"\ngraph page: {n} nodes drawn {ms:.0f} ms after 'Expand all'")
    # tanh→mm and mm→tanh along the chain, and every mm into w's AccumulateGrad.
    assert _cy(dash_duo, "return cy.edges('.flow').length;") >= 740
    shot("graph_1000_nodes")
    assert_clean(dash_duo)
