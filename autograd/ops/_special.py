"""Special functions (``torch.special`` and PyTorch's top-level ``lgamma``, ``digamma``,
``polygamma``, ``mvlgamma``, ``erfinv``, ``i0``, ``sinc``, ``logit``, ``igamma``/``igammac``)
from the library made for them: ``scipy.special`` on the CPU, ``cupyx.scipy.special`` on the
GPU (:func:`backend.special`), one compiled pass each.

Dtypes are PyTorch's: a float input keeps its dtype (float16 is computed in float32 and
rounded back), an integer or bool input gives the default dtype (float32), where SciPy's
ufuncs would give float64. Values at the edges (0, poles, ±inf, NaN) are PyTorch's; where
SciPy's routine disagrees (``i0(inf)`` is NaN there) the forward says so and fixes it.

Each differentiable function is a primitive under PyTorch's node name, with PyTorch's rule,
including its value at the rule's own singular points (``i1``'s slope at 0 is 1/2). The
Bessel functions of ``torch.special`` that PyTorch does not differentiate (``bessel_j0``...)
are non-differentiable ops here too (their results never require grad), and ``zeta``'s and
``igamma``'s first input raise PyTorch's NotImplementedError on backward.
"""
from __future__ import annotations

import math
import types

import numpy

from .. import backend
from ..dispatch import FLOATING, FUNCTIONS, OPS, SELF_ADJOINT, apply_op, defop, expose
from ..promotion import float_type, result_type
from .elementwise import erf_array, grad_unless

_SQRT_PI = math.sqrt(math.pi)
_SQRT_2PI = math.sqrt(2 * math.pi)
_LOG_PI = math.log(math.pi)


def _floating(x):
    """``x`` as PyTorch computes a floating function of it: integers and bools in the default
    dtype, floats as they are."""
    return x if x.dtype.kind in "fc" else x.astype(float_type(x.dtype))


def _scipy(name, fix=None):
    """The forward of ``scipy.special.<name>`` (its cupyx twin on the GPU) in PyTorch's dtypes;
    ``fix(xp, x, out)`` corrects the edges where the library differs from PyTorch."""
    def fwd(xp, x):
        x = _floating(x)
        out = getattr(backend.special(xp), name)(x)
        if fix is not None:
            out = fix(xp, x, out)
        return out.astype(x.dtype, copy=False)
    fwd.__name__ = f"_{name}_fwd"
    return fwd


def _at_minus_inf(value):
    """A fix: the value at -inf, where SciPy's differs from PyTorch's."""
    def fix(xp, x, out):
        return xp.where(xp.isneginf(x), value, out)
    return fix


def _defunary(name, fwd, rule, node_name=None, public=None, methods=None, doc=""):
    """One elementwise special function: its op, its public name and Tensor methods."""
    return defop(name, fwd, (rule,), jvp=SELF_ADJOINT, node_name=node_name,
                 public=public or (), methods=methods or (),
                 inplace=tuple(m + "_" for m in (methods or ())), doc=doc, promote=FLOATING)


def _not_differentiable(what):
    def rule(F, g, out, *args, **attrs):
        raise NotImplementedError(f"the derivative for '{what}' is not implemented.")
    return rule


# --------------------------------------------------------------------------- gamma family

# lgamma'(x) = digamma(x); digamma'(x) = polygamma(1, x); polygamma(n)' = polygamma(n + 1).
# lgamma(-inf) is inf in PyTorch (|Gamma| has poles all along the negative axis); SciPy: -inf.
_lgamma_fwd = _scipy("gammaln", _at_minus_inf(numpy.inf))
_defunary("lgamma", _lgamma_fwd, lambda F, g, out, x: g * F.digamma(x),
          public="lgamma", methods=("lgamma",),
          doc="Natural log of the absolute value of the gamma function (torch.lgamma).")
_defunary("digamma", _scipy("digamma"), lambda F, g, out, x: g * F.polygamma(x, n=1),
          public="digamma", methods=("digamma",),
          doc="The logarithmic derivative of the gamma function (torch.digamma); -inf at 0, "
              "as PyTorch since 1.8.")


