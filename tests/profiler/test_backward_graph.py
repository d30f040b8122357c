"""The backward graph in a profile (schema 2): recorded edges, AccumulateGrad identity, the file
round trip, version-1 files, and what the loader refuses."""
import json
import struct

import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace import profiler
from gradtrace.profiler import ProfileFormatError
from gradtrace.profiler.fileformat import MAGIC, SCHEMA_VERSION
from gradtrace.profiler.validate import validate_profile


def _mlp_profile(steps: int = 2):
    ag.manual_seed(0)
    w = ag.randn(4, 3).requires_grad_()
    b = ag.zeros(3).requires_grad_()
    x = ag.randn(5, 4)
    with profiler.profile() as prof:
        for _ in range(steps):
            ((x @ w + b).tanh() * 2.0).sum().backward()
    return prof.profile_data


def _named_edges(data) -> list[set]:
    """Per backward pass (SumBackward0 starts one): the edges as (name, next name) pairs."""
    nodes, edges = data.node_columns, data.edge_columns
    name_of_node = {int(n): data.name_of(int(e)) for e, n in zip(nodes["event"], nodes["node_id"])}
    first_event = {}
    for e, n in zip(nodes["event"].tolist(), nodes["node_id"].tolist()):
        first_event.setdefault(n, e)
    starts = sorted(first_event[n] for n, name in name_of_node.items() if name == "SumBackward0")
    passes = [set() for _ in starts]
    for src, dst in zip(edges["node_id"].tolist(), edges["next_node_id"].tolist()):
        k = int(np.searchsorted(starts, first_event[src], side="right")) - 1
        passes[k].add((name_of_node[src], name_of_node[dst]))
    return passes


def test_edges_are_the_nodes_next_edges():
    data = _mlp_profile()
    expected = {("SumBackward0", "MulBackward0"), ("MulBackward0", "TanhBackward0"),
                ("TanhBackward0", "AddBackward0"), ("AddBackward0", "MmBackward0"),
                ("AddBackward0", "AccumulateGrad"), ("MmBackward0", "AccumulateGrad")}
    assert _named_edges(data) == [expected, expected]


def test_accumulate_grad_keeps_its_leafs_id_in_every_step():
    data = _mlp_profile(steps=3)
    nodes = data.node_columns
    acc = [int(n) for e, n in zip(nodes["event"], nodes["node_id"]) if data.name_of(int(e)) == "AccumulateGrad"]
    # Two leaves (w, b), each accumulated once per step, under one id each.
    assert len(acc) == 6 and len(set(acc)) == 2
    assert all(acc.count(n) == 3 for n in set(acc))
    # Every other node ran once: its id is its own.
    others = [int(n) for e, n in zip(nodes["event"], nodes["node_id"]) if data.name_of(int(e)) != "AccumulateGrad"]
    assert len(others) == len(set(others)) == 15


def test_every_backward_event_has_a_node_and_ids_are_dense():
    data = _mlp_profile()
    cols, nodes = data.event_columns, data.node_columns
    backward = np.flatnonzero(cols["scope"] == profiler.Scope.BACKWARD_FUNCTION)
    np.testing.assert_array_equal(np.sort(nodes["event"]), backward)
    assert sorted(set(nodes["node_id"].tolist())) == list(range(len(set(nodes["node_id"].tolist()))))


def test_graph_round_trips_exactly(tmp_path):
    data = _mlp_profile()
    path = tmp_path / "g.gtprof"
    data.save(path)
    loaded = profiler.load(path)
    for table in ("node_columns", "edge_columns"):
        for name, col in getattr(data, table).items():
            got = getattr(loaded, table)[name]
            assert got.dtype == col.dtype
            np.testing.assert_array_equal(got, col)
    assert loaded.metadata["schema_version"] == SCHEMA_VERSION


def test_version_1_file_loads_without_a_graph(tmp_path):
    data = _mlp_profile()
    path = tmp_path / "v2.gtprof"
    data.save(path, version=4)   # edited below as an older version
    blob = path.read_bytes()
    _, _, n = struct.unpack_from("<8sII", blob)
    header = json.loads(blob[16:16 + n])
    # A version-1 writer wrote no nodes or edges tables (their blobs may stay, unreferenced).
    del header["tables"]["nodes"], header["tables"]["edges"]
    header["metadata"]["schema_version"] = 1
    head = json.dumps(header).encode()
    old = tmp_path / "v1.gtprof"
    old.write_bytes(MAGIC + struct.pack("<II", 1, len(head)) + head + blob[16 + n:])
    loaded = profiler.load(old)
    assert loaded.n_events == data.n_events
    assert len(loaded.node_columns["event"]) == 0 and len(loaded.edge_columns["node_id"]) == 0
    assert loaded.table() == data.table()


def _broken(data, table: str, column: str, value):
    nodes = {k: v.copy() for k, v in data.node_columns.items()}
    edges = {k: v.copy() for k, v in data.edge_columns.items()}
    (nodes if table == "nodes" else edges)[column][0] = value
    return nodes, edges


