"""Shape primitives: reshape, transpose/permute, expand and its adjoint sum_to_size, joining,
padding, flips and rolls.

Each is linear in its tensor input, so its forward-mode rule is the op itself applied to the
tangent (``jvp=linear_in(0)``).
"""
from __future__ import annotations

import numpy

from ..backend import matmul
from ..dispatch import defop, linear_in


# Views by array methods, not xp.reshape / xp.swapaxes / xp.transpose: NumPy's function forms
# go through a Python dispatch wrapper that costs 0.3-1 us more per call (for the same view),
# which a small model's backward pays on every reshape and transpose.
def _reshape_fwd(xp, x, shape):
    return x.reshape(shape)


def _to_input_shape(F, g, out, x, **attrs):
    """The reverse rule of every reshape-like view (reshape, unsqueeze, squeeze): g as x's shape."""
    return F.reshape(g, shape=x.shape)


defop("reshape", _reshape_fwd, (_to_input_shape,), jvp=linear_in(0), meta=(0,), view=True,
      node_name="ViewBackward0")


# PyTorch's _unsafe_view: a reshape that autograd does not track as a view (its composites,
# kron's, end in one: UnsafeViewBackward0).
defop("_unsafe_view", _reshape_fwd, (_to_input_shape,), jvp=linear_in(0), meta=(0,),
      node_name="UnsafeViewBackward0")


def _squeeze_fwd(xp, x, dims):
    # The size-1 dims among ``dims`` (negatives count from the end) go; others stay, as
    # PyTorch ignores them.
    dims = {d % x.ndim for d in dims} if x.ndim else ()
    return x.reshape(tuple(n for i, n in enumerate(x.shape) if n != 1 or i not in dims))


# unsqueeze and squeeze are reshapes, under PyTorch's nodes: squeeze() SqueezeBackward0,
# squeeze(dim) SqueezeBackward1, squeeze(dims) SqueezeBackward2.
def _unsqueeze_fwd(xp, x, dim):
    dim %= x.ndim + 1    # a negative dim counts from the end of the result (rules pass -2)
    return x.reshape(x.shape[:dim] + (1,) + x.shape[dim:])


defop("unsqueeze", _unsqueeze_fwd, (_to_input_shape,), jvp=linear_in(0), meta=(0,), view=True,
      node_name="UnsqueezeBackward0")
# (Named as PyTorch's overloads, aten::squeeze.dim and aten::squeeze.dims.)
for _name, _node in (("squeeze", "SqueezeBackward0"), ("squeeze.dim", "SqueezeBackward1"),
                     ("squeeze.dims", "SqueezeBackward2")):
    defop(_name, _squeeze_fwd, (_to_input_shape,), jvp=linear_in(0), meta=(0,), view=True,
          node_name=_node)
# t(): the transpose of a 2-D tensor, a view of the tensor itself for fewer dims (TBackward0).
defop("t", lambda xp, x: x.swapaxes(0, 1) if x.ndim == 2 else x.view(),
      (lambda F, g, out, x: F.t(g),), jvp=linear_in(0), view=True, node_name="TBackward0")
# A 0-d tensor's dims 0 and -1 are its one (absent) dim: the transpose is a view of it.
defop("transpose", lambda xp, x, dim0, dim1: x.swapaxes(dim0, dim1) if x.ndim else x.view(),
      (lambda F, g, out, x, dim0, dim1: F.transpose(g, dim0=dim0, dim1=dim1),),
      jvp=linear_in(0), view=True, public="transpose", methods="transpose")


def _inverse(dims):
    inv = [0] * len(dims)
    for i, d in enumerate(dims):
        inv[d % len(dims)] = i
    return tuple(inv)


defop("permute", lambda xp, x, dims: x.transpose(dims),
      (lambda F, g, out, x, dims: F.permute(g, dims=_inverse(dims)),), jvp=linear_in(0),
      view=True)


def expand_shape(shape, target) -> tuple:
    """``target`` with -1 entries taken from ``shape`` (aligned from the right)."""
    target = tuple(target)
    lead = len(target) - len(shape)
    if lead < 0:
        raise ValueError(f"the number of sizes provided ({len(target)}) must be greater or "
                         f"equal to the number of dimensions in the tensor ({len(shape)})")
    return tuple(shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(target))


