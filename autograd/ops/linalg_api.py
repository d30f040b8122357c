"""The public functions of the linear-algebra family (``linalg.py``, ``decompositions.py``):
matrix products with their shape checks (``mm``, ``bmm``, ``einsum``, ``tensordot``...),
``diagonal``/``diag``, and ``torch.linalg``'s functions, gathered into the
``gradtrace.autograd.linalg`` namespace at the end.
"""
from __future__ import annotations

import builtins
import types
from collections import namedtuple

import numpy

from ..dispatch import defcomposite, expose, expose_inplace
from .._tensor import Tensor
from .arguments import _broadcast_shapes, _call, _dim, _ndim
from .reduction import vector_norm
from .reduction_api import amax, amin
from .shape_api import _reshape, movedim, permute


@defcomposite("bmm", public="bmm", methods="bmm")
def bmm(a, b):
    """Batched matrix product of (B, n, m) and (B, m, p) tensors."""
    if a.ndim != 3 or b.ndim != 3:
        raise RuntimeError(f"bmm: expected 3-D tensors, got shapes {list(a.shape)} and "
                           f"{list(b.shape)}")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError(f"bmm: batch sizes differ: {a.shape[0]} (shape {list(a.shape)}) and "
                           f"{b.shape[0]} (shape {list(b.shape)})")
    return _call("matmul.bmm", a, b)


@defcomposite("outer", public="outer", methods="outer")
def outer(a, b):
    """Outer product of two 1-D tensors."""
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"outer: expected 1-D tensors, got shapes {list(a.shape)} and "
                           f"{list(b.shape)}")
    return _reshape(a, (a.shape[0], 1)) * _reshape(b, (1, b.shape[0]))


@expose(public="einsum")
def einsum(equation: str, *operands):
    """Einstein summation over one or two operands (more are contracted pairwise, left to
    right). Subscripts are letters and ``...``; a letter repeated within one operand
    (``"ii->i"``, ``"ii"``) takes that operand's diagonal first."""
    from ._linalg import parse_einsum  # noqa: PLC0415

    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    subs, out = parse_einsum(equation, len(operands), repeats=True)
    if any(len(set(s.replace("...", ""))) != len(s.replace("...", "")) for s in subs):
        return _einsum_diagonals(subs, out, operands)
    for s, t in zip(subs, operands):
        core = s.replace("...", "")
        if ("..." in s and t.ndim < len(core)) or ("..." not in s and t.ndim != len(core)):
            raise RuntimeError(f"einsum: operand with subscripts '{s}' has shape "
                               f"{list(t.shape)} ({t.ndim} dims)")
    if len(operands) <= 2:
        eq = ",".join(subs) + "->" + out
        return _call("einsum", operands[0], operands[1] if len(operands) == 2 else None,
                     equation=eq)
    # Contract the first two, keeping every letter still needed later or in the output.
    later = set(out) | set("".join(subs[2:]))
    seen = subs[0] + subs[1]
    keep = ("..." if "..." in seen else "") + "".join(
        dict.fromkeys(c for c in seen.replace(".", "") if c in later))
    first = einsum(f"{subs[0]},{subs[1]}->{keep}", operands[0], operands[1])
    return einsum(",".join([keep] + subs[2:]) + "->" + out, first, *operands[2:])


@expose(public="dist", methods="dist")
def dist(input, other, p=2):  # noqa: A002 - PyTorch's names
    """The ``p``-norm of ``input - other`` (broadcast)."""
    return _call("dist", input, other, p=float(p))


def linalg_cross(input, other, *, dim=-1):  # noqa: A002
    """``torch.linalg.cross``: the cross product of 3-vectors along ``dim`` (broadcast)."""
    shape = _broadcast_shapes(tuple(input.shape), tuple(other.shape))
    d = _dim(dim, len(shape), "linalg.cross")
    if input.ndim != other.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{input.shape[d]} and {other.shape[d]}")
    return _call("linalg_cross", input, other, dim=d)


@expose(public="cross", methods="cross")
def cross(input, other, dim=None):  # noqa: A002
    """``torch.cross``: as :func:`linalg_cross`; without ``dim``, the first dim of size 3."""
    if dim is None:
        dim = next((i for i, n in enumerate(input.shape) if n == 3), -1)
    return linalg_cross(input, other, dim=dim)


SlogdetResult = namedtuple("slogdet", ["sign", "logabsdet"])


