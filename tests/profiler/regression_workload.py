"""A training step whose main op busy-waits, recorded in-process for the statistical diff's tests.

Two runs recorded one after the other on a shared machine differ systematically: another
process may take a core for the whole of one run and not the other, and a small op then
takes twice as long in every step of that run — a real difference, which the diff rightly
reports, but not one the test planted. So A and B are recorded *interleaved*: one profile,
after a warm-up, whose even steps run workload A and odd steps workload B, then split by step
into two profiles. Both then see the same machine; only the planted slowdown differs.
"""
import time

import numpy as np

import gradtrace.autograd as ag
from gradtrace import profiler
from gradtrace.profiler import ProfileData, stats
from gradtrace.profiler.records import MEMORY_COLUMNS, Scope, empty_columns

SPIN_US = 400        # the busy-waiting op's time in A; the step is about 1 ms


def spin(us: float) -> None:
    end = time.perf_counter_ns() + int(us * 1000)
    while time.perf_counter_ns() < end:
        pass


class Spin(ag.Function):
    """An op that busy-waits ``us`` microseconds in its forward."""

    @staticmethod
    def forward(ctx, x, us):
        spin(us)
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        spin(100)
        return g, None


def _step(x, w, slow: float) -> None:
    # No noise is added: a shared machine preempts a busy-wait now and then, which is noise
    # enough (and what the medians are robust to).
    with profiler.record_function("forward"):
        h = Spin.apply(x @ w, SPIN_US * slow)
        y = (h.tanh() * 2.0).sum()
        spin(300)
    with profiler.record_function("backward"):
        y.backward()


def split_steps(data: ProfileData, parity: int) -> ProfileData:
    """The events of the even (parity 0) or odd (1) ``ProfilerStep#N`` ranges, as a profile."""
    steps = data.step_ranges()
    cols = data.event_columns
    starts = np.array([s for _, s, _ in steps])
    ends = np.array([e for _, _, e in steps])
    k = np.searchsorted(starts, cols["start_ns"], side="right") - 1
    keep = (k >= 0) & (cols["start_ns"] < ends[np.maximum(k, 0)]) & (k % 2 == parity)
    return ProfileData({c: v[keep] for c, v in cols.items()}, empty_columns(MEMORY_COLUMNS), data.strings,
                       {**data.metadata, "synthetic": True})


def record_interleaved(slow_b: float = 1.0, steps: int = 30, seed: int = 0,
                       attempts: int = 3) -> tuple[ProfileData, ProfileData]:
    """(A, B): ``steps`` steps each, B's Spin op ``slow_b`` times as long as A's.

    A machine so busy that most busy-waits are preempted for milliseconds measures nothing
    (the spread of A's Spin times is then many times the planted change): such a recording is
    made again, up to ``attempts`` times, and the last one is returned either way.
    """
    for _ in range(attempts):
        a, b = _record_once(slow_b, steps, seed)
        samples = stats.step_samples(a)
        spin_ns = samples.values["op"][:, samples.names["op"].index("Spin")]
        q1, q2, q3 = np.percentile(spin_ns, [25, 50, 75])
        if (q3 - q1) / q2 <= 0.1:
            break
    return a, b


def _record_once(slow_b: float, steps: int, seed: int) -> tuple[ProfileData, ProfileData]:
    ag.manual_seed(seed)
    w = ag.randn(16, 16, requires_grad=True)
    x = ag.randn(8, 16)
    for _ in range(5):      # warm-up, unrecorded: first calls pay imports and caches
        _step(x, w, 1.0)
    with profiler.profile() as prof:
        for i in range(2 * steps):
            _step(x, w, slow_b if i % 2 else 1.0)
            prof.step()
    data = prof.profile_data
    assert int(np.count_nonzero(data.event_columns["scope"] == Scope.USER_SCOPE)) > 2 * steps
    return split_steps(data, 0), split_steps(data, 1)
