"""The raw record schema shared by the collector, the analysis and the profile file.

A profile is five tables of columns plus a string table:

* **events**: one row per RecordFunction range (forward op, backward node, user scope).
* **memory**: one row per tensor-storage allocation (``bytes > 0``) or free (``bytes < 0``),
  and one of 0 bytes where the kind of a live allocation became known (``category``).
* **nodes**: one row per backward range whose autograd node the collector saw: which node
  (a profile-unique id) the range ran. An AccumulateGrad node is identified by the leaf it
  accumulates into, so a parameter keeps one node id in every step.
* **edges**: the backward graph: one row per (node, next node) edge whose two ends both ran.
* **gpu**: one row per device activity (a kernel, memcpy or memset) that is an event of its
  own, with what its launch said: grid, block, registers, shared memory, blocks and warps per
  SM, estimated occupancy, bytes and bandwidth. Such an event is placed at the start of its
  launch (zero CPU time) and is a leaf: it never parents another event, so the kernels of one
  CUDA-graph launch each keep their own device time.

Strings (op names, input shapes, stacks, device names) are stored once in ``strings`` and
referenced by index; ``-1`` means "none". Nothing here imports the engine: the scope values
mirror ``autograd.record_function.RecordScope`` (a test checks they agree).
"""
from __future__ import annotations

import enum
import re

import numpy as np

__all__ = ["Scope", "MemoryCategory", "GpuKind", "COLUMN_DEFAULTS", "EVENT_COLUMNS", "MEMORY_COLUMNS",
           "NODE_COLUMNS", "EDGE_COLUMNS", "GPU_COLUMNS", "empty_columns", "NO_DEVICE_TIME", "valid_text",
           "device_index"]


class Scope(enum.IntEnum):
    """Which kind of range an event is (same values as the engine's ``RecordScope``)."""

    FUNCTION = 0            # forward op
    BACKWARD_FUNCTION = 1   # autograd node run by the backward pass
    USER_SCOPE = 2          # record_function ranges, ProfilerStep#N, module/optimizer ranges


# Column name -> dtype. The order is the on-disk order. Times are integer nanoseconds of one
# monotonic clock (time.perf_counter_ns); device times are on the same axis (see collector).
EVENT_COLUMNS: dict[str, np.dtype] = {
    "name_id": np.dtype(np.int32),          # index into strings
    "start_ns": np.dtype(np.int64),
    "end_ns": np.dtype(np.int64),
    "thread_id": np.dtype(np.int32),        # logical thread id (from 1) of the thread that ran it
    "scope": np.dtype(np.int8),             # Scope
    "sequence_nr": np.dtype(np.int64),      # -1: none
    "fwd_thread_id": np.dtype(np.int32),    # backward events: thread that created the node; else 0
    "device_id": np.dtype(np.int32),        # index into strings ("cpu", "cuda:0")
    "stream": np.dtype(np.int64),           # raw stream handle, 0 on the CPU / default stream
    "device_start_ns": np.dtype(np.int64),  # -1: no device time
    "device_end_ns": np.dtype(np.int64),    # -1: no device time
    "shapes_id": np.dtype(np.int32),        # index into strings of a JSON list of shapes, -1
    "dtypes_id": np.dtype(np.int32),        # index into strings of a JSON list of dtypes, -1
    "stack_id": np.dtype(np.int32),         # index into strings of "\n"-joined frames, -1
}

MEMORY_COLUMNS: dict[str, np.dtype] = {
    "time_ns": np.dtype(np.int64),
    "bytes": np.dtype(np.int64),            # +size for an allocation, -size for a free
    "total_allocated": np.dtype(np.int64),  # the engine's running total on that device after it
    "device_id": np.dtype(np.int32),        # index into strings
    "addr": np.dtype(np.int64),
    "thread_id": np.dtype(np.int32),
    # Schema version 3. On an allocation or free: 0. On a record of 0 bytes: the kind
    # (MemoryCategory) that the allocation live at (device_id, addr) turned out to hold.
    "category": np.dtype(np.int8),
}
# Columns added after their table: the schema version that added each, and its value in
# rows of older files (and of tables built without it: a torch trace, a synthetic profile).
COLUMN_DEFAULTS: dict[tuple[str, str], tuple[int, int]] = {("memory", "category"): (3, 0)}


