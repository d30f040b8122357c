"""The losses: negative log-likelihood and cross-entropy, regression losses (``mse_loss``,
``l1_loss``, ``smooth_l1_loss``, ``huber_loss``), binary, ``kl_div`` and ``soft_margin_loss``;
with PyTorch's ``reduction`` (and the legacy ``size_average``/``reduce``).
"""
from __future__ import annotations

from ... import ops
from ...dispatch import defcomposite
from ...dtypes import is_floating
from ...grad_mode import is_grad_enabled
from ...ops import _call, log_softmax as _log_softmax, where
from ..._tensor import Tensor
from .activation import _softplus_stable
from .normalization import _channel_shape


def _reduction(reduction, op):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    return reduction


def _reduce(loss, reduction, op, denom=None):
    if _reduction(reduction, op) == "mean":
        return loss.mean() if denom is None else loss.sum() / denom
    return loss.sum() if reduction == "sum" else loss


def _check_targets(op, target, n_classes, ignore_index):
    t = target._data
    if t.dtype.kind not in "iu":
        raise TypeError(f"{op}: class-index targets must be an integer tensor, got {t.dtype}")
    if not t.size:
        return
    xp = target.device.xp
    bad = ((t < 0) | (t >= n_classes)) & (t != ignore_index)
    if bool(bad.any()):
        pos = tuple(int(i) for i in xp.argwhere(bad)[0])
        value = int(t[pos])
        raise IndexError(f"{op}: target {value} at index {list(pos) if len(pos) > 1 else pos[0]} "
                         f"is out of bounds for {n_classes} classes")


@defcomposite("nll_loss")
def nll_loss(input, target, weight=None, ignore_index: int = -100, reduction: str = "mean"):  # noqa: A002
    """Negative log-likelihood of class indices; ``input`` holds log-probabilities (N, C, ...)."""
    if input.ndim < 1:
        raise RuntimeError("nll_loss: input must have at least 1 dim")
    unbatched = input.ndim == 1
    if unbatched:
        input, target = ops.unsqueeze(input, 0), ops.unsqueeze(target, 0)
    c = input.shape[1]
    if (input.shape[0],) + tuple(input.shape[2:]) != tuple(target.shape):
        raise RuntimeError(f"nll_loss: input of shape {list(input.shape)} needs target of shape "
                           f"{[input.shape[0]] + list(input.shape[2:])}, got {list(target.shape)}")
    _check_targets("nll_loss", target, c, ignore_index)
    if input.ndim == 2 and weight is None and not unbatched:   # the common case: one op
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"nll_loss: reduction must be 'mean', 'sum' or 'none', got "
                             f"{reduction!r}")
        return _call("nll_loss_forward", input, target, ignore_index=ignore_index,
                     reduction=reduction)
    valid = target != ignore_index
    safe = Tensor._make(target.device.xp.where(valid._data, target._data, 0), False, None, 0, [0],
                        target.device)
    picked = ops.squeeze(_call("gather", input, ops.unsqueeze(safe, 1), dim=1), 1)
    w = valid.to(dtype=input.dtype)
    if weight is not None:
        w = w * _call("embedding", weight, safe)
    loss = -(picked * w)
    if unbatched:   # a (C,) input gives a 0-d loss per sample, as PyTorch's
        loss, w = ops.squeeze(loss, 0), ops.squeeze(w, 0)
    if reduction == "mean":
        return loss.sum() / w.sum()
    return _reduce(loss, reduction, "nll_loss")


@defcomposite("cross_entropy")
def cross_entropy(input, target, weight=None, ignore_index: int = -100,  # noqa: A002
                  reduction: str = "mean", label_smoothing: float = 0.0):
    """Cross entropy of logits (N, C, ...) against class indices (N, ...) or class
    probabilities (same shape as ``input``), with optional label smoothing."""
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    class_dim = 0 if input.ndim == 1 else 1
    logp = _log_softmax(input, class_dim)
    c = input.shape[class_dim]
    if is_floating(target.dtype):   # class probabilities
        if target.shape != input.shape:
            raise RuntimeError(f"cross_entropy: probability target of shape {list(target.shape)} "
                               f"must match input shape {list(input.shape)}")
        if label_smoothing:
            target = target * (1 - label_smoothing) + label_smoothing / c
        w = logp if weight is None else logp * ops.reshape(weight, _channel_shape(logp, c) if logp.ndim > 1 else (c,))
        return _reduce(-(w * target).sum(dim=class_dim), reduction, "cross_entropy")
    if input.ndim > 1 and (input.shape[0],) + tuple(input.shape[2:]) != tuple(target.shape):
        raise RuntimeError(f"cross_entropy: input of shape {list(input.shape)} needs target of "
                           f"shape {[input.shape[0]] + list(input.shape[2:])}, got "
                           f"{list(target.shape)}")
    _check_targets("cross_entropy", target, c, ignore_index)
    if input.ndim == 2 and weight is None and not label_smoothing:
        return nll_loss(logp, target, None, ignore_index, reduction)
    nll = nll_loss(logp, target, weight, ignore_index, "none")
    if not label_smoothing:
        if reduction == "mean":
            valid = (target != ignore_index).to(dtype=input.dtype)
            if weight is not None:
                safe = Tensor._make(target.device.xp.where(valid._data > 0, target._data, 0), False,
                                    None, 0, [0], target.device)
                valid = valid * _call("embedding", weight, safe)
            return nll.sum() / valid.sum()
        return _reduce(nll, reduction, "cross_entropy")
    # Label smoothing: (1 - eps) * nll + eps * mean over classes of -log p (weighted).
    valid = (target != ignore_index).to(dtype=input.dtype)
    wl = logp if weight is None else logp * ops.reshape(
        weight, _channel_shape(logp, c) if logp.ndim > 1 else (c,))
    smooth = -wl.sum(dim=class_dim) * (1.0 / c) * valid
    loss = nll * (1 - label_smoothing) + smooth * label_smoothing
    if reduction == "mean":
        if weight is not None:
            safe = Tensor._make(target.device.xp.where(valid._data > 0, target._data, 0), False,
                                None, 0, [0], target.device)
            return loss.sum() / (valid * _call("embedding", weight, safe)).sum()
        return loss.sum() / valid.sum()
    return _reduce(loss, reduction, "cross_entropy")


