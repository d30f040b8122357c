"""The History page: the trend with its change points, two clicks to compare runs, and no
error response for any input (driven through Dash's callback endpoint)."""
from __future__ import annotations

import json

import pytest

from gradtrace import viewer
from gradtrace.profiler import history
from gradtrace.viewer import history_page
from gradtrace.viewer.app import PAGES
from tests.profiler.test_stats import steps_profile

from .test_modules_ranks_pages import _find


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Ten runs; matmul 40% slower from the sixth on."""
    path = tmp_path_factory.mktemp("hist") / "runs.sqlite"
    with history.RunStore(path) as s:
        for i in range(10):
            s.add(steps_profile(8, matmul_us=100 if i < 5 else 140, seed=i), f"r{i}.gtprof", {"commit": f"c{i}"})
    return path


def _call(app, output: str, inputs: list[tuple], state: list[tuple] = ()):
    """POST one callback as the browser does; returns (status, response JSON or text)."""
    client = app.server.test_client()
    client.get("/")   # the layout first, as a browser would
    outputs = [{"id": o.split(".")[0], "property": o.split(".")[1]} for o in output.strip(".").split("...")]
    body = {"output": output, "outputs": outputs if len(outputs) > 1 else outputs[0],
            "inputs": [{"id": i, "property": p, "value": v} for i, p, v in inputs],
            "state": [{"id": i, "property": p, "value": v} for i, p, v in state],
            "changedPropIds": [f"{i}.{p}" for i, p, _ in inputs[:1]]}
    r = client.post("/_dash-update-component", json=body)
    return r.status_code, (r.get_json(silent=True) if r.status_code == 200 else r.get_data(as_text=True))


TREND = "..hist-trend.figure...hist-cps.children.."
PICK = "..hist-a.value...hist-b.value.."


def test_history_is_a_page_before_ranks():
    paths = [p.PATH for p in PAGES]
    assert history_page.PATH in paths and paths[-1] == "/ranks"


def test_the_page_lists_the_series_and_the_runs(store):
    page = history_page.page(store)
    options = _find(page, "hist-series").options
    assert json.dumps(["op", "matmul"]) in [o["value"] for o in options]
    assert len(_find(page, "hist-a").options) == 10
    assert "no run store" in str(history_page.page(None))


def test_trend_marks_the_change_point(store):
    app = viewer.create_app(None, store=store)
    status, out = _call(app, TREND, [("hist-series", "value", json.dumps(["op", "matmul"])),
                                     ("hist-clock", "value", "cpu"), ("hist-a", "value", None),
                                     ("hist-b", "value", None)])
    assert status == 200
    resp = out["response"]
    assert "from run #6" in json.dumps(resp["hist-cps"]["children"])
    shapes = resp["hist-trend"]["figure"]["layout"]["shapes"]
    assert [s["x0"] for s in shapes] == [4.5]


def test_two_clicks_pick_a_then_b_and_show_the_diff(store):
    app = viewer.create_app(None, store=store)
    click = lambda run_id: {"points": [{"customdata": run_id}]}  # noqa: E731
    status, out = _call(app, PICK, [("hist-trend", "clickData", click(2))],
                        [("hist-a", "value", None), ("hist-b", "value", None)])
    assert status == 200 and out["response"]["hist-a"]["value"] == 2 and out["response"]["hist-b"]["value"] is None
    status, out = _call(app, PICK, [("hist-trend", "clickData", click(9))],
                        [("hist-a", "value", 2), ("hist-b", "value", None)])
    assert out["response"]["hist-a"]["value"] == 2 and out["response"]["hist-b"]["value"] == 9
    status, out = _call(app, "hist-diff.children", [("hist-a", "value", 2), ("hist-b", "value", 9),
                                                   ("hist-clock", "value", "cpu")])
    assert status == 200
    rows = out["response"]["hist-diff"]["children"][1]["props"]["rowData"]
    matmul = next(r for r in rows if r["name"] == "matmul")
    assert matmul["verdict"] == "slower" and matmul["ci"].startswith("1.")


@pytest.mark.parametrize("output, inputs, state", [
    (TREND, [("hist-series", "value", "not json"), ("hist-clock", "value", "cpu"), ("hist-a", "value", None),
             ("hist-b", "value", None)], []),
    (TREND, [("hist-series", "value", json.dumps(["op", "nope"])), ("hist-clock", "value", "cuda"),
             ("hist-a", "value", 1), ("hist-b", "value", 99)], []),
    (TREND, [("hist-series", "value", json.dumps([1])), ("hist-clock", "value", "cpu"), ("hist-a", "value", None),
             ("hist-b", "value", None)], []),
    (PICK, [("hist-trend", "clickData", {"points": [{"x": 1}]})], [("hist-a", "value", None), ("hist-b", "value", None)]),
    (PICK, [("hist-trend", "clickData", "garbage")], [("hist-a", "value", None), ("hist-b", "value", None)]),
    ("hist-diff.children", [("hist-a", "value", 1), ("hist-b", "value", 999), ("hist-clock", "value", "cpu")], []),
    ("hist-diff.children", [("hist-a", "value", "x"), ("hist-b", "value", [1]), ("hist-clock", "value", "cpu")], []),
    ("hist-diff.children", [("hist-a", "value", 1), ("hist-b", "value", 2), ("hist-clock", "value", "cuda")], []),
])
def test_bad_callback_input_never_answers_500(store, output, inputs, state):
    app = viewer.create_app(None, store=store)
    status, _ = _call(app, output, inputs, state)
    assert status in (200, 204)


def test_without_a_store_or_with_a_broken_one_the_page_says_so(tmp_path):
    app = viewer.create_app(None)
    status, _ = _call(app, "hist-diff.children", [("hist-a", "value", 1), ("hist-b", "value", 2),
                                                  ("hist-clock", "value", "cpu")])
    assert status == 200
    broken = tmp_path / "runs.sqlite"
    broken.write_text("not a database")
    assert "not a gradtrace run store" in str(history_page.page(broken))


def test_the_compare_page_shows_verdicts_intervals_and_the_step_rows():
    from gradtrace.viewer.compare import compare_tables

    rows, cols, _, comp_rows, comp_cols = compare_tables(steps_profile(12, seed=1),
                                                         steps_profile(12, matmul_us=140, seed=2))
    fields = [c["field"] for c in cols]
    assert {"ratio", "ci", "q_value", "verdict"} <= set(fields)
    matmul = next(r for r in rows if r["name"] == "matmul")
    assert matmul["verdict"] == "slower" and matmul["ci"].startswith("1.")
    assert [r["name"] for r in comp_rows if r["kind"] == "step"] == ["step time"]
    assert {c["field"] for c in comp_cols} >= {"kind", "median_a", "verdict"}
