"""Memory by kind: the engine's categories (torch's memory-profiler names), their records, the
analysis that gives each allocation one kind, and an MLP + Adam step measured against the
tensors it holds."""
from __future__ import annotations

import json
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradtrace import profiler
from gradtrace.profiler import synthetic
from gradtrace.profiler.fileformat import MAGIC
from gradtrace.profiler.memory import (KIND_ORDER, allocation_of_records, kind_summary, live_by_kind,
                                       memory_table, record_kinds)
from gradtrace.profiler.records import MemoryCategory as K


def test_engine_and_profile_agree_on_the_kinds_and_their_strength():
    from gradtrace.autograd import memory as engine

    assert {c.name: int(c) for c in engine.Category} == {c.name: int(c) for c in K}
    by_strength = sorted(engine.Category, key=lambda c: engine._STRENGTH[c], reverse=True)
    assert [int(c) for c in by_strength] == [int(c) for c in KIND_ORDER[:-1]] + [0]


# (records: (bytes, addr, category)), expected owner row and kind of each record.
CASES = [
    ("a later kind applies from the allocation on",
     [(64, 1, 0), (0, 1, K.ACTIVATION), (-64, 1, 0)],
     [0, 0, 0], [K.ACTIVATION] * 3),
    ("the strongest kind wins, in either order",
     [(64, 1, 0), (0, 1, K.ACTIVATION), (0, 1, K.PARAMETER), (0, 1, K.ACTIVATION), (-64, 1, 0)],
     [0, 0, 0, 0, 0], [K.PARAMETER] * 5),
    ("no kind: a temporary",
     [(32, 7, 0), (-32, 7, 0)],
     [0, 0], [K.TEMPORARY] * 2),
    ("a reused address is a new allocation; a kind after the free is of nothing seen",
     [(64, 1, 0), (0, 1, K.GRADIENT), (-64, 1, 0), (0, 1, K.OPTIMIZER_STATE), (16, 1, 0), (-16, 1, 0)],
     [0, 0, 0, -1, 4, 4], [K.GRADIENT] * 3 + [K.NONE] + [K.TEMPORARY] * 2),
    ("a free of memory allocated before the profile: unknown",
     [(-8, 3, 0), (8, 3, 0), (0, 3, K.INPUT)],
     [-1, 1, 1], [K.NONE, K.INPUT, K.INPUT]),
    ("two addresses interleaved",
     [(8, 1, 0), (8, 2, 0), (0, 2, K.ACTIVATION), (-8, 1, 0), (-8, 2, 0)],
     [0, 1, 1, 0, 1], [K.TEMPORARY, K.ACTIVATION, K.ACTIVATION, K.TEMPORARY, K.ACTIVATION]),
]


def _columns(records):
    b = np.array([r[0] for r in records], dtype=np.int64)
    return {"time_ns": np.arange(len(records)), "bytes": b, "total_allocated": np.cumsum(b),
            "device_id": np.zeros(len(records), np.int32), "addr": np.array([r[1] for r in records]),
            "thread_id": np.ones(len(records), np.int32),
            "category": np.array([int(r[2]) for r in records], dtype=np.int8)}


@pytest.mark.parametrize("what, records, owners, kinds", CASES, ids=[c[0] for c in CASES])
def test_each_record_belongs_to_one_allocation_of_one_kind(what, records, owners, kinds):
    mem = _columns(records)
    assert allocation_of_records(mem).tolist() == owners
    assert record_kinds(mem, categorized=True).tolist() == [int(k) for k in kinds]
    assert not record_kinds(mem, categorized=False).any()     # an older profile: all unknown


def test_live_bytes_by_kind_add_up_to_the_total_and_include_what_was_there_before():
    records = [(64, 1, 0), (0, 1, K.PARAMETER), (32, 2, 0), (-32, 2, 0), (16, 3, 0), (0, 3, K.ACTIVATION)]
    mem = _columns(records)
    mem["total_allocated"] = mem["total_allocated"] + 100      # 100 bytes alive before the first record
    kinds = record_kinds(mem, categorized=True)
    live = live_by_kind(mem, kinds, 0)
    np.testing.assert_array_equal(sum(live.by_kind.values()), live.total)
    assert live.by_kind[K.NONE].tolist() == [100] * 6
    assert live.by_kind[K.PARAMETER].tolist() == [64] * 6
    assert live.by_kind[K.TEMPORARY].tolist() == [0, 0, 32, 0, 0, 0]
    rows, peak = kind_summary(mem, kinds, 0)
    assert peak == 2 and [r.label for r in rows] == ["parameter", "activation", "temporary", "unknown"]
    assert {r.label: (r.allocated, r.freed, r.at_peak, r.max_live) for r in rows} == {
        "parameter": (64, 0, 64, 64), "activation": (16, 0, 0, 16), "temporary": (32, 32, 32, 32),
        "unknown": (0, 0, 100, 100)}


