"""Loss primitives: mse_loss, smooth_l1_loss, huber_loss and binary_cross_entropy_with_logits,
under PyTorch's nodes (MseLossBackward0, SmoothL1LossBackward0, HuberLossBackward0,
BinaryCrossEntropyWithLogitsBackward0).

NOTE: primitives for those nodes and for one node instead of four to eight; the values are
the composites' they replace (the elementwise loss, then its mean, sum or nothing).

Each input's rule is its elementwise partial derivative of the unreduced loss times the
gradient, over N for a mean; the forward-mode rule is the same partial times the tangent,
reduced as the forward.
"""
from __future__ import annotations

import math

import numpy

from ..dispatch import defop
from .activation import _softplus_fwd



def _reduce_fwd(xp, loss, reduction):
    if reduction == "none":
        return loss
    total = xp.sum(loss)
    return total if reduction == "sum" else (total / loss.size if loss.size else total + xp.nan)


def _reduce(F, values, reduction):
    """A forward-mode tangent, reduced as the forward reduces the loss."""
    if reduction == "none":
        return values
    return F.sum(values) if reduction == "sum" else F.mean(values)


def _per_element(g, reduction, input):  # noqa: A002
    """The loss's gradient per element: g (a 0-d gradient broadcasts), over N for a mean."""
    if reduction != "mean":
        return g
    n = 1
    for s in input.shape:
        n *= s
    return g / max(n, 1)


def _jvp(partial):
    """Forward-mode rule from an elementwise partial derivative: reduced as the forward."""

    def rule(F, t, out, input, target, *rest, reduction="mean"):  # noqa: A002
        return _reduce(F, partial(F, input, target, *rest) * t, reduction)

    return rule


# --------------------------------------------------------------------------- mse_loss


def _mse_fwd(xp, input, target, reduction="mean"):  # noqa: A002 - PyTorch's names
    d = input - target
    return _reduce_fwd(xp, d * d, reduction)


def _mse_d_input(F, input, target):  # noqa: A002
    return (input - target) * 2.0


def _mse_d_target(F, input, target):  # noqa: A002
    return (target - input) * 2.0


# (Rules name their inputs: what a node saves is read from them.)
defop("mse_loss", _mse_fwd,
      (lambda F, g, out, input, target, reduction="mean":
       _per_element(g, reduction, input) * _mse_d_input(F, input, target),
       lambda F, g, out, input, target, reduction="mean":
       _per_element(g, reduction, input) * _mse_d_target(F, input, target)),
      jvp=(_jvp(_mse_d_input), _jvp(_mse_d_target)), node_name="MseLossBackward0")


# --------------------------------------------------------------------------- smooth L1 / Huber
# Their slopes are selects, as PyTorch's smooth_l1_loss_backward / huber_loss_backward: -1 / 1
# (-delta / delta) beyond the quadratic zone, so an infinite difference has a finite slope
# (the composite's where gave NaN there), and a NaN difference gives NaN.


def _smooth_l1_fwd(xp, input, target, reduction="mean", beta=1.0):  # noqa: A002
    d = input - target
    z = xp.abs(d)
    return _reduce_fwd(xp, xp.where(z < beta, d * d * (0.5 / beta), z - 0.5 * beta), reduction)


def _smooth_l1_d_input(F, input, target, beta=1.0):  # noqa: A002
    d = input - target
    return F.where(d < -beta, -1.0, F.where(d > beta, 1.0, d * (1.0 / beta)))


def _huber_fwd(xp, input, target, reduction="mean", delta=1.0):  # noqa: A002
    d = input - target
    z = xp.abs(d)
    return _reduce_fwd(xp, xp.where(z < delta, d * d * 0.5, (z - 0.5 * delta) * delta), reduction)


def _huber_d_input(F, input, target, delta=1.0):  # noqa: A002
    d = input - target
    return F.where(d < -delta, -delta, F.where(d > delta, delta, d))


def _zone_loss(name, fwd, d_input, node_name):
    """A loss of ``input - target`` with slope ``d_input``: the target's slope is its negative."""

    def rule_input(F, g, out, input, target, reduction="mean", **p):  # noqa: A002
        return _per_element(g, reduction, input) * d_input(F, input, target, **p)

    def rule_target(F, g, out, input, target, reduction="mean", **p):  # noqa: A002
        return -(_per_element(g, reduction, input) * d_input(F, input, target, **p))

    def jvp_input(F, t, out, input, target, reduction="mean", **p):  # noqa: A002
        return _reduce(F, d_input(F, input, target, **p) * t, reduction)

    def jvp_target(F, t, out, input, target, reduction="mean", **p):  # noqa: A002
        return _reduce(F, -(d_input(F, input, target, **p) * t), reduction)

    defop(name, fwd, (rule_input, rule_target), jvp=(jvp_input, jvp_target),
          node_name=node_name)


_zone_loss("smooth_l1_loss", _smooth_l1_fwd, _smooth_l1_d_input, "SmoothL1LossBackward0")
_zone_loss("huber_loss", _huber_fwd, _huber_d_input, "HuberLossBackward0")


# --------------------------------------------------------------------------- BCE with logits


