"""Shape composites a PyTorch user reaches for: ``rot90``, ``meshgrid``, ``cartesian_prod``,
``combinations``, ``block_diag``, ``diagflat``, ``hsplit``/``vsplit``/``dsplit``,
``dstack``/``column_stack``, ``atleast_1d/2d/3d``, ``ravel``, ``broadcast_to``/
``broadcast_tensors``/``broadcast_shapes``, ``fliplr``/``flipud``, ``vander``, ``index_fill``,
``index_copy``, ``masked_scatter`` and ``select_scatter``/``slice_scatter``/
``diagonal_scatter``.

Each is built from the views and joins in shape_api.py (their nodes are those primitives':
rot90 shows FlipBackward0 or TransposeBackward0 where PyTorch has its own Rot90Backward0).
"""
from __future__ import annotations

import builtins
import itertools

from ..dispatch import defcomposite, expose, expose_inplace
from ..dtypes import is_floating
from .._tensor import Tensor, tensor
from .arguments import _dim
from .linalg_api import diag
from .shape_api import cat, pad, stack, tensor_split


@defcomposite("rot90", public="rot90", methods="rot90")
def rot90(input, k=1, dims=(0, 1)):  # noqa: A002 - PyTorch's names
    """Rotate by 90 degrees ``k`` times in the plane ``dims``, from the first dim's direction
    towards the second's."""
    dims = list(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = (_dim(d, input.ndim, "rot90") for d in dims)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and "
                           f"dim1 = {d1}")
    k %= 4
    if k == 1:
        return input.flip(d1).transpose(d0, d1)
    if k == 2:
        return input.flip(d0, d1)
    if k == 3:
        return input.flip(d0).transpose(d0, d1)
    return input.clone()


def _tensors(args, op):
    """``f(a, b)`` and ``f([a, b])`` alike, as PyTorch's varargs functions."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = tuple(args[0])
    for t in args:
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}(): expected Tensor as element 0 in argument 0, but got "
                            f"{type(t).__name__}")
    return args


@defcomposite("meshgrid", public="meshgrid")
def meshgrid(*tensors, indexing="ij"):
    """Grids of 0-d or 1-D tensors, each expanded along the others' dims (``indexing="xy"``:
    the first two dims swapped, as NumPy's default)."""
    tensors = _tensors(tensors, "meshgrid")
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: '
                           f'{indexing}')
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but "
                               f"got: {t}")
    flat = [t.reshape(-1) for t in tensors]
    swap = indexing == "xy" and len(flat) >= 2
    if swap:
        flat[0], flat[1] = flat[1], flat[0]
    shape = [t.shape[0] for t in flat]
    grids = []
    for i, t in enumerate(flat):
        view = [1] * len(flat)
        view[i] = shape[i]
        grids.append(t.reshape(*view).expand(*shape))
    if swap:   # the grids in the inputs' order again
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


@defcomposite("cartesian_prod", public="cartesian_prod")
def cartesian_prod(*tensors):
    """All tuples of one element from each 1-D tensor, as rows (a single tensor: itself)."""
    tensors = _tensors(tensors, "cartesian_prod")
    for t in tensors:
        if t.ndim != 1:
            raise RuntimeError("Expect a 1D vector, but got shape "
                               f"{list(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    return stack([g.reshape(-1) for g in meshgrid(*tensors, indexing="ij")], 1)


@defcomposite("combinations", public="combinations")
def combinations(input, r=2, with_replacement=False):  # noqa: A002
    """The length-``r`` combinations of a 1-D tensor's elements, as rows, in
    ``itertools.combinations`` order (``with_replacement``: with repeats)."""
    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return input[:0]
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = list(pick(range(input.shape[0]), r))
    if not rows:
        return input[:0].reshape(0, r)
    cols = [input.index_select(0, tensor([row[j] for row in rows], device=input.device))
            for j in range(r)]
    return stack(cols, 1)


@defcomposite("block_diag", public="block_diag")
def block_diag(*tensors):
    """The tensors (0-d: 1 x 1, 1-D: one row) as blocks on the diagonal of a matrix."""
    mats = []
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer "
                               f"dimensions. Input {i} has {t.ndim} dimensions")
        mats.append(t.reshape(1, 1) if t.ndim == 0 else t.reshape(1, -1) if t.ndim == 1 else t)
    if not mats:
        return tensor([[]]).reshape(1, 0)
    width = sum(m.shape[1] for m in mats)
    rows, left = [], 0
    for m in mats:
        right = width - left - m.shape[1]
        rows.append(pad(m, (left, right)))
        left += m.shape[1]
    return cat(rows, 0)


@defcomposite("diagflat", public="diagflat", methods="diagflat")
def diagflat(input, offset=0):  # noqa: A002
    """A matrix with the flattened ``input`` on diagonal ``offset``."""
    return diag(input.reshape(-1), offset)


