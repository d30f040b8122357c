"""Scans, sorting and order statistics along a dim: ``cumsum``, ``cumprod``,
``logcumsumexp``, ``cummax``/``cummin``, ``sort``, ``topk``, ``median``/``nanmedian``,
``kthvalue`` and ``mode``.

Their gradients go back through an index (as ``max(dim)``'s) or a reversed scan; the rules
they share with the reductions (``_max_dim_vjp``, ``_evenly_vjp``...) are in ``reduction.py``.
Their public wrappers are in ``reduction_api.py``.
"""
from __future__ import annotations

import numpy

from ..dispatch import defop, linear_in
from .reduction import (_evenly_vjp, _extreme_jvp, _int_acc, _max_dim_jvp, _max_dim_vjp,
                        _xp_of)


def _cumsum_fwd(xp, x, dim):
    return xp.cumsum(x, axis=dim, dtype=_int_acc(x)) if x.ndim else x.copy()


def _rev_cumsum(F, g, dim):
    """The adjoint of cumsum: each entry gets the sum of the gradient from it to the end."""
    if len(g.shape) == 0:   # a 0-d cumsum is the identity
        return g
    return F.flip(F.cumsum(F.flip(g, dims=(dim,)), dim=dim), dims=(dim,))


defop("cumsum", _cumsum_fwd, (lambda F, g, out, x, dim: _rev_cumsum(F, g, dim),),
      jvp=linear_in(0))


def _cumprod_fwd(xp, x, dim):
    return xp.cumprod(x, axis=dim, dtype=_int_acc(x)) if x.ndim else x.copy()


def _cumprod_vjp(F, g, out, x, dim):
    """PyTorch's cumprod_backward outside grad mode, with selects instead of its masked
    scatters. Before the first zero of a line, the reverse
    cumsum of ``out * g`` over ``x`` (with no zero: an inf entry's own gradient is NaN, as
    there); at the first zero, the products between it and the second zero times ``g``
    there, summed, times the product before it; after it, 0 whatever ``g`` is."""
    if len(x.shape) == 0 or x.shape[dim] <= 1:
        return g
    if hasattr(x, "requires_grad"):
        return _cumprod_table_vjp(F, g, x, dim)
    zero = x == 0
    seen = F.cumsum(F.to_dtype(zero, dtype=g.dtype), dim=dim)   # zeros up to here
    before = seen == 0
    first = zero & (seen == 1)
    between = (seen == 1) & ~zero
    head = _rev_cumsum(F, F.where(before, out * g, 0.0), dim) / F.where(before, x, 1.0)
    at_zero = F.sum(F.cumprod(F.where(between, x, 1.0), dim=dim) * F.where(seen == 1, g, 0.0),
                    dim=dim, keepdim=True) * F.prod(F.where(before, x, 1.0), dim=dim,
                                                    keepdim=True)
    return F.where(before, head, F.where(first, at_zero, 0.0))


def _prefix_rows(F, x, dim, fill):
    """(..., n, n) with dim ``dim`` moved last, row k holding the entries 0..k and ``fill``
    after them: a scan's entries as reductions over the last dim."""
    ndim = len(x.shape)
    order = tuple(i for i in range(ndim) if i != dim) + (dim,)
    last = F.permute(x, dims=order)
    keep = _xp_of(x).tri(x.shape[dim], dtype=bool)   # row k: entries 0..k
    return F.where(keep, F.unsqueeze(last, dim=-2), fill), order, keep


def _from_last(F, t, order):
    if order == tuple(range(len(order))):
        return t
    return F.permute(t, dims=tuple(order.index(i) for i in range(len(order))))


def _cumprod_table_vjp(F, g, x, dim):
    """Under create_graph: each entry's gradient as a sum over the prefixes holding it of
    ``g`` times the product of the others (an n x n table), which, unlike the O(n) rule's
    constant 0 after a line's first zero, has the right derivative there (PyTorch, too,
    switches formulas in grad mode)."""
    rows, order, keep = _prefix_rows(F, x, dim, 1.0)
    g_rows = F.unsqueeze(F.permute(g, dims=order), dim=-1)
    return _from_last(F, F.sum(F.where(keep, F.prod_others(rows, dim=-1) * g_rows, 0.0),
                               dim=-2), order)


