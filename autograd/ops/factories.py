"""Factories that PyTorch has beside ``linspace`` and ``randn``: ``logspace``,
``tril_indices``/``triu_indices``, the signal windows (``hann_window``...), and random
sampling (``randperm``, ``normal``, ``bernoulli``, ``multinomial``, ``poisson``, the in-place
fills ``normal_``, ``uniform_``...).

Random numbers come from the device's default generator (``manual_seed``) or the
``generator=`` given, through generator.draw_uniform/draw_normal, so that one seed gives one
sequence on every path. Samples are not differentiable and never require grad; ``normal`` with
tensor arguments is ``mean + std * noise``, so gradients reach ``mean`` and ``std`` as in
PyTorch (whose nodes are NormalBackward1..3).
"""
from __future__ import annotations

import numpy

from .. import backend
from ..dispatch import expose
from ..dtypes import is_floating
from ..generator import draw_normal, draw_uniform
from ..promotion import get_default_dtype, torch_name
from .._tensor import Tensor, default_generator


def _wrap(array, dev) -> Tensor:
    return Tensor._make(array, False, None, 0, [0], dev)


def _gen(generator, dev):
    return generator if generator is not None else default_generator(dev)


# --------------------------------------------------------------------------- factories


@expose(public="logspace")
def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    """``steps`` values from ``base ** start`` to ``base ** end``, evenly spaced in the
    exponent."""
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    dev = backend.device(device)
    dt = numpy.dtype(dtype) if dtype is not None else get_default_dtype()
    xp = dev.xp
    out = xp.power(float(base), xp.linspace(float(start), float(end), int(steps)))
    t = _wrap(out.astype(dt), dev)
    return t.requires_grad_(True) if requires_grad else t


def _indices(which, row, col, offset, dtype, device):
    if row < 0 or col < 0:
        raise RuntimeError(f"row must be non-negative, got{row}" if row < 0 else
                           f"col must be non-negative, got{col}")
    dev = backend.device(device)
    xp = dev.xp
    make = xp.tril_indices if which == "tril" else xp.triu_indices
    rows, cols = make(row, offset, col)
    dt = numpy.dtype(dtype) if dtype is not None else numpy.dtype(numpy.int64)
    if dt.kind not in "iu":
        raise RuntimeError(f'"{which}_indices" not implemented for \'{torch_name(dt)}\'')
    return _wrap(xp.stack([xp.asarray(rows), xp.asarray(cols)]).astype(dt).reshape(2, -1), dev)


@expose(public="tril_indices")
def tril_indices(row, col, offset=0, *, dtype=None, device=None):
    """The (row, column) indices of the lower triangle of a ``row`` x ``col`` matrix (the
    diagonal ``offset`` and below), as a 2 x N int64 tensor in row-major order."""
    return _indices("tril", row, col, offset, dtype, device)


@expose(public="triu_indices")
def triu_indices(row, col, offset=0, *, dtype=None, device=None):
    """The indices of the upper triangle (the diagonal ``offset`` and above)."""
    return _indices("triu", row, col, offset, dtype, device)


def _window(name, n, periodic, dtype, device, requires_grad, shape):
    """A window of ``n`` points: ``shape(xp, k, m)`` at k = 0..n-1 over a span of m = n - 1
    (periodic: the symmetric window of n + 1 points without its last, as PyTorch's)."""
    if n < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={n}")
    dev = backend.device(device)
    xp = dev.xp
    dt = numpy.dtype(dtype) if dtype is not None else get_default_dtype()
    if n <= 1:
        out = xp.ones(n, numpy.float64)
    else:
        m = n if periodic else n - 1
        out = shape(xp, xp.arange(n, dtype=numpy.float64), m)
    t = _wrap(out.astype(dt), dev)
    return t.requires_grad_(True) if requires_grad else t


@expose(public="hann_window")
def hann_window(window_length, periodic=True, *, dtype=None, device=None, requires_grad=False):
    """The Hann window ``0.5 - 0.5 cos(2 pi k / m)``."""
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad,
                   lambda xp, k, m: 0.5 - 0.5 * xp.cos(2 * numpy.pi * k / m))


@expose(public="hamming_window")
def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
                   device=None, requires_grad=False):
    """The Hamming window ``alpha - beta cos(2 pi k / m)``."""
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                   lambda xp, k, m: alpha - beta * xp.cos(2 * numpy.pi * k / m))


@expose(public="blackman_window")
def blackman_window(window_length, periodic=True, *, dtype=None, device=None,
                    requires_grad=False):
    """The Blackman window ``0.42 - 0.5 cos(2 pi k / m) + 0.08 cos(4 pi k / m)``."""
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad,
                   lambda xp, k, m: 0.42 - 0.5 * xp.cos(2 * numpy.pi * k / m)
                   + 0.08 * xp.cos(4 * numpy.pi * k / m))


@expose(public="bartlett_window")
def bartlett_window(window_length, periodic=True, *, dtype=None, device=None,
                    requires_grad=False):
    """The triangular window ``1 - |2 k / m - 1|``."""
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad,
                   lambda xp, k, m: 1 - xp.abs(2 * k / m - 1))


