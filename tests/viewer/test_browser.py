"""Every page in headless Chromium: renders, shows its elements, reacts, logs no console error.

Each test starts the app on a profile made by the real engine and profiler (or a synthetic
one for size), opens a page, checks what is on it, drives an interaction, and saves a
screenshot under test-artifacts/viewer/.
"""
from __future__ import annotations

import time

import pytest
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By

from gradtrace import profiler
from gradtrace import viewer
from gradtrace.viewer.model import ProfileView

from .workloads import XSS

pytestmark = pytest.mark.browser


# --------------------------------------------------------------------------- helpers


def start(dash_duo, app, path="/"):
    dash_duo.start_server(app)
    if path != "/":
        dash_duo.driver.get(dash_duo.server_url + path)
    dash_duo.wait_for_element("#page > div", timeout=20)


def goto(dash_duo, path, ready):
    dash_duo.driver.get(dash_duo.server_url + path)
    dash_duo.wait_for_element(ready, timeout=20)


def assert_clean(dash_duo):
    """No console errors, no alert, nothing fetched from outside the app's own server."""
    logs = dash_duo.get_logs()
    assert logs == [], logs
    try:
        text = dash_duo.driver.switch_to.alert.text
        pytest.fail(f"an alert opened: {text!r}")
    except NoAlertPresentException:
        pass
    origins = dash_duo.driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
        ".filter(n => !n.startsWith(location.origin) && !n.startsWith('data:') && !n.startsWith('blob:'))")
    assert origins == [], f"fetched from outside the app: {origins}"


def wait_until(cond, timeout=15.0, what="condition", show=None):
    """Poll ``cond`` until truthy; on timeout, fail naming ``what`` (and ``show()``'s value)."""
    end = time.time() + timeout
    while time.time() < end:
        try:
            value = cond()
            if value:
                return value
        except Exception:  # noqa: BLE001 - the DOM changes under us while Dash re-renders
            pass
        time.sleep(0.1)
    seen = ""
    if show is not None:
        try:
            seen = f"; saw {show()!r}"
        except Exception as exc:  # noqa: BLE001
            seen = f"; show() failed: {exc!r}"
    raise AssertionError(f"timed out waiting for {what}{seen}")


def grid_rows(dash_duo, grid_id):
    """Rows rendered in the DOM (AG Grid renders only the visible ones and a buffer)."""
    return dash_duo.driver.find_elements(By.CSS_SELECTOR, f"#{grid_id} .ag-center-cols-container .ag-row")


def grid_count(dash_duo, grid_id):
    """Rows the grid displays (after filters), from the grid's API."""
    return dash_duo.driver.execute_script(
        f"const api = window.dash_ag_grid && dash_ag_grid.getApi('{grid_id}');"
        "return api ? api.getDisplayedRowCount() : null;")


def grid_column(dash_duo, grid_id, field):
    """Values of one field in displayed order (after the grid's sort and filters)."""
    return dash_duo.driver.execute_script(
        f"const api = window.dash_ag_grid && dash_ag_grid.getApi('{grid_id}'); if (!api) return null;"
        f"const out = []; api.forEachNodeAfterFilterAndSort(n => out.push(n.data['{field}'])); return out;")


def cell_texts(dash_duo, grid_id, col_id):
    """Texts of the rendered cells of one column (what the user sees)."""
    return [c.text for c in dash_duo.driver.find_elements(By.CSS_SELECTOR, f"#{grid_id} .ag-row [col-id='{col_id}']")]


def plot_traces(dash_duo, graph_id):
    return dash_duo.driver.execute_script(
        f"const gd = document.querySelector('#{graph_id} .js-plotly-plot');"
        # _fullData: the traces as drawn (base64 arrays decoded).
        "return gd && gd._fullData ? gd._fullData.map(t => [t.type, t.name || '', (t.x || []).length]) : null;")


# --------------------------------------------------------------------------- pages


