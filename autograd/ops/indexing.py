"""Indexing by slices, integers, integer arrays and boolean masks; splits into several views;
gather/scatter; embedding.

Each op is linear in its value inputs (the indices are constants), so its forward-mode rule
is the op itself applied to the tangents (``jvp=linear_in(...)``).
"""
from __future__ import annotations

from .. import backend
from ..dispatch import defop, linear_in
from .shape import MAX_CAT_INPUTS


def is_basic_index(key) -> bool:
    """True when ``key`` uses only ints, slices, None and Ellipsis (so the result is a view)."""
    items = key if isinstance(key, tuple) else (key,)
    return all(k is None or k is Ellipsis or isinstance(k, (int, slice)) for k in items)


def _index_backward(xp, g, shape, key):
    """Gradient of ``x[key]``: zeros of x's shape with ``g`` added at ``key`` (repeats summed)."""
    z = xp.zeros(shape, dtype=g.dtype)
    if is_basic_index(key):
        z[key] = g
    else:
        backend.scatter_add(xp, z, key, g)
    return z


defop("index", lambda xp, x, key: x[key],
      (lambda F, g, out, x, key: F.index_backward(g, shape=x.shape, key=key),),
      jvp=linear_in(0), meta=(0,), view=lambda key: is_basic_index(key))
defop("index_backward", _index_backward,
      (lambda F, g, out, x, shape, key: F.index(g, key=key),), jvp=linear_in(0))


def _index_add_fwd(xp, x, source, key, alpha=1):
    out = x.copy()
    backend.scatter_add(xp, out, key, source * alpha if alpha != 1 else source)
    return out


# PyTorch's IndexAddBackward0 (one node where the composite made an index_backward and an
# add): ``x`` passes the gradient whole, ``source`` takes it at the index (times alpha).
defop("index_add", _index_add_fwd,
      (lambda F, g, out, x, source, key, alpha=1: g,
       lambda F, g, out, x, source, key, alpha=1: F.index(g, key=key) * alpha),
      jvp=(lambda F, t, out, x, source, key, alpha=1: t,
           lambda F, t, out, x, source, key, alpha=1: F.index_backward(t * alpha, shape=x.shape,
                                                                      key=key)),
      node_name="IndexAddBackward0")


# --------------------------------------------------------------------------- slices and splits


def _slice_key(dim, start, end, step=1):
    return (slice(None),) * dim + (slice(start, end, step),)


def _select_key(dim, index):
    return (slice(None),) * dim + (index,)


# The basic views under PyTorch's nodes: ``x[1:3]``, ``narrow`` and ``tensor_split``'s pieces
# are aten::slice (SliceBackward0), ``x[0]`` and ``select`` aten::select (SelectBackward0),
# ``x[...]`` aten::alias (AliasBackward0). Bounds are normalized by the caller (start <= end,
# 0 <= index < size, step > 0).
defop("slice", lambda xp, x, dim, start, end, step=1: x[_slice_key(dim, start, end, step)],
      (lambda F, g, out, x, dim, start, end, step=1:
       F.index_backward(g, shape=x.shape, key=_slice_key(dim, start, end, step)),),
      jvp=linear_in(0), meta=(0,), view=True, node_name="SliceBackward0")
defop("select", lambda xp, x, dim, index: x[_select_key(dim, index)],
      (lambda F, g, out, x, dim, index:
       F.index_backward(g, shape=x.shape, key=_select_key(dim, index)),),
      jvp=linear_in(0), meta=(0,), view=True, node_name="SelectBackward0")
defop("alias", lambda xp, x: x.view(), (lambda F, g, out, x: g,), jvp=linear_in(0),
      view=True, node_name="AliasBackward0")


# split, split_with_sizes and unbind return several views under one node, as PyTorch's do
# (SplitBackward0, SplitWithSizesBackward0, UnbindBackward0): the backward joins the pieces'
# gradients (zeros for a piece that got none) into one array of the input's shape, where one
# IndexBackward0 per piece would each make an input-sized array for the engine to sum.
# ``view=`` names each output's key into the input: the forward is those keys, and each
# output remembers its own key as its view step.


def _equal_sizes(n: int, split_size: int) -> list:
    """The sizes of ``split(split_size)`` along a dim of size ``n``: equal pieces, the last
    smaller (one empty piece when ``n`` is 0, as PyTorch gives)."""
    return [min(split_size, n - i) for i in range(0, n, split_size)] if n else [0]


