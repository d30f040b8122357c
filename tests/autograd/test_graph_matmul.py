"""autograd/graph_matmul.py: NumPy's matmul through cuBLAS's GemmStridedBatchedEx, as compiled
autograd runs it inside a CUDA-graph capture. The arguments it computes (ops, leading dims,
batch strides, which operands it copies) run here through an emulated cuBLAS on host
buffers (tests/fakecupy/cupy/_gemm.py reads column-major matrices at the addresses given, as
cuBLAS reads device memory), against numpy.matmul, over layouts a backward meets: transposed
views, broadcast batch dims, vectors, strided slices, empty dims."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradtrace.autograd import graph_matmul

_spec = importlib.util.spec_from_file_location(
    "gradtrace_test_gemm", Path(__file__).resolve().parents[1] / "fakecupy" / "cupy" / "_gemm.py")
_gemm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_gemm)
CUBLAS = _gemm.EmulatedCublas()


def _mm(a, b, out=None):
    return graph_matmul.matmul(np, a, b, out=out, cublas=CUBLAS)


@pytest.mark.parametrize("a_shape,b_shape", [
    ((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)),
    ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (1, 5, 4, 2)), ((1, 3, 4), (6, 4, 2)), ((0, 4), (4, 5)),
    ((3, 0), (0, 5)), ((3, 4), (4, 0)), ((2, 0, 3, 4), (4, 5)), ((1, 1), (1, 1)), ((5, 1), (1, 6)),
])
def test_shapes_match_numpy(a_shape, b_shape):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    got = _mm(a, b)
    want = np.matmul(a, b)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_transposed_views_pass_without_a_copy_and_match(dtype, monkeypatch):
    rng = np.random.default_rng(1)
    w = rng.standard_normal((5, 4)).astype(dtype)        # a Linear weight; the product uses w.T
    x = rng.standard_normal((3, 4)).astype(dtype)
    copies = []
    real = np.ascontiguousarray
    monkeypatch.setattr(np, "ascontiguousarray", lambda v: copies.append(v.shape) or real(v))
    got = _mm(x, w.T)
    assert copies == []                                  # F-ordered: cuBLAS's op T, no copy
    np.testing.assert_allclose(got, (x.astype(np.float64) @ w.T.astype(np.float64)).astype(dtype),
                               rtol=1e-3 if dtype == np.float16 else 1e-6)
    assert _gemm_ops(x, w.T) == (graph_matmul.OP_T, graph_matmul.OP_N)


def _gemm_ops(a, b):
    seen = []

    class Spy:
        def gemm(self, args, dtype):
            seen.append(args[:2])
            CUBLAS.gemm(args, dtype)
    graph_matmul.matmul(np, a, b, cublas=Spy())
    return seen[0]


def test_layouts_cublas_cannot_read_are_copied_first():
    rng = np.random.default_rng(2)
    big = rng.standard_normal((6, 8, 10))
    cases = [(big[:, ::2, :4], rng.standard_normal((4, 3))),            # rows strided
             (big[::2, :3, :4], rng.standard_normal((3, 4, 2))),         # batch strided
             (big.transpose(2, 0, 1)[:4, :3, :5], rng.standard_normal((5, 2))),   # batch and rows swapped
             (np.broadcast_to(rng.standard_normal((1, 3, 4)), (5, 3, 4)), rng.standard_normal((5, 4, 2)))]
    for a, b in cases:
        np.testing.assert_allclose(_mm(a, b), np.matmul(a, b), rtol=1e-12, atol=1e-12)


def test_out_is_written_and_returned():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    out = np.empty((3, 2))
    assert _mm(a, b, out=out) is out
    np.testing.assert_allclose(out, a @ b)


def test_errors_are_numpys_and_unsupported_dtypes_say_so():
    with pytest.raises(ValueError, match="mismatch in its core dimension"):
        _mm(np.ones((3, 4)), np.ones((5, 2)))
    with pytest.raises(ValueError, match="not have enough dimensions"):
        _mm(np.ones(()), np.ones((2, 2)))
    with pytest.raises(NotImplementedError, match="int64"):
        _mm(np.ones((2, 2), np.int64), np.ones((2, 2), np.int64))
    with pytest.raises(NotImplementedError, match="float32 and float64"):
        _mm(np.ones((2, 2), np.float32), np.ones((2, 2)))


@st.composite
def _operands(draw):
    m, k, n = (draw(st.integers(0, 4)) for _ in range(3))
    batch = draw(st.lists(st.integers(1, 3), max_size=2))
    a_batch = [draw(st.sampled_from([d, 1])) for d in batch]
    b_batch = [draw(st.sampled_from([d, 1])) for d in batch][draw(st.integers(0, len(batch))):]
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))

    def make(shape, transposed):
        if transposed and len(shape) >= 2:     # the same values, stored F-ordered in the matrix dims
            base = rng.standard_normal(shape[:-2] + (shape[-1], shape[-2]))
            return np.swapaxes(base, -1, -2)
        return rng.standard_normal(shape)
    a = make(tuple(a_batch) + (m, k), draw(st.booleans()))
    b = make(tuple(b_batch) + (k, n), draw(st.booleans()))
    if draw(st.booleans()) and not a_batch:
        a = a[0] if m else rng.standard_normal(k)     # a vector
    return a, b


@settings(max_examples=300, deadline=None)
@given(_operands())
def test_any_broadcast_and_layout_matches_numpy(ab):
    a, b = ab
    want = np.matmul(a, b)
    got = _mm(a, b)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_on_the_gpu_it_matches_cupys_matmul(dtype):
    """The real libcublas through ctypes (the stand-in's emulated one without a GPU)."""
    from gradtrace.autograd import backend
    cp = backend.device("cuda").xp
    rng = np.random.default_rng(4)
    tol = 2e-2 if dtype == "float16" else 1e-5
    cases = [((64, 128), (128, 32), False, False), ((64, 128), (32, 128), False, True),
             ((4, 8, 16), (16, 8), False, False), ((16,), (2, 16, 8), False, False), ((5, 7), (7,), True, False)]
    for a_shape, b_shape, a_t, b_t in cases:
        a = cp.asarray(rng.standard_normal(a_shape).astype(dtype))
        b = cp.asarray(rng.standard_normal(b_shape).astype(dtype))
        b = b.T if b_t else b
        got = graph_matmul.matmul(cp, a, b)
        want = cp.matmul(a, b)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(cp.asnumpy(got).astype(np.float64), cp.asnumpy(want).astype(np.float64),
                                   rtol=tol, atol=tol)


@pytest.mark.cuda
def test_a_stream_capture_takes_the_products_and_replays_them():
    """What CuPy's matmul refuses inside a capture (NotImplementedError, seen on an H200)
    goes through: captured, launched twice on new inputs, right both times."""
    from gradtrace.autograd import backend
    cp = backend.device("cuda").xp
    rng = np.random.default_rng(5)
    a = cp.asarray(rng.standard_normal((32, 64)).astype(np.float32))
    w = cp.asarray(rng.standard_normal((16, 64)).astype(np.float32))
    stream = cp.cuda.Stream(non_blocking=True)
    with stream, backend.graph_capture():
        backend.matmul(cp, a, w.T)                    # warm-up: the handle made outside the capture
        stream.synchronize()
        stream.begin_capture()
        try:
            with pytest.raises(NotImplementedError, match="cuBLAS"):
                cp.matmul(a, w.T)                      # CuPy's own: refused while capturing
        except BaseException:
            stream.end_capture()
            raise
        out = backend.matmul(cp, a, w.T)
        graph = stream.end_capture()
    for _ in range(2):
        a[...] = cp.asarray(rng.standard_normal((32, 64)).astype(np.float32))
        graph.launch(stream)
        stream.synchronize()
        np.testing.assert_allclose(cp.asnumpy(out), cp.asnumpy(a) @ cp.asnumpy(w).T, rtol=1e-4, atol=1e-4)
