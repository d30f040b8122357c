"""Matrix products inside a CUDA-graph capture, through cuBLAS itself.

CuPy refuses every cuBLAS call while a stream captures ("calling cuBLAS API during stream
capture is currently unsupported", seen on an H200 with CuPy 14), so a compiled backward
holding one matmul used to fall back from its CUDA graph to plain replay. cuBLAS supports
stream capture; what CuPy guards is its shared handle. This module holds a cuBLAS handle of
its own per device (with its own workspace, so that nothing is allocated while capturing) and
computes NumPy's ``matmul`` with ``cublasGemmStridedBatchedEx``: batch dims broadcast, 1-D
operands promoted and squeezed, C- or F-ordered matrices passed as they are (transposed
views cost no copy), anything else made contiguous first.

:func:`backend.matmul` routes here while :func:`backend.graph_capture` is on (compiled
autograd's warm-up and capture of a graph); everywhere else CuPy's own matmul runs.

cuBLAS is column-major: for row-major ``C = A @ B`` it computes ``Cᵀ = Bᵀ Aᵀ``, and the
memory of a C-ordered (m, k) matrix is the column-major (k, m) matrix ``Aᵀ``.
"""
from __future__ import annotations

import ctypes
import math

import numpy

__all__ = ["matmul", "gemm_arguments", "Cublas"]

# cudaDataType and cublasComputeType_t values (library_types.h, cublas_api.h), and the host
# scalar type alpha and beta take for that compute type.
_TYPES = {
    numpy.dtype(numpy.float32): (0, 68, ctypes.c_float),     # CUDA_R_32F, CUBLAS_COMPUTE_32F
    numpy.dtype(numpy.float64): (1, 70, ctypes.c_double),    # CUDA_R_64F, CUBLAS_COMPUTE_64F
    numpy.dtype(numpy.float16): (2, 68, ctypes.c_float),     # CUDA_R_16F, fp32 accumulation
}
OP_N, OP_T = 0, 1
GEMM_DEFAULT = -1
WORKSPACE_BYTES = 32 << 20      # cuBLAS's recommendation for Hopper is 32 MiB


def matmul(xp, a, b, out=None, cublas=None):
    """``a @ b`` with NumPy's rules, on the current stream, through cuBLAS."""
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: Input operand does not have enough dimensions")
    if a.dtype != b.dtype or a.dtype not in _TYPES:
        raise NotImplementedError(f"matmul of {a.dtype} and {b.dtype} inside a CUDA graph "
                                  f"(cuBLAS path: float16/32/64 of one dtype)")
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    m, k = a2.shape[-2:]
    if b2.shape[-2] != k:
        raise ValueError(f"matmul: Input operand 1 has a mismatch in its core dimension 0 "
                         f"(size {b2.shape[-2]} is different from {k})")
    n = b2.shape[-1]
    batch = tuple(numpy.broadcast_shapes(a2.shape[:-2], b2.shape[:-2]))
    count = math.prod(batch)
    c = xp.empty(batch + (m, n), a.dtype)
    if count and m and n:
        if k == 0:
            c.fill(0)
        else:
            a3, op_a, ld_a, stride_a = _operand(xp, a2, batch)
            b3, op_b, ld_b, stride_b = _operand(xp, b2, batch)
            args = gemm_arguments(m, n, k, (_pointer(a3), op_a, ld_a, stride_a),
                                  (_pointer(b3), op_b, ld_b, stride_b), _pointer(c), count)
            (cublas or Cublas.of(xp)).gemm(args, a.dtype)
    if a.ndim == 1:
        c = c[..., 0, :]
    if b.ndim == 1:
        c = c[..., 0]
    if out is not None:
        out[...] = c
        return out
    return c


def gemm_arguments(m, n, k, a, b, c_ptr, count):
    """cublasGemmStridedBatchedEx's (transa, transb, M, N, K, A, lda, strideA, B, ldb,
    strideB, C, ldc, strideC, batchCount) for row-major ``C (m, n) = A (m, k) @ B (k, n)``,
    each operand given as (pointer, its op, leading dim, batch stride in elements)."""
    a_ptr, op_a, ld_a, stride_a = a
    b_ptr, op_b, ld_b, stride_b = b
    # Cᵀ (n, m) = Bᵀ (n, k) · Aᵀ (k, m): B is cuBLAS's first operand, A its second.
    return (op_b, op_a, n, m, k, b_ptr, ld_b, stride_b, a_ptr, ld_a, stride_a, c_ptr, n, m * n, count)


def _pointer(x) -> int:
    """The address of a device array's first element (a host array's in the tests, where an
    emulated cuBLAS runs the same arguments on NumPy buffers)."""
    data = x.data
    return data.ptr if hasattr(data, "ptr") else x.__array_interface__["data"][0]


