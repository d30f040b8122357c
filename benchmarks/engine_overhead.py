"""Engine overhead per op-step on a long chain of tiny ops.

``y = y * 1.0001 + 0.0001`` for 2,000 iterations on a 16-element float32 tensor, forward then
backward; µs per op-step = total time / (4 x iterations) (two forward ops and two backward
nodes per iteration). Compared, in the same process, with NumPy doing the same arithmetic by
hand and with PyTorch when it happens to be installed (never a dependency).

The table shows medians. Below it, gradtrace's run is split into µs per forward op and per
backward node (medians), and the fastest and slowest of the repeats are shown: on a busy
machine the spread says how far to trust one number.

Usage: python benchmarks/engine_overhead.py [--iterations N] [--repeats R] [--json PATH]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _results import write_json  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gradtrace import autograd  # noqa: E402


def numpy_by_hand(n: int) -> float:
    """Forward keeps each multiplier input; backward applies the chain rule by hand."""
    y = np.full(16, 0.5, dtype=np.float32)
    t0 = time.perf_counter()
    for _ in range(n):
        y = y * np.float32(1.0001) + np.float32(0.0001)
    g = np.ones(16, dtype=np.float32)
    for _ in range(n):
        g = g * np.float32(1.0001)       # d(add)/dy = 1, d(mul)/dy = 1.0001
    return time.perf_counter() - t0


# Forward and backward seconds of each gradtrace_chain call, for the split shown under the table.
_gradtrace_parts: list = []


def gradtrace_chain(n: int) -> float:
    x = autograd.full((16,), 0.5, requires_grad=True)
    t0 = time.perf_counter()
    y = x
    for _ in range(n):
        y = y * 1.0001 + 0.0001
    t1 = time.perf_counter()
    y.sum().backward()
    t2 = time.perf_counter()
    _gradtrace_parts.append((t1 - t0, t2 - t1))
    return t2 - t0


def torch_chain(n: int) -> float | None:
    try:
        import torch  # noqa: PLC0415 - optional reference only
    except ImportError:
        return None
    torch.set_num_threads(1)
    x = torch.full((16,), 0.5, requires_grad=True)
    t0 = time.perf_counter()
    y = x
    for _ in range(n):
        y = y * 1.0001 + 0.0001
    y.sum().backward()
    return time.perf_counter() - t0


def run_times(fn, n: int, repeats: int) -> list | None:
    """Seconds of each of ``repeats`` calls after a warm-up; None when ``fn`` is unavailable."""
    if fn(n) is None:  # warm-up
        return None
    return [fn(n) for _ in range(repeats)]


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results",
                                                   "engine_overhead.json"))
    args = ap.parse_args(argv)
    n, steps = args.iterations, 4 * args.iterations
    times = {"numpy by hand": run_times(numpy_by_hand, n, args.repeats),
             "gradtrace": run_times(gradtrace_chain, n, args.repeats),
             "pytorch": run_times(torch_chain, n, args.repeats)}
    rows = {k: (statistics.median(v) if v is not None else None) for k, v in times.items()}
    us = {k: (v / steps * 1e6 if v is not None else None) for k, v in rows.items()}
    print(f"engine overhead: {n} iterations of y = y * 1.0001 + 0.0001 (16 x float32), "
          f"median of {args.repeats}")
    print(f"{'implementation':<16}{'total ms':>10}{'us/op-step':>12}{'vs numpy':>10}{'vs torch':>10}")
    for name, t in rows.items():
        if t is None:
            print(f"{name:<16}{'not installed':>22}")
            continue
        vs_np = t / rows["numpy by hand"]
        vs_t = f"{t / rows['pytorch']:.2f}x" if rows["pytorch"] else "-"
        print(f"{name:<16}{t * 1e3:>10.2f}{us[name]:>12.3f}{vs_np:>9.2f}x{vs_t:>10}")
    # The timed calls only (the warm-up's parts come first): 2n forward ops, then the backward
    # of their 2n nodes (with y.sum() and its node, and AccumulateGrad, riding along).
    parts = _gradtrace_parts[-args.repeats:]
    fwd_us = statistics.median(f for f, _ in parts) / (2 * n) * 1e6
    bwd_us = statistics.median(b for _, b in parts) / (2 * n) * 1e6
    spread = [t / steps * 1e6 for t in times["gradtrace"]]
    print(f"gradtrace split: {fwd_us:.3f} us per forward op, {bwd_us:.3f} us per backward node; "
          f"us/op-step over the {args.repeats} repeats: {min(spread):.3f} fastest, "
          f"{max(spread):.3f} slowest")
    result = {"iterations": n, "repeats": args.repeats, "seconds": rows, "us_per_op_step": us,
              "ratio_vs_torch": (rows["gradtrace"] / rows["pytorch"]) if rows["pytorch"] else None,
              "gradtrace_us_per_forward_op": fwd_us, "gradtrace_us_per_backward_node": bwd_us,
              "gradtrace_us_per_op_step_range": [min(spread), max(spread)]}
    return write_json(args.json, result)


if __name__ == "__main__":
    main()
