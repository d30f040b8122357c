"""RandomSampler(replacement=True) draws lazily, 32 indices at a time as PyTorch's, so that a
huge num_samples neither allocates nor draws everything up front (10**10 indices at once
raised MemoryError); len() is still num_samples and the no-replacement path is unchanged."""
import itertools

import numpy as np

import gradtrace.autograd as ag
from gradtrace.autograd.utils.data import RandomSampler


class _Counting:
    """A Generator stand-in that counts how many integers were drawn."""

    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)
        self.drawn = 0

    def integers(self, low, high, size):
        self.drawn += int(np.prod(size))
        return self.rng.integers(low, high, size=size)


def test_huge_num_samples_is_drawn_lazily():
    gen = _Counting()
    sampler = RandomSampler(range(7), replacement=True, num_samples=10**10, generator=gen)
    assert len(sampler) == 10**10
    first = list(itertools.islice(iter(sampler), 100))
    assert len(first) == 100 and all(isinstance(i, int) and 0 <= i < 7 for i in first)
    assert gen.drawn == 128   # four chunks of 32, not 10**10


def test_replacement_yields_exactly_num_samples():
    for num in (1, 31, 32, 33, 100):
        gen = _Counting()
        out = list(RandomSampler(range(5), replacement=True, num_samples=num, generator=gen))
        assert len(out) == num and set(out) <= set(range(5)) and gen.drawn == num


def test_replacement_is_reproducible_with_a_seeded_generator():
    a = list(RandomSampler(range(10), True, 70, generator=ag.Generator().manual_seed(5)))
    b = list(RandomSampler(range(10), True, 70, generator=ag.Generator().manual_seed(5)))
    assert a == b and len(set(a)) > 1


def test_without_replacement_unchanged():
    out = list(RandomSampler(range(6), generator=ag.Generator().manual_seed(0)))
    assert sorted(out) == list(range(6))
    out = list(RandomSampler(range(4), num_samples=10, generator=ag.Generator().manual_seed(0)))
    assert len(out) == 10 and sorted(out[:4]) == list(range(4))
