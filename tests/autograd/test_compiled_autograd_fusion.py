"""Compiled autograd fuses a pair of nodes whose ops declare it (``OpDef.fusions``):
cross_entropy's NllLossBackward0 and the LogSoftmaxBackward0 it alone feeds run as one call
(``ops.nn.nll_log_softmax_grad``), with the two rules' values bit for bit; where the fused
arithmetic does not apply it runs the two rules; where anything else reads the gradient
between them (a hook, a second use of the log-probabilities, an unpack hook), or the replay
is profiled (each node keeps its own range), the two nodes are generated as two calls.
"""
import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd import compiled_autograd as ca
from gradtrace.autograd import nn
from gradtrace.autograd import record_function as rf

F = nn.functional


@pytest.fixture(autouse=True)
def _fresh_cache():
    ca.reset()
    yield
    ca.reset()


def _setup(dtype=np.float32, n=6, c=5):
    rng = np.random.default_rng(3)
    w = ag.tensor((rng.standard_normal((4, c)) * 3).astype(dtype), requires_grad=True)
    x = ag.tensor(rng.standard_normal((n, 4)).astype(dtype))
    return w, x


def _both(loss_of, w, backward=lambda loss: loss.backward(), steps=3):
    """w.grad after each of ``steps`` backwards, eager then compiled; they must be the same
    values with the same signs (zeros included). Returns the compiled program's sources."""
    results = []
    for compiled in (False, True):
        grads = []
        with ca.enable() if compiled else ca.disable():
            for _ in range(steps):
                w.grad = None
                backward(loss_of())
                grads.append(w.grad.numpy().copy())
        results.append(grads)
    for e, c in zip(*results):
        assert e.dtype == c.dtype
        assert np.array_equal(e, c, equal_nan=True)
        assert np.array_equal(np.signbit(e), np.signbit(c))
    return "\n".join(ca.last_program().source.values())


TARGET = np.array([0, 4, 3, 1, 1, 2])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_cross_entropy_runs_fused_and_equals_eager(dtype, reduction):
    w, x = _setup(dtype)
    src = _both(lambda: F.cross_entropy(x @ w, ag.tensor(TARGET), reduction=reduction), w)
    assert "_fused(" in src and "LogSoftmaxBackward0, fused" in src


@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # inf * 0 in both
@pytest.mark.parametrize("case, loss_of, backward", [
    # the fused arithmetic declines: the two rules, in the one call
    ("an ignored target", lambda x, w: F.cross_entropy(x @ w, ag.tensor(np.array([0, -100, 3, 1, 1, 2]))),
     None),
    ("a zero upstream gradient", lambda x, w: F.cross_entropy(x @ w, ag.tensor(TARGET)),
     lambda loss: loss.backward(ag.tensor(np.float32(0.0)))),
    ("an inf upstream gradient", lambda x, w: F.cross_entropy(x @ w, ag.tensor(TARGET)),
     lambda loss: loss.backward(ag.tensor(np.float32(np.inf)))),
    ("a scaled loss", lambda x, w: F.cross_entropy(x @ w, ag.tensor(TARGET)) * 2.5, None),
])
def test_what_the_fused_arithmetic_declines_still_equals_eager(case, loss_of, backward):
    w, x = _setup()
    src = _both(lambda: loss_of(x, w), w, backward or (lambda loss: loss.backward()))
    assert "_fused(" in src


def test_a_hook_on_the_log_probabilities_keeps_two_calls():
    w, x = _setup()
    seen = []

    def loss_of():
        logp = F.log_softmax(x @ w, 1)
        logp.register_hook(lambda g: seen.append(g.numpy().copy()))
        return F.nll_loss(logp, ag.tensor(TARGET))

    src = _both(loss_of, w)
    assert "_fused(" not in src
    assert len(seen) == 6 and all(np.array_equal(seen[0], s) for s in seen)


def test_log_probabilities_used_twice_keep_two_calls():
    w, x = _setup()

    def loss_of():
        logp = F.log_softmax(x @ w, 1)
        return F.nll_loss(logp, ag.tensor(TARGET)) + logp.exp().sum() * 0.1

    assert "_fused(" not in _both(loss_of, w)


def test_unpack_hooks_keep_two_calls():
    w, x = _setup()
    unpacked = []

    def loss_of():
        with ag.graph.saved_tensors_hooks(lambda t: t, lambda t: unpacked.append(1) or t):
            return F.cross_entropy(x @ w, ag.tensor(TARGET))

    assert "_fused(" not in _both(loss_of, w)
    assert unpacked


def test_retain_graph_replays_the_fused_pair_again():
    w, x = _setup()
    loss_of = lambda: F.cross_entropy(x @ w, ag.tensor(TARGET))  # noqa: E731

    def twice(loss):
        loss.backward(retain_graph=True)
        loss.backward()

    assert "_fused(" in _both(loss_of, w, twice)


def test_a_profiled_replay_keeps_each_nodes_range():
    w, x = _setup()
    loss_of = lambda: F.cross_entropy(x @ w, ag.tensor(TARGET))  # noqa: E731
    names = []
    with ca.enable():
        for _ in range(2):
            loss_of().backward()
        with rf.add_global_callback(None, lambda rec, ctx: names.append(rec.name),
                                    scopes=[rf.RecordScope.BACKWARD_FUNCTION]):
            loss_of().backward()
    assert names[:2] == ["NllLossBackward0", "LogSoftmaxBackward0"]
    profiled = [src for (keep, profiled, *_), src in ca.last_program().source.items() if profiled]
    assert profiled and "_fused(" not in profiled[0]


@pytest.mark.cuda
@pytest.mark.parametrize("cuda_graphs", [False, True], ids=["replay", "cuda graph"])
def test_cross_entropy_on_the_gpu_equals_eager(cuda_graphs):
    """On CuPy the fused arithmetic declines (counting valid targets would sync the host):
    the pair runs the two rules, in one call; a CUDA graph captures the two nodes unfused."""
    rng = np.random.default_rng(3)
    w = ag.tensor((rng.standard_normal((4, 5)) * 3).astype(np.float32), device="cuda",
                  requires_grad=True)
    x = ag.tensor(rng.standard_normal((6, 4)).astype(np.float32), device="cuda")
    t = ag.tensor(TARGET, device="cuda")
    results = []
    for compiled in (False, True):
        grads = []
        with ca.enable(cuda_graphs=cuda_graphs) if compiled else ca.disable():
            for _ in range(3):
                w.grad = None
                F.cross_entropy(x @ w, t).backward()
                grads.append(w.grad.cpu().numpy())
        results.append(grads)
    for e, c in zip(*results):
        if cuda_graphs:     # the graph's product is cuBLAS called directly (graph_matmul): to rounding
            np.testing.assert_allclose(c, e, rtol=1e-6, atol=1e-7)
        else:
            np.testing.assert_array_equal(e, c)
