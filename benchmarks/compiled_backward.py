"""Steady-state backward time, eager vs compiled autograd (and CUDA-graph replay on a GPU).

Workloads: (a) the 2,000-iteration chain ``y = y * 1.0001 + 0.0001`` on 16 float32 elements
(as in engine_overhead.py), (b) a small MLP and (c) a small GPT (``autograd.models`` when it
has them, else the same graphs from ``autograd.nn``), and (d, e) the MLP and the tiny GPT of
train_step.py with its shapes. Each forward builds a new graph; the forward and the backward
are timed apart. Modes: "compiled" runs the backward under ``enable()`` (the new graph is
walked to key it), "recorded" the forward too (the key is built as the forward makes the
nodes, :class:`gradtrace.autograd.compiled_autograd.Recording`; "fwd tax" is what that costs
the forward). "capture" is the first compiled backward of the structure (walk, passes, code
generation, compile, run). "key walk"/"key rec" is what a cache hit costs before any step
runs, by each path, as a share of an eager backward. Every time is the minimum over runs
where the modes take turns (a shared machine); the JSON has the medians too. On a GPU each
timed phase ends with a device synchronize, and "cuda graph" replays the program as one
CUDA graph.

Targets: compiled >= 2x faster than eager on the chain (CPU) with the key check <= 10% of an
eager backward, >= 1.3x on the MLP and the tiny GPT; on a GPU, CUDA-graph replay of the tiny
GPT's backward >= 3x faster than eager.

Usage: python benchmarks/compiled_backward.py [--repeats R] [--min-time S] [--device cpu|cuda|all]
       [--json PATH]
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time

# One BLAS thread: this measures engine overhead, and a shared machine makes threaded BLAS
# timings swing by 10x.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gradtrace import autograd  # noqa: E402
from gradtrace.autograd import backend, compiled_autograd, nn  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _results import write_json  # noqa: E402


def chain_workload(device):
    x = autograd.full((16,), 0.5, requires_grad=True, device=device)

    def forward():
        y = x
        for _ in range(2000):
            y = y * 1.0001 + 0.0001
        return y.sum()

    return forward, [x]


def mlp_workload(device):
    models = _models()
    if models is not None and hasattr(models, "mlp"):
        return models.mlp(device=device)
    autograd.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256, device=device), nn.ReLU(),
                          nn.Linear(256, 256, device=device), nn.ReLU(),
                          nn.Linear(256, 10, device=device))
    x = autograd.randn(32, 64, device=device)
    target = autograd.tensor(np.arange(32) % 10, device=device)

    def forward():
        return nn.functional.cross_entropy(model(x), target)

    return forward, list(model.parameters())


class _TinyGPT(nn.Module):
    def __init__(self, vocab=64, dim=32, heads=2, layers=2, ctx=16, device=None):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim, device=device)
        self.pos = nn.Embedding(ctx, dim, device=device)
        self.blocks = nn.ModuleList([nn.TransformerBlock(dim, heads, device=device)
                                     for _ in range(layers)])
        self.ln = nn.LayerNorm(dim, device=device)
        self.head = nn.Linear(dim, vocab, device=device)

    def forward(self, idx, pos):
        x = self.tok(idx) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def gpt_workload(device):
    models = _models()
    if models is not None and hasattr(models, "tiny_gpt"):
        return models.tiny_gpt(device=device)
    autograd.manual_seed(0)
    model = _TinyGPT(device=device)
    rng = np.random.default_rng(0)
    idx = autograd.tensor(rng.integers(0, 64, (4, 16)), device=device)
    pos = autograd.tensor(np.arange(16), device=device)
    target = autograd.tensor(rng.integers(0, 64, (4 * 16,)), device=device)

    def forward():
        logits = model(idx, pos)
        return nn.functional.cross_entropy(logits.reshape(4 * 16, 64), target)

    return forward, list(model.parameters())


def _models():
    try:
        from gradtrace.autograd import models  # noqa: PLC0415 - another engineer's package, optional
    except ImportError:
        return None
    return models


def _timed_step(forward, device, mode):
    """(forward seconds, backward seconds) of one step. "compiled" runs only the backward
    under enable() (the graph is walked to key it); "recorded" runs the forward under it too
    (the key is built as the forward makes the nodes)."""
    sync = backend.synchronize if device == "cuda" else (lambda *a: None)
    gc.collect()       # the same garbage-collector state for every mode, none while timed
    gc.disable()
    try:
        if mode == "recorded":
            with compiled_autograd.enable():
                t0 = time.perf_counter()
                loss = forward()
                sync()
                t1 = time.perf_counter()
                loss.backward()
                sync()
                t2 = time.perf_counter()
            return t1 - t0, t2 - t1
        t0 = time.perf_counter()
        loss = forward()
        sync()
        t1 = time.perf_counter()
        if mode == "eager":
            loss.backward()
        else:
            with compiled_autograd.enable(cuda_graphs=(mode == "cuda graph")):
                loss.backward()
        sync()
        return t1 - t0, time.perf_counter() - t1
    finally:
        gc.enable()


def _key_check(forward, recorded):
    """What a cache hit costs before any step runs. Walked: one walk of the new graph
    building its key, and the lookup. Recorded: completing the key the forward recorded
    (what can change after a node is made), and the lookup."""
    gc.collect()
    gc.disable()
    try:
        if not recorded:
            loss = forward()
            edges, _ = autograd.engine.make_root_edges([loss], None, False)
            t0 = time.perf_counter()
            nodes, key = compiled_autograd.build_key(edges)
            prog, _ = compiled_autograd.lookup(nodes, key)
            t = time.perf_counter() - t0
        else:
            with compiled_autograd.enable():
                loss = forward()
                edges, _ = autograd.engine.make_root_edges([loss], None, False)
                rec = autograd.grad_mode.STATE.ops.ca_recording
                t0 = time.perf_counter()
                done = rec.finish(edges)
                prog, _ = compiled_autograd.lookup_recorded(*done) if done else (None, None)
                t = time.perf_counter() - t0
                loss.backward()     # ends this recording
    finally:
        gc.enable()
    assert prog is not None, "the key of a graph seen before must hit the cache"
    return t


MODES = ("eager", "compiled", "recorded")


def measure(workload, device, repeats, min_time=0.0):
    """Per mode: forward and backward times (min and median); the modes and the two key
    checks take turns, so load drift hits all alike. At least ``repeats`` rounds, and more
    until the rounds took ``min_time`` seconds: a minimum over 15 runs of a 0.3 ms backward
    on a shared machine swings by 10%, over a hundred or more it settles (the small MLP gets
    about 130 rounds in the default 4 s; the chain's 15 take longer than that)."""
    forward, params = workload(device)
    modes = list(MODES) + (["cuda graph"] if device == "cuda" else [])
    out = {m: {"times": [], "fwd_times": []} for m in modes}
    keys = {"walked": [], "recorded": []}
    compiled_autograd.reset()
    for mode in modes:
        for p in params:
            p.grad = None
        before = compiled_autograd.stats()["captures"]
        first = _timed_step(forward, device, mode)[1]
        if mode in ("cuda graph", "recorded"):   # a CUDA graph / a recorded key: second run
            first += _timed_step(forward, device, mode)[1]
        out[mode]["first_s"] = first
        if mode == "compiled":
            assert compiled_autograd.stats()["captures"] == before + 1
    start, rounds = time.perf_counter(), 0
    while rounds < repeats or time.perf_counter() - start < min_time:
        rounds += 1
        for mode in modes:
            f, b = _timed_step(forward, device, mode)
            out[mode]["fwd_times"].append(f)
            out[mode]["times"].append(b)
        keys["walked"].append(_key_check(forward, False))
        keys["recorded"].append(_key_check(forward, True))
    for mode in modes:
        out[mode]["median_s"] = statistics.median(out[mode]["times"])
        out[mode]["min_s"] = min(out[mode]["times"])
        out[mode]["fwd_min_s"] = min(out[mode]["fwd_times"])
    out["rounds"] = rounds
    out["stats"] = compiled_autograd.stats()
    assert out["stats"]["recorded_hits"] >= rounds, "recorded mode must reuse its key"
    out["key_s"] = {k: min(v) for k, v in keys.items()}
    return out


def _train_step_workload(name, device):
    """train_step.py's model and data (its shapes), one forward function, no optimizer."""
    import train_step as ts  # noqa: PLC0415 - a sibling script; it imports torch when present

    if name == "mlp":
        weights, (x, y), fwd = [a for wb in ts.mlp_weights() for a in wb], ts.mlp_data(), \
            ts.mlp_forward
    else:
        weights, (x, y), fwd = ts.gpt_weights(), ts.gpt_data(), ts.gpt_forward
    params = [nn.Parameter(autograd.tensor(w, device=device)) for w in weights]
    xt, yt = autograd.tensor(x, device=device), autograd.tensor(y, device=device)

    def forward():
        return fwd(nn.functional, params, xt, yt)

    return forward, params


WORKLOADS = {"chain (2000 iters)": chain_workload, "mlp (small)": mlp_workload,
             "tiny gpt (small)": gpt_workload,
             "mlp (train_step)": lambda dev: _train_step_workload("mlp", dev),
             "gpt (train_step)": lambda dev: _train_step_workload("gpt", dev)}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15, help="at least this many rounds")
    ap.add_argument("--min-time", type=float, default=4.0,
                    help="and more rounds until a workload's took this many seconds")
    ap.add_argument("--device", default="all", choices=["cpu", "cuda", "all"])
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results",
                                                   "compiled_backward.json"))
    args = ap.parse_args(argv)
    devices = ["cpu"] if args.device == "cpu" else ["cuda"] if args.device == "cuda" else (
        ["cpu", "cuda"] if backend.cuda_is_available() else ["cpu"])
    results = {}
    print(f"compiled autograd: steady-state backward, min of at least {args.repeats} interleaved "
          f"runs and {args.min_time:g} s per workload (rounds and medians in the JSON)")
    print("  compiled: backward under enable(), the graph walked to key it; recorded: forward "
          "too, the key built as the nodes are made")
    print(f"{'device':<7}{'workload':<20}{'eager ms':>10}{'compiled':>10}{'x':>7}"
          f"{'recorded':>10}{'x':>7}{'capture ms':>12}{'key walk':>10}{'/eager':>8}"
          f"{'key rec':>9}{'/eager':>8}{'fwd tax':>9}{'cuda graph':>12}{'x':>7}")
    for dev in devices:
        for name, wl in WORKLOADS.items():
            r = measure(wl, dev, args.repeats, args.min_time)
            results[f"{dev}/{name}"] = r
            e, c, rc = (r[m]["min_s"] for m in MODES)
            g = r.get("cuda graph", {}).get("min_s")
            gtxt = f"{g * 1e3:>12.3f}{e / g:>6.2f}x" if g else f"{'-':>12}{'-':>7}"
            kw, kr = r["key_s"]["walked"], r["key_s"]["recorded"]
            tax = r["recorded"]["fwd_min_s"] / r["eager"]["fwd_min_s"] - 1
            print(f"{dev:<7}{name:<20}{e * 1e3:>10.3f}{c * 1e3:>10.3f}{e / c:>6.2f}x"
                  f"{rc * 1e3:>10.3f}{e / rc:>6.2f}x{r['compiled']['first_s'] * 1e3:>12.1f}"
                  f"{kw * 1e3:>10.3f}{kw / e:>8.1%}{kr * 1e3:>9.3f}{kr / e:>8.1%}"
                  f"{tax:>+9.1%}{gtxt}")
            r["speedup_compiled"] = e / c
            r["speedup_recorded"] = e / rc
            r["key_share_walked"] = kw / e
            r["key_share_recorded"] = kr / e
            r["forward_tax_recorded"] = tax
            if g:
                r["speedup_cuda_graph"] = e / g
    chain = results.get("cpu/chain (2000 iters)", {})
    gpt = results.get("cuda/tiny gpt (small)", {})
    summary = {"chain_cpu_speedup": chain.get("speedup_compiled"), "chain_cpu_target": 2.0,
               "chain_cpu_speedup_recorded": chain.get("speedup_recorded"),
               "chain_cpu_key_share_recorded": chain.get("key_share_recorded"),
               "gpt_cuda_graph_speedup": gpt.get("speedup_cuda_graph"),
               "gpt_cuda_graph_target": 3.0}
    if chain:
        print(f"chain on cpu: compiled {summary['chain_cpu_speedup']:.2f}x eager, recorded "
              f"{summary['chain_cpu_speedup_recorded']:.2f}x (target 2x); recorded key check "
              f"{summary['chain_cpu_key_share_recorded']:.1%} of an eager backward (target 10%)")
    if gpt:
        st = gpt["stats"]
        # A "cuda graph" time is only a CUDA-graph time if the graph was replayed, not
        # quietly replaced by plain replay after a fallback.
        print(f"tiny gpt on cuda: CUDA-graph replay {summary['gpt_cuda_graph_speedup']:.2f}x "
              f"eager (target 3x); graph captures {st['cudagraph_captures']}, replays "
              f"{st['cudagraph_replays']}, fallbacks {st['cudagraph_fallbacks']}")
        if st.get("last_cudagraph_fallback_reason"):
            print(f"  why not a CUDA graph: {st['last_cudagraph_fallback_reason']}")
    out = {"repeats": args.repeats, "min_time_s": args.min_time, "devices": devices,
           "results": results, "summary": summary}
    return write_json(args.json, out)


if __name__ == "__main__":
    main()
