"""``cupyx.scipy.special`` for the NumPy-backed CuPy stand-in: SciPy's own ufuncs. They reach
the stand-in's arrays through ``__array_ufunc__``, which runs them as kernels on the current
stream and refuses host arrays mixed in, as CuPy's elementwise kernels do."""
from scipy.special import (digamma, erf, erfc, erfcinv, erfinv, gammaln, i0, i0e, i1,  # noqa: F401
                           i1e, ndtr)