def _expand_fwd(xp, x, shape):
    return xp.broadcast_to(x, expand_shape(x.shape, shape))


def sum_axes(shape, target) -> tuple:
    """The axes an array of ``shape`` is summed over to get ``target``, which it was broadcast
    from (the result then has ``target``'s elements, to be reshaped to it)."""
    lead = len(shape) - len(target)
    return tuple(range(lead)) + tuple(
        i + lead for i, s in enumerate(target) if s == 1 and shape[i + lead] != 1)


def sum_to_shape(xp, x, shape):
    """Sum ``x`` down to ``shape``, which it was broadcast from."""
    shape = tuple(shape)
    if x.shape == shape:
        return x
    axes = sum_axes(x.shape, shape)
    return sum_over(xp, x, axes, shape) if axes else x.reshape(shape)


_ONES: dict = {}       # (length, dtype) -> a read-only NumPy vector of ones
_ONES_MAX_LEN = 4096   # longer sums spend far more on the arithmetic than on the allocation


def ones_vector(xp, n, dtype):
    """``n`` ones of ``dtype``: the GEMV operand of the bias and row sums. NumPy's are made once
    per (length, dtype) up to _ONES_MAX_LEN and kept read-only (their allocation was a third
    of a small sum); CuPy's are made per call (an array lives on one device)."""
    if xp is not numpy or n > _ONES_MAX_LEN:
        return xp.ones(n, dtype=dtype)
    key = (n, dtype)
    v = _ONES.get(key)
    if v is None:
        v = numpy.ones(n, dtype=dtype)
        v.flags.writeable = False
        if len(_ONES) >= 256:   # many lengths (varying batches): start over, stay small
            _ONES.clear()
        _ONES[key] = v
    return v