def linalg_inv(A):  # noqa: N803 - PyTorch's name
    """``torch.linalg.inv``: the inverse of each square matrix of ``A`` (..., n, n)."""
    return _call("linalg_inv", A)


def linalg_det(A):  # noqa: N803
    """``torch.linalg.det``: the determinant of each square matrix of ``A`` (..., n, n)."""
    return _call("linalg_det", A)


@expose(public="slogdet", methods="slogdet")
def slogdet(A):  # noqa: N803
    """``torch.linalg.slogdet``: (sign, logabsdet) of each square matrix's determinant.

    Returns:
        ``(sign, logabsdet)`` with attribute names, as PyTorch's ``torch.return_types``.
    """
    return SlogdetResult(*_call("linalg_slogdet", A))


def linalg_solve(A, B, *, left=True):  # noqa: N803
    """``torch.linalg.solve``: X with ``A X = B`` (``X A = B`` when ``left`` is False),
    batched and broadcast over leading dims. B is a (batch of) vector(s) when it is 1-D or
    has A's shape without the last dim (PyTorch's rule)."""
    return _call("linalg_solve", A, B, left=bool(left))


# torch.return_types' names and fields.
QRResult = namedtuple("linalg_qr", ["Q", "R"])
EighResult = namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
SVDResult = namedtuple("linalg_svd", ["U", "S", "Vh"])
QrResult = namedtuple("qr", ["Q", "R"])
SvdResult = namedtuple("svd", ["U", "S", "V"])


def linalg_cholesky(A, *, upper=False):  # noqa: N803
    """``torch.linalg.cholesky``: L with ``A = L L^T`` (U with ``A = U^T U`` when ``upper``)
    for each symmetric positive-definite matrix of ``A`` (its lower triangle is read; the
    upper one when ``upper``)."""
    return _call("linalg_cholesky", A, upper=bool(upper))


def linalg_solve_triangular(A, B, *, upper, left=True, unitriangular=False):  # noqa: N803
    """``torch.linalg.solve_triangular``: X with ``A X = B`` (``X A = B`` when not ``left``)
    for triangular A (the triangle ``upper`` names is read; its diagonal taken as ones when
    ``unitriangular``). B is a (batch of) matrices, broadcast with A over leading dims."""
    return _call("linalg_solve_triangular", A, B, upper=bool(upper), left=bool(left),
                 unitriangular=bool(unitriangular))


@expose(public="cholesky_solve", methods="cholesky_solve")
def cholesky_solve(input, input2, upper=False):  # noqa: A002 - PyTorch's names
    """``torch.cholesky_solve``: X with ``A X = B`` for ``B = input`` and A given by its
    Cholesky factor ``input2`` (L, or U when ``upper``): two triangular solves."""
    return _call("cholesky_solve", input, input2, upper=bool(upper))


def linalg_qr(A, mode="reduced"):  # noqa: N803
    """``torch.linalg.qr``: (Q, R) with ``A = Q R``; ``mode`` "reduced" (Q m x k), "complete"
    (Q m x m) or "r" (R only, Q an empty tensor)."""
    return QRResult(*_call("linalg_qr", A, mode=mode))


@expose(public="qr", methods="qr")
def qr(input, some=True):  # noqa: A002
    """``torch.qr`` (deprecated in PyTorch): :func:`linalg_qr` in mode "reduced" when ``some``,
    else "complete"."""
    return QrResult(*linalg_qr(input, "reduced" if some else "complete"))


def linalg_eigh(A, UPLO="L"):  # noqa: N803
    """``torch.linalg.eigh``: the eigenvalues (ascending) and eigenvectors (columns) of each
    symmetric matrix of ``A``, reading its lower (``UPLO="L"``) or upper triangle. An
    eigenvector's sign is arbitrary: differentiate functions that do not depend on it."""
    return EighResult(*_call("linalg_eigh", A, UPLO=UPLO))


def linalg_eigvalsh(A, UPLO="L"):  # noqa: N803
    """``torch.linalg.eigvalsh``: the eigenvalues of :func:`linalg_eigh` (same node)."""
    return linalg_eigh(A, UPLO).eigenvalues


def linalg_svd(A, full_matrices=True):  # noqa: N803
    """``torch.linalg.svd``: (U, S, Vh) with ``A = U diag(S) Vh``, S descending; U and Vh
    square when ``full_matrices``. Singular vectors' signs are arbitrary: differentiate
    functions that do not depend on them."""
    return SVDResult(*_call("linalg_svd", A, full_matrices=bool(full_matrices)))


