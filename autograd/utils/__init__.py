"""``autograd.utils``, as ``torch.utils``: data loading (``utils.data``) and activation
checkpointing (``utils.checkpoint``; its functions are also ``autograd.checkpoint`` and
``autograd.checkpoint_sequential``)."""
from . import checkpoint, data  # noqa: F401

__all__ = ["checkpoint", "data"]
