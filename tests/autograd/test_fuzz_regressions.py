"""Crashes a differential fuzz against PyTorch found in backward chains, each run here with
its values and gradients pinned from PyTorch 2.13 (computed once with torch; torch is not
needed to run this file).

The crashes had one cause: NumPy's ufuncs return a NumPy *scalar* for 0-d arrays, and such a
scalar then met code that needs an array: ``nan_to_num(copy=False)`` in sign (abs's slope),
NumPy 2's "never copy" refusing it; gelu's in-place ``out=`` temporaries; an item assignment
into a 0-d gradient; a sum of two 0-d gradients stored as a leaf's ``.grad``. And dim-taking
ops (softmax, cumsum's backward) that did not take a 0-d tensor's dim 0 / -1 as PyTorch does.
"""
import functools

import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd.nn import functional as AF


def chains(t, F):
    dt = t.float64
    X44 = [[0.3, -1.2, 0.8, 0.1], [-0.5, 0.9, -0.2, 1.4], [0.7, -0.4, 0.6, -1.1],
           [0.2, 1.0, -0.9, 0.05]]
    res = {}
    # 1. narrow to an empty slice; abs(x + c) on a 0-d leaf; tanh; where; hooks; retain_grad
    x = t.tensor(X44, dtype=dt, requires_grad=True)
    s = t.tensor(-0.8, dtype=dt, requires_grad=True)
    n = t.narrow(x, 0, 1, 0)
    a = t.abs(s + 0.25); a.retain_grad()
    z = t.tanh(a); z.register_hook(lambda g: g * 2.0)
    w = t.where(z > -0.36, x, s)
    (w.sum() + n.sum() + z * 3.0).backward()
    res["narrow_abs_tanh_where"] = (w, [x.grad, s.grad, a.grad])
    # 2. unflatten; stack of [1, 1]s along -1; abs(x + c) of 0-d
    x = t.tensor([0.4, -0.6], dtype=dt, requires_grad=True)
    s = t.tensor(0.3, dtype=dt, requires_grad=True)
    u = t.unflatten(x, 0, (1, -1))
    st = t.stack([u[:, :1], u[:, 1:]], dim=-1)
    b = t.abs(s - 0.5)
    out = st * b
    out.sum().backward()
    res["unflatten_stack_abs"] = (out, [x.grad, s.grad])
    # 3. softsign; sigmoid; interpolate; log_softmax; clone().__setitem__ with a 0-d value
    x = t.tensor([[[[0.2, -0.7], [1.1, 0.4]], [[-0.3, 0.8], [0.5, -1.0]]]], dtype=dt,
                 requires_grad=True)
    s = t.tensor(-0.45, dtype=dt, requires_grad=True)
    a = t.sigmoid(F.softsign(x))
    b = F.interpolate(a, scale_factor=2)
    c = t.log_softmax(b, dim=1)
    d = c.clone(); d[0, 0, 1] = t.abs(t.sigmoid(F.softsign(s)) - 1.0)
    (d * d).sum().backward()
    res["softsign_interp_log_softmax_setitem"] = (d, [x.grad, s.grad])
    # 4. matmul [3] @ [3,1,3,2]; celu; norm(p=2.5); abs; clone().tanh_()
    x = t.tensor([0.5, -0.3, 0.9], dtype=dt, requires_grad=True)
    y = t.tensor(np.linspace(-1, 1, 18).reshape(3, 1, 3, 2).tolist(), dtype=dt, requires_grad=True)
    m = t.matmul(x, y)
    k = t.abs(t.norm(F.celu(m), p=2.5)).clone().tanh_()
    k.backward()
    res["matmul_celu_norm_abs_tanh_"] = (k, [x.grad, y.grad])
    # 5. exp; exp; abs of a 0-d; outer
    s = t.tensor(-0.2, dtype=dt, requires_grad=True)
    x = t.tensor([0.1, -0.4, 0.3], dtype=dt, requires_grad=True)
    y = t.tensor([1.5, -0.5], dtype=dt, requires_grad=True)
    e = t.abs(t.exp(t.exp(s)) - 2.0)
    o = t.outer(x * e, y)
    o.sum().backward()
    res["exp_exp_abs_outer"] = (o, [s.grad, x.grad, y.grad])
    # 6. gelu tanh on 0-d
    s = t.tensor(0.6, dtype=dt, requires_grad=True)
    g = F.gelu(s, approximate="tanh"); g.backward()
    res["gelu_tanh_0d"] = (g, [s.grad])
    # 7. layer_norm, cumsum, logcumsumexp on a 0-d leaf
    s = t.tensor(0.9, dtype=dt, requires_grad=True)
    ln = F.layer_norm(s.expand(3), (3,)).sum()
    c = t.logcumsumexp(t.cumsum(s * 2.0, 0), -1) + ln
    c.backward()
    res["layer_norm_cumsum_logcumsumexp_0d"] = (c, [s.grad])
    return res


