"""The public functions of the indexing family (``indexing.py``): ``x[key]`` and
``x[key] = value``, ``gather``/``scatter``/``index_*`` and ``put`` with their index checks,
``nonzero``, ``masked_select``, ``take_along_dim`` and ``repeat_interleave``.
"""
from __future__ import annotations

import builtins
import numbers

import numpy

from ..dispatch import OPS, apply_inplace, apply_op, defcomposite, expose
from ..promotion import torch_name
from .._tensor import Tensor
from .arguments import _call, _dim, _reduction_dim
from .indexing import SCATTER_REDUCES
from .shape_api import _reshape, expand, reshape, unsqueeze


def _check_index(op, x, dim, index, src=None):
    if not isinstance(index, Tensor) or index.dtype.kind not in "iu":
        raise TypeError(f"{op}: index must be an integer tensor, got "
                        f"{getattr(index, 'dtype', type(index).__name__)}")
    if index.ndim != x.ndim:
        raise RuntimeError(f"{op}: index has {index.ndim} dims (shape {list(index.shape)}) but "
                           f"input has {x.ndim} (shape {list(x.shape)})")
    for k, (i, s) in enumerate(zip(index.shape, x.shape)):
        if k != dim and i > s:
            raise RuntimeError(f"{op}: index shape {list(index.shape)} is larger than input "
                               f"shape {list(x.shape)} in dim {k}")
    if src is not None and any(i > s for i, s in zip(index.shape, src.shape)):
        raise RuntimeError(f"{op}: index shape {list(index.shape)} is larger than src shape "
                           f"{list(src.shape)}")
    size = x.shape[dim] if x.ndim else 1   # a 0-d tensor: dim 0 of size 1, as PyTorch's
    if index.numel():
        lo, hi = int(index._data.min()), int(index._data.max())
        if lo < -size or hi >= size:
            bad = hi if hi >= size else lo
            # RuntimeError, as PyTorch's gather/scatter (its indexing raises IndexError)
            raise RuntimeError(f"{op}: index {bad} is out of bounds for dimension {dim} with "
                               f"size {size}")


@expose(public="gather", methods="gather")
def gather(x, dim: int, index):
    """``out[i][j] = x[index[i][j]][j]`` along ``dim`` (like ``take_along_axis``)."""
    d = _dim(dim, x.ndim, "gather")
    _check_index("gather", x, d, index)
    return _call("gather", x, index, dim=d)


@expose(public="scatter_add", methods="scatter_add")
def scatter_add(x, dim: int, index, src):
    """A copy of ``x`` with ``src`` added at ``index`` along ``dim`` (repeats summed)."""
    d = _dim(dim, x.ndim, "scatter_add")
    _check_index("scatter_add", x, d, index, src)
    return _call("scatter_add", x, index, src, dim=d)


@expose(public="index_select", methods="index_select")
def index_select(x, dim: int, index):
    """Entries ``index`` (1-D integer tensor) of dim ``dim``."""
    d = _dim(dim, x.ndim, "index_select")
    idx = index._data if isinstance(index, Tensor) else x.device.xp.asarray(index)
    if idx.ndim > 1:   # torch's words (a 0-d index is one entry)
        raise IndexError("index_select(): Index is supposed to be a vector")
    if idx.dtype.kind not in "iu":
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    return _call("index_select", x, index=idx.reshape(-1), dim=d)


@expose(public="take", methods="take")
def take(x, index):
    """The entries of ``x`` flattened at ``index`` (any shape; negatives count from the end)."""
    idx = x.device.xp.asarray(index._data if isinstance(index, Tensor) else index)
    if idx.dtype.kind not in "iu":
        raise RuntimeError("take(): Expected a long tensor for index")
    n = x.numel()
    if idx.size and (int(idx.max()) >= n or int(idx.min()) < -n):
        raise IndexError(f"out of range: tried to access index {int(idx.max())} on a tensor "
                         f"of {n} elements.")
    return _call("take", x, index=idx)


def index_put_(x, key, value):
    """``x[key] = value`` in place (bumps the version; recorded as IndexPutBackward0)."""
    return apply_inplace(OPS["index_put"], x, (value,), {"key": key})


