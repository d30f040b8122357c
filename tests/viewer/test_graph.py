"""The autograd graph's elements as pure data: recorded edges, exact forward→backward links,
a top-to-bottom layout, groups that collapse, the first view's size, profiles without a graph,
and the build time of a 1,000-node step (printed, never asserted)."""
from __future__ import annotations

import time

import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace import profiler
from gradtrace.profiler import Scope, synthetic
from gradtrace.viewer.graph import READABLE_UNITS, build_graph, node_details, steps_of
from gradtrace.viewer.model import ProfileView

from .workloads import workload_profile

B = int(Scope.BACKWARD_FUNCTION)


@pytest.fixture(scope="module")
def gpt(tmp_path_factory):
    path = workload_profile(tmp_path_factory.mktemp("g") / "gpt.gtprof", "gpt", steps=2)
    return ProfileView(profiler.load(path), "gpt")


def _nodes(g):
    return {e["data"]["id"]: e for e in g.elements if "source" not in e["data"]}


def _edges(g, kind):
    return [e["data"] for e in g.elements if e["data"].get("kind") == kind]


def test_flow_edges_are_the_recorded_edges(gpt):
    g = build_graph(gpt, steps_of(gpt)[0], collapsed=[])
    data = gpt.data
    node_of = dict(zip(data.node_columns["event"].tolist(), data.node_columns["node_id"].tolist()))
    recorded = set(zip(data.edge_columns["node_id"].tolist(), data.edge_columns["next_node_id"].tolist()))
    nodes = _nodes(g)
    flow = _edges(g, "flow")
    assert len(flow) > 50
    for e in flow:
        src, dst = nodes[e["source"]]["data"]["event"], nodes[e["target"]]["data"]["event"]
        assert (node_of[src], node_of[dst]) in recorded


def test_created_links_are_exact_and_beside(gpt):
    g = build_graph(gpt, steps_of(gpt)[0], collapsed=[])
    a, nodes = gpt.data.analysis, _nodes(g)
    created = _edges(g, "created")
    assert len(created) > 50
    for e in created:
        f, b = nodes[e["source"]], nodes[e["target"]]
        assert a.forward_event[b["data"]["event"]] == f["data"]["event"]
        # The backward node sits beside its forward op, to the right.
        assert f["position"]["y"] == b["position"]["y"] and f["position"]["x"] < b["position"]["x"]


def test_layout_reads_top_to_bottom(gpt):
    g = build_graph(gpt, steps_of(gpt)[0], collapsed=[])
    nodes = _nodes(g)
    for e in _edges(g, "flow"):
        src, dst = nodes[e["source"]], nodes[e["target"]]
        # A gradient flows up: into the node of an op that ran earlier in the forward pass
        # (an AccumulateGrad, the parameter, sits above the node that feeds it).
        assert dst["position"]["y"] < src["position"]["y"], (src["data"]["label"], dst["data"]["label"])
    placed = [(n["position"]["x"], n["position"]["y"]) for n in nodes.values() if "position" in n]
    assert len(set(placed)) == len(placed)


def test_groups_collapse_and_expand(gpt):
    step = steps_of(gpt)[0]
    full = build_graph(gpt, step, collapsed=[])
    assert full.n_nodes == full.n_total and not full.collapsed
    boxes = [e["data"] for e in full.elements if e["data"].get("kind") == "group"]
    labels = {b["label"] for b in boxes}
    assert {"TinyGPT", "TransformerBlock", "Linear", "MultiheadAttention"} <= labels
    linear = next(b["key"] for b in boxes if b["label"] == "Linear")
    one = build_graph(gpt, step, collapsed=[linear])
    nodes = _nodes(one)
    collapsed = [n["data"] for n in nodes.values() if n["data"]["kind"] == "collapsed"]
    assert len(collapsed) == 1 and collapsed[0]["key"] == linear
    assert "AddmmBackward0" in collapsed[0]["members"] or "MmBackward0" in collapsed[0]["members"]
    assert one.n_nodes < full.n_nodes
    # Every edge ends at a drawn element; every parent is a drawn box.
    for e in one.elements:
        d = e["data"]
        if "source" in d:
            assert d["source"] in nodes and d["target"] in nodes and d["source"] != d["target"]
        if "parent" in d:
            assert nodes[d["parent"]]["data"]["kind"] == "group"