# PyTorch's values: (output, [gradients]) per chain.
TORCH = {'exp_exp_abs_outer': ([[0.0401429761054, -0.0133809920351],
                                [-0.160571904421, 0.0535239681405],
                                [0.120428928316, -0.0401429761054]],
                               [-1.03060343585e-16,
                                [0.267619840702, 0.267619840702, 0.267619840702],
                                [-1.38777878078e-17, -1.38777878078e-17]]),
         'gelu_tanh_0d': (0.435415199231, [0.925491533332]),
         'layer_norm_cumsum_logcumsumexp_0d': (1.8, [2.0]),
         'matmul_celu_norm_abs_tanh_': (0.851232483841,
                                        [[0.212827216479, 0.274488351321, 0.336149486162],
                                         [[[[-0.0175955261018, -0.0164088783737],
                                            [0.0105573156611, 0.00984532702424],
                                            [-0.0316719469833, -0.0295359810727]]],
                                          [[[0.000490737262461, 0.00615799987339],
                                            [-0.000294442357477, -0.00369479992404],
                                            [0.00088332707243, 0.0110843997721]]],
                                          [[[0.0703841516124, 0.0880014272649],
                                            [-0.0422304909674, -0.052800856359],
                                            [0.126691472902, 0.158402569077]]]]]),
         'narrow_abs_tanh_where': ([[0.3, -1.2, 0.8, 0.1], [-0.5, 0.9, -0.2, 1.4],
                                    [0.7, -0.4, 0.6, -1.1], [0.2, 1.0, -0.9, 0.05]],
                                   [[[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0],
                                     [1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]],
                                    -4.49687710914, 4.49687710914]),
         'softsign_interp_log_softmax_setitem': ([[[[-0.644867948231, -0.644867948231,
                                                     -0.804107246618, -0.804107246618],
                                                    [0.576969427402, 0.576969427402, 0.576969427402,
                                                     0.576969427402],
                                                    [-0.670671613997, -0.670671613997,
                                                     -0.601112678777, -0.601112678777],
                                                    [-0.670671613997, -0.670671613997,
                                                     -0.601112678777, -0.601112678777]],
                                                   [[-0.743876064359, -0.743876064359,
                                                     -0.593278758141, -0.593278758141],
                                                    [-0.743876064359, -0.743876064359,
                                                     -0.593278758141, -0.593278758141],
                                                    [-0.716139535583, -0.716139535583,
                                                     -0.794518606863, -0.794518606863],
                                                    [-0.716139535583, -0.716139535583,
                                                     -0.794518606863, -0.794518606863]]]],
                                                 [[[[[0.327019385544, 0.0287600933008],
                                                     [0.0163132801042, 0.163951873552]],
                                                    [[-0.276880577939, -0.0254771465459],
                                                     [-0.0332846996879, -0.0770691105471]]]],
                                                  -0.535835323861]),
         'unflatten_stack_abs': ([[[0.08, -0.12]]], [[0.2, 0.2], 0.2])}


@functools.lru_cache(maxsize=None)
def _results():
    return chains(ag, AF)


@pytest.mark.parametrize("name", sorted(TORCH))
def test_chain_matches_torch(name):
    out, grads = _results()[name]
    want_out, want_grads = TORCH[name]
    np.testing.assert_allclose(np.asarray(out.detach()), want_out, rtol=1e-9, atol=1e-12)
    assert len(grads) == len(want_grads)
    for g, want in zip(grads, want_grads):
        assert g is not None
        # A gradient is an array (np.asarray of a .grad that held a NumPy scalar raised).
        assert isinstance(g._data, np.ndarray)
        np.testing.assert_allclose(np.asarray(g), want, rtol=1e-9, atol=1e-12)
