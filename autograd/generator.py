"""``Generator``: a seedable source of random numbers, as ``torch.Generator``.

It wraps the array module's own generator (NumPy's ``Generator`` on the CPU, CuPy's on a
GPU), so it can be passed as ``generator=`` to ``randn``/``rand``/``randint`` and to the data
samplers. The numbers differ from PyTorch's for the same seed (a different algorithm); the
guarantee is PyTorch's: the same seed gives the same sequence here.
"""
from __future__ import annotations

import secrets

from . import backend

__all__ = ["Generator"]


class Generator:
    """A random generator on ``device``, seeded with 67280421310721 until ``manual_seed``
    (PyTorch's default seed for a new ``torch.Generator``).

    Args:
        device: where the numbers are made (``"cpu"`` or ``"cuda:N"``).
    """

    _DEFAULT_SEED = 67280421310721

    def __init__(self, device="cpu"):
        self.device = backend.device(device)
        self.manual_seed(self._DEFAULT_SEED)

    def manual_seed(self, seed: int) -> "Generator":
        """Restart the sequence from ``seed``; returns the generator itself, as PyTorch."""
        seed = int(seed)
        # PyTorch accepts negative seeds by taking them modulo 2**64.
        self._seed = seed % (1 << 64)
        dev = self.device
        if dev.type == "cpu":
            self._rng = dev.xp.random.default_rng(self._seed)
        else:
            with dev.xp.cuda.Device(dev.index):
                self._rng = dev.xp.random.default_rng(self._seed)
        return self

    def seed(self) -> int:
        """Reseed from a non-deterministic source; returns the new seed."""
        new = secrets.randbits(63)
        self.manual_seed(new)
        return new

    def initial_seed(self) -> int:
        """The seed the current sequence started from."""
        return self._seed

    def get_state(self):
        """The generator's state (the array module's own form), for :meth:`set_state`."""
        return backend.get_rng_state(self._rng)

    def set_state(self, state) -> "Generator":
        backend.set_rng_state(self._rng, state)
        return self

    # The calls the tensor factories and samplers make on a generator.
    def standard_normal(self, *args, **kwargs):
        return self._rng.standard_normal(*args, **kwargs)

    def random(self, *args, **kwargs):
        return self._rng.random(*args, **kwargs)

    def integers(self, *args, **kwargs):
        return self._rng.integers(*args, **kwargs)

    def permutation(self, n: int):
        return self._rng.permutation(n)

    def __repr__(self):
        return f"<gradtrace Generator device={self.device} seed={self._seed}>"