def _cumprod_jvp(F, t, out, x, dim):
    """d out_k = sum over i <= k of t_i times the product of the prefix without i: exact
    with zeros, through an n x n table (forward mode only)."""
    if len(x.shape) == 0:
        return t
    rows, order, keep = _prefix_rows(F, x, dim, 1.0)
    tan, _, _ = _prefix_rows(F, t, dim, 0.0)
    return _from_last(F, F.sum(F.prod_others(rows, dim=-1) * tan, dim=-1), order)


# NOTE: a primitive for PyTorch's node (CumprodBackward0) and its rule: exact with zeros in
# O(n), where a product of a prefix table costs n x n.
defop("cumprod", _cumprod_fwd, (_cumprod_vjp,), jvp=(_cumprod_jvp,))


def _logcumsumexp_fwd(xp, x, dim):
    """A Hillis-Steele scan of logaddexp: log2(n) elementwise steps on any backend (CuPy's
    ufuncs have no ``accumulate`` but add's and multiply's); no max is subtracted, so an
    entry far below the others keeps its value."""
    out = x.copy()
    n = x.shape[dim] if x.ndim else 1
    step = 1
    while step < n:
        hi = (slice(None),) * dim + (slice(step, None),)
        lo = (slice(None),) * dim + (slice(0, n - step),)
        out[hi] = xp.logaddexp(out[hi], out[lo])
        step *= 2
    return out


def _logcumsumexp_vjp(F, g, out, x, dim):
    """PyTorch's logcumsumexp_backward: the positive and negative parts of ``g`` in log
    space, each through a reverse logcumsumexp; a NaN or zero gradient contributes nothing
    (both parts are a lowest value there), as PyTorch's."""
    if len(x.shape) == 0:
        return g
    # PyTorch uses the lowest float; a quarter of it gives the same exp() of 0 without
    # overflowing to -inf (and NumPy's warning) when x is added back.
    lowest = float(numpy.finfo(g.dtype).min) / 4
    # log |g| of a zero is masked anyway; 1 there keeps log's derivative finite when this
    # rule is differentiated again (create_graph).
    log_abs = F.log(F.abs(F.where(g == 0, 1.0, g)))

    def part(mask):
        logs = F.where(mask, log_abs, lowest) - out
        rev = F.flip(F.logcumsumexp(F.flip(logs, dims=(dim,)), dim=dim), dims=(dim,))
        return F.exp(rev + x)

    return part(g > 0) - part(g < 0)


def _logcumsumexp_jvp(F, t, out, x, dim):
    """d out_k = sum over i <= k of t_i exp(x_i - out_k), through an n x n table (forward
    mode only)."""
    if len(x.shape) == 0:
        return t
    rows, order, keep = _prefix_rows(F, x, dim, 0.0)
    tan, _, _ = _prefix_rows(F, t, dim, 0.0)
    last_out = F.unsqueeze(F.permute(out, dims=order), dim=-1)
    w = F.where(keep, F.exp(rows - last_out), 0.0)
    return _from_last(F, F.sum(w * tan, dim=-1), order)


# NOTE: a primitive for PyTorch's node (LogcumsumexpBackward0) and its rule; O(n log n)
# where the logsumexp of a prefix table costs n x n.
defop("logcumsumexp", _logcumsumexp_fwd, (_logcumsumexp_vjp,), jvp=(_logcumsumexp_jvp,))


def _scan_pairs(xp, values, index, dim, later_wins):
    """A Hillis-Steele scan of (value, index) pairs along ``dim``: log2(n) elementwise steps on
    any backend (CuPy's ufuncs have no ``maximum.accumulate``). ``later_wins(earlier, later)``
    says where the later pair replaces the earlier one; it must make the combination
    associative (a max or min by value, the later index on ties)."""
    values, index = values.copy(), index.copy()
    n = values.shape[dim]
    step = 1
    while step < n:
        hi = (slice(None),) * dim + (slice(step, None),)
        lo = (slice(None),) * dim + (slice(0, n - step),)
        keep = ~later_wins(values[lo], values[hi])
        values[hi] = xp.where(keep, values[lo], values[hi])
        index[hi] = xp.where(keep, index[lo], index[hi])
        step *= 2
    return values, index


def _cum_extreme_fwd(xp, x, dim, larger):
    """cummax (``larger``) or cummin: PyTorch's rule, a later entry takes over when it is at
    least (at most) the running value, or NaN; so ties and NaNs take the last index, and a
    NaN, once seen, stays the value (each later NaN taking the index)."""
    if x.ndim == 0:
        return x.copy(), xp.zeros((), dtype="int64")
    shape = [1] * x.ndim
    shape[dim] = x.shape[dim]
    index = xp.broadcast_to(xp.arange(x.shape[dim], dtype="int64").reshape(shape), x.shape)
    floating = x.dtype.kind in "fc"

    def later_wins(a, b):
        wins = (b >= a) if larger else (b <= a)
        return wins | xp.isnan(b) if floating else wins

    _, index = _scan_pairs(xp, x, index, dim, later_wins)
    # The values are the input's at the index (the winner's own -0.0 or 0.0, as PyTorch's).
    return xp.take_along_axis(x, index, axis=dim), index


