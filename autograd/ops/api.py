"""The public functions that are more than a call of one op: argument checks with clear
messages and normalisation (``reshape``'s -1, ``permute``'s dims), composites of primitives,
and the Tensor methods that are not ops (casts, ``t``, ``x[key] = value``).

Each declares its public and Tensor method names with ``@expose`` or ``@defcomposite``; an op
that needs none of this gets its function and methods from its ``defop`` entry.
"""
from __future__ import annotations

import builtins
import types
from collections import namedtuple

from ..dispatch import OPS, apply_inplace, apply_op, defcomposite, expose
from ..tensor import Tensor
from .reduction import norm_dims, vector_norm
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

@defcomposite("gelu", public="gelu")
def gelu(x, approximate: str = "none"):
    """GELU: ``x * Phi(x)`` with the exact erf (``approximate="none"``) or the tanh form."""
    if approximate == "tanh":
        inner = (x + x * x * x * 0.044715) * 0.7978845608028654
        return x * 0.5 * (_call("tanh", inner) + 1.0)
    if approximate != "none":
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return x * 0.5 * (_call("erf", x * 0.7071067811865476) + 1.0)


@defcomposite("silu", public="silu")
def silu(x):
    """SiLU (swish): ``x * sigmoid(x)``."""
    return x * _call("sigmoid", x)


@expose(public=("clamp", "clip"), methods=("clamp", "clip"))
def clamp(x, min=None, max=None):  # noqa: A002 - PyTorch's names
    """Limit values to ``[min, max]`` (either may be None; tensors are allowed)."""
    if min is None and max is None:
        raise ValueError("clamp: at least one of 'min' and 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        # where, not maximum/minimum: a value equal to a bound keeps its whole gradient
        # (PyTorch's clamp rule), where maximum would split a tie.
        out = x
        if min is not None:
            out = _call("where", out < min, min, out)
        if max is not None:
            out = _call("where", out > max, max, out)
        return out
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
    return _extreme("max", "amax", "maximum", MaxResult, x, dim, keepdim)


@expose(public="min", methods="min")
def min(x, dim=None, keepdim: bool = False):  # noqa: A001
    """The smallest value; with ``dim`` an int, ``(values, indices)`` along it; with a tensor,
    the elementwise minimum."""
    return _extreme("min", "amin", "minimum", MinResult, x, dim, keepdim)


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
def prod(x, dim=None, keepdim: bool = False):
    norm_dims(dim, x.ndim)
    return _call("prod", x, dim=dim, keepdim=keepdim)


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
        total = x.data.size
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


@expose(methods="t")
def t(x):
    """The transpose of a 2-D tensor (a tensor of fewer dims as it is)."""
    return apply_op(OPS["transpose"], (x,), {"dim0": 0, "dim1": 1}) if x.ndim == 2 else x


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


@defcomposite("squeeze", public="squeeze", methods="squeeze")
def squeeze(x, dim=None):
    """Remove size-1 dims (all of them, or those in ``dim`` that have size 1)."""
    if dim is None:
        dims = {i for i, s in enumerate(x.shape) if s == 1}
    else:
        dims = {d for d in norm_dims(dim, x.ndim) if x.shape[d] == 1}
    return _reshape(x, tuple(s for i, s in enumerate(x.shape) if i not in dims))


@defcomposite("unsqueeze", public="unsqueeze", methods="unsqueeze")
def unsqueeze(x, dim: int):
    """Insert a size-1 dim at ``dim`` (negative counts from the end of the result)."""
    d = _dim(dim, x.ndim + 1, "unsqueeze")
    return _reshape(x, x.shape[:d] + (1,) + x.shape[d:])


@defcomposite("repeat", public="repeat", methods="repeat")
def repeat(x, *sizes):
    """Tile ``x``: ``sizes[i]`` copies along dim i (leading new dims allowed)."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    if len(sizes) < x.ndim:
        raise RuntimeError(f"repeat: {len(sizes)} repeat sizes given for a tensor of "
                           f"{x.ndim} dims; need at least {x.ndim}")
    shape = (1,) * (len(sizes) - x.ndim) + tuple(x.shape)
    inter, expanded, final = [], [], []
    for r, s in zip(sizes, shape):
        inter += [1, s]
        expanded += [r, s]
        final.append(r * s)
    return _reshape(_call("expand", _reshape(x, inter), shape=tuple(expanded)), final)


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


@defcomposite("stack", public="stack")
def stack(tensors, dim: int = 0):
    """Join same-shaped tensors along a new dim."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack: expected a non-empty list of tensors")
    for i, t in enumerate(tensors[1:], 1):
        if t.shape != tensors[0].shape:
            raise RuntimeError(f"stack: expects each tensor to be equal size, but got "
                               f"{list(tensors[0].shape)} at entry 0 and {list(t.shape)} at "
                               f"entry {i}")
    d = _dim(dim, tensors[0].ndim + 1, "stack")
    return cat([unsqueeze(t, d) for t in tensors], d)


