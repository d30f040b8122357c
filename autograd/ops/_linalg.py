"""Matrix products and the square-matrix functions of torch.linalg (inv, det, slogdet,
solve)."""
from __future__ import annotations

import warnings

import numpy

from .. import backend
from ..dispatch import apply_op, defop, expose, linear_in
from ..promotion import torch_name
from .reduction import _safe_recip_scale, _vector_norm_fwd, _vector_norm_vjp, _xp_of


def _check_matmul(a, b):
    if getattr(a, "ndim", 0) == 0 or getattr(b, "ndim", 0) == 0:
        raise RuntimeError("matmul: both arguments need at least 1 dimension, got shapes "
                           f"{list(getattr(a, 'shape', ()))} and {list(getattr(b, 'shape', ()))}")
    k_a = a.shape[-1]
    k_b = b.shape[-2] if b.ndim > 1 else b.shape[0]
    if k_a != k_b:
        raise RuntimeError(f"matmul: shapes {list(a.shape)} and {list(b.shape)} cannot be "
                           f"multiplied ({k_a} != {k_b})")


def _grad_a(F, g, out, a, b):
    if a.ndim == 1 and b.ndim == 1:
        return g * b
    if b.ndim == 1:   # (..., n) @ (n,) -> (...)
        return F.reshape(g, shape=tuple(g.shape) + (1,)) * b
    if a.ndim == 1:   # (n,) @ (..., n, m) -> (..., m); the engine sums (..., 1, n) to (n,)
        return F.matmul(F.reshape(g, shape=tuple(g.shape[:-1]) + (1, g.shape[-1])),
                        F.transpose(b, dim0=-1, dim1=-2))
    return F.matmul(g, F.transpose(b, dim0=-1, dim1=-2))


def _grad_b(F, g, out, a, b):
    if a.ndim == 1 and b.ndim == 1:
        return g * a
    if a.ndim == 1:   # outer product of a with each row of g
        return F.reshape(a, shape=(a.shape[0], 1)) * F.reshape(
            g, shape=tuple(g.shape[:-1]) + (1, g.shape[-1]))
    if b.ndim == 1:   # (..., n) @ (n,): the engine sums the leading dims
        return a * F.reshape(g, shape=tuple(g.shape) + (1,))
    return F.matmul(F.transpose(a, dim0=-1, dim1=-2), g)


def _matmul_fwd(xp, a, b):
    return backend.matmul(xp, a, b)


# One rule set under the node PyTorch's matmul computes with for those shapes: matrices
# MmBackward0, matrix @ vector MvBackward0, vectors DotBackward0, batches BmmBackward0.
# Where PyTorch folds or views around that product (a 3-D @ 2-D is one mm under an
# UnsafeViewBackward0, a vector @ batch one mv), one node here, named as the product.
def _defmatmul(name, node_name):
    # Bilinear: each input's tangent takes its place, the other input stays.
    return defop(name, _matmul_fwd, (_grad_a, _grad_b),
                 jvp=(lambda F, t, out, a, b: F.matmul(t, b),
                      lambda F, t, out, a, b: F.matmul(a, t)),
                 check=_check_matmul, node_name=node_name)


_MM = _defmatmul("matmul", "MmBackward0")
_MV = _defmatmul("matmul.mv", "MvBackward0")
_DOT = _defmatmul("matmul.dot", "DotBackward0")
_BMM = _defmatmul("matmul.bmm", "BmmBackward0")


def matmul_op(a_ndim: int, b_ndim: int):
    """The matmul op (node class) for operands of these numbers of dims."""
    if a_ndim == 1:
        return _DOT if b_ndim == 1 else _MM if b_ndim == 2 else _MV
    if b_ndim == 1:
        return _MV
    return _MM if a_ndim == 2 or b_ndim == 2 else _BMM


@expose(public="matmul", methods=("matmul", "mm", "__matmul__"))
def matmul(input, other):  # noqa: A002 - PyTorch's names
    """Matrix product with NumPy's broadcasting rules (1-D operands are vectors)."""
    return apply_op(matmul_op(getattr(input, "ndim", 0), getattr(other, "ndim", 0)),
                    (input, other), None)


@expose(methods="__rmatmul__")
def _rmatmul(self, other):
    return matmul(other, self)


# --------------------------------------------------------------------------- einsum