class MemoryCategory(enum.IntEnum):
    """What an allocation holds: ``torch.profiler._memory_profiler.Category``'s names and
    values, as the engine's ``memory.Category`` (a test checks they agree); NONE: unknown
    (a profile without kinds, or memory allocated before the profile started)."""

    NONE = 0
    INPUT = 1
    TEMPORARY = 2
    ACTIVATION = 3
    GRADIENT = 4
    AUTOGRAD_DETAIL = 5
    PARAMETER = 6
    OPTIMIZER_STATE = 7

# Schema version 2: the backward graph. Node ids are dense (0 .. n-1) within one profile.
NODE_COLUMNS: dict[str, np.dtype] = {
    "event": np.dtype(np.int64),            # row of the BACKWARD_FUNCTION event in events
    "node_id": np.dtype(np.int64),          # the node that range ran
}

EDGE_COLUMNS: dict[str, np.dtype] = {
    "node_id": np.dtype(np.int64),          # the node whose output gradient flows...
    "next_node_id": np.dtype(np.int64),     # ...into this node (its next_edges entry)
    "input_nr": np.dtype(np.int32),         # ...as this input of it (Edge.input_nr)
}

# Schema version 4: device activities (torch traces' kernel/gpu_memcpy/gpu_memset events).
# Integers -1 and floats NaN where the trace does not say.
GPU_COLUMNS: dict[str, np.dtype] = {
    "event": np.dtype(np.int64),            # row of the activity's event in events (ascending)
    "kind": np.dtype(np.int8),              # GpuKind
    "context": np.dtype(np.int32),          # CUDA context id
    "correlation": np.dtype(np.int64),      # the launching runtime call's correlation id
    "grid_x": np.dtype(np.int32), "grid_y": np.dtype(np.int32), "grid_z": np.dtype(np.int32),
    "block_x": np.dtype(np.int32), "block_y": np.dtype(np.int32), "block_z": np.dtype(np.int32),
    "registers_per_thread": np.dtype(np.int32),
    "shared_memory": np.dtype(np.int64),    # bytes per block (static + dynamic)
    "blocks_per_sm": np.dtype(np.float32),  # CUPTI's launch-time estimates (Kineto's args)
    "warps_per_sm": np.dtype(np.float32),
    "occupancy_pct": np.dtype(np.float32),  # "est. achieved occupancy %"
    "bytes": np.dtype(np.int64),            # memcpy/memset size
    "bandwidth_gbps": np.dtype(np.float32),  # "memory bandwidth (GB/s)"
}


class GpuKind(enum.IntEnum):
    """What a device activity is (a row of the gpu table)."""

    KERNEL = 0
    MEMCPY = 1
    MEMSET = 2


NO_DEVICE_TIME = -1


def empty_columns(schema: dict[str, np.dtype], rows: int = 0) -> dict[str, np.ndarray]:
    """A table of ``rows`` rows of "not recorded" (-1, NaN; 0 when ``rows`` is 0)."""
    return {name: np.full(rows, np.nan if dt.kind == "f" else -1, dtype=dt) if rows
            else np.zeros(0, dtype=dt) for name, dt in schema.items()}


_SURROGATES = re.compile("[\ud800-\udfff]")


def valid_text(s: str) -> str:
    """``s`` with lone surrogates replaced by U+FFFD.

    A lone surrogate is what Python makes of bytes that are not UTF-8 (a file name read with
    ``surrogateescape``); UTF-8 cannot hold one, so a profile keeping it could not be saved,
    exported or printed. Every string of a profile goes through here: the same text in the
    file, the exports and the terminal.
    """
    if s.isascii():
        return s
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return _SURROGATES.sub("\ufffd", s)


def device_index(name: str) -> int:
    """The index of a device string of the string table: ``"cuda:1"`` -> 1; 0 for ``"cuda"``,
    ``"cpu"`` or a name whose index does not parse (a profile from elsewhere)."""
    if ":" in name:
        try:
            return int(name.rsplit(":", 1)[1])
        except ValueError:
            return 0
    return 0
