"""Record real torch.profiler CUDA traces on a lent GPU, then read each back with gradtrace.

Run by ``benchmarks/gpu_check.sh`` (it needs PyTorch with CUDA; without it, it says so and
exits 0, the dry run). Three traces of a small training step, written to ``--out``:

* ``torch_plain_cuda.json.gz``: CPU + CUDA activities, two ProfilerSteps;
* ``torch_cuda_graph.json.gz``: the step's forward+backward captured once in a
  ``torch.cuda.CUDAGraph`` and replayed (one ``cudaGraphLaunch`` starting many kernels);
* ``torch_stack_memory_cuda.json.gz``: ``record_shapes``, ``with_stack``,
  ``profile_memory``, ``with_modules``.

Each is then imported by gradtrace and checked: Σ self CUDA equals the trace's kernel +
memcpy + memset time, and the GPU summary is printed. Keep the traces as test fixtures
(``tests/profiler/data/``) when they are small.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _model(torch):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda()


def _write(prof, path: str) -> None:
    tmp = path + ".tmp.json"
    prof.export_chrome_trace(tmp)
    with open(tmp, "rb") as src, gzip.open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    os.remove(tmp)


def record_plain(torch, path: str, **options) -> None:
    from torch.profiler import ProfilerActivity, profile, schedule

    model = _model(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 256, device="cuda"), torch.randint(0, 10, (64,), device="cuda")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=0, warmup=1, active=2, repeat=1),
                 on_trace_ready=lambda p: _write(p, path), **options) as prof:
        for _ in range(3):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            prof.step()


def record_graph(torch, path: str) -> None:
    """Forward + backward captured in a CUDA graph (PyTorch's documented whole-network
    capture recipe: warm up on a side stream, capture, replay with copied inputs)."""
    from torch.profiler import ProfilerActivity, profile

    model = _model(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    static_x = torch.randn(64, 256, device="cuda")
    static_y = torch.randint(0, 10, (64,), device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(static_x), static_y).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        loss = torch.nn.functional.cross_entropy(model(static_x), static_y)
        loss.backward()
        opt.step()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(2):
            static_x.copy_(torch.randn(64, 256, device="cuda"))
            graph.replay()
            prof.step()
        torch.cuda.synchronize()
    _write(prof, path)


def check(path: str) -> dict:
    """Import the trace with gradtrace: the device-time invariant and the GPU summary."""
    from gradtrace.profiler import load

    data = load(path)
    ev, g = data.event_columns, data.gpu_columns
    device_ns = int((ev["device_end_ns"][g["event"]] - ev["device_start_ns"][g["event"]]).sum())
    self_cuda = int(data.analysis.self_cuda_ns.sum())
    out = {"file": os.path.basename(path), "events": data.n_events, "gpu_activities": int(len(g["event"])),
           "device_ms": device_ns / 1e6, "self_cuda_ms": self_cuda / 1e6, "exact": device_ns == self_cuda}
    if hasattr(data, "gpu_summary"):
        out["gpu_summary"] = data.gpu_summary()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=".")
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("skipped: PyTorch is not installed")
        return 0
    if not torch.cuda.is_available():
        print("skipped: PyTorch finds no CUDA device")
        return 0
    os.makedirs(args.out, exist_ok=True)
    paths = {
        "torch_plain_cuda.json.gz": lambda p: record_plain(torch, p),
        "torch_cuda_graph.json.gz": lambda p: record_graph(torch, p),
        "torch_stack_memory_cuda.json.gz": lambda p: record_plain(
            torch, p, record_shapes=True, with_stack=True, profile_memory=True, with_modules=True),
    }
    results, ok = [], True
    for name, record in paths.items():
        path = os.path.join(args.out, name)
        try:
            record(path)
            results.append(check(path))
            ok &= results[-1]["exact"]
        except Exception as exc:  # one failing recipe must not cost the others
            results.append({"file": name, "error": f"{type(exc).__name__}: {exc}"})
            ok = False
        print(json.dumps(results[-1], indent=1, default=str)[:4000])
    with open(os.path.join(args.out, "torch_gpu_traces.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
