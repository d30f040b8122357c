"""``torch.accelerator``: the device-neutral questions a PyTorch program asks ("is there an
accelerator, which, how many"). Here the only accelerator is CUDA through CuPy."""
from __future__ import annotations

from . import backend, cuda

__all__ = ["is_available", "current_accelerator", "device_count", "current_device_index",
           "synchronize"]

_NONE = "Cannot access accelerator device when none is available."


def is_available() -> bool:
    """True when a CUDA GPU is usable (CuPy imports and a device answers)."""
    return backend.cuda_is_available()


def current_accelerator(check_available: bool = False):
    """The accelerator's device (``device("cuda")``), or None where there is none, as
    PyTorch's on a CPU-only build. ``check_available`` is accepted: there is no accelerator
    that is present but unusable here, so both answers are the same."""
    return backend.device("cuda") if backend.cuda_is_available() else None


def device_count() -> int:
    """The number of CUDA GPUs (0 without one)."""
    return backend.device_count()


def current_device_index() -> int:
    """The current CUDA device's index; a RuntimeError without one, as PyTorch's."""
    if not backend.cuda_is_available():
        raise RuntimeError(_NONE)
    return backend.current_device_index()


def synchronize(device=None) -> None:
    """Wait for the GPU's queued work; a RuntimeError without one, as PyTorch's."""
    if not backend.cuda_is_available():
        raise RuntimeError(_NONE)
    cuda.synchronize(device)
