"""The public functions that are more than a call of one op: argument checks with clear
messages and normalisation (``reshape``'s -1, ``permute``'s dims), composites of primitives,
and the Tensor methods that are not ops (casts, ``t``, ``x[key] = value``).

Each declares its public and Tensor method names with ``@expose`` or ``@defcomposite``; an op
that needs none of this gets its function and methods from its ``defop`` entry.
"""
from __future__ import annotations

import builtins
import numbers
import types
from collections import namedtuple

import numpy

from ..dispatch import (FUNCTIONS, OPS, apply_inplace, apply_op, defcomposite, expose,
                        expose_inplace)
from .. import promotion as _promotion
from ..dtypes import BFLOAT16, is_floating
from ..promotion import torch_name
from .._tensor import Tensor
from .indexing import SCATTER_REDUCES
from .reduction import norm_dims, var, vector_norm
from .shape import MAX_CAT_INPUTS


def _call(name, *inputs, **attrs):
    """Apply the primitive ``name`` to ``inputs`` with attributes ``attrs``."""
    return apply_op(OPS[name], inputs, attrs or None)


def _ndim(x) -> int:
    return x.ndim if hasattr(x, "ndim") else 0


def _dim(dim, ndim, op) -> int:
    """One dim, negatives allowed, checked against ``ndim``."""
    if not isinstance(dim, int):
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__}")
    if not -builtins.max(ndim, 1) <= dim < builtins.max(ndim, 1):
        raise IndexError(f"{op}: dimension {dim} is out of range for a tensor of {ndim} dims")
    return dim % builtins.max(ndim, 1)


# --------------------------------------------------------------------------- elementwise

@expose(public=("clamp", "clip"), methods=("clamp", "clip"))
def clamp(x, min=None, max=None):  # noqa: A002 - PyTorch's names
    """Limit values to ``[min, max]`` (either may be None; tensors are allowed)."""
    if min is None and max is None:
        raise ValueError("clamp: at least one of 'min' and 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return _call("clamp.Tensor", x, min, max)
    return _call("clamp", x, min=min, max=max)


@expose(methods=("clamp_", "clip_"))
def clamp_(x, min=None, max=None):  # noqa: A002
    """In-place :func:`clamp` with number bounds."""
    if min is None and max is None:
        raise ValueError("clamp_: at least one of 'min' and 'max' must not be None")
    return apply_inplace(OPS["clamp"], x, (), {"min": min, "max": max})


@expose(public="where")
def where(condition, input, other):  # noqa: A002
    """``input`` where ``condition`` holds, ``other`` elsewhere (broadcast)."""
    return _call("where", condition, input, other)


@expose(methods="where")
def _where_method(self, condition, other):
    """``Tensor.where(condition, other)``: ``self`` where ``condition`` holds."""
    return _call("where", condition, self, other)


def _fill_value(op, x, value):
    """A 0-d tensor ``value`` that needs a gradient or carries a tangent stays a tensor (it
    gets the sum of the gradient at the filled positions); any other is a number."""
    if not isinstance(value, Tensor):
        return value
    if value.ndim != 0:
        raise RuntimeError(f"{op} only supports a 0-dimensional value tensor, but got tensor "
                           f"with {value.ndim} dimension(s).")
    if value.requires_grad or value._extra and value._extra.get("tangents"):   # a dual tensor
        return value if value.dtype == x.dtype else value.to(dtype=x.dtype)
    return value.item()


@expose(public="masked_fill", methods="masked_fill")
def masked_fill(x, mask, value):
    """``x`` with ``value`` (a number or a 0-d tensor) where ``mask`` is True."""
    value = _fill_value("masked_fill", x, value)
    if isinstance(value, Tensor):
        return _call("where", mask, value, x)
    return _call("masked_fill", x, mask, value=value)


@expose(methods="masked_fill_")
def masked_fill_(x, mask, value):
    """In-place :func:`masked_fill`."""
    value = _fill_value("masked_fill_", x, value)
    if isinstance(value, Tensor):
        return x.copy_(_call("where", mask, value, x))
    return apply_inplace(OPS["masked_fill"], x, (mask,), {"value": value})


# --------------------------------------------------------------------------- reductions

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


# --------------------------------------------------------------------------- shape


def _reshape(x, shape):
    return _call("reshape", x, shape=tuple(shape))


def _sizes(sizes) -> tuple:
    """``f(x, 2, 3)`` and ``f(x, (2, 3))`` alike: the sizes as one tuple."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        return tuple(sizes[0])
    return tuple(sizes)


@expose(public="reshape", methods=("reshape", "view"))
def reshape(x, *shape):
    """``x`` with a new shape of the same number of elements; one size may be -1 (inferred)."""
    return apply_op(OPS["reshape"], (x,), {"shape": _resolve_shape(x, _sizes(shape))})


def _resolve_shape(x, shape):
    shape = tuple(int(s) for s in shape)
    if shape.count(-1) > 1:
        raise RuntimeError(f"reshape: only one dimension can be inferred, got {list(shape)}")
    if -1 in shape:
        known = 1
        for s in shape:
            if s != -1:
                known *= s
        total = x._data.size
        if known == 0 or total % known:
            raise RuntimeError(f"reshape: shape {list(shape)} is invalid for input of size {total}")
        shape = tuple(total // known if s == -1 else s for s in shape)
    return shape


@expose(public="permute", methods="permute")
def permute(x, *dims):
    """A view with the dims in the order ``dims`` (a permutation of ``range(x.ndim)``)."""
    dims = _sizes(dims)
    if sorted(d % builtins.max(x.ndim, 1) for d in dims) != list(range(x.ndim)):
        raise RuntimeError(f"permute: dims {list(dims)} are not a permutation of the "
                           f"{x.ndim} dims of a tensor of shape {list(x.shape)}")
    return apply_op(OPS["permute"], (x,), {"dims": dims})


@expose(public="expand", methods="expand")
def expand(x, *shape):
    """A broadcast view of ``x`` with ``shape`` (-1 keeps a size)."""
    return apply_op(OPS["expand"], (x,), {"shape": _sizes(shape)})


@expose(methods="expand_as")
def expand_as(x, other):
    return expand(x, other.shape)


@expose(public="t", methods="t")
def t(x):
    """The transpose of a 2-D tensor; a tensor of fewer dims as it is (a view)."""
    if x.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    return apply_op(OPS["t"], (x,))


@defcomposite("flatten", public="flatten", methods="flatten")
def flatten(x, start_dim: int = 0, end_dim: int = -1):
    """Merge dims ``start_dim..end_dim`` into one."""
    if x.ndim == 0:
        return _reshape(x, (1,))
    s, e = _dim(start_dim, x.ndim, "flatten"), _dim(end_dim, x.ndim, "flatten")
    if s > e:
        raise RuntimeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    n = 1
    for d in x.shape[s:e + 1]:
        n *= d
    return _reshape(x, x.shape[:s] + (n,) + x.shape[e + 1:])


@expose(public="squeeze", methods="squeeze")
def squeeze(x, dim=None):
    """Remove size-1 dims: all of them, or those of ``dim`` (an int or a tuple) that have
    size 1 (a dim of another size stays, as in PyTorch)."""
    if dim is None:
        return apply_op(OPS["squeeze"], (x,), {"dims": tuple(range(x.ndim))})
    if isinstance(dim, (tuple, list)):
        return apply_op(OPS["squeeze.dims"], (x,), {"dims": norm_dims(dim, x.ndim)})
    return apply_op(OPS["squeeze.dim"], (x,), {"dims": (_dim(dim, x.ndim, "squeeze"),)})


@expose(public="unsqueeze", methods="unsqueeze")
def unsqueeze(x, dim: int):
    """Insert a size-1 dim at ``dim`` (negative counts from the end of the result)."""
    return apply_op(OPS["unsqueeze"], (x,), {"dim": _dim(dim, x.ndim + 1, "unsqueeze")})


@expose(public="repeat", methods="repeat")
def repeat(x, *sizes):
    """Tile ``x``: ``sizes[i]`` copies along dim i (leading new dims allowed)."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    if len(sizes) < x.ndim:   # torch's words
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    sizes = tuple(int(r) for r in sizes)
    final = [r * s for r, s in zip(sizes, (1,) * (len(sizes) - x.ndim) + tuple(x.shape))]
    neg = [n for n in final if n < 0]
    if neg:
        raise RuntimeError(f"Trying to create tensor with negative dimension {neg[0]}: {final}")
    return _call("repeat", x, sizes=sizes)


@expose(public=("cat", "concat"))
def cat(tensors, dim: int = 0):
    """Join tensors along an existing dim; shapes must agree elsewhere."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("cat: expected a non-empty list of tensors")
    first = tensors[0]
    d = _dim(dim, first.ndim, "cat")
    for i, t in enumerate(tensors[1:], 1):
        if t.ndim != first.ndim or any(a != b for k, (a, b) in enumerate(zip(t.shape, first.shape))
                                       if k != d):
            raise RuntimeError(f"cat: sizes of tensors must match except in dimension {d}: "
                               f"tensor 0 has shape {list(first.shape)}, tensor {i} has shape "
                               f"{list(t.shape)}")
    while len(tensors) > MAX_CAT_INPUTS:
        tensors = [cat(tensors[i:i + MAX_CAT_INPUTS], d)
                   for i in range(0, len(tensors), MAX_CAT_INPUTS)]
    return _call("cat", *tensors, dim=d, sizes=tuple(t.shape[d] for t in tensors))


@expose(public="stack")
def stack(tensors, dim: int = 0):
    """Join same-shaped tensors along a new dim (one StackBackward0, as PyTorch's)."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack: expected a non-empty list of tensors")
    for i, t in enumerate(tensors[1:], 1):
        if t.shape != tensors[0].shape:
            raise RuntimeError(f"stack: expects each tensor to be equal size, but got "
                               f"{list(tensors[0].shape)} at entry 0 and {list(t.shape)} at "
                               f"entry {i}")
    d = _dim(dim, tensors[0].ndim + 1, "stack")
    if len(tensors) > MAX_CAT_INPUTS:
        return cat([unsqueeze(t, d) for t in tensors], d)
    return _call("stack", *tensors, dim=d)


@expose(public="select", methods="select")
def select(x, dim: int, index: int):
    """The slice at ``index`` of dim ``dim``, without that dim (a view; ``x[:, index]``)."""
    d = _dim(dim, x.ndim, "select")
    if x.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    size = x.shape[d]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(x.shape)} at dimension {d}")
    return apply_op(OPS["select"], (x,), {"dim": d, "index": index % size})


@defcomposite("narrow", public="narrow", methods="narrow")
def narrow(x, dim: int, start: int, length: int):
    """The slice ``start:start+length`` of dim ``dim`` (a view)."""
    d = _dim(dim, x.ndim, "narrow")
    if start < 0:
        start += x.shape[d]
    if not 0 <= start <= start + length <= x.shape[d]:
        raise IndexError(f"narrow: start {start} + length {length} exceeds dimension {d} of "
                         f"size {x.shape[d]}")
    return _call("slice", x, dim=d, start=start, end=start + length)


@expose(public="split", methods="split")
def split(x, split_size_or_sections, dim: int = 0):
    """Views of consecutive pieces along ``dim``, all under one node: equal pieces of a size
    (the last smaller; ``SplitBackward0``), or given sizes (``SplitWithSizesBackward0``)."""
    if isinstance(split_size_or_sections, (list, tuple)):
        return split_with_sizes(x, split_size_or_sections, dim)
    d = _dim(dim, x.ndim, "split")
    step = int(split_size_or_sections)
    if step < 0:
        raise RuntimeError(f"split expects split_size be non-negative, but got split_size={step}")
    if step == 0 and x.shape[d]:
        raise RuntimeError("split_size can only be 0 if dimension size is 0, but got dimension "
                           f"size of {x.shape[d]}")
    return _call("split", x, split_size=step, dim=d)


@expose(public="split_with_sizes", methods="split_with_sizes")
def split_with_sizes(x, split_sizes, dim: int = 0):
    """Views of consecutive pieces of the given sizes along ``dim``, under one node."""
    d = _dim(dim, x.ndim, "split_with_sizes")
    sizes = tuple(int(s) for s in split_sizes)
    if builtins.any(s < 0 for s in sizes):
        raise RuntimeError("split_with_sizes expects split_sizes have only non-negative entries, "
                           f"but got split_sizes={list(sizes)}")
    if builtins.sum(sizes) != x.shape[d]:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {x.shape[d]} "
                           f"(input tensor's size at dimension {d}), but got "
                           f"split_sizes={list(sizes)}")
    return _call("split_with_sizes", x, split_sizes=sizes, dim=d)