@expose(public="kaiser_window")
def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, device=None,
                  requires_grad=False):
    """The Kaiser window ``I0(beta sqrt(1 - (2 k / m - 1)^2)) / I0(beta)``."""
    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad,
                   lambda xp, k, m: xp.i0(beta * xp.sqrt(xp.clip(1 - (2 * k / m - 1) ** 2, 0,
                                                                  None)))
                   / xp.i0(numpy.float64(beta)))


# --------------------------------------------------------------------------- sampling


@expose(public="randperm")
def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    """A random permutation of ``0 .. n-1``."""
    if n < 0:
        raise RuntimeError(f"n must be non-negative, got{n}")
    dev = backend.device(device)
    keys = draw_uniform(_gen(generator, dev), (int(n),), numpy.float64)
    dt = numpy.dtype(dtype) if dtype is not None else numpy.dtype(numpy.int64)
    t = _wrap(dev.xp.argsort(keys).astype(dt), dev)
    return t.requires_grad_(True) if requires_grad else t


@expose(public="randint_like")
def randint_like(input, low=0, high=None, *, dtype=None, device=None,  # noqa: A002
                 requires_grad=False, generator=None):
    """Random integers in [low, high) of ``input``'s shape (``randint_like(x, high)`` too), in
    ``input``'s dtype unless ``dtype`` is given."""
    if high is None:
        low, high = 0, low
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= "
                           f"to={high}")
    dev = backend.device(device) if device is not None else input._device
    u = draw_uniform(_gen(generator, dev), tuple(input.shape), numpy.float64)
    dt = numpy.dtype(dtype) if dtype is not None else input.dtype
    t = _wrap((dev.xp.floor(u * (high - low)) + low).astype(dt), dev)
    return t.requires_grad_(True) if requires_grad else t


def _noise(like_shape, dtype, dev, generator):
    return _wrap(draw_normal(_gen(generator, dev), tuple(like_shape), dtype), dev)


@expose(public="normal")
def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad=False):
    """Samples of N(mean, std**2): ``mean`` and ``std`` tensors (broadcast) or numbers (then
    ``size`` gives the shape). Differentiable in tensor ``mean`` and ``std``."""
    if not isinstance(mean, Tensor) and not isinstance(std, Tensor):
        if size is None:
            raise TypeError("normal() missing the size argument for number mean and std")
        if std < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
        dev = backend.device(device)
        dt = numpy.dtype(dtype) if dtype is not None else get_default_dtype()
        out = _noise(tuple(size), dt, dev, generator) * std + mean
        return out.requires_grad_(True) if requires_grad else out
    like = mean if isinstance(mean, Tensor) else std
    if isinstance(std, Tensor) and bool((std < 0).any().item()):
        raise RuntimeError("normal expects all elements of std >= 0.0")
    if isinstance(std, (int, float)) and std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
    shape = numpy.broadcast_shapes(tuple(getattr(mean, "shape", ())),
                                   tuple(getattr(std, "shape", ())))
    dt = like.dtype if is_floating(like.dtype) else get_default_dtype()
    return mean + std * _noise(shape, dt, like._device, generator)


def _probability_check(p):
    if not bool(((p >= 0) & (p <= 1)).all().item()):
        raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.  "
                           "(Could this error message be improved?  If so, please report an "
                           "enhancement request to PyTorch.)")


@expose(public="bernoulli", methods="bernoulli")
def bernoulli(input, p=None, *, generator=None):  # noqa: A002 - PyTorch's names
    """1 with probability ``input`` (or the number ``p``), else 0, in ``input``'s dtype."""
    probs = input.detach() if p is None else p
    if isinstance(probs, Tensor):
        _probability_check(probs)
    elif not 0 <= probs <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={probs}")
    dev = input._device
    u = draw_uniform(_gen(generator, dev), tuple(input.shape), numpy.float64)
    pv = probs._data if isinstance(probs, Tensor) else probs
    return _wrap((u < pv).astype(input.dtype), dev)


@expose(methods="bernoulli_")
def bernoulli_(x, p=0.5, *, generator=None):
    """In-place :func:`bernoulli` with probability ``p`` (a number or a tensor)."""
    return x.copy_(bernoulli(x.detach(), p, generator=generator))


