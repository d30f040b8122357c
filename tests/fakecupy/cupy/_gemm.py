"""cuBLAS's ``GemmStridedBatchedEx`` on host memory, for the tests: column-major matrices
read and written at the addresses given, as cuBLAS reads device memory. The stand-in CuPy
offers it as the cuBLAS library of ``autograd/graph_matmul.py`` (``cupy.cuda._gradtrace_cublas``),
and ``tests/autograd/test_graph_matmul.py`` runs the module's arguments through it against
``numpy.matmul``. Imports nothing of the stand-in, so the tests can load it by path."""
from __future__ import annotations

import ctypes

import numpy as np

# cudaDataType -> dtype
DTYPES = {0: np.dtype(np.float32), 1: np.dtype(np.float64), 2: np.dtype(np.float16)}


def _matrix(ptr, rows, cols, ld, dtype):
    """The column-major (rows, cols) matrix at ``ptr`` with leading dim ``ld``, as a view."""
    if rows == 0 or cols == 0:
        return np.zeros((rows, cols), dtype)
    if ld < rows:
        raise ValueError(f"cuBLAS: leading dim {ld} below the {rows} rows of its matrix")
    n = (cols - 1) * ld + rows
    buf = np.frombuffer((ctypes.c_char * (n * dtype.itemsize)).from_address(ptr), dtype)
    return np.lib.stride_tricks.as_strided(buf, (rows, cols), (dtype.itemsize, ld * dtype.itemsize))


def gemm_strided_batched(op_a, op_b, m, n, k, alpha, a_ptr, lda, stride_a, b_ptr, ldb, stride_b,
                         beta, c_ptr, ldc, stride_c, count, dtype):
    """C_i = alpha op(A_i) op(B_i) + beta C_i for each batch entry i, column-major."""
    size = dtype.itemsize
    for i in range(count):
        a = _matrix(a_ptr + i * stride_a * size, *((m, k) if op_a == 0 else (k, m)), lda, dtype)
        b = _matrix(b_ptr + i * stride_b * size, *((k, n) if op_b == 0 else (n, k)), ldb, dtype)
        c = _matrix(c_ptr + i * stride_c * size, m, n, ldc, dtype)
        a = a if op_a == 0 else a.T
        b = b if op_b == 0 else b.T
        # c = a @ b column-major is, row-major, cᵀ = bᵀ @ aᵀ: the caller's own operands (same
        # memory, same strides), so NumPy computes what an eager np.matmul of them gives.
        prod = np.matmul(b.T, a.T).T
        c[...] = (prod * alpha + beta * c) if (alpha != 1 or beta) else prod


class EmulatedCublas:
    """What ``graph_matmul.Cublas`` offers (``gemm(args, dtype)``), on host buffers."""

    def gemm(self, args, dtype):
        (op_a, op_b, m, n, k, a_ptr, lda, stride_a, b_ptr, ldb, stride_b, c_ptr, ldc, stride_c, count) = args
        gemm_strided_batched(op_a, op_b, m, n, k, 1.0, a_ptr, lda, stride_a, b_ptr, ldb, stride_b,
                             0.0, c_ptr, ldc, stride_c, count, np.dtype(dtype))


def _value(x):
    """A ctypes argument's Python value (``c_int(3)``, ``byref(c_float(1))``, ``c_void_p``)."""
    x = getattr(x, "_obj", x)
    return x.value if hasattr(x, "value") else x


class CtypesCublas:
    """The four libcublas functions graph_matmul calls, with its ctypes arguments; each product
    is launched through ``launch(fn)``, which runs it or records it in a capture."""

    def __init__(self, launch):
        self._launch = launch
        self.streams = {}

    def cublasCreate_v2(self, handle_ref):
        handle_ref._obj.value = 0x5EED
        return 0

    def cublasSetWorkspace_v2(self, handle, ptr, size):
        return 0

    def cublasSetStream_v2(self, handle, stream):
        self.streams[_value(handle)] = _value(stream) or 0
        return 0

    def cublasGemmStridedBatchedEx(self, handle, op_a, op_b, m, n, k, alpha, a, a_type, lda, stride_a,
                                   b, b_type, ldb, stride_b, beta, c, c_type, ldc, stride_c, count,
                                   compute, algo):
        v = [_value(x) for x in (op_a, op_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c,
                                 ldc, stride_c, count)]
        dtype = DTYPES[_value(a_type)]
        self._launch(lambda: gemm_strided_batched(*v, dtype))
        return 0
