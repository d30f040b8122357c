"""The op library: primitives registered in the table, composites, and their Tensor methods.

Importing this package registers every op. Each submodule holds one family; adding an op is one
``defop`` entry there plus one case in ``tests/autograd/op_cases.py``.
"""
from __future__ import annotations

from .. import dispatch
from ..dispatch import OPS, apply_op, apply_inplace
from ..tensor import Tensor
from . import elementwise, indexing, linalg, reduction, shape  # noqa: F401 - registers ops
from .reduction import mean

__all__ = ["add", "sub", "mul", "div", "neg", "pow", "exp", "log", "sqrt", "tanh", "relu",
           "matmul", "sum", "mean", "reshape", "transpose", "permute", "expand", "clone",
           "eq", "ne", "lt", "le", "gt", "ge", "OPS"]

_ = dispatch


def _op(name):
    op = OPS[name]

    def fn(*inputs, **attrs):
        return apply_op(op, inputs, attrs or None)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"The ``{name}`` primitive (see autograd/ops)."
    return fn


add, sub, mul, div, neg, pow, exp, log, sqrt, tanh, relu, matmul, clone = (
    _op(n) for n in ("add", "sub", "mul", "div", "neg", "pow", "exp", "log", "sqrt", "tanh",
                     "relu", "matmul", "clone"))
eq, ne, lt, le, gt, ge = (_op(n) for n in ("eq", "ne", "lt", "le", "gt", "ge"))


def sum(x, dim=None, keepdim=False):  # noqa: A001 - PyTorch's name
    return apply_op(OPS["sum"], (x,), {"dim": dim, "keepdim": keepdim})


def reshape(x, *shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return apply_op(OPS["reshape"], (x,), {"shape": _resolve_shape(x, shape)})


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


def transpose(x, dim0, dim1):
    return apply_op(OPS["transpose"], (x,), {"dim0": dim0, "dim1": dim1})


def permute(x, *dims):
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    if sorted(d % max(x.ndim, 1) for d in dims) != list(range(x.ndim)):
        raise RuntimeError(f"permute: dims {list(dims)} are not a permutation of the "
                           f"{x.ndim} dims of a tensor of shape {list(x.shape)}")
    return apply_op(OPS["permute"], (x,), {"dims": tuple(dims)})


def expand(x, *shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return apply_op(OPS["expand"], (x,), {"shape": tuple(shape)})


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


def _getitem(self, key):
    return apply_op(OPS["index"], (self,), {"key": _index_key(key)})


# --------------------------------------------------------------------------- Tensor methods

def _binary(name, reflected=False):
    op = OPS[name]
    if reflected:
        def method(self, other):
            return apply_op(op, (other, self))
    else:
        def method(self, other):
            return apply_op(op, (self, other))
    method.__name__ = name
    return method


def _inplace(name):
    op = OPS[name]

    def method(self, *others):
        return apply_inplace(op, self, others)

    method.__name__ = name + "_"
    return method


_METHODS = {
    "__add__": _binary("add"), "__radd__": _binary("add", True),
    "__sub__": _binary("sub"), "__rsub__": _binary("sub", True),
    "__mul__": _binary("mul"), "__rmul__": _binary("mul", True),
    "__truediv__": _binary("div"), "__rtruediv__": _binary("div", True),
    "__pow__": _binary("pow"), "__rpow__": _binary("pow", True),
    "__matmul__": _binary("matmul"), "__rmatmul__": _binary("matmul", True),
    "__eq__": _binary("eq"), "__ne__": _binary("ne"), "__lt__": _binary("lt"),
    "__le__": _binary("le"), "__gt__": _binary("gt"), "__ge__": _binary("ge"),
    "__neg__": neg, "__getitem__": _getitem,
    "add": add, "sub": sub, "mul": mul, "div": div, "neg": neg, "pow": pow, "exp": exp,
    "log": log, "sqrt": sqrt, "tanh": tanh, "relu": relu, "matmul": matmul,
    "sum": sum, "mean": mean, "reshape": reshape, "view": reshape, "transpose": transpose,
    "permute": permute, "expand": expand,
    "expand_as": lambda self, other: expand(self, other.shape),
    "t": lambda self: transpose(self, 0, 1) if self.ndim == 2 else self,
    "add_": _inplace("add"), "sub_": _inplace("sub"), "mul_": _inplace("mul"),
    "div_": _inplace("div"), "zero_": _inplace("zero"),
}
for _name, _fn in _METHODS.items():
    setattr(Tensor, _name, _fn)
