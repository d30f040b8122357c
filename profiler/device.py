"""What a profile's device work is: the one definition of a kernel.

Two kinds of profile hold device time, and each says differently which of its intervals are
the work the device did, each counted once:

* **A torch trace** (or any profile with a gpu table, ``records.GPU_COLUMNS``): the rows of
  the gpu table — kernels, memcpys, memsets, each an event of its own (placed at its launch,
  with zero CPU time). The device reported them one by one, so they never contain each other
  and every one is device work.
* **A gradtrace profile**: ops carry device intervals (a pair of CUDA events around each op on
  its stream), and an op's interval contains those of the ops it ran: a composite around its
  primitives, a backward node around the ops of its rule. An op's device interval that
  contains no other device interval of its (device, stream) is a kernel; one that contains
  others is an annotation. Summing kernels thus counts each device nanosecond once.

``gpu.device_work`` (the GPU analyses, the kernel view) and ``chrome_layout`` (``kernel`` vs
``gpu_user_annotation`` events) read the device work from here; ``stats`` groups a torch
trace's activities as its "kernel" rows.
"""
from __future__ import annotations

import numpy as np

from .nesting import nest_intervals

__all__ = ["has_device_interval", "device_work_rows", "activity_mask"]


def has_device_interval(cols: dict) -> np.ndarray:
    """Boolean mask of the events with a device interval (start recorded, end not before it)."""
    start, end = cols["device_start_ns"], cols["device_end_ns"]
    return (start >= 0) & (end >= start)


def device_work_rows(cols: dict, gpu_columns: dict) -> np.ndarray:
    """The events that are device work (see the module docstring), ascending.

    Args:
        cols: event columns (``records.EVENT_COLUMNS``).
        gpu_columns: the gpu table (``records.GPU_COLUMNS``); empty for a gradtrace profile.
    Returns:
        int64 event indices: the gpu table's events (in its row order) when it has rows, else
        the innermost op device intervals of each (device, stream).
    """
    if len(gpu_columns["event"]):   # ascending, one per row of the table (validate._check_gpu)
        return gpu_columns["event"].astype(np.int64)
    dev = np.flatnonzero(has_device_interval(cols)).astype(np.int64)
    if len(dev) == 0:
        return dev
    # One nesting row per (device, stream): intervals of different streams may overlap freely.
    _, row = np.unique(np.stack([cols["device_id"][dev].astype(np.int64), cols["stream"][dev].astype(np.int64)]),
                       axis=1, return_inverse=True)
    nest = nest_intervals(cols["device_start_ns"][dev], cols["device_end_ns"][dev], row.reshape(-1))
    has_child = np.zeros(len(dev), dtype=bool)
    has_child[nest.parent[nest.parent >= 0]] = True
    return dev[~has_child]


def activity_mask(n_events: int, gpu_columns: dict) -> np.ndarray:
    """Boolean mask of the events that are rows of the gpu table (a torch trace's kernels,
    memcpys and memsets); all False for a gradtrace profile, whose device work is its ops."""
    mask = np.zeros(n_events, dtype=bool)
    mask[gpu_columns["event"].astype(np.int64)] = True
    return mask
