"""``nn.utils``: gradient clipping (``clip_grad_norm_``, ``clip_grad_value_``) and flattening
parameters to one vector and back, with PyTorch's semantics.

Clipping works on the gradients' arrays in place, as an optimizer step does: it is not part of
any graph, and each changed gradient's version counter is bumped.
"""
from __future__ import annotations

import math

from ...grad_mode import no_grad
from ...ops.shape_api import cat
from ..._tensor import Tensor, tensor
from . import rnn  # noqa: F401 - nn.utils.rnn: pad_sequence, packed sequences

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_",
           "parameters_to_vector", "vector_to_parameters"]


def _as_list(parameters) -> list:
    return [parameters] if isinstance(parameters, Tensor) else list(parameters)


def _grads(parameters) -> list:
    return [p.grad for p in _as_list(parameters) if p.grad is not None]


def get_total_norm(tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach=None) -> Tensor:
    """The ``norm_type`` norm of all ``tensors`` together, as if concatenated into one vector.

    Args:
        tensors: a Tensor or an iterable of Tensors.
        norm_type: the order of the norm; ``inf`` (or ``"inf"``) for the largest absolute value.
        error_if_nonfinite: raise a RuntimeError when the norm is nan or inf.
        foreach: accepted for PyTorch compatibility; the per-tensor loop is the only path.

    Returns:
        A 0-dim tensor on the first tensor's device (``tensor(0.)`` for no tensors).
    """
    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return tensor(0.0)
    dev = tensors[0].device
    xp = dev.xp
    with no_grad():
        if norm_type == math.inf:
            # The max of each tensor's max, taken on the device: one host copy at the end.
            parts = [xp.abs(t._data).max() if t._data.size else xp.zeros((), t._data.dtype)
                     for t in tensors]
            total = xp.max(xp.stack([xp.asarray(x, dtype=parts[0].dtype) for x in parts]))
        else:
            parts = [_vector_norm(xp, t._data, norm_type) for t in tensors]
            total = _vector_norm(xp, xp.stack(parts), norm_type)
    if error_if_nonfinite and not bool(xp.isfinite(total)):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is "
            "non-finite, so it cannot be clipped. To disable this error and scale the gradients "
            "by the non-finite norm anyway, set `error_if_nonfinite=False`")
    return tensor(total, device=dev)


def _vector_norm(xp, arr, p: float):
    a = xp.abs(arr.ravel())
    if p == 2.0:
        return xp.sqrt(xp.sum(a * a))
    if p == 1.0:
        return xp.sum(a)
    if p == 0.0:
        return xp.sum(a != 0).astype(a.dtype)
    if p == -math.inf:
        return xp.min(a)
    return xp.sum(a ** p) ** (1.0 / p)


def clip_grads_with_norm_(parameters, max_norm: float, total_norm, foreach=None) -> None:
    """Scale every gradient by ``min(max_norm / (total_norm + 1e-6), 1)``, in place.

    Args:
        parameters: a Tensor or an iterable of Tensors whose ``.grad`` is scaled.
        max_norm: the largest norm the gradients may have afterwards.
        total_norm: their total norm, as :func:`get_total_norm` computes it.
        foreach: accepted for PyTorch compatibility.
    """
    grads = _grads(parameters)
    if not grads:
        return
    total = total_norm._data if isinstance(total_norm, Tensor) else total_norm
    xp = grads[0].device.xp
    # PyTorch multiplies by the clamped coefficient always (no branch on the host), so a
    # gradient within the bound is multiplied by 1.0 and a nan norm spreads nan.
    coef = xp.minimum(xp.asarray(float(max_norm)) / (xp.asarray(total) + 1e-6), 1.0)
    for g in grads:
        g._data *= xp.asarray(coef, dtype=g._data.dtype)
        g._vc[0] += 1


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """Rescale the gradients in place so that their total norm is at most ``max_norm``.

    Args:
        parameters: a Tensor or an iterable of Tensors with gradients.
        max_norm: the largest total norm allowed.
        norm_type: the order of the norm (``inf`` for the largest absolute value).
        error_if_nonfinite: raise a RuntimeError when the total norm is nan or inf.
        foreach: accepted for PyTorch compatibility.

    Returns:
        The total norm of the gradients before clipping, as a 0-dim tensor.
    """
    parameters = _as_list(parameters)
    total = get_total_norm(_grads(parameters), norm_type, error_if_nonfinite)
    clip_grads_with_norm_(parameters, max_norm, total)
    return total


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient into ``[-clip_value, clip_value]`` in place.

    Args:
        parameters: a Tensor or an iterable of Tensors with gradients.
        clip_value: the bound on each gradient element's magnitude.
        foreach: accepted for PyTorch compatibility.
    """
    clip_value = float(clip_value)
    for g in _grads(parameters):
        g.device.xp.clip(g._data, -clip_value, clip_value, out=g._data)
        g._vc[0] += 1


def parameters_to_vector(parameters) -> Tensor:
    """All parameters flattened and concatenated into one 1-D tensor (a copy, in the graph)."""
    return cat([p.reshape(-1) for p in _as_list(parameters)])


def vector_to_parameters(vec: Tensor, parameters) -> None:
    """Copy consecutive slices of the 1-D ``vec`` into the parameters' data, in order.

    Args:
        vec: a 1-D tensor with as many elements as the parameters together.
        parameters: a Tensor or an iterable of Tensors to overwrite.
    """
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected a Tensor, but got: {type(vec).__name__}")
    params = _as_list(parameters)
    need = sum(p._data.size for p in params)
    if vec._data.ndim != 1 or vec._data.size != need:
        raise ValueError(f"vector_to_parameters: vec has shape {tuple(vec.shape)}, the "
                         f"parameters need {need} elements")
    offset = 0
    for p in params:
        n = p._data.size
        p._data[...] = vec._data[offset:offset + n].reshape(p._data.shape)
        p._vc[0] += 1
        offset += n