def test_overview(dash_duo, profiles, shot):
    app = viewer.create_app(profiles["workload"])
    start(dash_duo, app)
    dash_duo.wait_for_element("#ov-sentence")
    sentence = dash_duo.find_element("#ov-sentence").text
    assert sentence.startswith("The biggest cost is the")
    cards = dash_duo.find_element("#ov-cards").text
    assert "cpu" in cards and "ProfilerStep" in cards
    traces = wait_until(lambda: plot_traces(dash_duo, "ov-phase"), what="phase figure")
    assert {name for _, name, _ in traces} == {"forward", "backward", "optimizer", "other"}
    top = wait_until(lambda: plot_traces(dash_duo, "ov-top-cpu"), what="top-ops figure")
    # One bar per op name, at most 10 (this MLP has fewer: linear, relu, mse_loss and nodes).
    expected = len(ProfileView(profiler.load(profiles["workload"])).top_ops(10))
    assert 5 <= expected <= 10 and top[0][2] == expected
    assert_clean(dash_duo)
    shot("overview")


def test_operators_sort_group_and_details(dash_duo, profiles, shot):
    view = ProfileView(profiler.load(profiles["mlp"]))
    app = viewer.create_app(profiles["mlp"])
    start(dash_duo, app, "/operators")
    wait_until(lambda: grid_count(dash_duo, "ops-grid") == len(view.rows("name")), what="one row per op")
    # Sorted by self CPU, descending, by default.
    first = grid_column(dash_duo, "ops-grid", "name")[0]
    assert first == max(view.rows("name"), key=lambda r: r["self_cpu_time_total"])["name"]
    # Click the "# of Calls" header: sorts by it (ascending, then descending on a second click).
    header = dash_duo.find_element("#ops-grid .ag-header-cell[col-id='count'] .ag-header-cell-label")
    header.click()
    wait_until(lambda: grid_column(dash_duo, "ops-grid", "count")[0] == min(r["count"] for r in view.rows("name")),
               what="ascending sort by calls")
    header.click()
    wait_until(lambda: grid_column(dash_duo, "ops-grid", "count")[0] == max(r["count"] for r in view.rows("name")),
               what="descending sort by calls", show=lambda: grid_column(dash_duo, "ops-grid", "count"))
    # Group by input shape: a shapes column and more rows.
    dash_duo.find_element("#ops-group input[value='shape']").click()
    wait_until(lambda: dash_duo.find_elements("#ops-grid .ag-header-cell[col-id='input_shapes']"),
               what="shape column")
    wait_until(lambda: grid_count(dash_duo, "ops-grid") == len(view.rows("shape")), what="rows per shape")
    # Group by module: the nn.Module scopes of the MLP.
    dash_duo.find_element("#ops-group input[value='module']").click()
    wait_until(lambda: "Linear" in grid_column(dash_duo, "ops-grid", "module"), what="module column")
    # Back to names; click matmul: its calls and the MmBackward0 nodes it created.
    dash_duo.find_element("#ops-group input[value='name']").click()
    wait_until(lambda: grid_count(dash_duo, "ops-grid") == len(view.rows("name")), what="rows per name")
    cell = wait_until(lambda: next(c for c in dash_duo.find_elements("#ops-grid .ag-row [col-id='name']")
                                   if c.text == "matmul"), what="matmul row")
    cell.click()
    dash_duo.wait_for_text_to_equal("#ops-details-name", "matmul", timeout=10)
    details = dash_duo.find_element("#ops-details").text
    assert "MmBackward0" in details and "stacks" in details.lower()
    wait_until(lambda: grid_count(dash_duo, "ops-calls-grid") == 6, what="6 matmul calls")
    # Device CUDA is disabled on a CPU profile; searching filters rows.
    assert dash_duo.find_element("#ops-device input[value='cuda']").get_attribute("disabled")
    search = dash_duo.find_element("#ops-search")
    search.send_keys("Backward\n")
    # Quick filter matches any cell: names and the BACKWARD_FUNCTION scope.
    wait_until(lambda: grid_count(dash_duo, "ops-grid") == sum(
        "backward" in (r["name"] + r["scope"]).lower() for r in view.rows("name")), what="quick filter")
    assert_clean(dash_duo)
    shot("operators")


