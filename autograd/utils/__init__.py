"""``autograd.utils``: data loading (``utils.data``), as ``torch.utils``."""
from . import data  # noqa: F401

__all__ = ["data"]
