"""``cupyx.scipy.special`` for the NumPy-backed CuPy stand-in: SciPy's own ufuncs. They reach
the stand-in's arrays through ``__array_ufunc__``, which runs them as kernels on the current
stream and refuses host arrays mixed in, as CuPy's elementwise kernels do."""
from scipy.special import (digamma, entr, erf, erfc, erfcinv, erfcx, erfinv,  # noqa: F401
                           gamma, gammainc, gammaincc, gammaln, i0, i0e, i1, i1e, j0, j1, k0, k0e,
                           k1, k1e, log_ndtr, ndtr, ndtri, y0, y1, zeta)


def polygamma(n, x):
    """cupyx's polygamma as CuPy computes it, ``where(n == 0, digamma(x), ...)``: a Python int
    n fails there as in CuPy (its where calls ``condition.astype``; seen on an H200)."""
    import cupy
    cond = n == 0
    if not hasattr(cond, "astype"):
        raise AttributeError(f"'{type(cond).__name__}' object has no attribute 'astype'")
    return cupy.where(cond, digamma(x), (-1.0) ** (n + 1) * gamma(n + 1.0) * zeta(n + 1.0, x))