def _sizes_keys(sizes, dim):
    lead = (slice(None),) * dim
    keys, start = [], 0
    for s in sizes:
        keys.append(lead + (slice(start, start + s),))
        start += s
    return keys


def _split_keys(shape, split_size, dim):
    return _sizes_keys(_equal_sizes(shape[dim], split_size), dim)


def _split_with_sizes_keys(shape, split_sizes, dim):
    return _sizes_keys(split_sizes, dim)


def _unbind_keys(shape, dim):
    lead = (slice(None),) * dim
    return [lead + (i,) for i in range(shape[dim])]


def _join(F, g, dim):
    """The pieces' gradients ``g`` (all there: the node fills missing ones with zeros) joined
    along ``dim``; in rounds when there are more than cat takes at once."""
    while len(g) > MAX_CAT_INPUTS:
        g = [_join(F, g[i:i + MAX_CAT_INPUTS], dim) for i in range(0, len(g), MAX_CAT_INPUTS)]
    return F.cat(*g, dim=dim, sizes=tuple(p.shape[dim] for p in g))


def _unbind_vjp(F, g, out, x, dim):
    # PyTorch's: a stack of the pieces' gradients (cat of unsqueezed ones past stack's inputs).
    if len(g) <= MAX_CAT_INPUTS:
        return F.stack(*g, dim=dim)
    return _join(F, [F.unsqueeze(p, dim=dim) for p in g], dim)


def _split_fwd(xp, x, split_size, dim):
    return tuple(x[k] for k in _split_keys(x.shape, split_size, dim))


def _split_with_sizes_fwd(xp, x, split_sizes, dim):
    return tuple(x[k] for k in _sizes_keys(split_sizes, dim))


def _unbind_fwd(xp, x, dim):
    return tuple(x[k] for k in _unbind_keys(x.shape, dim))


defop("split", _split_fwd, (lambda F, g, out, x, split_size, dim: _join(F, g, dim),),
      jvp=linear_in(0), nout=None, view=_split_keys)
defop("split_with_sizes", _split_with_sizes_fwd,
      (lambda F, g, out, x, split_sizes, dim: _join(F, g, dim),),
      jvp=linear_in(0), nout=None, view=_split_with_sizes_keys)
defop("unbind", _unbind_fwd, (_unbind_vjp,), jvp=linear_in(0), nout=None, view=_unbind_keys)


# --------------------------------------------------------------------------- gather / scatter


def along_dim_key(xp, index, dim):
    """The full index tuple that addresses ``target[..., index[...], ...]`` along ``dim``:
    ``index`` on ``dim`` and an open grid on every other axis (shaped like ``index``)."""
    key = []
    for ax, n in enumerate(index.shape):
        if ax == dim:
            key.append(index)
        else:
            shape = [1] * index.ndim
            shape[ax] = n
            key.append(xp.arange(n).reshape(shape))
    return tuple(key)


def _gather_fwd(xp, x, index, dim):
    return x[along_dim_key(xp, index, dim)]


def _gather_backward_fwd(xp, g, index, shape, dim):
    z = xp.zeros(shape, dtype=g.dtype)
    key = along_dim_key(xp, index, dim)
    if index.ndim == 0 or index.shape[dim] == 1:
        # One index per line along ``dim`` (max/min, pooling): no repeats, so a plain
        # assignment does it, much faster than the unbuffered scatter-add.
        z[key] = g
    else:
        backend.scatter_add(xp, z, key, g)
    return z


def _scatter_add_fwd(xp, x, index, src, dim):
    out = x.copy()
    key = along_dim_key(xp, index, dim)
    backend.scatter_add(xp, out, key, src[tuple(slice(0, n) for n in index.shape)])
    return out


def _src_grad(F, g, index, dim):
    """src's gradient: ``g`` at ``index``, of index's shape, as PyTorch's. Where src is larger
    than index the engine rejects it as PyTorch's does ("returned an invalid gradient at
    index 1 - got [2, 1] but expected shape compatible with [2, 4]"): the forward reads only
    src's first entries, PyTorch's backward raises, and so does this one."""
    return F.gather(g, index, dim=dim)


defop("gather", _gather_fwd,
      (lambda F, g, out, x, index, dim: F.gather_backward(g, index, shape=x.shape, dim=dim), None),
      jvp=linear_in(0), meta=(0,))
defop("gather_backward", _gather_backward_fwd,
      (lambda F, g, out, gout, index, shape, dim: F.gather(g, index, dim=dim), None),
      jvp=linear_in(0))
