"""One training step (forward, backward, Adam) with gradtrace, against the same step written by
hand in NumPy and, when torch happens to be installed, PyTorch eager — in the same process.

Workloads (float32, cross-entropy loss, Adam lr 1e-3):
- ``mlp``: 256 -> 4 x [Linear 512 + GELU] -> 10, batch 128;
- ``transformer``: 2 pre-LN causal blocks (vocab 96, d 128, 4 heads, seq 64, GELU MLP of
  width 512), batch 16; token and position embeddings, a final LayerNorm and a linear head.
- ``lstm`` / ``gru``: PyTorch's word-language-model example at its default sizes (emsize 200,
  nhid 200, 2 layers, bptt 35, batch 20), with a vocabulary of 1000 words instead of ~33k so
  that the embedding and the decoder do not hide the recurrence; no dropout (the same loss in
  every implementation), zero initial state each step;
- ``lstm_tiny``: the same model at tiny sizes (vocab 50, emsize 16, nhid 16, 1 layer, bptt
  35, batch 4), where the time is the per-step overhead of the unrolled cells;
- ``cnn``: PyTorch's MNIST example network, conv(1->32, 3) ReLU conv(32->64, 3) ReLU
  max_pool 2, dropout 0.25, fc 9216->128 ReLU, dropout 0.5, fc 128->10, log_softmax +
  nll_loss, batch 64 of 28x28 images. Dropout masks are random in each implementation, so
  the first losses are compared with dropout off and the timed steps run with it on.
GELU is the exact (erf) form, PyTorch's default. The three implementations start from the
same weights (their first losses are printed side by side) and take turns in every round, so
a busy machine slows them alike instead of skewing the ratios.

One thread each, as the issue measures: ``torch.set_num_threads(N)`` for PyTorch, and for
NumPy's BLAS ``threadpoolctl.threadpool_limits(N)`` when threadpoolctl is installed, else the
``OPENBLAS_NUM_THREADS``/``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` variables, which this script
sets before NumPy is imported (they only take effect then; variables already set are kept).

``--clock thread`` times each step with this thread's CPU time instead of the wall clock: on a
machine shared with other jobs, time spent waiting for a core is left out (CPU only; every
implementation computes in the calling thread when limited to one thread).

``--blas-coretype NAME`` sets ``OPENBLAS_CORETYPE`` before NumPy is imported: OpenBLAS's
runtime detection picks its Haswell (AVX2) kernels on some AVX-512 AMD EPYC processors, where
PyTorch's oneDNN runs AVX-512; ``--blas-coretype SkylakeX`` measures NumPy with AVX-512 GEMMs
(nearly twice as fast there). Default: OpenBLAS's own choice, as a user gets.

Usage: python benchmarks/train_step.py [--repeats R] [--warmup W] [--threads N]
       [--clock wall|thread] [--device cpu|cuda|all] [--only WORKLOAD] [--blas-coretype NAME]
       [--json PATH]
PyTorch runs only when ``import torch`` succeeds (never a dependency): on the CPU, and on
``--device cuda`` when torch sees a GPU (PyTorch CUDA eager, the same weights on the device).
"""
from __future__ import annotations

import os
import sys

# Before NumPy is imported: OpenBLAS reads its thread count once, at load time.
_THREADS = next((sys.argv[i + 1] for i, a in enumerate(sys.argv[:-1]) if a == "--threads"), "1")
_CORETYPE = next((sys.argv[i + 1] for i, a in enumerate(sys.argv[:-1]) if a == "--blas-coretype"),
                 None)
if _CORETYPE:
    os.environ["OPENBLAS_CORETYPE"] = _CORETYPE
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, _THREADS)

import argparse  # noqa: E402
import contextlib  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import scipy.special  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _results import write_json  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gradtrace import autograd  # noqa: E402
from gradtrace.autograd import backend, optim  # noqa: E402
from gradtrace.autograd.nn import functional as gF  # noqa: E402

try:
    import torch  # noqa: E402
    import torch.nn.functional as tF  # noqa: E402
except ImportError:
    torch = None

LR = 1e-3
MLP = dict(inp=256, width=512, depth=4, classes=10, batch=128)
GPT = dict(vocab=96, dim=128, heads=4, seq=64, batch=16, layers=2, mlp=512)
RNN_SIZES = {"lstm": dict(vocab=1000, emsize=200, nhid=200, layers=2, bptt=35, batch=20),
             "gru": dict(vocab=1000, emsize=200, nhid=200, layers=2, bptt=35, batch=20),
             "lstm_tiny": dict(vocab=50, emsize=16, nhid=16, layers=1, bptt=35, batch=4)}