@defcomposite("chunk", public="chunk", methods="chunk")
def chunk(x, chunks: int, dim: int = 0):
    """Split into ``chunks`` pieces of (at most) equal size along ``dim`` (PyTorch's: a split
    by the rounded-up size, so there may be fewer pieces; ``chunks`` empty ones of an empty
    dim)."""
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = _dim(dim, x.ndim, "chunk")
    n = x.shape[d]
    if n == 0:
        return split_with_sizes(x, (0,) * chunks, d)
    return split(x, -(-n // chunks), d)


@expose(public="pad")
def pad(x, pad, mode: str = "constant", value: float = 0.0):  # noqa: A002
    """Constant padding; ``pad`` lists (left, right) pairs from the last dim backwards."""
    if mode != "constant":
        raise NotImplementedError(f"pad: only mode='constant' is supported, got {mode!r}")
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise RuntimeError(f"pad: padding length {len(pad)} must be even and at most "
                           f"2 * ndim ({2 * x.ndim}) for input of shape {list(x.shape)}")
    if builtins.min(pad, default=0) < 0:
        raise NotImplementedError(f"pad: negative padding is not supported, got {list(pad)}")
    return _call("pad", x, pad=pad, value=value)


@expose(public="flip")
def flip(x, dims):
    """Reverse the order of entries along ``dims``."""
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    return _call("flip", x, dims=norm_dims(dims, x.ndim))


@expose(methods="flip")
def _flip_method(self, *dims):
    """``Tensor.flip(0, 1)`` or ``Tensor.flip((0, 1))``."""
    return flip(self, dims[0] if len(dims) == 1 else dims)


@expose(public="roll", methods="roll")
def roll(x, shifts, dims=None):
    if isinstance(shifts, (list, tuple)):
        shifts = tuple(int(s) for s in shifts)
    if isinstance(dims, list):
        dims = tuple(dims)
    return _call("roll", x, shifts=shifts, dims=dims)


# --------------------------------------------------------------------------- indexing


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


# --------------------------------------------------------------------------- linear algebra


@defcomposite("bmm", public="bmm", methods="bmm")
def bmm(a, b):
    """Batched matrix product of (B, n, m) and (B, m, p) tensors."""
    if a.ndim != 3 or b.ndim != 3:
        raise RuntimeError(f"bmm: expected 3-D tensors, got shapes {list(a.shape)} and "
                           f"{list(b.shape)}")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError(f"bmm: batch sizes differ: {a.shape[0]} (shape {list(a.shape)}) and "
                           f"{b.shape[0]} (shape {list(b.shape)})")
    return _call("matmul.bmm", a, b)


@defcomposite("outer", public="outer", methods="outer")
def outer(a, b):
    """Outer product of two 1-D tensors."""
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"outer: expected 1-D tensors, got shapes {list(a.shape)} and "
                           f"{list(b.shape)}")
    return _reshape(a, (a.shape[0], 1)) * _reshape(b, (1, b.shape[0]))


@expose(public="einsum")
def einsum(equation: str, *operands):
    """Einstein summation over one or two operands (more are contracted pairwise, left to
    right). Subscripts are letters and ``...``; a letter repeated within one operand
    (``"ii->i"``, ``"ii"``) takes that operand's diagonal first."""
    from ._linalg import parse_einsum  # noqa: PLC0415

    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    subs, out = parse_einsum(equation, len(operands), repeats=True)
    if any(len(set(s.replace("...", ""))) != len(s.replace("...", "")) for s in subs):
        return _einsum_diagonals(subs, out, operands)
    for s, t in zip(subs, operands):
        core = s.replace("...", "")
        if ("..." in s and t.ndim < len(core)) or ("..." not in s and t.ndim != len(core)):
            raise RuntimeError(f"einsum: operand with subscripts '{s}' has shape "
                               f"{list(t.shape)} ({t.ndim} dims)")
    if len(operands) <= 2:
        eq = ",".join(subs) + "->" + out
        return _call("einsum", operands[0], operands[1] if len(operands) == 2 else None,
                     equation=eq)
    # Contract the first two, keeping every letter still needed later or in the output.
    later = set(out) | set("".join(subs[2:]))
    seen = subs[0] + subs[1]
    keep = ("..." if "..." in seen else "") + "".join(
        dict.fromkeys(c for c in seen.replace(".", "") if c in later))
    first = einsum(f"{subs[0]},{subs[1]}->{keep}", operands[0], operands[1])
    return einsum(",".join([keep] + subs[2:]) + "->" + out, first, *operands[2:])


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


# --------------------------------------------------------------------------- augmented assignment


def _augmented(name, inplace):
    def method(self, other):
        return getattr(self, inplace)(other)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``self {name[2:-2]}= other`` in place, as PyTorch: ``self.{inplace}(other)``."
    return method


# As PyTorch, `x += y` changes x in place (aliases see it, the version counter moves, saved-tensor
# checks apply), where Python would otherwise rebind x to a new tensor.
for _name, _inplace in (("__iadd__", "add_"), ("__isub__", "sub_"), ("__imul__", "mul_"),
                        ("__itruediv__", "div_"), ("__ipow__", "pow_"),
                        ("__iand__", "bitwise_and_"), ("__ior__", "bitwise_or_"),
                        ("__ixor__", "bitwise_xor_"), ("__ilshift__", "bitwise_left_shift_"),
                        ("__irshift__", "bitwise_right_shift_")):
    expose(methods=_name)(_augmented(_name, _inplace))


# --------------------------------------------------------------------------- casts


def _cast(name, dtype):
    def method(self):
        return self.to(dtype=dtype)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``self.to(dtype={dtype!r})``."
    return method


for _name, _dtype in (("float", "float32"), ("double", "float64"), ("half", "float16"),
                      ("bfloat16", "bfloat16"),
                      ("long", "int64"), ("int", "int32"), ("short", "int16"),
                      ("char", "int8"), ("byte", "uint8"), ("bool", "bool")):
    expose(methods=_name)(_cast(_name, _dtype))


# torch's dtype and size queries as functions (dtypes are NumPy dtypes here).
@expose(public="numel")
def numel(input) -> int:  # noqa: A002
    """The number of elements."""
    return input.numel()


@expose(public="is_nonzero")
def is_nonzero(input) -> bool:  # noqa: A002
    """The truth of a one-element tensor."""
    if input.numel() != 1:
        raise RuntimeError("Boolean value of Tensor with "
                           f"{'no values' if input.numel() == 0 else 'more than one value'} "
                           "is ambiguous")
    return bool(input.item())


@expose(public="result_type")
def result_type(tensor1, tensor2):
    """The dtype PyTorch's type promotion gives an elementwise op on the two (tensors or
    numbers)."""
    return _promotion.result_type(*(t._data if isinstance(t, Tensor) else t
                                    for t in (tensor1, tensor2)))


@expose(public="promote_types")
def promote_types(type1, type2):
    """The smallest dtype both promote to, by PyTorch's rules."""
    return _promotion.promote_types(numpy.dtype(type1), numpy.dtype(type2))


@expose(public="can_cast")
def can_cast(from_, to) -> bool:
    """Whether PyTorch's casting rules allow ``from_`` to ``to`` (no lower category)."""
    return _promotion.can_cast(numpy.dtype(from_), numpy.dtype(to))


@expose(public="detach")
def detach(input):  # noqa: A002
    """:meth:`Tensor.detach` as a function."""
    return input.detach()


@expose(methods="type_as")
def type_as(x, other):
    return x.to(dtype=other.dtype)


@expose(public="dist", methods="dist")
def dist(input, other, p=2):  # noqa: A002 - PyTorch's names
    """The ``p``-norm of ``input - other`` (broadcast)."""
    return _call("dist", input, other, p=float(p))


def linalg_cross(input, other, *, dim=-1):  # noqa: A002
    """``torch.linalg.cross``: the cross product of 3-vectors along ``dim`` (broadcast)."""
    shape = _broadcast_shapes(tuple(input.shape), tuple(other.shape))
    d = _dim(dim, len(shape), "linalg.cross")
    if input.ndim != other.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{input.shape[d]} and {other.shape[d]}")
    return _call("linalg_cross", input, other, dim=d)


@expose(public="cross", methods="cross")
def cross(input, other, dim=None):  # noqa: A002
    """``torch.cross``: as :func:`linalg_cross`; without ``dim``, the first dim of size 3."""
    if dim is None:
        dim = next((i for i, n in enumerate(input.shape) if n == 3), -1)
    return linalg_cross(input, other, dim=dim)


def _broadcast_shapes(a, b):
    n = builtins.max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    return tuple(builtins.max(x, y) for x, y in zip(a, b))


@defcomposite("diff", public="diff", methods="diff")
def diff(input, n=1, dim=-1, prepend=None, append=None):  # noqa: A002
    """The ``n``-th forward difference along ``dim`` (``prepend``/``append`` joined first)."""
    d = _dim(dim, input.ndim, "diff")
    x = input
    if prepend is not None or append is not None:
        x = cat([t for t in (prepend, x, append) if t is not None], d)
    for _ in range(n):
        size = x.shape[d]
        if size == 0:
            break
        x = narrow(x, d, 1, size - 1) - narrow(x, d, 0, size - 1)
    return x


@defcomposite("msort", public="msort", methods="msort")
def msort(input):  # noqa: A002
    """``input`` sorted along dim 0."""
    return sort(input, 0).values


# --------------------------------------------------------------------------- torch.linalg

SlogdetResult = namedtuple("slogdet", ["sign", "logabsdet"])


def linalg_inv(A):  # noqa: N803 - PyTorch's name
    """``torch.linalg.inv``: the inverse of each square matrix of ``A`` (..., n, n)."""
    return _call("linalg_inv", A)


def linalg_det(A):  # noqa: N803
    """``torch.linalg.det``: the determinant of each square matrix of ``A`` (..., n, n)."""
    return _call("linalg_det", A)


@expose(public="slogdet", methods="slogdet")
def slogdet(A):  # noqa: N803
    """``torch.linalg.slogdet``: (sign, logabsdet) of each square matrix's determinant.

    Returns:
        ``(sign, logabsdet)`` with attribute names, as PyTorch's ``torch.return_types``.
    """
    return SlogdetResult(*_call("linalg_slogdet", A))


def linalg_solve(A, B, *, left=True):  # noqa: N803
    """``torch.linalg.solve``: X with ``A X = B`` (``X A = B`` when ``left`` is False),
    batched and broadcast over leading dims. B is a (batch of) vector(s) when it is 1-D or
    has A's shape without the last dim (PyTorch's rule)."""
    return _call("linalg_solve", A, B, left=bool(left))


# torch.return_types' names and fields.
QRResult = namedtuple("linalg_qr", ["Q", "R"])
EighResult = namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
SVDResult = namedtuple("linalg_svd", ["U", "S", "Vh"])
QrResult = namedtuple("qr", ["Q", "R"])
SvdResult = namedtuple("svd", ["U", "S", "V"])


def linalg_cholesky(A, *, upper=False):  # noqa: N803
    """``torch.linalg.cholesky``: L with ``A = L L^T`` (U with ``A = U^T U`` when ``upper``)
    for each symmetric positive-definite matrix of ``A`` (its lower triangle is read; the
    upper one when ``upper``)."""
    return _call("linalg_cholesky", A, upper=bool(upper))


def linalg_solve_triangular(A, B, *, upper, left=True, unitriangular=False):  # noqa: N803
    """``torch.linalg.solve_triangular``: X with ``A X = B`` (``X A = B`` when not ``left``)
    for triangular A (the triangle ``upper`` names is read; its diagonal taken as ones when
    ``unitriangular``). B is a (batch of) matrices, broadcast with A over leading dims."""
    return _call("linalg_solve_triangular", A, B, upper=bool(upper), left=bool(left),
                 unitriangular=bool(unitriangular))


@expose(public="cholesky_solve", methods="cholesky_solve")
def cholesky_solve(input, input2, upper=False):  # noqa: A002 - PyTorch's names
    """``torch.cholesky_solve``: X with ``A X = B`` for ``B = input`` and A given by its
    Cholesky factor ``input2`` (L, or U when ``upper``): two triangular solves."""
    return _call("cholesky_solve", input, input2, upper=bool(upper))


def linalg_qr(A, mode="reduced"):  # noqa: N803
    """``torch.linalg.qr``: (Q, R) with ``A = Q R``; ``mode`` "reduced" (Q m x k), "complete"
    (Q m x m) or "r" (R only, Q an empty tensor)."""
    return QRResult(*_call("linalg_qr", A, mode=mode))


@expose(public="qr", methods="qr")
def qr(input, some=True):  # noqa: A002
    """``torch.qr`` (deprecated in PyTorch): :func:`linalg_qr` in mode "reduced" when ``some``,
    else "complete"."""
    return QrResult(*linalg_qr(input, "reduced" if some else "complete"))


def linalg_eigh(A, UPLO="L"):  # noqa: N803
    """``torch.linalg.eigh``: the eigenvalues (ascending) and eigenvectors (columns) of each
    symmetric matrix of ``A``, reading its lower (``UPLO="L"``) or upper triangle. An
    eigenvector's sign is arbitrary: differentiate functions that do not depend on it."""
    return EighResult(*_call("linalg_eigh", A, UPLO=UPLO))


def linalg_eigvalsh(A, UPLO="L"):  # noqa: N803
    """``torch.linalg.eigvalsh``: the eigenvalues of :func:`linalg_eigh` (same node)."""
    return linalg_eigh(A, UPLO).eigenvalues


def linalg_svd(A, full_matrices=True):  # noqa: N803
    """``torch.linalg.svd``: (U, S, Vh) with ``A = U diag(S) Vh``, S descending; U and Vh
    square when ``full_matrices``. Singular vectors' signs are arbitrary: differentiate
    functions that do not depend on them."""
    return SVDResult(*_call("linalg_svd", A, full_matrices=bool(full_matrices)))


def linalg_svdvals(A):  # noqa: N803
    """``torch.linalg.svdvals``: the singular values of :func:`linalg_svd` (same node)."""
    return linalg_svd(A, full_matrices=False).S


@expose(public="svd", methods="svd")
def svd(input, some=True, compute_uv=True):  # noqa: A002
    """``torch.svd`` (deprecated in PyTorch): (U, S, V) with V, not Vh; reduced when ``some``.
    Without ``compute_uv``, U and V are zeros of shapes (m, m) and (n, n), as PyTorch's."""
    if not compute_uv:
        s = linalg_svdvals(input)
        m, n = input.shape[-2:]
        batch = tuple(input.shape[:-2])
        return SvdResult(input.new_zeros(batch + (m, m)), s, input.new_zeros(batch + (n, n)))
    u, s, vh = linalg_svd(input, full_matrices=not some)
    return SvdResult(u, s, vh.mT)


@expose(public="pinverse", methods="pinverse")
def pinverse(input, rcond=1e-15):  # noqa: A002
    """``torch.pinverse``: :func:`linalg_pinv` with ``rtol=rcond``."""
    return linalg_pinv(input, rtol=rcond)


def linalg_pinv(A, *, atol=None, rtol=None, hermitian=False):  # noqa: N803
    """``torch.linalg.pinv``: the pseudo-inverse of each matrix of ``A`` (from its SVD; its
    eigendecomposition when ``hermitian``); singular values at or below
    ``max(atol, rtol * largest)`` count as 0 (rtol: eps * max(m, n) when neither is given)."""
    return _call("linalg_pinv", A, atol=atol, rtol=rtol, hermitian=bool(hermitian))


LstsqResult = namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def linalg_lstsq(A, B, rcond=None, *, driver=None):  # noqa: N803
    """``torch.linalg.lstsq``: the least-squares solution X of ``A X = B`` (the minimum-norm
    one, pinv(A) B, singular values below ``rcond`` times the largest counting as 0; rcond
    defaults to eps * max(m, n)), with PyTorch's other outputs for the CPU's ``driver``
    (default "gelsy"): residuals (squared, summed over rows) for m > n at full rank except
    with gelsy, the rank except with gels, the singular values with gelsd and gelss; empty
    tensors otherwise. B may be a (batch of) vector(s) of A's rows.

    NOTE: only the solution has PyTorch's node (LinalgLstsqBackward0); the residuals are
    computed from it, under the nodes of that arithmetic.
    """
    driver = "gelsy" if driver is None else driver
    if driver not in _LSTSQ_DRIVERS:
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of "
                           "(gels, gelsy, gelsd, gelss)")
    m, n = (A.shape[-2], A.shape[-1]) if _ndim(A) >= 2 else (0, 0)
    if rcond is None:
        rcond = float(numpy.finfo(A.dtype).eps) * builtins.max(m, n) if m else 0.0
    x = _call("linalg_lstsq", A, B, rcond=float(rcond))
    empty = A.new_zeros((0,))
    svals = rank = None
    if driver != "gels":
        svals = linalg_svdvals(A.detach())
        top = svals[..., :1] if n and m else svals
        rank = (svals > top * rcond).sum(-1) if n and m else svals.sum(-1).to(dtype="int64")
    residuals = empty
    if m > n and driver != "gelsy" and (rank is None or bool((rank == n).all())):
        vector = B.ndim == A.ndim - 1
        res = A @ (x.unsqueeze(-1) if vector else x) - (B.unsqueeze(-1) if vector else B)
        residuals = (res * res).sum(-2)
        residuals = residuals.squeeze(-1) if vector else residuals
    return LstsqResult(x, residuals,
                       rank if rank is not None else empty.to(dtype="int64"),
                       svals if driver in ("gelsd", "gelss") else empty)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False):  # noqa: N803
    """``torch.linalg.matrix_rank``: the number of singular values (|eigenvalues| when
    ``hermitian``) above max(atol, rtol * the largest), as int64 (rtol defaults to
    eps * max(m, n) when atol is not given or 0, as pinv's)."""
    A = A.detach()
    m, n = A.shape[-2:]
    if rtol is None:
        rtol = float(numpy.finfo(A.dtype).eps) * builtins.max(m, n) if not atol else 0.0
    s = linalg_eigvalsh(A).abs() if hermitian else linalg_svdvals(A)
    top = amax(s, -1, keepdim=True) if builtins.min(m, n) else s.sum(-1, keepdim=True)
    tol = (top * rtol).clamp(min=float(atol or 0.0))
    return (s > tol).sum(-1).to(dtype="int64")