defop("scatter_add", _scatter_add_fwd,
      (lambda F, g, out, x, index, src, dim: g, None,
       lambda F, g, out, x, index, src, dim: _src_grad(F, g, index, dim)),
      jvp=linear_in(0, 2), meta=(2,))


# --------------------------------------------------------------------------- scatter_reduce
# PyTorch's scatter_reduce: src reduced into x at index along dim by sum, prod, mean, amax or
# amin, with x's own entry taking part (include_self) or not. Sums go through scatter-add;
# the others through a segmented scan over the sorted targets (log2(n) elementwise steps), as
# CuPy has no ``multiply.at`` and its scatter_max says nothing of NaN (PyTorch's propagates).

SCATTER_REDUCES = ("sum", "prod", "mean", "amax", "amin")


def _within(src, index):
    """The part of ``src`` that ``index`` addresses (src may be larger in any dim)."""
    if tuple(src.shape) == tuple(index.shape):
        return src
    return src[tuple(slice(0, n) for n in index.shape)]


def _segment_reduce(xp, ids, vals, combine):
    """``vals`` (1-D) reduced by ``combine`` over equal ``ids``: (the distinct ids, each
    one's reduction)."""
    order = xp.argsort(ids, kind="stable")
    ids, vals = ids[order], vals[order]
    step = 1
    while step < ids.size:
        same = ids[step:] == ids[:-step]   # sorted: the whole stretch is one target
        vals[step:] = xp.where(same, combine(vals[:-step], vals[step:]), vals[step:])
        step *= 2
    last = xp.ones(ids.size, dtype=bool)
    last[:-1] = ids[1:] != ids[:-1]
    return ids[last], vals[last]


def _scatter_reduce_fwd(xp, x, index, src, dim, reduce, include_self=True):
    key = along_dim_key(xp, index, dim)
    src = _within(src, index)
    out = x.copy()
    if reduce in ("sum", "mean"):
        if not include_self:
            out[key] = 0
        backend.scatter_add(xp, out, key, src)
        if reduce == "sum":
            return out
        # Counted in x's float dtype (exact to 2**24 in float32), so that the division keeps it.
        floating = out.dtype.kind in "fc"
        count = xp.full(x.shape, 1 if include_self else 0, dtype=out.dtype if floating else "int64")
        backend.scatter_add(xp, count, key, xp.ones(index.shape, dtype=count.dtype))
        count = xp.maximum(count, 1)   # a target nothing reached keeps x
        return out / count if floating else out // count   # integers: floor, as PyTorch's
    combine = {"prod": xp.multiply, "amax": xp.maximum, "amin": xp.minimum}[reduce]
    flat_id = xp.zeros(index.shape, dtype="int64")   # each src entry's target in out.ravel()
    for n, k in zip(x.shape, key):
        flat_id = flat_id * n + k
    ids, reduced = _segment_reduce(xp, flat_id.reshape(-1), src.reshape(-1), combine)
    flat = out.reshape(-1)   # a fresh C-order copy: a view
    flat[ids] = combine(flat[ids], reduced) if include_self else reduced
    return out


def _mean_count(F, g, index, dim, include_self):
    """How many entries each target averages (PyTorch's N: 1 where none, no 0 / 0)."""
    ones = F.zeros_like(F.gather(g, index, dim=dim)) + 1.0
    n = F.scatter_add(F.zeros_like(g) + (1.0 if include_self else 0.0), index, ones, dim=dim)
    return F.where(n == 0, 1.0, n)


def _tied(F, out, x, index, s, dim):
    """amax/amin: how many entries equal each target's result (x's own counted even without
    include_self, as PyTorch counts it)."""
    x_hit = F.to_dtype(x == out, dtype=out.dtype)
    s_hit = F.to_dtype(s == F.gather(out, index, dim=dim), dtype=out.dtype)
    return F.scatter_add(x_hit, index, s_hit, dim=dim)


def _scatter_reduce_x_vjp(F, g, out, x, index, src, dim, reduce, include_self=True):
    """PyTorch's scatter_reduce_backward for self: g; g / N (mean); g times the product of
    the others (prod, with x's zeros replaced by 1 so that a zero gets the rest's product);
    g shared evenly among the entries equal to the result (amax, amin). Without
    include_self, 0 at every target."""
    s = _within(src, index)
    if reduce == "sum":
        grad = g
    elif reduce == "mean":
        grad = g / _mean_count(F, g, index, dim, include_self)
    elif reduce == "prod":
        x1 = F.where(x == 0, 1.0, x)
        grad = g * F.scatter_reduce(x1, index, s, dim=dim, reduce="prod",
                                    include_self=include_self) / x1
    else:
        grad = F.to_dtype(x == out, dtype=g.dtype) * (g / _tied(F, out, x, index, s, dim))
    return grad if include_self else F.scatter(grad, index, 0.0, dim=dim)


