"""Profiles built by hand, for tests, benchmarks and the tools that read profiles.

:func:`from_events` turns a list of plain dicts into a :class:`ProfileData`;
:func:`from_intervals` does the same for bare ``[[start, end], ...]`` lists;
:func:`training_profile` makes a large, realistic one (nested forward ops, backward nodes
correlated by sequence_nr, user scopes, several threads, memory records) by tiling one
training step with numpy, so a million events take well under a second to build.
"""
from __future__ import annotations

import json

import numpy as np

from .data import ProfileData
from .records import EVENT_COLUMNS, MEMORY_COLUMNS, Scope

__all__ = ["from_events", "from_intervals", "training_profile"]


class _Strings:
    def __init__(self):
        self.list: list[str] = []
        self.ids: dict[str, int] = {}

    def __call__(self, s: str | None) -> int:
        if s is None:
            return -1
        if s not in self.ids:
            self.ids[s] = len(self.list)
            self.list.append(s)
        return self.ids[s]


def from_events(events: list[dict], memory: list[dict] = (), metadata: dict | None = None) -> ProfileData:
    """Build a profile from dicts.

    Event keys: ``name``, ``start``, ``end`` (required); ``thread`` (1), ``scope``
    (Scope.FUNCTION), ``sequence_nr`` (-1), ``fwd_thread_id`` (0), ``device`` ("cpu"),
    ``stream`` (0), ``device_start``/``device_end`` (-1), ``shapes`` (list of shapes),
    ``dtypes`` (list of str), ``stack`` (list of frames).
    Memory keys: ``time``, ``bytes``, ``total_allocated`` (running sum when omitted),
    ``device`` ("cpu"), ``addr`` (0), ``thread`` (1).
    Events keep the given order (give them in start order, as the collector stores them).
    """
    strings = _Strings()
    cols = {name: [] for name in EVENT_COLUMNS}
    for e in events:
        cols["name_id"].append(strings(e["name"]))
        cols["start_ns"].append(int(e["start"]))
        cols["end_ns"].append(int(e["end"]))
        cols["thread_id"].append(int(e.get("thread", 1)))
        cols["scope"].append(int(e.get("scope", Scope.FUNCTION)))
        cols["sequence_nr"].append(int(e.get("sequence_nr", -1)))
        cols["fwd_thread_id"].append(int(e.get("fwd_thread_id", 0)))
        cols["device_id"].append(strings(e.get("device", "cpu")))
        cols["stream"].append(int(e.get("stream", 0)))
        cols["device_start_ns"].append(int(e.get("device_start", -1)))
        cols["device_end_ns"].append(int(e.get("device_end", -1)))
        shapes = e.get("shapes")
        cols["shapes_id"].append(strings(json.dumps(shapes)) if shapes is not None else -1)
        dtypes = e.get("dtypes")
        cols["dtypes_id"].append(strings(json.dumps(dtypes)) if dtypes is not None else -1)
        stack = e.get("stack")
        cols["stack_id"].append(strings("\n".join(stack)) if stack else -1)
    mem = {name: [] for name in MEMORY_COLUMNS}
    running: dict[str, int] = {}
    for m in memory:
        device = m.get("device", "cpu")
        running[device] = running.get(device, 0) + int(m["bytes"])
        mem["time_ns"].append(int(m["time"]))
        mem["bytes"].append(int(m["bytes"]))
        mem["total_allocated"].append(int(m.get("total_allocated", running[device])))
        mem["device_id"].append(strings(device))
        mem["addr"].append(int(m.get("addr", 0)))
        mem["thread_id"].append(int(m.get("thread", 1)))
        mem["category"].append(int(m.get("category", 0)))
    meta = {"activities": ["cpu"], "profile_memory": bool(memory), "synthetic": True,
            # kinds: a record of 0 bytes with a "category" says what the allocation there holds
            "memory_categories": any("category" in m for m in memory)}
    meta.update(metadata or {})
    return ProfileData(cols, mem, strings.list, meta)