def _operand(xp, x, batch):
    """(array, op, leading dim, batch stride) of one operand, copied only where its layout
    is none cuBLAS can read (a matrix neither C- nor F-ordered, or batch dims not one stride)."""
    if tuple(x.shape[:-2]) != batch:
        if math.prod(x.shape[:-2]) == 1:
            x = x.reshape(x.shape[-2:])                      # one matrix for every batch entry
        else:
            x = xp.ascontiguousarray(xp.broadcast_to(x, batch + tuple(x.shape[-2:])))
    found = _layout(x)
    if found is None:
        x = xp.ascontiguousarray(x)
        found = _layout(x)
    return (x,) + found


def _layout(x):
    """(op, leading dim, batch stride) in elements for cuBLAS, or None where a copy is needed."""
    item = x.itemsize
    rows, cols = x.shape[-2:]
    s_rows, s_cols = x.strides[-2:]
    if (cols <= 1 or s_cols == item) and (rows <= 1 or s_rows == cols * item):
        op, ld = OP_N, max(1, cols)             # C-ordered: the column-major (cols, rows) Xᵀ
    elif (rows <= 1 or s_rows == item) and (cols <= 1 or s_cols == rows * item):
        op, ld = OP_T, max(1, rows)             # F-ordered: the column-major X itself
    else:
        return None
    # The batch dims of more than one entry must be one run of equal steps.
    dims = [(size, stride) for size, stride in zip(x.shape[:-2], x.strides[:-2]) if size > 1]
    if not dims:
        return op, ld, 0
    for (size, stride), (inner_size, inner_stride) in zip(dims, dims[1:]):
        if stride != inner_stride * inner_size:
            return None
    step = dims[-1][1]
    if step <= 0 or step % item:
        return None
    return op, ld, step // item


class Cublas:
    """A cuBLAS handle of this module's own on one device, with its own workspace, called
    through ctypes (CuPy's wrappers are what refuse capture). Made outside a capture: the
    first product of a compiled backward's warm-up makes it."""

    _by_device: dict = {}

    @classmethod
    def of(cls, xp) -> "Cublas":
        device = xp.cuda.Device().id
        found = cls._by_device.get(device)
        if found is None:
            # The stand-in CuPy of the tests carries a cuBLAS of its own (a seam only it fills).
            lib = getattr(xp.cuda, "_gradtrace_cublas", None) or _library(xp)
            found = cls._by_device[device] = cls(xp, lib)
        return found

    def __init__(self, xp, lib):
        self.xp, self.lib = xp, lib
        handle = ctypes.c_void_p()
        _check(lib.cublasCreate_v2(ctypes.byref(handle)), "cublasCreate")
        self.handle = handle
        self.workspace = xp.empty(WORKSPACE_BYTES, numpy.uint8)   # lives as long as the handle
        _check(lib.cublasSetWorkspace_v2(handle, ctypes.c_void_p(self.workspace.data.ptr),
                                         ctypes.c_size_t(WORKSPACE_BYTES)), "cublasSetWorkspace")

    def gemm(self, args, dtype) -> None:
        data_type, compute, scalar = _TYPES[numpy.dtype(dtype)]
        lib = self.lib
        stream = self.xp.cuda.get_current_stream().ptr
        _check(lib.cublasSetStream_v2(self.handle, ctypes.c_void_p(stream)), "cublasSetStream")
        (op_a, op_b, m, n, k, a_ptr, lda, stride_a, b_ptr, ldb, stride_b, c_ptr, ldc, stride_c,
         count) = args
        one, zero = scalar(1), scalar(0)
        i, ll, p = ctypes.c_int, ctypes.c_longlong, ctypes.c_void_p
        _check(lib.cublasGemmStridedBatchedEx(
            self.handle, i(op_a), i(op_b), i(m), i(n), i(k), ctypes.byref(one),
            p(a_ptr), i(data_type), i(lda), ll(stride_a),
            p(b_ptr), i(data_type), i(ldb), ll(stride_b), ctypes.byref(zero),
            p(c_ptr), i(data_type), i(ldc), ll(stride_c), i(count), i(compute), i(GEMM_DEFAULT)),
            "cublasGemmStridedBatchedEx")


def _library(xp):
    """The libcublas CuPy loaded (found in this process's mappings once CuPy made a handle),
    so that ours is the same library, not a second copy of another version."""
    xp.cuda.device.get_cublas_handle()
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "/libcublas.so" in line}
    if not paths:
        raise NotImplementedError("matmul inside a CUDA graph: libcublas is not loaded in this "
                                  "process (no /libcublas.so in /proc/self/maps)")
    lib = ctypes.CDLL(sorted(paths)[0])
    for name in ("cublasCreate_v2", "cublasSetWorkspace_v2", "cublasSetStream_v2", "cublasGemmStridedBatchedEx"):
        getattr(lib, name).restype = ctypes.c_int
    return lib


def _check(status, what):
    if status != 0:
        raise RuntimeError(f"{what} failed: cuBLAS status {status}")