@expose(public="matrix_power", methods="matrix_power")
def matrix_power(A, n):  # noqa: N803
    """``torch.linalg.matrix_power``: A^n by repeated squaring; A^-n is inv(A)^n; A^0 the
    identity (which, unlike PyTorch's, does not require grad)."""
    if _ndim(A) < 2:
        raise RuntimeError("linalg.matrix_power: The input tensor A must have at least 2 "
                           "dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError("linalg.matrix_power: A must be batches of square matrices, but "
                           f"they are {A.shape[-2]} by {A.shape[-1]} matrices")
    n = int(n)
    if n == 0:
        eye = A.device.xp.eye(A.shape[-1], dtype=A.dtype)
        return Tensor._make(A.device.xp.broadcast_to(eye, tuple(A.shape)).copy(), False, None,
                            0, [0], A.device)
    base = linalg_inv(A) if n < 0 else A
    n = builtins.abs(n)
    if n == 1:
        return base.clone()
    result = None
    while n:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    return result


@expose(public="matrix_exp", methods="matrix_exp")
def matrix_exp(A):  # noqa: N803
    """``torch.linalg.matrix_exp``: the exponential of each square matrix of ``A``."""
    return _call("linalg_matrix_exp", A)


_MATRIX_ORDS = ("fro", "nuc", 2, -2, 1, -1, float("inf"), float("-inf"))


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):  # noqa: A002,N803
    """``torch.linalg.matrix_norm``: "fro" and "nuc" norms, the spectral norms (2: the largest
    singular value, -2 the smallest) and the induced 1 / inf norms (largest absolute column /
    row sum; -1 / -inf the smallest), over the two dims ``dim``."""
    if _ndim(A) < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 "
                           "dimensions.")
    if ord not in _MATRIX_ORDS:
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    dim = tuple(dim)
    d0, d1 = (_dim(d, A.ndim, "linalg.matrix_norm") for d in dim)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got {dim}")
    if dtype is not None:
        A = A.to(dtype=dtype)
    if ord == "fro":
        return vector_norm(A, 2, dim=(d0, d1), keepdim=keepdim)
    if ord in ("nuc", 2, -2):
        s = linalg_svdvals(movedim(A, (d0, d1), (-2, -1)))
        out = s.sum(-1) if ord == "nuc" else amax(s, -1) if ord == 2 else amin(s, -1)
        if keepdim:
            for d in sorted((d0, d1)):
                out = out.unsqueeze(d)
        return out
    # Induced norms: 1 sums over rows (a column's sum), inf over columns.
    summed, other = (d0, d1) if builtins.abs(ord) == 1 else (d1, d0)
    sums = A.abs().sum(dim=summed, keepdim=keepdim)
    other -= 1 if not keepdim and summed < other else 0
    return (amax if ord > 0 else amin)(sums, other, keepdim=keepdim)