def _polygamma_fwd(xp, x, n):
    x = _floating(x)
    sp = backend.special(xp)
    # scipy's polygamma is a Python function computing in float64 (n >= 1 through zeta).
    # Towards -inf poles keep coming, so there is no limit: NaN, as PyTorch (SciPy: inf).
    # n as an array: CuPy's polygamma takes ``cupy.where(n == 0, ...)``, which a Python int
    # breaks (seen on an H200); SciPy takes either.
    out = sp.digamma(x) if n == 0 else _at_minus_inf(numpy.nan)(xp, x, sp.polygamma(xp.asarray(n), x))
    return out.astype(x.dtype, copy=False)


defop("polygamma", _polygamma_fwd, (lambda F, g, out, x, n: g * F.polygamma(x, n=n + 1),),
      jvp=SELF_ADJOINT, node_name="PolygammaBackward0")


def _check_polygamma(n):
    if isinstance(n, bool) or not isinstance(n, (int, numpy.integer)):
        raise TypeError(f"polygamma(): argument 'n' must be int, not {type(n).__name__}")
    if n < 0:   # PyTorch's words
        raise RuntimeError("polygamma(n, x) does not support negative n.")


@expose(public="polygamma")
def polygamma(n, input):  # noqa: A002 - PyTorch's names
    """The ``n``-th derivative of digamma (torch.polygamma); ``n = 0`` is digamma itself."""
    _check_polygamma(n)
    return apply_op(OPS["polygamma"], (input,), {"n": int(n)})


@expose(methods="polygamma")
def _polygamma_method(self, n):
    return polygamma(n, self)


@expose(methods="polygamma_")
def _polygamma_inplace(self, n):
    _check_polygamma(n)
    return self.copy_(polygamma(n, self))


def _mvlgamma_fwd(xp, x, p):
    x = _floating(x)
    out = xp.full(x.shape, p * (p - 1) / 4 * _LOG_PI, dtype=x.dtype)
    for i in range(p):
        out += _lgamma_fwd(xp, x - i / 2)
    return out


def _mvlgamma_vjp(F, g, out, x, p):
    total = F.digamma(x)
    for i in range(1, p):
        total = total + F.digamma(x - i / 2)
    return g * total


def _check_mvlgamma(x, p):
    # PyTorch 2.13 checks p only (an element at or below (p - 1) / 2 gives inf or NaN).
    if isinstance(p, bool) or not isinstance(p, (int, numpy.integer)) or p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")


defop("mvlgamma", _mvlgamma_fwd, (_mvlgamma_vjp,), jvp=SELF_ADJOINT, check=_check_mvlgamma,
      public="mvlgamma", methods="mvlgamma", inplace="mvlgamma_",
      doc="The multivariate log-gamma function of dimension ``p`` (torch.mvlgamma).")


# --------------------------------------------------------------------------- error functions

# erfinv'(x) = sqrt(pi) / 2 * exp(erfinv(x)^2).
_defunary("erfinv", _scipy("erfinv"),
          lambda F, g, out, x: g * F.exp(out * out) * (_SQRT_PI / 2),
          public="erfinv", methods=("erfinv",),
          doc="Inverse of the error function (torch.erfinv); ±inf at ±1, NaN outside.")
# erfcx(x) = exp(x^2) erfc(x): erfcx' = 2 x erfcx(x) - 2 / sqrt(pi).
_defunary("special_erfcx", _scipy("erfcx"),
          lambda F, g, out, x: g * (2 * x * out - 2 / _SQRT_PI),
          node_name="SpecialErfcxBackward0")
# ndtri = Phi^-1: its derivative is 1 / phi(ndtri(p)) = sqrt(2 pi) exp(ndtri(p)^2 / 2).
_defunary("special_ndtri", _scipy("ndtri"),
          lambda F, g, out, x: g * F.exp(out * out * 0.5) * _SQRT_2PI,
          node_name="SpecialNdtriBackward0")