# PyTorch's CummaxBackward0 / CumminBackward0: the gradient goes back to the index (repeats
# summed), as sort's; the indices get none.
defop("cummax", lambda xp, x, dim: _cum_extreme_fwd(xp, x, dim, True),
      (lambda F, g, out, x, dim: _sort_vjp(F, g, out, x, dim),),
      jvp=(lambda F, t, out, x, dim: _sort_jvp(F, t, out, x, dim),), nout=2, meta=(0,))
defop("cummin", lambda xp, x, dim: _cum_extreme_fwd(xp, x, dim, False),
      (lambda F, g, out, x, dim: _sort_vjp(F, g, out, x, dim),),
      jvp=(lambda F, t, out, x, dim: _sort_jvp(F, t, out, x, dim),), nout=2, meta=(0,))


def _sort_fwd(xp, x, dim=-1, descending=False, stable=False):
    if x.ndim == 0:
        return x.copy(), xp.zeros((), dtype="int64")
    # A stable sort either way: ties keep their order (PyTorch's stable=True; any order is
    # allowed with stable=False). NaN is the largest value, as PyTorch's: last ascending, first
    # descending. Descending is the ascending sort of the reversed line, reversed: ties keep
    # their order and NaNs come first (negated keys would leave NaN last).
    if not descending:
        idx = xp.argsort(x, axis=dim, kind="stable")
    else:
        idx = xp.flip(xp.argsort(xp.flip(x, axis=dim), axis=dim, kind="stable"), axis=dim)
        idx = (x.shape[dim] - 1) - idx
    return xp.take_along_axis(x, idx, axis=dim), idx.astype("int64")


def _sort_vjp(F, g, out, x, dim=-1, descending=False, stable=False):
    if len(x.shape) == 0:
        return g[0]
    return F.gather_backward(g[0], out[1], shape=x.shape, dim=dim % len(x.shape))


def _sort_jvp(F, t, out, x, dim=-1, descending=False, stable=False):
    if t.ndim == 0:
        return t, None
    return F.gather(t, out[1], dim=dim % t.ndim), None


defop("sort", _sort_fwd, (_sort_vjp,), jvp=(_sort_jvp,), nout=2, meta=(0,))


# topk: the first k of the sort, as one op with PyTorch's node (TopkBackward0); its rules are
# sort's (the gradient goes back to the selected indices).
def _topk_fwd(xp, x, k, dim, largest=True, sorted=True):  # noqa: A002 - PyTorch's names
    values, idx = _sort_fwd(xp, x, dim, descending=largest)
    if x.ndim == 0:
        return values, idx
    key = (slice(None),) * dim + (slice(0, k),)
    return xp.ascontiguousarray(values[key]), xp.ascontiguousarray(idx[key])


defop("topk", _topk_fwd,
      (lambda F, g, out, x, k, dim, largest=True, sorted=True: _sort_vjp(F, g, out, x, dim),),
      jvp=(lambda F, t, out, x, k, dim, largest=True, sorted=True: _sort_jvp(F, t, out, x, dim),),
      nout=2, meta=(0,))


# --------------------------------------------------------------------------- order statistics
# kthvalue, median and nanmedian: one entry of each line's stable ascending sort (NaN last),
# at a position per line. Along a dim their gradient goes to the index, as max(dim)'s;
# median() and nanmedian() over all of a tensor share it among the entries equal to the
# result, as max()'s (PyTorch's evenly_distribute_backward).