def linalg_svdvals(A):  # noqa: N803
    """``torch.linalg.svdvals``: the singular values of :func:`linalg_svd` (same node)."""
    return linalg_svd(A, full_matrices=False).S


@expose(public="svd", methods="svd")
def svd(input, some=True, compute_uv=True):  # noqa: A002
    """``torch.svd`` (deprecated in PyTorch): (U, S, V) with V, not Vh; reduced when ``some``.
    Without ``compute_uv``, U and V are zeros of shapes (m, m) and (n, n), as PyTorch's."""
    if not compute_uv:
        s = linalg_svdvals(input)
        m, n = input.shape[-2:]
        batch = tuple(input.shape[:-2])
        return SvdResult(input.new_zeros(batch + (m, m)), s, input.new_zeros(batch + (n, n)))
    u, s, vh = linalg_svd(input, full_matrices=not some)
    return SvdResult(u, s, vh.mT)


@expose(public="pinverse", methods="pinverse")
def pinverse(input, rcond=1e-15):  # noqa: A002
    """``torch.pinverse``: :func:`linalg_pinv` with ``rtol=rcond``."""
    return linalg_pinv(input, rtol=rcond)


def linalg_pinv(A, *, atol=None, rtol=None, hermitian=False):  # noqa: N803
    """``torch.linalg.pinv``: the pseudo-inverse of each matrix of ``A`` (from its SVD; its
    eigendecomposition when ``hermitian``); singular values at or below
    ``max(atol, rtol * largest)`` count as 0 (rtol: eps * max(m, n) when neither is given)."""
    return _call("linalg_pinv", A, atol=atol, rtol=rtol, hermitian=bool(hermitian))


LstsqResult = namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def linalg_lstsq(A, B, rcond=None, *, driver=None):  # noqa: N803
    """``torch.linalg.lstsq``: the least-squares solution X of ``A X = B`` (the minimum-norm
    one, pinv(A) B, singular values below ``rcond`` times the largest counting as 0; rcond
    defaults to eps * max(m, n)), with PyTorch's other outputs for the CPU's ``driver``
    (default "gelsy"): residuals (squared, summed over rows) for m > n at full rank except
    with gelsy, the rank except with gels, the singular values with gelsd and gelss; empty
    tensors otherwise. B may be a (batch of) vector(s) of A's rows.

    NOTE: only the solution has PyTorch's node (LinalgLstsqBackward0); the residuals are
    computed from it, under the nodes of that arithmetic.
    """
    driver = "gelsy" if driver is None else driver
    if driver not in _LSTSQ_DRIVERS:
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of "
                           "(gels, gelsy, gelsd, gelss)")
    m, n = (A.shape[-2], A.shape[-1]) if _ndim(A) >= 2 else (0, 0)
    if rcond is None:
        rcond = float(numpy.finfo(A.dtype).eps) * builtins.max(m, n) if m else 0.0
    x = _call("linalg_lstsq", A, B, rcond=float(rcond))
    empty = A.new_zeros((0,))
    svals = rank = None
    if driver != "gels":
        svals = linalg_svdvals(A.detach())
        top = svals[..., :1] if n and m else svals
        rank = (svals > top * rcond).sum(-1) if n and m else svals.sum(-1).to(dtype="int64")
    residuals = empty
    if m > n and driver != "gelsy" and (rank is None or bool((rank == n).all())):
        vector = B.ndim == A.ndim - 1
        res = A @ (x.unsqueeze(-1) if vector else x) - (B.unsqueeze(-1) if vector else B)
        residuals = (res * res).sum(-2)
        residuals = residuals.squeeze(-1) if vector else residuals
    return LstsqResult(x, residuals,
                       rank if rank is not None else empty.to(dtype="int64"),
                       svals if driver in ("gelsd", "gelss") else empty)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False):  # noqa: N803
    """``torch.linalg.matrix_rank``: the number of singular values (|eigenvalues| when
    ``hermitian``) above max(atol, rtol * the largest), as int64 (rtol defaults to
    eps * max(m, n) when atol is not given or 0, as pinv's)."""
    A = A.detach()
    m, n = A.shape[-2:]
    if rtol is None:
        rtol = float(numpy.finfo(A.dtype).eps) * builtins.max(m, n) if not atol else 0.0
    s = linalg_eigvalsh(A).abs() if hermitian else linalg_svdvals(A)
    top = amax(s, -1, keepdim=True) if builtins.min(m, n) else s.sum(-1, keepdim=True)
    tol = (top * rtol).clamp(min=float(atol or 0.0))
    return (s > tol).sum(-1).to(dtype="int64")