# log_ndtr' = phi(x) / Phi(x) = exp(-x^2 / 2 - log_ndtr(x)) / sqrt(2 pi), PyTorch's form
# (no Phi(x) that underflows far out on the left).
_defunary("special_log_ndtr", _scipy("log_ndtr"),
          lambda F, g, out, x: g * F.exp(-(out + x * x * 0.5)) * (1 / _SQRT_2PI),
          node_name="SpecialLogNdtrBackward0")


def ndtr(input):  # noqa: A002
    """The standard normal CDF (torch.special.ndtr): ``erfc(-x / sqrt 2) / 2``, as PyTorch
    composes it (erfc, not 1 + erf: no cancellation far out on the left)."""
    return apply_op(OPS["erfc"], (input * -math.sqrt(0.5),), None) * 0.5


# --------------------------------------------------------------------------- Bessel family

# i0' = i1. At ±inf SciPy's i0 and i1 are NaN, and so are PyTorch's.
_defunary("i0", _scipy("i0"),
          lambda F, g, out, x: g * F.special_i1(x),
          public="i0", methods=("i0",),
          doc="The modified Bessel function of the first kind, order 0 (torch.i0).")
# i0e = exp(-|x|) i0(x): i0e' = i1e(x) - sign(x) i0e(x).
_defunary("special_i0e", _scipy("i0e"),
          lambda F, g, out, x: g * (F.special_i1e(x) - F.sign(x) * out),
          node_name="SpecialI0EBackward0")


def _tiny(F, x):
    """Where ``|x|`` is at most the dtype's epsilon: there PyTorch takes i1's and i1e's slope
    at 0 (1/2), as ``out / x`` would lose it (0 / 0 at 0)."""
    return F.abs(x) <= numpy.finfo(x.dtype).eps


def _i1_vjp(F, g, out, x):
    tiny = _tiny(F, x)
    safe = F.where(tiny, 1.0, x)
    return g * F.where(tiny, 0.5, F.i0(x) - out / safe)


def _i1e_vjp(F, g, out, x):
    tiny = _tiny(F, x)
    safe = F.where(tiny, 1.0, x)
    return g * F.where(tiny, 0.5, F.special_i0e(x) - out * (F.sign(x) + 1 / safe))


_defunary("special_i1", _scipy("i1"), _i1_vjp,
          node_name="SpecialI1Backward0")
_defunary("special_i1e", _scipy("i1e"), _i1e_vjp, node_name="SpecialI1EBackward0")


def _bessel(name, scipy_name, fix=None):
    """A Bessel function PyTorch does not differentiate: its result never requires grad."""
    return defop(name, _scipy(scipy_name, fix), ())


_bessel("special_bessel_j0", "j0")
_bessel("special_bessel_j1", "j1")
_bessel("special_bessel_y0", "y0")
_bessel("special_bessel_y1", "y1")
_bessel("special_modified_bessel_i0", "i0")
_bessel("special_modified_bessel_i1", "i1")
_bessel("special_modified_bessel_k0", "k0")
_bessel("special_modified_bessel_k1", "k1")
_bessel("special_scaled_modified_bessel_k0", "k0e")
_bessel("special_scaled_modified_bessel_k1", "k1e")


def _spherical_j0_fwd(xp, x):
    # sin(x) / x: 1 at 0 and 0 at ±inf, its limits (and PyTorch's values).
    x = _floating(x)
    zero, inf = x == 0, xp.isinf(x)
    out = xp.sin(xp.where(inf, 0, x)) / xp.where(zero | inf, 1, x)
    return xp.where(zero, 1, out).astype(x.dtype, copy=False)


defop("special_spherical_bessel_j0", _spherical_j0_fwd, ())


# --------------------------------------------------------------------------- sinc, logit, entr


def _sinc_fwd(xp, x):
    # sin(pi x) / (pi x), 1 at 0 (written out, not numpy.sinc: the same arithmetic, in this
    # package's code, whose floating-point warnings are PyTorch's silence: see ops/__init__).
    x = _floating(x)
    t = x * math.pi
    zero = x == 0
    return xp.where(zero, x.dtype.type(1), xp.sin(t) / xp.where(zero, 1, t))


