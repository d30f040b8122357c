"""Tensor's dtype casts as methods (``x.float()``, ``x.long()``...) and torch's dtype and size
queries as functions (``numel``, ``result_type``, ``can_cast``, ``is_complex``...).
"""
from __future__ import annotations

import numpy

from .. import promotion as _promotion
from ..dispatch import expose
from .._tensor import Tensor


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


@expose(methods=("is_complex",), public="is_complex")
def is_complex(input) -> bool:  # noqa: A002
    """Whether the dtype is complex."""
    return input.dtype.kind == "c"