def _split_at(x, indices_or_sections, dim, op, need):
    if x.ndim < need:
        raise RuntimeError(f"torch.{op} requires a tensor with at least {need} dimension, but got "
                           f"a tensor with {x.ndim} dimensions!")
    if isinstance(indices_or_sections, int):
        n = indices_or_sections
        if n == 0 or x.shape[dim] % n:
            raise RuntimeError(f"torch.{op} attempted to split along dimension {dim}, but the "
                               f"size of the dimension {x.shape[dim]} is not divisible by the "
                               f"split_size {n}!")
    return tensor_split(x, indices_or_sections, dim)


@expose(public="hsplit", methods="hsplit")
def hsplit(input, indices_or_sections):  # noqa: A002
    """:func:`tensor_split` along dim 1 (dim 0 of a 1-D tensor), equal parts only."""
    return _split_at(input, indices_or_sections, 1 if input.ndim > 1 else 0, "hsplit", 1)


@expose(public="vsplit", methods="vsplit")
def vsplit(input, indices_or_sections):  # noqa: A002
    """:func:`tensor_split` along dim 0 of a tensor of 2 or more dims."""
    return _split_at(input, indices_or_sections, 0, "vsplit", 2)


@expose(public="dsplit", methods="dsplit")
def dsplit(input, indices_or_sections):  # noqa: A002
    """:func:`tensor_split` along dim 2 of a tensor of 3 or more dims."""
    return _split_at(input, indices_or_sections, 2, "dsplit", 3)


def _atleast(tensors, n):
    def one(t):
        if t.ndim >= n:
            return t
        shape = {0: (1, 1, 1), 1: (1, t.numel(), 1), 2: (*t.shape, 1)}[t.ndim] if n == 3 \
            else (1,) * (n - t.ndim) + tuple(t.shape)
        return t.reshape(*shape)
    if len(tensors) == 1 and isinstance(tensors[0], Tensor):
        return one(tensors[0])
    if len(tensors) == 1:
        tensors = tensors[0]
    return tuple(one(t) for t in tensors)


@expose(public="atleast_1d")
def atleast_1d(*tensors):
    """Each tensor with at least 1 dim (one tensor in, one out; several: a tuple)."""
    return _atleast(tensors, 1)


@expose(public="atleast_2d")
def atleast_2d(*tensors):
    """Each tensor with at least 2 dims (new dims in front)."""
    return _atleast(tensors, 2)


@expose(public="atleast_3d")
def atleast_3d(*tensors):
    """Each tensor with at least 3 dims (NumPy's rule: (N,) becomes (1, N, 1), (M, N)
    becomes (M, N, 1))."""
    return _atleast(tensors, 3)


@defcomposite("dstack", public="dstack")
def dstack(tensors):
    """Join along dim 2, after :func:`atleast_3d`."""
    return cat(list(_atleast((list(tensors),), 3)), 2)


@defcomposite("column_stack", public="column_stack")
def column_stack(tensors):
    """Join as columns: 0-d and 1-D tensors become columns, then join along dim 1."""
    return cat([t.reshape(-1, 1) if t.ndim < 2 else t for t in tensors], 1)


@expose(public="ravel", methods="ravel")
def ravel(input):  # noqa: A002
    """The elements as a 1-D tensor (a view where possible)."""
    return input.reshape(-1)


@expose(public="adjoint")
def adjoint(input):  # noqa: A002
    """The conjugate transpose of the last two dims (:attr:`Tensor.mH`)."""
    return input.adjoint()


@expose(public="broadcast_shapes")
def broadcast_shapes(*shapes):
    """The shape the given shapes broadcast to (PyTorch's error where they do not)."""
    shapes = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for index, shape in enumerate(shapes):
        for i, n in enumerate(reversed(shape)):
            k = ndim - 1 - i
            if out[k] == 1:
                out[k] = n
            elif n != 1 and n != out[k]:
                raise RuntimeError(
                    f"Attempting to broadcast a dimension of length {n} at {-1 - i}! Mismatching "
                    f"argument at index {index} had {tuple(shape)}; but expected shape should be "
                    f"broadcastable to {out[k:]}")
    return tuple(out)


@expose(public="broadcast_to", methods="broadcast_to")
def broadcast_to(input, size):  # noqa: A002
    """:meth:`Tensor.expand` to ``size`` (a view; ExpandBackward0)."""
    return input.expand(*size)


@expose(public="broadcast_tensors")
def broadcast_tensors(*tensors):
    """The tensors expanded to their common shape (views; a tensor already of that shape is
    returned as it is, as PyTorch's)."""
    shape = broadcast_shapes(*(t.shape for t in tensors))
    return tuple(t if tuple(t.shape) == shape else t.expand(*shape) for t in tensors)


@expose(public="fliplr", methods="fliplr")
def fliplr(input):  # noqa: A002
    """Reverse dim 1 (left/right)."""
    if input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return input.flip(1)


@expose(public="flipud", methods="flipud")
def flipud(input):  # noqa: A002
    """Reverse dim 0 (up/down)."""
    if input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return input.flip(0)



