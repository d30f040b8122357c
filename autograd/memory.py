"""Tensor storage tracking for memory profiling, on only while a memory callback exists.

CPU: each tensor whose array owns its memory reports an allocation when it is made and a free
when the array is garbage collected. GPU: CuPy's memory-pool hook reports mallocs and frees.

Each allocation also gets a :class:`Category` (PyTorch's memory-profiler categories), from
what the engine knows: a Parameter's array, a ``.grad`` written by AccumulateGrad, an
optimizer's state, a tensor saved for backward. The kind is often known only after the
allocation (an op's output becomes saved when the node is made, a gradient becomes
``.grad``), so :func:`classify` reports it as a record of its own, of 0 bytes, at the same
address; the analysis gives the allocation live there that kind for its whole life, as
torch's memory profiler applies a later category to an allocation's id.
"""
from __future__ import annotations

import enum
import threading
import weakref

from . import backend
from . import record_function as _rf

_lock = threading.Lock()
_live: dict[int, int] = {}           # id(array) -> nbytes, CPU arrays being tracked
_total = {"cpu": 0}                 # bytes allocated now, per device
# (device type, device index, address) -> [nbytes, Category]: what is allocated now, for the
# profiler to record what was alive when it started (see :func:`live_allocations`).
_allocations: dict[tuple, list] = {}
_remove_cuda_hook = None


class Category(enum.IntEnum):
    """What an allocation holds: ``torch.profiler._memory_profiler.Category``'s names and
    values; 0 is "not classified" (an allocation reported before its kind is known)."""

    NONE = 0
    INPUT = 1
    TEMPORARY = 2
    ACTIVATION = 3
    GRADIENT = 4
    AUTOGRAD_DETAIL = 5
    PARAMETER = 6
    OPTIMIZER_STATE = 7


# When one allocation is reported as several kinds, the strongest is kept (higher wins): a
# parameter or a gradient saved for backward stays a parameter or a gradient. The profiler's
# analysis (profiler/memory.py) applies the same order to the records.
_STRENGTH = {Category.NONE: 0, Category.TEMPORARY: 1, Category.AUTOGRAD_DETAIL: 2, Category.INPUT: 3,
             Category.ACTIVATION: 4, Category.GRADIENT: 5, Category.OPTIMIZER_STATE: 6,
             Category.PARAMETER: 7}


def start_tracking() -> None:
    global _remove_cuda_hook
    if _remove_cuda_hook is None and backend.cuda_is_available():
        _remove_cuda_hook = backend.install_cuda_memory_hook(_cuda_malloc, _cuda_free)


def stop_tracking() -> None:
    global _remove_cuda_hook
    if _remove_cuda_hook is not None:
        _remove_cuda_hook()
        _remove_cuda_hook = None
        # Without the hook the pool's frees go unseen: GPU storage known now would stay "alive"
        # forever and show up in the next profile's starting allocations. Forget it; the next
        # tracking knows the GPU from its own allocations (CPU arrays are followed by weakref).
        with _lock:
            for key in [k for k in _allocations if k[0] == "cuda"]:
                del _allocations[key]
            for name in [d for d in _total if d != "cpu"]:
                del _total[name]


def _follow_callbacks(active: bool) -> None:
    if active:
        start_tracking()
    else:
        stop_tracking()


# Tracking starts with the first memory callback (record_function.add_memory_callback) and
# stops with the last one's removal.
_rf.watch_memory_callbacks(_follow_callbacks)


def track(array, dev) -> None:
    """Report a CPU array that owns its memory, and its free when it is collected."""
    if dev.type != "cpu" or getattr(array, "base", None) is not None:
        return
    key = id(array)
    nbytes = int(array.nbytes)
    addr = array.__array_interface__["data"][0]
    with _lock:
        if key in _live:
            return
        _live[key] = nbytes
        _allocations[("cpu", 0, addr)] = [nbytes, Category.NONE]
        _total["cpu"] += nbytes
        total = _total["cpu"]
    weakref.finalize(array, _cpu_free, key, addr, nbytes)
    _rf.report_memory("cpu", 0, addr, nbytes, total)


def classify(array, category: Category, first_seen: bool = False) -> None:
    """Report that ``array``'s storage (its owner's, for a view) is of ``category``.

    Args:
        array: a NumPy or CuPy array (the caller checked that memory is being tracked).
        category: its kind.
        first_seen: also start tracking a CPU array allocated before tracking began (a
            model's parameters, made before the profiler started), from now on.
    """
    owner = array
    while getattr(owner, "base", None) is not None:
        owner = owner.base
    if isinstance(owner, memoryview) or not hasattr(owner, "nbytes"):
        return
    dev = backend.device_of_array(owner)
    if dev.type == "cuda":                       # the memory pool reports its pointer
        key = ("cuda", dev.index, owner.data.ptr)
    else:
        if id(owner) not in _live:
            if not first_seen:
                return
            track(owner, backend.CPU)
        key = ("cpu", 0, owner.__array_interface__["data"][0])
    with _lock:
        entry = _allocations.get(key)
        if entry is not None and _STRENGTH[category] > _STRENGTH[entry[1]]:
            entry[1] = category
        total = _total.get("cpu" if key[0] == "cpu" else f"cuda:{key[1]}", 0)
    _rf.report_memory(key[0], key[1], key[2], 0, total, int(category))


def live_allocations() -> list[tuple]:
    """What tracked storage is alive now: ``(device_type, device_index, addr, nbytes,
    category)`` each. The profiler records these when it starts (or starts over after its
    warm-up), so that memory allocated before, such as a model's parameters, is in the
    profile with its kind. GPU storage is known only from the allocations made while tracking."""
    with _lock:
        return [(t, i, a, n, int(c)) for (t, i, a), (n, c) in _allocations.items()]


def _cpu_free(key, addr, nbytes):
    with _lock:
        if _live.pop(key, None) is None:
            return
        _allocations.pop(("cpu", 0, addr), None)
        _total["cpu"] -= nbytes
        total = _total["cpu"]
    _rf.report_memory("cpu", 0, addr, -nbytes, total)


def _cuda_malloc(device_index, ptr, nbytes):
    name = f"cuda:{device_index}"
    with _lock:
        _allocations[("cuda", device_index, ptr)] = [nbytes, Category.NONE]
        _total[name] = _total.get(name, 0) + nbytes
        total = _total[name]
    _rf.report_memory("cuda", device_index, ptr, nbytes, total)


def _cuda_free(device_index, ptr, nbytes):
    name = f"cuda:{device_index}"
    with _lock:
        _allocations.pop(("cuda", device_index, ptr), None)
        _total[name] = _total.get(name, 0) - nbytes
        total = _total[name]
    _rf.report_memory("cuda", device_index, ptr, -nbytes, total)


def allocated_bytes(device: str = "cpu") -> int:
    """Bytes of tracked tensor storage alive now on ``device`` (0 when not tracking)."""
    return _total.get(device, 0)
