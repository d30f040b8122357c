"""The Kernels page and the Overview's GPU sections, through the app's Flask test client (the
requests a browser sends), on the hand-built GPU trace, a CPU-only trace and, when present, a
real 5-step GPU trace: no page or callback answers 500."""
from __future__ import annotations

from pathlib import Path

import pytest

from gradtrace import profiler, viewer
from gradtrace.viewer import figures, kernels_page
from gradtrace.viewer import overview_page as pages
from gradtrace.viewer.app import MAIN, PAGES
from gradtrace.viewer.model import ProfileView
from tests.profiler import gpu_traces, kineto_samples
from tests.profiler.gpu_traces import write_gpu_trace

CPU_TRACE = Path(__file__).resolve().parents[1] / "profiler" / "data" / "torch_mlp_cpu.json.gz"
# A real trace: one step of a training job, kept in tests/profiler/data (KINETO_SAMPLES.md).
SAMPLE = kineto_samples.GPU_1STEP


@pytest.fixture(scope="module")
def gpu_trace(tmp_path_factory):
    return write_gpu_trace(tmp_path_factory.mktemp("gpu") / "gpu.json")


def _sources(gpu_trace):
    """Profiles by kind: a torch GPU trace, a CPU-only one, a gradtrace profile with device
    times but no kernel table (no launch arguments), an empty one, a real trace."""
    from gradtrace.profiler import synthetic

    from .test_app import _cuda_profile

    return {"gpu": gpu_trace, "cpu": CPU_TRACE, "native_cuda": _cuda_profile(), "empty": synthetic.from_events([]),
            "sample": SAMPLE}


def _callback(app, output: str, inputs: list, state: list = (), changed: str | None = None):
    """POST one callback as Dash's renderer does; returns (status, response JSON or None).

    Args:
        output: an output "id.prop", naming the callback by (one of) its outputs.
        inputs, state: (id, prop, value) triples, in the callback's order.
    """
    key = next(k for k in app.callback_map if output in k.strip(".").split("..."))
    outs = [dict(zip(("id", "property"), o.rsplit(".", 1))) for o in key.strip(".").split("...")]
    body = {"output": key, "outputs": outs if key.startswith("..") else outs[0],
            "inputs": [{"id": i, "property": p, "value": v} for i, p, v in inputs],
            "state": [{"id": i, "property": p, "value": v} for i, p, v in state],
            "changedPropIds": [changed or f"{inputs[0][0]}.{inputs[0][1]}"]}
    res = app.server.test_client().post("/_dash-update-component", json=body)
    return res.status_code, (res.get_json() if res.status_code == 200 else None)


def _page(app, path: str):
    return _callback(app, "page.children", [("url", "pathname", path), ("profile-key", "data", MAIN)],
                     [("compare-key", "data", None)])


def _ids(tree) -> set:
    """Component ids in a rendered (JSON) Dash tree."""
    out = set()

    def walk(node):
        if isinstance(node, dict):
            props = node.get("props", {})
            if "id" in props:
                out.add(props["id"])
            for v in props.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(tree)
    return out


@pytest.mark.parametrize("which", ["gpu", "cpu", "native_cuda", "empty", "sample"])
def test_every_page_answers_on_gpu_and_cpu_profiles(gpu_trace, which):
    sources = _sources(gpu_trace)
    app = viewer.create_app(sources[which])
    for path in (p.PATH for p in PAGES):
        status, body = _page(app, path)
        assert status == 200, (which, path)
    status, body = _page(app, "/kernels")
    ids = _ids(body["response"]["page"]["children"])
    status, body = _page(app, "/")
    overview = _ids(body["response"]["page"]["children"])
    if which in ("cpu", "empty"):
        assert "kn-empty" in ids and "kn-grid" not in ids
        assert not {i for i in overview if str(i).startswith("ov-gpu")} and "ov-recommendations" not in overview
        assert "ov-phase" in overview                   # the Overview as it was
    else:
        assert {"kn-grid", "kn-memcpy", "kn-collectives"} <= ids
        assert {"ov-gpu", "ov-gpu-steps", "ov-gpu-idle", "ov-gpu-util", "ov-recommendations", "ov-phase"} <= overview


