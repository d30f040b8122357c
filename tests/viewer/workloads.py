"""Profiles for the viewer tests, made with the real engine and profiler (and synthetic ones
for size). Each helper writes a ``.gtprof`` file and returns its path."""
from __future__ import annotations

import numpy as np

import gradtrace.autograd as ag
from gradtrace import profiler
from gradtrace.profiler import synthetic

XSS = "<img src=x onerror=alert(1)>"


def _profile_steps(path, train_step, steps: int = 3):
    """Profile ``steps`` training steps after one warm-up step, with ProfilerStep ranges."""
    sched = profiler.schedule(wait=0, warmup=1, active=steps)
    with profiler.profile(schedule=sched, record_shapes=True, profile_memory=True, with_stack=True,
                          with_flops=True, with_modules=True) as prof:
        for _ in range(steps + 1):
            train_step()
            prof.step()
    prof.save(path)
    return path


def workload_profile(path, name: str = "mlp", steps: int = 3):
    """A reference workload (autograd.models) when available, else a hand-built MLP."""
    try:
        from gradtrace.autograd.models import make_workload
    except ImportError:
        return mlp_profile(path, steps)
    wl = make_workload(name, device="cpu", seed=0)
    return _profile_steps(path, wl.train_step, steps)


def mlp_profile(path, steps: int = 3):
    """An MLP built from autograd ops, with module, forward, backward and optimizer scopes."""
    rf = profiler.record_function
    ag.manual_seed(0)
    rng = np.random.default_rng(0)
    x = ag.tensor(rng.standard_normal((32, 16)), dtype="float32")
    y = ag.tensor(rng.standard_normal((32, 1)), dtype="float32")
    w1 = (ag.randn(16, 32) * 0.2).detach().requires_grad_()
    b1 = ag.zeros(32).requires_grad_()
    w2 = (ag.randn(32, 1) * 0.2).detach().requires_grad_()
    params = (w1, b1, w2)

    def step():
        with rf("forward"):
            with rf("nn.Module: Linear"):
                h = (x @ w1 + b1).tanh()
            with rf("nn.Module: Head"):
                pred = (h * 2.0) @ w2
            loss = ((pred - y) ** 2).mean()
        with rf("backward"):
            loss.backward()
        with rf("Optimizer.step#SGD.step"), ag.no_grad():
            for p in params:
                p.sub_(p.grad * 0.05)
                p.grad = None

    return _profile_steps(path, step, steps)


def xss_profile(path):
    """Markup in every name a page shows: a forward op, its backward node, a user scope, a
    module, a call site, a device. Made with profiler.synthetic (the engine's op names are
    fixed, and a custom Function's class name reaches the profile the same way)."""
    from gradtrace.profiler import Scope

    stack = [f"{XSS}.py(1): {XSS}"]
    events, memory, t = [], [], 0
    for step in range(3):
        base = step * 10_000
        events += [
            {"name": f"ProfilerStep#{step}", "start": base, "end": base + 9_000, "scope": Scope.USER_SCOPE},
            {"name": "nn.Module: " + XSS, "start": base + 100, "end": base + 3_000, "scope": Scope.USER_SCOPE},
            {"name": XSS, "start": base + 200, "end": base + 2_000, "sequence_nr": 2 * step,
             "shapes": [[4, 4]], "stack": stack},
            {"name": "mul", "start": base + 2_100, "end": base + 2_900, "sequence_nr": 2 * step + 1,
             "shapes": [[4, 4], []], "stack": stack},
            {"name": "MulBackward0", "start": base + 4_000, "end": base + 5_000, "scope": Scope.BACKWARD_FUNCTION,
             "sequence_nr": 2 * step + 1, "fwd_thread_id": 1},
            {"name": XSS + "Backward", "start": base + 5_100, "end": base + 7_000,
             "scope": Scope.BACKWARD_FUNCTION, "sequence_nr": 2 * step, "fwd_thread_id": 1},
            {"name": XSS, "start": base + 7_100, "end": base + 8_000, "scope": Scope.USER_SCOPE},
        ]
        memory += [{"time": base + 300, "bytes": 64}, {"time": base + 6_000, "bytes": -64}]
    synthetic.from_events(events, memory, {"record_shapes": True, "profile_memory": True,
                                           "with_stack": True}).save(path)
    return path


def synthetic_profile(path, n_events: int, **kwargs):
    synthetic.training_profile(n_events, **kwargs).save(path)
    return path


def many_steps_profile(path, steps: int = 100, sleep_s: float = 0.001):
    """``steps`` tiny training steps, each with a ``sleep_s`` "data loading" pause outside
    every op, profiled without a schedule: every ``prof.step()`` marks a ProfilerStep#N."""
    import time

    w = ag.randn(8, 8).requires_grad_()
    x = ag.randn(4, 8)
    with profiler.profile() as prof:
        for _ in range(steps):
            time.sleep(sleep_s)
            with profiler.record_function("forward"):
                loss = (x @ w).tanh().sum()
            with profiler.record_function("backward"):
                loss.backward()
            with profiler.record_function("Optimizer.step#SGD.step"), ag.no_grad():
                w.sub_(w.grad * 0.01)
                w.grad = None
            prof.step()
    prof.save(path)
    return path


def demo_profile(path, workload: str = "gpt", steps: int = 3):
    """``gradtrace demo WORKLOAD --steps N`` on the CPU, as a user runs it."""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "gradtrace.cli", "demo", workload, "--steps", str(steps),
                          "--device", "cpu", "--out", str(path)], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    return path