def parse_einsum(equation: str, n_operands: int, repeats: bool = False):
    """Split ``"ij,jk->ik"`` into (["ij", "jk"], "ik"); the implicit form gets its output
    (letters seen once, sorted). Ellipses are kept as ``...``."""
    eq = equation.replace(" ", "")
    if "->" in eq:
        lhs, out = eq.split("->")
    else:
        lhs = eq
        letters = lhs.replace(",", "").replace(".", "")
        out = ("..." if "..." in lhs else "") + "".join(
            sorted(c for c in set(letters) if letters.count(c) == 1))
    subs = lhs.split(",")
    if len(subs) != n_operands:
        raise ValueError(f"einsum(): equation '{equation}' names {len(subs)} operands but "
                         f"{n_operands} were given")
    for k, s in enumerate(subs + [out]):
        core = s.replace("...", "")
        if not core.isalpha() and core:
            raise ValueError(f"einsum(): invalid subscripts '{s}' in '{equation}'")
        # An operand may repeat a letter (its diagonal; the caller takes it), the output not.
        if len(set(core)) != len(core) and (k == len(subs) or not repeats):
            raise ValueError(f"einsum(): repeated subscript in '{s}' (diagonals are not "
                             "supported)")
    return subs, out


def _einsum_fwd(xp, a, b, equation):
    return xp.einsum(equation, a) if b is None else xp.einsum(equation, a, b)


def _einsum_grad(F, g, equation, target, other, target_shape):
    """Gradient for one operand: contract ``g`` with the other operand onto the target's
    subscripts; letters only the target had (summed away) come back by broadcasting."""
    subs, out = parse_einsum(equation, 1 if other is None else 2)
    t_sub = subs[target]
    avail = set(out) | (set(subs[1 - target]) if other is not None else set())
    keep = "".join(c for c in t_sub.replace("...", ".") if c == "." or c in avail)
    keep = keep.replace(".", "...")
    eq = f"{out},{subs[1 - target]}->{keep}" if other is not None else f"{out}->{keep}"
    if other is None:
        grad = F.einsum(g, None, equation=eq)
    else:
        grad = F.einsum(g, other, equation=eq)
    if keep == t_sub:
        return grad
    # Put back the summed-away letters as size-1 dims, expanded to the operand's sizes.
    gshape = tuple(grad.shape)
    n_ell = len(gshape) - len(keep.replace("...", ""))
    t_ell = len(target_shape) - len(t_sub.replace("...", ""))
    shape, full = [], []
    gi = ti = 0
    for c in t_sub.replace("...", "."):
        if c == ".":
            shape.extend(gshape[gi:gi + n_ell])
            full.extend(gshape[gi:gi + n_ell])
            gi += n_ell
            ti += t_ell
        elif c in keep:
            shape.append(gshape[gi])
            full.append(gshape[gi])
            gi += 1
            ti += 1
        else:
            shape.append(1)
            full.append(target_shape[ti])
            ti += 1
    return F.expand(F.reshape(grad, shape=tuple(shape)), shape=tuple(full))


defop("einsum", _einsum_fwd,
      (lambda F, g, out, a, b, equation: _einsum_grad(F, g, equation, 0, b, a.shape),
       lambda F, g, out, a, b, equation: _einsum_grad(F, g, equation, 1, a, b.shape)),
      jvp=(lambda F, t, out, a, b, equation: F.einsum(t, b, equation=equation),
           lambda F, t, out, a, b, equation: F.einsum(a, t, equation=equation)))


# --------------------------------------------------------------------------- cdist


def _pair_diffs(F, x1, x2):
    """(..., P, R, M): every row of x1 minus every row of x2."""
    return F.unsqueeze(x1, dim=-2) - F.unsqueeze(x2, dim=-3)


def _cdist_fwd(xp, x1, x2, p=2.0):
    return _vector_norm_fwd(xp, xp.expand_dims(x1, -2) - xp.expand_dims(x2, -3), p, -1)


def _cdist_grad(F, g, out, x1, x2, p, sign, dim):
    """The vector norm's rule over the pairwise differences (a zero distance has a zero
    gradient, as PyTorch's cdist_backward), summed over the other input's rows."""
    diffs = _pair_diffs(F, x1, x2)
    if p == 2:
        # PyTorch's _cdist_backward masks after the product (``grad * diff / dist``, 0 where
        # dist is 0): an inf or NaN gradient at a zero distance gives 0, not the vector
        # norm's NaN.
        d = diffs * _safe_recip_scale(F, F.unsqueeze(g, dim=-1), F.unsqueeze(out, dim=-1), 1)
    else:
        d = _vector_norm_vjp(F, g, out, diffs, p, -1, False)
    return F.sum(d, dim=dim) if sign > 0 else -F.sum(d, dim=dim)