def _scatter_reduce_src_vjp(F, g, out, x, index, src, dim, reduce, include_self=True):
    """PyTorch's scatter_reduce_backward for src: g at the target (sum), over N (mean), times
    the product of the others (prod: out / src, or, for a target's only zero, the product
    with it replaced by 1), shared among ties (amax, amin)."""
    s = _within(src, index)
    if reduce == "sum":
        grad = F.gather(g, index, dim=dim)
    elif reduce == "mean":
        grad = F.gather(g / _mean_count(F, g, index, dim, include_self), index, dim=dim)
    elif reduce == "prod":
        zero = s == 0
        zeros_at = F.gather(F.scatter_add(F.zeros_like(g), index, F.to_dtype(zero, dtype=g.dtype),
                                          dim=dim), index, dim=dim)
        single = zero & (zeros_at == 1)
        without = F.scatter_reduce(x, index, F.where(single, 1.0, s), dim=dim, reduce="prod",
                                   include_self=include_self)
        grad = F.where(single, F.gather(g * without, index, dim=dim),
                       F.gather(g * out, index, dim=dim) / F.where(zero, 1.0, s))
    else:
        value = F.gather(out, index, dim=dim)
        grad = F.to_dtype(s == value, dtype=g.dtype) * F.gather(
            g / _tied(F, out, x, index, s, dim), index, dim=dim)
    # Of index's shape: a larger src is rejected by the engine, as by PyTorch's (_src_grad).
    return grad


def _scatter_reduce_src_jvp(F, t, out, x, index, src, dim, reduce, include_self=True):
    """Each src entry moves only its target, by its partial derivative (the reverse rule at
    g = 1) times its tangent."""
    weight = _scatter_reduce_src_vjp(F, F.zeros_like(out) + 1.0, out, x, index, src, dim,
                                     reduce, include_self)
    return F.scatter_add(F.zeros_like(out), index, t * weight, dim=dim)


# Self's Jacobian is diagonal (an output entry depends on x's entry there only), so its
# reverse rule is its forward rule.
_SCATTER_REDUCE_RULES = dict(
    vjp=(_scatter_reduce_x_vjp, None, _scatter_reduce_src_vjp),
    jvp=(_scatter_reduce_x_vjp, None, _scatter_reduce_src_jvp))
defop("scatter_reduce", _scatter_reduce_fwd, **_SCATTER_REDUCE_RULES)
# index_reduce is scatter_reduce with a 1-D index spread over source's shape (the caller
# spreads it), under PyTorch's own node.
defop("index_reduce", _scatter_reduce_fwd, **_SCATTER_REDUCE_RULES,
      node_name="IndexReduceBackward0")


# --------------------------------------------------------------------------- writes


def _index_put_fwd(xp, x, value, key, accumulate=False):
    out = x.copy()
    if accumulate:
        backend.scatter_add(xp, out, key, value)   # repeated positions add up
    else:
        # Repeated positions: one of the writes wins (NumPy: the last; PyTorch leaves it
        # undefined, CUDA's winner differs from run to run).
        out[key] = value
    return out


def _index_put_x_vjp(F, g, out, x, value, key, accumulate=False):
    """x's gradient passes where it was added to, and is zero where it was overwritten."""
    return g if accumulate else F.index_put(g, 0.0, key=key)


# x[key] = value (or +=, accumulate) as an op: value gets the gradient of the positions it
# was written to (summed where it was broadcast, and over repeats).
defop("index_put", _index_put_fwd,
      (_index_put_x_vjp, lambda F, g, out, x, value, key, accumulate=False: F.index(g, key=key)),
      jvp=linear_in(0, 1), node_name="IndexPutBackward0")


def _put_fwd(xp, x, source, index, accumulate=False):
    out = x.copy()
    flat = out.reshape(-1)   # a view: the copy is row-major
    src = source.reshape(-1) if hasattr(source, "reshape") else source
    if accumulate:
        backend.scatter_add(xp, flat, index, src)
    else:
        flat[index] = src
    return out


