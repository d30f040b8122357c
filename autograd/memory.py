"""Tensor storage tracking for memory profiling, on only while a memory callback exists.

CPU: each tensor whose array owns its memory reports an allocation when it is made and a free
when the array is garbage collected. GPU: CuPy's memory-pool hook reports mallocs and frees.
"""
from __future__ import annotations

import threading
import weakref

from . import backend
from . import record_function as _rf

_lock = threading.Lock()
_live: dict[int, int] = {}           # id(array) -> nbytes, CPU arrays being tracked
_total = {"cpu": 0}                 # bytes allocated now, per device
_remove_cuda_hook = None


def start_tracking() -> None:
    global _remove_cuda_hook
    if _remove_cuda_hook is None and backend.cuda_is_available():
        _remove_cuda_hook = backend.install_cuda_memory_hook(_cuda_malloc, _cuda_free)


def stop_tracking() -> None:
    global _remove_cuda_hook
    if _remove_cuda_hook is not None:
        _remove_cuda_hook()
        _remove_cuda_hook = None


def track(array, dev) -> None:
    """Report a CPU array that owns its memory, and its free when it is collected."""
    if dev.type != "cpu" or getattr(array, "base", None) is not None:
        return
    key = id(array)
    nbytes = int(array.nbytes)
    with _lock:
        if key in _live:
            return
        _live[key] = nbytes
        _total["cpu"] += nbytes
        total = _total["cpu"]
    addr = array.__array_interface__["data"][0]
    weakref.finalize(array, _cpu_free, key, addr, nbytes)
    _rf.report_memory("cpu", 0, addr, nbytes, total)


def _cpu_free(key, addr, nbytes):
    with _lock:
        if _live.pop(key, None) is None:
            return
        _total["cpu"] -= nbytes
        total = _total["cpu"]
    _rf.report_memory("cpu", 0, addr, -nbytes, total)


def _cuda_malloc(device_index, ptr, nbytes):
    name = f"cuda:{device_index}"
    with _lock:
        _total[name] = _total.get(name, 0) + nbytes
        total = _total[name]
    _rf.report_memory("cuda", device_index, ptr, nbytes, total)


def _cuda_free(device_index, ptr, nbytes):
    name = f"cuda:{device_index}"
    with _lock:
        _total[name] = _total.get(name, 0) - nbytes
        total = _total[name]
    _rf.report_memory("cuda", device_index, ptr, -nbytes, total)


def allocated_bytes(device: str = "cpu") -> int:
    """Bytes of tracked tensor storage alive now on ``device`` (0 when not tracking)."""
    return _total.get(device, 0)