def test_forward_backward(dash_duo, profiles, shot):
    view = ProfileView(profiler.load(profiles["workload"]))
    app = viewer.create_app(profiles["workload"])
    start(dash_duo, app, "/forward-backward")
    wait_until(lambda: grid_count(dash_duo, "fb-grid") == len(view.fwdbwd_rows("call_site")), what="rows")
    traces = wait_until(lambda: plot_traces(dash_duo, "fb-figure"), what="stacked bars")
    assert [name for _, name, _ in traces] == ["forward", "backward it caused"]
    dash_duo.find_element("#fb-by input[value='name']").click()
    wait_until(lambda: grid_count(dash_duo, "fb-grid") == len(view.fwdbwd_rows("name")), what="rows by name")
    top = view.fwdbwd_rows("name")[0]["name"]
    wait_until(lambda: grid_column(dash_duo, "fb-grid", "name")[0] == top, what="sorted by fwd+bwd",
               show=lambda: grid_column(dash_duo, "fb-grid", "name"))
    assert_clean(dash_duo)
    shot("forward_backward")


def test_timeline_zoom_links_and_click(dash_duo, profiles, shot):
    app = viewer.create_app(profiles["mlp"])
    start(dash_duo, app, "/timeline")
    traces = wait_until(lambda: plot_traces(dash_duo, "tl-graph"), what="timeline traces")
    names = {name for _, name, _ in traces}
    assert {"forward op", "backward node", "user scope"} <= names
    # Ranges drawn one by one are bars (a click target over their whole area); merged runs
    # of short ranges are WebGL lines.
    assert all(kind == ("scattergl" if "merged" in name else "bar") for kind, name, _ in traces
               if name != "forward → backward")
    # Link the forward op "tanh" to its backward nodes through the dropdown.
    dash_duo.select_dcc_dropdown("#tl-link-op", value="tanh")
    wait_until(lambda: any(name == "forward → backward" for _, name, _ in plot_traces(dash_duo, "tl-graph")),
               what="link trace", show=lambda: (dash_duo.find_element("#tl-link-op").text,
                                                dash_duo.find_element("#tl-status").text,
                                                plot_traces(dash_duo, "tl-graph")))
    wait_until(lambda: "3 forward→backward link(s)" in dash_duo.find_element("#tl-status").text,
               what="the links' status", show=lambda: dash_duo.find_element("#tl-status").text)
    # Zoom: the server redraws the window.
    before = dash_duo.find_element("#tl-status").text
    dash_duo.driver.execute_script(
        "const gd = document.querySelector('#tl-graph .js-plotly-plot');"
        "const r = gd.layout.xaxis.range; Plotly.relayout(gd, {'xaxis.range': [r[0], r[0] + (r[1]-r[0]) / 3]});")
    wait_until(lambda: dash_duo.find_element("#tl-status").text != before, what="windowed redraw")
    # The status is written before plotly has drawn the new figure: wait for its ranges.
    wait_until(lambda: dash_duo.driver.execute_script(
        "const gd = document.querySelector('#tl-graph .js-plotly-plot');"
        "return gd && gd.data.some(t => t.name === 'forward op' && t.customdata && t.customdata.length);"),
        what="the redrawn window's forward ops")
    # A click on a range (what plotly reports for a click on the first forward op).
    dash_duo.driver.execute_script(
        "const gd = document.querySelector('#tl-graph .js-plotly-plot');"
        "const t = gd.data.findIndex(t => t.name === 'forward op');"
        "gd.emit('plotly_click', {points: [{curveNumber: t, pointNumber: 0, customdata: gd.data[t].customdata[0],"
        " data: gd.data[t], x: gd.data[t].x[0], y: gd.data[t].y[0]}]});")
    wait_until(lambda: dash_duo.find_element("#tl-details-name").text, what="range details")
    assert_clean(dash_duo)
    shot("timeline")