def _median_pos(xp, n, nans):
    """median: the lower middle; a line with a NaN gives its first NaN, as PyTorch's."""
    return xp.where(nans > 0, n - nans, (n - 1) // 2)


def _nanmedian_pos(xp, n, nans):
    """nanmedian: the lower middle of the entries that are not NaN (all NaN: the first)."""
    return xp.maximum((n - nans - 1) // 2, 0)


def _order_stat(xp, x, dim, keepdim, position):
    """(values, indices) of the entry at ``position(xp, n, nans)`` of each line's sort."""
    order = xp.argsort(x, axis=dim, kind="stable")
    nans = xp.sum(xp.isnan(x), axis=dim, keepdims=True)
    pos = xp.asarray(position(xp, x.shape[dim], nans), dtype=order.dtype)
    idx = xp.take_along_axis(order, pos, axis=dim)
    vals = xp.take_along_axis(x, idx, axis=dim)
    if not keepdim:
        idx, vals = xp.squeeze(idx, axis=dim), xp.squeeze(vals, axis=dim)
    return vals, idx.astype("int64")


def _full(position):
    return lambda xp, x: _order_stat(xp, x.reshape(-1), 0, False, position)[0]


defop("median", _full(_median_pos), (_evenly_vjp,), jvp=(_extreme_jvp,))
defop("nanmedian", _full(_nanmedian_pos), (_evenly_vjp,), jvp=(_extreme_jvp,))
defop("median.dim", lambda xp, x, dim, keepdim=False: _order_stat(xp, x, dim, keepdim, _median_pos),
      (_max_dim_vjp,), jvp=(_max_dim_jvp,), nout=2, meta=(0,), node_name="MedianBackward1")
defop("nanmedian.dim",
      lambda xp, x, dim, keepdim=False: _order_stat(xp, x, dim, keepdim, _nanmedian_pos),
      (_max_dim_vjp,), jvp=(_max_dim_jvp,), nout=2, meta=(0,), node_name="NanmedianBackward1")
defop("kthvalue",
      lambda xp, x, k, dim, keepdim=False: _order_stat(xp, x, dim, keepdim,
                                                      lambda xp, n, nans: nans * 0 + (k - 1)),
      (lambda F, g, out, x, k, dim, keepdim=False: _max_dim_vjp(F, g, out, x, dim, keepdim),),
      jvp=(lambda F, t, out, x, k, dim, keepdim=False: _max_dim_jvp(F, t, out, x, dim, keepdim),),
      nout=2, meta=(0,))


def _mode_fwd(xp, x, dim, keepdim=False):
    """The most frequent value along ``dim`` and an index of it. Among equally frequent
    values the smallest, as PyTorch's; its index is the last occurrence (PyTorch's for lines
    of up to 16 entries, where its sort keeps ties in order; any occurrence beyond). NaNs
    count as one value, the largest (PyTorch sorts NaNs with ``<``, so its answer with a NaN
    depends on where the NaNs stand)."""
    if x.ndim == 0:
        return x.copy(), xp.zeros((), dtype="int64")
    n = x.shape[dim]
    order = xp.argsort(x, axis=dim, kind="stable")   # ties in order, NaN last
    s = xp.take_along_axis(x, order, axis=dim)
    lo = (slice(None),) * dim + (slice(0, n - 1),)
    hi = (slice(None),) * dim + (slice(1, n),)
    differs = s[hi] != s[lo]
    if x.dtype.kind in "fc":
        differs &= ~(xp.isnan(s[hi]) & xp.isnan(s[lo]))
    edge = xp.ones(x.shape[:dim] + (1,) + x.shape[dim + 1:], dtype=bool)
    starts = xp.concatenate([edge, differs], axis=dim)
    ends = xp.concatenate([differs, edge], axis=dim)
    shape = [1] * x.ndim
    shape[dim] = n
    pos = xp.broadcast_to(xp.arange(n, dtype="int64").reshape(shape), x.shape)
    # Each position's run start: a running max of the starts' positions.
    start, _ = _scan_pairs(xp, xp.where(starts, pos, 0), pos, dim, lambda a, b: b >= a)
    length = xp.where(ends, pos - start + 1, 0)
    best = xp.argmax(length, axis=dim, keepdims=True)   # the first longest: the smallest value
    idx = xp.take_along_axis(order, best, axis=dim)
    vals = xp.take_along_axis(x, idx, axis=dim)
    if not keepdim:
        idx, vals = xp.squeeze(idx, axis=dim), xp.squeeze(vals, axis=dim)
    return vals, idx.astype("int64")


# PyTorch's ModeBackward0: the gradient goes to the index, as max(dim)'s.
defop("mode", _mode_fwd,
      (lambda F, g, out, x, dim, keepdim=False:
       g[0] if len(x.shape) == 0 else _max_dim_vjp(F, g, out, x, dim, keepdim),),
      jvp=(lambda F, t, out, x, dim, keepdim=False:
           (t, None) if len(x.shape) == 0 else _max_dim_jvp(F, t, out, x, dim, keepdim),),
      nout=2, meta=(0,))