@expose(public="matrix_power", methods="matrix_power")
def matrix_power(A, n):  # noqa: N803
    """``torch.linalg.matrix_power``: A^n by repeated squaring; A^-n is inv(A)^n; A^0 the
    identity (which, unlike PyTorch's, does not require grad)."""
    if _ndim(A) < 2:
        raise RuntimeError("linalg.matrix_power: The input tensor A must have at least 2 "
                           "dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError("linalg.matrix_power: A must be batches of square matrices, but "
                           f"they are {A.shape[-2]} by {A.shape[-1]} matrices")
    n = int(n)
    if n == 0:
        eye = A.device.xp.eye(A.shape[-1], dtype=A.dtype)
        return Tensor._make(A.device.xp.broadcast_to(eye, tuple(A.shape)).copy(), False, None,
                            0, [0], A.device)
    base = linalg_inv(A) if n < 0 else A
    n = builtins.abs(n)
    if n == 1:
        return base.clone()
    result = None
    while n:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    return result


@expose(public="matrix_exp", methods="matrix_exp")
def matrix_exp(A):  # noqa: N803
    """``torch.linalg.matrix_exp``: the exponential of each square matrix of ``A``."""
    return _call("linalg_matrix_exp", A)


_MATRIX_ORDS = ("fro", "nuc", 2, -2, 1, -1, float("inf"), float("-inf"))


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):  # noqa: A002,N803
    """``torch.linalg.matrix_norm``: "fro" and "nuc" norms, the spectral norms (2: the largest
    singular value, -2 the smallest) and the induced 1 / inf norms (largest absolute column /
    row sum; -1 / -inf the smallest), over the two dims ``dim``."""
    if _ndim(A) < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 "
                           "dimensions.")
    if ord not in _MATRIX_ORDS:
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    dim = tuple(dim)
    d0, d1 = (_dim(d, A.ndim, "linalg.matrix_norm") for d in dim)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got {dim}")
    if dtype is not None:
        A = A.to(dtype=dtype)
    if ord == "fro":
        return vector_norm(A, 2, dim=(d0, d1), keepdim=keepdim)
    if ord in ("nuc", 2, -2):
        s = linalg_svdvals(movedim(A, (d0, d1), (-2, -1)))
        out = s.sum(-1) if ord == "nuc" else amax(s, -1) if ord == 2 else amin(s, -1)
        if keepdim:
            for d in sorted((d0, d1)):
                out = out.unsqueeze(d)
        return out
    # Induced norms: 1 sums over rows (a column's sum), inf over columns.
    summed, other = (d0, d1) if builtins.abs(ord) == 1 else (d1, d0)
    sums = A.abs().sum(dim=summed, keepdim=keepdim)
    other -= 1 if not keepdim and summed < other else 0
    return (amax if ord > 0 else amin)(sums, other, keepdim=keepdim)


def linalg_norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):  # noqa: A002,N803
    """``torch.linalg.norm``: :func:`matrix_norm` over two dims (``dim`` a pair, or a 2-D
    ``A`` with an ``ord``), else :func:`vector_norm` (a 1-D ``A`` or ``dim`` one dim; no
    ``ord`` and no ``dim``: the 2-norm of all entries)."""
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) == 2:
        return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    if dim is None and ord is not None:
        if _ndim(A) == 2:
            return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
        if _ndim(A) != 1:
            raise RuntimeError("linalg.norm: If dim is not specified but ord is, the input "
                               f"must be 1D or 2D. Got {_ndim(A)}D.")
    return vector_norm(A, 2 if ord is None else ord, dim=dim, keepdim=keepdim, dtype=dtype)


