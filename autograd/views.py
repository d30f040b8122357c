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

A view also remembers how it was made (PyTorch's ``CreationMeta``): with grad mode off, or
as one output of an op that returns several views (``split``, ``chunk``, ``unbind``). Such a
view may not be modified in place while grad is recorded, nor have its ``grad_fn``
regenerated after its base changed: a multi-output node has one backward for all its outputs,
which cannot be rebuilt for one of them. A view of such a view inherits the restriction.

This module holds what needs neither the op table nor the Tensor class (so that it imports
nothing): replaying view ops and their adjoint, and the error messages (PyTorch's words).
"""
from __future__ import annotations

__all__ = ["ViewSteps", "replay", "replay_array", "scatter", "ERR_LEAF_VIEW",
           "ERR_NO_GRAD_VIEW_INPLACE", "ERR_NO_GRAD_VIEW_REBASED", "DEFAULT", "NO_GRAD_MODE",
           "MULTI_OUTPUT_NODE", "creation_meta", "inplace_view_error"]

#: ``(op, attrs, Meta of the op's input)`` per view op, from the base to the view.
ViewSteps = tuple

#: How a view was made (PyTorch's ``CreationMeta``): normally; with grad mode off; as one of
#: several views one op returns.
DEFAULT, NO_GRAD_MODE, MULTI_OUTPUT_NODE = 0, 1, 2


def creation_meta(grad_enabled: bool, multi_output: bool, base_meta: int) -> int:
    """The creation meta of a new view; ``base_meta`` is its input's (DEFAULT when the input
    is not a view). A restricted input passes its restriction on (PyTorch's
    ``propagate_creation_meta``)."""
    new = NO_GRAD_MODE if not grad_enabled else MULTI_OUTPUT_NODE if multi_output else DEFAULT
    return base_meta if new == DEFAULT else new


ERR_LEAF_VIEW = ("a view of a leaf Variable that requires grad is being used in an in-place "
                 "operation.")
_NO_GRAD_ADVICE = (" Given that this use case is ambiguous and error-prone, it is forbidden. You "
                   "can clarify your code by moving both the view and the inplace either both "
                   "inside the no_grad block (if you don't want the inplace to be tracked) or "
                   "both outside (if you want the inplace to be tracked).")
_MULTI_OUTPUT_ADVICE = (" This view is the output of a function that returns multiple views. Such "
                        "functions do not allow the output views to be modified inplace. You "
                        "should replace the inplace operation by an out-of-place one.")


def inplace_view_error(meta: int, fn_name: str | None, output_nr: int, rebased: bool) -> str:
    """PyTorch's words (``handle_view_on_rebase``) for an in-place op on a restricted view
    (``rebased=False``), or for reading its ``grad_fn`` after its base or another view of it
    was modified in place (``rebased=True``).

    Args:
        meta: the view's creation meta (NO_GRAD_MODE or MULTI_OUTPUT_NODE).
        fn_name: the name of the view's ``grad_fn`` (``"SplitBackward0"``), None without one.
        output_nr: which output of that node the view is.
        rebased: which of the two errors.
    """
    what = "its base or another view of its base has been" if rebased else "is being"
    no_grad = f"no_grad mode and {what} modified inplace with grad mode enabled."
    # PyTorch names the forward function: "Output 0 of Split", from SplitBackward0.
    name = fn_name[:fn_name.rfind("Backward")] if fn_name and "Backward" in fn_name else fn_name
    if meta == MULTI_OUTPUT_NODE:
        msg = (f"Output {output_nr} of {name} is a view and {what} modified inplace." if name
               else f"A view was created in {no_grad}")
        return msg + _MULTI_OUTPUT_ADVICE
    # A view with history whose restriction came from the view it was made of.
    msg = (f"Output {output_nr} of {name} is a view of a view which was created in {no_grad}"
           if name else f"A view was created in {no_grad}")
    return msg + _NO_GRAD_ADVICE


ERR_NO_GRAD_VIEW_INPLACE = inplace_view_error(NO_GRAD_MODE, None, 0, rebased=False)
ERR_NO_GRAD_VIEW_REBASED = inplace_view_error(NO_GRAD_MODE, None, 0, rebased=True)


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