def _cdist_jvp(F, t, out, x1, x2, p, tangent):
    ones = F.zeros_like(out) + 1.0
    d = _vector_norm_vjp(F, ones, out, _pair_diffs(F, x1, x2), p, -1, False)
    return F.sum(d * tangent, dim=-1)


# NOTE: a primitive for PyTorch's node (CdistBackward0) and one node instead of four; the
# value is the norm of the pairwise differences, as the composite it replaces.
defop("cdist", _cdist_fwd,
      (lambda F, g, out, x1, x2, p=2.0: _cdist_grad(F, g, out, x1, x2, p, 1, -2),
       lambda F, g, out, x1, x2, p=2.0: _cdist_grad(F, g, out, x1, x2, p, -1, -3)),
      jvp=(lambda F, t, out, x1, x2, p=2.0: _cdist_jvp(F, t, out, x1, x2, p,
                                                      F.unsqueeze(t, dim=-2)),
           lambda F, t, out, x1, x2, p=2.0: _cdist_jvp(F, t, out, x1, x2, p,
                                                      -F.unsqueeze(t, dim=-3))))


# --------------------------------------------------------------------------- trace, cross


def _trace_vjp(F, g, out, x):
    """PyTorch's trace_backward: ``g`` on the diagonal, 0 elsewhere (a select: an inf
    gradient leaves the other entries 0)."""
    return F.where(_xp_of(x).eye(x.shape[0], x.shape[1], dtype=bool), g, 0.0)


# NOTE: a primitive for PyTorch's node (TraceBackward0), one node instead of a diagonal and a
# sum.
defop("trace", lambda xp, x: xp.asarray(xp.trace(x)), (_trace_vjp,), jvp=linear_in(0),
      check=lambda x: _check_matrix("trace", x), public="trace", methods="trace")


def _check_matrix(op, x):
    if getattr(x, "ndim", 0) != 2:
        raise RuntimeError(f"{op}: expected a matrix, but got tensor with dim {x.ndim}")


# The cross product is bilinear and anti-commutative: each input's gradient is a cross
# product of the other with g (PyTorch's linalg_cross rules).
defop("linalg_cross", lambda xp, a, b, dim=-1: xp.cross(a, b, axis=dim),
      (lambda F, g, out, a, b, dim=-1: F.linalg_cross(b, g, dim=dim),
       lambda F, g, out, a, b, dim=-1: F.linalg_cross(g, a, dim=dim)),
      jvp=(lambda F, t, out, a, b, dim=-1: F.linalg_cross(t, b, dim=dim),
           lambda F, t, out, a, b, dim=-1: F.linalg_cross(a, t, dim=dim)),
      node_name="LinalgCrossBackward0")


# --------------------------------------------------------------------------- inv, det, slogdet, solve
# Square-matrix functions of torch.linalg, batched over leading dims. Their rules are written
# with the ops themselves (F.linalg_inv, F.linalg_solve), so they differentiate again.

def _check_square(op, a):
    if a.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor A must have at least 2 dimensions.")
    if a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"{op}: A must be batches of square matrices, but they are "
                           f"{a.shape[-2]} by {a.shape[-1]} matrices")
    if a.dtype.kind not in "fc":
        raise RuntimeError(f"{op}: Expected a floating point or complex tensor as input. Got "
                           f"{torch_name(a.dtype)}")


def _host(a):
    xp = backend.array_module(a)
    return a if xp is numpy else xp.asnumpy(a)


def _singular_error(op, a, solver=False):
    """PyTorch's LinAlgError text for the first singular matrix of ``a``: the first zero
    diagonal element of its LU factor (1-based), and the batch element when batched."""
    mats = _host(a).reshape((-1,) + a.shape[-2:])
    for k, m in enumerate(mats):
        pivots = _lu_diagonal(m)
        zero = numpy.flatnonzero(pivots == 0)
        if zero.size:
            batch = f"(Batch element {k}): " if a.ndim > 2 else ""
            if solver:
                return RuntimeError(f"torch.{op}: {batch}The solver failed because the input "
                                    "matrix is singular.")
            return RuntimeError(f"{op}: {batch}The diagonal element {zero[0] + 1} is zero, the "
                                "inversion could not be completed because the input matrix is "
                                "singular.")
    return RuntimeError(f"{op}: the input matrix is singular (no zero pivot in its LU).")


