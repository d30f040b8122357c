"""Saved-tensor hooks, save_on_cpu and activation checkpointing."""
import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd.graph import save_on_cpu, saved_tensors_hooks


def leaf(*shape, seed=0):
    return ag.tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)


def test_pack_and_unpack_run_for_every_saved_tensor():
    packed, unpacked = [], []
    x = leaf(3)

    def pack(t):
        packed.append(t.shape)
        return ("box", t)

    def unpack(p):
        unpacked.append(p[0])
        return p[1]

    with saved_tensors_hooks(pack, unpack):
        y = (x * x).exp().sum()     # mul saves x twice, exp saves its output
    assert len(packed) == 3
    y.backward()
    assert len(unpacked) == 3
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy() * np.exp(x.detach().numpy() ** 2))


def test_nested_hooks_innermost_wins_and_no_pack_under_no_grad():
    seen = []
    x = leaf(2)
    with saved_tensors_hooks(lambda t: seen.append("outer") or t, lambda t: t):
        with saved_tensors_hooks(lambda t: seen.append("inner") or t, lambda t: t):
            y = x * x
        z = y * y
        with ag.no_grad():
            _ = x * x
    assert seen == ["inner", "inner", "outer", "outer"]
    z.sum().backward()


def test_per_tensor_hooks_on_a_nodes_saved_values():
    x = leaf(3)
    y = x * x.exp()
    node = y.grad_fn
    assert node._saved_a is x
    calls = []
    node._raw_saved_a.register_hooks(lambda t: calls.append("pack") or t * 1,
                                     lambda t: calls.append("unpack") or t)
    assert calls == ["pack"]
    with pytest.raises(RuntimeError, match="already been set"):
        node._raw_saved_a.register_hooks(lambda t: t, lambda t: t)
    y.sum().backward()
    assert calls == ["pack", "unpack"]
    xv = x.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), np.exp(xv) * (1 + xv))


def test_unpack_hook_returning_wrong_thing_is_a_clear_error():
    x = leaf(3)
    with saved_tensors_hooks(lambda t: t, lambda t: 42):
        y = (x * x).sum()
    with pytest.raises(TypeError, match="unpack hook .* MulBackward0 returned a int"):
        y.backward()
    x2 = leaf(3)
    with saved_tensors_hooks(lambda t: t, lambda t: ag.zeros(4, dtype="float64")):
        y2 = (x2 * x2).sum()
    with pytest.raises(RuntimeError, match=r"shape \[4\].*saved tensor had shape \[3\]"):
        y2.backward()


def test_saved_tensor_with_hooks_still_checks_versions():
    x = leaf(2)
    h = x * 1
    with saved_tensors_hooks(lambda t: t, lambda t: t):
        y = h * h
    with ag.no_grad():
        h.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_save_on_cpu_is_a_pass_through_on_cpu_that_runs_hooks():
    x = leaf(4)
    with save_on_cpu():
        y = (x * x).tanh()
    sv = y.grad_fn._raw_saved_out         # tanh saves its output
    assert sv._unpack_hook is not None and sv._data is None   # stored packed
    y.sum().backward()
    xv = x.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), (1 - np.tanh(xv ** 2) ** 2) * 2 * xv)


def _block(w1, w2):
    def f(h):
        mask = ag.rand(*h.shape, dtype="float64") > 0.3     # dropout-like randomness
        return ((h @ w1).tanh() * mask) @ w2
    return f


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpoint_gives_bit_identical_gradients(use_reentrant):
    w1, w2, x = leaf(8, 8, seed=1), leaf(8, 8, seed=2), leaf(4, 8, seed=3)
    f = _block(w1, w2)
    ag.manual_seed(5)
    f(f(x)).sum().backward()
    plain = [t.grad.numpy().copy() for t in (w1, w2, x)]
    for t in (w1, w2, x):
        t.grad = None
    ag.manual_seed(5)
    h = ag.checkpoint(f, x, use_reentrant=use_reentrant)
    ag.checkpoint(f, h, use_reentrant=use_reentrant).sum().backward()
    for a, t in zip(plain, (w1, w2, x)):
        np.testing.assert_array_equal(t.grad.numpy(), a)


def test_checkpoint_keeps_no_activations():
    w = leaf(16, 16)
    x = leaf(8, 16, seed=4)
    out = ag.checkpoint(lambda h: (h @ w).tanh() @ w, x)
    node = out.grad_fn                    # MmBackward0 of the second matmul
    sv = node._raw_saved_a                # its saved input: the tanh output
    assert sv._data is None and isinstance(sv._packed, int)
    out.sum().backward()
    assert w.grad is not None


def test_checkpoint_sequential_matches_plain():
    ws = [leaf(6, 6, seed=i) for i in range(4)]
    fns = [(lambda h, w=w: (h @ w).tanh()) for w in ws]
    x = leaf(3, 6, seed=9)
    y = x
    for f in fns:
        y = f(y)
    y.sum().backward()
    plain = [w.grad.numpy().copy() for w in ws]
    for w in ws:
        w.grad = None
    ag.checkpoint_sequential(fns, 2, x).sum().backward()
    for a, w in zip(plain, ws):
        np.testing.assert_array_equal(w.grad.numpy(), a)


def test_save_on_cpu_with_pin_memory_on_cpu_keeps_values():
    x = leaf(4)
    with save_on_cpu(pin_memory=True):
        y = (x * x).sum()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy())


@pytest.mark.cuda
@pytest.mark.parametrize("pin", [False, True])
def test_save_on_cpu_moves_saved_gpu_tensors_to_host_and_back(pin):
    rng = np.random.default_rng(0)
    w = ag.tensor(rng.standard_normal((32, 32)), device="cuda", requires_grad=True)
    x = ag.tensor(rng.standard_normal((8, 32)), device="cuda")
    (x @ w).tanh().sum().backward()
    plain = w.grad.cpu().numpy()
    w.grad = None
    with save_on_cpu(pin_memory=pin):
        y = (x @ w).tanh()
    packed = y.grad_fn._raw_saved_out._packed
    assert packed[1].device == "cpu" and packed[0] == "cuda:0"
    y.sum().backward()
    np.testing.assert_allclose(w.grad.cpu().numpy(), plain, rtol=1e-12)


@pytest.mark.cuda
def test_checkpoint_on_gpu_matches_plain():
    rng = np.random.default_rng(1)
    w = ag.tensor(rng.standard_normal((16, 16)), device="cuda", requires_grad=True)
    x = ag.tensor(rng.standard_normal((4, 16)), device="cuda", requires_grad=True)
    f = lambda h: (h @ w).tanh() @ w
    f(x).sum().backward()
    plain = w.grad.cpu().numpy()
    w.grad = None
    ag.checkpoint(f, x).sum().backward()
    np.testing.assert_array_equal(w.grad.cpu().numpy(), plain)
