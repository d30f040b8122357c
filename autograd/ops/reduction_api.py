"""The public functions of the reduction family (``reduction.py``) that are more than a call
of one op: ``max``/``min`` with their (values, indices) results, ``softmax``'s dtype, the
cumulative ops, sorting and order statistics (``sort``, ``topk``, ``median``, ``mode``,
``quantile``), ``nansum``/``nanmean`` and ``var_mean``.
"""
from __future__ import annotations

from collections import namedtuple

from ..dispatch import defcomposite, expose, expose_inplace
from ..dtypes import is_floating
from ..promotion import torch_name
from .._tensor import Tensor
from .arguments import _call, _dim, _reduction_dim
from .elementwise_api import lerp
from .indexing_api import gather
from .reduction import norm_dims, var
from .shape_api import _reshape, movedim, narrow, squeeze


MaxResult = namedtuple("max", ["values", "indices"])
MinResult = namedtuple("min", ["values", "indices"])


@expose(public="amax", methods="amax")
def amax(x, dim=None, keepdim: bool = False):
    norm_dims(dim, x.ndim)
    return _call("amax", x, dim=dim, keepdim=keepdim)


@expose(public="amin", methods="amin")
def amin(x, dim=None, keepdim: bool = False):
    norm_dims(dim, x.ndim)
    return _call("amin", x, dim=dim, keepdim=keepdim)


def _extreme(name, whole, elementwise, result, x, dim, keepdim):
    """max/min: over all of ``x``, along ``dim`` as (values, indices), or against a tensor."""
    if isinstance(dim, Tensor):
        return _call(elementwise, x, dim)
    if dim is None:
        return _call(whole, x)
    d = _dim(dim, x.ndim, name)
    if x.ndim == 0:   # PyTorch: a 0-d tensor is its own max along dim 0, at index 0
        values, indices = _call(name, _reshape(x, (1,)), dim=0, keepdim=False)
        return result(_reshape(values, ()), _reshape(indices, ()))
    return result(*_call(name, x, dim=d, keepdim=keepdim))


@expose(public="max", methods="max")
def max(x, dim=None, keepdim: bool = False):  # noqa: A001
    """The largest value; with ``dim`` an int, ``(values, indices)`` along it; with a tensor,
    the elementwise maximum."""
    return _extreme("max", "max.full", "maximum", MaxResult, x, dim, keepdim)


@expose(public="min", methods="min")
def min(x, dim=None, keepdim: bool = False):  # noqa: A001
    """The smallest value; with ``dim`` an int, ``(values, indices)`` along it; with a tensor,
    the elementwise minimum."""
    return _extreme("min", "min.full", "minimum", MinResult, x, dim, keepdim)


@expose(public="argmax", methods="argmax")
def argmax(x, dim=None, keepdim: bool = False):
    return _call("argmax", x, dim=None if dim is None else _dim(dim, x.ndim, "argmax"),
                 keepdim=keepdim)


@expose(public="argmin", methods="argmin")
def argmin(x, dim=None, keepdim: bool = False):
    return _call("argmin", x, dim=None if dim is None else _dim(dim, x.ndim, "argmin"),
                 keepdim=keepdim)


@expose(public="logsumexp", methods="logsumexp")
def logsumexp(x, dim=None, keepdim: bool = False):
    norm_dims(dim, x.ndim)
    return _call("logsumexp", x, dim=dim, keepdim=keepdim)


@expose(public="prod", methods="prod")
def prod(x, dim=None, keepdim: bool = False, *, dtype=None):
    """Product over ``dim`` (one int; all dims by default); ``dtype`` as :func:`sum`'s."""
    if dtype is not None:
        x = x.to(dtype=dtype)
    norm_dims(dim, x.ndim)
    return _call("prod" if dim is None else "prod.dim", x, dim=dim, keepdim=keepdim)


@expose(public="softmax", methods="softmax")
def softmax(x, dim: int, dtype=None):
    """Softmax along ``dim``; ``dtype``: ``x`` is cast to it before the op (a recorded cast),
    as PyTorch's."""
    if dtype is not None:
        x = x.to(dtype=dtype)
    return _call("softmax", x, dim=_dim(dim, x.ndim, "softmax"))


