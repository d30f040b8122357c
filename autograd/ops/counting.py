"""Counting and searching: ``bincount``, ``histc``, ``histogram``, ``bucketize``,
``searchsorted``, ``unique`` and ``unique_consecutive``.

None is differentiable: each is a primitive without rules, so its outputs never require grad.
(PyTorch's histc and unique do give outputs that require grad, whose backward then raises "the
derivative ... is not implemented"; here the error cannot come later than the forward.)
"""
from __future__ import annotations

import builtins
from collections import namedtuple

import numpy

from ..dispatch import OPS, apply_op, defop, expose
from ..promotion import torch_name
from .._tensor import Tensor, tensor


def _call(name, *inputs, **attrs):
    return apply_op(OPS[name], inputs, attrs or None)


# --------------------------------------------------------------------------- counts


def _bincount_fwd(xp, input, weights=None, minlength=0):  # noqa: A002 - PyTorch's names
    if input.ndim != 1 or input.dtype.kind not in "biu" or input.dtype.kind == "b" or (
            input.size and int(input.min()) < 0):
        if input.dtype.kind == "f":
            raise NotImplementedError(
                f'"bincount_cpu" not implemented for \'{torch_name(input.dtype)}\'')
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is None:
        return xp.bincount(input, minlength=minlength).astype(numpy.int64)
    if weights.ndim != 1 or weights.shape[0] != input.shape[0]:
        raise RuntimeError("weights should be 1-d and have the same length as input")
    # PyTorch's: float32 weights count in float32, any other dtype in float64.
    dtype = numpy.float32 if weights.dtype == numpy.float32 else numpy.float64
    return xp.bincount(input, weights.astype(numpy.float64), minlength=minlength).astype(dtype)


defop("bincount", _bincount_fwd)


@expose(public="bincount", methods="bincount")
def bincount(input, weights=None, minlength=0):  # noqa: A002
    """How often each value 0..max occurs in a 1-D integer tensor (or the sum of ``weights``
    at each), at least ``minlength`` counts."""
    if weights is None:
        return _call("bincount", input, minlength=minlength)
    return _call("bincount", input, weights, minlength=minlength)


def _histc_fwd(xp, input, bins=100, min=0, max=0):  # noqa: A002
    if input.dtype.kind not in "fc":
        raise NotImplementedError(
            f'"histogram_cpu" not implemented for \'{torch_name(input.dtype)}\'')
    if bins <= 0:
        raise RuntimeError("torch.histc: bins must be > 0")
    lo, hi = float(min), float(max)
    if lo == hi and input.size:   # the data's range
        lo, hi = float(input.min()), float(input.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (numpy.isfinite(lo) and numpy.isfinite(hi)):
        raise RuntimeError(f"torch.histc: range of [{lo}, {hi}] is not finite")
    if lo > hi:
        raise RuntimeError("torch.histc: max must be larger than min")
    x = input.reshape(-1)
    x = x[(x >= lo) & (x <= hi)]   # NaN falls out here
    idx = ((x - lo) * (bins / (hi - lo))).astype(numpy.int64)
    idx = xp.minimum(idx, bins - 1)   # the maximum belongs to the last bin
    return xp.bincount(idx, minlength=bins).astype(input.dtype)


defop("histc", _histc_fwd, public="histc", methods="histc",
      doc="A histogram of ``bins`` equal bins over [min, max] (the data's range when both are "
          "0); values outside are left out (torch.histc).")


def _histogram_fwd(xp, input, bins_or_edges, weight=None, bins=None, range=None,  # noqa: A002
                   density=False):
    if input.dtype.kind != "f":
        raise NotImplementedError(
            f'"histogramdd" not implemented for \'{torch_name(input.dtype)}\'')
    spec = bins if bins_or_edges is None else bins_or_edges
    if range is not None and range[0] > range[1]:
        raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min "
                           f"{range[0]:g} max {range[1]:g} for dimension 0")
    hist, edges = xp.histogram(input.reshape(-1), spec, range=range,
                               weights=None if weight is None else weight.reshape(-1),
                               density=density)
    return hist.astype(input.dtype), edges.astype(input.dtype)


defop("histogram", _histogram_fwd, nout=2)
HistogramResult = namedtuple("histogram", ["hist", "bin_edges"])


@expose(public="histogram", methods="histogram")
def histogram(input, bins, *, range=None, weight=None, density=False):  # noqa: A002
    """``(hist, bin_edges)``: counts (or ``weight`` sums; ``density``: normalised to integrate
    to 1) in ``bins`` equal bins over ``range`` (the data's by default) or between the given
    edges (a 1-D tensor)."""
    edges = bins if isinstance(bins, Tensor) else None
    attrs = {"range": None if range is None else (float(range[0]), float(range[1])),
             "density": bool(density)}
    if edges is None:
        attrs["bins"] = int(bins)
    inputs = (input, edges) + ((weight,) if weight is not None else ())
    return HistogramResult(*apply_op(OPS["histogram"], inputs, attrs))


# --------------------------------------------------------------------------- searching


def _searchsorted_fwd(xp, sorted_sequence, input, sorter=None, out_int32=False,  # noqa: A002
                      right=False):
    seq = sorted_sequence
    if sorter is not None:
        seq = xp.take_along_axis(seq, sorter, axis=-1)
    side = "right" if right else "left"
    values = xp.asarray(input)
    if seq.ndim == 1:
        out = xp.searchsorted(seq, values, side=side)
    else:
        if seq.shape[:-1] != values.shape[:-1]:
            raise RuntimeError(
                "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                "dimensions of boundaries tensor and input value tensor must match, but we got "
                f"boundaries tensor {list(seq.shape)} and input value tensor "
                f"{list(values.shape)}")
        rows_s = seq.reshape(-1, seq.shape[-1])
        rows_v = values.reshape(-1, values.shape[-1])
        out = xp.stack([xp.searchsorted(s, v, side=side) for s, v in zip(rows_s, rows_v)])
        out = out.reshape(values.shape)
    return out.astype(numpy.int32 if out_int32 else numpy.int64)