# sinc'(x) = pi f(pi x) with f(t) = (t cos t - sin t) / t^2, whose two terms cancel near 0:
# there its series, f(t) = sum over k >= 1 of (-1)^k 2k t^(2k-1) / (2k+1)!, to t^15 for
# |t| < 1 (the next term is below 1e-16 of the sum). PyTorch evaluates the cancelling form
# everywhere (at x = 1e-8 it gives -2.1e-8 where the slope is -3.3e-8).
_SINC_SERIES = [(-1) ** k * 2 * k / math.factorial(2 * k + 1) for k in range(1, 9)]


def _sinc_vjp(F, g, out, x):
    t = x * math.pi
    small = F.abs(t) < 1
    big = F.where(small, 1.0, t)
    slope = (t * F.cos(big) - F.sin(big)) / (big * big)
    t2 = t * t
    series = _SINC_SERIES[-1]
    for c in reversed(_SINC_SERIES[:-1]):
        series = series * t2 + c
    return g * F.where(small, series * t, slope) * math.pi


_defunary("sinc", _sinc_fwd, _sinc_vjp, public="sinc", methods=("sinc",),
          doc="The normalized sinc function sin(pi x) / (pi x), 1 at 0 (torch.sinc).")


def _logit_fwd(xp, x, eps=None):
    x = _floating(x)
    if eps is not None:
        x = xp.clip(x, eps, 1 - eps)
    return xp.log(x / (1 - x)).astype(x.dtype, copy=False)


def _logit_vjp(F, g, out, x, eps=None):
    # PyTorch's logit_backward: NaN outside [0, 1] without eps; with eps, 0 outside
    # [eps, 1 - eps] (the clamp's flat parts).
    d = g / (x * (1 - x))
    if eps is None:
        return F.where((x < 0) | (x > 1), math.nan, d)
    return grad_unless(F, d, (x < eps) | (x > 1 - eps))


defop("logit", _logit_fwd, (_logit_vjp,), jvp=SELF_ADJOINT, public="logit", methods="logit",
      inplace="logit_", doc="log(x / (1 - x)), ``x`` clamped to [eps, 1 - eps] first when "
      "``eps`` is given (torch.logit).")


def _entr_fwd(xp, x):
    x = _floating(x)
    return backend.special(xp).entr(x).astype(x.dtype, copy=False)


# entr(x) = -x log x: entr' = -(1 + log x); inf at 0 and NaN below, as PyTorch's.
_defunary("special_entr", _entr_fwd, lambda F, g, out, x: g * -(1 + F.log(x)),
          node_name="SpecialEntrBackward0")


# --------------------------------------------------------------------------- two arguments


def _binary_operands(xp, x, y):
    """``x`` and ``y`` as arrays of PyTorch's result dtype of the two (integers promoted to
    the default float): NumPy alone would make an int64 tensor with 2.5 float64."""
    dt = float_type(result_type(x, y))
    return xp.asarray(x, dtype=dt), xp.asarray(y, dtype=dt)


def _xlog1py_fwd(xp, x, y):
    # x * log1p(y), 0 where x == 0 unless y is NaN (as xlogy).
    x, y = _binary_operands(xp, x, y)
    safe = xp.where((x == 0) & ~xp.isnan(y), y.dtype.type(0), y)
    return x * xp.log1p(safe)


# PyTorch 2.13: d/dx = xlog1py(g, y), 0 where x == 0 and y <= -1; d/dy = g x / (y + 1).
defop("special_xlog1py", _xlog1py_fwd,
      (lambda F, g, out, x, y: grad_unless(F, F.special_xlog1py(g, y), (x == 0) & (y <= -1)),
       lambda F, g, out, x, y: g * x / (y + 1)),
      jvp=SELF_ADJOINT, node_name="SpecialXlog1PyBackward0")