def linalg_norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):  # noqa: A002,N803
    """``torch.linalg.norm``: :func:`matrix_norm` over two dims (``dim`` a pair, or a 2-D
    ``A`` with an ``ord``), else :func:`vector_norm` (a 1-D ``A`` or ``dim`` one dim; no
    ``ord`` and no ``dim``: the 2-norm of all entries)."""
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) == 2:
        return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    if dim is None and ord is not None:
        if _ndim(A) == 2:
            return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
        if _ndim(A) != 1:
            raise RuntimeError("linalg.norm: If dim is not specified but ord is, the input "
                               f"must be 1D or 2D. Got {_ndim(A)}D.")
    return vector_norm(A, 2 if ord is None else ord, dim=dim, keepdim=keepdim, dtype=dtype)


#: ``gradtrace.autograd.linalg``: the functions of ``torch.linalg`` that exist here.
linalg = types.ModuleType("gradtrace.autograd.linalg", "Linear algebra functions (torch.linalg).")
linalg.vector_norm = vector_norm
linalg.matrix_norm = matrix_norm
linalg.norm = linalg_norm
linalg.cross = linalg_cross
linalg.inv = linalg_inv
linalg.det = linalg_det
linalg.slogdet = slogdet
linalg.solve = linalg_solve
linalg.solve_triangular = linalg_solve_triangular
linalg.cholesky = linalg_cholesky
linalg.qr = linalg_qr
linalg.eigh = linalg_eigh
linalg.eigvalsh = linalg_eigvalsh
linalg.svd = linalg_svd
linalg.svdvals = linalg_svdvals
linalg.pinv = linalg_pinv
linalg.lstsq = linalg_lstsq
linalg.matrix_rank = matrix_rank
linalg.matrix_power = matrix_power
linalg.matrix_exp = matrix_exp
expose(public="linalg")(linalg)