def test_first_view_collapses_until_readable(gpt):
    g = build_graph(gpt, steps_of(gpt)[0])
    assert g.collapsed and g.n_nodes <= READABLE_UNITS < g.n_total
    assert "collapsed" in g.note


def test_colour_by_self_or_total_time():
    # mul ran an inner op for 3 ns: self 6 ns, total 9 ns.
    view = ProfileView(synthetic.from_events([
        {"name": "ProfilerStep#0", "start": 0, "end": 90, "scope": int(Scope.USER_SCOPE)},
        {"name": "mul", "start": 1, "end": 10, "sequence_nr": 0},
        {"name": "empty", "start": 2, "end": 5},
        {"name": "MulBackward0", "start": 20, "end": 30, "scope": B, "sequence_nr": 0, "fwd_thread_id": 1}]))
    step = steps_of(view)[0]
    for colour_by, ns in (("self", 6), ("total", 9)):
        g = build_graph(view, step, colour_by=colour_by)
        mul = next(n for n in _nodes(g).values() if n["data"]["label"] == "mul")
        assert mul["data"]["time_us"] == ns / 1e3


def test_node_details_show_the_graph_around_a_node(gpt):
    cols = gpt.data.event_columns
    # attention's batched matmul: BmmBackward0, as torch's (under its UnsafeViewBackward0)
    mm = next(i for i in np.flatnonzero(cols["scope"] == B) if gpt.data.name_of(int(i)) == "BmmBackward0")
    d = node_details(gpt, int(mm))
    assert d["forward_op"] == "matmul" and d["node_id"] is not None
    assert d["next_nodes"] and d["fed_by"]


def test_profile_without_a_graph_says_so():
    events = []
    for k in range(2):
        t = k * 100
        events += [{"name": "ProfilerStep#%d" % k, "start": t, "end": t + 90, "scope": int(Scope.USER_SCOPE)},
                   {"name": "mul", "start": t + 1, "end": t + 10, "sequence_nr": k},
                   {"name": "MulBackward0", "start": t + 20, "end": t + 30, "scope": B, "sequence_nr": k,
                    "fwd_thread_id": 1}]
    view = ProfileView(synthetic.from_events(events))
    g = build_graph(view, steps_of(view)[1])
    assert not g.has_edges and "no recorded graph edges" in g.note
    assert len(_edges(g, "created")) == 1 and not _edges(g, "flow")


def test_a_thousand_node_step_builds(capsys):
    """500 forward ops and their 500 backward nodes in one step, in 50 modules."""
    ag.manual_seed(0)
    w = ag.randn(8, 8).requires_grad_()
    with profiler.profile(with_modules=True) as prof:
        y = ag.randn(4, 8)
        for k in range(50):
            with profiler.record_function("nn.Module: Block"):
                for _ in range(5):
                    y = (y @ w).tanh()
        with profiler.record_function("ProfilerStep#0"):
            pass
        y.sum().backward()
    view = ProfileView(prof.profile_data)
    cols = view.data.event_columns
    from gradtrace.viewer.graph import Step
    step = Step("all", 1, int(cols["start_ns"].min()), int(cols["end_ns"].max()))
    t0 = time.perf_counter()
    g = build_graph(view, step, collapsed=[])
    seconds = time.perf_counter() - t0
    assert g.n_total >= 1000 and g.n_nodes == g.n_total
    first = build_graph(view, step)
    assert first.n_nodes <= READABLE_UNITS
    with capsys.disabled():
        print(f"\nautograd graph: {g.n_total} nodes, {g.n_edges} edges built in {seconds * 1e3:.0f} ms")
