"""Saved-tensor hooks (``autograd.graph``): control how tensors saved for backward are kept.

``saved_tensors_hooks(pack, unpack)`` applies to every tensor saved inside it (nested contexts:
the innermost wins); ``save_on_cpu()`` keeps saved GPU tensors in host memory. Per-tensor hooks
go on a node's saved values: ``y.grad_fn._raw_saved_a.register_hooks(pack, unpack)``.
"""
from __future__ import annotations

from . import backend
from ._tensor import Tensor
from .grad_mode import STATE
from .node import Node

__all__ = ["saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks", "Node"]


class saved_tensors_hooks:
    """``pack_hook(tensor) -> anything`` runs when a tensor is saved for backward, and
    ``unpack_hook(packed) -> tensor`` when backward needs it back."""

    def __init__(self, pack_hook, unpack_hook):
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError("saved_tensors_hooks expects two callables: pack_hook and unpack_hook")
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        if getattr(STATE, "saved_hooks_disabled", None):
            raise RuntimeError(STATE.saved_hooks_disabled)
        STATE.saved_hooks.append((self.pack_hook, self.unpack_hook))
        return self

    def __exit__(self, *exc):
        STATE.saved_hooks.pop()
        return False


class disable_saved_tensors_hooks:
    """Inside it, entering ``saved_tensors_hooks`` raises ``error_message``."""

    def __init__(self, error_message: str):
        self.message = error_message

    def __enter__(self):
        self._prev = getattr(STATE, "saved_hooks_disabled", None)
        STATE.saved_hooks_disabled = self.message

    def __exit__(self, *exc):
        STATE.saved_hooks_disabled = self._prev
        return False


class save_on_cpu(saved_tensors_hooks):
    """Move saved tensors to host memory in forward and back to their device in backward.

    On the CPU this is a pass-through that still runs the hooks. ``pin_memory`` allocates the
    host copies in page-locked memory (faster copies back to the GPU) when a GPU is used.
    """

    def __init__(self, pin_memory: bool = False):
        def pack(t):
            if t.device.type == "cpu":
                return (t.device, t)
            if pin_memory:
                host = Tensor._make(backend.pinned_copy(t._data), False, None, 0, [0], backend.CPU)
            else:
                host = t.detach().to("cpu")
            return (t.device, host)

        def unpack(packed):
            dev, t = packed
            return t if t.device is dev else t.to(dev)

        super().__init__(pack, unpack)
