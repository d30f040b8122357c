"""PyTorch's type promotion, and the default dtype it starts from.

NumPy and PyTorch agree on most mixes of dtypes and disagree on the ones a PyTorch user meets
daily: an int64 tensor times a float32 tensor is float32 in PyTorch and float64 in NumPy, an
integer tensor times 2.5 is the default dtype (float32) in PyTorch and float64 in NumPy, and
``sqrt`` of an integer tensor is float32 in PyTorch where NumPy gives float64 (or float16 for
int8). PyTorch's rules, as :func:`result_type` applies them:

* Operands fall in three classes: tensors with dimensions, zero-dim tensors, Python numbers.
  Within a class dtypes promote as ``torch.promote_types`` (an integer with a float gives the
  float; otherwise as NumPy); a Python number stands for its category's default dtype (bool,
  int64, the default float, its complex).
* A later class changes the result only by a higher category (bool < integer < float <
  complex): a float32 tensor times a float64 zero-dim tensor stays float32, an int64 tensor
  times 2.5 becomes float32.
"""
from __future__ import annotations

import numbers

import numpy

from .dtypes import BFLOAT16, DEFAULT_DTYPE, is_floating

__all__ = ["get_default_dtype", "set_default_dtype", "result_type", "promote_types",
           "float_type", "category", "can_cast", "torch_name"]

_DEFAULT = DEFAULT_DTYPE   # (one list: dtypes.finfo() reads it too)
_COMPLEX_OF = {BFLOAT16: numpy.dtype(numpy.complex64),
               numpy.dtype(numpy.float16): numpy.dtype(numpy.complex64),
               numpy.dtype(numpy.float32): numpy.dtype(numpy.complex64),
               numpy.dtype(numpy.float64): numpy.dtype(numpy.complex128)}
_BOOL = numpy.dtype(numpy.bool_)
_INT64 = numpy.dtype(numpy.int64)


def get_default_dtype():
    """The dtype of tensors made from Python floats, and of float results of integer inputs
    (float32 unless changed)."""
    return _DEFAULT[0]


def set_default_dtype(dtype) -> None:
    """Make ``dtype`` (a floating dtype) the default, as ``torch.set_default_dtype``."""
    dt = numpy.dtype(dtype)
    if dt.kind != "f" and dt is not BFLOAT16:
        raise TypeError(f"default dtype must be a floating point dtype, got {dt}")
    _DEFAULT[0] = dt


_CATEGORY = {"b": 0, "i": 1, "u": 1, "f": 2, "c": 3}


def category(dt) -> int:
    """0 bool, 1 integer, 2 floating (bfloat16 too), 3 complex."""
    return 2 if dt is BFLOAT16 else _CATEGORY[dt.kind]


_FLOAT32 = numpy.dtype(numpy.float32)


def promote_types(a, b):
    """``torch.promote_types``: an integer (or bool) with a float or complex gives the float
    or complex; everything else as NumPy."""
    ka, kb = category(a), category(b)
    if ka < 2 <= kb:
        return b
    if kb < 2 <= ka:
        return a
    if a is BFLOAT16 or b is BFLOAT16:   # PyTorch's table; NumPy cannot promote bfloat16
        other = b if a is BFLOAT16 else a
        if other is BFLOAT16:
            return other
        if other.kind == "c":
            return other
        return _FLOAT32 if other.itemsize <= 4 else other   # with float16: float32
    return numpy.promote_types(a, b)


def _scalar_dtype(x):
    if isinstance(x, bool):
        return _BOOL
    if isinstance(x, numbers.Integral):
        return _INT64
    if isinstance(x, numbers.Real):
        return _DEFAULT[0]
    return _COMPLEX_OF[_DEFAULT[0]]


def _combine(higher, lower):
    """The result of a higher class of operands ``higher`` with a lower one ``lower``: the
    lower counts only through a higher category."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    ch, cl = category(higher), category(lower)
    if cl <= ch:
        return higher
    if cl == 3 and ch == 2:   # a complex number with float tensors: their precision
        return _COMPLEX_OF[higher]
    return promote_types(higher, lower)


def result_type(*operands):
    """PyTorch's result dtype of an elementwise op on ``operands`` (arrays, tensors' arrays,
    NumPy scalars or Python numbers; None is skipped)."""
    dims = zeros = numbers_ = None
    for x in operands:
        if x is None:
            continue
        dt = getattr(x, "dtype", None)
        if dt is None:
            d = _scalar_dtype(x)
            numbers_ = d if numbers_ is None else promote_types(numbers_, d)
        elif getattr(x, "ndim", 0):
            dims = dt if dims is None else promote_types(dims, dt)
        else:
            zeros = dt if zeros is None else promote_types(zeros, dt)
    return _combine(_combine(dims, zeros), numbers_)


def float_type(dt):
    """The dtype a floating function of ``dt`` computes in: the default dtype for integers and
    bool, ``dt`` itself otherwise."""
    return dt if is_floating(dt) else _DEFAULT[0]


def can_cast(src, dst) -> bool:
    """Whether an in-place op may write a result of dtype ``src`` into a tensor of ``dst``:
    PyTorch's rule, no lower category (a float result into an integer tensor raises)."""
    return category(src) <= category(dst)


_TORCH_NAMES = {"float64": "Double", "float32": "Float", "float16": "Half",
                "bfloat16": "BFloat16", "complex64": "ComplexFloat",
                "complex128": "ComplexDouble", "int64": "Long", "int32": "Int", "int16": "Short",
                "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def torch_name(dtype) -> str:
    """PyTorch's name of a dtype in its messages (``Long``, ``Float``...)."""
    return _TORCH_NAMES.get(numpy.dtype(dtype).name, numpy.dtype(dtype).name)