@expose(public="log_softmax", methods="log_softmax")
def log_softmax(x, dim: int, dtype=None):
    """Log-softmax along ``dim``; ``dtype`` as :func:`softmax`'s."""
    if dtype is not None:
        x = x.to(dtype=dtype)
    return _call("log_softmax", x, dim=_dim(dim, x.ndim, "log_softmax"))


@defcomposite("msort", public="msort", methods="msort")
def msort(input):  # noqa: A002
    """``input`` sorted along dim 0."""
    return sort(input, 0).values


def _along_last(x, d):
    """``x`` with dim ``d`` moved last (a view)."""
    return movedim(x, d, -1) if d != x.ndim - 1 else x


@expose(public="cumsum", methods="cumsum")
def cumsum(x, dim, *, dtype=None):
    """Cumulative sum along ``dim``."""
    if dtype is not None:
        x = x.to(dtype=dtype)
    return _call("cumsum", x, dim=_dim(dim, x.ndim, "cumsum") if x.ndim else 0)


@expose(public="cumprod", methods="cumprod")
def cumprod(x, dim, *, dtype=None):
    """Cumulative product along ``dim`` (exact gradients with zeros, as PyTorch's)."""
    if dtype is not None:
        x = x.to(dtype=dtype)
    return _call("cumprod", x, dim=_dim(dim, x.ndim, "cumprod") if x.ndim else 0)


expose_inplace(cumsum, "cumsum_")
expose_inplace(cumprod, "cumprod_")



@expose(public="logcumsumexp", methods="logcumsumexp")
def logcumsumexp(x, dim):
    """``log(cumsum(exp(x)))`` along ``dim``, computed stably."""
    return _call("logcumsumexp", x, dim=_dim(dim, x.ndim, "logcumsumexp") if x.ndim else 0)


CummaxResult = namedtuple("cummax", ["values", "indices"])
CumminResult = namedtuple("cummin", ["values", "indices"])


@expose(public="cummax", methods="cummax")
def cummax(x, dim):
    """``(values, indices)``: the running maximum along ``dim`` and where it was taken (ties
    and NaNs: the last index; a NaN propagates), as PyTorch's."""
    return CummaxResult(*_call("cummax", x, dim=_reduction_dim(dim, x.ndim)))


@expose(public="cummin", methods="cummin")
def cummin(x, dim):
    """``(values, indices)``: the running minimum along ``dim`` (as :func:`cummax`)."""
    return CumminResult(*_call("cummin", x, dim=_reduction_dim(dim, x.ndim)))


@expose(public="nansum", methods="nansum")
def nansum(x, dim=None, keepdim=False, *, dtype=None):
    """Sum treating NaN as 0."""
    if dtype is not None:
        x = x.to(dtype=dtype)
    norm_dims(dim, x.ndim)
    return _call("nansum", x, dim=dim, keepdim=keepdim)


@defcomposite("nanmean", public="nanmean", methods="nanmean")
def nanmean(x, dim=None, keepdim=False, *, dtype=None):
    """Mean of the entries that are not NaN (PyTorch's: nansum over their count)."""
    if dtype is not None:
        x = x.to(dtype=dtype)
    if not is_floating(x.dtype):   # PyTorch's refusal (NumPy would answer in float64)
        raise RuntimeError("nanmean(): expected input to have floating point or complex dtype "
                           f"but got {torch_name(x.dtype)}")
    count = (~_call("isnan", x)).sum(dim=dim, keepdim=keepdim)
    return nansum(x, dim, keepdim) / count


AminmaxResult = namedtuple("aminmax", ["min", "max"])


@expose(public="aminmax", methods="aminmax")
def aminmax(x, *, dim=None, keepdim=False):
    """``(amin, amax)`` over ``dim`` (all dims by default)."""
    return AminmaxResult(amin(x, dim, keepdim), amax(x, dim, keepdim))


