"""Learning-rate schedulers against PyTorch's documented formulas, step by step.

Each expected sequence is written from the formula in PyTorch's docs for that scheduler
(closed forms; PyTorch steps with an equivalent recurrence, so values agree to rounding),
with the first value being step 0, which the constructor takes.
"""
import math
import warnings

import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd import optim
from gradtrace.autograd.optim import lr_scheduler as S

STEPS = 20


def _opt(lr=0.1, cls=optim.SGD, groups=1, **kw):
    params = [ag.nn.Parameter(ag.zeros(1)) for _ in range(groups)]
    return cls([{"params": [p]} for p in params], lr=lr, **kw)


def _lrs(sched, steps=STEPS):
    """The lr of group 0 at steps 0..steps-1, stepping optimizer then scheduler as PyTorch
    asks."""
    out = [sched.optimizer.param_groups[0]["lr"]]
    for _ in range(steps - 1):
        sched.optimizer.step()
        sched.step()
        out.append(sched.optimizer.param_groups[0]["lr"])
        assert sched.get_last_lr() == [g["lr"] for g in sched.optimizer.param_groups]
    return out


def test_step_lr():
    # PyTorch: lr = base_lr * gamma ** (epoch // step_size)
    got = _lrs(S.StepLR(_opt(0.1), step_size=3, gamma=0.5))
    assert got[:7] == [0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025]
    np.testing.assert_allclose(got, [0.1 * 0.5 ** (e // 3) for e in range(STEPS)], rtol=1e-15)


def test_multi_step_lr_counts_repeated_milestones():
    # PyTorch: lr = base_lr * gamma ** bisect_right(milestones, epoch); 8 given twice decays
    # twice there.
    got = _lrs(S.MultiStepLR(_opt(1.0), milestones=[3, 8, 8, 15], gamma=0.1))
    want = [1.0] * 3 + [0.1] * 5 + [0.001] * 7 + [0.0001] * 5
    np.testing.assert_allclose(got, want, rtol=1e-14)


def test_exponential_lr():
    # PyTorch: lr = base_lr * gamma ** epoch
    got = _lrs(S.ExponentialLR(_opt(0.2), gamma=0.9))
    np.testing.assert_allclose(got, [0.2 * 0.9 ** e for e in range(STEPS)], rtol=1e-13)


def test_cosine_annealing_follows_the_cosine_past_t_max():
    # PyTorch: eta_t = eta_min + (base - eta_min) (1 + cos(pi t / T_max)) / 2, and the
    # recurrence keeps following this curve back up after T_max (no restart).
    got = _lrs(S.CosineAnnealingLR(_opt(0.1), T_max=5, eta_min=0.01))
    want = [0.01 + 0.09 * (1 + math.cos(math.pi * t / 5)) / 2 for t in range(STEPS)]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert got[5] == pytest.approx(0.01) and got[10] == pytest.approx(0.1)


def test_lambda_lr_per_group():
    # PyTorch: lr = base_lr * lambda(epoch), one lambda per group when a list is given.
    opt = _opt(0.5, groups=2)
    sched = S.LambdaLR(opt, [lambda e: 0.95 ** e, lambda e: 1.0 / (e + 1)])
    for e in range(STEPS):
        assert sched.get_last_lr() == pytest.approx([0.5 * 0.95 ** e, 0.5 / (e + 1)], rel=1e-15)
        opt.step()
        sched.step()


def test_linear_lr():
    # PyTorch: lr = base * (start + (end - start) * min(epoch, total_iters) / total_iters)
    got = _lrs(S.LinearLR(_opt(1.0), start_factor=0.25, end_factor=1.0, total_iters=4))
    assert got[:5] == pytest.approx([0.25, 0.4375, 0.625, 0.8125, 1.0], rel=1e-15)
    np.testing.assert_allclose(got, [0.25 + 0.75 * min(e, 4) / 4 for e in range(STEPS)],
                               rtol=1e-14)
    with pytest.raises(ValueError, match="greater than 0"):
        S.LinearLR(_opt(), start_factor=0.0)
    with pytest.raises(ValueError, match="between 0 and 1"):
        S.LinearLR(_opt(), end_factor=1.5)


def _one_cycle_ref(step, total, max_lr, pct, div, final_div, three_phase, cos, hi=0.95, lo=0.85):
    """PyTorch's OneCycleLR phases: (end_step, start, end) for lr and momentum, annealed with
    cos: end + (start - end) / 2 * (cos(pi pct) + 1), or linear: start + (end - start) pct."""
    init = max_lr / div
    low = init / final_div
    if three_phase:
        phases = [(pct * total - 1, init, max_lr, hi, lo), (2 * pct * total - 2, max_lr, init, lo, hi),
                  (total - 1, init, low, hi, hi)]
    else:
        phases = [(pct * total - 1, init, max_lr, hi, lo), (total - 1, max_lr, low, lo, hi)]

    def anneal(a, b, p):
        return b + (a - b) / 2 * (math.cos(math.pi * p) + 1) if cos else a + (b - a) * p

    start = 0.0
    for i, (end, lr0, lr1, m0, m1) in enumerate(phases):
        if step <= end or i == len(phases) - 1:
            p = (step - start) / (end - start)
            return anneal(lr0, lr1, p), anneal(m0, m1, p)
        start = end


@pytest.mark.parametrize("strategy", ["cos", "linear"])
@pytest.mark.parametrize("three_phase", [False, True], ids=["two_phase", "three_phase"])
@pytest.mark.parametrize("cls", [optim.SGD, optim.Adam], ids=["sgd_momentum", "adam_beta1"])
def test_one_cycle(strategy, three_phase, cls):
    kw = dict(momentum=0.9) if cls is optim.SGD else {}
    opt = _opt(0.1, cls, **kw)
    sched = S.OneCycleLR(opt, max_lr=1.0, total_steps=STEPS, pct_start=0.3,
                         anneal_strategy=strategy, three_phase=three_phase)
    group = opt.param_groups[0]
    assert group["initial_lr"] == 0.04 and group["max_lr"] == 1.0 and group["min_lr"] == 4e-6
    for step in range(STEPS + 1):
        lr, mom = _one_cycle_ref(step, STEPS, 1.0, 0.3, 25.0, 1e4, three_phase, strategy == "cos")
        assert group["lr"] == pytest.approx(lr, rel=1e-12)
        got_mom = group["momentum"] if cls is optim.SGD else group["betas"][0]
        assert got_mom == pytest.approx(mom, rel=1e-12)
        if cls is optim.Adam:
            assert group["betas"][1] == 0.999
        if step < STEPS:
            opt.step()
            sched.step()
    # Landmarks: start at max_lr/25 with momentum 0.95, peak 1.0 at step 5 with 0.85, end at
    # the minimum 4e-6 at step 19.
    ref = [_one_cycle_ref(s, STEPS, 1.0, 0.3, 25.0, 1e4, three_phase, strategy == "cos")
           for s in (0, 5, 19)]
    assert ref[0] == pytest.approx((0.04, 0.95)) and ref[1] == pytest.approx((1.0, 0.85))
    assert ref[2][0] == pytest.approx(4e-6)
    with pytest.raises(ValueError, match="Tried to step 21 times"):
        sched.step()


def test_one_cycle_arguments():
    opt = _opt(0.1, optim.SGD, momentum=0.9)
    assert S.OneCycleLR(opt, max_lr=0.5, epochs=3, steps_per_epoch=4).total_steps == 12
    with pytest.raises(ValueError, match="either total_steps OR"):
        S.OneCycleLR(_opt(0.1, optim.SGD, momentum=0.9), max_lr=0.5)
    with pytest.raises(ValueError, match="anneal_strategy must be one of"):
        S.OneCycleLR(_opt(0.1, optim.SGD, momentum=0.9), max_lr=0.5, total_steps=5,
                     anneal_strategy="step")
    with pytest.raises(ValueError, match="must support momentum or beta1"):
        S.OneCycleLR(_opt(0.1, optim.Adagrad), max_lr=0.5, total_steps=5)
    opt = _opt(0.1, optim.Adagrad)
    S.OneCycleLR(opt, max_lr=0.5, total_steps=5, cycle_momentum=False)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.02)


def test_sequential_lr_starts_each_scheduler_at_its_step_zero():
    # PyTorch's SequentialLR calls scheduler.step(0) at a milestone: the closed form at
    # epoch 0, so the ExponentialLR part starts at base_lr (1.0), then 0.5, 0.25...
    opt = _opt(1.0)
    warm = S.LinearLR(opt, start_factor=0.25, total_iters=4)
    decay = S.ExponentialLR(opt, gamma=0.5)
    sched = S.SequentialLR(opt, [warm, decay], milestones=[4])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no deprecation warning for the internal step(0)
        got = _lrs(sched, 10)
    np.testing.assert_allclose(got, [0.25, 0.4375, 0.625, 0.8125] + [0.5 ** k for k in range(6)],
                               rtol=1e-14)
    with pytest.raises(ValueError, match="one more than the number of milestone"):
        S.SequentialLR(opt, [warm, decay], milestones=[])
    with pytest.raises(ValueError, match="same optimizer"):
        S.SequentialLR(opt, [warm, S.StepLR(_opt(), 2)], milestones=[2])


def test_initial_lr_and_last_epoch():
    opt = _opt(0.3)
    sched = S.StepLR(opt, step_size=2, gamma=0.1)
    assert opt.param_groups[0]["initial_lr"] == 0.3 and sched.last_epoch == 0
    assert sched.base_lrs == [0.3]
    # Resuming (last_epoch != -1) needs initial_lr in every group, as PyTorch.
    with pytest.raises(KeyError, match=r"initial_lr' is not specified in param_groups\[0\]"):
        S.StepLR(_opt(0.3), step_size=2, last_epoch=4)
    # A resumed cosine schedule starts from the closed form at last_epoch + 1.
    opt = _opt(0.1)
    opt.param_groups[0]["initial_lr"] = 0.1
    sched = S.CosineAnnealingLR(opt, T_max=10, last_epoch=2)
    assert sched.last_epoch == 3
    assert sched.get_last_lr()[0] == pytest.approx(0.05 * (1 + math.cos(math.pi * 3 / 10)))


def test_step_with_epoch_uses_the_closed_form_and_warns():
    opt = _opt(1.0)
    sched = S.StepLR(opt, step_size=3, gamma=0.5)
    opt.step()
    with pytest.warns(UserWarning, match="epoch parameter in `scheduler.step\\(\\)`"):
        sched.step(7)
    assert sched.last_epoch == 7 and sched.get_last_lr() == [0.25]


def test_stepping_the_scheduler_before_the_optimizer_warns():
    sched = S.ExponentialLR(_opt(), gamma=0.5)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        sched.step()


@pytest.mark.parametrize("make", [
    lambda o: S.StepLR(o, step_size=3, gamma=0.5),
    lambda o: S.MultiStepLR(o, milestones=[2, 6], gamma=0.3),
    lambda o: S.CosineAnnealingLR(o, T_max=4, eta_min=0.001),
    lambda o: S.LinearLR(o, start_factor=0.5, total_iters=6),
    lambda o: S.OneCycleLR(o, max_lr=0.8, total_steps=STEPS),
    lambda o: S.SequentialLR(o, [S.LinearLR(o, 0.5, total_iters=3), S.ExponentialLR(o, 0.8)], [3]),
], ids=["step", "multistep", "cosine", "linear", "onecycle", "sequential"])
def test_state_dict_resume_continues_identically(make):
    opt = _opt(0.1, optim.SGD, momentum=0.9)
    sched = make(opt)
    full = _lrs(sched, 12)
    opt2 = _opt(0.1, optim.SGD, momentum=0.9)
    first = make(opt2)
    _lrs(first, 6)
    state, opt_state = first.state_dict(), opt2.state_dict()
    assert "optimizer" not in state
    opt3 = _opt(0.1, optim.SGD, momentum=0.9)
    resumed = make(opt3)
    opt3.load_state_dict(opt_state)
    resumed.load_state_dict(state)
    assert resumed.last_epoch == first.last_epoch
    assert _lrs(resumed, 7) == full[5:]


def test_lambda_lr_state_dict_keeps_callable_objects_state_not_functions():
    class Warmup:
        def __init__(self, n):
            self.n = n

        def __call__(self, e):
            return min(1.0, (e + 1) / self.n)

    opt = _opt(1.0, groups=2)
    fn = Warmup(4)
    sched = S.LambdaLR(opt, [fn, lambda e: 1.0])
    state = sched.state_dict()
    assert state["lr_lambdas"] == [{"n": 4}, None]
    fn2 = Warmup(100)
    other = S.LambdaLR(_opt(1.0, groups=2), [fn2, lambda e: 2.0])
    other.load_state_dict(state)
    assert fn2.n == 4
