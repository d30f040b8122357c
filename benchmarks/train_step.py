"""One training step (forward, backward, SGD) with gradtrace against the same step written by
hand in NumPy (and in CuPy on a GPU when one is usable).

Workloads:
- ``mlp``: 4 Linear layers of width 1024 (ReLU between), batch 256, float32, MSE loss;
- ``cnn``: conv(3->16, 3x3, pad 1)-ReLU-maxpool 2 - conv(16->32)-ReLU-maxpool 2 - Linear(->10)
  on 32x32 RGB images, batch 32, float32, cross-entropy loss.
The hand-written step does the same arithmetic with plain arrays: GEMMs for linear layers,
im2col + GEMM for convolutions, reshape-max for pooling, in-place SGD.

Usage: python benchmarks/train_step.py [--repeats R] [--warmup W] [--device cpu|cuda|all]
       [--json PATH]
Target: gradtrace <= 1.15x the hand-written step for the MLP on CPU.

On a shared machine, multi-threaded BLAS under contention makes every GEMM several times slower
and noisy; ``OPENBLAS_NUM_THREADS=1`` gives steadier numbers (the JSON records the setting).
The two implementations take turns in every round, so both see the same load.
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
from gradtrace.autograd import backend, nn, optim  # noqa: E402
from gradtrace.autograd.nn import functional as F  # noqa: E402

LR = 1e-3


# --------------------------------------------------------------------------- MLP


def mlp_params(xp, width=1024, layers=4, seed=0):
    rng = np.random.default_rng(seed)
    ws = [xp.asarray((rng.uniform(-1, 1, (width, width)) / np.sqrt(width)).astype(np.float32))
          for _ in range(layers)]
    bs = [xp.zeros(width, np.float32) for _ in range(layers)]
    return ws, bs


def mlp_data(xp, width=1024, batch=256, seed=1):
    rng = np.random.default_rng(seed)
    return (xp.asarray(rng.standard_normal((batch, width)).astype(np.float32)),
            xp.asarray(rng.standard_normal((batch, width)).astype(np.float32)))


def mlp_by_hand(xp, ws, bs, x, y):
    """Forward, backward and SGD of the MLP, written out with arrays."""
    acts = [x]
    h = x
    last = len(ws) - 1
    for i, (w, b) in enumerate(zip(ws, bs)):
        z = h @ w.T
        z += b
        h = xp.maximum(z, 0) if i < last else z
        acts.append(h)
    diff = h - y
    loss = (diff * diff).mean()
    g = diff * (2.0 / diff.size)
    for i in range(last, -1, -1):
        if i < last:
            g = g * (acts[i + 1] > 0)
        gw = g.T @ acts[i]
        gb = g.sum(0)
        if i > 0:
            g = g @ ws[i]
        ws[i] -= LR * gw
        bs[i] -= LR * gb
    return loss


class BenchMLP(nn.Module):
    def __init__(self, ws, bs, device):
        super().__init__()
        self.layers = nn.ModuleList()
        for w, b in zip(ws, bs):
            lin = nn.Linear(w.shape[1], w.shape[0], device=device)
            lin.weight.data[...] = w
            lin.bias.data[...] = b
            self.layers.append(lin)

    def forward(self, x):
        last = len(self.layers) - 1
        for i, lin in enumerate(self.layers):
            x = lin(x)
            if i < last:
                x = F.relu(x)
        return x


# --------------------------------------------------------------------------- CNN


def cnn_params(xp, seed=0):
    rng = np.random.default_rng(seed)

    def u(shape, fan_in):
        return xp.asarray((rng.uniform(-1, 1, shape) / np.sqrt(fan_in)).astype(np.float32))

    return {"w1": u((16, 3, 3, 3), 27), "b1": xp.zeros(16, np.float32),
            "w2": u((32, 16, 3, 3), 144), "b2": xp.zeros(32, np.float32),
            "w3": u((10, 32 * 8 * 8), 2048), "b3": xp.zeros(10, np.float32)}


def cnn_data(xp, batch=32, seed=1):
    rng = np.random.default_rng(seed)
    return (xp.asarray(rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)),
            xp.asarray(rng.integers(0, 10, batch)))


def _im2col(xp, x):   # 3x3, stride 1, pad 1: (N, C, H, W) -> (N, C*9, H*W)
    n, c, h, w = x.shape
    xp_ = xp.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    s = xp_.strides
    view = xp.lib.stride_tricks.as_strided(xp_, (n, c, 3, 3, h, w), (s[0], s[1], s[2], s[3], s[2], s[3]))
    return xp.ascontiguousarray(view).reshape(n, c * 9, h * w)


def _col2im(xp, cols, shape):
    n, c, h, w = shape
    cols = cols.reshape(n, c, 3, 3, h, w)
    out = xp.zeros((n, c, h + 2, w + 2), cols.dtype)
    for i in range(3):
        for j in range(3):
            out[:, :, i:i + h, j:j + w] += cols[:, :, i, j]
    return out[:, :, 1:-1, 1:-1]


def _conv_fwd(xp, x, w, b):
    cols = _im2col(xp, x)
    out = xp.matmul(w.reshape(w.shape[0], -1), cols)
    out += b[:, None]
    n, _, h, wd = x.shape
    return out.reshape(n, w.shape[0], h, wd), cols


def _conv_bwd(xp, g, x_shape, w, cols):
    n, o, h, wd = g.shape
    gm = g.reshape(n, o, h * wd)
    gw = xp.matmul(gm, cols.transpose(0, 2, 1)).sum(0).reshape(w.shape)
    gb = g.sum((0, 2, 3))
    gx = _col2im(xp, xp.matmul(w.reshape(o, -1).T, gm), x_shape)
    return gx, gw, gb


def _pool_fwd(xp, x):   # 2x2 max pool: the values and the mask of the maxima
    n, c, h, w = x.shape
    r = x.reshape(n, c, h // 2, 2, w // 2, 2)
    out = r.max(axis=(3, 5))
    mask = r == out[:, :, :, None, :, None]
    return out, mask


def _pool_bwd(xp, g, mask):
    n, c, h2, _, w2, _ = mask.shape
    return (mask * g[:, :, :, None, :, None]).reshape(n, c, h2 * 2, w2 * 2)


def cnn_by_hand(xp, p, x, y):
    """Forward, backward and SGD of the CNN, written out with arrays."""
    z1, cols1 = _conv_fwd(xp, x, p["w1"], p["b1"])
    a1 = xp.maximum(z1, 0)
    p1, m1 = _pool_fwd(xp, a1)
    z2, cols2 = _conv_fwd(xp, p1, p["w2"], p["b2"])
    a2 = xp.maximum(z2, 0)
    p2, m2 = _pool_fwd(xp, a2)
    flat = p2.reshape(p2.shape[0], -1)
    logits = flat @ p["w3"].T + p["b3"]
    shifted = logits - logits.max(1, keepdims=True)
    logp = shifted - xp.log(xp.exp(shifted).sum(1, keepdims=True))
    n = x.shape[0]
    loss = -logp[xp.arange(n), y].mean()
    g = xp.exp(logp)
    g[xp.arange(n), y] -= 1
    g /= n
    grads = {"w3": g.T @ flat, "b3": g.sum(0)}
    g = (g @ p["w3"]).reshape(p2.shape)
    g = _pool_bwd(xp, g, m2) * (z2 > 0)
    g, grads["w2"], grads["b2"] = _conv_bwd(xp, g, p1.shape, p["w2"], cols2)
    g = _pool_bwd(xp, g, m1) * (z1 > 0)
    _, grads["w1"], grads["b1"] = _conv_bwd(xp, g, x.shape, p["w1"], cols1)
    for k, v in grads.items():
        p[k] -= LR * v
    return loss


class BenchCNN(nn.Module):
    def __init__(self, p, device):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1, device=device)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1, device=device)
        self.fc = nn.Linear(32 * 8 * 8, 10, device=device)
        for mod, w, b in ((self.conv1, "w1", "b1"), (self.conv2, "w2", "b2"), (self.fc, "w3", "b3")):
            mod.weight.data[...] = p[w]
            mod.bias.data[...] = p[b]

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


# --------------------------------------------------------------------------- timing


def _sync(dev):
    if dev.type == "cuda":
        backend.synchronize(dev)


def _medians(steps, dev, warmup, repeats):
    """Median seconds of each step function; the steps take turns in every round, so a busy
    machine slows them alike instead of skewing the ratio."""
    for _ in range(warmup):
        for step in steps:
            step()
    _sync(dev)
    times = [[] for _ in steps]
    for _ in range(repeats):
        for k, step in enumerate(steps):
            t0 = time.perf_counter()
            step()
            _sync(dev)
            times[k].append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def bench(workload: str, device: str, warmup: int, repeats: int) -> dict:
    dev = backend.device(device)
    xp = dev.xp
    if workload == "mlp":
        ws, bs = mlp_params(xp)
        x, y = mlp_data(xp)
        model = BenchMLP(ws, bs, dev)
        loss_fn = F.mse_loss
        hand_args = ([w.copy() for w in ws], [b.copy() for b in bs], x, y)
        hand = lambda: mlp_by_hand(xp, *hand_args)  # noqa: E731
    else:
        p = cnn_params(xp)
        x, y = cnn_data(xp)
        model = BenchCNN(p, dev)
        loss_fn = F.cross_entropy
        hand_p = {k: v.copy() for k, v in p.items()}
        hand = lambda: cnn_by_hand(xp, hand_p, x, y)  # noqa: E731
    opt = optim.SGD(model.parameters(), lr=LR)
    xt = autograd.Tensor._make(x, False, None, 0, [0], dev)
    yt = autograd.Tensor._make(y, False, None, 0, [0], dev)

    def engine_step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xt), yt)
        loss.backward()
        opt.step()
        return loss

    # Same arithmetic: the first step's losses agree.
    l_engine = float(engine_step().item())
    l_hand = float(hand())
    t_hand, t_engine = _medians([hand, engine_step], dev, warmup, repeats)
    return {"workload": workload, "device": str(dev), "gradtrace_ms": t_engine * 1e3,
            "by_hand_ms": t_hand * 1e3, "ratio": t_engine / t_hand,
            "first_loss_gradtrace": l_engine, "first_loss_by_hand": l_hand}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--device", default="all", help="cpu, cuda, or all (cuda when usable)")
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results",
                                                   "train_step.json"))
    args = ap.parse_args(argv)
    devices = ["cpu"] + (["cuda"] if backend.cuda_is_available() else [])
    if args.device != "all":
        devices = [args.device]
    rows = [bench(w, d, args.warmup, args.repeats) for d in devices for w in ("mlp", "cnn")]
    print(f"one training step (forward + backward + SGD), median of {args.repeats} after "
          f"{args.warmup} warm-up steps")
    print(f"{'workload':<10}{'device':<8}{'gradtrace ms':>14}{'by hand ms':>12}{'ratio':>8}")
    for r in rows:
        print(f"{r['workload']:<10}{r['device']:<8}{r['gradtrace_ms']:>14.2f}"
              f"{r['by_hand_ms']:>12.2f}{r['ratio']:>7.2f}x")
    result = {"repeats": args.repeats, "warmup": args.warmup, "target_mlp_cpu_ratio": 1.15,
              "numpy": np.__version__, "cpu_count": os.cpu_count(),
              "blas_threads_env": {k: os.environ.get(k) for k in
                                   ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")},
              "rows": rows}
    return write_json(args.json, result)


if __name__ == "__main__":
    main()