def _index_put_key(x, indices, values):
    """``indices`` (a tuple of integer or boolean tensors, None for a whole dim) as an index
    key, checked as PyTorch checks it (classes and words)."""
    if not isinstance(values, Tensor):
        raise TypeError(f"index_put(): argument 'values' (position 2) must be Tensor, not "
                        f"{type(values).__name__}")
    if values.dtype != x.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{torch_name(x.dtype)} for the destination and "
                           f"{torch_name(values.dtype)} for the source.")
    if isinstance(indices, Tensor):
        indices = (indices,)
    import numpy  # noqa: PLC0415 - host shape arithmetic only

    key, shapes, dim = [], [], 0
    for n, k in enumerate(indices):
        if not isinstance(k, Tensor):
            raise TypeError(f"expected Tensor as element {n} in argument 0, but got "
                            f"{type(k).__name__}")
        if k.dtype.kind not in "iub":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        if k.dtype.kind == "b" or k.dtype == numpy.uint8:   # a mask over k.ndim dims
            if tuple(k.shape) != tuple(x.shape[dim:dim + k.ndim]):
                raise IndexError(f"The shape of the mask {list(k.shape)} at index {dim} does "
                                 f"not match the shape of the indexed tensor "
                                 f"{list(x.shape)} at index {dim}")
            mask = k._data.astype(bool)
            key.append(mask)
            shapes.append((int(mask.sum()),))
            dim += k.ndim
            continue
        if dim >= x.ndim:
            raise IndexError(f"too many indices for tensor of dimension {x.ndim} (got "
                             f"{len(indices)})")
        size = x.shape[dim]
        if k.numel():
            lo, hi = int(k._data.min()), int(k._data.max())
            if lo < -size or hi >= size:
                raise IndexError(f"index {hi if hi >= size else lo} is out of bounds for "
                                 f"dimension {dim} with size {size}")
        key.append(k._data)
        shapes.append(tuple(k.shape))
        dim += 1
    # The indexed shape: the indices broadcast together, then the dims they do not index.
    try:
        shape = numpy.broadcast_shapes(*shapes) + tuple(x.shape[dim:])
    except ValueError:
        raise IndexError(f"shape mismatch: indexing tensors could not be broadcast together "
                         f"with shapes {', '.join(str(list(s)) for s in shapes)}") from None
    try:
        fits = numpy.broadcast_shapes(tuple(values.shape), shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(values.shape)} cannot "
                           f"be broadcast to indexing result of shape {list(shape)}")
    return tuple(key)


@expose(public="index_put", methods="index_put")
def index_put(input, indices, values, accumulate=False):  # noqa: A002 - PyTorch's names
    """A copy of ``input`` with ``values`` written (``accumulate``: added, repeats summing up)
    at ``indices``, a tuple of integer or boolean tensors as in ``input[indices]``. Without
    accumulate a position indexed twice gets one of its writes (PyTorch: undefined which)."""
    key = _index_put_key(input, indices, values)
    return _call("index_put", input, values, key=key, accumulate=bool(accumulate))


@expose(methods="index_put_")
def _index_put_inplace(x, indices, values, accumulate=False):
    """In-place :func:`index_put` (IndexPutBackward0, as PyTorch's)."""
    key = _index_put_key(x, indices, values)
    return apply_inplace(OPS["index_put"], x, (values,), {"key": key,
                                                          "accumulate": bool(accumulate)})


def _put_index(name, x, index, source):
    """put's flat positions, checked as PyTorch checks them (classes and words), negatives
    wrapped."""
    if not isinstance(index, Tensor) or index.dtype != numpy.int64:
        got = torch_name(index.dtype) if isinstance(index, Tensor) else type(index).__name__
        raise RuntimeError(f"{name}(): Expected a long tensor for index, but got {got}")
    if source.dtype != x.dtype:
        raise RuntimeError(f"{name}(): self and source expected to have the same dtype, but got "
                           f"self.dtype = {torch_name(x.dtype)} and source.dtype = "
                           f"{torch_name(source.dtype)}")
    if source.numel() != index.numel():
        raise IndexError(f"{name}(): Expected source and index to have the same number of "
                         f"elements, but got source.numel() = {source.numel()}, index.numel() = "
                         f"{index.numel()}")
    n, idx = x.numel(), index._data.reshape(-1)
    if idx.size:
        lo, hi = int(idx.min()), int(idx.max())
        bad = lo if lo < -n else hi if hi >= n else None
        if bad is not None:
            raise IndexError(f"out of range: tried to access index {bad} on a tensor of {n} "
                             "elements.")
    return idx % builtins.max(n, 1)


