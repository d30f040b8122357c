"""The public functions of the shape family (``shape.py``) that are more than a call of one
op: ``reshape``'s -1, ``permute``'s and ``squeeze``'s dims, the checks of ``cat``/``stack``/
``split``, and the views and joins composed from them (``flatten``, ``narrow``, ``chunk``,
``movedim``, ``tile``, ``tensor_split``, ``hstack``...).

Each declares its public and Tensor method names with ``@expose`` or ``@defcomposite``; an op
that needs none of this gets its function and methods from its ``defop`` entry.
"""
from __future__ import annotations

import builtins

from ..dispatch import OPS, apply_op, defcomposite, expose
from .._tensor import Tensor
from .arguments import _call, _dim
from .reduction import norm_dims
from .shape import MAX_CAT_INPUTS


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
