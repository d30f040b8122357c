"""The op library: primitives registered in the table, composites, and their Tensor methods.

Importing this package registers every op. Each submodule holds one family; adding an op is one
``defop`` entry there plus one case in ``tests/autograd/op_cases.py``.
"""
from __future__ import annotations

import builtins

from .. import dispatch
from ..dispatch import OPS, apply_op, apply_inplace
from ..tensor import Tensor
from . import elementwise, indexing, linalg, nn, reduction, shape  # noqa: F401 - registers ops
from .reduction import mean, norm, std, var
from . import api
from .api import *  # noqa: F401,F403
from .api import _call, index_put_  # noqa: F401

__all__ = ["add", "sub", "mul", "div", "neg", "pow", "exp", "log", "sqrt", "tanh", "relu",
           "matmul", "sum", "mean", "reshape", "transpose", "permute", "expand", "clone",
           "eq", "ne", "lt", "le", "gt", "ge", "var", "std", "norm", "OPS"] + api.__all__

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
    if sorted(d % builtins.max(x.ndim, 1) for d in dims) != list(range(x.ndim)):
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


# --------------------------------------------------------------------------- more Tensor methods


def _setitem(self, key, value):
    index_put_(self, _index_key(key), value)


def _cast(dtype):
    def method(self):
        return self.to(dtype=dtype)

    method.__name__ = dtype
    return method


def _inplace_attrs(name, *names):
    op = OPS[name]

    def method(self, *args, **kwargs):
        attrs = dict(zip(names, args))
        attrs.update(kwargs)
        return apply_inplace(op, self, (), attrs)

    method.__name__ = name + "_"
    return method


def _size_args(fn):
    def method(self, *sizes):
        if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
            sizes = tuple(sizes[0])
        return fn(self, *sizes)

    method.__name__ = fn.__name__
    return method


def _masked_fill_(self, mask, value):
    if isinstance(value, Tensor):
        value = value.item()
    return apply_inplace(OPS["masked_fill"], self, (mask,), {"value": value})


def _clamp_(self, min=None, max=None):  # noqa: A002
    if min is None and max is None:
        raise ValueError("clamp_: at least one of 'min' and 'max' must not be None")
    return apply_inplace(OPS["clamp"], self, (), {"min": min, "max": max})


_MORE_METHODS = {
    "__setitem__": _setitem,
    "__and__": _binary("logical_and"), "__or__": _binary("logical_or"),
    "__xor__": _binary("logical_xor"), "__invert__": api.logical_not, "__abs__": api.abs,
    "log1p": api.log1p, "expm1": api.expm1, "sin": api.sin, "cos": api.cos,
    "sigmoid": api.sigmoid, "rsqrt": api.rsqrt, "reciprocal": api.reciprocal, "abs": api.abs,
    "sign": api.sign, "erf": api.erf, "isnan": api.isnan, "clamp": api.clamp, "clip": api.clamp,
    "maximum": api.maximum, "minimum": api.minimum, "masked_fill": api.masked_fill,
    "where": lambda self, condition, other: api.where(condition, self, other),
    "logical_and": api.logical_and, "logical_or": api.logical_or,
    "logical_xor": api.logical_xor, "logical_not": api.logical_not,
    "amax": api.amax, "amin": api.amin, "max": api.max, "min": api.min,
    "argmax": api.argmax, "argmin": api.argmin, "logsumexp": api.logsumexp, "prod": api.prod,
    "var": var, "std": std, "norm": norm,
    "flatten": api.flatten, "squeeze": api.squeeze, "unsqueeze": api.unsqueeze,
    "repeat": _size_args(api.repeat), "split": api.split, "chunk": api.chunk,
    "narrow": api.narrow, "flip": lambda self, *dims: api.flip(
        self, dims[0] if len(dims) == 1 else dims),
    "roll": api.roll, "tril": api.tril, "triu": api.triu, "gather": api.gather,
    "scatter_add": api.scatter_add, "index_select": api.index_select,
    "softmax": api.softmax, "log_softmax": api.log_softmax,
    "float": _cast("float32"), "double": _cast("float64"), "half": _cast("float16"),
    "long": _cast("int64"), "int": _cast("int32"), "bool": _cast("bool"),
    "type_as": lambda self, other: self.to(dtype=other.dtype),
    "bmm": api.bmm, "mm": matmul,
    "relu_": _inplace("relu"), "sigmoid_": _inplace("sigmoid"), "tanh_": _inplace("tanh"),
    "exp_": _inplace("exp"), "clamp_": _clamp_, "clip_": _clamp_,
    "fill_": _inplace_attrs("fill", "value"), "copy_": _inplace("copy"),
    "masked_fill_": _masked_fill_,
}
for _name, _fn in _MORE_METHODS.items():
    setattr(Tensor, _name, _fn)