def from_intervals(intervals, thread: int = 1, names: list[str] | None = None) -> ProfileData:
    """``from_intervals([[0, 10], [1, 3], [3, 4]])``: events named op0, op1... on one thread."""
    names = names or [f"op{i}" for i in range(len(intervals))]
    return from_events([{"name": n, "start": s, "end": e, "thread": thread}
                        for n, (s, e) in zip(names, intervals)])


# --------------------------------------------------------------------------- large profiles


def _step_template(layers: int, strings: _Strings, batch: int, width: int):
    """One training step of an MLP as event rows relative to t=0 (ns) and its memory rows."""
    rows = []      # [name_id, start, end, scope, seq, is_bwd, shapes_id, parent_slot]
    mem = []       # [time, bytes]
    t = [0]
    seq = [0]
    fwd_seq_of = {}

    def shapes(*s):
        return strings(json.dumps([list(x) for x in s]))

    def open_(name, scope, seq_nr=-1, shp=-1, is_bwd=0):
        t[0] += 150
        rows.append([strings(name), t[0], -1, int(scope), seq_nr, is_bwd, shp])
        return len(rows) - 1

    def close(i, work=0):
        t[0] += 200 + work
        rows[i][2] = t[0]

    def leaf(name, shp, creates_node=True, work=800, alloc=0):
        s = -1
        if creates_node:
            s = seq[0]
            seq[0] += 1
        i = open_(name, Scope.FUNCTION, s, shp)
        if alloc:
            mem.append([t[0] + 50, alloc])
        close(i, work)
        return s

    step = open_("ProfilerStep#", Scope.USER_SCOPE)
    fwd = open_("forward", Scope.USER_SCOPE)
    act = (batch, width)
    for layer in range(layers):
        lin = open_("linear", Scope.FUNCTION, -1, shapes(act, (width, width), (width,)))
        fwd_seq_of[("mm", layer)] = leaf("matmul", shapes(act, (width, width)), work=3000, alloc=batch * width * 4)
        fwd_seq_of[("add", layer)] = leaf("add", shapes(act, (width,)), alloc=batch * width * 4)
        close(lin)
        fwd_seq_of[("relu", layer)] = leaf("relu", shapes(act), alloc=batch * width * 4)
    fwd_seq_of["mean"] = leaf("mean", shapes(act), alloc=4)
    close(fwd)
    bwd = open_("backward", Scope.USER_SCOPE)
    node = open_("MeanBackward0", Scope.BACKWARD_FUNCTION, fwd_seq_of["mean"], -1, 1)
    leaf("expand", shapes(()), creates_node=False)
    close(node)
    for layer in reversed(range(layers)):
        for key, bname, ops in (("relu", "ReluBackward0", ["threshold_backward"]),
                                ("add", "AddBackward0", ["sum"]),
                                ("mm", "MmBackward0", ["matmul", "matmul"])):
            node = open_(bname, Scope.BACKWARD_FUNCTION, fwd_seq_of[(key, layer)], -1, 1)
            for op in ops:
                leaf(op, shapes(act, (width, width)), creates_node=False, work=2500, alloc=batch * width * 4)
            mem.append([t[0], -batch * width * 4])
            close(node)
        for _ in range(2):
            node = open_("AccumulateGrad", Scope.BACKWARD_FUNCTION, -1, -1, 1)
            close(node, 300)
    close(bwd)
    opt = open_("Optimizer.step#SGD.step", Scope.USER_SCOPE)
    for _ in range(2 * layers):
        leaf("mul", shapes((width, width), ()), creates_node=False)
        leaf("sub", shapes((width, width), (width, width)), creates_node=False)
    close(opt)
    close(step)
    return np.array(rows, dtype=np.int64), np.array(mem, dtype=np.int64).reshape(-1, 2), seq[0], t[0]


