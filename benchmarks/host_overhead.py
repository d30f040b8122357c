"""Host time per op on a GPU: where a launch-bound training step's time goes.

On the first H200 the MLP training step ran 2.9x and the transformer 4.4x slower than
PyTorch CUDA eager, the device idle most of the step: host-bound. This measures, on one
device, the host cost of one small elementwise op through each layer (raw CuPy, gradtrace
without and with autograd, PyTorch when it is there), the backward of a chain, and prints a
cProfile of gradtrace's MLP step (benchmarks/train_step.py's) by own time.

    python3 benchmarks/host_overhead.py [--device cuda] [--ops 2000] [--steps 30] [--json PATH]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gradtrace.autograd as ag  # noqa: E402
from gradtrace.autograd import backend  # noqa: E402
from _results import write_json  # noqa: E402

try:
    import torch  # noqa: E402
except ImportError:  # pragma: no cover - torch is never a dependency
    torch = None


def _per_op_us(fn, n_ops, sync, repeats=7):
    fn()
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) / n_ops * 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if ag.cuda_is_available() else "cpu")
    ap.add_argument("--ops", type=int, default=2000)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "host_overhead.json"))
    args = ap.parse_args(argv)
    dev = backend.device(args.device)
    xp, n = dev.xp, args.ops
    sync = (lambda: backend.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
    rows = {}
    raw = xp.full((16,), 0.5, dtype=xp.float32)

    def raw_chain():
        y = raw
        for _ in range(n):
            y = y * 1.0001
    rows["raw array op (CuPy/NumPy)"] = _per_op_us(raw_chain, n, sync)
    x0 = ag.full((16,), 0.5, device=dev)

    def no_grad_chain():
        y = x0
        for _ in range(n):
            y = y * 1.0001
    rows["gradtrace op, no autograd"] = _per_op_us(no_grad_chain, n, sync)
    x1 = ag.full((16,), 0.5, device=dev, requires_grad=True)

    def grad_chain():
        y = x1
        for _ in range(n):
            y = y * 1.0001
        return y
    rows["gradtrace op, recording a node"] = _per_op_us(grad_chain, n, sync)

    def fwd_bwd():
        x1.grad = None
        grad_chain().sum().backward()
    rows["gradtrace forward + backward, per forward op"] = _per_op_us(fwd_bwd, n, sync)
    if torch is not None and (dev.type == "cpu" or torch.cuda.is_available()):
        tdev = "cuda" if dev.type == "cuda" else "cpu"
        tsync = torch.cuda.synchronize if tdev == "cuda" else (lambda: None)
        t0 = torch.full((16,), 0.5, device=tdev)
        t1 = torch.full((16,), 0.5, device=tdev, requires_grad=True)

        def t_no_grad():
            y = t0
            for _ in range(n):
                y = y * 1.0001

        def t_fwd_bwd():
            t1.grad = None
            y = t1
            for _ in range(n):
                y = y * 1.0001
            y.sum().backward()
        rows["torch op, no autograd"] = _per_op_us(t_no_grad, n, tsync)
        rows["torch forward + backward, per forward op"] = _per_op_us(t_fwd_bwd, n, tsync)
    print(f"host time per op on {dev} (median of 7 chains of {n} ops on 16 floats)")
    for name, us in rows.items():
        print(f"  {name:48} {us:8.2f} us")
    from train_step import make_steps  # noqa: PLC0415 - the benchmark's own workloads
    step = make_steps("mlp", dev, False)["gradtrace"]
    for _ in range(3):
        step()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(args.steps):
        step()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(35)
    text = out.getvalue()
    print(f"cProfile of {args.steps} MLP training steps (train_step.py) on {dev}, by own time:")
    print(text)
    write_json(args.json, {"device": str(dev), "ops": n, "per_op_us": rows, "cprofile": text})
    return 0


if __name__ == "__main__":
    sys.exit(main())