def test_timeline_big_profile_is_windowed(dash_duo, profiles, shot):
    app = viewer.create_app(profiles["big"])
    start(dash_duo, app, "/timeline")
    traces = wait_until(lambda: plot_traces(dash_duo, "tl-graph"), what="timeline traces")
    points = sum(n for _, _, n in traces)
    # 200,000 ranges, but the browser gets at most the budget of segments (3 points each).
    assert 0 < points <= 3 * 20_000 + 10
    assert "merged" in dash_duo.find_element("#tl-status").text
    assert_clean(dash_duo)
    shot("timeline_big")


def test_autograd_graph_click_node(dash_duo, profiles, shot):
    app = viewer.create_app(profiles["mlp"])
    start(dash_duo, app, "/graph")
    count = wait_until(lambda: dash_duo.driver.execute_script(
        "const c = document.querySelector('#gr-cyto'); const cy = c && c._cyreg && c._cyreg.cy;"
        "return cy && cy.zoom() !== 1 ? [cy.nodes().length, cy.edges('.created').length, cy.edges('.flow').length] : null;"),
        what="cytoscape")
    nodes, created, flow = count
    assert nodes > 10 and created > 5 and flow > 5
    # Click the MmBackward0 node on the canvas where it is drawn (offsets from the centre).
    dx, dy = dash_duo.driver.execute_script(
        "const cy = document.querySelector('#gr-cyto')._cyreg.cy;"
        "const n = cy.nodes().filter(n => n.data('label') === 'MmBackward0')[0]; cy.center(n);"
        "const p = n.renderedPosition(); return [p.x - cy.width() / 2, p.y - cy.height() / 2];")
    from selenium.webdriver.common.action_chains import ActionChains

    canvas = dash_duo.find_element("#gr-cyto")
    ActionChains(dash_duo.driver).move_to_element(canvas).move_by_offset(round(dx), round(dy)).click().perform()
    dash_duo.wait_for_text_to_equal("#gr-details-name", "MmBackward0", timeout=10)
    details = dash_duo.find_element("#gr-details").text
    assert "sequence_nr" in details and "created by forward op" in details and "matmul" in details
    assert "hooks" in details and "saved tensors" in details and "gradient flows into" in details
    # Colour by CUDA is disabled on a CPU profile; "Collapse to fit" on a small graph keeps
    # every node, "Expand all" too.
    assert dash_duo.find_element("#gr-clock input[value='cuda']").get_attribute("disabled")
    dash_duo.find_element("#gr-colour-by input[value='total']").click()
    dash_duo.find_element("#gr-expand").click()
    wait_until(lambda: dash_duo.driver.execute_script(
        "return document.querySelector('#gr-cyto')._cyreg.cy.nodes('.collapsed').length") == 0, what="expanded")
    assert_clean(dash_duo)
    shot("graph")


def test_memory(dash_duo, profiles, shot):
    """The Memory page stacks live bytes by kind (torch's memory timeline) and splits the
    peak, the ops and the modules by kind."""
    app = viewer.create_app(profiles["cnn"])
    start(dash_duo, app, "/memory")
    traces = wait_until(lambda: plot_traces(dash_duo, "mem-figure"), what="memory figure")
    names = [name for _, name, _ in traces]
    assert {"parameter", "optimizer state", "gradient", "activation", "temporary"} <= set(names), names
    assert any(name.startswith("peak") for name in names)
    stacked = dash_duo.driver.execute_script(
        "return document.querySelector('#mem-figure .js-plotly-plot')._fullData.map(t => t.stackgroup || '')")
    assert stacked.count("kinds") == len(names) - 1        # every kind in one stack; the peak marker not
    wait_until(lambda: grid_rows(dash_duo, "mem-grid"), what="memory by op rows")
    gradient = wait_until(lambda: grid_column(dash_duo, "mem-grid", "gradient"), what="gradient column")
    assert sum(gradient) > 0
    wait_until(lambda: grid_rows(dash_duo, "mem-module-grid"), what="memory by module rows")
    text = dash_duo.find_element("#page-memory").text
    assert "peak" in text and "at the peak" in text and "optimizer state" in text
    assert_clean(dash_duo)
    shot("memory")
    dash_duo.driver.execute_script("document.querySelector('#mem-grid').scrollIntoView()")
    shot("memory-tables")


