"""PyTorch's legacy tensor types: ``torch.FloatTensor``, ``DoubleTensor``, ``HalfTensor``,
``BFloat16Tensor``, ``LongTensor``, ``IntTensor``, ``ShortTensor``, ``CharTensor``,
``ByteTensor``, ``BoolTensor``.

As in PyTorch, calling one makes a CPU tensor of its dtype: ``LongTensor([1, 2])`` from data,
``FloatTensor(2, 3)`` uninitialized of a size, ``FloatTensor()`` empty; and
``isinstance(t, torch.LongTensor)`` holds for an int64 tensor on the CPU. The
``torch.cuda.*Tensor`` types are the same on the GPU. ``Tensor.type()``
names a tensor's type (``"torch.cuda.FloatTensor"``) and ``Tensor.type(torch.LongTensor)``
(or a dtype, or a type's name) converts it.
"""
from __future__ import annotations

import numbers

import numpy

from .dispatch import expose
from .dtypes import BFLOAT16
from ._tensor import Tensor, empty, tensor

__all__ = ["FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor",
           "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor"]


class _LegacyTensorType(type):
    """The metaclass: the class's ``dtype`` decides construction and ``isinstance``."""

    def __instancecheck__(cls, obj) -> bool:
        return (isinstance(obj, Tensor) and obj.dtype == cls.dtype
                and obj.device.type == cls.device_type)

    def __call__(cls, *args, device=None):
        if device is not None and str(device).split(":")[0] != cls.device_type:
            raise RuntimeError(f"legacy constructor expects device type: {cls.device_type} "
                               f"but device type: {device} was passed")
        device = device if device is not None else cls.device_type
        if not args:
            return empty(0, dtype=cls.dtype, device=device)
        if all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in args):
            # a size: uninitialized, as PyTorch's
            return empty(*args, dtype=cls.dtype, device=device)
        if len(args) == 1 and isinstance(args[0], Tensor):
            if args[0].dtype != cls.dtype or args[0].device.type != cls.device_type:
                raise TypeError(f"expected {cls.__name__} (dtype {cls.dtype} on "
                                f"{cls.device_type}), got a tensor of dtype {args[0].dtype} "
                                f"on {args[0].device}")
            return args[0]                               # the same tensor, as PyTorch's
        if len(args) == 1:
            return tensor(args[0], dtype=cls.dtype, device=device)
        raise TypeError(f"{cls.__name__}() received an invalid combination of arguments: "
                        f"expected a size (ints), data, or a tensor, got "
                        f"{tuple(type(a).__name__ for a in args)}")


def _legacy(name: str, dtype: str, device_type: str = "cpu"):
    module = "torch" if device_type == "cpu" else "torch.cuda"
    return _LegacyTensorType(name, (), {"dtype": numpy.dtype(dtype), "device_type": device_type,
                                        "__module__": module,
                                        "__doc__": f"``{module}.{name}``: {device_type} "
                                                   f"tensors of dtype {dtype}."})


FloatTensor = _legacy("FloatTensor", "float32")
DoubleTensor = _legacy("DoubleTensor", "float64")
HalfTensor = _legacy("HalfTensor", "float16")
BFloat16Tensor = _legacy("BFloat16Tensor", BFLOAT16) if BFLOAT16 is not None else None   # ml_dtypes
LongTensor = _legacy("LongTensor", "int64")
IntTensor = _legacy("IntTensor", "int32")
ShortTensor = _legacy("ShortTensor", "int16")
CharTensor = _legacy("CharTensor", "int8")
ByteTensor = _legacy("ByteTensor", "uint8")
BoolTensor = _legacy("BoolTensor", "bool")

_CPU_TYPES = tuple(t for t in (FloatTensor, DoubleTensor, HalfTensor, BFloat16Tensor, LongTensor, IntTensor,
                                ShortTensor, CharTensor, ByteTensor, BoolTensor) if t is not None)
_BY_DTYPE = {cls.dtype: cls for cls in _CPU_TYPES}
# Complex tensors have type names but no legacy classes (torch.ComplexFloatTensor is not an
# attribute of torch either): named by t.type(), accepted by t.type("torch.ComplexFloatTensor").
_NAMES = {**{cls.dtype: cls.__name__ for cls in _CPU_TYPES},
          numpy.dtype("complex64"): "ComplexFloatTensor", numpy.dtype("complex128"): "ComplexDoubleTensor"}
_DTYPES = {name: dtype for dtype, name in _NAMES.items()}

# ``torch.cuda.FloatTensor``...: the same types on the GPU (``torch.cuda`` exports them).
CUDA_TYPES = {cls.__name__: _legacy(cls.__name__, cls.dtype, "cuda") for cls in _CPU_TYPES}


@expose(methods="type")
def type_(self, dtype=None, non_blocking: bool = False):
    """``t.type()``: the legacy type's name, ``"torch.FloatTensor"`` (``"torch.cuda...."`` on
    a GPU). ``t.type(T)``: ``t`` as type ``T`` — a legacy type (a CPU tensor, as PyTorch's),
    its name (``"torch.cuda.LongTensor"`` puts it on the GPU) or a dtype; ``t`` itself when
    it is already one."""
    cuda = self.device.type == "cuda"
    if dtype is None:
        name = _NAMES.get(numpy.dtype(self.dtype))
        if name is None:
            raise RuntimeError(f"no legacy tensor type for dtype {self.dtype}")
        return f"torch.{'cuda.' if cuda else ''}{name}"
    device = None
    if isinstance(dtype, str):
        parts = dtype.split(".")
        on_cuda = len(parts) == 3 and parts[:2] == ["torch", "cuda"]
        if not (on_cuda or len(parts) == 2 and parts[0] == "torch") or parts[-1] not in _DTYPES:
            raise ValueError(f"invalid type: '{dtype}'")
        target, device = _DTYPES[parts[-1]], ("cuda" if on_cuda else "cpu")
    elif isinstance(dtype, _LegacyTensorType):
        target, device = dtype.dtype, dtype.device_type
    else:
        target = numpy.dtype(dtype)
    if target == self.dtype and (device is None or (device == "cuda") == cuda):
        return self
    if device is not None and (device == "cuda") != cuda:
        return self.to(device, dtype=target)
    return self.to(dtype=target)


# Registered with the other methods (``expose``), and attached here: ``ops`` attached those
# when it loaded, before this module.
Tensor.type = type_