def _lu_diagonal(m):
    """The diagonal of U in m's partially pivoted LU (LAPACK's getrf, as PyTorch's)."""
    try:
        from scipy.linalg import lu_factor  # noqa: PLC0415 - optional, CPU only
    except ImportError:   # a plain elimination with the same pivoting
        u = m.astype(numpy.float64, copy=True)
        for j in range(len(u)):
            p = j + int(numpy.argmax(numpy.abs(u[j:, j])))
            u[[j, p]] = u[[p, j]]
            if u[j, j] != 0:
                u[j + 1:] -= numpy.outer(u[j + 1:, j] / u[j, j], u[j])
        return numpy.diagonal(u)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # scipy warns about the zero we are looking for
        return numpy.diagonal(lu_factor(m, check_finite=False)[0])


def _mT(F, x):
    return F.transpose(x, dim0=-1, dim1=-2)


def _checked(xp, op, a, solve, solver=False):
    """``solve()``, raising PyTorch's error for a singular ``a``. NumPy raises; CuPy by default
    returns inf/NaN, so a non-finite result there is looked at on the host (a sync, as
    PyTorch's own check of the factorisation's info on CUDA)."""
    try:
        x = solve()
    except numpy.linalg.LinAlgError:
        raise _singular_error(op, a, solver) from None
    if xp is not numpy and not bool(xp.isfinite(x).all()):
        err = _singular_error(op, a, solver)
        if "diagonal element" in str(err) or "solver failed" in str(err):
            raise err
    return x


def _inv_fwd(xp, a):
    return _checked(xp, "linalg.inv", a, lambda: xp.linalg.inv(a))


# d(A^-1) = -A^-1 dA A^-1; the gradient is its adjoint, -A^-T g A^-T (PyTorch's).
defop("linalg_inv", _inv_fwd,
      (lambda F, g, out, a: -F.matmul(F.matmul(_mT(F, out), g), _mT(F, out)),),
      jvp=(lambda F, t, out, a: -F.matmul(F.matmul(out, t), out),),
      check=lambda a: _check_square("linalg.inv", a), node_name="LinalgInvExBackward0",
      public="inverse", methods="inverse")


def _as_matrices(F, x):
    """A per-matrix value (..., ) as (..., 1, 1), to scale its matrix."""
    return F.unsqueeze(F.unsqueeze(x, dim=-1), dim=-1)


def _cofactor(F, out, a):
    """d det(A)/dA, the cofactor matrix (the adjugate's transpose): det(A) A^-T while every
    matrix is invertible; otherwise PyTorch's singular formula, U diag(prod of the other
    singular values) Vh det(U) det(Vh), which is exact at any rank (0 below rank n-1). Under
    create_graph that formula is built with the SVD op, so it differentiates again (det(U)
    det(Vh), a sign, is locally constant)."""
    det = getattr(out, "_data", out)
    if bool((det != 0).all()):
        return _as_matrices(F, out) * _mT(F, F.linalg_inv(a))
    if backend.is_device_array(a):
        return _svd_cofactor(a)
    u, s, vh = F.linalg_svd(a, full_matrices=False)
    xp = backend.array_module(u._data)
    sign = xp.linalg.det(u._data) * xp.linalg.det(vh._data)
    return F.matmul(u * F.unsqueeze(F.prod_others(s, dim=-1) * sign[..., None], dim=-2), vh)


def _constant(F, like, arr):
    """``arr`` as a rule's result: the array itself, or under create_graph a tensor that does
    not depend on the inputs."""
    return arr if backend.is_device_array(like) else F.zeros_like(like) + arr


def _svd_cofactor(a):
    xp = backend.array_module(a)
    u, s, vh = xp.linalg.svd(a)
    n = s.shape[-1]
    # The product of the other singular values, without dividing by one that is 0.
    others = xp.prod(xp.where(xp.eye(n, dtype=bool), 1.0, s[..., None, :]), axis=-1)
    scale = (xp.linalg.det(u) * xp.linalg.det(vh))[..., None] * others
    return backend.matmul(xp, u * scale[..., None, :], vh)


def _det_fwd(xp, a):
    return xp.asarray(xp.linalg.det(a))


defop("linalg_det", _det_fwd,
      (lambda F, g, out, a: _as_matrices(F, g) * _cofactor(F, out, a),),
      jvp=(lambda F, t, out, a: F.sum(_cofactor(F, out, a) * t, dim=(-2, -1)),),
      check=lambda a: _check_square("linalg.det", a), node_name="LinalgDetBackward0",
      public="det", methods="det")


def _slogdet_fwd(xp, a):
    sign, logabsdet = xp.linalg.slogdet(a)
    return xp.asarray(sign), xp.asarray(logabsdet)