# --------------------------------------------------------------------------- issue 14: arithmetic


def _plain_alpha(input, other, alpha) -> bool:  # noqa: A002
    """Is ``alpha`` 1 (the plain op)? Else check it as PyTorch's alpha_check does against the
    result dtype: no float alpha for integers, a bool alpha for bools only."""
    if alpha is not True and alpha == 1:
        return True
    _alpha_dtype(input, other, alpha)
    return False


def _alpha(input, other, alpha):  # noqa: A002
    """``alpha`` as PyTorch's kernels use it: in a bfloat16 result's own dtype (its add with
    alpha=0.3 multiplies by 0.30078125)."""
    if _alpha_dtype(input, other, alpha) is BFLOAT16:
        return float(numpy.asarray(alpha, dtype=numpy.float32).astype(BFLOAT16))
    return alpha


def _alpha_dtype(input, other, alpha):  # noqa: A002
    dtype = _promotion.result_type(*(x._data if isinstance(x, Tensor) else x
                                     for x in (input, other)))
    if isinstance(alpha, bool) and dtype != numpy.bool_:
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    if dtype.kind in "biu" and isinstance(alpha, numbers.Number) and not isinstance(
            alpha, numbers.Integral):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating "
                           "point number.")
    return dtype


@expose(public="add", methods="add")
def add(input, other, *, alpha=1):  # noqa: A002 - PyTorch's names
    """``input + alpha * other`` (one AddBackward0 node, alpha or not, as PyTorch's)."""
    if _plain_alpha(input, other, alpha):
        return _call("add", input, other)
    return _call("add.alpha", input, other, alpha=_alpha(input, other, alpha))