@pytest.mark.parametrize("which", ["gpu", "cpu", "native_cuda", "sample"])
def test_kernels_callbacks_answer(gpu_trace, which):
    sources = _sources(gpu_trace)
    app = viewer.create_app(sources[which])
    for group in ([], ["op"], ["launch"], ["op", "launch"], None):
        status, body = _callback(app, "kn-grid.rowData", [("kn-group", "value", group)],
                                 [("profile-key", "data", MAIN)])
        assert status == 200, group
        rows = body["response"]["kn-grid"]["rowData"]
        cols = [c["field"] for c in body["response"]["kn-grid"]["columnDefs"]]
        assert ("op" in cols) == ("op" in (group or [])) and ("grid" in cols) == ("launch" in (group or []))
        assert (len(rows) > 0) == (which != "cpu")
        if which == "native_cuda":      # no launch arguments: nothing to say about Tensor Cores
            assert {r["tensor_cores"] for r in rows} == {"—"} and {r["grid"] for r in rows} == {"—"}
    status, body = _callback(app, "kn-grid.dashGridOptions", [("kn-search", "value", "sgemm")],
                             [("kn-grid", "dashGridOptions", {"rowHeight": 30})])
    assert status == 200 and body["response"]["kn-grid"]["dashGridOptions"] == {"rowHeight": 30,
                                                                               "quickFilterText": "sgemm"}
    # An unknown profile key (an upload pushed out of the registry): no update, not an error.
    status, _ = _callback(app, "kn-grid.rowData", [("kn-group", "value", ["op"])], [("profile-key", "data", "gone")])
    assert status == 204


def test_kernel_rows_of_the_fixture_are_readable_with_full_names(gpu_trace):
    view = ProfileView(profiler.load(gpu_trace))
    page = kernels_page.page(view)
    grid = next(c for c in page.children if getattr(c, "id", None) == "kn-grid")
    rows = {r["name"]: r for r in grid.rowData}
    sgemm = rows["ampere_sgemm_128x64_tn"]
    assert sgemm["full_name"] == gpu_traces.SGEMM and sgemm["count"] == 2
    assert sgemm["kernel_time_total"] == pytest.approx(90.0) and sgemm["kernel_time_max"] == pytest.approx(60.0)
    assert sgemm["tensor_cores"] == "no" and sgemm["kind"] == "COMPUTATION"
    nccl = next(r for r in grid.rowData if r["full_name"] == gpu_traces.NCCL)
    assert nccl["kind"] == "COMMUNICATION"
    assert rows[gpu_traces.MEMCPY]["tensor_cores"] == "—" and rows[gpu_traces.MEMCPY]["kind"] == "MEMORY"
    name = grid.columnDefs[0]
    # Full names in the tooltip, the search and the filter; the column takes the width left.
    # (Not pinned: AG Grid flexes no pinned column.)
    assert name["tooltipField"] == "full_name" and name["flex"] == 1 and "pinned" not in name
    assert "full_name" in name["getQuickFilterText"]["function"]
    assert "full_name" in name["filterValueGetter"]["function"]
    longest = max(len(r["name"]) for r in grid.rowData)
    assert name["minWidth"] >= min(7 * longest, kernels_page._NAME_PX[1])
    # Grouped by launching op: the CUDA-graph kernels have none in the trace.
    by_op = kernels_page._kernels(view, True, False)
    assert {r["op"] for r in by_op} == {"aten::mm", "aten::copy_", "aten::zero_", "nccl:all_reduce", "—"}


