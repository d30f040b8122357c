"""Table rows the library does not group for us: per device, per nn.Module.

Pure functions over a loaded :class:`profiler.ProfileData` (no engine import). They reuse the
profile's analysis arrays (parents, self times, forward/backward links) and only regroup them.
"""
from __future__ import annotations

import numpy as np

from gradtrace.profiler import ProfileData
from gradtrace.profiler.aggregate import SORT_KEYS, EventList

__all__ = ["merge_step_rows", "sorted_rows", "device_rows", "module_rows", "MODULE_PREFIX"]

MODULE_PREFIX = "nn.Module: "


STEP_PREFIX = "ProfilerStep#"
_SUMMED = ("count", "cpu_time_total", "self_cpu_time_total", "cuda_time_total", "self_cuda_time_total",
           "cpu_memory_usage", "self_cpu_memory_usage", "cuda_memory_usage", "self_cuda_memory_usage",
           "flops")


def merge_step_rows(rows):
    """One ``ProfilerStep#*`` row instead of one row per step (the others are kept as they are).

    A profile of 20 steps has 20 ``ProfilerStep#N`` rows of one call each; in a table they push
    the ops out of view. The merged row sums them (count = number of steps).
    """
    from gradtrace.profiler import FunctionEventAvg  # noqa: PLC0415

    rows = list(rows)
    steps = [r for r in rows if r.key.startswith(STEP_PREFIX)]
    if len(steps) < 2:
        return rows
    merged = FunctionEventAvg(STEP_PREFIX + "*", **{f: sum(getattr(r, f) for r in steps) for f in _SUMMED})
    merged.cpu_time = merged.cpu_time_total / merged.count
    merged.cuda_time = merged.cuda_time_total / merged.count
    merged.scope = steps[0].scope
    merged.input_shapes = steps[0].input_shapes
    merged.stack = steps[0].stack
    out, placed = [], False
    for r in rows:
        if r.key.startswith(STEP_PREFIX):
            if not placed:
                out.append(merged)
                placed = True
        else:
            out.append(r)
    return out


def sorted_rows(rows, sort_by: str | None, limit: int | None):
    """Rows sorted descending by a PyTorch sort key (None keeps first-seen order), cut to limit."""
    rows = list(rows)
    if sort_by is not None:
        attr = SORT_KEYS[sort_by]
        rows.sort(key=lambda r: getattr(r, attr), reverse=True)
    if limit is not None and limit > 0:
        rows = rows[:limit]
    return rows


def device_rows(data: ProfileData, group_by_input_shape: bool = False,
                group_by_stack_n: int = 0) -> list[tuple[str, object]]:
    """``key_averages()`` computed separately for the events of each device.

    Returns:
        (device, FunctionEventAvg) pairs, devices in the order of their first event.
    """
    dev = data.event_columns["device_id"]
    out = []
    seen = []
    for d in dev.tolist():
        if d not in seen:
            seen.append(d)
    for d in seen:
        idx = np.flatnonzero(dev == d)
        label = data.strings[int(d)]
        for row in EventList(data, idx).key_averages(group_by_input_shape, group_by_stack_n):
            out.append((label, row))
    return out