# Tensor.put: index_put on the flattened tensor (``index``: wrapped, checked flat positions),
# under PyTorch's node PutBackward0.
defop("put", _put_fwd,
      (lambda F, g, out, x, source, index, accumulate=False:
       g if accumulate else F.put(g, 0.0, index=index),
       lambda F, g, out, x, source, index, accumulate=False:
       F.reshape(F.index(F.reshape(g, shape=(-1,)), key=index), shape=source.shape)),
      jvp=linear_in(0, 1))


# --------------------------------------------------------------------------- embedding


def _embedding_backward_fwd(xp, g, idx, num_weights, padding_idx=None):
    z = xp.zeros((num_weights, g.shape[-1]), dtype=g.dtype)
    backend.scatter_add(xp, z, idx.reshape(-1), g.reshape(-1, g.shape[-1]))
    if padding_idx is not None:
        z[padding_idx] = 0
    return z


def _embedding_backward_vjp(F, g, out, gout, idx, num_weights, padding_idx=None):
    rows = F.embedding(g, idx)
    if padding_idx is None:
        return rows
    return F.masked_fill(rows, F.reshape(idx == padding_idx, shape=tuple(idx.shape) + (1,)), 0.0)


defop("embedding", lambda xp, weight, idx, padding_idx=None: weight[idx],
      (lambda F, g, out, weight, idx, padding_idx=None: F.embedding_backward(
          g, idx, num_weights=weight.shape[0], padding_idx=padding_idx), None),
      jvp=linear_in(0), meta=(0,))
defop("embedding_backward", _embedding_backward_fwd, (_embedding_backward_vjp, None),
      jvp=linear_in(0), node_name="EmbeddingDenseBackward0")


# --------------------------------------------------------------------------- scatter


def _scatter_fwd(xp, x, index, src, dim):
    out = x.copy()
    key = along_dim_key(xp, index, dim)
    out[key] = src[tuple(slice(0, n) for n in index.shape)] if hasattr(src, "shape") and \
        src.ndim else src
    return out


def _scatter_self_grad(F, g, out, x, index, src, dim):
    """The entries that were overwritten get no gradient."""
    return F.scatter(g, index, 0.0, dim=dim)


# x with src written at index along dim (a repeated index: one of the writes wins, as in
# PyTorch, where the winner is unspecified).
defop("scatter", _scatter_fwd,
      (_scatter_self_grad, None,
       lambda F, g, out, x, index, src, dim: _src_grad(F, g, index, dim)),
      jvp=linear_in(0, 2), meta=(2,))


# scatter of a number (``value=``): PyTorch's ``scatter.value`` overload, ScatterBackward1.
defop("scatter.value", lambda xp, x, index, value, dim: _scatter_fwd(xp, x, index, value, dim),
      (lambda F, g, out, x, index, value, dim: F.scatter(g, index, 0.0, dim=dim), None),
      jvp=(lambda F, t, out, x, index, value, dim: F.scatter(t, index, 0.0, dim=dim), None),
      meta=(), node_name="ScatterBackward1")


# masked_select: one node (MaskedSelectBackward0); the mask, broadcast to x's shape by the
# caller, is an attribute. The gradient goes back to the selected entries.
defop("masked_select", lambda xp, x, mask: x[mask],
      (lambda F, g, out, x, mask: F.index_backward(g, shape=x.shape, key=mask),),
      jvp=linear_in(0), meta=(0,))


# index_select: one node (IndexSelectBackward0); the index, an integer vector, is an attribute.
# A 0-d input has one entry, which index 0 (checked) selects: the result is that entry.
defop("index_select", lambda xp, x, index, dim: xp.take(x, index, axis=dim) if x.ndim else x.copy(),
      (lambda F, g, out, x, index, dim: F.index_backward(
          g, shape=x.shape, key=(slice(None),) * dim + (index,) if len(x.shape) else ()),),
      jvp=linear_in(0), meta=(0,))


# take: entries of the flattened input (TakeBackward0); the index is an attribute, as
# index_select's. Its gradient sums repeats into the flat input, reshaped back.
def _take_fwd(xp, x, index):
    return xp.take(x.reshape(-1), index)


def _take_vjp(F, g, out, x, index):
    n = 1
    for s in x.shape:
        n *= s
    flat = F.index_backward(F.reshape(g, shape=(-1,)), shape=(n,), key=(index.reshape(-1),))
    return F.reshape(flat, shape=tuple(x.shape))


defop("take", _take_fwd, (_take_vjp,), jvp=linear_in(0), meta=(0,))
