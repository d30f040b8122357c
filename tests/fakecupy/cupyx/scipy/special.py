"""``cupyx.scipy.special`` for the NumPy-backed CuPy stand-in: SciPy's own ufuncs. They reach
the stand-in's arrays through ``__array_ufunc__``, which runs them as kernels on the current
stream and refuses host arrays mixed in, as CuPy's elementwise kernels do."""
import math

from scipy.special import (digamma, entr, erf, erfc, erfcinv, erfcx, erfinv,  # noqa: F401
                           gammainc, gammaincc, gammaln, i0, i0e, i1, i1e, j0, j1, k0, k0e,
                           k1, k1e, log_ndtr, ndtr, ndtri, y0, y1, zeta)


def polygamma(n, x):
    """cupyx's polygamma, from ufuncs (SciPy's is a Python function converting to NumPy
    arrays, which the stand-in's device arrays refuse)."""
    if n == 0:
        return digamma(x)
    return (-1) ** (n + 1) * math.factorial(n) * zeta(n + 1, x)