@expose(public="sub", methods="sub")
def sub(input, other, *, alpha=1):  # noqa: A002
    """``input - alpha * other`` (one SubBackward0 node)."""
    if _plain_alpha(input, other, alpha):
        return _call("sub", input, other)
    return _call("sub.alpha", input, other, alpha=_alpha(input, other, alpha))


@expose(methods="add_")
def add_(self, other, *, alpha=1):
    """In-place :func:`add`: ``self += alpha * other``."""
    if _plain_alpha(self, other, alpha):
        return apply_inplace(OPS["add"], self, (other,))
    return apply_inplace(OPS["add.alpha"], self, (other,), {"alpha": _alpha(self, other, alpha)})


@expose(methods=("sub_", "subtract_"))
def sub_(self, other, *, alpha=1):
    """In-place :func:`sub`: ``self -= alpha * other``."""
    if _plain_alpha(self, other, alpha):
        return apply_inplace(OPS["sub"], self, (other,))
    return apply_inplace(OPS["sub.alpha"], self, (other,), {"alpha": _alpha(self, other, alpha)})


@expose(public="rsub")
def rsub(input, other, *, alpha=1):  # noqa: A002
    """``other - alpha * input`` (PyTorch's torch.rsub: RsubBackward0 for a tensor ``other``,
    RsubBackward1 for a number)."""
    plain = _plain_alpha(input, other, alpha)
    if plain and not isinstance(other, Tensor):
        return _call("rsub", input, other)
    return _call("rsub.Tensor", input, other,
                 **({} if plain else {"alpha": _alpha(input, other, alpha)}))


_ROUNDING_MODES = (None, "trunc", "floor")


@expose(public=("div", "divide"), methods=("div", "divide"))
def div(input, other, *, rounding_mode=None):  # noqa: A002
    """``input / other``: true division, or rounded (``"trunc"``: towards zero, ``"floor"``:
    down; DivBackward2, a zero gradient)."""
    if rounding_mode is None:
        return _call("div", input, other)
    if rounding_mode not in _ROUNDING_MODES:
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                           f"but found '{rounding_mode}'")
    return _call("div.Tensor_mode", input, other, rounding_mode=rounding_mode)


@expose(public="true_divide", methods="true_divide")
def true_divide(input, other):  # noqa: A002
    """Alias of :func:`div` without rounding."""
    return _call("div", input, other)


# PyTorch's other aliases of the arithmetic and comparison ops: the same op and node.
def _alias(alias, op):
    def fn(input, other):  # noqa: A002
        return _call(op, input, other)

    fn.__name__ = fn.__qualname__ = alias
    fn.__doc__ = f"Alias of :func:`{op}`."
    expose(public=alias, methods=alias)(fn)


for _alias_name, _op in (("multiply", "mul"), ("greater", "gt"), ("greater_equal", "ge"),
                         ("less", "lt"), ("less_equal", "le"), ("not_equal", "ne")):
    _alias(_alias_name, _op)
# The comparisons' own Tensor methods (x.eq(y)), beside their operators.
for _op in ("eq", "ne", "lt", "le", "gt", "ge"):
    expose(methods=_op)(FUNCTIONS[_op])
del _alias_name, _op


@expose(public="subtract", methods="subtract")
def subtract(input, other, *, alpha=1):  # noqa: A002
    """Alias of :func:`sub`."""
    return sub(input, other, alpha=alpha)


@expose(public="positive", methods="positive")
def positive(input):  # noqa: A002
    """``input`` itself (PyTorch refuses a bool tensor)."""
    if input.dtype == numpy.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


@expose(public="isin")
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """True where an element of ``elements`` is among ``test_elements`` (either may be a
    number)."""
    like = elements if isinstance(elements, Tensor) else test_elements
    if not isinstance(elements, Tensor):
        elements = like.new_tensor(elements)
    if not isinstance(test_elements, Tensor):
        test_elements = like.new_tensor(test_elements)
    return _call("isin", elements, test_elements, assume_unique=assume_unique, invert=invert)


FrexpResult = namedtuple("frexp", ["mantissa", "exponent"])


@expose(public="frexp", methods="frexp")
def frexp(input):  # noqa: A002
    """``(mantissa, exponent)`` with ``input = mantissa * 2**exponent``, ``|mantissa|`` in
    [0.5, 1) (exponent int32; not differentiable)."""
    return FrexpResult(*_call("frexp", input))


@defcomposite("ldexp", public="ldexp", methods="ldexp")
def ldexp(input, other):  # noqa: A002
    """``input * 2**other`` (MulBackward0; PyTorch's own node is LdexpBackward0). An integer
    ``other`` scales in ``input``'s floating dtype (bfloat16 and float16 stay)."""
    if (isinstance(other, Tensor) and isinstance(input, Tensor) and other.dtype.kind in "iub"
            and is_floating(input.dtype)):
        other = other.to(dtype=input.dtype)   # (float64's 2**200 is not float32's inf)
    return input * (2.0 ** other)


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


@expose(methods=("is_complex",), public="is_complex")
def is_complex(input) -> bool:  # noqa: A002
    """Whether the dtype is complex."""
    return input.dtype.kind == "c"


@expose(public="addcmul", methods="addcmul")
def addcmul(input, tensor1, tensor2, *, value=1):  # noqa: A002
    """``input + value * tensor1 * tensor2``."""
    return _call("addcmul", input, tensor1, tensor2, value=value)


@expose(methods="addcmul_")
def addcmul_(x, tensor1, tensor2, *, value=1):
    """In-place :func:`addcmul`."""
    return apply_inplace(OPS["addcmul"], x, (tensor1, tensor2), {"value": value})


@expose(public="addcdiv", methods="addcdiv")
def addcdiv(input, tensor1, tensor2, *, value=1):  # noqa: A002
    """``input + value * tensor1 / tensor2`` (AddcdivBackward0)."""
    return _call("addcdiv", input, tensor1, tensor2, value=value)


@expose(methods="addcdiv_")
def addcdiv_(x, tensor1, tensor2, *, value=1):
    """In-place :func:`addcdiv`."""
    return apply_inplace(OPS["addcdiv"], x, (tensor1, tensor2), {"value": value})


# PyTorch's aliases: the same op and node as the name they stand for.
@expose(public="absolute", methods="absolute")
def absolute(input):  # noqa: A002
    """Alias of :func:`abs`."""
    return _call("abs", input)


@expose(public="negative", methods="negative")
def negative(input):  # noqa: A002
    """Alias of :func:`neg`."""
    return _call("neg", input)


@expose(methods="absolute_")
def absolute_(x):
    """Alias of ``abs_``."""
    return apply_inplace(OPS["abs"], x, ())


@expose(methods="negative_")
def negative_(x):
    """Alias of ``neg_``."""
    return apply_inplace(OPS["neg"], x, ())


@expose(methods="square_")
def square_(x):
    """In-place :func:`square` (PowBackward0, as PyTorch's)."""
    return apply_inplace(OPS["pow"], x, (2,))