@pytest.mark.parametrize("table, column, value, message", [
    ("nodes", "event", -1, "graph node's event is out of range"),
    ("nodes", "event", 10**6, "graph node's event is out of range"),
    ("nodes", "event", 0, "not a backward node"),          # event 0 is a forward op
    ("nodes", "node_id", -3, "graph node id is out of range"),
    ("nodes", "node_id", 10**6, "graph node id is out of range"),
    ("edges", "node_id", 10**6, "edge names a node that is not in the profile"),
    ("edges", "next_node_id", -1, "edge names a node that is not in the profile"),
    ("edges", "input_nr", -2, "negative input_nr"),
])
def test_loader_refuses_broken_graph_ids(table, column, value, message):
    data = _mlp_profile()
    nodes, edges = _broken(data, table, column, value)
    with pytest.raises(ProfileFormatError, match=message):
        validate_profile("p.gtprof", data.event_columns, data.memory_columns, data.strings,
                         data.metadata, nodes, edges)


def test_repeated_node_event_is_refused():
    data = _mlp_profile()
    nodes = {k: v.copy() for k, v in data.node_columns.items()}
    nodes["event"][1] = nodes["event"][0]
    with pytest.raises(ProfileFormatError, match="out of range or repeated"):
        validate_profile("p.gtprof", data.event_columns, data.memory_columns, data.strings,
                         data.metadata, nodes, data.edge_columns)


def test_a_node_run_twice_keeps_one_id_and_its_edges_once():
    """retain_graph=True: the second backward runs the same node objects, so each keeps its
    id (PyTorch's node identity), and the graph's edges are not doubled."""
    w = ag.randn(4, 3).requires_grad_()
    x = ag.randn(5, 4)
    with profiler.profile() as prof:
        loss = (x @ w).tanh().sum()
        loss.backward(retain_graph=True)
        loss.backward()
    data = prof.profile_data
    nodes, edges = data.node_columns, data.edge_columns
    by_name = {}
    for e, n in zip(nodes["event"].tolist(), nodes["node_id"].tolist()):
        by_name.setdefault(data.name_of(e), []).append(n)
    # Each node ran twice under one id: SumBackward0, TanhBackward0, MmBackward0, AccumulateGrad.
    assert sorted(by_name) == ["AccumulateGrad", "MmBackward0", "SumBackward0", "TanhBackward0"]
    assert all(len(ids) == 2 and ids[0] == ids[1] for ids in by_name.values())
    pairs = list(zip(edges["node_id"].tolist(), edges["next_node_id"].tolist()))
    assert len(pairs) == len(set(pairs)) == 3


def test_edges_with_no_gradient_and_to_nodes_that_never_ran_are_left_out():
    """``y = a * b`` with only ``a`` requiring grad: MulBackward0's edge for ``b`` is None,
    and a node whose gradient never arrived is not in the profile."""
    a = ag.randn(3).requires_grad_()
    b = ag.randn(3)
    with profiler.profile() as prof:
        (a * b).sum().backward()
    data = prof.profile_data
    assert _named_edges(data) == [{("SumBackward0", "MulBackward0"), ("MulBackward0", "AccumulateGrad")}]
    assert data.edge_columns["input_nr"].tolist() == [0, 0]


def test_each_range_keeps_its_own_stream():
    """A user range has no stream (0); an op carries the stream it ran on: the thread's
    default CPU stream (0) or another one entered with ``with stream:``."""
    from gradtrace.autograd import backend

    side = backend.Stream("cpu")
    with profiler.profile() as prof:
        with profiler.record_function("block"):
            ag.ones(3) * 2.0
            with side:
                ag.ones(3) + 1.0
    data = prof.profile_data
    streams = {data.name_of(i): int(s) for i, s in enumerate(data.event_columns["stream"])}
    assert streams == {"block": 0, "mul": backend.current_stream("cpu").ptr, "add": side.ptr}
    assert side.ptr != backend.current_stream("cpu").ptr


def test_many_streams_keep_their_ids():
    """More distinct streams than the collector's per-stream pass handles (four): the rest
    are told apart by id(), with the same result."""
    from gradtrace.autograd import backend

    streams = [backend.Stream("cpu") for _ in range(6)]
    with profiler.profile() as prof:
        for k, s in enumerate(streams):
            with s:
                ag.ones(3) * float(k)
    cols = prof.profile_data.event_columns
    assert cols["stream"].tolist() == [s.ptr for s in streams]


def test_input_shapes_survive_the_description_table_being_cleared(monkeypatch):
    """record_function keeps one object per distinct input description (so the collector
    keys them by id()); when the table is cleared mid-profile the rows still carry theirs."""
    from gradtrace.autograd import record_function as rf

    monkeypatch.setattr(rf, "_MAX_DESCRIPTIONS", 2)
    with profiler.profile(record_shapes=True) as prof:
        for n in (2, 3, 4, 5, 2):
            ag.ones(n) * 2.0
    data = prof.profile_data
    shapes = [data.strings[int(i)] for i in data.event_columns["shapes_id"]]
    assert shapes == ["[[2], []]", "[[3], []]", "[[4], []]", "[[5], []]", "[[2], []]"]


def test_a_profile_holds_only_the_input_shapes_of_its_own_ops():
    """Descriptions seen by an earlier profile stay in record_function's table; a later
    profile's strings and inputs table must not take them in."""
    with profiler.profile(record_shapes=True):
        for n in range(1, 41):
            ag.ones(n) * 2.0
    with profiler.profile(record_shapes=True) as prof:
        ag.ones(7) + 1.0
    data = prof.profile_data
    shapes = [s for s in data.strings if s.startswith("[[")]
    assert shapes == ["[[7], []]"]
    assert [data.strings[int(i)] for i in data.event_columns["shapes_id"]] == ["[[7], []]"]
