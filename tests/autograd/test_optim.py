"""Optimizers against NumPy references of PyTorch's update rules, state dicts, profiling."""
import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd import optim
from gradtrace.autograd import record_function as rf

STEPS = 4


def _problem(seed=0):
    rng = np.random.default_rng(seed)
    w0 = rng.standard_normal((3, 2))
    grads = [rng.standard_normal((3, 2)) for _ in range(STEPS)]
    return w0, grads


def _run(opt_cls, w0, grads, **kw):
    p = ag.nn.Parameter(ag.tensor(w0, dtype="float64"))
    opt = opt_cls([p], **kw)
    versions = []
    for g in grads:
        opt.zero_grad()
        p.grad = ag.tensor(g)
        opt.step()
        versions.append(p._version)
    assert versions == sorted(set(versions)), "each step bumps the version counter"
    return p.detach().numpy()


def _sgd_ref(w, grads, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    w = w.copy()
    buf = None
    for g in grads:
        g = g + weight_decay * w
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        w = w - lr * g
    return w


def _adam_ref(w, grads, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decoupled=False,
              amsgrad=False):
    w = w.copy()
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    vmax = np.zeros_like(w)
    for t, g in enumerate(grads, 1):
        if weight_decay and decoupled:
            w = w * (1 - lr * weight_decay)
        elif weight_decay:
            g = g + weight_decay * w
        m = betas[0] * m + (1 - betas[0]) * g
        v = betas[1] * v + (1 - betas[1]) * g * g
        vmax = np.maximum(vmax, v)
        vv = vmax if amsgrad else v
        mhat, vhat = m / (1 - betas[0] ** t), vv / (1 - betas[1] ** t)
        w = w - lr * mhat / (np.sqrt(vhat) + eps)
    return w


@pytest.mark.parametrize("kw", [dict(lr=0.1), dict(lr=0.1, momentum=0.9),
                                dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
                                dict(lr=0.1, momentum=0.5, dampening=0.3)],
                         ids=["plain", "momentum", "nesterov_wd", "dampening"])
def test_sgd_matches_reference(kw):
    w0, grads = _problem()
    np.testing.assert_allclose(_run(optim.SGD, w0, grads, **kw), _sgd_ref(w0, grads, **kw), rtol=1e-12)


@pytest.mark.parametrize("kw", [dict(lr=0.01), dict(lr=0.01, weight_decay=0.1),
                                dict(lr=0.01, amsgrad=True, betas=(0.8, 0.9))],
                         ids=["plain", "l2", "amsgrad"])
def test_adam_matches_reference(kw):
    w0, grads = _problem(1)
    np.testing.assert_allclose(_run(optim.Adam, w0, grads, **kw), _adam_ref(w0, grads, **kw),
                               rtol=1e-10)


def test_adamw_decouples_weight_decay():
    w0, grads = _problem(2)
    got = _run(optim.AdamW, w0, grads, lr=0.01, weight_decay=0.1)
    np.testing.assert_allclose(got, _adam_ref(w0, grads, lr=0.01, weight_decay=0.1, decoupled=True),
                               rtol=1e-10)


def test_state_dict_round_trip_continues_identically():
    w0, grads = _problem(3)
    p1 = ag.nn.Parameter(ag.tensor(w0, dtype="float64"))
    o1 = optim.Adam([p1], lr=0.01)
    for g in grads[:2]:
        p1.grad = ag.tensor(g)
        o1.step()
    sd = o1.state_dict()
    assert sd["param_groups"][0]["params"] == [0] and sd["state"][0]["step"] == 2
    p2 = ag.nn.Parameter(ag.tensor(p1.detach().numpy().copy()))
    o2 = optim.Adam([p2], lr=0.5)
    o2.load_state_dict(sd)
    assert o2.param_groups[0]["lr"] == 0.01
    for g in grads[2:]:
        for p, o in ((p1, o1), (p2, o2)):
            p.grad = ag.tensor(g)
            o.step()
    np.testing.assert_array_equal(p1.detach().numpy(), p2.detach().numpy())


def test_zero_grad_and_parameter_groups():
    a, b = ag.nn.Parameter(ag.ones(2)), ag.nn.Parameter(ag.ones(2))
    opt = optim.SGD([{"params": [a]}, {"params": [b], "lr": 1.0}], lr=0.1)
    (a * b).sum().backward()
    opt.step()
    np.testing.assert_allclose(a.detach().numpy(), [0.9, 0.9])
    np.testing.assert_allclose(b.detach().numpy(), [0.0, 0.0])
    opt.zero_grad(set_to_none=False)
    assert not a.grad.numpy().any()
    opt.zero_grad()
    assert a.grad is None and b.grad is None
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)


def test_step_is_one_user_scope_range_when_profiling():
    p = ag.nn.Parameter(ag.ones(2))
    opt = optim.AdamW([p])
    p.grad = ag.ones(2)
    seen = []
    handle = rf.add_global_callback(lambda rec: seen.append((rec.name, rec.scope)))
    try:
        opt.step()
    finally:
        handle.remove()
    assert seen == [("Optimizer.step#AdamW.step", rf.RecordScope.USER_SCOPE)]
