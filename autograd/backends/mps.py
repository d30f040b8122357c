"""``torch.backends.mps``: Apple's Metal backend, which gradtrace does not have."""
from __future__ import annotations

__all__ = ["is_available", "is_built"]


def is_available() -> bool:
    """False: there is no MPS device here."""
    return False


def is_built() -> bool:
    """False: gradtrace has no MPS backend."""
    return False
