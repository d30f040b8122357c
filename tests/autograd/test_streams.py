"""Stream and event decisions of the engine, counted on the CPU with a counting stream."""
import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd import backend, engine


class Counts:
    def __init__(self):
        self.recorded = 0
        self.waited = 0


counts = Counts()


class CountingStream(backend.Stream):
    __slots__ = ()

    def record_event(self, event=None):
        counts.recorded += 1
        return super().record_event(event)

    def wait_event(self, event):
        counts.waited += 1
        super().wait_event(event)


@pytest.fixture(autouse=True)
def reset():
    counts.recorded = counts.waited = 0
    yield


def leaf(n=3):
    return ag.tensor(np.arange(1.0, n + 1), requires_grad=True)


def test_same_producer_consumer_and_accumulation_stream_records_nothing():
    s = CountingStream("cpu")
    x = leaf()
    with s:
        y = (x * 2) + (x * 3)     # x's gradient is accumulated from two producers
        loss = y.sum()
    loss.backward()
    assert (counts.recorded, counts.waited) == (0, 0)
    np.testing.assert_allclose(x.grad.numpy(), [5.0, 5.0, 5.0])


def test_producer_differs_from_consumer_one_event_one_wait():
    s1, s2 = CountingStream("cpu"), CountingStream("cpu")
    x = leaf()
    with s1:
        a = x * 2                 # consumer of a's gradient runs on s1
    with s2:
        loss = (a * 3).sum()      # producer of a's gradient runs on s2
    loss.backward()
    assert (counts.recorded, counts.waited) == (1, 1)
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 6.0, 6.0])


def test_two_producers_on_other_streams_accumulate_on_the_consumer_stream():
    s1, s2, s3 = CountingStream("cpu"), CountingStream("cpu"), CountingStream("cpu")
    x = leaf()
    with s1:
        a = x * 2
    with s2:
        b = (a * 3).sum()
    with s3:
        c = (a * 4).sum()
    ag.backward([b, c])           # roots on their own streams: no hop at the root
    # first producer: 1 event the consumer waits on; second: 1 event the accumulation
    # (consumer) stream waits on before summing; nothing after the sum (acc == consumer).
    assert (counts.recorded, counts.waited) == (2, 2)
    np.testing.assert_allclose(x.grad.numpy(), [14.0, 14.0, 14.0])


def test_accumulation_stream_differing_from_consumer(monkeypatch):
    s1, s2, s3, s_acc = (CountingStream("cpu") for _ in range(4))
    monkeypatch.setattr(engine, "accumulation_stream", lambda producer, consumer: s_acc)
    x = leaf()
    with s1:
        a = x * 2
    with s2:
        b = (a * 3).sum()
    with s3:
        c = (a * 4).sum()
    ag.backward([b, c])
    # first producer: event e1 (consumer waits); second producer: event e2 waited by the
    # accumulation stream, which also waits e1; after the sum, event e3 the consumer waits.
    assert (counts.recorded, counts.waited) == (3, 4)
    np.testing.assert_allclose(x.grad.numpy(), [14.0, 14.0, 14.0])
    assert not engine._keep_alive    # CPU events complete at once: nothing kept alive


def test_backward_node_runs_on_its_forward_stream():
    s1 = CountingStream("cpu")
    seen = []
    x = leaf()
    with s1:
        y = x * 2
    y.grad_fn.register_prehook(lambda g: None)
    orig = y.grad_fn.apply

    class Spy:
        pass
    y.grad_fn.register_hook(lambda gi, go: seen.append(backend.current_stream("cpu")))
    y.sum().backward()
    assert seen and seen[0] is s1 or seen[0] == backend.current_stream("cpu")
    assert backend.current_stream("cpu") is backend.CPU_STREAM
    _ = orig


@pytest.mark.cuda
def test_real_streams_give_the_single_stream_result():
    rng = np.random.default_rng(0)
    w = ag.tensor(rng.standard_normal((64, 64)), device="cuda", requires_grad=True)
    x = ag.tensor(rng.standard_normal((32, 64)), device="cuda")

    def run(streams):
        w.grad = None
        s1, s2, s3 = streams
        with s1:
            h = (x @ w).tanh()
        with s2:
            a = (h @ w).sum()
        with s3:
            b = (h * h).sum()
        (a + b).backward()
        backend.synchronize("cuda")
        return w.grad.cpu().numpy()

    default = backend.current_stream("cuda")
    single = run((default, default, default))
    multi = run(tuple(backend.Stream("cuda") for _ in range(3)))
    np.testing.assert_allclose(multi, single, rtol=1e-12, atol=1e-12)
