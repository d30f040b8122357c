"""The C library's allocator, tuned for NumPy temporaries of a training step.

NumPy allocates every result with ``malloc``. glibc serves a block of 128 KiB or more with a
fresh ``mmap`` and gives it back with ``munmap`` when freed, or trims the heap top back to the
system beyond 128 KiB free, so the next temporary of the same size page-faults its way in
again: a chain of four elementwise ops on (16, 64, 512) float32 costs 4.4 ms this way against
0.22 ms with the memory kept, and a transformer step spends a sixth of its time there.
PyTorch's and CuPy's caching allocators keep freed blocks for reuse for the same reason; here
glibc is asked to keep them (``mallopt``), once, when the engine is imported.

``GRADTRACE_HOST_MALLOC=system`` leaves the C library's settings as they are.
"""
from __future__ import annotations

import ctypes
import os
import platform

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "tune", "tuned", "tune_unless_disabled"]

#: Blocks below this come from the heap, not from their own mmap (32 MiB: the most glibc's
#: own dynamic threshold ever reaches on a 64-bit system).
MMAP_THRESHOLD = 32 << 20
#: Free memory at the heap top kept for reuse rather than returned to the system.
TRIM_THRESHOLD = 256 << 20

_M_TRIM_THRESHOLD = -1   # mallopt parameter numbers, from glibc's malloc.h
_M_MMAP_THRESHOLD = -3

_tuned = False


def tune(mmap_threshold: int = MMAP_THRESHOLD, trim_threshold: int = TRIM_THRESHOLD) -> bool:
    """Ask glibc to serve blocks below ``mmap_threshold`` from its heap and to keep up to
    ``trim_threshold`` bytes of freed heap for reuse.

    Args:
        mmap_threshold: size in bytes from which a block gets its own mmap.
        trim_threshold: free bytes at the heap top beyond which glibc returns memory.

    Returns:
        True when both settings were accepted; False on a C library other than glibc
        (musl, macOS, Windows), where nothing is changed.
    """
    global _tuned
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    ok = (libc.mallopt(_M_MMAP_THRESHOLD, int(mmap_threshold)) == 1
          and libc.mallopt(_M_TRIM_THRESHOLD, int(trim_threshold)) == 1)
    _tuned = _tuned or ok
    return ok


def tuned() -> bool:
    """Whether :func:`tune` has changed the C library's settings in this process."""
    return _tuned


def tune_unless_disabled() -> bool:
    """:func:`tune`, unless ``GRADTRACE_HOST_MALLOC=system``."""
    if os.environ.get("GRADTRACE_HOST_MALLOC", "").lower() == "system":
        return False
    return tune()