def _bce_logits_fwd(xp, input, target, weight=None, pos_weight=None, reduction="mean"):  # noqa: A002
    """``(1 - t) x + (1 + (pw - 1) t) softplus(-x)``, stable for large |x|. The softplus has
    no linear threshold: softplus(25) is 25 + 1.4e-11, which float64 keeps (as PyTorch's)."""
    sp = _softplus_fwd(xp, -input, 1.0, math.inf)
    if pos_weight is None:
        loss = (1 - target) * input + sp
    else:
        loss = (1 - target) * input + (1 + (pos_weight - 1) * target) * sp
    if weight is not None:
        loss = loss * weight
    return _reduce_fwd(xp, loss, reduction)


def _weighted(d, weight):
    return d if weight is None else d * weight


def _bce_d_input(F, input, target, weight=None, pos_weight=None):  # noqa: A002
    """PyTorch's: sigmoid(x) - t; with pos_weight (pw t + 1 - t) sigmoid(x) - pw t."""
    s = F.sigmoid(input)
    if pos_weight is None:
        return _weighted(s - target, weight)
    pt = pos_weight * target
    return _weighted((pt + 1 - target) * s - pt, weight)


def _bce_d_target(F, input, target, weight=None, pos_weight=None):  # noqa: A002
    """PyTorch's: -x; with pos_weight -x + (pw - 1) softplus(-x)."""
    if pos_weight is None:
        return _weighted(-input, weight)
    return _weighted((pos_weight - 1) * F.softplus(-input, threshold=math.inf) - input, weight)


def _bce_d_weight(F, input, target, weight=None, pos_weight=None):  # noqa: A002
    # PyTorch has no derivative for weight and pos_weight (it raises); the composite this
    # replaces had them, so they stay.
    sp = F.softplus(-input, threshold=math.inf)
    if pos_weight is None:
        return (1 - target) * input + sp
    return (1 - target) * input + (1 + (pos_weight - 1) * target) * sp


def _bce_d_pos_weight(F, input, target, weight=None, pos_weight=None):  # noqa: A002
    return _weighted(target * F.softplus(-input, threshold=math.inf), weight)


def _bce_rule(partial):
    def rule(F, g, out, input, target, weight, pos_weight, reduction="mean"):  # noqa: A002
        return _per_element(g, reduction, input) * partial(F, input, target, weight, pos_weight)

    return rule


defop("binary_cross_entropy_with_logits", _bce_logits_fwd,
      tuple(_bce_rule(p) for p in (_bce_d_input, _bce_d_target, _bce_d_weight,
                                   _bce_d_pos_weight)),
      jvp=tuple(_jvp(p) for p in (_bce_d_input, _bce_d_target, _bce_d_weight,
                                  _bce_d_pos_weight)),
      node_name="BinaryCrossEntropyWithLogitsBackward0")


# --------------------------------------------------------------------------- BCE of probabilities
# PyTorch's binary_cross_entropy: one node, BinaryCrossEntropyBackward0, where the composite
# (two clamps of two logs) showed clamp ops and ClampBackward1 nodes in a profile. Its
# backward is PyTorch's formulas, not the derivative of the clamped logs: for the input
# (p - t) / max(p (1 - p), 1e-12), for the target -logit(p) (unclamped: +-inf at 0 and 1).
# PyTorch has no derivative for ``weight`` (it refuses one that requires grad).

# PyTorch's EPSILON in binary_cross_entropy_backward: the float 1e-12f in every dtype (its
# float64 gradient at p = 0 or 1 is (p - t) / 9.9999999600419720025e-13).
_BCE_EPSILON = float(numpy.float32(1e-12))


def _bce_fwd(xp, input, target, weight=None, reduction="mean"):  # noqa: A002
    """``-(t max(log p, -100) + (1 - t) max(log1p(-p), -100))``, times weight, reduced."""
    with numpy.errstate(divide="ignore", invalid="ignore"):
        log_p = xp.maximum(xp.log(input), -100.0)
        log_q = xp.maximum(xp.log1p(-input), -100.0)
    loss = (target - 1) * log_q - target * log_p
    if loss.dtype != input.dtype:   # (a Python float bound keeps float32 float32)
        loss = loss.astype(input.dtype)
    if weight is not None:
        loss = loss * weight
    return _reduce_fwd(xp, loss, reduction)


def _bce_d_prob(F, input, target, weight=None):  # noqa: A002
    d = (input - target) / F.clamp((1 - input) * input, min=_BCE_EPSILON)
    return _weighted(d, weight)


def _bce_d_target_prob(F, input, target, weight=None):  # noqa: A002
    return _weighted(-F.logit(input), weight)


defop("binary_cross_entropy", _bce_fwd,
      (lambda F, g, out, input, target, weight, reduction="mean":
       _per_element(g, reduction, input) * _bce_d_prob(F, input, target, weight),
       lambda F, g, out, input, target, weight, reduction="mean":
       _per_element(g, reduction, input) * _bce_d_target_prob(F, input, target, weight),
       None),
      jvp=(lambda F, t, out, input, target, weight, reduction="mean":
           _reduce(F, _bce_d_prob(F, input, target, weight) * t, reduction),
           lambda F, t, out, input, target, weight, reduction="mean":
           _reduce(F, _bce_d_target_prob(F, input, target, weight) * t, reduction),
           None),
      node_name="BinaryCrossEntropyBackward0")
