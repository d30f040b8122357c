"""Which CuPy calls a CUDA-graph capture takes (benchmarks/gpu_check.sh's ``graph_probe``).

Compiled autograd captures a backward's replay in a CUDA graph (stream capture on a
non-blocking stream, CuPy's default relaxed mode); one call CuPy or a CUDA library refuses
while capturing sends the whole program back to plain replay. This captures, one at a time,
the calls the backward rules make (cuBLAS matmuls, reductions, indexing, casts…), after a
warm-up of each on the capturing stream, replays the graph and compares with eager: a table
of what captures, what is refused (and CuPy's words) and what captures but replays wrong.
Exits 1 when a replay is wrong or gradtrace's own path (graph_matmul) is refused; CuPy
refusing its own cuBLAS calls is expected (seen on an H200 with CuPy 14.2).

    python3 benchmarks/cuda_graph_probe.py
"""
from __future__ import annotations

import sys
import traceback


def main() -> int:
    import cupy as cp  # noqa: PLC0415

    rng = cp.random.default_rng(0)
    a = rng.standard_normal((64, 128), dtype=cp.float32)
    b = rng.standard_normal((128, 32), dtype=cp.float32)
    a3 = rng.standard_normal((4, 64, 128), dtype=cp.float32)
    b3 = rng.standard_normal((4, 128, 32), dtype=cp.float32)
    idx = cp.arange(0, 64, 3)
    calls = {
        "matmul 2-D (cuBLAS gemm)": lambda: a @ b,
        "matmul batched": lambda: cp.matmul(a3, b3),
        "matmul transposed": lambda: a.T @ a,
        "dot 1-D": lambda: cp.dot(a[0], a[1]),
        "sum all (CUB?)": lambda: a.sum(),
        "sum axis 0": lambda: a.sum(axis=0),
        "sum axis -1 keepdims": lambda: a.sum(axis=-1, keepdims=True),
        "max axis -1": lambda: a.max(axis=-1),
        "argmax": lambda: a.argmax(axis=-1),
        "mean": lambda: a.mean(axis=0),
        "exp / log": lambda: cp.log(cp.exp(a) + 1),
        "where": lambda: cp.where(a > 0, a, 0),
        "astype f16": lambda: a.astype(cp.float16),
        "take": lambda: cp.take(a, idx, axis=0),
        "fancy index": lambda: a[idx],
        "add.at (scatter)": lambda: _scatter(cp, a, idx),
        "copy / ascontiguousarray": lambda: cp.ascontiguousarray(a.T),
        "zeros (fill)": lambda: cp.zeros((64, 128), cp.float32),
        "broadcast_to + copy": lambda: cp.broadcast_to(a[:1], a.shape).copy(),
        "cumsum": lambda: cp.cumsum(a, axis=-1),
        "tanh": lambda: cp.tanh(a),
        # gradtrace's way round CuPy's refusal: cuBLAS through its own handle (graph_matmul).
        "graph_matmul 2-D": lambda: _direct(cp, a, b),
        "graph_matmul transposed": lambda: _direct(cp, a.T, a),
        "graph_matmul batched": lambda: _direct(cp, a3, b3),
    }
    stream = cp.cuda.Stream(non_blocking=True)
    print(f"cupy {cp.__version__}; capture on a non-blocking stream, relaxed mode")
    print(f"{'call':30} {'result':10} detail")
    bad = 0
    for name, fn in calls.items():
        try:
            with stream:
                expect = fn()        # warm-up on the stream: kernels compiled, pool filled
                stream.synchronize()
                stream.begin_capture()
                try:
                    out = fn()
                finally:
                    graph = stream.end_capture()
                graph.launch(stream)
                stream.synchronize()
            same = bool(cp.allclose(out, expect, equal_nan=True)) if out.dtype.kind == "f" else \
                bool((out == expect).all())
            print(f"{name:30} {'ok' if same else 'WRONG':10} {'' if same else 'replay differs from eager'}")
            bad += not same
        except Exception as exc:  # noqa: BLE001 - the table says what failed
            print(f"{name:30} {'refused':10} {type(exc).__name__}: {exc}")
            traceback.print_exc(limit=3, file=sys.stdout)
            # CuPy refusing its own cuBLAS calls is what graph_matmul is for; the run fails only
            # where gradtrace's own path is refused or any replay is wrong.
            bad += name.startswith("graph_matmul")
            stream = cp.cuda.Stream(non_blocking=True)     # a broken capture leaves it unusable
    return 0 if bad == 0 else 1


def _direct(cp, a, b):
    from gradtrace.autograd import backend  # noqa: PLC0415 - gpu_check.sh puts the checkout first
    with backend.graph_capture():
        return backend.matmul(cp, a, b)


def _scatter(cp, a, idx):
    out = cp.zeros_like(a)
    cp.add.at(out, idx, a[idx])
    return out


if __name__ == "__main__":
    sys.exit(main())