@expose(public="allclose", methods="allclose")
def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):  # noqa: A002
    """Whether :func:`isclose` holds everywhere (a Python bool)."""
    return bool(_call("isclose", input, other, rtol=rtol, atol=atol, equal_nan=equal_nan)
                .all().item())


@expose(public="equal", methods="equal")
def equal(input, other):  # noqa: A002
    """True when both have the same shape and elements (a Python bool; NaN is unequal)."""
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool((input == other).all().item())


@defcomposite("float_power", public="float_power", methods="float_power")
def float_power(input, exponent):  # noqa: A002
    """``input ** exponent`` computed in double precision (complex128 for complex inputs)."""
    complex_ = any(getattr(v, "dtype", numpy.dtype(type(v))).kind == "c"
                   for v in (input, exponent))
    dtype = numpy.complex128 if complex_ else numpy.float64
    base = input.to(dtype=dtype) if isinstance(input, Tensor) else input
    if isinstance(exponent, Tensor):
        exponent = exponent.to(dtype=dtype)
    return base ** exponent


@expose(methods="float_power_")
def float_power_(x, exponent):
    """In-place :func:`float_power`: ``x`` must already be double (complex128) precision."""
    want = numpy.complex128 if x.dtype.kind == "c" or getattr(
        exponent, "dtype", numpy.dtype(type(exponent))).kind == "c" else numpy.float64
    if x.dtype != want:
        raise RuntimeError(f"the base given to float_power_ has dtype {torch_name(x.dtype)} but "
                           f"the operation's result requires dtype {torch_name(want)}")
    return x.copy_(float_power(x, exponent))


@defcomposite("square", public="square", methods="square")
def square(x):
    """``x ** 2`` (PowBackward0, as PyTorch's square)."""
    return _call("pow", x, 2)


@expose(public="lerp", methods="lerp")
def lerp(input, end, weight):  # noqa: A002
    """``input + weight * (end - input)``; ``weight`` a number or a tensor."""
    if isinstance(weight, Tensor):
        return _call("lerp.Tensor", input, end, weight)
    return _call("lerp", input, end, weight=weight)


@expose(methods="lerp_")
def lerp_(x, end, weight):
    """In-place :func:`lerp`."""
    if isinstance(weight, Tensor):
        return apply_inplace(OPS["lerp.Tensor"], x, (end, weight))
    return apply_inplace(OPS["lerp"], x, (end,), {"weight": weight})


# --------------------------------------------------------------------------- reductions


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


def _reduction_dim(dim, ndim) -> int:
    """One dim, checked with PyTorch's IndexError text (a 0-d tensor takes 0 and -1)."""
    if not isinstance(dim, int):
        raise TypeError(f"dim must be an int, got {type(dim).__name__}")
    dims = norm_dims(dim, ndim)
    return dims[0] if dims else 0


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


# --------------------------------------------------------------------------- linear algebra


def _need(op, x, ndim, what):
    if x.ndim != ndim:
        raise RuntimeError(f"{op}: {what} must be a {ndim}-D tensor, got shape {list(x.shape)}")


@expose(public="mm")
def mm(input, mat2):  # noqa: A002
    """Product of two matrices."""
    _need("mm", input, 2, "self")
    _need("mm", mat2, 2, "mat2")
    return _call("matmul", input, mat2)


@expose(public="mv", methods="mv")
def mv(input, vec):  # noqa: A002
    """Matrix-vector product."""
    _need("mv", input, 2, "input")
    _need("mv", vec, 1, "vec")
    return _call("matmul.mv", input, vec)


@expose(public=("dot", "inner1d"), methods="dot")
def dot(input, other):  # noqa: A002
    """Dot product of two 1-D tensors (a 0-d result)."""
    _need("dot", input, 1, "input")
    _need("dot", other, 1, "other")
    if input.shape != other.shape:
        raise RuntimeError(f"dot: inconsistent tensor size, expected tensor [{input.shape[0]}] "
                           f"and src [{other.shape[0]}] to have the same number of elements")
    return _call("matmul.dot", input, other)


def _scaled_sum(input, product, beta, alpha):
    """``beta * input + alpha * product``; with beta = 0 ``input`` is ignored (NaN included),
    as PyTorch's addmm."""
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product
    return (input if beta == 1 else input * beta) + product


@defcomposite("addmm", public="addmm", methods="addmm")
def addmm(input, mat1, mat2, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * (mat1 @ mat2)``."""
    return _scaled_sum(input, mm(mat1, mat2), beta, alpha)


@defcomposite("baddbmm", public="baddbmm", methods="baddbmm")
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * bmm(batch1, batch2)``."""
    return _scaled_sum(input, bmm(batch1, batch2), beta, alpha)


# addmm and baddbmm are composites: their in-place forms record CopyBackwards where PyTorch
# records AddmmBackward0 / BaddbmmBackward0 (the gradients are the same).
expose_inplace(addmm, "addmm_")
expose_inplace(baddbmm, "baddbmm_")


@defcomposite("kron", public="kron", methods="kron")
def kron(input, other):  # noqa: A002
    """Kronecker product: block (i, j) is ``input[i, j] * other``, in any number of dims."""
    n = builtins.max(input.ndim, other.ndim)
    shape_a = (1,) * (n - input.ndim) + tuple(input.shape)
    shape_b = (1,) * (n - other.ndim) + tuple(other.shape)
    inter_a, inter_b, final = [], [], []
    for sa, sb in zip(shape_a, shape_b):
        inter_a += [sa, 1]
        inter_b += [1, sb]
        final.append(sa * sb)
    # PyTorch's: each operand and the product through _unsafe_view (UnsafeViewBackward0).
    a = _call("_unsafe_view", input, shape=tuple(inter_a))
    b = _call("_unsafe_view", other, shape=tuple(inter_b))
    return _call("_unsafe_view", a * b, shape=tuple(final))


@defcomposite("tensordot", public="tensordot")
def tensordot(a, b, dims=2):
    """Contract the last ``dims`` dims of ``a`` with the first of ``b`` (or the listed pairs)."""
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = ([dims[0]] if isinstance(dims[0], int) else list(dims[0]),
                  [dims[1]] if isinstance(dims[1], int) else list(dims[1]))
    da = [_dim(d, a.ndim, "tensordot") for d in da]
    db = [_dim(d, b.ndim, "tensordot") for d in db]
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise RuntimeError(f"tensordot: contracted dimensions need to match, but first has "
                               f"size {a.shape[i]} in dim {i} and second has size {b.shape[j]} "
                               f"in dim {j}")
    free_a = [i for i in range(a.ndim) if i not in da]
    free_b = [j for j in range(b.ndim) if j not in db]
    k = 1
    for i in da:
        k *= a.shape[i]
    m = 1
    for i in free_a:
        m *= a.shape[i]
    n = 1
    for j in free_b:
        n *= b.shape[j]
    am = _reshape(permute(a, *(free_a + da)) if a.ndim else a, (m, k))
    bm = _reshape(permute(b, *(db + free_b)) if b.ndim else b, (k, n))
    return _reshape(_call("matmul", am, bm),
                    tuple(a.shape[i] for i in free_a) + tuple(b.shape[j] for j in free_b))


@expose(public="cdist")
def cdist(x1, x2, p=2.0):
    """Pairwise ``p``-norm distances between the rows of ``x1`` (..., P, M) and ``x2``
    (..., R, M): (..., P, R). A zero distance has a zero gradient (the norm's rule)."""
    for name, x in (("X1", x1), ("X2", x2)):
        if x.ndim < 2:   # torch's words
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: {x.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: "
                           f"{x1.shape[-1]} X2: {x2.shape[-1]}")
    return _call("cdist", x1, x2, p=float(p))


@expose(public="diagonal", methods="diagonal")
def diagonal(x, offset=0, dim1=0, dim2=1):
    """The diagonal ``offset`` of the (dim1, dim2) planes, as the last dim (a view)."""
    d1, d2 = _dim(dim1, x.ndim, "diagonal"), _dim(dim2, x.ndim, "diagonal")
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return _call("diagonal", x, offset=int(offset), dim1=d1, dim2=d2)


@expose(methods="unfold")
def unfold(x, dimension, size, step):
    """``Tensor.unfold``: windows of ``size`` every ``step`` along ``dimension``, as a new
    last dim (a view of ``x``)."""
    d = _dim(dimension, x.ndim, "unfold")
    length = x.shape[d] if x.ndim else 1
    if size > length:   # torch's words
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {length} but size is "
                           f"{size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    return _call("unfold", x, dimension=d, size=int(size), step=int(step))


@defcomposite("diag", public="diag", methods="diag")
def diag(x, diagonal=0):  # noqa: F811 - torch.diag's parameter name
    """A 1-D tensor as the ``diagonal``-th diagonal of a square matrix, or a matrix's
    ``diagonal``-th diagonal as a 1-D tensor."""
    # PyTorch's: diagonal_copy of a matrix (DiagonalBackward0_copy), diag_embed of a vector
    # (DiagEmbedBackward0).
    if x.ndim == 2:
        return _call("diagonal_copy", x, offset=int(diagonal), dim1=0, dim2=1)
    if x.ndim != 1:
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {x.ndim}D")
    return _call("diag_embed", x, offset=int(diagonal), dim1=0, dim2=1)


@expose(public="diag_embed", methods="diag_embed")
def diag_embed(input, offset=0, dim1=-2, dim2=-1):  # noqa: A002 - PyTorch's names
    """The last dim of ``input`` as the ``offset`` diagonal of the (dim1, dim2) planes of a new
    tensor with one more dim, zeros elsewhere."""
    ndim = input.ndim + 1
    d1, d2 = _dim(dim1, ndim, "diag_embed"), _dim(dim2, ndim, "diag_embed")
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return _call("diag_embed", input, offset=int(offset), dim1=d1, dim2=d2)


# --------------------------------------------------------------------------- shape


@defcomposite("movedim", public=("movedim", "moveaxis"), methods=("movedim", "moveaxis"))
def movedim(x, source, destination):
    """``x`` with dims ``source`` moved to ``destination`` (the others keep their order)."""
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src} dims) "
                           f"should contain the same number of dims as destination ({dst} dims)")
    src = [_dim(d, x.ndim, "movedim") for d in src]
    dst = [_dim(d, x.ndim, "movedim") for d in dst]
    if x.ndim == 0:   # dims 0 and -1 name the one (absent) dim: nothing moves
        return x
    order = [None] * x.ndim
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(i for i in range(x.ndim) if i not in src)
    order = [o if o is not None else next(rest) for o in order]
    if order == list(range(x.ndim)):
        return x
    return permute(x, *order)