def _same_shape(op, input, target):
    if tuple(input.shape) != tuple(target.shape):
        raise RuntimeError(f"{op}: input has shape {list(input.shape)} but target has shape "
                           f"{list(target.shape)}")


def mse_loss(input, target, reduction: str = "mean"):  # noqa: A002
    """Squared error, averaged (or summed)."""
    _same_shape("mse_loss", input, target)
    return _call("mse_loss", input, target, reduction=_reduction(reduction, "mse_loss"))


@defcomposite("l1_loss")
def l1_loss(input, target, reduction: str = "mean"):  # noqa: A002
    """Absolute error, averaged (or summed)."""
    _same_shape("l1_loss", input, target)
    return _reduce(ops.abs(input - target), reduction, "l1_loss")


def binary_cross_entropy(input, target, weight=None, reduction: str = "mean"):  # noqa: A002
    """BCE of probabilities; the logs are clamped at -100 as PyTorch does. One op and one
    node (BinaryCrossEntropyBackward0), as PyTorch's."""
    _same_shape("binary_cross_entropy", input, target)
    if isinstance(weight, Tensor) and weight.requires_grad and is_grad_enabled():
        raise RuntimeError("The function 'binary_cross_entropy' is not differentiable with "
                           "respect to argument 'weight'. This input cannot have "
                           "requires_grad True.")
    return _call("binary_cross_entropy", input, target, weight,
                 reduction=_reduction(reduction, "binary_cross_entropy"))


def binary_cross_entropy_with_logits(input, target, weight=None, reduction: str = "mean",  # noqa: A002
                                     pos_weight=None):
    """BCE of logits, stable for large |x|: ``(1 - t) x + (1 + (pw - 1) t) softplus(-x)``."""
    _same_shape("binary_cross_entropy_with_logits", input, target)
    return _call("binary_cross_entropy_with_logits", input, target, weight, pos_weight,
                 reduction=_reduction(reduction, "binary_cross_entropy_with_logits"))


def _legacy_reduction(size_average, reduce, reduction):
    # PyTorch's deprecated size_average/reduce flags, mapped to ``reduction``.
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return "none" if not reduce else ("mean" if size_average else "sum")


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean",  # noqa: A002
                   beta: float = 1.0):
    """``0.5 d^2 / beta`` where |d| < beta, ``|d| - 0.5 beta`` elsewhere (l1 when beta=0);
    one SmoothL1LossBackward0, as PyTorch's."""
    _same_shape("smooth_l1_loss", input, target)
    if beta < 0:
        raise RuntimeError(f"smooth_l1_loss: beta must be non-negative, got {beta}")
    reduction = _reduction(_legacy_reduction(size_average, reduce, reduction), "smooth_l1_loss")
    if beta == 0.0:
        return _reduce(ops.abs(input - target), reduction, "smooth_l1_loss")
    return _call("smooth_l1_loss", input, target, reduction=reduction, beta=float(beta))


def huber_loss(input, target, reduction: str = "mean", delta: float = 1.0):  # noqa: A002
    """``0.5 d^2`` where |d| <= delta, ``delta (|d| - 0.5 delta)`` elsewhere; one
    HuberLossBackward0, as PyTorch's."""
    _same_shape("huber_loss", input, target)
    if delta <= 0:
        raise RuntimeError(f"huber_loss: delta must be positive, got {delta}")
    return _call("huber_loss", input, target, reduction=_reduction(reduction, "huber_loss"),
                 delta=float(delta))


@defcomposite("kl_div")
def kl_div(input, target, size_average=None, reduce=None, reduction: str = "mean",  # noqa: A002
           log_target: bool = False):
    """KL divergence with ``input`` log-probabilities: ``target * (log target - input)``
    pointwise (0 where target is 0); ``log_target`` when target holds log-probabilities.
    reduction 'batchmean' divides the sum by the batch size (the mathematically correct KL);
    'mean' divides by the element count, as PyTorch does."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if log_target:
        loss = ops.exp(target) * (target - input)
    else:
        positive = target > 0
        # log of 1 where target <= 0 keeps the unselected branch finite (xlogy's convention).
        safe = where(positive, target, target * 0.0 + 1.0)
        loss = where(positive, target * (ops.log(safe) - input), target * 0.0)
    if reduction == "batchmean":
        return loss.sum() / (input.shape[0] if input.ndim else 1)
    return _reduce(loss, reduction, "kl_div")


@defcomposite("soft_margin_loss")
def soft_margin_loss(input, target, size_average=None, reduce=None,  # noqa: A002
                     reduction: str = "mean"):
    """Two-class logistic loss ``log(1 + exp(-y x))`` with y in {-1, 1}."""
    _same_shape("soft_margin_loss", input, target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _reduce(_softplus_stable(-target * input), reduction, "soft_margin_loss")