@expose(public="put", methods="put")
def put(input, index, source, accumulate=False):  # noqa: A002 - PyTorch's names
    """A copy of ``input`` with ``source`` written at the flat positions ``index`` (an int64
    tensor, negatives from the end), as if ``input`` were 1-D; ``accumulate``: added, repeats
    summing up (PutBackward0, as PyTorch's)."""
    idx = _put_index("put_", input, index, source)   # PyTorch's words name put_ here too
    return _call("put", input, source, index=idx, accumulate=bool(accumulate))


@expose(methods="put_")
def put_(x, index, source, accumulate=False):
    """In-place :func:`put` (PutBackward0 too, as PyTorch's)."""
    idx = _put_index("put_", x, index, source)
    return apply_inplace(OPS["put"], x, (source,), {"index": idx, "accumulate": bool(accumulate)})


def _index_key(key):
    """Tensors inside an index become arrays (they index, they are not differentiated)."""
    if isinstance(key, Tensor):
        return key._data
    if isinstance(key, tuple):
        return tuple(k._data if isinstance(k, Tensor) else k for k in key)
    if isinstance(key, list):
        return key if not any(isinstance(k, Tensor) for k in key) else [
            k.item() if isinstance(k, Tensor) else k for k in key]
    return key


@expose(methods="__getitem__")
def _getitem(self, key):
    """``x[key]``: ints, slices, None and ``...`` as PyTorch's view ops, one per entry that
    changes something (``x[1:3]`` SliceBackward0, ``x[:, 0]`` SelectBackward0, ``x[None]``
    UnsqueezeBackward0, ``x[...]`` AliasBackward0); anything else (integer or boolean
    arrays, lists, tensors, a negative step) as one ``index`` op (IndexBackward0)."""
    steps = _basic_steps(self.shape, key)
    if steps is None:
        return apply_op(OPS["index"], (self,), {"key": _index_key(key)})
    out = self
    for name, attrs in steps:
        out = apply_op(OPS[name], (out,), attrs)
    return out


def _is_index(k) -> bool:
    """An integer for indexing (Python's or NumPy's, not a bool; a 0-d integer tensor, as
    PyTorch takes it), or None (a slice bound)."""
    if k is None or k.__class__ is int:
        return True
    if isinstance(k, Tensor):
        return k.ndim == 0 and k.dtype.kind in "iu"
    return isinstance(k, numbers.Integral) and k.__class__ is not bool


