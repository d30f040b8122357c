"""Views and in-place ops on them, tracked as PyTorch tracks them (torch/csrc/autograd/
variable.cpp, functions/tensor.cpp).

A view (``b[:, 0]``, ``b.t()``, ``b.reshape(...)`` when no copy is made) shares its base's
storage and version counter, and remembers how it was made from its base: the chain of view
ops, :data:`ViewSteps` (PyTorch's ``ViewInfo`` with its ``view_fn``). Two things follow, and
without them a gradient would be silently wrong:

- When the base, or another view of it, is modified in place, the view's recorded
  ``grad_fn`` describes values the storage no longer holds. The view notices that the shared
  version moved past the one its ``grad_fn`` was made at, and makes a new one by replaying
  its view ops on the base's current history (PyTorch's ``VariableHooks::grad_fn``, which
  regenerates an ``AsStridedBackward0`` or replays the ``view_fn``). The replay lives in
  :func:`gradtrace.autograd.dispatch.regenerate_view_grad_fn`.
- An in-place op on a view changes the base too, so the base's history is rebased on a
  ``CopySlices`` node (:class:`gradtrace.autograd.dispatch.CopySlices`): the base's gradient,
  with the view's region replaced by the in-place op's backward applied to that region.

This module holds what needs neither the op table nor the Tensor class (so that it imports
nothing): replaying view ops and their adjoint, and the error messages (PyTorch's words).
"""
from __future__ import annotations

__all__ = ["ViewSteps", "replay", "replay_array", "scatter", "ERR_LEAF_VIEW",
           "ERR_NO_GRAD_VIEW_INPLACE", "ERR_NO_GRAD_VIEW_REBASED"]

#: ``(op, attrs, Meta of the op's input)`` per view op, from the base to the view.
ViewSteps = tuple

ERR_LEAF_VIEW = ("a view of a leaf Variable that requires grad is being used in an in-place "
                 "operation.")
_NO_GRAD_ADVICE = (" Given that this use case is ambiguous and error-prone, it is forbidden. You "
                   "can clarify your code by moving both the view and the inplace either both "
                   "inside the no_grad block (if you don't want the inplace to be tracked) or "
                   "both outside (if you want the inplace to be tracked).")
ERR_NO_GRAD_VIEW_INPLACE = ("A view was created in no_grad mode and is being modified inplace "
                            "with grad mode enabled." + _NO_GRAD_ADVICE)
ERR_NO_GRAD_VIEW_REBASED = ("A view was created in no_grad mode and its base or another view of "
                            "its base has been modified inplace with grad mode enabled."
                            + _NO_GRAD_ADVICE)


def replay(F, x, steps: ViewSteps):
    """The view ops of ``steps`` applied to ``x`` (an array or a tensor, as ``F`` computes)."""
    for op, attrs, _meta in steps:
        x = getattr(F, op.name)(x, **attrs) if attrs else getattr(F, op.name)(x)
    return x


def replay_array(xp, x, steps: ViewSteps):
    """The view ops of ``steps`` applied to the array ``x`` by their forwards (a view of it)."""
    for op, attrs, _meta in steps:
        x = op.fwd(xp, x, **attrs) if attrs else op.fwd(xp, x)
    return x


def scatter(F, x, steps: ViewSteps):
    """The adjoint of :func:`replay`: ``x``, shaped like the view, placed in zeros shaped like
    the base (each view op's own backward rule, last op first)."""
    for op, attrs, meta in reversed(steps):
        rule = op.vjp[0]
        x = rule(F, x, None, meta, **attrs) if attrs else rule(F, x, None, meta)
    return x
