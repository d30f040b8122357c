"""Products, sums of products, integrals and derivatives a PyTorch user reaches for
(``inner``, ``addmv``, ``linalg.multi_dot``, ``logdet``, ``renorm``, ``trapezoid``,
``gradient``, ``cov``...), and the distances that torch has both at the top level and in
``nn.functional``.

All are composites of the public functions: they need no backward code, and their nodes are
the primitives' (``addmv`` shows AddBackward0 over MvBackward0, as the composites in
linalg_api.py).
"""
from __future__ import annotations

import builtins
import itertools

from ..dispatch import defcomposite, expose, expose_inplace
from ..dtypes import is_floating
from .._tensor import Tensor, tensor
from .arguments import _dim
from .linalg_api import _scaled_sum, bmm, dot, linalg, mv, outer, slogdet, tensordot
from .shape_api import cat
from .reduction import std, vector_norm


# --------------------------------------------------------------------------- products


@defcomposite("inner", public="inner", methods="inner")
def inner(input, other):  # noqa: A002 - PyTorch's names
    """The sum of products over the last dim of both (a 0-d tensor scales the other)."""
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but "
                           f"got shapes {list(input.shape)} and {list(other.shape)}.")
    return tensordot(input, other, ([input.ndim - 1], [other.ndim - 1]))


@expose(public="vdot", methods="vdot")
def vdot(input, other):  # noqa: A002
    """``conj(input) . other`` of two 1-D tensors (real tensors: :func:`dot`)."""
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D "
                           "tensors")
    if input.dtype.kind == "c" or other.dtype.kind == "c":
        raise NotImplementedError("vdot: complex tensors are not supported (no conj op)")
    return dot(input, other)


@defcomposite("addmv", public="addmv", methods="addmv")
def addmv(input, mat, vec, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * (mat @ vec)``."""
    return _scaled_sum(input, mv(mat, vec), beta, alpha)


@defcomposite("addr", public="addr", methods="addr")
def addr(input, vec1, vec2, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * outer(vec1, vec2)``."""
    for name, v in (("vec1", vec1), ("vec2", vec2)):
        if v.ndim != 1:
            raise RuntimeError(f"addr: Expected 1-D argument {name}, but got {v.ndim}-D")
    return _scaled_sum(input, outer(vec1, vec2), beta, alpha)


@defcomposite("addbmm", public="addbmm", methods="addbmm")
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * sum_i batch1[i] @ batch2[i]``."""
    return _scaled_sum(input, bmm(batch1, batch2).sum(dim=0), beta, alpha)


for _fn in (addmv, addr, addbmm):
    expose_inplace(_fn, _fn.__name__ + "_")
del _fn


@defcomposite("multi_dot", public=())
def multi_dot(tensors):
    """``tensors[0] @ tensors[1] @ ...``; the first may be 1-D (a row) and the last 1-D (a
    column), the others are matrices (torch.linalg.multi_dot)."""
    tensors = list(tensors)
    n = len(tensors)
    if n < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {n}")
    for i, t in enumerate(tensors):
        ends = i == 0 or i == n - 1
        if t.ndim != 2 and not (ends and t.ndim == 1):
            where = "first" if i == 0 else "last" if i == n - 1 else None
            if where:
                raise RuntimeError(f"multi_dot(): the {where} tensor must be 1D or 2D but got "
                                   f"{t.ndim}D")
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D")
    out = tensors[0]
    for t in tensors[1:]:
        out = out @ t
    return out


linalg.multi_dot = multi_dot


@expose(public="chain_matmul")
def chain_matmul(*matrices):
    """The product of 2-D matrices, left to right (deprecated in torch for
    ``linalg.multi_dot``)."""
    for i, m in enumerate(matrices):
        if m.ndim != 2:
            raise RuntimeError(f"Tensor dimension is {m.ndim}, expected 2 instead.")
    if len(matrices) == 1:
        return matrices[0].clone()
    return multi_dot(matrices)


@defcomposite("logdet", public="logdet", methods="logdet")
def logdet(A):  # noqa: N803 - PyTorch's name
    """``log(det(A))``: NaN where the determinant is negative, -inf where it is 0."""
    sign, logabsdet = slogdet(A)
    return logabsdet.where(sign >= 0, float("nan"))   # WhereBackward0, as PyTorch's


@defcomposite("renorm", public="renorm", methods="renorm")
def renorm(input, p, dim, maxnorm):  # noqa: A002
    """Each slice along ``dim`` whose ``p``-norm exceeds ``maxnorm`` scaled down to it (by
    ``maxnorm / (norm + 1e-7)``, as PyTorch's)."""
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if input.ndim <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.ndim} "
                           "dimensions")
    d = _dim(dim, input.ndim, "renorm")
    others = tuple(i for i in range(input.ndim) if i != d)
    norm = vector_norm(input, p, others, True)
    factor = (maxnorm / (norm + 1e-7)).masked_fill(norm <= maxnorm, 1.0)
    return input * factor


