"""Forward-mode AD: dual tensors carry a tangent through every op inside a dual level.

    with forward_ad.dual_level():
        x = forward_ad.make_dual(primal, tangent)
        y = f(x)
        value, jvp = forward_ad.unpack_dual(y)

Each primitive's forward rules (``defop(..., jvp=...)``: one per input,
``rule(F, t, out, *inputs)``, or a declared property such as ``SELF_ADJOINT``) give the output
tangent as the sum of the inputs' contributions; an op without a rule for an input that carries
a tangent raises, naming the op. Tangents are computed with autograd ops,
so reverse mode can differentiate through them.
"""
from __future__ import annotations

import itertools
from typing import NamedTuple

from . import views
from ._tensor import Tensor
from .grad_mode import STATE

__all__ = ["dual_level", "make_dual", "unpack_dual", "UnpackedDualTensor", "enter_dual_level",
           "exit_dual_level"]

_levels = itertools.count(1)


class UnpackedDualTensor(NamedTuple):
    primal: object
    tangent: object


def enter_dual_level() -> int:
    if STATE.fw_level:
        raise RuntimeError("nested forward-mode AD levels are not supported: exit the current "
                           "dual_level() first")
    STATE.fw_level = next(_levels)
    return STATE.fw_level


def exit_dual_level(level: int | None = None) -> None:
    if level is not None and level != STATE.fw_level:
        raise RuntimeError(f"exit_dual_level({level}) but the current level is {STATE.fw_level}")
    STATE.fw_level = 0


class dual_level:
    """Context manager: dual tensors made inside carry tangents; they are dropped on exit."""

    def __enter__(self):
        self.level = enter_dual_level()
        return self.level

    def __exit__(self, *exc):
        exit_dual_level(self.level)
        return False


def _tangents(t) -> dict:
    ex = t._extras()
    return ex.setdefault("tangents", {})


def make_dual(tensor, tangent, *, level: int | None = None):
    """A view of ``tensor`` whose tangent (at the current level) is ``tangent``."""
    level = level or STATE.fw_level
    if not level:
        raise RuntimeError("make_dual must be called inside a forward_ad.dual_level() context")
    if not isinstance(tensor, Tensor) or not isinstance(tangent, Tensor):
        raise TypeError("make_dual expects two tensors (primal, tangent)")
    if tangent.shape != tensor.shape:
        raise RuntimeError(f"make_dual: tangent of shape {list(tangent.shape)} does not match "
                           f"primal of shape {list(tensor.shape)}")
    if tangent.device is not tensor.device:
        raise RuntimeError(f"make_dual: tangent is on {tangent.device} but primal is on {tensor.device}")
    dual = tensor.view(*tensor.shape) if tensor.ndim else tensor * 1
    if dual is tensor:
        dual = tensor * 1
    _tangents(dual)[level] = tangent.to(dtype=tensor.dtype)
    return dual


def unpack_dual(tensor, *, level: int | None = None) -> UnpackedDualTensor:
    """(primal view without tangent, tangent or None) at the current level."""
    level = level or STATE.fw_level
    tangent = tangent_of(tensor, level)
    return UnpackedDualTensor(tensor.detach() if not tensor.requires_grad else _primal(tensor), tangent)


def _primal(t):
    p = Tensor._make(t._data, t.requires_grad, t.grad_fn, t._output_nr, t._vc, t._device)
    return p


def tangent_of(t, level: int):
    """The tangent of ``t`` at ``level``, or None. A view's is the same view of its base's
    tangent, when the base has one, so an in-place op on the base is seen by its views."""
    base = t._base
    if base is not None:
        bt = tangent_of(base, level)
        if bt is not None:
            region = views.replay_array(base._device.xp, bt._data, t._view_steps)
            return bt._make(region, False, None, 0, [0], base._device)
    ex = t._extra
    if not ex:
        return None
    tangents = ex.get("tangents")
    return tangents.get(level) if tangents else None


def propagate(op, F, inputs, attrs, result, state) -> None:
    """Set the tangent of ``result`` from the inputs' tangents (called by the dispatcher,
    which passes ``F``, its namespace of primitives as autograd ops: the rules compute the
    tangents with it, so reverse mode can differentiate through them)."""
    if not op.differentiable:
        return   # comparisons and the like: no tangent
    level = state.fw_level
    contributions = []
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor):
            t = tangent_of(x, level)
            if t is not None:
                contributions.append((i, t))
    if not contributions:
        return
    rules = op.jvp
    outs = result if op.nout != 1 else (result,)
    state.fw_level = 0   # the tangent's own ops carry no tangents
    try:
        totals = [None] * len(outs)
        for i, t in contributions:
            rule = rules[i] if rules is not None and i < len(rules) else None
            if rule is None:
                raise NotImplementedError(
                    f"forward-mode AD is not implemented for '{op.name}' (input {i}): "
                    "declare jvp= on its defop")
            contrib = rule(F, t, result, *inputs, **(attrs or {}))
            # A multi-output op's rule gives one tangent per output (None: no tangent).
            for k, c in enumerate(contrib if op.nout != 1 else (contrib,)):
                if c is not None:
                    totals[k] = c if totals[k] is None else totals[k] + c
        for k, (total, o) in enumerate(zip(totals, outs)):
            if total is None:
                continue
            if total.shape != o.shape:
                total = total.expand(*o.shape)
            if total.dtype != o.dtype:
                total = total.to(dtype=o.dtype)
            totals[k] = total
    finally:
        state.fw_level = level
    for total, o in zip(totals, outs):
        if total is not None:
            _tangents(o)[level] = total


def move_tangent(src, dst) -> None:
    """After an in-place op wrote ``src``'s values into ``dst``, ``dst`` takes its tangent."""
    level = STATE.fw_level
    t = tangent_of(src, level)
    ex = dst._extra
    if t is not None and dst._base is not None:
        _write_view_tangent(dst, t, level)
    elif t is not None:
        _tangents(dst)[level] = t
    elif ex and ex.get("tangents"):
        ex["tangents"].pop(level, None)


def _write_view_tangent(view, t, level) -> None:
    """An in-place op on a view changed its base there too: the base's tangent takes ``t`` in
    the view's region, and the view's tangent is that region of it (PyTorch keeps a view's
    tangent a view of its base's). The base gets a fresh tangent array, since its old one may
    be another tensor's tangent as well."""
    base = view._base
    xp = base._device.xp
    old = tangent_of(base, level)
    arr = old._data.copy() if old is not None else xp.zeros_like(base._data)
    region = views.replay_array(xp, arr, view._view_steps)
    if not xp.may_share_memory(region, arr):
        raise NotImplementedError("forward-mode AD: an in-place op on this view (a reshape "
                                  "that copies its tangent) cannot update its base's tangent")
    region[...] = t._data
    _tangents(base)[level] = t._make(arr, False, None, 0, [0], base._device)
    _tangents(view)[level] = t._make(region, False, None, 0, [0], base._device)
