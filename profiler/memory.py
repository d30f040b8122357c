"""Memory by kind: which allocation each memory record belongs to, what it held, and the
bytes of each kind over time, at the peak, per op and per module.

Modelled on ``torch.profiler._memory_profiler``: every allocation gets one category for its
whole life, even one known only later (an op's output becomes an activation when a node saves
it, a gradient becomes ``.grad``). The engine reports such a late kind as a record of 0 bytes
at the allocation's address (``category``); here it is applied to the allocation live at that
address. When several kinds are reported for one allocation, the strongest wins, as torch's
passes do not overwrite a parameter, optimizer state or gradient with "activation". An
allocation reported with no kind is a temporary; memory allocated before the profile started
(its free is recorded, its allocation is not) is of no known kind (``NONE``, "unknown").

Pure functions over a profile's memory columns: no engine import.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .aggregate import STEP_PREFIX
from .metrics import group_reduce
from .modules import module_of_events
from .records import MemoryCategory

if TYPE_CHECKING:  # pragma: no cover
    from .data import ProfileData

__all__ = ["KIND_ORDER", "kind_key", "kind_label", "allocation_of_records", "record_kinds",
           "LiveBytes", "live_by_kind", "KindRow", "kind_summary", "memory_table"]

# Drawing and column order: persistent state first, then what a step makes and frees.
KIND_ORDER = (MemoryCategory.PARAMETER, MemoryCategory.OPTIMIZER_STATE, MemoryCategory.GRADIENT,
              MemoryCategory.ACTIVATION, MemoryCategory.INPUT, MemoryCategory.AUTOGRAD_DETAIL,
              MemoryCategory.TEMPORARY, MemoryCategory.NONE)
# Which kind wins when one allocation is reported as several (higher wins).
_RANK = np.zeros(len(MemoryCategory), dtype=np.int8)
for _rank, _kind in enumerate(reversed(KIND_ORDER)):
    _RANK[_kind] = _rank
_KIND_OF_RANK = np.array(list(reversed(KIND_ORDER)), dtype=np.int8)


def kind_key(kind: int) -> str:
    """A kind's field name in rows and JSON: ``"optimizer_state"``; ``"unknown"`` for NONE."""
    kind = MemoryCategory(kind)
    return "unknown" if kind is MemoryCategory.NONE else kind.name.lower()


def kind_label(kind: int) -> str:
    """A kind's name in tables: ``"optimizer state"``; torch's "unknown" for NONE."""
    kind = MemoryCategory(kind)
    return "unknown" if kind is MemoryCategory.NONE else kind.name.lower().replace("_", " ")


def allocation_of_records(mem: dict) -> np.ndarray:
    """For each memory record, the row of the allocation it belongs to (-1: none seen).

    An allocation is itself; a free or a kind record belongs to the allocation made before it
    at the same device and address and not yet freed.

    Lean on memory: it runs on the dashboard's server (5.6M records of a 10M-event profile
    took ~670 MB of temporaries when every step was a fresh int64 array); here indices are
    int32 where they fit and each temporary goes as soon as it is used.
    """
    n = len(mem["bytes"])
    if not n:
        return np.zeros(0, dtype=np.int64)
    index = np.int32 if n < 2**31 else np.int64
    # Records are in time order; lexsort is stable, so that order holds within one address.
    order = np.lexsort((mem["addr"], mem["device_id"])).astype(index)
    addr = mem["addr"][order]
    new_address = np.empty(n, dtype=bool)
    new_address[0] = True
    np.not_equal(addr[1:], addr[:-1], out=new_address[1:])
    del addr
    dev = mem["device_id"][order]
    new_address[1:] |= dev[1:] != dev[:-1]
    del dev
    bs = mem["bytes"][order]
    allocation, is_free = bs > 0, bs < 0
    del bs
    starts = new_address | allocation          # a segment: one allocation and what follows it
    del new_address
    seg = np.cumsum(starts, dtype=index)
    seg -= 1
    first = np.flatnonzero(starts)
    del starts
    owner_sorted = np.where(allocation[first], order[first], -1).astype(index)[seg]
    del allocation
    # Past the allocation's free, a record at that address is of something else.
    frees_before = np.cumsum(is_free, dtype=index)
    frees_before -= is_free
    del is_free
    owner_sorted[frees_before > frees_before[first][seg]] = -1
    del frees_before, seg, first
    owner = np.empty(n, dtype=np.int64)
    owner[order] = owner_sorted
    return owner


def record_kinds(mem: dict, categorized: bool, owner: np.ndarray | None = None) -> np.ndarray:
    """The kind (MemoryCategory) of the allocation each record belongs to.

    Args:
        mem: a profile's memory columns.
        categorized: the profile recorded kinds (metadata ``memory_categories``); without
            them every record is NONE ("unknown").
        owner: :func:`allocation_of_records`, if already computed.

    Returns:
        int8 array, one kind per record; NONE for a record of no seen allocation.
    """
    n = len(mem["bytes"])
    kinds = np.zeros(n, dtype=np.int8)
    if not categorized or not n:
        return kinds
    owner = allocation_of_records(mem) if owner is None else owner
    rank = np.full(n, _RANK[MemoryCategory.TEMPORARY], dtype=np.int8)
    tagged = np.flatnonzero((mem["category"] != 0) & (owner >= 0))
    np.maximum.at(rank, owner[tagged], _RANK[mem["category"][tagged]])
    seen = owner >= 0
    kinds[seen] = _KIND_OF_RANK[rank[owner[seen]]]
    return kinds