def module_rows(data: ProfileData) -> list[dict]:
    """Time per ``nn.Module`` class, forward and backward, without double counting.

    Every event is charged to its innermost enclosing ``nn.Module: X`` range; a backward node is
    charged to the module of the forward op that created it (ops run inside a backward node go
    with the node). "self" sums the self times of the events charged to a module; "total" adds
    the modules nested inside it, so the top-level module's total covers its whole subtree.
    Events outside every module are one row, ``(no module)``.

    Returns:
        A list of dicts (times in microseconds), heaviest self CPU first; empty when the profile
        has no module ranges (recorded without ``with_modules``).
    """
    a = data.analysis
    names = data.strings
    name_id = data.event_columns["name_id"]
    n = data.n_events
    is_module = np.array([names[int(i)].startswith(MODULE_PREFIX) for i in range(len(names))], dtype=bool)
    if n == 0 or not is_module.any():
        return []
    module_event = is_module[name_id] if len(names) else np.zeros(n, bool)
    parent = a.parent
    # Innermost module range enclosing (or being) each event, by walking up level by level.
    owner = np.where(module_event, np.arange(n), -1)
    cursor = parent.copy()
    pending = np.flatnonzero(owner < 0)
    while len(pending):
        p = cursor[pending]
        alive = p >= 0
        pending, p = pending[alive], p[alive]
        hit = module_event[p]
        owner[pending[hit]] = p[hit]
        pending = pending[~hit]
        cursor[pending] = parent[cursor[pending]]
    # Backward events (and what runs inside them) go to their forward op's module.
    bwd_root = a.backward_ancestor
    in_bwd = bwd_root >= 0
    fwd_of = np.full(n, -1, dtype=np.int64)
    fwd_of[in_bwd] = a.forward_event[bwd_root[in_bwd]]
    linked = in_bwd & (fwd_of >= 0)
    owner[linked] = owner[fwd_of[linked]]
    owner[in_bwd & (fwd_of < 0)] = -1

    module_name = {}
    for ev in np.unique(owner[owner >= 0]).tolist():
        module_name[ev] = names[int(name_id[ev])][len(MODULE_PREFIX):]
    keys = sorted(set(module_name.values()))
    key_index = {k: i for i, k in enumerate(keys)}
    none_key = len(keys)
    group = np.full(n, none_key, dtype=np.int64)
    group_of_owner = np.full(n, none_key, dtype=np.int64)
    for ev, name in module_name.items():
        group_of_owner[ev] = key_index[name]
    group[owner >= 0] = group_of_owner[owner[owner >= 0]]
    groups = none_key + 1

    def gsum(values, mask=None):
        g = group if mask is None else group[mask]
        v = values if mask is None else values[mask]
        return np.bincount(g, weights=v, minlength=groups)

    self_cpu = gsum(a.self_cpu_ns)
    self_cuda = gsum(a.self_cuda_ns)
    fwd_self = gsum(a.self_cpu_ns, ~in_bwd)
    bwd_self = gsum(a.self_cpu_ns, in_bwd)
    count = np.bincount(group[module_event], minlength=groups)
    # Inclusive totals: add each module's self time to every module class enclosing it.
    total_cpu = self_cpu.copy()
    total_cuda = self_cuda.copy()
    owned = owner >= 0
    owned_cpu = np.bincount(owner[owned], weights=a.self_cpu_ns[owned], minlength=n)
    owned_cuda = np.bincount(owner[owned], weights=a.self_cuda_ns[owned], minlength=n)
    for ev, name in module_name.items():
        seen = {name}
        p = int(parent[ev])
        while p >= 0:
            if module_event[p]:
                outer = names[int(name_id[p])][len(MODULE_PREFIX):]
                if outer not in seen:
                    seen.add(outer)
                    total_cpu[key_index[outer]] += owned_cpu[ev]
                    total_cuda[key_index[outer]] += owned_cuda[ev]
            p = int(parent[p])
    rows = []
    for k, label in enumerate(keys + ["(no module)"]):
        if k == none_key and not np.any(group == none_key):
            continue
        rows.append({
            "module": label, "count": int(count[k]),
            "self_cpu_time_total": float(self_cpu[k]) / 1e3, "cpu_time_total": float(total_cpu[k]) / 1e3,
            "forward_self_cpu_time_total": float(fwd_self[k]) / 1e3,
            "backward_self_cpu_time_total": float(bwd_self[k]) / 1e3,
            "self_cuda_time_total": float(self_cuda[k]) / 1e3, "cuda_time_total": float(total_cuda[k]) / 1e3,
        })
    rows.sort(key=lambda r: r["self_cpu_time_total"], reverse=True)
    return rows