def test_compare_upload(dash_duo, profiles, shot):
    app = viewer.create_app(profiles["mlp"])
    start(dash_duo, app, "/compare")
    dash_duo.find_element("#cmp-upload input[type=file]").send_keys(profiles["workload"])
    wait_until(lambda: grid_rows(dash_duo, "cmp-grid"), timeout=20, what="diff rows")
    assert "B = workload.gtprof" in dash_duo.find_element("#cmp-caption").text
    wait_until(lambda: plot_traces(dash_duo, "cmp-figure"), what="diff figure")
    a, b = profiler.load(profiles["mlp"]), profiler.load(profiles["workload"])
    wait_until(lambda: grid_count(dash_duo, "cmp-grid") == len(profiler.diff(a, b)), what="one row per op")
    # The forward+backward view: one row per forward op and call site.
    dash_duo.find_element("#cmp-by input[value='forward_backward']").click()
    n_fb = len(profiler.diff(a, b, by="forward_backward"))
    wait_until(lambda: grid_count(dash_duo, "cmp-grid") == n_fb, what="forward+backward diff rows")
    assert_clean(dash_duo)
    shot("compare")


# --------------------------------------------------------------------------- loading and safety


def test_open_bad_upload_shows_message(dash_duo, profiles, shot):
    app = viewer.create_app(profiles["mlp"])
    start(dash_duo, app)
    dash_duo.find_element("#open-upload input[type=file]").send_keys(profiles["bad"])
    err = wait_until(lambda: dash_duo.find_element("#open-error .gt-error").text, what="error message")
    assert err.startswith("bad.gtprof: ") and "Traceback" not in err and "/tmp" not in err
    # A good upload replaces the profile on every page.
    dash_duo.find_element("#open-upload input[type=file]").send_keys(profiles["cnn"])
    dash_duo.wait_for_text_to_equal("#profile-label", "cnn.gtprof", timeout=20)
    wait_until(lambda: "conv2d" in dash_duo.driver.execute_script(
        "return document.querySelector('#ov-top-cpu .js-plotly-plot')._fullData[0].y"), what="the CNN's top ops")
    assert dash_duo.get_logs() == []
    shot("open_error")


def test_start_with_bad_file_and_without_profile(dash_duo, profiles):
    app = viewer.create_app(profiles["bad"])
    start(dash_duo, app)
    assert dash_duo.find_element("#open-error .gt-error").text.startswith("bad.gtprof: ")
    assert "No profile loaded" in dash_duo.find_element("#page").text
    assert dash_duo.get_logs() == []


def test_markup_in_names_is_text(dash_duo, profiles, shot):
    """An op named <img src=x onerror=alert(1)> shows as text on every page; nothing runs."""
    app = viewer.create_app(profiles["xss"])
    start(dash_duo, app)
    for path, ready in (("/", "#ov-sentence"), ("/operators", "#ops-grid .ag-row"),
                        ("/forward-backward", "#fb-grid .ag-row"), ("/timeline", "#tl-graph .js-plotly-plot"),
                        ("/graph", "#gr-cyto"), ("/memory", "#page-memory"), ("/compare", "#cmp-upload")):
        goto(dash_duo, path, ready)
        time.sleep(0.5)
        assert dash_duo.driver.execute_script("return document.querySelectorAll('img[src=\"x\"]').length") == 0
        assert_clean(dash_duo)
        if path == "/operators":
            wait_until(lambda: XSS in cell_texts(dash_duo, "ops-grid", "name"), what="name shown as text")
            shot("markup_operators")
        if path == "/graph":
            assert dash_duo.driver.execute_script(
                "return document.querySelector('#gr-cyto')._cyreg.cy.nodes()"
                ".filter(n => n.data('label').startsWith('<img')).length") >= 1


# --------------------------------------------------------------------------- steps (issue 18)