def sum_over(xp, x, axes, shape):
    """``x`` summed over ``axes`` (non-empty, as :func:`sum_axes` gives them) and reshaped to
    ``shape``: sum_to_shape's arithmetic, for callers that know the axes already (compiled
    autograd folds them into its programs). Array methods, not ``xp.reshape``: on a bias of a
    small model this is called per layer per step, and NumPy's function forms cost more than
    the GEMV itself."""
    if axes[-1] == len(axes) - 1 and x.dtype.kind == "f" and x.dtype.itemsize >= 4 and \
            x.size and x.flags.c_contiguous:
        # Leading axes only (a bias's gradient): one GEMV, ones @ (rows, rest), 2-3x faster
        # than xp.sum over the leading axes on the CPU and no less accurate.
        rows = 1
        for s in x.shape[:len(axes)]:
            rows *= s
        x2 = x.reshape(rows, x.size // rows)
        out = matmul(xp, ones_vector(xp, rows, x.dtype), x2)
    else:
        out = x.sum(axis=axes)
    # A reshape is a view even to the same shape, and a view's buffer cannot become ``.grad``
    # (the engine copies it instead): reshaped only where the shape differs, or to make an
    # array of the NumPy scalar that a reduction over every axis gives.
    return out if out.shape == shape and out.ndim else out.reshape(shape)


defop("expand", _expand_fwd, (lambda F, g, out, x, shape: F.sum_to_size(g, shape=x.shape),),
      jvp=linear_in(0), meta=(0,), view=True)
defop("sum_to_size", sum_to_shape,
      (lambda F, g, out, x, shape: F.expand(g, shape=x.shape),), jvp=linear_in(0), meta=(0,),
      node_name="SumToSizeBackward0")


# --------------------------------------------------------------------------- joining


def _cat_rule(i):
    """Rule for input ``i`` of cat: its slice of the gradient (sizes are an attribute, so cat
    saves nothing)."""

    def rule(F, g, out, *xs, dim, sizes):
        start = 0
        for s in sizes[:i]:
            start += s
        return F.slice(g, dim=dim, start=start, end=start + sizes[i])   # PyTorch's narrow

    return rule


def _stack_rule(i):
    """Rule for input ``i`` of stack: its slice of the gradient, without the new dim."""

    def rule(F, g, out, *xs, dim):
        return F.select(g, dim=dim, index=i)

    return rule


#: cat and stack take any number of inputs; each needs its own rule, so the table holds this
#: many: the public ``cat`` joins longer lists in rounds, ``stack`` goes through cat for them.
MAX_CAT_INPUTS = 64

defop("cat", lambda xp, *xs, dim, sizes: xp.concatenate(xs, axis=dim),
      tuple(_cat_rule(i) for i in range(MAX_CAT_INPUTS)),
      jvp=linear_in(*range(MAX_CAT_INPUTS)))
defop("stack", lambda xp, *xs, dim: xp.stack(xs, axis=dim),
      tuple(_stack_rule(i) for i in range(MAX_CAT_INPUTS)),
      jvp=linear_in(*range(MAX_CAT_INPUTS)))


# --------------------------------------------------------------------------- padding, flips, rolls


def _pad_widths(ndim, pad):
    """PyTorch's pad tuple (last dim first: left, right, then the dim before...) as per-axis
    (before, after) pairs."""
    widths = [(0, 0)] * ndim
    for k in range(len(pad) // 2):
        widths[ndim - 1 - k] = (pad[2 * k], pad[2 * k + 1])
    return widths


def _pad_fwd(xp, x, pad, value=0.0):
    return xp.pad(x, _pad_widths(x.ndim, pad), mode="constant", constant_values=value)


def _unpad_key(shape, pad):
    widths = _pad_widths(len(shape), pad)
    return tuple(slice(b, b + s) for (b, _), s in zip(widths, shape))


defop("pad", _pad_fwd,
      (lambda F, g, out, x, pad, value=0.0: F.index(g, key=_unpad_key(x.shape, pad)),),
      # The padding value is a constant: the tangent is padded with zeros.
      jvp=(lambda F, t, out, x, pad, value=0.0: F.pad(t, pad=pad, value=0.0),),
      meta=(0,), node_name="ConstantPadNdBackward0")
defop("flip", lambda xp, x, dims: xp.flip(x, axis=dims),
      (lambda F, g, out, x, dims: F.flip(g, dims=dims),), jvp=linear_in(0))
defop("roll", lambda xp, x, shifts, dims: xp.roll(x, shifts, axis=dims),
      (lambda F, g, out, x, shifts, dims: F.roll(
          g, shifts=tuple(-s for s in shifts) if isinstance(shifts, tuple) else -shifts,
          dims=dims),), jvp=linear_in(0))
defop("tril", lambda xp, x, diagonal=0: xp.tril(x, diagonal),
      (lambda F, g, out, x, diagonal=0: F.tril(g, diagonal=diagonal),), jvp=linear_in(0),
      public="tril", methods="tril")
defop("triu", lambda xp, x, diagonal=0: xp.triu(x, diagonal),
      (lambda F, g, out, x, diagonal=0: F.triu(g, diagonal=diagonal),), jvp=linear_in(0),
      public="triu", methods="triu")


# --------------------------------------------------------------------------- repeat


def _repeat_vjp(F, g, out, x, sizes):
    """Each copy's gradient summed back: g as (r0, s0, r1, s1, ...), summed over the r's."""
    shape = (1,) * (len(sizes) - len(x.shape)) + tuple(x.shape)
    split = []
    for r, s in zip(sizes, shape):
        split += [r, s]
    summed = F.sum(F.reshape(g, shape=tuple(split)), dim=tuple(range(0, len(split), 2)))
    return F.reshape(summed, shape=x.shape)


# NOTE: a primitive for PyTorch's node (RepeatBackward0) and one node instead of three.
defop("repeat", lambda xp, x, sizes: xp.tile(x, sizes), (_repeat_vjp,), jvp=linear_in(0),
      meta=(0,))


# --------------------------------------------------------------------------- strided views


def _strided(xp, x, shape, strides):
    """A view of ``x`` with these sizes and byte strides (writeable, as PyTorch's views: an
    in-place op on it writes into ``x``)."""
    return xp.lib.stride_tricks.as_strided(x, shape=tuple(shape), strides=tuple(strides))


def _diagonal_fwd(xp, x, offset=0, dim1=0, dim2=1):
    planes = xp.moveaxis(x, (dim1, dim2), (-2, -1))
    n1, n2 = planes.shape[-2:]
    start1, start2 = (0, offset) if offset >= 0 else (-offset, 0)
    length = max(0, min(n1 - start1, n2 - start2))
    corner = planes[..., start1:start1 + length, start2:start2 + length]
    return _strided(xp, corner, corner.shape[:-2] + (length,),
                    corner.strides[:-2] + (corner.strides[-2] + corner.strides[-1],))


def _diagonal_backward_fwd(xp, g, shape, offset=0, dim1=0, dim2=1):
    z = xp.zeros(shape, dtype=g.dtype)
    _diagonal_fwd(xp, z, offset, dim1, dim2)[...] = g
    return z


# diagonal: a view (DiagonalBackward0), its adjoint puts the gradient on the diagonal of zeros.
defop("diagonal", _diagonal_fwd,
      (lambda F, g, out, x, offset=0, dim1=0, dim2=1: F.diagonal_backward(
          g, shape=x.shape, offset=offset, dim1=dim1, dim2=dim2),),
      jvp=linear_in(0), meta=(0,), view=True)
defop("diagonal_backward", _diagonal_backward_fwd,
      (lambda F, g, out, x, shape, offset=0, dim1=0, dim2=1: F.diagonal(
          g, offset=offset, dim1=dim1, dim2=dim2),), jvp=linear_in(0))


def _diag_embed_shape(shape, offset, dim1, dim2):
    """diag_embed's output shape: the last dim, grown by |offset|, as both dims of a plane."""
    n = shape[-1] + abs(offset)
    out = list(shape[:-1])
    for d in sorted((dim1, dim2)):
        out.insert(d, n)
    return tuple(out)


# diag_embed (PyTorch's DiagEmbedBackward0, also torch.diag of a vector): the last dim as the
# diagonal ``offset`` of zero planes over (dim1, dim2) of the output; diagonal's adjoint.
defop("diag_embed", lambda xp, x, offset=0, dim1=-2, dim2=-1: _diagonal_backward_fwd(
          xp, x, _diag_embed_shape(x.shape, offset, dim1, dim2), offset, dim1, dim2),
      (lambda F, g, out, x, offset=0, dim1=-2, dim2=-1: F.diagonal(
          g, offset=offset, dim1=dim1, dim2=dim2),), jvp=linear_in(0), meta=(0,))
# diagonal_copy: torch.diag of a matrix is a copy, not a view (PyTorch's node for it is
# DiagonalBackward0_copy).
defop("diagonal_copy", lambda xp, x, offset=0, dim1=0, dim2=1: _diagonal_fwd(
          xp, x, offset, dim1, dim2).copy(),
      (lambda F, g, out, x, offset=0, dim1=0, dim2=1: F.diagonal_backward(
          g, shape=x.shape, offset=offset, dim1=dim1, dim2=dim2),),
      jvp=linear_in(0), meta=(0,), node_name="DiagonalBackward0_copy")


def _unfold_fwd(xp, x, dimension, size, step):
    """Windows of ``size`` every ``step`` along ``dimension``, as a new last dim (a view)."""
    if x.ndim == 0:
        return x.reshape(1)
    n = (x.shape[dimension] - size) // step + 1
    shape = x.shape[:dimension] + (n,) + x.shape[dimension + 1:] + (size,)
    stride = x.strides[dimension]
    strides = x.strides[:dimension] + (stride * step,) + x.strides[dimension + 1:] + (stride,)
    return _strided(xp, x, shape, strides)


def _unfold_backward_fwd(xp, g, shape, dimension, size, step):
    """Each window's gradient added back where it was read (windows may overlap)."""
    z = xp.zeros(shape, dtype=g.dtype)
    if not z.ndim:
        return g.reshape(())
    n = g.shape[dimension]
    for k in range(size):
        key = (slice(None),) * dimension + (slice(k, k + step * (n - 1) + 1, step),)
        z[key] += g[..., k]
    return z


defop("unfold", _unfold_fwd,
      (lambda F, g, out, x, dimension, size, step: F.unfold_backward(
          g, shape=x.shape, dimension=dimension, size=size, step=step),),
      jvp=linear_in(0), meta=(0,), view=True)
defop("unfold_backward", _unfold_backward_fwd,
      (lambda F, g, out, x, shape, dimension, size, step: F.unfold(
          g, dimension=dimension, size=size, step=step),), jvp=linear_in(0))