CNN = dict(batch=64, classes=10)
WORKLOADS = ("mlp", "transformer", "lstm", "gru", "lstm_tiny", "cnn")


# --------------------------------------------------------------------------- weights and data
# One set of NumPy arrays per workload; every implementation starts from copies of it.


def _uniform(rng, shape, fan_in):
    return (rng.uniform(-1, 1, shape) / np.sqrt(fan_in)).astype(np.float32)


def mlp_weights(seed=0):
    """``[(W, b), ...]`` for the hidden layers then the head (W is (out, in), as nn.Linear)."""
    rng = np.random.default_rng(seed)
    dims = [MLP["inp"]] + [MLP["width"]] * MLP["depth"] + [MLP["classes"]]
    return [(_uniform(rng, (o, i), i), _uniform(rng, (o,), i)) for i, o in zip(dims, dims[1:])]


def mlp_data(seed=1):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((MLP["batch"], MLP["inp"])).astype(np.float32),
            rng.integers(0, MLP["classes"], MLP["batch"]))


def gpt_weights(seed=0):
    """A flat list of arrays in the order :func:`gpt_forward` reads them."""
    rng = np.random.default_rng(seed)
    d, m, v = GPT["dim"], GPT["mlp"], GPT["vocab"]
    ones, zeros = (lambda: np.ones(d, np.float32)), (lambda: np.zeros(d, np.float32))
    ws = [(rng.standard_normal((v, d)) * 0.1).astype(np.float32),
          (rng.standard_normal((GPT["seq"], d)) * 0.1).astype(np.float32)]
    for _ in range(GPT["layers"]):
        ws += [ones(), zeros(), _uniform(rng, (3 * d, d), d), _uniform(rng, (3 * d,), d),
               _uniform(rng, (d, d), d), _uniform(rng, (d,), d), ones(), zeros(),
               _uniform(rng, (m, d), d), _uniform(rng, (m,), d), _uniform(rng, (d, m), m),
               _uniform(rng, (d,), m)]
    return ws + [ones(), zeros(), _uniform(rng, (v, d), d), _uniform(rng, (v,), d)]


def gpt_data(seed=1):
    rng = np.random.default_rng(seed)
    shape = (GPT["batch"], GPT["seq"])
    return rng.integers(0, GPT["vocab"], shape), rng.integers(0, GPT["vocab"], shape)


def rnn_weights(workload, seed=0):
    """``[embedding, *recurrent weights in PyTorch's parameter order, decoder W, decoder b]``."""
    rng = np.random.default_rng(seed)
    z = RNN_SIZES[workload]
    v, e, h = z["vocab"], z["emsize"], z["nhid"]
    rows = (4 if workload.startswith("lstm") else 3) * h
    ws = [rng.uniform(-0.1, 0.1, (v, e)).astype(np.float32)]
    for layer in range(z["layers"]):
        n_in = e if layer == 0 else h
        ws += [_uniform(rng, (rows, n_in), h), _uniform(rng, (rows, h), h),
               _uniform(rng, (rows,), h), _uniform(rng, (rows,), h)]
    return ws + [rng.uniform(-0.1, 0.1, (v, h)).astype(np.float32), np.zeros(v, np.float32)]


def rnn_data(workload, seed=1):
    rng = np.random.default_rng(seed)
    z = RNN_SIZES[workload]
    shape = (z["bptt"], z["batch"])
    return rng.integers(0, z["vocab"], shape), rng.integers(0, z["vocab"], shape)


def cnn_weights(seed=0):
    rng = np.random.default_rng(seed)
    return [_uniform(rng, (32, 1, 3, 3), 9), _uniform(rng, (32,), 9),
            _uniform(rng, (64, 32, 3, 3), 288), _uniform(rng, (64,), 288),
            _uniform(rng, (128, 9216), 9216), _uniform(rng, (128,), 9216),
            _uniform(rng, (10, 128), 128), _uniform(rng, (10,), 128)]


def cnn_data(seed=1):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((CNN["batch"], 1, 28, 28)).astype(np.float32),
            rng.integers(0, CNN["classes"], CNN["batch"]))


