"""Forward and backward from several threads at once."""
import threading

import numpy as np

import gradtrace.autograd as ag


def test_two_threads_forward_backward_concurrently_get_correct_grads():
    results, errors = {}, []

    def work(k):
        try:
            rng = np.random.default_rng(k)
            w = ag.tensor(rng.standard_normal((8, 8)), requires_grad=True)
            x = ag.tensor(rng.standard_normal((4, 8)))
            for _ in range(50):
                w.grad = None
                loss = ((x @ w).tanh() * 2).sum()
                loss.backward()
            t = np.tanh(x.numpy() @ w.detach().numpy())
            expected = x.numpy().T @ (2 * (1 - t ** 2))
            results[k] = (w.grad.numpy(), expected)
        except Exception as exc:  # surface in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for got, expected in results.values():
        np.testing.assert_allclose(got, expected, rtol=1e-10)


def test_threads_sharing_a_leaf_accumulate_exactly():
    w = ag.tensor(np.zeros(4), requires_grad=True)
    n_threads, n_iter = 8, 200
    barrier = threading.Barrier(n_threads)

    def work():
        barrier.wait()
        for _ in range(n_iter):
            (w * 1.0 + 0.0).sum().backward()

    threads = [threading.Thread(target=work) for _ in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_array_equal(w.grad.numpy(), np.full(4, float(n_threads * n_iter)))


def test_grad_mode_is_thread_local():
    seen = {}
    with ag.no_grad():
        t = threading.Thread(target=lambda: seen.setdefault("enabled", ag.is_grad_enabled()))
        t.start()
        t.join()
        assert not ag.is_grad_enabled()
    assert seen["enabled"] is True
