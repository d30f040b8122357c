"""``cuda``: the ``torch.cuda`` functions a training script calls, on :mod:`backend`.

Without a usable GPU it behaves as PyTorch without CUDA: ``is_available()`` is False,
``device_count()`` is 0, the memory counters read 0, ``manual_seed`` is silently ignored, and
everything that needs a device (``synchronize``, ``Stream``, ``Event``, ``current_device``...)
raises a :class:`~gradtrace.autograd.DeviceError` saying so.

Everything GPU-specific goes through :mod:`backend`; this module imports no GPU library and
touches no CuPy object itself.
"""
from __future__ import annotations

import contextlib

from . import backend
from .amp import cuda_amp as amp  # noqa: F401 - torch.cuda.amp (autocast, GradScaler)
from ._tensor import default_generator
from .generator import Generator
from .tensortype import CUDA_TYPES as _CUDA_TYPES

__all__ = ["is_available", "device_count", "current_device", "get_device_name", "synchronize",
           "manual_seed", "manual_seed_all", "Stream", "Event", "current_stream", "stream",
           "memory_allocated", "max_memory_allocated", "reset_peak_memory_stats",
           "memory_reserved", "empty_cache"]


def is_available() -> bool:
    """True when a CUDA GPU is usable (CuPy imports and a device answers)."""
    return backend.cuda_is_available()


def device_count() -> int:
    """The number of usable CUDA GPUs (0 without one)."""
    return backend.device_count()


def _device(device=None) -> backend.Device:
    """The CUDA device ``device`` names (an int, ``"cuda:N"``, a Device; None: the current),
    or a DeviceError when there is no GPU."""
    if not is_available():
        raise backend.DeviceError("CUDA is not available: no usable CUDA GPU with CuPy on this "
                                  "machine (gradtrace.autograd.cuda.is_available() is False)")
    if device is None:
        device = current_device()
    if isinstance(device, int):
        device = f"cuda:{device}"
    dev = backend.device(device)
    if dev.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {dev}")
    return dev


def current_device() -> int:
    """The index of the current CUDA device."""
    _device("cuda:0")
    return backend.current_device_index()


def get_device_name(device=None) -> str:
    """The GPU's name, e.g. ``"NVIDIA H200"``."""
    return backend.device_properties(_device(device))["name"]


def synchronize(device=None) -> None:
    """Wait for all the work queued on ``device`` (default: the current one) to finish."""
    backend.synchronize(_device(device))


def manual_seed(seed: int) -> None:
    """Seed the current GPU's default generator; silently ignored without a GPU (as PyTorch)."""
    if is_available():
        _reseed(_device(), seed)


def manual_seed_all(seed: int) -> None:
    """Seed every GPU's default generator; silently ignored without a GPU (as PyTorch)."""
    for i in range(device_count()):
        _reseed(_device(i), seed)


def _reseed(dev: backend.Device, seed: int) -> None:
    fresh = Generator(dev).manual_seed(seed)
    # In place: the default generator object stays the one the factories hold.
    backend.set_rng_state(default_generator(dev), fresh.get_state())


class Stream(backend.Stream):
    """A CUDA stream; ``with stream:`` (or ``with cuda.stream(s):``) makes it current.

    Args:
        device: the GPU (default: the current one).
        priority: accepted for PyTorch compatibility (streams are made with default priority).
    """

    __slots__ = ()

    def __init__(self, device=None, priority: int = 0):
        super().__init__(_device(device))

    def wait_stream(self, other: backend.Stream) -> None:
        """Make later work on this stream wait for the work queued on ``other`` so far."""
        self.wait_event(other.record_event())

    def query(self) -> bool:
        """True when all the work queued on the stream has finished."""
        return bool(self.native.done)


class Event(backend.Event):
    """A CUDA event on the current device (always able to time).

    Args:
        enable_timing: accepted for PyTorch compatibility; timing is always on.
        blocking: accepted for PyTorch compatibility.
        interprocess: accepted for PyTorch compatibility.
    """

    __slots__ = ()

    def __init__(self, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False):
        super().__init__(_device())

    def record(self, stream=None) -> "Event":
        return super().record(stream if stream is not None else current_stream(self.device))

    def wait(self, stream=None) -> None:
        """Make later work on ``stream`` (default: the current one) wait for this event."""
        (stream if stream is not None else current_stream(self.device)).wait_event(self)

    def elapsed_time(self, end_event: "Event") -> float:
        """Milliseconds between this event and ``end_event`` (both recorded and finished)."""
        return backend.elapsed_ns(self, end_event) / 1e6


def current_stream(device=None) -> backend.Stream:
    """The stream work on ``device`` is queued on in this thread."""
    return backend.current_stream(_device(device))


def stream(s):
    """A context manager making ``s`` the current stream (nothing when ``s`` is None)."""
    return contextlib.nullcontext() if s is None else s


# --------------------------------------------------------------------------- memory

_peak: dict[int, int] = {}


def memory_allocated(device=None) -> int:
    """Bytes held by arrays on ``device`` now (CuPy's pool: bytes in use); 0 without a GPU."""
    if not is_available():
        return 0
    dev = _device(device)
    used = backend.memory_pool_bytes(dev)[0]
    _peak[dev.index] = max(_peak.get(dev.index, 0), used)
    return used


def max_memory_allocated(device=None) -> int:
    """The largest :func:`memory_allocated` seen since the start or the last
    :func:`reset_peak_memory_stats`; 0 without a GPU.

    CuPy's pool keeps no peak counter, so the peak is of the values sampled when either
    function is called (PyTorch's allocator counts every allocation).
    """
    if not is_available():
        return 0
    dev = _device(device)
    memory_allocated(dev)
    return _peak[dev.index]


def reset_peak_memory_stats(device=None) -> None:
    """Restart :func:`max_memory_allocated` from the current allocation."""
    if is_available():
        dev = _device(device)
        _peak.pop(dev.index, None)
        memory_allocated(dev)


def memory_reserved(device=None) -> int:
    """Bytes the pool holds from the driver (in use or cached); 0 without a GPU."""
    if not is_available():
        return 0
    return backend.memory_pool_bytes(_device(device))[1]


def empty_cache() -> None:
    """Return the pool's unused cached blocks to the driver; nothing without a GPU."""
    if is_available():
        for i in range(device_count()):
            backend.free_cached_blocks(_device(i))


# torch.cuda.FloatTensor, torch.cuda.LongTensor...: the legacy tensor types on the GPU.
globals().update(_CUDA_TYPES)