def test_memcpy_and_collective_tables_of_the_fixture(gpu_trace):
    view = ProfileView(profiler.load(gpu_trace))
    page = kernels_page.page(view)
    memcpy = next(c for c in page.children if getattr(c, "id", None) == "kn-memcpy")
    grid = memcpy.children[-1]
    kinds = {r["kind"]: r for r in grid.rowData}
    assert kinds["HtoD"]["host_memory"] == "pageable" and kinds["HtoD"]["bytes"] == 1_000_000
    assert kinds["HtoD"]["bandwidth_gbps"] == pytest.approx(200.0)
    collectives = next(c for c in page.children if getattr(c, "id", None) == "kn-collectives")
    (row,) = collectives.children[-1].rowData
    assert row["full_name"] == gpu_traces.NCCL and row["collective"] == "AllReduce"
    assert row["nccl"] == "RING / LL"               # ncclDevKernel_AllReduce_Sum_f32_RING_LL


def test_overview_gpu_cards_show_a_dash_for_undefined_figures(gpu_trace):
    view = ProfileView(profiler.load(gpu_trace))
    summary = pages.gpu_summary(view)
    assert summary is pages.gpu_summary(view)           # once per view
    device = summary["devices"]["cuda:0"]
    values = [c.children[1].children for c in pages.gpu_cards(device)]
    assert values[0] == f"{device['gpu_utilization_pct']:.1f}%" and values[3] == "0.0%"
    blank = dict(device, sm_efficiency_pct=None, achieved_occupancy_pct=None, tensor_core_pct=None)
    assert [c.children[1].children for c in pages.gpu_cards(blank)][1:] == ["—", "—", "—"]
    recs = summary["recommendations"]
    assert recs, "the fixture's sgemm runs off Tensor Cores and its copy is pageable"
    rule, figure, advice = pages.recommendation_box(recs[0]).children
    assert figure.children.startswith(recs[0]["figure"] + ": ") and advice.children == recs[0]["advice"]
    assert f"threshold {recs[0]['threshold']:g}" in figure.children


def test_overview_of_a_profile_without_launch_arguments_shows_dashes():
    from .test_app import _cuda_profile

    view = ProfileView(_cuda_profile())
    device = pages.gpu_summary(view)["devices"]["cuda:0"]
    values = [c.children[1].children for c in pages.gpu_cards(device)]
    assert values[0] != "—" and values[1:] == ["—", "—", "—"]


def test_gpu_figures_are_the_summary(gpu_trace):
    view = ProfileView(profiler.load(gpu_trace))
    device = pages.gpu_summary(view)["devices"]["cuda:0"]
    fig = figures.gpu_step_breakdown_figure(device["steps"], device["step_breakdown_us"])
    assert [t.name for t in fig.data][:2] == ["Kernel", "Memcpy"] and list(fig.data[0].x) == ["1", "2", "mean"]
    # Each step's bar adds up to the step (the categories split it by priority).
    for k, step in enumerate(device["steps"]):
        assert sum(t.y[k] for t in fig.data) == pytest.approx(step["step_us"] / 1e3)
    assert sum(t.y[-1] for t in fig.data) == pytest.approx(sum(s["step_us"] for s in device["steps"]) / 2e3)
    idle = figures.idle_breakdown_figure(device["idle_breakdown"], "cuda:0")
    assert list(idle.data[0].y) == ["host wait", "kernel wait", "other"]
    assert list(idle.data[0].x) == pytest.approx([v / 1e3 for v in device["idle_breakdown"].values()])


SAMPLES = kineto_samples.gpu_traces()


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
def test_every_page_answers_on_every_kineto_sample(path):
    """Real traces (AMD, CUPTI profiler, CUDA sync, tiny ones): no page or grouping fails."""
    app = viewer.create_app(path)
    for page in (p.PATH for p in PAGES):
        assert _page(app, page)[0] == 200, page
    for group in ([], ["op", "launch"]):
        status, _ = _callback(app, "kn-grid.rowData", [("kn-group", "value", group)], [("profile-key", "data", MAIN)])
        assert status == 200, group