def _basic_steps(shape, key):
    """The view ops ``x[key]`` is, in PyTorch's order (left to right: ``select`` for an int,
    ``slice`` for a slice that is not the whole dim, ``unsqueeze`` for None), as
    ``[(op, attrs)]``; None when ``key`` holds anything else.

    PyTorch's rules: a lone slice is always a ``slice`` (``x[:]`` too); in a tuple a whole-dim
    slice is skipped, and a key that changes nothing is an ``alias``."""
    lone = key.__class__ is slice
    items = key if key.__class__ is tuple else (key,)
    consumed = 0
    for k in items:
        if k is None or k is Ellipsis:
            continue
        if k.__class__ is slice:
            if not (_is_index(k.start) and _is_index(k.stop) and _is_index(k.step)):
                return None
        elif not _is_index(k):
            return None
        consumed += 1
    if items.count(Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if consumed > len(shape):
        raise IndexError("slice() cannot be applied to a 0-dim tensor." if lone else
                         f"too many indices for tensor of dimension {len(shape)}")
    ndim, shape = len(shape), list(shape)
    steps, dim = [], 0
    for k in items:
        if k is None:
            steps.append(("unsqueeze", {"dim": dim}))
            shape.insert(dim, 1)
            dim += 1
        elif k is Ellipsis:      # the dims no int or slice takes, left as they are
            dim += ndim - consumed
        elif k.__class__ is slice:
            start, stop, step = k.indices(shape[dim])
            if step <= 0:
                return None
            if lone or (start, stop, step) != (0, shape[dim], 1):
                stop = builtins.max(stop, start)
                steps.append(("slice", {"dim": dim, "start": start, "end": stop, "step": step}))
                shape[dim] = len(range(start, stop, step))
            dim += 1
        else:
            i, size = int(k), shape[dim]
            if not -size <= i < size:
                raise IndexError(f"index {i} is out of bounds for dimension {dim} with size {size}")
            steps.append(("select", {"dim": dim, "index": i % size}))
            shape.pop(dim)
    return steps or [("alias", {})]


@expose(methods="__setitem__")
def _setitem(self, key, value):
    index_put_(self, _index_key(key), value)


@expose(public="nonzero", methods="nonzero")
def nonzero(input, *, as_tuple=False):  # noqa: A002
    """The indices of the nonzero entries: an (n, ndim) int64 tensor, or with ``as_tuple`` one
    1-D tensor per dim (a 0-d input counts as 1-D)."""
    if not as_tuple:
        return _call("nonzero", input)
    idx = _call("nonzero", input if input.ndim else _reshape(input, (1,)))
    return tuple(idx[:, i] for i in range(idx.shape[1]))


@expose(public="argwhere", methods="argwhere")
def argwhere(input):  # noqa: A002
    """:func:`nonzero` as an (n, ndim) tensor."""
    return _call("nonzero", input)


@expose(public="scatter", methods="scatter")
def scatter(x, dim, index, src=None, *, value=None, reduce=None):
    """A copy of ``x`` with ``src`` (a tensor, or a number ``value``) written at ``index``
    along ``dim``."""
    d, index, src = _scatter_args("scatter", x, dim, index, src, value)
    if reduce is not None:
        return scatter_reduce(x, d, index, _legacy_reduce_src(x, index, src),
                              _legacy_reduce(reduce))
    if not isinstance(src, Tensor):   # PyTorch's scatter.value: ScatterBackward1
        return _call("scatter.value", x, index, value=src, dim=d)
    return _call("scatter", x, index, src, dim=d)


@expose(methods="scatter_")
def scatter_(x, dim, index, src=None, *, value=None, reduce=None):
    """In-place :func:`scatter` (ScatterBackward0, or ScatterBackward1 for a number, as
    PyTorch's). ``reduce="add"|"multiply"`` (PyTorch's deprecated argument) runs as
    ``scatter_reduce_(..., "sum"|"prod")``: ScatterReduceBackward0 with its gradient, where
    PyTorch records a node whose backward raises."""
    d, index, src = _scatter_args("scatter_", x, dim, index, src, value)
    if reduce is not None:
        return scatter_reduce_(x, d, index, _legacy_reduce_src(x, index, src),
                               _legacy_reduce(reduce))
    if not isinstance(src, Tensor):
        return apply_inplace(OPS["scatter.value"], x, (index,), {"value": src, "dim": d})
    return apply_inplace(OPS["scatter"], x, (index, src), {"dim": d})


def _scatter_args(name, x, dim, index, src, value):
    """scatter's dim, checked index, and source (a tensor in x's dtype, or a number)."""
    if src is None:
        src = value
    d = _dim(dim, x.ndim, name)
    _check_index(name, x, d, index, src if isinstance(src, Tensor) else None)
    if isinstance(src, Tensor) and src.dtype != x.dtype:
        src = src.to(dtype=x.dtype)
    return d, index, src


def _legacy_reduce(reduce):
    """scatter's deprecated ``reduce`` as scatter_reduce's."""
    if reduce not in ("add", "multiply"):
        raise RuntimeError("reduce argument must be either add or multiply.")
    return "sum" if reduce == "add" else "prod"


def _legacy_reduce_src(x, index, src):
    return src if isinstance(src, Tensor) else x.new_full(tuple(index.shape), src)


@expose(methods="scatter_add_")
def scatter_add_(x, dim: int, index, src):
    """In-place :func:`scatter_add` (ScatterAddBackward0, as PyTorch's)."""
    d = _dim(dim, x.ndim, "scatter_add_")
    _check_index("scatter_add_", x, d, index, src)
    return apply_inplace(OPS["scatter_add"], x, (index, src), {"dim": d})


def _scatter_reduce_args(x, dim, index, src, reduce):
    """scatter_reduce's checks, with PyTorch's classes and words; the dim."""
    if not isinstance(src, Tensor):
        raise TypeError(f"scatter_reduce(): argument 'src' (position 3) must be Tensor, not "
                        f"{type(src).__name__}")
    if reduce not in SCATTER_REDUCES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, "
                           f"got {reduce}")
    d = _reduction_dim(dim, x.ndim)
    if not isinstance(index, Tensor) or index.dtype.kind not in "iu":
        raise RuntimeError("scatter(): Expected dtype int32/int64 for index")
    if src.dtype != x.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    if index.ndim != x.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    if index.ndim != src.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    if any(i > s for k, (i, s) in enumerate(zip(index.shape, x.shape)) if k != d) or any(
            i > s for i, s in zip(index.shape, src.shape)):
        raise RuntimeError(f"Expected index {list(index.shape)} to be no larger than self "
                           f"{list(x.shape)} apart from dimension {d} and to be no larger size "
                           f"than src {list(src.shape)}")
    size = x.shape[d] if x.ndim else 1
    if index.numel():
        lo, hi = int(index._data.min()), int(index._data.max())
        if lo < 0 or hi >= size:   # no negative index in the scatter family
            raise RuntimeError(f"index {lo if lo < 0 else hi} is out of bounds for dimension "
                               f"{d} with size {size}")
    return {"dim": d, "reduce": reduce}