@defcomposite("vander", public="vander")
def vander(x, N=None, increasing=False):  # noqa: N803 - PyTorch's name
    """The Vandermonde matrix of a 1-D tensor: columns ``x**(N-1) .. x**0`` (``increasing``:
    ``x**0 .. x**(N-1)``)."""
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    base = x if is_floating(x.dtype) else x.long()
    powers = base.unsqueeze(-1) ** tensor(list(range(n)), device=x.device)
    return powers if increasing else powers.flip(-1)


@defcomposite("index_fill", public="index_fill", methods="index_fill")
def index_fill(input, dim, index, value):  # noqa: A002
    """``input`` with the entries at ``index`` along ``dim`` set to ``value`` (a number or a
    0-d tensor)."""
    d = _dim(dim, input.ndim, "index_fill")
    if index.ndim > 1:
        raise IndexError("Index is supposed to be a vector")
    n = input.shape[d] if input.ndim else 1
    hit = _hits(index, n, d, input.device)
    shape = [1] * input.ndim
    if input.ndim:
        shape[d] = n
    return input.masked_fill(hit.reshape(*shape) if input.ndim else hit.reshape(()), value)


def _hits(index, n, dim, device):
    """A bool vector of length ``n``, True at ``index`` (negatives count from the end)."""
    idx = index._data.reshape(-1)
    xp = device.xp
    if idx.size and (bool((idx >= n).any()) or bool((idx < -n).any())):
        bad = int(idx[(idx >= n) | (idx < -n)][0])
        raise IndexError(f"index {bad} is out of bounds for dimension {dim} with size {n}")
    mask = xp.zeros(n, bool)
    mask[idx % builtins.max(n, 1)] = True
    return Tensor._make(mask, False, None, 0, [0], device)


expose_inplace(index_fill, "index_fill_")


@defcomposite("masked_scatter", public="masked_scatter", methods="masked_scatter")
def masked_scatter(input, mask, source):  # noqa: A002
    """``input`` with the positions where ``mask`` (broadcast) is True filled, in row-major
    order, from the first elements of ``source``."""
    shape = broadcast_shapes(tuple(input.shape), tuple(mask.shape))
    x = input if tuple(input.shape) == shape else input.expand(*shape)
    m = mask._data if tuple(mask.shape) == shape else mask.expand(*shape)._data
    positions = m.reshape(-1).nonzero()[0]
    n = int(positions.shape[0])
    if source.numel() < n:
        raise RuntimeError("Number of elements of source < number of ones in mask")
    where = Tensor._make(positions.astype("int64"), False, None, 0, [0], input.device)
    flat = x.reshape(-1).index_put((where,), source.reshape(-1)[:n])
    return flat.reshape(*shape)


expose_inplace(masked_scatter, "masked_scatter_")


@defcomposite("index_copy", public="index_copy", methods="index_copy")
def index_copy(input, dim, index, source):  # noqa: A002
    """``input`` with its slices at ``index`` along ``dim`` replaced by ``source``'s."""
    d = _dim(dim, input.ndim, "index_copy")
    if index.ndim > 1:
        raise IndexError("index_copy_(): Index should have dimension 1 or 0 (got "
                         f"{index.ndim})")
    if input.ndim == 0:
        return source.reshape(()) * 1
    moved = input.movedim(d, 0)
    values = source.movedim(d, 0) if source.ndim else source
    return moved.index_put((index.reshape(-1),), values).movedim(0, d)


expose_inplace(index_copy, "index_copy_")


def _scatter_into(input, view, src):
    """A copy of ``input`` with the part ``view(copy)`` replaced by ``src`` (PyTorch's
    *_scatter ops; here CopySlices over a clone)."""
    out = input.clone()
    part = view(out)
    if tuple(part.shape) != tuple(src.shape):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = "
                           f"{list(src.shape)}, slice size = {list(part.shape)}")
    part.copy_(src)
    return out


@defcomposite("select_scatter", public="select_scatter")
def select_scatter(input, src, dim, index):  # noqa: A002
    """``input`` with ``input.select(dim, index)`` replaced by ``src``."""
    return _scatter_into(input, lambda t: t.select(dim, index), src)


@defcomposite("slice_scatter", public="slice_scatter")
def slice_scatter(input, src, dim=0, start=None, end=None, step=1):  # noqa: A002
    """``input`` with the slice ``start:end:step`` of ``dim`` replaced by ``src``."""
    d = _dim(dim, input.ndim, "slice_scatter")
    key = (slice(None),) * d + (slice(start, end, step),)
    return _scatter_into(input, lambda t: t[key], src)


@defcomposite("diagonal_scatter", public="diagonal_scatter")
def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):  # noqa: A002
    """``input`` with ``input.diagonal(offset, dim1, dim2)`` replaced by ``src``."""
    return _scatter_into(input, lambda t: t.diagonal(offset, dim1, dim2), src)