#: ``gradtrace.autograd.linalg``: the functions of ``torch.linalg`` that exist here.
linalg = types.ModuleType("gradtrace.autograd.linalg", "Linear algebra functions (torch.linalg).")
linalg.vector_norm = vector_norm
linalg.matrix_norm = matrix_norm
linalg.norm = linalg_norm
linalg.cross = linalg_cross
linalg.inv = linalg_inv
linalg.det = linalg_det
linalg.slogdet = slogdet
linalg.solve = linalg_solve
linalg.solve_triangular = linalg_solve_triangular
linalg.cholesky = linalg_cholesky
linalg.qr = linalg_qr
linalg.eigh = linalg_eigh
linalg.eigvalsh = linalg_eigvalsh
linalg.svd = linalg_svd
linalg.svdvals = linalg_svdvals
linalg.pinv = linalg_pinv
linalg.lstsq = linalg_lstsq
linalg.matrix_rank = matrix_rank
linalg.matrix_power = matrix_power
linalg.matrix_exp = matrix_exp
expose(public="linalg")(linalg)


def _need(op, x, ndim, what):
    if x.ndim != ndim:
        raise RuntimeError(f"{op}: {what} must be a {ndim}-D tensor, got shape {list(x.shape)}")


@expose(public="mm")
def mm(input, mat2):  # noqa: A002
    """Product of two matrices."""
    _need("mm", input, 2, "self")
    _need("mm", mat2, 2, "mat2")
    return _call("matmul", input, mat2)


@expose(public="mv", methods="mv")
def mv(input, vec):  # noqa: A002
    """Matrix-vector product."""
    _need("mv", input, 2, "input")
    _need("mv", vec, 1, "vec")
    return _call("matmul.mv", input, vec)


@expose(public=("dot", "inner1d"), methods="dot")
def dot(input, other):  # noqa: A002
    """Dot product of two 1-D tensors (a 0-d result)."""
    _need("dot", input, 1, "input")
    _need("dot", other, 1, "other")
    if input.shape != other.shape:
        raise RuntimeError(f"dot: inconsistent tensor size, expected tensor [{input.shape[0]}] "
                           f"and src [{other.shape[0]}] to have the same number of elements")
    return _call("matmul.dot", input, other)


def _scaled_sum(input, product, beta, alpha):
    """``beta * input + alpha * product``; with beta = 0 ``input`` is ignored (NaN included),
    as PyTorch's addmm."""
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product
    return (input if beta == 1 else input * beta) + product


