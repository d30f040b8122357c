"""bfloat16, and PyTorch's ``finfo``/``iinfo``.

NumPy has no bfloat16; the ``ml_dtypes`` package gives it a real one (``numpy.dtype(
ml_dtypes.bfloat16)``, 2 bytes, 8 exponent bits as float32), with NumPy's elementwise ufuncs
computing in float32 and rounding each result. What it lacks (matmul and einsum in bfloat16,
promotion with float16 or Python floats, ``numpy.finfo``), the dispatcher does: an op on
bfloat16 inputs runs on their float32 values and its floating results are rounded back to
bfloat16 when PyTorch's result dtype is bfloat16 (:func:`dispatch._bfloat16_forward`), and
that op's node computes its gradients in float32 too (``dispatch._BFloat16Node``), rounded
to bfloat16 as they flow on. Compiled autograd leaves such graphs to the eager engine. That is how PyTorch's CPU bfloat16 kernels compute too (in float32, one rounding per
op), so results agree with PyTorch's to bfloat16 rounding.

CuPy has no bfloat16: a bfloat16 tensor stays on the CPU (``.cuda()`` says so).

Note that ml_dtypes' bfloat16 is NumPy kind ``'V'``: test floating dtypes with
:func:`is_floating`, not ``dtype.kind in "fc"``.
"""
from __future__ import annotations

import numpy

try:
    import ml_dtypes as _ml_dtypes
except ImportError:  # pragma: no cover - a declared dependency; a clear error if it is absent
    _ml_dtypes = None

__all__ = ["BFLOAT16", "ERR_NO_ML_DTYPES", "ERR_BFLOAT16_CUDA", "is_floating", "finfo",
           "iinfo"]

#: The default dtype (``torch.get_default_dtype()``), held here for finfo and promotion.py.
DEFAULT_DTYPE = [numpy.dtype(numpy.float32)]

#: The bfloat16 dtype (None only where ml_dtypes is not installed).
BFLOAT16 = numpy.dtype(_ml_dtypes.bfloat16) if _ml_dtypes is not None else None
FLOAT32 = numpy.dtype(numpy.float32)

ERR_NO_ML_DTYPES = ("bfloat16 needs the ml_dtypes package (a gradtrace dependency): "
                    "pip install ml_dtypes")
ERR_BFLOAT16_CUDA = ("bfloat16 is not supported on CUDA devices here: CuPy has no bfloat16 "
                     "dtype. Keep bfloat16 tensors on the CPU, or use float16 on the GPU "
                     "(e.g. tensor.to('cuda', dtype=torch.float16)).")


def is_floating(dtype) -> bool:
    """Is ``dtype`` a floating (or complex) dtype, bfloat16 included?"""
    return dtype.kind in "fc" or (dtype is BFLOAT16 and BFLOAT16 is not None)


def mantissa_bits(dtype) -> int:
    """The explicit mantissa bits of a floating dtype (``numpy.finfo(dt).nmant``)."""
    dt = numpy.dtype(dtype)
    return int((_ml_dtypes.finfo(dt) if dt is BFLOAT16 else numpy.finfo(dt)).nmant)


class finfo:
    """``torch.finfo(dtype)``: the limits of a floating dtype (default: the default dtype).

    Attributes: ``bits``, ``eps``, ``max``, ``min``, ``tiny`` (= ``smallest_normal``),
    ``resolution``, ``dtype`` (its name, as PyTorch's: ``'bfloat16'``)."""

    def __init__(self, dtype=None):
        dt = DEFAULT_DTYPE[0] if dtype is None else numpy.dtype(dtype)
        if not is_floating(dt):
            raise TypeError(f"torch.finfo() requires a floating point input type, got {dt}")
        info = _ml_dtypes.finfo(dt) if dt is BFLOAT16 else numpy.finfo(dt)
        self.bits = dt.itemsize * 8
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = self.smallest_normal = float(info.smallest_normal)
        self.resolution = 10.0 ** -int(info.precision)   # PyTorch's: 0.01 for bfloat16
        self.dtype = dt.name

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, "
                f"tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """``torch.iinfo(dtype)``: ``bits``, ``max``, ``min``, ``dtype`` of an integer dtype."""

    def __init__(self, dtype):
        dt = numpy.dtype(dtype)
        if dt.kind not in "iu":
            raise TypeError(f"torch.iinfo() requires an integer input type, got {dt}")
        info = numpy.iinfo(dt)
        self.bits = dt.itemsize * 8
        self.max = int(info.max)
        self.min = int(info.min)
        self.dtype = dt.name

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"
