"""Optimizer trajectories run the same way on PyTorch and on gradtrace, pinned in
``data/torch_optim_reference.json`` (written by ``data/record_torch_optim.py`` with PyTorch
2.13). Each case takes the library as an argument (``lib`` is ``torch`` or
``gradtrace.autograd``) and is the PyTorch program, run unchanged on both."""
from __future__ import annotations

import numpy as np

STEPS = 6

# (case name, optimizer class name, keyword arguments): several steps of a least-squares
# problem whose gradients change sign (so Rprop's flips and the averages are exercised).
FIRST_ORDER = [
    ("adadelta", "Adadelta", dict(lr=0.5, rho=0.8, weight_decay=0.1)),
    ("adadelta_maximize", "Adadelta", dict(maximize=True)),
    ("adamax", "Adamax", dict(lr=0.05, betas=(0.8, 0.95), weight_decay=0.1)),
    ("nadam", "NAdam", dict(lr=0.05, weight_decay=0.1)),
    ("nadam_decoupled", "NAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True,
                                      momentum_decay=0.01)),
    ("radam", "RAdam", dict(lr=0.05, betas=(0.5, 0.6), weight_decay=0.1)),
    ("radam_decoupled", "RAdam", dict(lr=0.05, betas=(0.5, 0.6), weight_decay=0.1,
                                      decoupled_weight_decay=True)),
    ("radam_default", "RAdam", dict(lr=0.05)),
    ("asgd", "ASGD", dict(lr=0.05, lambd=0.01, alpha=0.5, t0=2, weight_decay=0.1)),
    ("rprop", "Rprop", dict(lr=0.05, etas=(0.4, 1.5), step_sizes=(1e-3, 0.2))),
    ("rprop_maximize", "Rprop", dict(lr=0.05, maximize=True)),
]


def _least_squares(lib):
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.standard_normal((8, 3)))
    y = lib.tensor(rng.standard_normal((8, 2)))
    w = lib.nn.Parameter(lib.tensor(rng.standard_normal((3, 2))))
    b = lib.nn.Parameter(lib.tensor(rng.standard_normal(2)))

    def loss_fn():
        return ((x @ w + b - y) ** 2).mean()
    return [w, b], loss_fn


def run_first_order(lib, cls_name, kwargs, scheduler=False):
    """The parameters (concatenated, flat) after each of ``STEPS`` steps."""
    params, loss_fn = _least_squares(lib)
    opt = getattr(lib.optim, cls_name)(params, **kwargs)
    sched = lib.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5) if scheduler else None
    trajectory = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss_fn().backward()
        opt.step()
        if sched is not None:
            sched.step()
        trajectory.append(np.concatenate([p.detach().numpy().reshape(-1) for p in params]))
    return np.stack(trajectory)


# Schedulers drive the new optimizers through group["lr"].
WITH_SCHEDULER = [("nadam_steplr", "NAdam", dict(lr=0.05)),
                  ("rprop_steplr", "Rprop", dict(lr=0.05)),
                  ("asgd_steplr", "ASGD", dict(lr=0.05, t0=1))]


def _rosenbrock(lib):
    xy = lib.nn.Parameter(lib.tensor(np.array([-1.5, 2.0])))
    return [xy], lambda: (1 - xy[0]) ** 2 + 100 * (xy[1] - xy[0] ** 2) ** 2


LBFGS_CASES = [
    ("rosenbrock_fixed", _rosenbrock, dict(lr=0.05, max_iter=5, history_size=3)),
    ("rosenbrock_strong_wolfe", _rosenbrock, dict(line_search_fn="strong_wolfe", max_iter=6,
                                                  history_size=4)),
    ("least_squares_fixed", _least_squares, dict(lr=0.5)),
    ("least_squares_strong_wolfe", _least_squares, dict(line_search_fn="strong_wolfe",
                                                        max_iter=4)),
]
LBFGS_STEPS = 4


def run_lbfgs(lib, problem, kwargs):
    """Per ``step(closure)``: the loss it returns, the parameters after it, and the closure
    calls so far."""
    params, loss_fn = problem(lib)
    opt = lib.optim.LBFGS(params, **kwargs)
    calls = [0]

    def closure():
        calls[0] += 1
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss

    out = []
    for _ in range(LBFGS_STEPS):
        loss = opt.step(closure)
        out.append({"loss": loss.item(),
                    "params": np.concatenate([p.detach().numpy().reshape(-1)
                                              for p in params]).tolist(),
                    "calls": calls[0]})
    return out