@expose(public="multinomial", methods="multinomial")
def multinomial(input, num_samples, replacement=False, *, generator=None):  # noqa: A002
    """``num_samples`` category indices per row of non-negative weights ``input`` (1-D or
    2-D), with or without replacement."""
    if input.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if input.dtype.kind != "f":
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                           f"{torch_name(input.dtype)}")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    n_cat = input.shape[-1]
    if not replacement and num_samples > n_cat:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    dev = input._device
    xp = dev.xp
    w = input._data.reshape(-1, n_cat).astype(numpy.float64)
    if bool((w < 0).any()) or not bool(xp.isfinite(w).all()):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    total = w.sum(axis=1, keepdims=True)
    if bool((total <= 0).any()):
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    gen = _gen(generator, dev)
    if replacement:   # inverse CDF: the first category whose running total passes u
        cdf = xp.cumsum(w / total, axis=1)
        cdf[:, -1] = 1.0
        u = draw_uniform(gen, (w.shape[0], num_samples), numpy.float64)
        out = xp.stack([xp.searchsorted(c, r, side="right") for c, r in zip(cdf, u)])
        out = xp.minimum(out, n_cat - 1)
    else:   # exponential races: the categories of the num_samples smallest E / w (a
        # zero weight's race is infinite: taken last, in index order, as PyTorch does)
        u = draw_uniform(gen, w.shape, numpy.float64)
        with numpy.errstate(divide="ignore"):
            keys = -xp.log1p(-u) / w
        out = xp.argsort(keys, axis=1)[:, :num_samples]
    out = out.astype(numpy.int64)
    return _wrap(out.reshape(num_samples) if input.ndim == 1 else out, dev)


@expose(public="poisson")
def poisson(input, generator=None):  # noqa: A002
    """Samples of Poisson(rate) for each rate in ``input``, in its dtype."""
    if bool((input.detach() < 0).any().item()):
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    dev = input._device
    gen = _gen(generator, dev)
    # NOTE: the array module's own Poisson sampler (a gradtrace Generator keeps it in _rng);
    # generator.py has no draw_poisson, and a uniform-only sampler would be slow for large rates.
    rng = getattr(gen, "_rng", gen)
    return _wrap(rng.poisson(input._data.astype(numpy.float64)).astype(input.dtype), dev)


# --------------------------------------------------------------------------- in-place fills
# Each writes samples into ``x`` through copy_ (so a leaf that requires grad refuses, and a
# tensor in a graph gets a zero gradient for its old value, as PyTorch's NormalBackward0...).


def _fill(x, array):
    return x.copy_(_wrap(array.astype(x.dtype), x._device))


def _uniform(x, generator):
    return draw_uniform(_gen(generator, x._device), tuple(x.shape), numpy.float64)


@expose(methods="normal_")
def normal_(x, mean=0.0, std=1.0, *, generator=None):
    """Fill with samples of N(mean, std**2)."""
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
    z = draw_normal(_gen(generator, x._device), tuple(x.shape), numpy.float64)
    return _fill(x, z * std + mean)


@expose(methods="uniform_")
def uniform_(x, a=0.0, b=1.0, *, generator=None, **kwargs):
    """Fill with samples uniform in [from, to) (PyTorch's keywords ``from`` and ``to``)."""
    a, b = kwargs.pop("from", a), kwargs.pop("to", b)
    if kwargs:
        raise TypeError(f"uniform_() got unexpected keyword arguments {sorted(kwargs)}")
    if a > b:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={a:g} "
                           f"> to={b:g}")
    return _fill(x, _uniform(x, generator) * (b - a) + a)


@expose(methods="exponential_")
def exponential_(x, lambd=1.0, *, generator=None):
    """Fill with samples of the exponential distribution of rate ``lambd``."""
    if lambd <= 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd:g}")
    return _fill(x, -x._device.xp.log1p(-_uniform(x, generator)) / lambd)


@expose(methods="log_normal_")
def log_normal_(x, mean=1.0, std=2.0, *, generator=None):
    """Fill with ``exp`` of samples of N(mean, std**2)."""
    if std <= 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std:g}")
    z = draw_normal(_gen(generator, x._device), tuple(x.shape), numpy.float64)
    return _fill(x, x._device.xp.exp(z * std + mean))


@expose(methods="cauchy_")
def cauchy_(x, median=0.0, sigma=1.0, *, generator=None):
    """Fill with samples of the Cauchy distribution."""
    u = _uniform(x, generator)
    return _fill(x, median + sigma * x._device.xp.tan(numpy.pi * (u - 0.5)))


@expose(methods="geometric_")
def geometric_(x, p, *, generator=None):
    """Fill with the number of Bernoulli(p) trials up to the first success (1, 2, ...)."""
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p:g}")
    xp = x._device.xp
    return _fill(x, xp.ceil(xp.log1p(-_uniform(x, generator)) / numpy.log1p(-p)))


@expose(methods="random_")
def random_(x, a=None, b=None, *, generator=None, **kwargs):
    """Fill with integers uniform in [from, to): ``random_(to)``, ``random_(from, to)``, or
    ``random_()`` (0 up to 2**mantissa for floats, the dtype's maximum for integers)."""
    a, b = kwargs.pop("from", a), kwargs.pop("to", b)
    if a is not None and b is None:
        a, b = 0, a
    a = 0 if a is None else int(a)
    if b is None:
        dt = x.dtype
        b = (1 << (numpy.finfo(dt).nmant + 1)) + 1 if dt.kind == "f" else \
            2 if dt.kind == "b" else int(numpy.iinfo(dt).max) + 1
    if a >= b:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={a} >= "
                           f"to={b}")
    u = _uniform(x, generator)
    return _fill(x, x._device.xp.floor(u * (b - a)) + a)