defop("searchsorted", _searchsorted_fwd)


@expose(public="searchsorted")
def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,  # noqa: A002
                 sorter=None):
    """Where each value of ``input`` would be inserted into the last dim of
    ``sorted_sequence`` to keep it sorted (``right``/``side="right"``: after equal values)."""
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but "
                               f"got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, "
                               "got side of left while right was True")
        right = side == "right"
    if not isinstance(input, Tensor):   # a number: a 0-d result
        input = tensor(input, dtype=sorted_sequence.dtype, device=sorted_sequence.device)
    inputs = (sorted_sequence, input) if sorter is None else (sorted_sequence, input, sorter)
    return _call("searchsorted", *inputs, out_int32=out_int32, right=bool(right))


@expose(public="bucketize")
def bucketize(input, boundaries, *, out_int32=False, right=False):  # noqa: A002
    """The bucket of each value: ``i`` with ``boundaries[i-1] < x <= boundaries[i]``
    (``right``: ``boundaries[i-1] <= x < boundaries[i]``)."""
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim("
                           f"{boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


# --------------------------------------------------------------------------- unique


def _unique_flat(xp, x):
    """Sorted unique values, the inverse and the counts of the flattened ``x``; NaNs kept
    apart, as PyTorch's (NumPy 2 would merge them)."""
    flat = x.reshape(-1)
    try:
        values, inverse, counts = xp.unique(flat, return_inverse=True, return_counts=True,
                                            equal_nan=False)
    except TypeError:   # an array module without equal_nan
        values, inverse, counts = xp.unique(flat, return_inverse=True, return_counts=True)
    return values, inverse.reshape(x.shape), counts


def _unique_fwd(xp, input, dim=None):  # noqa: A002
    if dim is None:
        values, inverse, counts = _unique_flat(xp, input)
    else:
        moved = xp.moveaxis(input, dim, 0)
        rows = moved.reshape(moved.shape[0], -1)
        if rows.shape[0] == 0:
            values, inverse, counts = rows, xp.zeros(0, numpy.int64), xp.zeros(0, numpy.int64)
        else:
            values, inverse, counts = xp.unique(rows, axis=0, return_inverse=True,
                                                return_counts=True)
        values = xp.moveaxis(values.reshape((-1,) + moved.shape[1:]), 0, dim)
        inverse = inverse.reshape(-1)
    return values, inverse.astype(numpy.int64), counts.astype(numpy.int64)


def _unique_consecutive_fwd(xp, input, dim=None):  # noqa: A002
    if dim is None:
        rows = input.reshape(-1, 1)
    else:
        rows = xp.moveaxis(input, dim, 0)
        rows = rows.reshape(rows.shape[0], -1)
    n = rows.shape[0]
    if n == 0:
        starts = xp.zeros(0, numpy.int64)
    else:
        changed = xp.any(rows[1:] != rows[:-1], axis=1)
        starts = xp.concatenate([xp.ones(1, bool), changed]).nonzero()[0]
    bounds = xp.concatenate([starts, xp.asarray([n])]) if n else starts
    counts = (bounds[1:] - bounds[:-1]) if n else starts
    inverse = xp.cumsum(xp.concatenate([xp.zeros(1, numpy.int64),
                                        changed.astype(numpy.int64)])) if n else starts
    if dim is None:
        values = input.reshape(-1)[starts]
        inverse = inverse.reshape(input.shape)
    else:
        values = xp.take(input, starts, axis=dim)
    return values, inverse.astype(numpy.int64), counts.astype(numpy.int64)


defop("unique", _unique_fwd, nout=3)
defop("unique_consecutive", _unique_consecutive_fwd, nout=3)


def _unique_result(outs, return_inverse, return_counts):
    values, inverse, counts = outs
    if not (return_inverse or return_counts):
        return values
    return (values,) + ((inverse,) if return_inverse else ()) + ((counts,) if return_counts else ())


def _unique_dim(input, dim):  # noqa: A002
    if dim is None:
        return None
    ndim = builtins.max(input.ndim, 1)
    if not -ndim <= dim < ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, "
                         f"{ndim - 1}], but got {dim})")
    return dim % ndim


@expose(public="unique", methods="unique")
def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """The distinct values (or slices along ``dim``), sorted (``sorted=False`` sorts too, as
    PyTorch's on the CPU), with where each element went (``return_inverse``) and how often each
    occurs (``return_counts``)."""
    if input.ndim == 0 and dim is None:
        input = input.reshape(1)
        outs = _call("unique", input)
        return _unique_result((outs[0], outs[1].reshape(()), outs[2]), return_inverse,
                              return_counts)
    return _unique_result(_call("unique", input, dim=_unique_dim(input, dim)), return_inverse,
                          return_counts)


@expose(public="unique_consecutive", methods="unique_consecutive")
def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """The first of each run of equal consecutive values (or slices along ``dim``)."""
    if input.ndim == 0 and dim is None:
        outs = _call("unique_consecutive", input.reshape(1))
        return _unique_result((outs[0], outs[1].reshape(()), outs[2]), return_inverse,
                              return_counts)
    return _unique_result(_call("unique_consecutive", input, dim=_unique_dim(input, dim)),
                          return_inverse, return_counts)