@expose(public="scatter_reduce", methods="scatter_reduce")
def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):  # noqa: A002
    """A copy of ``input`` with ``src`` reduced in at ``index`` along ``dim``: ``reduce`` is
    "sum", "prod", "mean", "amax" or "amin"; ``include_self`` says whether input's own entry
    takes part (a target no index reaches keeps it either way)."""
    attrs = _scatter_reduce_args(input, dim, index, src, reduce)
    if input.ndim == 0:   # as one entry along dim 0 (the scatter primitives need a dim)
        one = scatter_reduce(_reshape(input, (1,)), 0, _reshape(index, (1,)), _reshape(src, (1,)),
                             reduce, include_self=include_self)
        return _reshape(one, ())
    return _call("scatter_reduce", input, index, src, **attrs, include_self=bool(include_self))


@expose(methods="scatter_reduce_")
def scatter_reduce_(x, dim, index, src, reduce, *, include_self=True):
    """In-place :func:`scatter_reduce` (ScatterReduceBackward0 too, as PyTorch's)."""
    attrs = _scatter_reduce_args(x, dim, index, src, reduce)
    return apply_inplace(OPS["scatter_reduce"], x, (index, src),
                         dict(attrs, include_self=bool(include_self)))


def _index_reduce_args(x, dim, index, source, reduce, include_self):
    """index_reduce's checks in PyTorch's words; its 1-D index spread over source's shape,
    so that it runs as scatter_reduce's op does."""
    if reduce not in SCATTER_REDUCES[1:]:
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or "
                           f"amin but got {reduce}.")
    d = _reduction_dim(dim, x.ndim)
    if index.ndim > 1:
        raise IndexError(f"index_reduce_(): Index is supposed to be a vector, but got dim: "
                         f"{index.ndim} with type: {torch_name(index.dtype)} "
                         f"and size: {list(index.shape)}")
    if index.dtype.kind not in "iu":
        raise RuntimeError(f"index_reduce_(): Expected dtype int32/int64 for index but got: "
                           f"{torch_name(index.dtype)}")
    if source.dtype != x.dtype:
        raise RuntimeError(f"index_reduce_(): self ({torch_name(x.dtype)}) and source "
                           f"({torch_name(source.dtype)}) must have the same scalar type")
    if source.ndim != builtins.max(x.ndim, 1) or any(
            a != b for k, (a, b) in enumerate(zip(x.shape, source.shape)) if k != d):
        raise RuntimeError(f"source tensor shape must match self tensor shape, excluding the "
                           f"specified dimension. Got self.shape = {list(x.shape)} "
                           f"source.shape = {list(source.shape)}")
    count = index.numel()
    if source.shape[d] != count:
        raise RuntimeError(f"index_reduce_(): Number of indices ({count}) should be equal to "
                           f"source.size(dim): ({source.shape[d]}), for dim: {d}")
    if count and (int(index._data.min()) < 0 or int(index._data.max()) >= x.shape[d]):
        raise IndexError("index out of range in self")
    shape = [1] * x.ndim
    shape[d] = count
    xp = x.device.xp
    spread = xp.broadcast_to(index._data.reshape(shape), source.shape).astype("int64")
    return (Tensor._make(spread, False, None, 0, [0], x.device),
            {"dim": d, "reduce": reduce, "include_self": bool(include_self)})


@expose(public="index_reduce", methods="index_reduce")
def index_reduce(input, dim, index, source, reduce, *, include_self=True):  # noqa: A002
    """A copy of ``input`` with the slices of ``source`` reduced in at ``index`` (1-D) along
    ``dim``: ``reduce`` is "prod", "mean", "amax" or "amin" (PyTorch's IndexReduceBackward0)."""
    spread, attrs = _index_reduce_args(input, dim, index, source, reduce, include_self)
    return apply_op(OPS["index_reduce"], (input, spread, source), attrs)