def _step_traces(dash_duo, n_steps: int):
    """The per-step figure's traces once all four phases are drawn with every step (under
    load plotly can be caught between its first traces and the rest)."""
    def drawn():
        traces = plot_traces(dash_duo, "ov-steps")
        return traces if traces and len(traces) == 4 and all(t[2] == n_steps for t in traces) else None
    return wait_until(drawn, what="per-step figure", show=lambda: plot_traces(dash_duo, "ov-steps"))


@pytest.mark.parametrize("name, n_steps", [("gpt3", 3), ("steps100", 101)])
def test_overview_per_step_chart(dash_duo, step_profiles, shot, name, n_steps):
    """The Overview's per-step chart: one bar per ProfilerStep#N stacked by phase, 'other'
    being the step time outside ops; shares include that time."""
    data = profiler.load(step_profiles[name])
    steps = data.step_ranges()
    assert len(steps) == n_steps
    app = viewer.create_app(step_profiles[name])
    start(dash_duo, app)
    traces = _step_traces(dash_duo, n_steps)
    assert [t[1] for t in traces] == ["forward", "backward", "optimizer", "other"]
    assert all(t[0] == "bar" and t[2] == n_steps for t in traces)
    # Each bar adds up to its step's wall time (ms).
    totals = dash_duo.driver.execute_script(
        "const gd = document.querySelector('#ov-steps .js-plotly-plot');"
        "return gd._fullData[0].y.map((_, i) => gd._fullData.reduce((s, t) => s + t.y[i], 0));")
    for total, (_, s0, e0) in zip(totals, steps):
        assert total == pytest.approx((e0 - s0) / 1e6, rel=0.02, abs=0.01)
    shares = dash_duo.find_element("#page-overview .gt-col-narrow").text
    other_share = next(line for line in shares.splitlines() if line.startswith("CPU other"))
    if name == "steps100":      # 1 ms of sleep per step: most of the step is outside ops
        assert float(other_share.split()[-1].rstrip("%")) > 30, other_share
    assert_clean(dash_duo)
    shot(f"overview-steps-{name}")


def test_operators_and_compare_merge_steps_with_a_toggle(dash_duo, step_profiles, shot):
    app = viewer.create_app(step_profiles["steps100"], compare=step_profiles["steps100"])
    start(dash_duo, app, "/operators")
    names = wait_until(lambda: grid_column(dash_duo, "ops-grid", "name"), what="operator rows")
    assert "ProfilerStep#*" in names and len(names) < 20
    dash_duo.find_element("#ops-steps input").click()
    wait_until(lambda: sum(n.startswith("ProfilerStep#") for n in grid_column(dash_duo, "ops-grid", "name")) == 101,
               what="one row per step", show=lambda: len(grid_column(dash_duo, "ops-grid", "name")))
    # Compare with --compare B: no error before any upload, steps merged, then per step.
    goto(dash_duo, "/compare", "#cmp-grid")
    assert dash_duo.find_element("#cmp-error").text == ""
    merged = wait_until(lambda: grid_column(dash_duo, "cmp-grid", "name"), what="diff rows")
    assert merged.count("ProfilerStep#*") == 1 and len(merged) < 20
    dash_duo.find_element("#cmp-steps input").click()
    wait_until(lambda: sum(n.startswith("ProfilerStep#") for n in grid_column(dash_duo, "cmp-grid", "name")) == 101,
               what="diff rows per step")
    assert dash_duo.find_element("#cmp-error").text == ""
    assert_clean(dash_duo)
    shot("compare-with-B")


def test_memory_freed_column_and_header_text(dash_duo, profiles, shot):
    app = viewer.create_app(profiles["cnn"])
    start(dash_duo, app, "/memory")
    wait_until(lambda: grid_rows(dash_duo, "mem-grid"), what="memory by op rows")
    freed = wait_until(lambda: grid_column(dash_duo, "mem-grid", "freed"), what="freed column")
    assert sum(freed) > 0
    header = dash_duo.find_element("#open-limit").text
    assert "reads files up to" in header and "·" not in header
    assert_clean(dash_duo)
    shot("memory-freed")