def test_memory_table_splits_each_op_by_kind_and_counts_frees_wherever_they_happen():
    data = synthetic.from_events(
        [{"name": "linear", "start": 0, "end": 10}, {"name": "relu", "start": 10, "end": 20},
         {"name": "AccumulateGrad", "start": 30, "end": 40}],
        [{"time": 2, "bytes": 64, "addr": 1}, {"time": 12, "bytes": 32, "addr": 2},
         {"time": 13, "bytes": 0, "addr": 2, "category": int(K.ACTIVATION)},
         {"time": 25, "bytes": -64, "addr": 1}, {"time": 35, "bytes": 16, "addr": 3},
         {"time": 36, "bytes": 0, "addr": 3, "category": int(K.GRADIENT)}, {"time": 45, "bytes": -32, "addr": 2}],
        {"profile_memory": True})
    rows = {r["name"]: r for r in memory_table(data)}
    assert rows["linear"] == {"name": "linear", "allocated": 64, "freed": 64, "net": 0, "allocations": 1,
                              "gradient": 0, "activation": 0, "temporary": 64}
    assert rows["relu"]["activation"] == 32 and rows["relu"]["freed"] == 32
    assert rows["AccumulateGrad"]["gradient"] == 16 and rows["AccumulateGrad"]["net"] == 16


def test_a_schema_2_file_without_kinds_still_loads(tmp_path):
    data = synthetic.from_events([{"name": "op", "start": 0, "end": 10}],
                                 [{"time": 1, "bytes": 8, "addr": 1}, {"time": 2, "bytes": 0, "addr": 1,
                                                                       "category": int(K.GRADIENT)}],
                                 {"profile_memory": True})
    path = tmp_path / "v3.gtprof"
    data.save(path, version=4)   # edited below as an older version
    blob = path.read_bytes()
    _, _, n = struct.unpack_from("<8sII", blob)
    header = json.loads(blob[16:16 + n])
    header["tables"]["memory"]["columns"] = [c for c in header["tables"]["memory"]["columns"]
                                             if c["name"] != "category"]
    header["metadata"]["schema_version"] = 2
    del header["metadata"]["memory_categories"]
    head = json.dumps(header).encode()
    old = tmp_path / "v2.gtprof"
    old.write_bytes(MAGIC + struct.pack("<II", 2, len(head)) + head + blob[16 + n:])
    loaded = profiler.load(old)
    assert loaded.memory_columns["category"].tolist() == [0, 0]
    assert loaded.memory_kinds.tolist() == [0, 0]
    assert "gradient" not in memory_table(loaded)[0]
    # ...while a version-3 file without the column is corrupt.
    new = tmp_path / "v3-broken.gtprof"
    header["metadata"]["schema_version"] = 3
    head = json.dumps(header).encode()
    new.write_bytes(MAGIC + struct.pack("<II", 3, len(head)) + head + blob[16 + n:])
    with pytest.raises(profiler.ProfileFormatError, match="memory column 'category' is missing"):
        profiler.load(new)


# One training step of an MLP with Adam, in a fresh process: the memory tracker then holds
# nothing of other tests, so every byte of the profile is this model's.
_STEP = textwrap.dedent("""
    import json, sys
    import numpy as np
    import gradtrace.autograd as ag
    from gradtrace.autograd import nn, optim
    import gradtrace.autograd.nn.functional as F
    from gradtrace import profiler

    made_inside = sys.argv[2] == "inside"
    rng = np.random.default_rng(0)
    x = ag.tensor(rng.standard_normal((64, 32)).astype(np.float32))
    y = ag.tensor(rng.integers(0, 10, 64))

    def build():
        model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
        return model, optim.Adam(model.parameters(), lr=1e-3)

    def step(model, opt):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        with profiler.record_function("backward_pass"):
            loss.backward()
        opt.step()

    if not made_inside:
        model, opt = build()
        step(model, opt)            # the optimizer's state exists before the profile
    with profiler.profile(profile_memory=True) as prof:
        if made_inside:
            model, opt = build()
        step(model, opt)
    prof.profile_data.save(sys.argv[1])
    print(json.dumps({"params": sum(p.data.nbytes for p in model.parameters())}))
""")