def _zeta_fwd(xp, x, q):
    x, q = _binary_operands(xp, x, q)
    return backend.special(xp).zeta(x, q).astype(x.dtype, copy=False)


# The Hurwitz zeta function; PyTorch differentiates it in neither argument.
defop("special_zeta", _zeta_fwd, (_not_differentiable("zeta"), _not_differentiable("zeta")),
      jvp=SELF_ADJOINT, node_name="SpecialZetaBackward0")


def _igamma_grad_x(F, g, out, a, x, upper):
    # d/dx P(a, x) = x^(a - 1) e^-x / Gamma(a); Q = 1 - P: its negative.
    d = g * F.exp((a - 1) * F.log(x) - x - F.lgamma(a))
    return -d if upper else d


def _igamma(upper):
    name = "igammac" if upper else "igamma"

    def fwd(xp, a, x):
        for v in (a, x):
            if getattr(v, "dtype", numpy.dtype(float)).kind not in "f":
                # PyTorch: NotImplementedError "igamma_cpu" not implemented for 'Long'.
                raise NotImplementedError(f"{name}: not implemented for dtype {v.dtype} "
                                          "(floating inputs only), as in PyTorch")
        a, x = _binary_operands(xp, a, x)
        sp = backend.special(xp)
        return (sp.gammaincc if upper else sp.gammainc)(a, x).astype(a.dtype, copy=False)

    # The regularized lower (upper) incomplete gamma function; PyTorch differentiates it in
    # x only.
    return defop(name, fwd, (_not_differentiable(f"{name}: input"),
                             lambda F, g, out, a, x: _igamma_grad_x(F, g, out, a, x, upper)),
                 jvp=SELF_ADJOINT, node_name="IgammacBackward0" if upper else "IgammaBackward0")


_igamma(False)
_igamma(True)


def _binary(name):
    def fn(input, other):  # noqa: A002
        return apply_op(OPS[name], (input, other), None)
    return fn


igamma = expose(public="igamma", methods="igamma")(_binary("igamma"))
igammac = expose(public="igammac", methods="igammac")(_binary("igammac"))


def _unary(name):
    def fn(input):  # noqa: A002
        return apply_op(OPS[name], (input,), None)
    fn.__name__ = name.removeprefix("special_")
    return fn


def _with_dtype(name):
    """torch.special's softmax and log_softmax: ``dtype`` casts the input first."""
    def fn(input, dim, *, dtype=None):  # noqa: A002
        x = input if dtype is None else input.to(dtype)
        return apply_op(OPS[name], (x,), {"dim": dim})
    fn.__name__ = name
    return fn


# --------------------------------------------------------------------------- torch.special

#: ``gradtrace.autograd.special``: torch.special's functions (PyTorch's names; aliases such
#: as ``gammaln``, ``psi`` and ``expit`` are the same functions as lgamma, digamma, sigmoid).
special = types.ModuleType("gradtrace.autograd.special", "Special functions (torch.special).")
for _name in ("digamma", "erf", "erfc", "erfinv", "exp2", "expm1", "i0", "log1p", "logit",
              "round", "sinc", "xlogy", "logsumexp"):
    setattr(special, _name, FUNCTIONS[_name])
special.polygamma = polygamma
special.gammaln, special.psi, special.expit = (FUNCTIONS["lgamma"], FUNCTIONS["digamma"],
                                               FUNCTIONS["sigmoid"])
special.multigammaln = FUNCTIONS["mvlgamma"]
special.gammainc, special.gammaincc = igamma, igammac
special.ndtr = ndtr
special.softmax, special.log_softmax = _with_dtype("softmax"), _with_dtype("log_softmax")
for _name in ("erfcx", "ndtri", "log_ndtr", "i0e", "i1", "i1e", "entr", "bessel_j0",
              "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
              "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0",
              "scaled_modified_bessel_k1", "spherical_bessel_j0"):
    setattr(special, _name, _unary("special_" + _name))
special.xlog1py = _binary("special_xlog1py")
special.zeta = _binary("special_zeta")
del _name
expose(public="special")(special)