@expose(public="var_mean")
def var_mean(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """``(var, mean)`` over ``dim``."""
    return (var(x, dim, unbiased, keepdim, correction=correction),
            x.mean(dim=dim, keepdim=keepdim))


SortResult = namedtuple("sort", ["values", "indices"])
TopkResult = namedtuple("topk", ["values", "indices"])
KthvalueResult = namedtuple("kthvalue", ["values", "indices"])
MedianResult = namedtuple("median", ["values", "indices"])
NanmedianResult = namedtuple("nanmedian", ["values", "indices"])


@expose(public="sort", methods="sort")
def sort(x, dim=-1, descending=False, stable=False):
    """``(values, indices)`` sorted along ``dim`` (ties keep their order)."""
    d = _dim(dim, x.ndim, "sort") if x.ndim else 0
    return SortResult(*_call("sort", x, dim=d, descending=bool(descending), stable=bool(stable)))


@expose(public="argsort", methods="argsort")
def argsort(x, dim=-1, descending=False, stable=False):
    """The indices that sort ``x`` along ``dim``."""
    return sort(x, dim, descending, stable).indices


def _pick(x, d, start, length):
    return narrow(x, d, start, length) if x.ndim else x


@expose(public="topk", methods="topk")
def topk(x, k, dim=-1, largest=True, sorted=True):  # noqa: A002
    """The ``k`` largest (or smallest) entries along ``dim`` and their indices."""
    d = _dim(dim, x.ndim, "topk") if x.ndim else 0
    size = x.shape[d] if x.ndim else 1
    if not 0 <= k <= size:
        raise RuntimeError(f"topk: selected index k out of range (k={k}, size {size})")
    return TopkResult(*_call("topk", x, k=int(k), dim=d, largest=bool(largest),
                             sorted=bool(sorted)))


def _order_stat(name, result, x, dim, keepdim, **attrs):
    """(values, indices) of an order statistic along ``dim``; a 0-d tensor is its own, at 0."""
    if x.ndim == 0:
        _dim(dim, 0, name)
        values, indices = _call(name, _reshape(x, (1,)), dim=0, keepdim=False, **attrs)
        return result(_reshape(values, ()), _reshape(indices, ()))
    return result(*_call(name, x, dim=_dim(dim, x.ndim, name), keepdim=bool(keepdim), **attrs))


@expose(public="kthvalue", methods="kthvalue")
def kthvalue(x, k, dim=-1, keepdim=False):
    """The ``k``-th smallest entry (1-based) along ``dim`` and its index."""
    d = _dim(dim, x.ndim, "kthvalue") if x.ndim else 0
    size = x.shape[d] if x.ndim else 1
    if not 1 <= k <= size:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    return _order_stat("kthvalue", KthvalueResult, x, dim, keepdim, k=int(k))


@expose(public="median", methods="median")
def median(x, dim=None, keepdim=False):
    """The lower median (of an even count, the smaller middle value; NaN if there is one),
    as PyTorch's; with ``dim``, ``(values, indices)`` along it."""
    if dim is None:
        return _call("median", x)
    return _order_stat("median.dim", MedianResult, x, dim, keepdim)


@expose(public="nanmedian", methods="nanmedian")
def nanmedian(x, dim=None, keepdim=False):
    """The lower median of the entries that are not NaN; with ``dim``, ``(values, indices)``
    along it."""
    if dim is None:
        return _call("nanmedian", x)
    return _order_stat("nanmedian.dim", NanmedianResult, x, dim, keepdim)


ModeResult = namedtuple("mode", ["values", "indices"])


@expose(public="mode", methods="mode")
def mode(x, dim=-1, keepdim=False):
    """The most frequent value along ``dim`` (the smallest of equally frequent ones) and the
    index of its last occurrence; NaNs count as one value, the largest."""
    d = _reduction_dim(dim, x.ndim)
    if x.ndim and x.shape[d] == 0:
        raise IndexError(f"mode(): Expected reduction dim {d} to have non-zero size.")
    return ModeResult(*_call("mode", x, dim=d, keepdim=bool(keepdim)))


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(x, q, dim, keepdim, interpolation, ignore_nan):
    """PyTorch's quantile_compute: the sorted line, each q's rank in it (q * (n - 1); n counts
    the entries that are not NaN for nanquantile; a line with a NaN gives NaN for quantile),
    rounded as ``interpolation`` says, and the entries below and above it interpolated. A
    composite of sort, gather and lerp, so its gradient is theirs (PyTorch's is too)."""
    if x.dtype.kind != "f" or x.dtype.itemsize < 4:
        raise RuntimeError("quantile() input tensor must be either float or double dtype")
    xp = x.device.xp
    if isinstance(q, Tensor):
        if q.ndim > 1:
            raise RuntimeError("quantile() q must be a scalar or 1D tensor")
        if q.dtype != x.dtype:
            raise RuntimeError("quantile() q tensor must be same dtype as the input tensor")
        if q.device != x.device:
            raise RuntimeError("quantile() q tensor must be on the same device as the input "
                               "tensor")
        qa = q._data
        if qa.size and not bool(((qa >= 0) & (qa <= 1)).all()):
            raise RuntimeError("quantile() q values must be in the range [0, 1]")
        scalar = q.ndim == 0
    else:
        if not 0 <= q <= 1:
            raise RuntimeError(f"quantile() q must be in the range [0, 1] but got {q}")
        qa, scalar = xp.asarray(float(q), dtype=x.dtype), True
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"quantile() interpolation must be one of linear, lower, higher, "
                           f"midpoint or nearest, but got {interpolation}")
    if x.numel() == 0:
        raise RuntimeError("quantile() input tensor must be non-empty")
    if dim is None:
        kept = (1,) * x.ndim
        line = _reshape(x, (-1,))
    else:
        d = _reduction_dim(dim, x.ndim)
        kept = tuple(1 if i == d else s for i, s in enumerate(x.shape))
        line = _along_last(x, d) if x.ndim else _reshape(x, (1,))
    if not keepdim:
        kept = tuple(s for i, s in enumerate(kept) if dim is not None and i != d)
    sorted_ = sort(line, -1).values
    s = sorted_._data
    n = s.shape[-1]
    qa = qa.reshape(-1)
    if ignore_nan:   # all NaN: rank 0, whose entry is NaN
        ranks = qa * (xp.sum(~xp.isnan(s), axis=-1, keepdims=True) - 1)
        ranks = xp.where(ranks < 0, 0, ranks)
    else:            # a NaN: the last rank, whose entry is NaN
        ranks = xp.where(xp.isnan(s).any(axis=-1, keepdims=True), n - 1, qa * (n - 1))
    ranks = {"lower": xp.floor, "higher": xp.ceil, "nearest": xp.round}.get(
        interpolation, lambda r: r)(ranks).astype(s.dtype)

    def at(positions):
        return gather(sorted_, -1, Tensor._make(positions.astype("int64"), False, None, 0, [0],
                                                x.device))

    out = at(xp.floor(ranks))
    if interpolation in ("linear", "midpoint"):
        weight = ranks - xp.floor(ranks) if interpolation == "linear" else \
            xp.full(ranks.shape, 0.5, dtype=s.dtype)
        out = lerp(out, at(xp.ceil(ranks)), Tensor._make(weight, False, None, 0, [0], x.device))
    out = _reshape(out, kept + (qa.size,))
    return squeeze(out, -1) if scalar else movedim(out, -1, 0)


@defcomposite("quantile", public="quantile", methods="quantile")
def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):  # noqa: A002
    """The ``q``-quantiles (a number, or a 0-d or 1-D tensor: one result per q, first) of
    ``input`` along ``dim`` (all of it by default); a line with a NaN gives NaN.
    ``interpolation``: linear, lower, higher, midpoint or nearest (half to even)."""
    return _quantile(input, q, dim, keepdim, interpolation, ignore_nan=False)


@defcomposite("nanquantile", public="nanquantile", methods="nanquantile")
def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):  # noqa: A002
    """:func:`quantile` of the entries that are not NaN (NaN where a line is all NaN)."""
    return _quantile(input, q, dim, keepdim, interpolation, ignore_nan=True)
