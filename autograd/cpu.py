"""``torch.cpu``: the deprecated ``torch.cpu.amp`` spellings (``autocast``, ``GradScaler``)."""
from __future__ import annotations

from .amp import cpu_amp as amp

__all__ = ["amp", "is_available"]


def is_available() -> bool:
    """``torch.cpu.is_available()``: always True."""
    return True