# --------------------------------------------------------------------------- the models, once
# gradtrace and PyTorch share the functional API (PyTorch's names), so one forward function
# serves both: ``F`` is gradtrace's or torch's ``nn.functional``.


def mlp_forward(F, params, x, y):
    last = len(params) // 2 - 1
    for i in range(last + 1):
        x = F.linear(x, params[2 * i], params[2 * i + 1])
        if i < last:
            x = F.gelu(x)
    return F.cross_entropy(x, y)


def gpt_forward(F, params, idx, y):
    n, t = idx.shape
    d, h = GPT["dim"], GPT["heads"]
    it = iter(params)
    tok, pos = next(it), next(it)
    x = F.embedding(idx, tok) + pos[:t]

    def heads(z):
        return z.reshape(n, t, h, d // h).transpose(1, 2)

    for _ in range(GPT["layers"]):
        ln1w, ln1b, wqkv, bqkv, wo, bo, ln2w, ln2b, wfc, bfc, wp, bp = (next(it) for _ in range(12))
        q, k, v = F.linear(F.layer_norm(x, (d,), ln1w, ln1b), wqkv, bqkv).chunk(3, -1)
        a = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        x = x + F.linear(a.transpose(1, 2).reshape(n, t, d), wo, bo)
        x = x + F.linear(F.gelu(F.linear(F.layer_norm(x, (d,), ln2w, ln2b), wfc, bfc)), wp, bp)
    lnw, lnb, wh, bh = it
    logits = F.linear(F.layer_norm(x, (d,), lnw, lnb), wh, bh)
    return F.cross_entropy(logits.reshape(n * t, -1), y.reshape(-1))


def rnn_forward(F, params, idx, y, rnn):
    """Embedding, the recurrent module ``rnn`` (its weights are ``params[1:-2]``), decoder."""
    out, _ = rnn(F.embedding(idx, params[0]))
    logits = F.linear(out, params[-2], params[-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def cnn_forward(F, params, x, y, train=True):
    w1, b1, w2, b2, w3, b3, w4, b4 = params
    x = F.relu(F.conv2d(x, w1, b1))
    x = F.max_pool2d(F.relu(F.conv2d(x, w2, b2)), 2)
    x = F.dropout(x, 0.25, train)
    x = F.dropout(F.relu(F.linear(x.reshape(x.shape[0], -1), w3, b3)), 0.5, train)
    return F.nll_loss(F.log_softmax(F.linear(x, w4, b4), dim=1), y)


# --------------------------------------------------------------------------- by hand, in NumPy


def _gelu(z):
    """GELU and its derivative (exact form)."""
    cdf = scipy.special.erf(z * np.float32(1 / math.sqrt(2)))
    cdf += 1
    cdf *= 0.5
    pdf = np.exp(z * z * np.float32(-0.5))
    pdf *= np.float32(1 / math.sqrt(2 * math.pi))
    return z * cdf, cdf + z * pdf


def _ce(logits, y):
    """Mean cross-entropy and its gradient with respect to ``logits`` (N, C)."""
    shifted = logits - logits.max(1, keepdims=True)
    e = np.exp(shifted)
    s = e.sum(1, keepdims=True)
    n = len(y)
    loss = -(shifted[np.arange(n), y] - np.log(s[:, 0])).mean()
    g = e / s
    g[np.arange(n), y] -= 1
    g /= n
    return loss, g


def _ln(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    xc = x - mu
    rstd = 1 / np.sqrt((xc * xc).mean(-1, keepdims=True) + eps)
    xhat = xc * rstd
    return xhat * w + b, (xhat, rstd, w)


def _ln_back(g, cache):
    xhat, rstd, w = cache
    dw = (g * xhat).reshape(-1, xhat.shape[-1]).sum(0)
    db = g.reshape(-1, g.shape[-1]).sum(0)
    dxhat = g * w
    dx = dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True)
    return dx * rstd, dw, db


def _lin_back(g, x, w):
    """Gradients of ``x @ w.T + b`` for a (..., in) input: (dx, dw, db)."""
    g2, x2 = g.reshape(-1, g.shape[-1]), x.reshape(-1, x.shape[-1])
    return (g @ w), g2.T @ x2, g2.sum(0)


class HandAdam:
    """PyTorch's Adam update (no weight decay) with in-place NumPy arithmetic."""

    def __init__(self, params, lr=LR, b1=0.9, b2=0.999, eps=1e-8):
        self.params, self.lr, self.b1, self.b2, self.eps, self.t = params, lr, b1, b2, eps, 0
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]

    def step(self, grads):
        self.t += 1
        b1, b2 = self.b1, self.b2
        c2 = 1 / math.sqrt(1 - b2 ** self.t)
        lr = self.lr / (1 - b1 ** self.t)
        for p, g, m, v in zip(self.params, grads, self.m, self.v):
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * (g * g)
            denom = np.sqrt(v)
            denom *= c2
            denom += self.eps
            np.divide(m, denom, out=denom)
            denom *= lr
            p -= denom


def mlp_by_hand(params, opt, x, y):
    acts, derivs = [x], []
    h = x
    last = len(params) // 2 - 1
    for i in range(last + 1):
        z = h @ params[2 * i].T
        z += params[2 * i + 1]
        if i < last:
            h, dh = _gelu(z)
            derivs.append(dh)
        else:
            h = z
        acts.append(h)
    loss, g = _ce(h, y)
    grads = [None] * len(params)
    for i in range(last, -1, -1):
        if i < last:
            g = g * derivs[i]
        g_in, grads[2 * i], grads[2 * i + 1] = _lin_back(g, acts[i], params[2 * i])
        g = g_in
    opt.step(grads)
    return loss


def gpt_by_hand(params, opt, idx, y):
    n, t = idx.shape
    d, h = GPT["dim"], GPT["heads"]
    dh = d // h
    scale = np.float32(1 / math.sqrt(dh))
    future = np.triu(np.ones((t, t), bool), 1)
    x = params[0][idx] + params[1][:t]
    caches = []
    for layer in range(GPT["layers"]):
        base = 2 + 12 * layer
        ln1w, ln1b, wqkv, bqkv, wo, bo, ln2w, ln2b, wfc, bfc, wp, bp = params[base:base + 12]
        a, ln1 = _ln(x, ln1w, ln1b)
        qkv = a @ wqkv.T + bqkv
        q, k, v = (qkv[..., i * d:(i + 1) * d].reshape(n, t, h, dh).transpose(0, 2, 1, 3)
                   for i in range(3))
        s = (q @ k.transpose(0, 1, 3, 2)) * scale
        s[..., future] = -np.inf
        s -= s.max(-1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(-1, keepdims=True)
        o = (p @ v).transpose(0, 2, 1, 3).reshape(n, t, d)
        x = x + (o @ wo.T + bo)
        c, ln2 = _ln(x, ln2w, ln2b)
        f = c @ wfc.T + bfc
        gl, dgl = _gelu(f)
        x = x + (gl @ wp.T + bp)
        caches.append((a, ln1, q, k, v, p, o, c, ln2, dgl, gl))
    lnw, lnb, wh, bh = params[-4:]
    z, lnf = _ln(x, lnw, lnb)
    logits = z @ wh.T + bh
    loss, g = _ce(logits.reshape(n * t, -1), y.reshape(-1))
    grads = [None] * len(params)
    gz, grads[-2], grads[-1] = _lin_back(g.reshape(n, t, -1), z, wh)
    gx, grads[-4], grads[-3] = _ln_back(gz, lnf)
    for layer in range(GPT["layers"] - 1, -1, -1):
        base = 2 + 12 * layer
        wqkv, wo, wfc, wp = (params[base + i] for i in (2, 4, 8, 10))
        a, ln1, q, k, v, p, o, c, ln2, dgl, gl = caches[layer]
        gm, grads[base + 10], grads[base + 11] = _lin_back(gx, gl, wp)
        gc, grads[base + 8], grads[base + 9] = _lin_back(gm * dgl, c, wfc)
        gln2, grads[base + 6], grads[base + 7] = _ln_back(gc, ln2)
        gx = gx + gln2
        go, grads[base + 4], grads[base + 5] = _lin_back(gx, o, wo)
        go = go.reshape(n, t, h, dh).transpose(0, 2, 1, 3)
        gp = go @ v.transpose(0, 1, 3, 2)
        gv = p.transpose(0, 1, 3, 2) @ go
        gs = p * (gp - (gp * p).sum(-1, keepdims=True))
        gs *= scale
        gq, gk = gs @ k, gs.transpose(0, 1, 3, 2) @ q
        gqkv = np.concatenate([z.transpose(0, 2, 1, 3).reshape(n, t, d) for z in (gq, gk, gv)],
                              -1)
        ga, grads[base + 2], grads[base + 3] = _lin_back(gqkv, a, wqkv)
        gln1, grads[base], grads[base + 1] = _ln_back(ga, ln1)
        gx = gx + gln1
    grads[0] = np.zeros_like(params[0])
    np.add.at(grads[0], idx.reshape(-1), gx.reshape(-1, d))
    grads[1] = np.zeros_like(params[1])
    grads[1][:t] = gx.sum(0)
    opt.step(grads)
    return loss


def _conv(x, w, b):
    """Valid 3x3-style convolution by im2col of the whole batch: (out, cols)."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    ho, wo = h - kh + 1, wd - kw + 1
    sn, sc, sh, sw = x.strides
    cols = np.lib.stride_tricks.as_strided(x, (n, c, kh, kw, ho, wo),
                                           (sn, sc, sh, sw, sh, sw)).reshape(n, c * kh * kw, -1)
    return (w.reshape(o, -1) @ cols).reshape(n, o, ho, wo) + b[:, None, None], cols


def _conv_back(g, x_shape, w, cols, need_dx):
    n, o, ho, wo = g.shape
    _, c, kh, kw = w.shape
    g2 = g.reshape(n, o, ho * wo)
    dw = (g2 @ cols.transpose(0, 2, 1)).sum(0).reshape(w.shape)
    dx = None
    if need_dx:
        dcols = (w.reshape(o, -1).T @ g2).reshape(n, c, kh, kw, ho, wo)
        dx = np.zeros(x_shape, g.dtype)
        for i in range(kh):
            for j in range(kw):
                dx[:, :, i:i + ho, j:j + wo] += dcols[:, :, i, j]
    return dx, dw, g.sum((0, 2, 3))


def _dropout_mask(rng, shape, p, train):
    return (rng.random(shape) >= p).astype(np.float32) / np.float32(1 - p) if train else None


def cnn_by_hand(params, opt, x, y, train=True, rng=np.random.default_rng(2)):
    w1, b1, w2, b2, w3, b3, w4, b4 = params
    n = x.shape[0]
    z1, cols1 = _conv(x, w1, b1)
    a1 = np.maximum(z1, 0)
    z2, cols2 = _conv(a1, w2, b2)
    a2 = np.maximum(z2, 0)
    c, h, w = a2.shape[1], a2.shape[2] // 2, a2.shape[3] // 2
    windows = a2.reshape(n, c, h, 2, w, 2)
    pooled = windows.max((3, 5))
    first_max = windows == pooled[:, :, :, None, :, None]
    drop1, drop2 = _dropout_mask(rng, pooled.shape, 0.25, train), None
    flat = (pooled * drop1 if train else pooled).reshape(n, -1)
    z3 = flat @ w3.T + b3
    a3 = np.maximum(z3, 0)
    if train:
        drop2 = _dropout_mask(rng, a3.shape, 0.5, train)
        a3 = a3 * drop2
    loss, g = _ce(a3 @ w4.T + b4, y)      # log_softmax + nll_loss
    grads = [None] * 8
    g3, grads[6], grads[7] = _lin_back(g, a3, w4)
    if train:
        g3 *= drop2
    g3 *= z3 > 0
    gflat, grads[4], grads[5] = _lin_back(g3, flat, w3)
    gp = gflat.reshape(pooled.shape)
    if train:
        gp *= drop1
    ga2 = (first_max * gp[:, :, :, None, :, None]).reshape(a2.shape)
    ga1, grads[2], grads[3] = _conv_back(ga2 * (z2 > 0), a1.shape, w2, cols2, True)
    _, grads[0], grads[1] = _conv_back(ga1 * (z1 > 0), x.shape, w1, cols1, False)
    opt.step(grads)
    return loss


def _hand_lstm(x, w_ih, w_hh, b_ih, b_hh):
    """One LSTM layer, zero initial state: (output, cache)."""
    steps, batch, _ = x.shape
    hid = w_hh.shape[1]
    gx = x @ w_ih.T + (b_ih + b_hh)
    h = c = np.zeros((batch, hid), x.dtype)
    hs, cs, acts = [h], [c], []
    for t in range(steps):
        a = gx[t] + h @ w_hh.T
        i, f, o = (scipy.special.expit(a[:, k * hid:(k + 1) * hid]) for k in (0, 1, 3))
        g = np.tanh(a[:, 2 * hid:3 * hid])
        c = f * c + i * g
        h = o * np.tanh(c)
        hs.append(h)
        cs.append(c)
        acts.append((i, f, g, o))
    return np.stack(hs[1:]), (x, w_ih, w_hh, hs, cs, acts)


def _hand_lstm_back(g_out, cache):
    x, w_ih, w_hh, hs, cs, acts = cache
    steps, batch, hid = g_out.shape
    dh = dc = np.zeros((batch, hid), g_out.dtype)
    d_gates = np.empty((steps, batch, 4 * hid), g_out.dtype)
    for t in range(steps - 1, -1, -1):
        i, f, g, o = acts[t]
        tc = np.tanh(cs[t + 1])
        dh = dh + g_out[t]
        dc = dc + dh * o * (1 - tc * tc)
        d_gates[t] = np.concatenate([dc * g * i * (1 - i), dc * cs[t] * f * (1 - f),
                                     dc * i * (1 - g * g), dh * tc * o * (1 - o)], 1)
        dh = d_gates[t] @ w_hh
        dc = dc * f
    d2 = d_gates.reshape(steps * batch, -1)
    db = d2.sum(0)
    return ((d2 @ w_ih).reshape(x.shape), [d2.T @ x.reshape(steps * batch, -1),
            d2.T @ np.stack(hs[:-1]).reshape(steps * batch, hid), db, db])


def _hand_gru(x, w_ih, w_hh, b_ih, b_hh):
    """One GRU layer, zero initial state: (output, cache)."""
    steps, batch, _ = x.shape
    hid = w_hh.shape[1]
    gx = x @ w_ih.T + b_ih
    h = np.zeros((batch, hid), x.dtype)
    hs, acts = [h], []
    for t in range(steps):
        gh = h @ w_hh.T + b_hh
        r = scipy.special.expit(gx[t, :, :hid] + gh[:, :hid])
        z = scipy.special.expit(gx[t, :, hid:2 * hid] + gh[:, hid:2 * hid])
        hn = gh[:, 2 * hid:]
        n = np.tanh(gx[t, :, 2 * hid:] + r * hn)
        h = n + z * (h - n)
        hs.append(h)
        acts.append((r, z, n, hn))
    return np.stack(hs[1:]), (x, w_ih, w_hh, hs, acts)


def _hand_gru_back(g_out, cache):
    x, w_ih, w_hh, hs, acts = cache
    steps, batch, hid = g_out.shape
    dh = np.zeros((batch, hid), g_out.dtype)
    d_x = np.empty((steps, batch, 3 * hid), g_out.dtype)
    d_h = np.empty_like(d_x)
    for t in range(steps - 1, -1, -1):
        r, z, n, hn = acts[t]
        dh = dh + g_out[t]
        dn = dh * (1 - z) * (1 - n * n)
        dz = dh * (hs[t] - n) * z * (1 - z)
        dr = dn * hn * r * (1 - r)
        d_x[t] = np.concatenate([dr, dz, dn], 1)
        d_h[t] = np.concatenate([dr, dz, dn * r], 1)
        dh = d_h[t] @ w_hh + dh * z
    dx2, dh2 = d_x.reshape(steps * batch, -1), d_h.reshape(steps * batch, -1)
    return ((dx2 @ w_ih).reshape(x.shape), [dx2.T @ x.reshape(steps * batch, -1),
            dh2.T @ np.stack(hs[:-1]).reshape(steps * batch, hid), dx2.sum(0), dh2.sum(0)])


def rnn_by_hand(workload, params, opt, idx, y):
    layer, back = (_hand_gru, _hand_gru_back) if workload == "gru" else (_hand_lstm,
                                                                         _hand_lstm_back)
    x = params[0][idx]
    caches = []
    for k in range(RNN_SIZES[workload]["layers"]):
        x, cache = layer(x, *params[1 + 4 * k:5 + 4 * k])
        caches.append(cache)
    steps, batch, hid = x.shape
    loss, g = _ce(x.reshape(steps * batch, hid) @ params[-2].T + params[-1], y.reshape(-1))
    grads = [None] * len(params)
    gx, grads[-2], grads[-1] = _lin_back(g, x.reshape(steps * batch, hid), params[-2])
    gx = gx.reshape(steps, batch, hid)
    for k in range(len(caches) - 1, -1, -1):
        gx, grads[1 + 4 * k:5 + 4 * k] = back(gx, caches[k])
    grads[0] = np.zeros_like(params[0])
    np.add.at(grads[0], idx.reshape(-1), gx.reshape(-1, gx.shape[-1]))
    opt.step(grads)
    return loss


# --------------------------------------------------------------------------- the three steps


def _workload(workload: str):
    """(weights, (x, y), forward, by_hand) of a workload; ``by_hand(params, opt, x, y, train)``
    is the same step written in NumPy."""
    if workload == "mlp":
        return ([a for wb in mlp_weights() for a in wb], mlp_data(), mlp_forward,
                lambda p, o, x, y, train: mlp_by_hand(p, o, x, y))
    if workload == "transformer":
        return (gpt_weights(), gpt_data(), gpt_forward,
                lambda p, o, x, y, train: gpt_by_hand(p, o, x, y))
    if workload == "cnn":
        return cnn_weights(), cnn_data(), cnn_forward, cnn_by_hand
    return (rnn_weights(workload), rnn_data(workload), rnn_forward,
            lambda p, o, x, y, train: rnn_by_hand(workload, p, o, x, y))


def _rnn_module(nn, workload: str, params):
    """The workload's LSTM/GRU module of library ``nn`` (gradtrace's or torch's) holding
    ``params`` as its parameters, in PyTorch's order (``weight_ih_l0``, ...)."""
    z = RNN_SIZES[workload]
    cls = nn.GRU if workload == "gru" else nn.LSTM
    rnn = cls(z["emsize"], z["nhid"], z["layers"])
    names = [n for n, _ in rnn.named_parameters()]
    for name, p in zip(names, params):
        setattr(rnn, name, p)
    return rnn


def make_steps(workload: str, dev, with_torch: bool) -> dict:
    """``{"numpy": step, "gradtrace": step, "torch": step}``; each ``step(train=True)`` returns
    its loss (``train=False``: dropout off, for comparing first losses)."""
    weights, (x, y), forward, by_hand = _workload(workload)
    steps = {}
    if dev.type == "cpu":
        hand_params = [w.copy() for w in weights]
        hand_opt = HandAdam(hand_params)
        steps["numpy"] = lambda train=True: by_hand(hand_params, hand_opt, x, y, train)

    def model(lib_F, nn, params):
        if workload in RNN_SIZES:
            rnn = _rnn_module(nn, workload, params[1:-2])
            return lambda xs, ys, train: forward(lib_F, params, xs, ys, rnn)
        if workload == "cnn":
            return lambda xs, ys, train: forward(lib_F, params, xs, ys, train)
        return lambda xs, ys, train: forward(lib_F, params, xs, ys)

    params = [autograd.nn.Parameter(autograd.tensor(w, device=dev)) for w in weights]
    opt = optim.Adam(params, lr=LR)
    xt, yt = autograd.tensor(x, device=dev), autograd.tensor(y, device=dev)
    gt_forward = model(gF, autograd.nn, params)

    def gradtrace_step(train=True):
        opt.zero_grad(set_to_none=True)
        loss = gt_forward(xt, yt, train)
        loss.backward()
        opt.step()
        return loss.item()

    steps["gradtrace"] = gradtrace_step
    if with_torch and (dev.type == "cpu" or torch.cuda.is_available()):
        tdev = "cuda" if dev.type == "cuda" else "cpu"
        tparams = [torch.nn.Parameter(torch.tensor(w, device=tdev)) for w in weights]
        topt = torch.optim.Adam(tparams, lr=LR)
        tx, ty = torch.from_numpy(x).to(tdev), torch.from_numpy(y).to(tdev)
        t_forward = model(tF, torch.nn, tparams)

        def torch_step(train=True):
            topt.zero_grad(set_to_none=True)
            loss = t_forward(tx, ty, train)
            loss.backward()
            topt.step()
            return loss.item()

        steps["torch"] = torch_step
    return steps


def _medians(steps: dict, dev, warmup: int, repeats: int, clock) -> dict:
    """Median seconds per step of each implementation, taking turns in every round."""
    for _ in range(warmup):
        for step in steps.values():
            step()
    times = {k: [] for k in steps}
    for _ in range(repeats):
        for k, step in steps.items():
            t0 = clock()
            step()
            if dev.type == "cuda":
                backend.synchronize(dev)
            times[k].append(clock() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def bench(workload: str, device: str, warmup: int, repeats: int, with_torch: bool,
          clock: str = "wall") -> dict:
    dev = backend.device(device)
    steps = make_steps(workload, dev, with_torch)
    # Same weights: same first loss (dropout off, its masks are random in each).
    first, errors = {}, {}
    for k, step in list(steps.items()):
        try:
            first[k] = float(step(train=False))
        except Exception as exc:  # noqa: BLE001 - a reference that cannot run this workload here
            if k == "gradtrace":
                raise
            errors[k] = f"{type(exc).__name__}: {exc}"
            del steps[k]
    timer = time.thread_time if clock == "thread" and dev.type == "cpu" else time.perf_counter
    med = _medians(steps, dev, warmup, repeats, timer)
    row = {"workload": workload, "device": str(dev), "first_loss": first, "reference_errors": errors,
           **{f"{k}_ms": v * 1e3 for k, v in med.items()}}
    for ref in ("torch", "numpy"):
        if ref in med:
            row[f"gradtrace/{ref}"] = med["gradtrace"] / med[ref]
    return row


@contextlib.contextmanager
def _blas_threads(n: int):
    """NumPy's BLAS limited to ``n`` threads by threadpoolctl when it is installed (the
    environment variables set at the top of this script do it otherwise)."""
    try:
        from threadpoolctl import threadpool_limits  # noqa: PLC0415 - optional
    except ImportError:
        yield "env"
        return
    with threadpool_limits(limits=n):
        yield "threadpoolctl"


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--blas-coretype", default=None,
                    help="OPENBLAS_CORETYPE for NumPy's BLAS, set before NumPy loads "
                         "(e.g. SkylakeX); default: OpenBLAS's detection")
    ap.add_argument("--threads", type=int, default=1,
                    help="threads for NumPy's BLAS and PyTorch (the issue measures 1)")
    ap.add_argument("--clock", choices=("wall", "thread"), default="wall",
                    help="wall clock, or this thread's CPU time (steadier on a shared machine)")
    ap.add_argument("--device", default="cpu", help="cpu, cuda, or all (cuda when usable)")
    ap.add_argument("--only", choices=WORKLOADS, action="append",
                    help="run this workload (repeatable; default: all)")
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results",
                                                   "train_step.json"))
    args = ap.parse_args(argv)
    devices = ["cpu"] + (["cuda"] if backend.cuda_is_available() else [])
    if args.device != "all":
        devices = [args.device]
    workloads = args.only or list(WORKLOADS)
    if torch is not None:
        torch.set_num_threads(args.threads)
    with _blas_threads(args.threads) as how:
        rows = [bench(w, d, args.warmup, args.repeats, torch is not None, args.clock)
                for d in devices for w in workloads]
    print(f"one training step (forward + backward + Adam), median of {args.repeats} after "
          f"{args.warmup} warm-up steps, {args.clock} clock, {args.threads} thread(s) (BLAS "
          f"limited by {how})"
          + ("" if torch is not None else "; torch not installed: no PyTorch column"))
    print(f"{'workload':<13}{'device':<8}{'gradtrace ms':>14}{'numpy ms':>10}{'torch ms':>10}"
          f"{'gt/torch':>10}{'gt/numpy':>10}")
    for r in rows:
        cells = [f"{r.get(k):.2f}" if k in r else "-" for k in ("numpy_ms", "torch_ms")]
        ratios = [f"{r[k]:.2f}x" if k in r else "-" for k in ("gradtrace/torch", "gradtrace/numpy")]
        print(f"{r['workload']:<13}{r['device']:<8}{r['gradtrace_ms']:>14.2f}{cells[0]:>10}"
              f"{cells[1]:>10}{ratios[0]:>10}{ratios[1]:>10}")
    for r in rows:
        for ref, why in r["reference_errors"].items():
            print(f"  {r['workload']} on {r['device']}: no {ref} column ({why})")
    result = {"repeats": args.repeats, "warmup": args.warmup, "threads": args.threads,
              "clock": args.clock,
              "blas_limit": how, "numpy": np.__version__,
              "torch": torch.__version__ if torch is not None else None,
              "cpu_count": os.cpu_count(),
              "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
              "blas_threads_env": {k: os.environ.get(k) for k in
                                   ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")},
              "rows": rows}
    return write_json(args.json, result)


if __name__ == "__main__":
    main()