@defcomposite("narrow", public="narrow", methods="narrow")
def narrow(x, dim: int, start: int, length: int):
    """The slice ``start:start+length`` of dim ``dim`` (a view)."""
    d = _dim(dim, x.ndim, "narrow")
    if start < 0:
        start += x.shape[d]
    if not 0 <= start <= start + length <= x.shape[d]:
        raise IndexError(f"narrow: start {start} + length {length} exceeds dimension {d} of "
                         f"size {x.shape[d]}")
    return _call("index", x, key=(slice(None),) * d + (slice(start, start + length),))


@defcomposite("split", public="split", methods="split")
def split(x, split_size_or_sections, dim: int = 0):
    """Views of consecutive pieces along ``dim``: equal pieces of a size, or given sizes."""
    d = _dim(dim, x.ndim, "split")
    n = x.shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0:
            raise ValueError(f"split: split_size must be positive, got {step}")
        sizes = [builtins.min(step, n - i) for i in range(0, n, step)] or [0]
    else:
        sizes = list(split_size_or_sections)
        if builtins.sum(sizes) != n:
            raise RuntimeError(f"split: sizes {sizes} sum to {builtins.sum(sizes)}, but "
                               f"dimension {d} has size {n}")
    out, start = [], 0
    for s in sizes:
        out.append(narrow(x, d, start, s))
        start += s
    return tuple(out)


@defcomposite("chunk", public="chunk", methods="chunk")
def chunk(x, chunks: int, dim: int = 0):
    """Split into ``chunks`` pieces of (at most) equal size along ``dim``."""
    if chunks <= 0:
        raise ValueError(f"chunk: chunks must be positive, got {chunks}")
    n = x.shape[_dim(dim, x.ndim, "chunk")]
    return split(x, builtins.max(1, -(-n // chunks)), dim)


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
    if index.numel():
        lo, hi = int(index.data.min()), int(index.data.max())
        if lo < -x.shape[dim] or hi >= x.shape[dim]:
            bad = hi if hi >= x.shape[dim] else lo
            raise IndexError(f"{op}: index {bad} is out of bounds for dimension {dim} with size "
                             f"{x.shape[dim]}")


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


@defcomposite("index_select", public="index_select", methods="index_select")
def index_select(x, dim: int, index):
    """Entries ``index`` (1-D integer tensor) of dim ``dim``."""
    d = _dim(dim, x.ndim, "index_select")
    idx = index.data if isinstance(index, Tensor) else index
    if getattr(idx, "ndim", 1) != 1:
        raise RuntimeError(f"index_select: index must be 1-D, got shape {list(idx.shape)}")
    return _call("index", x, key=(slice(None),) * d + (idx,))


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
    return _call("matmul", a, b)


@defcomposite("outer", public="outer")
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
    (a diagonal) is not supported."""
    from .linalg import parse_einsum  # noqa: PLC0415

    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    subs, out = parse_einsum(equation, len(operands))
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
def softmax(x, dim: int):
    return _call("softmax", x, dim=_dim(dim, x.ndim, "softmax"))


@expose(public="log_softmax", methods="log_softmax")
def log_softmax(x, dim: int):
    return _call("log_softmax", x, dim=_dim(dim, x.ndim, "log_softmax"))


def index_put_(x, key, value):
    """``x[key] = value`` in place (bumps the version; recorded as IndexPutBackward0)."""
    return apply_inplace(OPS["index_put"], x, (value,), {"key": key})


def _index_key(key):
    """Tensors inside an index become arrays (they index, they are not differentiated)."""
    if isinstance(key, Tensor):
        return key.data
    if isinstance(key, tuple):
        return tuple(k.data if isinstance(k, Tensor) else k for k in key)
    if isinstance(key, list):
        return key if not any(isinstance(k, Tensor) for k in key) else [
            k.item() if isinstance(k, Tensor) else k for k in key]
    return key


@expose(methods="__getitem__")
def _getitem(self, key):
    return apply_op(OPS["index"], (self,), {"key": _index_key(key)})


@expose(methods="__setitem__")
def _setitem(self, key, value):
    index_put_(self, _index_key(key), value)


# --------------------------------------------------------------------------- casts


def _cast(name, dtype):
    def method(self):
        return self.to(dtype=dtype)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``self.to(dtype={dtype!r})``."
    return method


for _name, _dtype in (("float", "float32"), ("double", "float64"), ("half", "float16"),
                      ("long", "int64"), ("int", "int32"), ("bool", "bool")):
    expose(methods=_name)(_cast(_name, _dtype))


@expose(methods="type_as")
def type_as(x, other):
    return x.to(dtype=other.dtype)


# --------------------------------------------------------------------------- torch.linalg

#: ``gradtrace.autograd.linalg``: the functions of ``torch.linalg`` that exist here.
linalg = types.ModuleType("gradtrace.autograd.linalg", "Linear algebra functions (torch.linalg).")
linalg.vector_norm = vector_norm
expose(public="linalg")(linalg)