def training_profile(n_events: int, threads: int = 4, layers: int = 8, batch: int = 64,
                     width: int = 256, seed: int = 0) -> ProfileData:
    """A profile of about ``n_events`` events: an MLP training loop run by ``threads`` threads.

    Each step has a ``ProfilerStep#N`` and forward/backward/optimizer user scopes, composite
    forward ops (``linear`` around ``matmul`` and ``add``), backward nodes linked to their
    forward ops through (sequence_nr, thread), ops inside backward nodes, and one allocation
    per forward output freed in backward.
    """
    rng = np.random.default_rng(seed)
    strings = _Strings()
    strings("cpu")
    tmpl, tmem, seq_per_step, step_ns = _step_template(layers, strings, batch, width)
    per_step = len(tmpl)
    steps_total = max(1, -(-n_events // per_step))
    steps_per_thread = -(-steps_total // threads)
    parts, mparts = [], []
    step_names = [strings(f"ProfilerStep#{k}") for k in range(steps_per_thread)]
    step_name_id = strings.ids["ProfilerStep#"]
    for thread in range(1, threads + 1):
        k = np.arange(steps_per_thread, dtype=np.int64)
        # Steps follow each other with a jittered gap; threads start at different times.
        gaps = rng.integers(1_000, 20_000, size=steps_per_thread)
        offsets = thread * 12_345 + k * step_ns + np.cumsum(gaps)
        block = np.repeat(tmpl[None, :, :], steps_per_thread, axis=0)
        block[:, :, 1] += offsets[:, None]
        block[:, :, 2] += offsets[:, None]
        has_seq = block[:, :, 4] >= 0
        block[:, :, 4] = np.where(has_seq, block[:, :, 4] + (k * seq_per_step)[:, None], -1)
        names = block[:, :, 0]
        names[names == step_name_id] = np.repeat(np.array(step_names)[:, None], per_step, axis=1)[names == step_name_id]
        flat = block.reshape(-1, tmpl.shape[1])
        thread_col = np.full((len(flat), 1), thread, dtype=np.int64)
        parts.append(np.hstack([flat, thread_col]))
        mem = np.repeat(tmem[None, :, :], steps_per_thread, axis=0)
        mem[:, :, 0] += offsets[:, None]
        mflat = mem.reshape(-1, 2)
        mparts.append(np.hstack([mflat, np.full((len(mflat), 1), thread, dtype=np.int64)]))
    rows = np.concatenate(parts)[:n_events]
    order = np.lexsort((-rows[:, 2], rows[:, 1]))
    rows = rows[order]
    mrows = np.concatenate(mparts)
    mrows = mrows[np.argsort(mrows[:, 0], kind="stable")]
    n = len(rows)
    is_bwd = rows[:, 5] == 1
    events = {
        "name_id": rows[:, 0], "start_ns": rows[:, 1], "end_ns": rows[:, 2],
        "thread_id": rows[:, 7], "scope": rows[:, 3], "sequence_nr": rows[:, 4],
        "fwd_thread_id": np.where(is_bwd, rows[:, 7], 0), "device_id": np.zeros(n, np.int64),
        "stream": np.zeros(n, np.int64), "device_start_ns": np.full(n, -1), "device_end_ns": np.full(n, -1),
        "shapes_id": rows[:, 6], "dtypes_id": np.full(n, -1), "stack_id": np.full(n, -1),
    }
    memory = {"time_ns": mrows[:, 0], "bytes": mrows[:, 1], "total_allocated": np.cumsum(mrows[:, 1]),
              "device_id": np.zeros(len(mrows), np.int64), "addr": np.arange(len(mrows)) * 256,
              "thread_id": mrows[:, 2]}
    metadata = {"activities": ["cpu"], "record_shapes": True, "profile_memory": True,
                "synthetic": True, "devices": ["cpu"]}
    return ProfileData(events, memory, strings.list, metadata)
