"""Optimizers against NumPy references of PyTorch's update rules, state dicts, profiling."""
import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd import optim
from gradtrace.autograd import record_function as rf

from . import optim_reference as ref

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


def _rmsprop_ref(w, grads, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                 centered=False, maximize=False):
    # PyTorch's documented RMSprop: v = a v + (1-a) g^2; centered subtracts (running mean g)^2;
    # with momentum b = mu b + g / (sqrt(v~) + eps), p -= lr b; else p -= lr g / (sqrt(v~) + eps).
    w = w.copy()
    v = np.zeros_like(w)
    gavg = np.zeros_like(w)
    buf = np.zeros_like(w)
    for g in grads:
        g = -g if maximize else g
        g = g + weight_decay * w
        v = alpha * v + (1 - alpha) * g * g
        vt = v
        if centered:
            gavg = alpha * gavg + (1 - alpha) * g
            vt = v - gavg * gavg
        denom = np.sqrt(vt) + eps
        if momentum > 0:
            buf = momentum * buf + g / denom
            w = w - lr * buf
        else:
            w = w - lr * g / denom
    return w


def _adagrad_ref(w, grads, lr=1e-2, lr_decay=0.0, weight_decay=0.0,
                 initial_accumulator_value=0.0, eps=1e-10, maximize=False):
    # PyTorch's documented Adagrad: clr = lr / (1 + (t-1) lr_decay), s += g^2,
    # p -= clr g / (sqrt(s) + eps).
    w = w.copy()
    s = np.full_like(w, initial_accumulator_value)
    for t, g in enumerate(grads, 1):
        g = -g if maximize else g
        g = g + weight_decay * w
        clr = lr / (1 + (t - 1) * lr_decay)
        s = s + g * g
        w = w - clr * g / (np.sqrt(s) + eps)
    return w


@pytest.mark.parametrize("kw", [dict(), dict(lr=0.05, alpha=0.9, eps=1e-6),
                                dict(lr=0.01, weight_decay=0.1, momentum=0.9),
                                dict(lr=0.01, centered=True),
                                dict(lr=0.02, centered=True, momentum=0.5, weight_decay=0.05,
                                     maximize=True)],
                         ids=["defaults", "alpha_eps", "wd_momentum", "centered", "all"])
def test_rmsprop_matches_reference(kw):
    w0, grads = _problem(4)
    np.testing.assert_allclose(_run(optim.RMSprop, w0, grads, **kw), _rmsprop_ref(w0, grads, **kw),
                               rtol=1e-12)


@pytest.mark.parametrize("kw", [dict(), dict(lr=0.1, lr_decay=0.5),
                                dict(lr=0.1, weight_decay=0.2, initial_accumulator_value=0.3),
                                dict(lr=0.05, eps=1e-3, maximize=True, lr_decay=0.1)],
                         ids=["defaults", "lr_decay", "wd_init_acc", "eps_maximize"])
def test_adagrad_matches_reference(kw):
    w0, grads = _problem(5)
    np.testing.assert_allclose(_run(optim.Adagrad, w0, grads, **kw), _adagrad_ref(w0, grads, **kw),
                               rtol=1e-12)


def test_sgd_maximize_matches_reference():
    w0, grads = _problem(6)
    got = _run(optim.SGD, w0, grads, lr=0.1, momentum=0.9, nesterov=True, maximize=True)
    np.testing.assert_allclose(got, _sgd_ref(w0, [-g for g in grads], lr=0.1, momentum=0.9,
                                             nesterov=True), rtol=1e-12)


def test_adagrad_state_exists_before_the_first_step():
    # PyTorch's Adagrad fills its state at construction: step 0 and sum = initial value.
    p = ag.nn.Parameter(ag.zeros(2, dtype="float64"))
    sd = optim.Adagrad([p], initial_accumulator_value=0.5).state_dict()
    assert sd["state"][0]["step"] == 0
    np.testing.assert_array_equal(sd["state"][0]["sum"], [0.5, 0.5])


@pytest.mark.parametrize("cls,kw,message", [
    (optim.RMSprop, dict(alpha=-0.1), "Invalid alpha value: -0.1"),
    (optim.RMSprop, dict(momentum=-1.0), "Invalid momentum value: -1.0"),
    (optim.Adagrad, dict(lr_decay=-1.0), "Invalid lr_decay value: -1.0"),
    (optim.Adagrad, dict(initial_accumulator_value=-1.0),
     "Invalid initial_accumulator_value value: -1.0"),
])
def test_invalid_hyperparameters_raise_as_pytorch(cls, kw, message):
    with pytest.raises(ValueError, match=message):
        cls([ag.nn.Parameter(ag.zeros(1))], **kw)


@pytest.mark.parametrize("cls,kw", [(optim.RMSprop, dict(momentum=0.9, centered=True)),
                                    (optim.Adagrad, dict(lr_decay=0.1))], ids=["rmsprop", "adagrad"])
