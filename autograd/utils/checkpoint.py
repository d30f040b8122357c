"""Activation checkpointing: drop a block's activations in forward, recompute them in backward.

``checkpoint(fn, *args, use_reentrant=False)`` runs ``fn`` once without keeping what it saves
for backward (saved-tensor hooks store only a placeholder); when backward first needs one of
those tensors, ``fn`` runs again under hooks that collect what it saves, in the same order,
and the placeholders are filled from that. Random number generator states are restored for
the recomputation, so dropout masks match and gradients are identical to the plain run.

``use_reentrant=True`` is the older scheme: ``fn`` runs under ``no_grad`` in forward, and a
custom Function's backward recomputes it with grad enabled and calls ``backward`` inside
(a reentrant backward).
"""
from __future__ import annotations

from ..backend import CPU, get_rng_state, set_rng_state
from ..engine import backward as _backward
from ..function import Function
from ..grad_mode import enable_grad, no_grad
from ..graph import saved_tensors_hooks
from .._tensor import Tensor, _generators

__all__ = ["checkpoint", "checkpoint_sequential"]


def _rng_state(args=()):
    """Generator states of the CPU, of every device an argument lives on, and of any device
    whose generator is in use (made now if needed, so the state exists to restore)."""
    devices = {CPU} | {a.device for a in args if isinstance(a, Tensor)}
    devices |= set(_generators._by_device or {})
    return {dev: get_rng_state(_generators.get(dev)) for dev in devices}


def _set_rng_state(states) -> None:
    for dev, state in states.items():
        set_rng_state(_generators.get(dev), state)


class _Frame:
    """One checkpointed call: its inputs, its recomputed saved tensors, and their slots."""

    def __init__(self, fn, args, kwargs, rng):
        self.fn, self.args, self.kwargs, self.rng = fn, args, kwargs, rng
        self.count = 0          # tensors saved in forward (placeholders handed out)
        self.recomputed = None  # list filled by the recomputation

    def recompute(self) -> None:
        saved = []

        def pack(t):
            # Detached: a reference to the recomputed tensor would keep its node, whose saved
            # values point back at this list, a cycle that outlives the block's backward.
            saved.append(t.detach())
            return len(saved) - 1

        now = _rng_state()
        _set_rng_state(self.rng)
        try:
            args = [a.detach().requires_grad_(a.requires_grad) if isinstance(a, Tensor) else a
                    for a in self.args]
            with enable_grad(), saved_tensors_hooks(pack, lambda i: saved[i]):
                self.fn(*args, **self.kwargs)
        finally:
            _set_rng_state(now)
        if len(saved) != self.count:
            raise RuntimeError(
                f"checkpoint: the recomputation saved {len(saved)} tensors but the forward "
                f"saved {self.count}; the checkpointed function must do the same ops each call")
        self.recomputed = saved


def checkpoint(fn, *args, use_reentrant: bool = False, preserve_rng_state: bool = True, **kwargs):
    """Run ``fn(*args, **kwargs)`` without keeping its activations; see the module docstring."""
    if use_reentrant:
        if kwargs:
            raise ValueError("checkpoint(use_reentrant=True) does not support keyword arguments")
        return _ReentrantCheckpoint.apply(fn, preserve_rng_state, *args)
    frame = _Frame(fn, args, kwargs, _rng_state(args) if preserve_rng_state else {})

    def pack(t):
        index = frame.count
        frame.count += 1
        return index

    def unpack(index):
        if frame.recomputed is None:
            frame.recompute()
        return frame.recomputed[index]

    with saved_tensors_hooks(pack, unpack):
        return fn(*args, **kwargs)


def checkpoint_sequential(functions, segments: int, input, use_reentrant: bool = False):
    """Run ``functions`` (a list or Sequential) in ``segments`` checkpointed chunks."""
    functions = list(functions)
    size = max(1, (len(functions) + segments - 1) // segments)

    def run(chunk):
        def f(x):
            for fn in chunk:
                x = fn(x)
            return x
        return f

    x = input
    for start in range(0, len(functions), size):
        x = checkpoint(run(functions[start:start + size]), x, use_reentrant=use_reentrant)
    return x


class _ReentrantCheckpoint(Function):
    @staticmethod
    def forward(ctx, fn, preserve_rng_state, *args):
        ctx.fn = fn
        ctx.rng = _rng_state(args) if preserve_rng_state else {}
        ctx.inputs = args
        with no_grad():
            return fn(*args)

    @staticmethod
    def backward(ctx, *grads):
        now = _rng_state()
        _set_rng_state(ctx.rng)
        try:
            inputs = [a.detach().requires_grad_(a.requires_grad) if isinstance(a, Tensor) else a
                      for a in ctx.inputs]
            with enable_grad():
                out = ctx.fn(*inputs)
        finally:
            _set_rng_state(now)
        outs = out if isinstance(out, tuple) else (out,)
        pairs = [(o, g) for o, g in zip(outs, grads) if isinstance(o, Tensor) and o.requires_grad
                 and g is not None]
        if pairs:
            # A backward inside a backward: the reentrant case the engine supports.
            _backward([o for o, _ in pairs], [g for _, g in pairs])
        in_grads = tuple(a.grad if isinstance(a, Tensor) and a.requires_grad else None
                         for a in inputs)
        return (None, None) + in_grads

