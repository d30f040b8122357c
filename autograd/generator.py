"""``Generator``: a seedable source of random numbers, as ``torch.Generator``.

It wraps the array module's own generator (NumPy's ``Generator`` on the CPU, CuPy's on a
GPU), so it can be passed as ``generator=`` to ``randn``/``rand``/``randint`` and to the data
samplers. The numbers differ from PyTorch's for the same seed (a different algorithm); the
guarantee is PyTorch's: the same seed gives the same sequence here.
"""
from __future__ import annotations

import secrets

import numpy

from . import backend
from .dtypes import is_floating, mantissa_bits

__all__ = ["Generator", "draw_normal", "draw_uniform"]


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

    # The calls the tensor factories and samplers make on a generator (see draw_normal and
    # draw_uniform for dtypes these do not make).
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


def draw_normal(gen, size, dtype):
    """Standard normal numbers of ``dtype`` from ``gen`` (a :class:`Generator` or the array
    module's own). As PyTorch's randn: float16 too (drawn in float32, then rounded), and
    complex with real and imaginary parts each of variance 1/2, so that ``E|z|^2`` is 1; an
    integer or bool dtype raises, as there."""
    return _draw(gen.standard_normal, size, dtype, "normal", 0.5 ** 0.5)


def draw_uniform(gen, size, dtype):
    """Uniform numbers in [0, 1) of ``dtype``, as PyTorch's rand: float16 too, and complex
    with each part uniform."""
    return _draw(gen.random, size, dtype, "uniform", 1.0)


def _draw(fn, size, dtype, what, complex_scale):
    dt = numpy.dtype(dtype)
    if not is_floating(dt):
        raise NotImplementedError(
            f"{what} random numbers are not implemented for dtype {dt} (they need a floating "
            "or complex dtype), as in PyTorch")
    # NumPy's and CuPy's generators make float32 and float64 only.
    real = numpy.dtype(numpy.float64 if dt.itemsize >= (16 if dt.kind == "c" else 8)
                       else numpy.float32)
    if dt.kind != "c":   # float16, 32, 64 and bfloat16 (drawn in float32, then rounded)
        out = fn(size, dtype=real)
        if real == dt:
            return out
        if what == "uniform":
            # Rounded to float16 a float32 draw can become 1.0: down to float16's grid of
            # 2**-11 instead (where PyTorch draws its 11 bits directly), so [0, 1) it stays.
            step = 2.0 ** (mantissa_bits(dt) + 1)
            out *= step
            xp = backend.array_module(out)
            xp.floor(out, out=out)
            out *= 1 / step
        return out.astype(dt)
    # Complex: pairs of real numbers, viewed as (real, imag).
    shape = () if size is None else (size,) if isinstance(size, int) else tuple(size)
    parts = fn((*shape, 2), dtype=real)
    if complex_scale != 1.0:
        parts *= real.type(complex_scale)
    return parts.view(dt)[..., 0]