expose_inplace(renorm, "renorm_")


@expose(public="std_mean")
def std_mean(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """``(std, mean)`` over ``dim``."""
    return (std(x, dim, unbiased, keepdim, correction=correction),
            x.mean(dim=dim, keepdim=keepdim))


# --------------------------------------------------------------------------- integrals


def _trapezoid_terms(y, x, dx, dim, op):
    d = _dim(dim, y.ndim, op)
    n = y.shape[d]
    if n == 0:
        return None, d
    pairs = y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)
    if x is None:
        return pairs * (0.5 if dx is None else dx / 2), d
    if x.ndim == 1:
        if x.shape[0] != n:
            raise RuntimeError(f"{op}: There must be one `x` value for each sample point")
        shape = [1] * y.ndim
        shape[d] = n - 1
        step = (x[1:] - x[:-1]).reshape(*shape)
    else:
        step = x.diff(dim=dim)
    return pairs * step / 2, d


@defcomposite("trapezoid", public="trapezoid")
def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoidal rule along ``dim``: sample points ``x`` (a tensor) or spacing ``dx``
    (1 by default)."""
    if x is not None and not isinstance(x, Tensor):   # torch.trapezoid(y, 0.5): the spacing
        x, dx = None, x
    terms, d = _trapezoid_terms(y, x, dx, dim, "trapezoid")
    if terms is None:
        return y.sum(dim=d) * 0
    return terms.sum(dim=d)


@expose(public="trapz")
def trapz(y, x=None, *, dx=None, dim=-1):
    """Alias of :func:`trapezoid`."""
    return trapezoid(y, x, dx=dx, dim=dim)


@defcomposite("cumulative_trapezoid", public="cumulative_trapezoid")
def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoidal rule along ``dim`` (one value fewer than samples)."""
    if x is not None and not isinstance(x, Tensor):
        x, dx = None, x
    terms, d = _trapezoid_terms(y, x, dx, dim, "cumulative_trapezoid")
    if terms is None:
        return y
    return terms.cumsum(d)


def _along(t, d, ndim):
    """A 1-D tensor shaped to broadcast along dim ``d`` of an ``ndim``-dim tensor."""
    shape = [1] * ndim
    shape[d] = -1
    return t.reshape(*shape)


def _gradient_one(f, d, step, edge_order):
    """The derivative of ``f`` along ``d``: second-order central differences inside, one-
    sided of ``edge_order`` at both ends (NumPy's and PyTorch's formulas); ``step`` a number
    or the coordinates of the samples (a 1-D tensor)."""
    n = f.shape[d]
    if n < edge_order + 1:
        raise RuntimeError("torch.gradient expected each dimension size to be at least "
                           "edge_order+1")
    f0, f1, fm1, fm2 = (f.narrow(d, i % n, 1) for i in (0, 1, -1, -2))
    lo, mid, hi = f.narrow(d, 0, n - 2), f.narrow(d, 1, n - 2), f.narrow(d, 2, n - 2)
    if not isinstance(step, Tensor):
        inner = (hi - lo) / (2 * step)
        if edge_order == 1:
            first, last = (f1 - f0) / step, (fm1 - fm2) / step
        else:
            f2, fm3 = f.narrow(d, 2, 1), f.narrow(d, n - 3, 1)
            first = (-1.5 * f0 + 2 * f1 - 0.5 * f2) / step
            last = (0.5 * fm3 - 2 * fm2 + 1.5 * fm1) / step
        return cat([first, inner, last], d)
    if step.ndim != 1 or step.shape[0] != n:
        raise RuntimeError(f"torch.gradient expected each tensor to be on the same device and "
                           f"of size {n} along dim {d}")
    dx = step[1:] - step[:-1]
    h1, h2 = _along(dx[:-1], d, f.ndim), _along(dx[1:], d, f.ndim)
    inner = (-h2 / (h1 * (h1 + h2))) * lo + ((h2 - h1) / (h1 * h2)) * mid \
        + (h1 / (h2 * (h1 + h2))) * hi
    if edge_order == 1:
        first, last = (f1 - f0) / dx[0], (fm1 - fm2) / dx[-1]
    else:
        f2, fm3 = f.narrow(d, 2, 1), f.narrow(d, n - 3, 1)
        a, b = dx[0], dx[1]
        first = (-(2 * a + b) / (a * (a + b))) * f0 + ((a + b) / (a * b)) * f1 \
            + (-a / (b * (a + b))) * f2
        a, b = dx[-2], dx[-1]
        last = (b / (a * (a + b))) * fm3 + (-(a + b) / (a * b)) * fm2 \
            + ((2 * b + a) / (b * (a + b))) * fm1
    return cat([first, inner, last], d)