@expose(methods="index_reduce_")
def index_reduce_(x, dim, index, source, reduce, *, include_self=True):
    """In-place :func:`index_reduce`."""
    spread, attrs = _index_reduce_args(x, dim, index, source, reduce, include_self)
    return apply_inplace(OPS["index_reduce"], x, (spread, source), attrs)


def _index_add_key(x, dim, index):
    """index_add's key along ``dim`` (checked: a 1-D index)."""
    d = _dim(dim, x.ndim, "index_add")
    idx = index._data if isinstance(index, Tensor) else index
    if getattr(idx, "ndim", 1) != 1:
        raise RuntimeError(f"index_add_(): Index is supposed to be a vector, got shape "
                           f"{list(idx.shape)}")
    return (slice(None),) * d + (idx,)


@expose(public="index_add", methods="index_add")
def index_add(x, dim, index, source, *, alpha=1):
    """A copy of ``x`` with ``alpha * source`` added at ``index`` (1-D) along ``dim``;
    repeated indices add up."""
    return _call("index_add", x, source, key=_index_add_key(x, dim, index), alpha=alpha)


@expose(methods="index_add_")
def index_add_(x, dim, index, source, *, alpha=1):
    """In-place :func:`index_add` (IndexAddBackward0 too, as PyTorch's)."""
    return apply_inplace(OPS["index_add"], x, (source,),
                         {"key": _index_add_key(x, dim, index), "alpha": alpha})


@expose(public="masked_select", methods="masked_select")
def masked_select(x, mask):
    """The entries of ``x`` where ``mask`` (broadcast together) is True, as a 1-D tensor
    (MaskedSelectBackward0, as PyTorch's)."""
    import numpy  # noqa: PLC0415 - shape arithmetic only

    m = mask._data if isinstance(mask, Tensor) else mask
    shape = numpy.broadcast_shapes(tuple(x.shape), tuple(m.shape))
    if tuple(x.shape) != tuple(shape):
        x = expand(x, shape)
    return _call("masked_select", x, mask=x.device.xp.broadcast_to(m, shape))


@defcomposite("take_along_dim", public="take_along_dim", methods="take_along_dim")
def take_along_dim(x, indices, dim=None):
    """``gather`` with broadcasting; with ``dim=None`` over the flattened input."""
    if dim is None:
        return gather(reshape(x, -1), 0, reshape(indices, -1))
    d = _dim(dim, x.ndim, "take_along_dim")
    xs, isz = list(x.shape), list(indices.shape)
    if len(xs) != len(isz):
        raise RuntimeError(f"take_along_dim: input and indices should have the same number of "
                           f"dimensions, but got {len(xs)} and {len(isz)}")
    import numpy  # noqa: PLC0415 - shape arithmetic only

    bx = list(numpy.broadcast_shapes(tuple(s for k, s in enumerate(xs) if k != d),
                                     tuple(s for k, s in enumerate(isz) if k != d)))
    x_shape, i_shape = bx[:d] + [xs[d]] + bx[d:], bx[:d] + [isz[d]] + bx[d:]
    if x_shape != xs:
        x = expand(x, x_shape)
    if i_shape != isz:
        indices = Tensor._make(x.device.xp.broadcast_to(indices._data, i_shape), False, None, 0,
                               [0], x.device)
    return gather(x, d, indices)


@defcomposite("repeat_interleave", public="repeat_interleave", methods="repeat_interleave")
def repeat_interleave(x, repeats, dim=None, *, output_size=None):
    """Each entry repeated ``repeats`` times (an int, or one count per entry) along ``dim``
    (of the flattened input by default)."""
    if dim is None:
        x, d = reshape(x, -1), 0
    else:
        d = _dim(dim, x.ndim, "repeat_interleave")
    xp = x.device.xp
    if not isinstance(repeats, Tensor):
        # PyTorch's for a number: each entry expanded along a new dim, copied, joined
        # (ViewBackward0 over CloneBackward0, ExpandBackward0, UnsqueezeBackward0).
        wide = list(x.shape)
        wide.insert(d + 1, int(repeats))
        joined = list(x.shape)
        joined[d] *= int(repeats)
        return reshape(expand(unsqueeze(x, d + 1), wide).clone(), joined)
    # PyTorch's for a tensor of counts: index_select (IndexSelectBackward0).
    idx = xp.repeat(xp.arange(x.shape[d]), repeats._data).astype("int64")
    return _call("index_select", x, index=idx, dim=d)