@expose(public=("swapaxes", "swapdims"), methods=("swapaxes", "swapdims"))
def swapaxes(x, axis0, axis1):
    """``transpose(x, axis0, axis1)``."""
    return _call("transpose", x, dim0=_dim(axis0, x.ndim, "swapaxes"),
                 dim1=_dim(axis1, x.ndim, "swapaxes"))


@expose(public="unbind", methods="unbind")
def unbind(x, dim=0):
    """The slices along ``dim``, as a tuple of views without that dim, under one node."""
    return _call("unbind", x, dim=_dim(dim, x.ndim, "unbind"))


@defcomposite("tile", public="tile", methods="tile")
def tile(x, dims):
    """``repeat`` with ``dims`` padded with leading 1s to ``x``'s number of dims."""
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    return repeat(x, (1,) * (x.ndim - len(dims)) + dims)


@defcomposite("unflatten", public="unflatten", methods="unflatten")
def unflatten(x, dim, sizes):
    """Dim ``dim`` split into ``sizes`` (one may be -1)."""
    d = _dim(dim, x.ndim, "unflatten")
    sizes = list(sizes)
    if sizes.count(-1) == 1:
        known = 1
        for s in sizes:
            known *= s if s != -1 else 1
        sizes[sizes.index(-1)] = x.shape[d] // known if known else 0
    total = 1
    for s in sizes:
        total *= s
    if total != x.shape[d]:
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the "
                           f"size of dim {dim} ({x.shape[d]}) in the input tensor")
    return _reshape(x, x.shape[:d] + tuple(sizes) + x.shape[d + 1:])


@defcomposite("tensor_split", public="tensor_split", methods="tensor_split")
def tensor_split(x, indices_or_sections, dim=0):
    """Views split along ``dim``: into n near-equal parts (the first ``size % n`` one larger)
    or at the given indices."""
    d = _dim(dim, x.ndim, "tensor_split")
    size = x.shape[d]
    if isinstance(indices_or_sections, Tensor):
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, int):
        n = indices_or_sections
        if n <= 0:
            raise RuntimeError(f"tensor_split: number of sections must be larger than 0, got {n}")
        q, r = divmod(size, n)
        bounds, start = [], 0
        for i in range(n):
            start += q + (1 if i < r else 0)
            bounds.append(start)
        bounds = bounds[:-1]
    else:
        bounds = list(indices_or_sections)
    out, prev = [], 0
    for b in bounds + [size]:
        b = builtins.min(builtins.max(b + size if b < 0 else b, 0), size)
        start = builtins.min(prev, size)
        out.append(_call("slice", x, dim=d, start=start, end=builtins.max(b, start)))
        prev = b
    return tuple(out)


@defcomposite("hstack", public="hstack")
def hstack(tensors):
    """Join along dim 1 (dim 0 for 1-D tensors)."""
    tensors = [t if t.ndim else _reshape(t, (1,)) for t in tensors]
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


@defcomposite("vstack", public=("vstack", "row_stack"))
def vstack(tensors):
    """Join along dim 0, 0-d and 1-D tensors taken as rows."""
    return cat([_reshape(t, (1, -1)) if t.ndim < 2 else t for t in tensors], 0)


# --------------------------------------------------------------------------- indexing


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


def _einsum_diagonals(subs, out, operands):
    """einsum with a letter repeated in an operand: replace that operand by its diagonal over
    the two dims (the letter moves last, as :func:`diagonal` puts it), then the plain einsum."""
    new_subs, new_ops = [], []
    for s, t in zip(subs, operands):
        if "..." in s:
            raise NotImplementedError("einsum: a repeated subscript together with '...' is not "
                                      "supported")
        letters = list(s)
        while len(set(letters)) != len(letters):
            c = next(c for c in letters if letters.count(c) > 1)
            i = letters.index(c)
            j = letters.index(c, i + 1)
            if t.shape[i] != t.shape[j]:
                raise RuntimeError(f"einsum(): subscript {c} is repeated for operand but the "
                                   f"sizes don't match, {t.shape[i]} != {t.shape[j]}")
            t = diagonal(t, 0, i, j)
            letters = [x for k, x in enumerate(letters) if k not in (i, j)] + [c]
        new_subs.append("".join(letters))
        new_ops.append(t)
    return einsum(",".join(new_subs) + "->" + out, *new_ops)