@dataclass(frozen=True)
class LiveBytes:
    """Bytes alive on one device after each of its memory records, split by kind.

    Attributes:
        rows: the device's memory records (indices into the memory columns), in time order.
        total: the engine's running total after each (``total_allocated``).
        by_kind: kind -> bytes of that kind alive after each; the kinds add up to ``total``
            (NONE includes what was allocated before the profile started).
    """

    rows: np.ndarray
    total: np.ndarray
    by_kind: dict


def live_by_kind(mem: dict, kinds: np.ndarray, device_id: int) -> LiveBytes:
    """Live bytes per kind over time on one device (see :class:`LiveBytes`)."""
    rows = np.flatnonzero(mem["device_id"] == device_id)
    b = mem["bytes"][rows].astype(np.int64)
    total = mem["total_allocated"][rows].astype(np.int64)
    k = kinds[rows]
    by_kind = {}
    for kind in KIND_ORDER:
        pick = k == kind
        if pick.any():
            by_kind[kind] = np.cumsum(np.where(pick, b, 0))
    if len(rows):
        # What was alive when the profile started: no record says what it held.
        before = int(total[0] - b[0])
        if before:
            by_kind[MemoryCategory.NONE] = by_kind.get(MemoryCategory.NONE, np.zeros(len(rows), np.int64)) + before
    ordered = {kind: by_kind[kind] for kind in KIND_ORDER if kind in by_kind}
    return LiveBytes(rows=rows, total=total, by_kind=ordered)


@dataclass(frozen=True)
class KindRow:
    """One kind on one device: bytes allocated and freed during the profile, alive at the
    device's peak, and its own largest live amount."""

    kind: int
    label: str
    allocated: int
    freed: int
    at_peak: int
    max_live: int


def kind_summary(mem: dict, kinds: np.ndarray, device_id: int,
                 live: LiveBytes | None = None) -> tuple[list[KindRow], int]:
    """Per kind on one device: allocated, freed, at the peak, largest live.

    Args:
        live: :func:`live_by_kind` of that device, when the caller has it (a series per kind
            and record: hundreds of MB at millions of records, not to be built twice).
    Returns:
        (rows in KIND_ORDER, only kinds that occur; the record index of the peak, -1 if none).
    """
    live = live_by_kind(mem, kinds, device_id) if live is None else live
    if not len(live.rows):
        return [], -1
    peak = int(np.argmax(live.total))
    b = mem["bytes"][live.rows]
    k = kinds[live.rows]
    out = []
    for kind, series in live.by_kind.items():
        pick = k == kind
        out.append(KindRow(kind=int(kind), label=kind_label(kind),
                           allocated=int(b[pick & (b > 0)].sum()), freed=int(-b[pick & (b < 0)].sum()),
                           at_peak=int(series[peak]), max_live=int(series.max())))
    return out, int(live.rows[peak])


def memory_table(data: "ProfileData", by: str = "op") -> list[dict]:
    """Bytes allocated inside each op (or module class), split by kind, and what became of them.

    An allocation counts for the innermost event around it (children not included: an op's
    own allocations); ``by="module"`` counts it for that event's ``nn.Module`` class
    (:func:`profiler.modules.module_of_events`). ``ProfilerStep#N`` rows merge into
    ``ProfilerStep#*`` as in the operator tables.

    Returns:
        Rows sorted by bytes allocated: ``name``, ``allocated``, ``freed`` (of those bytes,
        freed before the profile ended, wherever the free happened), ``net`` (still held),
        ``allocations`` (count), and one field per kind that occurs (:func:`kind_key`) with
        the bytes of that kind allocated (none in a profile without kinds).
    """
    mem = data.memory_columns
    b = mem["bytes"]
    ev = data.analysis.memory_event        # int32: no 8-byte copy of millions of records
    allocs = np.flatnonzero((ev >= 0) & (b > 0))
    if not len(allocs):
        return []
    owner, kinds = data.memory_allocation, data.memory_kinds
    freed_of = np.zeros(len(b), dtype=np.int64)
    frees = np.flatnonzero((b < 0) & (owner >= 0))
    np.add.at(freed_of, owner[frees], -b[frees])
    del frees
    if by == "module":
        group_of_event, labels = module_of_events(data)
        group = np.asarray(group_of_event)[ev[allocs]]
    else:
        # Grouped by string id (a small range: no sort of millions of allocations).
        group = data.event_columns["name_id"][ev[allocs]].astype(np.intp)
        labels = [STEP_PREFIX + "*" if n.startswith(STEP_PREFIX) else n for n in data.strings]
    group = np.asarray(group).reshape(-1)
    n_groups = len(labels)
    alloc_bytes = b[allocs]
    # Per group, in one pass each (sums of bytes below 2**53: exact in the float weights).
    count = np.bincount(group, minlength=n_groups)
    allocated = group_reduce("sum", group, n_groups, alloc_bytes)
    freed = group_reduce("sum", group, n_groups, freed_of[allocs])
    categorized = bool(data.metadata.get("memory_categories"))
    alloc_kinds = kinds[allocs]
    present = [k for k in KIND_ORDER if categorized and np.any(alloc_kinds == k)]
    by_kind = {k: group_reduce("sum", group, n_groups, np.where(alloc_kinds == k, alloc_bytes, 0)) for k in present}
    rows: dict[str, dict] = {}
    for g in np.flatnonzero(count).tolist():
        row = rows.setdefault(labels[g], dict({"name": labels[g], "allocated": 0, "freed": 0, "net": 0,
                                               "allocations": 0}, **{kind_key(k): 0 for k in present}))
        row["allocated"] += int(allocated[g])
        row["freed"] += int(freed[g])
        row["net"] = row["allocated"] - row["freed"]
        row["allocations"] += int(count[g])
        for k in present:
            row[kind_key(k)] += int(by_kind[k][g])
    return sorted(rows.values(), key=lambda r: -r["allocated"])
