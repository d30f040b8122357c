"""gradtrace in 30 lines: build a model from autograd ops, train it, and see where the time goes.

Run: python examples/quickstart.py
"""
import numpy as np

import gradtrace.autograd as ag
from gradtrace.autograd import record_function as rf

ag.manual_seed(0)
rng = np.random.default_rng(0)
x = ag.tensor(rng.standard_normal((256, 32)), dtype="float32")
true_w = rng.standard_normal((32, 1))
y = ag.tensor(x.numpy() @ true_w + 0.1 * rng.standard_normal((256, 1)), dtype="float32")

w1 = (ag.randn(32, 64) * 0.2).detach().requires_grad_()
w2 = (ag.randn(64, 1) * 0.2).detach().requires_grad_()

# A RecordFunction callback: count forward ops and backward nodes, paired by sequence number.
calls = {}
def on_end(rec, ctx):
    calls[rec.name] = calls.get(rec.name, 0) + 1

with rf.add_global_callback(None, on_end):
    for step in range(200):
        pred = (x @ w1).tanh() @ w2
        loss = ((pred - y) ** 2).mean()
        w1.grad = w2.grad = None
        loss.backward()
        with ag.no_grad():
            w1.sub_(w1.grad * 0.05)
            w2.sub_(w2.grad * 0.05)
        if step % 50 == 0 or step == 199:
            print(f"step {step:3d}  loss {loss.item():.4f}")

print("\nforward ops and backward nodes seen by RecordFunction:")
for name, n in sorted(calls.items(), key=lambda kv: -kv[1]):
    print(f"  {name:<16} {n}")
