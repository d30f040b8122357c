"""Peak memory of one training step: plain, with checkpointing of every block, with save_on_cpu.

A 16-layer MLP (width 2048, batch 512, float32; smaller with flags): each layer is
``gelu(h @ W + b)`` (tanh form, as GPT-2) and a block is two layers, SGD step. Peak
activation memory is the peak during the step above what is held before it (weights, their
``.grad`` buffers, allocated up front and accumulated in place, and the input): tracemalloc on
the CPU (NumPy reports its allocations to it), the CuPy memory pool on a GPU. Target:
checkpointing every block lowers peak activation memory to <= 0.5x of the plain run at
<= 1.4x its step time.

Usage: python benchmarks/memory.py [--layers 16] [--width 2048] [--batch 512] [--device cpu]
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
import tracemalloc

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _results import write_json  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import gradtrace.autograd as ag  # noqa: E402
import gradtrace.autograd.nn.functional as F  # noqa: E402
from gradtrace.autograd import backend  # noqa: E402


def make_model(layers, width, device, seed=0):
    """(W, b) per layer, with .grad allocated up front so it is not counted as activations."""
    rng = np.random.default_rng(seed)
    scale = np.sqrt(2.0 / width)
    params = []
    for _ in range(layers):
        w = ag.tensor((rng.standard_normal((width, width)) * scale).astype(np.float32),
                      device=device, requires_grad=True)
        b = ag.zeros(width, device=device, requires_grad=True)
        for p in (w, b):
            p.grad = ag.zeros_like(p)
        params.append((w, b))
    return params


def block(layers):
    """Two layers ``gelu(h @ W + b)``: the unit that is checkpointed."""
    def run(h):
        for w, b in layers:
            h = F.gelu(h @ w + b, approximate="tanh")
        return h
    return run


def step(params, x, mode):
    blocks = [block(params[i:i + 2]) for i in range(0, len(params), 2)]
    h = x
    if mode == "checkpoint":
        for blk in blocks:
            h = ag.checkpoint(blk, h)
    elif mode == "save_on_cpu":
        with ag.graph.save_on_cpu():
            for blk in blocks:
                h = blk(h)
    else:
        for blk in blocks:
            h = blk(h)
    loss = (h * h).mean()
    loss.backward()
    with ag.no_grad():
        for layer in params:
            for p in layer:
                p.sub_(p.grad * 1e-4)
                p.grad.zero_()
    return loss


class Peak:
    """Peak bytes above the level at start: tracemalloc on the CPU; on a GPU, the bytes the
    memory pool hands out (its malloc and free hooks, through the backend module), which is
    what the step's tensors hold, not what the pool keeps cached."""

    def __init__(self, device):
        self.device = device

    def __enter__(self):
        gc.collect()
        if self.device.type == "cuda":
            backend.synchronize(self.device)
            self.base = self.now = self.peak = 0
            self._remove = backend.install_cuda_memory_hook(self._on_malloc, self._on_free)
        else:
            tracemalloc.start()
            tracemalloc.reset_peak()
            self.base = tracemalloc.get_traced_memory()[0]
        return self

    def _on_malloc(self, device_index, ptr, nbytes):
        self.now += nbytes
        self.peak = max(self.peak, self.now)

    def _on_free(self, device_index, ptr, nbytes):
        self.now -= nbytes

    def __exit__(self, *exc):
        if self.device.type == "cuda":
            backend.synchronize(self.device)
            self._remove()
        else:
            self.peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        self.bytes = self.peak - self.base
        return False


def measure(weights, x, mode, device, repeats):
    step(weights, x, mode)   # warm-up
    with Peak(device) as peak:
        step(weights, x, mode)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step(weights, x, mode)
        backend.synchronize(device)
        times.append(time.perf_counter() - t0)
    return peak.bytes, statistics.median(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cuda" if ag.cuda_is_available() else "cpu")
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "memory.json"))
    args = ap.parse_args(argv)
    device = ag.device(args.device)
    weights = make_model(args.layers, args.width, device)
    x = ag.tensor(np.random.default_rng(1).standard_normal((args.batch, args.width)).astype(np.float32),
                  device=device)
    modes = ["plain", "checkpoint"] + (["save_on_cpu"] if device.type == "cuda" else [])
    rows = {m: measure(weights, x, m, device, args.repeats) for m in modes}
    base_mem, base_t = rows["plain"]
    print(f"memory: {args.layers}-layer MLP, width {args.width}, batch {args.batch}, float32, "
          f"on {device} (peak above weights and inputs; median of {args.repeats} step times)")
    print(f"{'mode':<14}{'peak MiB':>10}{'x plain':>9}{'step s':>9}{'x plain':>9}")
    for m, (mem, t) in rows.items():
        print(f"{m:<14}{mem / 2**20:>10.1f}{mem / base_mem:>9.2f}{t:>9.3f}{t / base_t:>9.2f}")
    result = {"config": vars(args), "device": str(device),
              "rows": {m: {"peak_bytes": mem, "step_s": t, "mem_ratio": mem / base_mem,
                           "time_ratio": t / base_t} for m, (mem, t) in rows.items()}}
    return write_json(args.json, result)


if __name__ == "__main__":
    main()
