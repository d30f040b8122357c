"""GPU activities as profile events: the one place where a kernel, memcpy or memset becomes
an event and a row of the gpu table.

Both sources of device activities go through here: a torch.profiler trace's ``kernel`` /
``gpu_memcpy`` / ``gpu_memset`` events (:mod:`.torch_trace`) and the CUPTI records of
gradtrace's own CUDA profiles (:mod:`.cupti_activity`, built by the collector). Each gives
its activities as *raw activity columns*, one row per activity:

* ``cat`` (``records.GpuKind``), ``name_id`` (string id), ``start_ns``, ``dur_ns`` (device
  interval on the profile's clock), ``device`` (the CUDA device index), ``stream``,
  ``correlation`` (the launching runtime call's correlation id);
* the launch arguments, named as ``records.GPU_COLUMNS`` (``context``, ``grid_x`` ...
  ``bandwidth_gbps``), -1 / NaN where unknown.

An activity becomes an event placed, with zero CPU time, at the start of the call that
launched it (:func:`activity_events`), so that it nests as a child of that call and an op's
CUDA time is the sum of its kernels'; an activity whose launch is not in the profile is kept
on a thread of its own. Its launch arguments become its gpu-table row (:func:`gpu_table`).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .records import GPU_COLUMNS, Scope

__all__ = ["lookup", "device_name_ids", "activity_events", "gpu_table"]


def lookup(keys, eligible, wanted) -> np.ndarray:
    """For each wanted key, the index of an eligible row with that key (-1 where none).

    Args:
        keys: int64 key per row (e.g. the correlation id of each runtime call).
        eligible: bool mask of the rows that may be found.
        wanted: the keys looked up (e.g. each activity's correlation id).
    Returns:
        int64 row index per wanted key, -1 where no eligible row has it.
    """
    rows = np.flatnonzero(eligible & (keys >= 0))
    out = np.full(len(wanted), -1, dtype=np.int64)
    if len(rows) == 0:
        return out
    order = np.argsort(keys[rows], kind="stable")
    sorted_keys = keys[rows][order]
    slot = np.minimum(np.searchsorted(sorted_keys, wanted), len(sorted_keys) - 1)
    hit = (sorted_keys[slot] == wanted) & (wanted >= 0)
    out[hit] = rows[order[slot[hit]]]
    return out


def device_name_ids(device: np.ndarray, intern: Callable[[str], int]) -> np.ndarray:
    """The string id of ``cuda:N`` for each activity's device index N, the names interned in
    order of first appearance (as one pass over the events would).

    Args:
        device: int device index per activity.
        intern: the profile's string interning (name -> id).
    Returns:
        int32 string id per activity.
    """
    if not len(device):
        return np.zeros(0, dtype=np.int32)
    values, first, index = np.unique(device, return_index=True, return_inverse=True)
    ids = np.empty(len(values), dtype=np.int32)
    for k in np.argsort(first, kind="stable").tolist():
        ids[k] = intern(f"cuda:{int(values[k])}")
    return ids[index.reshape(-1)]


def activity_events(g: dict, launcher: np.ndarray, start: np.ndarray, thread: np.ndarray, orphan_thread: int,
                    device_ids: np.ndarray) -> dict:
    """The events of the activities ``g`` (raw activity columns, see the module docstring).

    Args:
        g: raw activity columns.
        launcher: per activity, the index of its launching call among the CPU events given by
            ``start``/``thread`` (-1: not in the profile).
        start, thread: start time and thread id of the CPU events ``launcher`` points into.
        orphan_thread: the thread id given to activities without a launching call.
        device_ids: string id of each activity's device (:func:`device_name_ids`).
    Returns:
        A column per ``records.EVENT_COLUMNS`` name (not yet at the schema's dtypes).
    """
    n = len(g["cat"])
    orphan = launcher < 0
    at = np.maximum(launcher, 0)
    ev_start = np.where(orphan, g["start_ns"], start[at] if len(start) else 0)
    ev_thread = np.where(orphan, orphan_thread, thread[at] if len(thread) else 0)
    return {
        "name_id": g["name_id"], "start_ns": ev_start, "end_ns": ev_start, "thread_id": ev_thread,
        "scope": np.full(n, int(Scope.FUNCTION)), "sequence_nr": np.full(n, -1),
        "fwd_thread_id": np.zeros(n, np.int64), "device_id": device_ids, "stream": g["stream"],
        "device_start_ns": g["start_ns"], "device_end_ns": g["start_ns"] + g["dur_ns"],
        "shapes_id": np.full(n, -1), "dtypes_id": np.full(n, -1), "stack_id": np.full(n, -1),
    }


def gpu_table(g: dict, event: np.ndarray) -> dict:
    """The gpu table (``records.GPU_COLUMNS``) of the activities ``g``, in event order.

    Args:
        g: raw activity columns.
        event: the row each activity's event ended up at in the profile's events.
    Returns:
        The table, one row per activity, sorted by ``event``.
    """
    by_event = np.argsort(event, kind="stable")
    table = {"event": event, "kind": g["cat"]}
    table.update((name, g[name]) for name in GPU_COLUMNS if name not in table)
    return {name: np.asarray(col).take(by_event).astype(GPU_COLUMNS[name], copy=False)
            for name, col in table.items()}
