"""Record the small PyTorch profiler traces used by tests/profiler/test_torch_trace.py.

Not a test: run it by hand with a Python that has torch (CPU is enough), from this folder::

    python record_torch_traces.py

It trains a tiny MLP for a few steps under ``torch.profiler.profile`` and writes
``torch_mlp_cpu.json.gz`` (record_shapes, with_stack, with_modules, profile_memory; two
ProfilerSteps) and ``torch_mlp_cpu_plain.json`` (no options: no shapes, stacks or memory).
"""
import gzip
import os
import shutil

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule


def train(prof, steps):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    for _ in range(steps):
        with record_function("forward"):
            loss = nn.functional.mse_loss(model(x), y)
        with record_function("backward"):
            opt.zero_grad()
            loss.backward()
        opt.step()
        prof.step()


def record(path, steps=3, **options):
    tmp = path + ".tmp.json"
    # Step 0 warms up, steps 1 and 2 are recorded; the trace is written when the cycle ends.
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=2, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(tmp), **options) as prof:
        train(prof, steps)
    if path.endswith(".gz"):
        with open(tmp, "rb") as src, gzip.open(path, "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.remove(tmp)
    else:
        os.replace(tmp, path)


if __name__ == "__main__":
    record("torch_mlp_cpu.json.gz", record_shapes=True, with_stack=True, with_modules=True,
           profile_memory=True)
    record("torch_mlp_cpu_plain.json")
