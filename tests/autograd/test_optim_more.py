"""Adadelta, Adamax, NAdam, RAdam, ASGD, Rprop and LBFGS against PyTorch 2.13's trajectories
(pinned in ``data/torch_optim_reference.json``; ``data/record_torch_optim.py`` regenerates
it), their state dicts, schedulers and PyTorch's errors."""
import json
import os

import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd import optim

from . import torch_optim_cases as cases

with open(os.path.join(os.path.dirname(__file__), "data", "torch_optim_reference.json")) as _f:
    REFERENCE = json.load(_f)


@pytest.mark.parametrize("name,cls,kw", cases.FIRST_ORDER, ids=[c[0] for c in cases.FIRST_ORDER])
def test_first_order_optimizers_follow_pytorchs_trajectory(name, cls, kw):
    got = cases.run_first_order(ag, cls, kw)
    np.testing.assert_allclose(got, REFERENCE["first_order"][name], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name,cls,kw", cases.WITH_SCHEDULER,
                         ids=[c[0] for c in cases.WITH_SCHEDULER])
def test_schedulers_drive_the_new_optimizers_as_pytorchs(name, cls, kw):
    got = cases.run_first_order(ag, cls, kw, scheduler=True)
    np.testing.assert_allclose(got, REFERENCE["first_order"][name], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name,problem,kw", cases.LBFGS_CASES,
                         ids=[c[0] for c in cases.LBFGS_CASES])
def test_lbfgs_follows_pytorchs_iterates(name, problem, kw):
    got = cases.run_lbfgs(ag, problem, kw)
    want = REFERENCE["lbfgs"][name]
    for step, (g, w) in enumerate(zip(got, want)):
        assert g["calls"] == w["calls"], f"step {step}: closure calls"
        np.testing.assert_allclose(g["loss"], w["loss"], rtol=1e-10, err_msg=f"step {step}")
        # (atol: the least-squares runs converge within 20 iterations, where rounding
        # differences of the last bits move the iterates by ~1e-10)
        np.testing.assert_allclose(g["params"], w["params"], rtol=1e-9, atol=1e-9,
                                   err_msg=f"step {step}")


RESUMABLE = [(optim.Adadelta, dict(weight_decay=0.1)), (optim.Adamax, dict(lr=0.05)),
             (optim.NAdam, dict(lr=0.05, weight_decay=0.1)),
             (optim.RAdam, dict(lr=0.05, betas=(0.5, 0.6))),
             (optim.ASGD, dict(lr=0.05, t0=1)), (optim.Rprop, dict(lr=0.05)),
             (optim.LBFGS, dict(lr=0.5, max_iter=3, history_size=2))]


@pytest.mark.parametrize("cls,kw", RESUMABLE, ids=[c[0].__name__ for c in RESUMABLE])
def test_state_dict_round_trip_continues_identically(cls, kw):
    def make():
        params, loss_fn = cases._least_squares(ag)
        return params, loss_fn, cls(params, **kw)

    def run(params, loss_fn, opt, steps):
        def closure():
            opt.zero_grad()
            loss = loss_fn()
            loss.backward()
            return loss
        for _ in range(steps):
            if cls is optim.LBFGS:
                opt.step(closure)
            else:
                closure()
                opt.step()

    p1, f1, o1 = make()
    run(p1, f1, o1, 3)
    p2, f2, o2 = make()
    with ag.no_grad():
        for a, b in zip(p2, p1):
            a.copy_(b)
    o2.load_state_dict(o1.state_dict())
    run(p1, f1, o1, 3)
    run(p2, f2, o2, 3)
    for a, b in zip(p1, p2):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


@pytest.mark.parametrize("cls,kw,message", [
    (optim.Adadelta, dict(rho=1.5), "Invalid rho value: 1.5"),
    (optim.Adadelta, dict(lr=-1.0), "Invalid learning rate: -1.0"),
    (optim.Adamax, dict(betas=(1.0, 0.9)), "Invalid beta parameter at index 0: 1.0"),
    (optim.NAdam, dict(momentum_decay=-1.0), "Invalid momentum_decay value: -1.0"),
    (optim.RAdam, dict(eps=-1.0), "Invalid epsilon value: -1.0"),
    (optim.ASGD, dict(weight_decay=-1.0), "Invalid weight_decay value: -1.0"),
    (optim.Rprop, dict(etas=(1.5, 1.2)), "Invalid eta values: 1.5, 1.2"),
    (optim.LBFGS, dict(lr=-1.0), "Invalid learning rate: -1.0"),
])
def test_invalid_hyperparameters_raise_as_pytorch(cls, kw, message):
    with pytest.raises(ValueError, match=message):
        cls([ag.nn.Parameter(ag.zeros(1))], **kw)


def test_lbfgs_refuses_parameter_groups_and_other_line_searches():
    a, b = ag.nn.Parameter(ag.zeros(1)), ag.nn.Parameter(ag.zeros(1))
    with pytest.raises(ValueError, match="LBFGS doesn't support per-parameter options"):
        optim.LBFGS([{"params": [a]}, {"params": [b]}])
    opt = optim.LBFGS([a], line_search_fn="backtracking")

    def closure():
        opt.zero_grad()
        loss = ((a - 1) ** 2).sum()
        loss.backward()
        return loss
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        opt.step(closure)