@defcomposite("addmm", public="addmm", methods="addmm")
def addmm(input, mat1, mat2, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * (mat1 @ mat2)``."""
    return _scaled_sum(input, mm(mat1, mat2), beta, alpha)


@defcomposite("baddbmm", public="baddbmm", methods="baddbmm")
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * bmm(batch1, batch2)``."""
    return _scaled_sum(input, bmm(batch1, batch2), beta, alpha)


# addmm and baddbmm are composites: their in-place forms record CopyBackwards where PyTorch
# records AddmmBackward0 / BaddbmmBackward0 (the gradients are the same).
expose_inplace(addmm, "addmm_")
expose_inplace(baddbmm, "baddbmm_")


@defcomposite("kron", public="kron", methods="kron")
def kron(input, other):  # noqa: A002
    """Kronecker product: block (i, j) is ``input[i, j] * other``, in any number of dims."""
    n = builtins.max(input.ndim, other.ndim)
    shape_a = (1,) * (n - input.ndim) + tuple(input.shape)
    shape_b = (1,) * (n - other.ndim) + tuple(other.shape)
    inter_a, inter_b, final = [], [], []
    for sa, sb in zip(shape_a, shape_b):
        inter_a += [sa, 1]
        inter_b += [1, sb]
        final.append(sa * sb)
    # PyTorch's: each operand and the product through _unsafe_view (UnsafeViewBackward0).
    a = _call("_unsafe_view", input, shape=tuple(inter_a))
    b = _call("_unsafe_view", other, shape=tuple(inter_b))
    return _call("_unsafe_view", a * b, shape=tuple(final))


@defcomposite("tensordot", public="tensordot")
def tensordot(a, b, dims=2):
    """Contract the last ``dims`` dims of ``a`` with the first of ``b`` (or the listed pairs)."""
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = ([dims[0]] if isinstance(dims[0], int) else list(dims[0]),
                  [dims[1]] if isinstance(dims[1], int) else list(dims[1]))
    da = [_dim(d, a.ndim, "tensordot") for d in da]
    db = [_dim(d, b.ndim, "tensordot") for d in db]
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise RuntimeError(f"tensordot: contracted dimensions need to match, but first has "
                               f"size {a.shape[i]} in dim {i} and second has size {b.shape[j]} "
                               f"in dim {j}")
    free_a = [i for i in range(a.ndim) if i not in da]
    free_b = [j for j in range(b.ndim) if j not in db]
    k = 1
    for i in da:
        k *= a.shape[i]
    m = 1
    for i in free_a:
        m *= a.shape[i]
    n = 1
    for j in free_b:
        n *= b.shape[j]
    am = _reshape(permute(a, *(free_a + da)) if a.ndim else a, (m, k))
    bm = _reshape(permute(b, *(db + free_b)) if b.ndim else b, (k, n))
    return _reshape(_call("matmul", am, bm),
                    tuple(a.shape[i] for i in free_a) + tuple(b.shape[j] for j in free_b))


@expose(public="cdist")
def cdist(x1, x2, p=2.0):
    """Pairwise ``p``-norm distances between the rows of ``x1`` (..., P, M) and ``x2``
    (..., R, M): (..., P, R). A zero distance has a zero gradient (the norm's rule)."""
    for name, x in (("X1", x1), ("X2", x2)):
        if x.ndim < 2:   # torch's words
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: {x.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: "
                           f"{x1.shape[-1]} X2: {x2.shape[-1]}")
    return _call("cdist", x1, x2, p=float(p))


@expose(public="diagonal", methods="diagonal")
def diagonal(x, offset=0, dim1=0, dim2=1):
    """The diagonal ``offset`` of the (dim1, dim2) planes, as the last dim (a view)."""
    d1, d2 = _dim(dim1, x.ndim, "diagonal"), _dim(dim2, x.ndim, "diagonal")
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return _call("diagonal", x, offset=int(offset), dim1=d1, dim2=d2)


@expose(methods="unfold")
def unfold(x, dimension, size, step):
    """``Tensor.unfold``: windows of ``size`` every ``step`` along ``dimension``, as a new
    last dim (a view of ``x``)."""
    d = _dim(dimension, x.ndim, "unfold")
    length = x.shape[d] if x.ndim else 1
    if size > length:   # torch's words
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {length} but size is "
                           f"{size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    return _call("unfold", x, dimension=d, size=int(size), step=int(step))


@defcomposite("diag", public="diag", methods="diag")
def diag(x, diagonal=0):  # noqa: F811 - torch.diag's parameter name
    """A 1-D tensor as the ``diagonal``-th diagonal of a square matrix, or a matrix's
    ``diagonal``-th diagonal as a 1-D tensor."""
    # PyTorch's: diagonal_copy of a matrix (DiagonalBackward0_copy), diag_embed of a vector
    # (DiagEmbedBackward0).
    if x.ndim == 2:
        return _call("diagonal_copy", x, offset=int(diagonal), dim1=0, dim2=1)
    if x.ndim != 1:
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {x.ndim}D")
    return _call("diag_embed", x, offset=int(diagonal), dim1=0, dim2=1)


@expose(public="diag_embed", methods="diag_embed")
def diag_embed(input, offset=0, dim1=-2, dim2=-1):  # noqa: A002 - PyTorch's names
    """The last dim of ``input`` as the ``offset`` diagonal of the (dim1, dim2) planes of a new
    tensor with one more dim, zeros elsewhere."""
    ndim = input.ndim + 1
    d1, d2 = _dim(dim1, ndim, "diag_embed"), _dim(dim2, ndim, "diag_embed")
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return _call("diag_embed", input, offset=int(offset), dim1=d1, dim2=d2)


def _einsum_diagonals(subs, out, operands):
    """einsum with a letter repeated in an operand: replace that operand by its diagonal over
    the two dims (the letter moves last, as :func:`diagonal` puts it), then the plain einsum."""
    new_subs, new_ops = [], []
    for s, t in zip(subs, operands):
        if "..." in s:
            raise NotImplementedError("einsum: a repeated subscript together with '...' is not "
                                      "supported")
        letters = list(s)
        while len(set(letters)) != len(letters):
            c = next(c for c in letters if letters.count(c) > 1)
            i = letters.index(c)
            j = letters.index(c, i + 1)
            if t.shape[i] != t.shape[j]:
                raise RuntimeError(f"einsum(): subscript {c} is repeated for operand but the "
                                   f"sizes don't match, {t.shape[i]} != {t.shape[j]}")
            t = diagonal(t, 0, i, j)
            letters = [x for k, x in enumerate(letters) if k not in (i, j)] + [c]
        new_subs.append("".join(letters))
        new_ops.append(t)
    return einsum(",".join(new_subs) + "->" + out, *new_ops)
