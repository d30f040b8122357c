"""PyTorch's legacy tensor types: ``torch.FloatTensor``, ``DoubleTensor``, ``HalfTensor``,
``LongTensor``, ``IntTensor``, ``ShortTensor``, ``CharTensor``, ``ByteTensor``,
``BoolTensor``.

As in PyTorch, calling one makes a CPU tensor of its dtype: ``LongTensor([1, 2])`` from data,
``FloatTensor(2, 3)`` uninitialized of a size, ``FloatTensor()`` empty; and
``isinstance(t, torch.LongTensor)`` holds for an int64 tensor on the CPU.
"""
from __future__ import annotations

import numbers

import numpy

from .tensor import Tensor, empty, tensor

__all__ = ["FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor",
           "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor"]


class _LegacyTensorType(type):
    """The metaclass: the class's ``dtype`` decides construction and ``isinstance``."""

    def __instancecheck__(cls, obj) -> bool:
        return (isinstance(obj, Tensor) and obj.dtype == cls.dtype
                and obj.device.type == "cpu")

    def __call__(cls, *args, device=None):
        if device is not None and str(device) != "cpu":
            raise RuntimeError(f"legacy constructor expects device type: cpu but device type: "
                               f"{device} was passed")
        if not args:
            return empty(0, dtype=cls.dtype)
        if all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in args):
            return empty(*args, dtype=cls.dtype)        # a size: uninitialized, as PyTorch's
        if len(args) == 1 and isinstance(args[0], Tensor):
            if args[0].dtype != cls.dtype:
                raise TypeError(f"expected {cls.__name__} (dtype {cls.dtype}), got a tensor "
                                f"of dtype {args[0].dtype}")
            return args[0]                               # the same tensor, as PyTorch's
        if len(args) == 1:
            return tensor(args[0], dtype=cls.dtype)
        raise TypeError(f"{cls.__name__}() received an invalid combination of arguments: "
                        f"expected a size (ints), data, or a tensor, got "
                        f"{tuple(type(a).__name__ for a in args)}")


def _legacy(name: str, dtype: str):
    return _LegacyTensorType(name, (), {"dtype": numpy.dtype(dtype), "__module__": "torch",
                                        "__doc__": f"``torch.{name}``: CPU tensors of "
                                                   f"dtype {dtype}."})


FloatTensor = _legacy("FloatTensor", "float32")
DoubleTensor = _legacy("DoubleTensor", "float64")
HalfTensor = _legacy("HalfTensor", "float16")
LongTensor = _legacy("LongTensor", "int64")
IntTensor = _legacy("IntTensor", "int32")
ShortTensor = _legacy("ShortTensor", "int16")
CharTensor = _legacy("CharTensor", "int8")
ByteTensor = _legacy("ByteTensor", "uint8")
BoolTensor = _legacy("BoolTensor", "bool")