def _slogdet_vjp(F, g, out, a):
    """d log|det A| = tr(A^-1 dA): the gradient of logabsdet is A^-T; the sign's is 0."""
    sign = getattr(out[0], "_data", out[0])
    if bool((sign != 0).all()):
        return _as_matrices(F, g[1]) * _mT(F, F.linalg_inv(a))
    # A singular matrix has no finite gradient; PyTorch's LU solve gives inf/NaN there, not an
    # error: the cofactor matrix over det (0), a constant under create_graph.
    data = getattr(a, "_data", a)
    xp = backend.array_module(data)
    det = sign * xp.exp(getattr(out[1], "_data", out[1]))
    with numpy.errstate(divide="ignore", invalid="ignore"):
        inv_t = _svd_cofactor(data) / det[..., None, None]
    return _as_matrices(F, g[1]) * _constant(F, a, inv_t)


defop("linalg_slogdet", _slogdet_fwd, (_slogdet_vjp,),
      jvp=(lambda F, t, out, a: (None, F.sum(_mT(F, F.linalg_inv(a)) * t, dim=(-2, -1))),),
      nout=2, check=lambda a: _check_square("linalg.slogdet", a),
      node_name="LinalgSlogdetBackward0")


def solve_is_vector(a_shape, b_shape) -> bool:
    """PyTorch's rule: B is a (batch of) vector(s) when it is 1-D, or when its shape is A's
    without the last dim."""
    return len(b_shape) == 1 or tuple(b_shape) == tuple(a_shape[:-1])


def _check_solve(a, b, left=True):
    _check_square("linalg.solve", a)
    if a.dtype != b.dtype:
        raise RuntimeError("linalg.solve: Expected A and B to have the same dtype, but found A "
                           f"of type {torch_name(a.dtype)} and B of type {torch_name(b.dtype)} instead")
    n = a.shape[-1]
    # A vector B is an (n, 1) matrix, which only AX = B can take.
    rows, cols = (b.shape[-1], 1) if solve_is_vector(a.shape, b.shape) else b.shape[-2:]
    if (rows if left else cols) != n:
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation "
                           f"{'AX' if left else 'XA'} = B ({n}x{n} and {rows}x{cols})")


def _batch_solve(xp, a, b):
    """``a⁻¹ b`` for a (…, n, n) and b (…, n, k) whose batch dims broadcast: NumPy broadcasts
    them, CuPy's solve wants them equal (seen on an H200), so they are broadcast first."""
    batch = numpy.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    if a.shape[:-2] != batch:
        a = xp.broadcast_to(a, batch + a.shape[-2:])
    if b.shape[:-2] != batch:
        b = xp.broadcast_to(b, batch + b.shape[-2:])
    return xp.linalg.solve(a, b)


def _solve_fwd(xp, a, b, left=True):
    def solve():
        if solve_is_vector(a.shape, b.shape):   # left: the check refused XA = b
            return _batch_solve(xp, a, b[..., None])[..., 0]
        if left:
            return _batch_solve(xp, a, b)
        return xp.swapaxes(_batch_solve(xp, xp.swapaxes(a, -1, -2), xp.swapaxes(b, -1, -2)), -1, -2)
    return _checked(xp, "linalg.solve", a, solve, solver=True)


def _solve_grad_b(F, g, out, a, b, left=True):
    """A^-T g (left) or g A^-T (right): a solve with A^T, as PyTorch's linalg_solve_backward."""
    return F.linalg_solve(_mT(F, a), g, left=left)


def _solve_grad_a(F, g, out, a, b, left=True):
    gb = _solve_grad_b(F, g, out, a, b, left)
    if left and solve_is_vector(a.shape, b.shape):   # -gB X^T as an outer product
        return -F.unsqueeze(gb, dim=-1) * F.unsqueeze(out, dim=-2)
    return -F.matmul(gb, _mT(F, out)) if left else -F.matmul(_mT(F, out), gb)


def _solve_jvp_a(F, t, out, a, b, left=True):
    # d(A^-1 B) = -A^-1 dA X; d(B A^-1) = -X dA A^-1.
    if left and solve_is_vector(a.shape, b.shape):   # dA X per batch element, X a vector
        return -F.linalg_solve(a, F.sum(t * F.unsqueeze(out, dim=-2), dim=-1), left=left)
    return -F.linalg_solve(a, F.matmul(t, out) if left else F.matmul(out, t), left=left)


defop("linalg_solve", _solve_fwd, (_solve_grad_a, _solve_grad_b),
      jvp=(_solve_jvp_a, lambda F, t, out, a, b, left=True: F.linalg_solve(a, t, left=left)),
      check=_check_solve, node_name="LinalgSolveExBackward0")