def test_resumed_optimizer_continues_identically(cls, kw):
    w0, grads = _problem(7)
    p1 = ag.nn.Parameter(ag.tensor(w0, dtype="float64"))
    o1 = cls([p1], **kw)
    for g in grads[:2]:
        p1.grad = ag.tensor(g)
        o1.step()
    p2 = ag.nn.Parameter(ag.tensor(p1.detach().numpy().copy()))
    o2 = cls([p2], **kw)
    o2.load_state_dict(o1.state_dict())
    for g in grads[2:]:
        for p, o in ((p1, o1), (p2, o2)):
            p.grad = ag.tensor(g)
            o.step()
    np.testing.assert_array_equal(p1.detach().numpy(), p2.detach().numpy())


# --------------------------------------------------------------------------- in-place updates
# The updates write their intermediates into scratch buffers instead of allocating them; the
# arithmetic is the same, in the same order, so the parameters and states are the same bits as
# the allocating updates kept in optim_reference.py, step after step.

IN_PLACE_CASES = [
    (optim.SGD, ref.RefSGD, dict(lr=0.1)),
    (optim.SGD, ref.RefSGD, dict(lr=1.0, momentum=0.9)),
    (optim.SGD, ref.RefSGD, dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)),
    (optim.SGD, ref.RefSGD, dict(lr=0.1, momentum=0.5, dampening=0.3, maximize=True)),
    (optim.Adam, ref.RefAdam, dict(lr=0.01)),
    (optim.Adam, ref.RefAdam, dict(lr=0.01, weight_decay=0.1, maximize=True)),
    (optim.Adam, ref.RefAdam, dict(lr=0.01, amsgrad=True, betas=(0.8, 0.9))),
    (optim.AdamW, ref.RefAdamW, dict(lr=0.01)),
    (optim.AdamW, ref.RefAdamW, dict(lr=0.01, weight_decay=0.1, amsgrad=True, maximize=True)),
    (optim.RMSprop, ref.RefRMSprop, dict()),
    (optim.RMSprop, ref.RefRMSprop, dict(lr=0.01, weight_decay=0.1, momentum=0.9)),
    (optim.RMSprop, ref.RefRMSprop, dict(lr=0.02, centered=True, momentum=0.5,
                                         weight_decay=0.05, maximize=True)),
    (optim.Adagrad, ref.RefAdagrad, dict()),
    (optim.Adagrad, ref.RefAdagrad, dict(lr=0.05, lr_decay=0.1, weight_decay=0.2,
                                         initial_accumulator_value=0.3, maximize=True)),
]


def _steps(opt_cls, shapes, grads, dtype, **kw):
    params = [ag.nn.Parameter(ag.tensor(w, dtype=dtype)) for w in shapes]
    opt = opt_cls(params, **kw)
    for step in grads:
        for p, g in zip(params, step):
            p.grad = ag.tensor(g, dtype=dtype)
        opt.step()
    states = [dict(opt.state.get(p, {})) for p in params]
    return [p.detach().numpy() for p in params], states, [p.grad.numpy() for p in params]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("new, old, kw", IN_PLACE_CASES,
                         ids=lambda v: v.__name__ if isinstance(v, type) else
                         "-".join(f"{k}={x}" for k, x in v.items()) or "defaults")
def test_in_place_update_is_bitwise_the_allocating_one(new, old, kw, dtype):
    rng = np.random.default_rng(8)
    # Parameters of different sizes share the scratch buffers (the small one uses a prefix).
    start = [rng.standard_normal((6, 5)), rng.standard_normal(3), rng.standard_normal((2, 2, 2))]
    grads = [[rng.standard_normal(w.shape) for w in start] for _ in range(5)]
    got, got_state, got_grads = _steps(new, start, grads, dtype, **kw)
    want, want_state, _ = _steps(old, start, grads, dtype, **kw)
    for a, b, st_a, st_b in zip(got, want, got_state, want_state):
        assert a.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(a, b)
        assert st_a.keys() == st_b.keys()
        for k in st_a:
            np.testing.assert_array_equal(st_a[k], st_b[k])
    # The gradients are read, never written (maximize and weight decay go to scratch).
    for g, step in zip(got_grads, grads[-1]):
        np.testing.assert_array_equal(g, step.astype(dtype))


@pytest.mark.cuda
@pytest.mark.parametrize("new, old, kw", IN_PLACE_CASES[2::3] + IN_PLACE_CASES[-1:],
                         ids=lambda v: v.__name__ if isinstance(v, type) else "")
def test_in_place_update_on_the_gpu_is_bitwise_the_allocating_one(new, old, kw):
    rng = np.random.default_rng(9)
    start = [rng.standard_normal((4, 3)), rng.standard_normal(5)]
    grads = [[rng.standard_normal(w.shape) for w in start] for _ in range(3)]
    results = []
    for cls in (new, old):
        params = [ag.nn.Parameter(ag.tensor(w, dtype="float32", device="cuda")) for w in start]
        opt = cls(params, **kw)
        for step in grads:
            for p, g in zip(params, step):
                p.grad = ag.tensor(g, dtype="float32", device="cuda")
            opt.step()
        assert all(p.device.type == "cuda" for p in params)
        results.append([p.cpu().detach().numpy() for p in params])
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
