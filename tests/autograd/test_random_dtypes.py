"""randn/rand and the initializers in every dtype PyTorch makes them in: float16 (drawn in
float32, then rounded), complex (randn: each part of variance 1/2, so E|z|^2 = 1; rand: each
part uniform in [0, 1)), and PyTorch's NotImplementedError for integer and bool dtypes, where
NumPy's generator raised a TypeError naming its own function. Found when ``nn.Linear(...,
dtype=float16)`` could not be built."""
import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd import nn


@pytest.mark.parametrize("factory", [ag.randn, ag.rand])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.complex64,
                                   np.complex128])
def test_factories_make_each_floating_and_complex_dtype(factory, dtype):
    ag.manual_seed(0)
    t = factory(4000, 3, dtype=dtype)
    a = t.numpy()
    assert t.dtype == np.dtype(dtype) and t.shape == (4000, 3) and a.dtype == np.dtype(dtype)
    assert np.isfinite(a).all()
    parts = [a.real, a.imag] if np.iscomplexobj(a) else [a]
    for p in parts:
        p = p.astype(np.float64)
        if factory is ag.rand:
            assert p.min() >= 0 and p.max() < 1 and abs(p.mean() - 0.5) < 0.02
        else:   # torch.randn(..., dtype=complex64): real and imag parts of variance 1/2
            want = 0.5 if np.iscomplexobj(a) else 1.0
            assert abs(p.var() - want) < 0.05 * want and abs(p.mean()) < 0.05
    if factory is ag.randn and np.iscomplexobj(a):
        assert abs((np.abs(a) ** 2).mean() - 1.0) < 0.05
    # Seeded: the same seed gives the same numbers.
    ag.manual_seed(0)
    np.testing.assert_array_equal(factory(4000, 3, dtype=dtype).numpy(), a)


def test_float16_numbers_are_the_float32_draw_rounded():
    ag.manual_seed(1)
    want = ag.randn(5, 7, dtype=np.float32).numpy().astype(np.float16)
    ag.manual_seed(1)
    np.testing.assert_array_equal(ag.randn(5, 7, dtype=np.float16).numpy(), want)


@pytest.mark.parametrize("factory, what", [(ag.randn, "normal"), (ag.rand, "uniform")])
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.bool_])
def test_integer_and_bool_dtypes_raise_as_pytorch(factory, what, dtype):
    # torch.randn(2, dtype=torch.int64): NotImplementedError "normal_kernel_cpu" not
    # implemented for 'Long'; torch.rand: "check_uniform_bounds" not implemented for 'Long'.
    with pytest.raises(NotImplementedError, match=f"{what} random numbers.*{np.dtype(dtype)}"):
        factory(2, dtype=dtype)
    assert ag.randn(2).shape == (2,)     # still usable


def test_a_generator_passed_in_makes_the_same_dtypes():
    g = ag.Generator().manual_seed(5)
    a = ag.randn(3, dtype=np.complex128, generator=g).numpy()
    b = ag.rand(3, dtype=np.float16, generator=ag.Generator().manual_seed(5)).numpy()
    assert a.dtype == np.complex128 and b.dtype == np.float16
    np.testing.assert_array_equal(
        a, ag.randn(3, dtype=np.complex128, generator=ag.Generator().manual_seed(5)).numpy())


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_modules_in_half_and_double_precision(dtype):
    """torch.nn.Linear(5, 4, dtype=torch.float16) builds; so do the initializers on it."""
    ag.manual_seed(0)
    lin = nn.Linear(5, 4, dtype=dtype)
    assert lin.weight.dtype == np.dtype(dtype) and lin.bias.dtype == np.dtype(dtype)
    bound = 1 / np.sqrt(5)
    assert np.abs(lin.weight.detach().numpy().astype(np.float64)).max() <= bound * (1 + 1e-3)
    nn.init.normal_(lin.weight, 0.0, 0.02)
    nn.init.xavier_uniform_(lin.weight)
    assert lin.weight.dtype == np.dtype(dtype)
    x = ag.randn(3, 5, dtype=dtype)
    lin(x).float().sum().backward()
    assert lin.weight.grad.dtype == np.dtype(dtype)


def test_float16_uniform_stays_below_one_on_its_grid():
    """A float32 draw above 1 - 2**-12 rounds to 1.0 in float16; rand(dtype=float16) keeps
    PyTorch's [0, 1) by taking float16's grid of 2**-11 from below."""
    ag.manual_seed(2)
    a = ag.rand(200_000, dtype=np.float16).numpy().astype(np.float64)
    assert a.max() < 1.0 and a.min() >= 0.0
    np.testing.assert_array_equal(a * 2048, np.floor(a * 2048))
    assert len(np.unique(a)) > 2000      # the whole grid is used