@pytest.fixture(scope="module", params=["inside", "before"])
def adam_step(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("mem") / f"adam-{request.param}.gtprof"
    out = subprocess.run([sys.executable, "-c", _STEP, str(path), request.param], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return profiler.load(path), json.loads(out.stdout)["params"]


def _live_at(data, live, t_ns, kind) -> int:
    """Bytes of ``kind`` alive right after the last record at or before ``t_ns``."""
    k = int(np.searchsorted(data.memory_columns["time_ns"][live.rows], t_ns, side="right")) - 1
    return int(live.by_kind.get(kind, np.zeros(len(live.rows), np.int64))[k])


def test_an_adam_step_splits_memory_into_the_tensors_it_holds(adam_step):
    data, param_bytes = adam_step
    mem = data.memory_columns
    kinds = data.memory_kinds
    rows, _ = kind_summary(mem, kinds, 0)
    by = {r.label: r for r in rows}
    live = live_by_kind(mem, kinds, 0)
    np.testing.assert_array_equal(sum(live.by_kind.values()), live.total)   # at every point
    assert by["parameter"].allocated == param_bytes and by["parameter"].freed == 0
    bwd = next(i for i in range(data.n_events) if data.name_of(i) == "backward_pass")
    start_of_backward, end_of_backward = (int(data.event_columns[c][bwd]) for c in ("start_ns", "end_ns"))
    assert _live_at(data, live, end_of_backward, K.GRADIENT) == param_bytes
    assert _live_at(data, live, end_of_backward, K.OPTIMIZER_STATE) in (0, 2 * param_bytes)
    assert by["optimizer state"].max_live == 2 * param_bytes      # Adam: exp_avg and exp_avg_sq
    assert live.by_kind[K.OPTIMIZER_STATE][-1] == 2 * param_bytes
    assert by["activation"].allocated > 0
    assert _live_at(data, live, start_of_backward, K.ACTIVATION) > 0
    assert _live_at(data, live, end_of_backward, K.ACTIVATION) == 0    # released by backward
    assert by["temporary"].freed == by["temporary"].allocated > 0
    assert "unknown" not in by


def test_an_adam_step_per_op_and_per_module(adam_step):
    data, param_bytes = adam_step
    rows = {r["name"]: r for r in memory_table(data)}
    assert rows["AccumulateGrad"]["gradient"] == rows["AccumulateGrad"]["allocated"] > 0
    assert rows["relu"]["activation"] > 0
    total = sum(r["allocated"] for r in rows.values())
    assert total == sum(sum(r[k] for k in r if k not in ("name", "allocated", "freed", "net", "allocations"))
                        for r in rows.values())


def _allocation_by_definition(mem):
    """The rule record by record: an allocation owns the records at its device and address
    until (and including) its free."""
    live, owner = {}, []
    for i, (b, dev, addr) in enumerate(zip(mem["bytes"].tolist(), mem["device_id"].tolist(), mem["addr"].tolist())):
        key = (dev, addr)
        if b > 0:
            live[key] = i
            owner.append(i)
        elif b < 0:
            owner.append(live.pop(key, -1))
        else:
            owner.append(live.get(key, -1))
    return owner


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([-16, 0, 16, 32]), st.integers(0, 3), st.integers(0, 1)), max_size=40))
def test_allocation_of_records_is_the_rule_record_by_record(rows):
    """The vectorised pairing (int32 indices, temporaries freed early) against the rule."""
    mem = {"bytes": np.array([r[0] for r in rows], np.int64), "addr": np.array([r[1] for r in rows], np.int64),
           "device_id": np.array([r[2] for r in rows], np.int32)}
    got = allocation_of_records(mem)
    assert got.dtype == np.int64 and got.tolist() == _allocation_by_definition(mem)