@defcomposite("gradient", public="gradient")
def gradient(input, *, spacing=1, dim=None, edge_order=1):  # noqa: A002
    """The derivative of sampled values along each of ``dim`` (all dims by default), one
    tensor per dim: ``spacing`` one number, one per dim, or the sample coordinates (1-D
    tensors, one per dim; differentiable)."""
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    dims = list(range(input.ndim)) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    dims = [_dim(d, input.ndim, "gradient") for d in dims]
    if isinstance(spacing, (list, tuple)):
        if len(spacing) != len(dims) and dim is None:
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar, or "
                               f"a list of length equal to 'self.dim() = {input.ndim}', since "
                               f"dim argument was not given, but got a list of length "
                               f"{len(spacing)}")
        if len(spacing) != len(dims):
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or "
                               f"it's spacing and dim arguments to have the same length, but got "
                               f"a spacing argument of length {len(spacing)} and a dim argument "
                               f"of length {len(dims)}.")
        steps = list(spacing)
    else:
        steps = [spacing] * len(dims)
    f = input if is_floating(input.dtype) else input.float()
    return tuple(_gradient_one(f, d, h, edge_order) for d, h in zip(dims, steps))


# --------------------------------------------------------------------------- statistics


@defcomposite("cov", public="cov", methods="cov")
def cov(input, *, correction=1, fweights=None, aweights=None):  # noqa: A002
    """Covariance of the variables in the rows of ``input`` (observations in columns), with
    optional integer frequency and float observation weights, as torch.cov."""
    if input.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an "
                           f"input with {input.ndim} dimensions")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    if not is_floating(x.dtype):
        x = x.float()
    n = x.shape[1]
    w = None
    if fweights is not None:
        w = fweights
    if aweights is not None:
        w = aweights if w is None else w * aweights
    if w is None:
        avg = x.mean(dim=1)
        w_sum = n
        norm = n - correction
    else:
        w = w.to(dtype=x.dtype)
        w_sum = w.sum()
        avg = (x * w).sum(dim=1) / w_sum
        if correction == 0:
            norm = w_sum
        elif aweights is None:
            norm = w_sum - correction
        else:
            norm = w_sum - correction * (w * aweights).sum() / w_sum
    centred = x - avg.unsqueeze(1)
    weighted = centred if w is None else centred * w
    c = weighted @ centred.mT
    if isinstance(norm, Tensor):
        norm = norm.clamp(min=0)
    else:
        norm = builtins.max(norm, 0)
    out = c / norm
    return out.squeeze() if input.ndim < 2 or out.shape[0] == 1 else out


@defcomposite("corrcoef", public="corrcoef", methods="corrcoef")
def corrcoef(input):  # noqa: A002
    """Pearson correlation coefficients of the rows of ``input``, clipped to [-1, 1]."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = c.diagonal()
    stddev = d.sqrt()
    c = c / stddev.unsqueeze(1)
    c = c / stddev.unsqueeze(0)
    return c.clamp(-1, 1)


# --------------------------------------------------------------------------- distances


@defcomposite("cosine_similarity", public="cosine_similarity")
def cosine_similarity(x1, x2, dim: int = 1, eps: float = 1e-8):
    """``x1 . x2 / (max(||x1||, eps) * max(||x2||, eps))`` along ``dim`` (broadcasting)."""
    n1 = vector_norm(x1, 2, dim, True).clamp(min=eps)
    n2 = vector_norm(x2, 2, dim, True).clamp(min=eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim=dim)


@defcomposite("pairwise_distance", public="pairwise_distance")
def pairwise_distance(x1, x2, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
    """``||x1 - x2 + eps||_p`` over the last dim."""
    return vector_norm(x1 - x2 + eps, p, -1, keepdim)


@defcomposite("pdist", public="pdist")
def pdist(input, p: float = 2.0):  # noqa: A002
    """The ``p``-norm distances between each pair of rows ``i < j`` of an N x M input, in
    row-major order of the pairs (N (N - 1) / 2 values)."""
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    n = input.shape[0]
    pairs = list(itertools.combinations(range(n), 2))
    if not pairs:
        return input.sum(dim=1)[:0]
    i = tensor([a for a, _ in pairs], device=input.device)
    j = tensor([b for _, b in pairs], device=input.device)
    return vector_norm(input.index_select(0, i) - input.index_select(0, j), p, -1)
