"""The decompositions of torch.linalg and what is built on them: solve_triangular, cholesky,
cholesky_solve, qr, eigh, svd, matrix_exp, pinv, lstsq (composites on them, matrix_norm and
matrix_rank among them, are in linalg_api.py). Batched over leading dims; PyTorch's node names,
gradients (FunctionsManual.cpp's formulas) and error texts.

Their rules are written with the ops themselves (F.linalg_solve_triangular, F.matmul), so they
differentiate again. An op with several outputs keeps them as arrays for its backward, which a
second backward would see as constants: under create_graph its rule runs the decomposition again
on the input tensor (:func:`_outputs`), so the result depends on the input through it.

Gradients here are for real matrices (the transposes are not conjugated).
"""
from __future__ import annotations

import numpy

from .. import backend
from ..dispatch import defop
from ..promotion import torch_name
from ._linalg import _check_square, _host, _mT
from .reduction import _eye, _xp_of


def _outputs(F, out, a, op, **attrs):
    """The outputs a rule reads: the saved arrays, or under create_graph (``a`` a tensor) the
    op run again on ``a``, so that the gradient differentiates through them."""
    if backend.is_device_array(a):
        return out
    return getattr(F, op)(a, **attrs)


def _is_zero(g) -> bool:
    """True for a cotangent of zeros that does not require grad: above all an output that got
    no gradient (the engine fills it so), where PyTorch's rule sees an undefined gradient and
    skips the terms that divide by gaps between eigen- or singular values (0/0 where they
    repeat). A computed cotangent that happens to be 0 takes the same path: the same gradient
    wherever the values are distinct. NOTE: on a GPU, one sync to read it."""
    if getattr(g, "requires_grad", False):
        return False
    data = getattr(g, "_data", g)
    return not bool(_xp_of(data).any(data))


def _diag_embed(F, v):
    """(..., n) -> (..., n, n) with ``v`` on the diagonal."""
    return F.where(_eye(v, v.shape[-1]), F.unsqueeze(v, dim=-1), 0.0)


def _diag(F, x):
    return F.diagonal(x, offset=0, dim1=-2, dim2=-1)


def _check_at_least_2d(op, a, name="A"):
    if a.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor {name} must have at least 2 dimensions.")


def _check_float(op, a):
    if a.dtype.kind not in "fc":
        raise RuntimeError(f"{op}: Expected a floating point or complex tensor as input. Got "
                           f"{torch_name(a.dtype)}")


# --------------------------------------------------------------------------- solve_triangular


def _triangle(F, a, upper, unitriangular=False):
    """The triangle of ``a`` that a triangular solve reads (strict when unit-diagonal)."""
    k = 1 if unitriangular else 0
    return F.triu(a, diagonal=k) if upper else F.tril(a, diagonal=-k)


def _solve_triangular_fwd(xp, a, b, upper, left=True, unitriangular=False):
    t = xp.triu(a) if upper else xp.tril(a)
    if unitriangular:
        t = xp.where(xp.eye(a.shape[-1], dtype=bool), xp.asarray(1, dtype=a.dtype), t)
    if not left:   # X A = B  <=>  A^T X^T = B^T
        t, b = xp.swapaxes(t, -1, -2), xp.swapaxes(b, -1, -2)
        upper = not upper
    batch = numpy.broadcast_shapes(t.shape[:-2], b.shape[:-2])
    t, b = xp.broadcast_to(t, batch + t.shape[-2:]), xp.broadcast_to(b, batch + b.shape[-2:])
    # NOTE: a general solve of the triangle (batched on both devices, where NumPy's and
    # CuPy's triangular solvers are not). NumPy refuses a zero on the diagonal; PyTorch's
    # triangular solve gives inf/NaN there, which substitution gives too.
    try:
        x = xp.linalg.solve(t, b)
    except numpy.linalg.LinAlgError:
        x = _substitute(xp, t, b, upper)
    return xp.swapaxes(x, -1, -2) if not left else x


def _substitute(xp, t, b, upper):
    """Back (upper) or forward substitution, row by row, as LAPACK's trtrs."""
    n = t.shape[-1]
    x = xp.zeros(b.shape, dtype=numpy.result_type(t.dtype, b.dtype))
    with numpy.errstate(divide="ignore", invalid="ignore"):
        for i in (range(n - 1, -1, -1) if upper else range(n)):
            rest = slice(i + 1, n) if upper else slice(0, i)
            acc = b[..., i, :] - xp.einsum("...j,...jk->...k", t[..., i, rest], x[..., rest, :])
            x[..., i, :] = acc / t[..., i, i:i + 1]
    return x


def _check_solve_triangular(a, b, upper, left=True, unitriangular=False):
    op = "linalg.solve_triangular"
    _check_at_least_2d(op, b, "B")
    _check_square(op, a)
    n = a.shape[-1]
    rows, cols = b.shape[-2:]
    if (rows if left else cols) != n:
        raise RuntimeError(f"{op}: Incompatible shapes of A and B for the equation "
                           f"{'AX' if left else 'XA'} = B ({n}x{n} and {rows}x{cols})")


def _solve_triangular_grad_b(F, g, out, a, b, upper, left=True, unitriangular=False):
    # A^-T g (left) or g A^-T (right): a solve with the transposed triangle.
    return F.linalg_solve_triangular(_mT(F, a), g, upper=not upper, left=left,
                                     unitriangular=unitriangular)


def _solve_triangular_grad_a(F, g, out, a, b, upper, left=True, unitriangular=False):
    gb = _solve_triangular_grad_b(F, g, out, a, b, upper, left, unitriangular)
    ga = -F.matmul(gb, _mT(F, out)) if left else -F.matmul(_mT(F, out), gb)
    return _triangle(F, ga, upper, unitriangular)


def _solve_triangular_jvp_a(F, t, out, a, b, upper, left=True, unitriangular=False):
    # d(A^-1 B) = -A^-1 dA X; d(B A^-1) = -X dA A^-1, dA within the triangle read.
    dt = _triangle(F, t, upper, unitriangular)
    return -F.linalg_solve_triangular(a, F.matmul(dt, out) if left else F.matmul(out, dt),
                                      upper=upper, left=left, unitriangular=unitriangular)


defop("linalg_solve_triangular", _solve_triangular_fwd,
      (_solve_triangular_grad_a, _solve_triangular_grad_b),
      jvp=(_solve_triangular_jvp_a,
           lambda F, t, out, a, b, upper, left=True, unitriangular=False:
           F.linalg_solve_triangular(a, t, upper=upper, left=left, unitriangular=unitriangular)),
      check=_check_solve_triangular, node_name="LinalgSolveTriangularBackward0")


# --------------------------------------------------------------------------- cholesky


def _not_positive_definite(a):
    """PyTorch's error for the first matrix of ``a`` that is not positive-definite: the order
    of its first leading minor that is not (1-based), and the batch element when batched."""
    mats = _host(a).reshape((-1,) + a.shape[-2:])
    for k, m in enumerate(mats):
        for order in range(1, m.shape[-1] + 1):
            try:
                numpy.linalg.cholesky(m[:order, :order])
            except numpy.linalg.LinAlgError:
                batch = f"(Batch element {k}): " if a.ndim > 2 else ""
                return RuntimeError(
                    f"linalg.cholesky: {batch}The factorization could not be completed because "
                    "the input is not positive-definite (the leading minor of order "
                    f"{order} is not positive-definite).")
    return RuntimeError("linalg.cholesky: The factorization could not be completed because "
                        "the input is not positive-definite.")


def _reconstructs(xp, low, a) -> bool:
    if not a.size:
        return True
    residual = xp.abs(xp.tril(xp.matmul(low, xp.swapaxes(low, -1, -2).conj()) - a)).max()
    scale = xp.abs(a).max()
    return bool(xp.isfinite(residual)) and bool(residual <= 1e3 * numpy.finfo(a.dtype).eps
                                                * a.shape[-1] * scale)


def _cholesky_fwd(xp, a, upper=False):
    # upper reads A's upper triangle (LAPACK's 'U'): the lower factor of A^T, transposed.
    src = xp.swapaxes(a, -1, -2).conj() if upper else a
    try:
        low = xp.linalg.cholesky(src)
    except numpy.linalg.LinAlgError:
        raise _not_positive_definite(src) from None
    # CuPy does not raise by default: a failed factorisation leaves NaN or a partial factor,
    # which does not give A back (checked on the host, a sync, as PyTorch's own check of the
    # factorisation's info on CUDA).
    if xp is not numpy and not _reconstructs(xp, low, src):
        raise _not_positive_definite(src)
    return xp.ascontiguousarray(xp.swapaxes(low, -1, -2).conj()) if upper else low


def _cholesky_lower(F, out, g, upper):
    return (_mT(F, out), _mT(F, g)) if upper else (out, g)


def _cholesky_vjp(F, g, out, a, upper=False):
    """PyTorch's cholesky_backward: gA = L^-T Phi(L^T gL) L^-1, where Phi keeps the lower
    triangle and mirrors it with the diagonal halved (a symmetric gradient)."""
    low, gl = _cholesky_lower(F, out, g, upper)
    p = F.tril(F.matmul(_mT(F, low), gl))
    p = 0.5 * (p + _mT(F, F.tril(p, diagonal=-1)))
    p = F.linalg_solve_triangular(_mT(F, low), p, upper=True, left=True)
    return F.linalg_solve_triangular(low, p, upper=False, left=False)


def _cholesky_jvp(F, t, out, a, upper=False):
    """dL = L Phi(L^-1 dA L^-T), Phi the lower triangle with the diagonal halved."""
    low = _mT(F, out) if upper else out
    x = F.linalg_solve_triangular(low, t, upper=False, left=True)
    x = F.linalg_solve_triangular(_mT(F, low), x, upper=True, left=False)
    dl = F.matmul(low, F.tril(x, diagonal=-1) + 0.5 * _diag_embed(F, _diag(F, x)))
    return _mT(F, dl) if upper else dl


defop("linalg_cholesky", _cholesky_fwd, (_cholesky_vjp,), jvp=(_cholesky_jvp,),
      check=lambda a, upper=False: _check_square("linalg.cholesky", a),
      node_name="LinalgCholeskyExBackward0")


def _cholesky_solve_fwd(xp, b, factor, upper=False):
    """X with A X = B for A = L L^T (U^T U when ``upper``): L y = B, then L^T X = y."""
    low = xp.swapaxes(factor, -1, -2) if upper else factor
    y = _solve_triangular_fwd(xp, low, b, upper=False)
    return _solve_triangular_fwd(xp, xp.swapaxes(low, -1, -2), y, upper=True)


def _cholesky_solve_grad_b(F, g, out, b, factor, upper=False):
    return F.cholesky_solve(g, factor, upper=upper)   # A is symmetric: A^-T g = A^-1 g


def _cholesky_solve_grad_factor(F, g, out, b, factor, upper=False):
    """PyTorch's cholesky_solve_backward: with gB = A^-1 g and C = gB X^T + X gB^T,
    gL = -C L (gU = -U C)."""
    gb = F.cholesky_solve(g, factor, upper=upper)
    c = F.matmul(gb, _mT(F, out))
    c = c + _mT(F, c)
    return -F.matmul(factor, c) if upper else -F.matmul(c, factor)


def _cholesky_solve_jvp_factor(F, t, out, b, factor, upper=False):
    # dA = dL L^T + L dL^T (dU^T U + U^T dU); dX = -A^-1 dA X.
    part = F.matmul(_mT(F, t), factor) if upper else F.matmul(t, _mT(F, factor))
    return -F.cholesky_solve(F.matmul(part + _mT(F, part), out), factor, upper=upper)


def _check_cholesky_solve(b, factor, upper=False):
    _check_at_least_2d("linalg.cholesky_solve", b, "B")
    _check_square("linalg.cholesky_solve", factor)


defop("cholesky_solve", _cholesky_solve_fwd,
      (_cholesky_solve_grad_b, _cholesky_solve_grad_factor),
      jvp=(lambda F, t, out, b, factor, upper=False: F.cholesky_solve(t, factor, upper=upper),
           _cholesky_solve_jvp_factor),
      check=_check_cholesky_solve, node_name="CholeskySolveBackward0")


# --------------------------------------------------------------------------- qr

QR_MODES = ("reduced", "complete", "r")


def _check_qr(a, mode="reduced"):
    _check_at_least_2d("linalg.qr", a)
    _check_float("linalg.qr", a)
    if mode not in QR_MODES:
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           "'reduced' (default), 'r', or 'complete'")


def _qr_fwd(xp, a, mode="reduced"):
    if mode == "r":   # PyTorch's Q is then an empty tensor
        return xp.zeros((0,), dtype=a.dtype), xp.linalg.qr(a, mode="r")
    q, r = xp.linalg.qr(a, mode=mode)
    return q, r


def _qr_vjp(F, g, out, a, mode="reduced"):
    """PyTorch's linalg_qr_backward. With m >= n (Q m x n, R n x n):
    gA = (gQ + Q copyltu(M)) R^-T, M = R gR^T - gQ^T Q and copyltu(M) the symmetric matrix of
    M's lower triangle. With m < n, A = Q [X | Y]: Y's gradient is Q gR_Y, and X's is the same
    formula with gQ + Y gR_Y^T."""
    m, n = a.shape[-2], a.shape[-1]
    if mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed "
                           "when mode='r'. Please use linalg.qr(A, mode='reduced') if you are "
                           "going to differentiate through linalg.qr.")
    if mode == "complete" and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' "
                           "and nrows > ncols.")
    q, r = _outputs(F, out, a, "linalg_qr", mode=mode)
    gq, gr = g
    if m >= n:
        return _qr_square_vjp(F, q, r, gq, gr)
    r_x, r_y = r[..., :, :m], r[..., :, m:]
    gr_x, gr_y = gr[..., :, :m], gr[..., :, m:]
    y = F.matmul(q, r_y)
    g_x = _qr_square_vjp(F, q, r_x, gq + F.matmul(y, _mT(F, gr_y)), gr_x)
    return F.cat(g_x, F.matmul(q, gr_y), dim=a.ndim - 1, sizes=(m, n - m))


def _qr_square_vjp(F, q, r, gq, gr):
    m = F.matmul(r, _mT(F, gr)) - F.matmul(_mT(F, gq), q)
    low = F.tril(m, diagonal=-1)
    sym = low + _mT(F, low) + _diag_embed(F, _diag(F, m))
    b = gq + F.matmul(q, sym)
    return F.linalg_solve_triangular(_mT(F, r), b, upper=False, left=False)


def _qr_jvp(F, t, out, a, mode="reduced"):
    """With C = Q^T dA R^-1 and Omega = tril(C, -1) - tril(C, -1)^T (skew): dR = (C - Omega) R,
    dQ = dA R^-1 - Q (C - Omega). With m < n, X's square part so, and dR_Y = Q^T (dY - dQ R_Y)."""
    m, n = a.shape[-2], a.shape[-1]
    if mode == "r" or (mode == "complete" and m > n):
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' "
                           "and nrows > ncols." if mode != "r" else
                           "The derivative of linalg.qr depends on Q, which is not computed "
                           "when mode='r'.")
    q, r = out
    k = min(m, n)
    r_x, t_x = r[..., :, :k], t[..., :, :k]
    da_rinv = F.linalg_solve_triangular(r_x, t_x, upper=True, left=False)
    c = F.matmul(_mT(F, q), da_rinv)
    low = F.tril(c, diagonal=-1)
    upper_part = c - (low - _mT(F, low))          # C - Omega: upper triangular
    dq = da_rinv - F.matmul(q, upper_part)
    dr = F.matmul(upper_part, r_x)
    if m < n:
        dr_y = F.matmul(_mT(F, q), t[..., :, m:] - F.matmul(dq, r[..., :, m:]))
        dr = F.cat(dr, dr_y, dim=a.ndim - 1, sizes=(m, n - m))
    return dq, dr


defop("linalg_qr", _qr_fwd, (_qr_vjp,), jvp=(_qr_jvp,), nout=2, check=_check_qr,
      node_name="LinalgQrBackward0")


# --------------------------------------------------------------------------- eigh


def _check_eigh(a, UPLO="L"):  # noqa: N803 - PyTorch's name
    _check_square("linalg.eigh", a)
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")


def _eigh_fwd(xp, a, UPLO="L"):  # noqa: N803
    w, v = xp.linalg.eigh(a, UPLO=UPLO)
    return w, v


def _gaps(F, w):
    """E_ij = w_j - w_i, with 1 on the diagonal (the rules replace it)."""
    e = F.unsqueeze(w, dim=-2) - F.unsqueeze(w, dim=-1)
    return F.where(_eye(w, w.shape[-1]), 1.0, e)


def _eigh_vjp(F, g, out, a, UPLO="L"):  # noqa: N803
    """PyTorch's linalg_eig_backward for Hermitian input: gA = V (skew(V^T gV) / E + diag(gL))
    V^T, skew(X) = (X - X^T) / 2, E_ij = L_j - L_i. Without a gradient for V, V diag(gL) V^T
    (no division: repeated eigenvalues keep a finite gradient, as eigvalsh's in PyTorch)."""
    w, v = _outputs(F, out, a, "linalg_eigh", UPLO=UPLO)
    gw, gv = g
    inner = _diag_embed(F, gw)
    if not _is_zero(gv):
        vg = F.matmul(_mT(F, v), gv)
        skew = 0.5 * (vg - _mT(F, vg))
        inner = inner + F.where(_eye(w, w.shape[-1]), 0.0, skew / _gaps(F, w))
    return F.matmul(F.matmul(v, inner), _mT(F, v))


def _eigh_jvp(F, t, out, a, UPLO="L"):  # noqa: N803
    """P = V^T dA V: dL = diag(P), dV = V (P / E) with 0 on the diagonal."""
    w, v = out
    p = F.matmul(F.matmul(_mT(F, v), t), v)
    dv = F.matmul(v, F.where(_eye(w, w.shape[-1]), 0.0, p / _gaps(F, w)))
    return _diag(F, p), dv


defop("linalg_eigh", _eigh_fwd, (_eigh_vjp,), jvp=(_eigh_jvp,), nout=2, check=_check_eigh,
      node_name="LinalgEighBackward0")


# --------------------------------------------------------------------------- svd


def _check_svd(a, full_matrices=True):
    _check_at_least_2d("linalg.svd", a)
    _check_float("linalg.svd", a)


def _svd_fwd(xp, a, full_matrices=True):
    u, s, vh = xp.linalg.svd(a, full_matrices=full_matrices)
    return u, s, vh


def _svd_vjp(F, g, out, a, full_matrices=True):
    """PyTorch's svd_backward, on the first k = min(m, n) singular vectors (full_matrices'
    other columns carry no gradient, as PyTorch's narrowing):
    gA = U [(skew(U^T gU) S + S skew(V^T gV)) / E + diag(gS)] V^T, E_ij = s_j^2 - s_i^2, plus
    (I - U U^T) gU S^-1 V^T when m > n, or U S^-1 gVh (I - V V^T) when m < n.
    Without gradients for U and V, U diag(gS) V^T (finite at repeated singular values)."""
    u, s, vh = _outputs(F, out, a, "linalg_svd", full_matrices=full_matrices)
    gu, gs, gvh = g
    m, n = a.shape[-2], a.shape[-1]
    k = min(m, n)
    if full_matrices:
        u, vh, gu, gvh = u[..., :, :k], vh[..., :k, :], gu[..., :, :k], gvh[..., :k, :]
    no_u, no_v = _is_zero(gu), _is_zero(gvh)
    if no_u and no_v:
        return F.matmul(u * F.unsqueeze(gs, dim=-2), vh)
    s_row, s_col = F.unsqueeze(s, dim=-2), F.unsqueeze(s, dim=-1)
    s2 = s * s
    e = _gaps(F, s2)
    inner = 0.0
    if not no_u:
        ug = F.matmul(_mT(F, u), gu)
        inner = (ug - _mT(F, ug)) * s_row
    if not no_v:
        vg = F.matmul(vh, _mT(F, gvh))
        inner = inner + s_col * (vg - _mT(F, vg))
    inner = F.where(_eye(s, k), 0.0, inner / e) + _diag_embed(F, gs)
    if m > n and not no_u:
        gus = gu / s_row
        rest = gus - F.matmul(u, F.matmul(_mT(F, u), gus))
        return F.matmul(F.matmul(u, inner) + rest, vh)
    if m < n and not no_v:
        sgv = gvh / s_col
        rest = sgv - F.matmul(F.matmul(sgv, _mT(F, vh)), vh)
        return F.matmul(u, F.matmul(inner, vh) + rest)
    return F.matmul(F.matmul(u, inner), vh)


def _svd_jvp(F, t, out, a, full_matrices=True):
    """PyTorch's linalg_svd_jvp: P = U^T dA V, dS = diag(P);
    dU = U (sym(P0 S) / E) + (I - U U^T) dA V S^-1 (m > n),
    dVh = -(sym(S P0) / E) Vh + S^-1 U^T dA (I - V V^T) (m < n), P0 = P without its diagonal,
    sym(X) = X + X^T, E_ij = s_j^2 - s_i^2."""
    m, n = a.shape[-2], a.shape[-1]
    if full_matrices and m != n:
        raise RuntimeError("linalg_svd_jvp: forward-mode AD is not implemented for "
                           "full_matrices=True and a matrix that is not square; use "
                           "full_matrices=False")
    u, s, vh = out
    k = min(m, n)
    v = _mT(F, vh)
    p = F.matmul(F.matmul(_mT(F, u), t), v)
    ds = _diag(F, p)
    p0 = F.where(_eye(s, k), 0.0, p)
    e = _gaps(F, s * s)
    s_row, s_col = F.unsqueeze(s, dim=-2), F.unsqueeze(s, dim=-1)
    ps, sp = p0 * s_row, s_col * p0
    du = F.matmul(u, (ps + _mT(F, ps)) / e)
    dvh = -F.matmul((sp + _mT(F, sp)) / e, vh)
    if m > n:
        dav = F.matmul(t, v)
        du = du + (dav - F.matmul(u, F.matmul(_mT(F, u), dav))) / s_row
    elif m < n:
        uda = F.matmul(_mT(F, u), t)
        dvh = dvh + (uda - F.matmul(F.matmul(uda, v), vh)) / s_col
    return du, ds, dvh


defop("linalg_svd", _svd_fwd, (_svd_vjp,), jvp=(_svd_jvp,), nout=3, check=_check_svd,
      node_name="LinalgSvdBackward0")


# --------------------------------------------------------------------------- matrix_exp


def _expm(xp, a):
    """exp(A): SciPy's expm on the CPU; elsewhere a [13/13] Pade approximant with scaling and
    squaring (Higham 2005, SciPy's and PyTorch's algorithm), in the array module's ops."""
    if xp is numpy:
        try:
            from scipy.linalg import expm  # noqa: PLC0415 - optional, CPU only
        except ImportError:
            pass
        else:
            return numpy.asarray(expm(a), dtype=a.dtype)
    return _pade13(xp, a)


_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
           129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
           40840800.0, 960960.0, 16380.0, 182.0, 1.0)


def _pade13(xp, a):
    b = _PADE13
    norm = float(xp.abs(a).sum(axis=-2).max()) if a.size else 0.0
    squarings = max(0, int(numpy.ceil(numpy.log2(norm / 5.371920351148152)))) if norm > 0 else 0
    x = a / (2.0 ** squarings)
    eye = xp.broadcast_to(xp.eye(a.shape[-1], dtype=a.dtype), a.shape)
    x2 = x @ x
    x4 = x2 @ x2
    x6 = x4 @ x2
    u = x @ (x6 @ (b[13] * x6 + b[11] * x4 + b[9] * x2)
             + b[7] * x6 + b[5] * x4 + b[3] * x2 + b[1] * eye)
    v = x6 @ (b[12] * x6 + b[10] * x4 + b[8] * x2) + b[6] * x6 + b[4] * x4 + b[2] * x2 + b[0] * eye
    r = xp.linalg.solve(v - u, v + u)
    for _ in range(squarings):
        r = r @ r
    return r


def _block_exp(F, a, z):
    """The upper-right block of exp([[A, Z], [0, A]]): the derivative of exp at A along Z
    (Mathias 1996), as PyTorch's differential_analytic_matrix_function."""
    n = a.shape[-1]
    top = F.cat(a, z, dim=a.ndim - 1, sizes=(n, n))
    bottom = F.cat(F.zeros_like(a), a, dim=a.ndim - 1, sizes=(n, n))
    big = F.linalg_matrix_exp(F.cat(top, bottom, dim=a.ndim - 2, sizes=(n, n)))
    return big[..., :n, n:]


defop("linalg_matrix_exp", lambda xp, a: _expm(xp, a),
      # The adjoint of the derivative at A is the derivative at A^T.
      (lambda F, g, out, a: _block_exp(F, _mT(F, a), g),),
      jvp=(lambda F, t, out, a: _block_exp(F, a, t),),
      check=lambda a: _check_square("linalg.matrix_exp", a),
      node_name="LinalgMatrixExpBackward0")


# --------------------------------------------------------------------------- pinv


def _pinv_fwd(xp, a, atol=None, rtol=None, hermitian=False):
    """PyTorch's linalg.pinv: singular values (|eigenvalues| when ``hermitian``) at or below
    max(atol, rtol * the largest) count as 0; rtol defaults to eps * max(m, n) when neither
    tolerance is given, to 0 when only atol is."""
    m, n = a.shape[-2], a.shape[-1]
    if rtol is None:
        rtol = numpy.finfo(a.dtype).eps * max(m, n) if not atol else 0.0
    if hermitian:
        w, v = xp.linalg.eigh(a)
        s, u, vh = xp.abs(w), v, xp.swapaxes(v, -1, -2).conj()
        s_signed = w
    else:
        u, s, vh = xp.linalg.svd(a, full_matrices=False)
        s_signed = s
    top = s.max(axis=-1, keepdims=True) if s.shape[-1] else s
    tol = xp.maximum(atol or 0.0, rtol * top)
    keep = s > tol
    s_inv = xp.where(keep, 1.0 / xp.where(keep, s_signed, 1.0), 0.0).astype(a.dtype)
    return xp.matmul(xp.swapaxes(vh, -1, -2).conj() * s_inv[..., None, :],
                     xp.swapaxes(u, -1, -2).conj())


def _pinv_vjp(F, g, out, a, atol=None, rtol=None, hermitian=False):
    """PyTorch's pinv_backward, the adjoint of the derivative at a fixed rank:
    gA = -P^T G P^T + (I - A P) G^T P P^T + P^T P G^T (I - P A), P = pinv(A)."""
    p_t, g_t = _mT(F, out), _mT(F, g)
    first = -F.matmul(F.matmul(p_t, g), p_t)
    pp_t = F.matmul(out, p_t)
    second = F.matmul(g_t, pp_t) - F.matmul(a, F.matmul(out, F.matmul(g_t, pp_t)))
    ptp = F.matmul(p_t, out)
    third = F.matmul(ptp, g_t) - F.matmul(F.matmul(F.matmul(ptp, g_t), out), a)
    return first + second + third


def _pinv_jvp(F, t, out, a, atol=None, rtol=None, hermitian=False):
    """dP = -P dA P + P P^T dA^T (I - A P) + (I - P A) dA^T P^T P."""
    p_t, t_t = _mT(F, out), _mT(F, t)
    first = -F.matmul(F.matmul(out, t), out)
    left = F.matmul(F.matmul(out, p_t), t_t)
    second = left - F.matmul(left, F.matmul(a, out))
    right = F.matmul(t_t, F.matmul(p_t, out))
    third = right - F.matmul(F.matmul(out, a), right)
    return first + second + third


def _check_pinv(a, atol=None, rtol=None, hermitian=False):
    if a.ndim < 2 or a.dtype.kind not in "fc":
        dtype = torch_name(a.dtype)
        raise RuntimeError(f"linalg.pinv({dtype}{{{list(a.shape)}}}): expected a tensor with 2 "
                           "or more dimensions of float, double, cfloat or cdouble types")
    if hermitian:
        _check_square("linalg.eigh", a)   # PyTorch's hermitian pinv is eigh's


defop("linalg_pinv", _pinv_fwd, (_pinv_vjp,), jvp=(_pinv_jvp,), check=_check_pinv,
      node_name="LinalgPinvBackward0")


# --------------------------------------------------------------------------- lstsq


def _lstsq_is_vector(a, b) -> bool:
    return b.ndim == a.ndim - 1


def _lstsq_fwd(xp, a, b, rcond):
    """The minimum-norm least-squares solution, pinv(A) B (``rcond``: pinv's rtol)."""
    p = _pinv_fwd(xp, a, rtol=rcond)
    if _lstsq_is_vector(a, b):
        return xp.matmul(p, b[..., None])[..., 0]
    return xp.matmul(p, b)


def _lstsq_grads(F, g, a, b, rcond):
    """PyTorch's linalg_lstsq_backward: with P = pinv(A), gA = pinv_backward(g B^T) and
    gB = P^T g."""
    p = F.linalg_pinv(a, atol=None, rtol=rcond, hermitian=False)
    if _lstsq_is_vector(a, b):
        g, b = F.unsqueeze(g, dim=-1), F.unsqueeze(b, dim=-1)
    return p, g, b


def _lstsq_grad_a(F, g, out, a, b, rcond):
    p, g, b = _lstsq_grads(F, g, a, b, rcond)
    return _pinv_vjp(F, F.matmul(g, _mT(F, b)), p, a)


def _lstsq_grad_b(F, g, out, a, b, rcond):
    vector = _lstsq_is_vector(a, b)
    p, g, b = _lstsq_grads(F, g, a, b, rcond)
    gb = F.matmul(_mT(F, p), g)
    return gb[..., 0] if vector else gb


def _lstsq_jvp_a(F, t, out, a, b, rcond):
    p = F.linalg_pinv(a, atol=None, rtol=rcond, hermitian=False)
    dp = _pinv_jvp(F, t, p, a)
    if _lstsq_is_vector(a, b):
        return F.matmul(dp, F.unsqueeze(b, dim=-1))[..., 0]
    return F.matmul(dp, b)


def _lstsq_jvp_b(F, t, out, a, b, rcond):
    p = F.linalg_pinv(a, atol=None, rtol=rcond, hermitian=False)
    if _lstsq_is_vector(a, b):
        return F.matmul(p, F.unsqueeze(t, dim=-1))[..., 0]
    return F.matmul(p, t)


def _check_lstsq(a, b, rcond):
    op = "torch.linalg.lstsq"
    if a.ndim < 2:
        raise RuntimeError(f"{op}: input must have at least 2 dimensions.")
    if a.dtype != b.dtype:
        raise RuntimeError(f"{op}: Expected input and other to have the same dtype, but got "
                           f"input's dtype {torch_name(a.dtype)} and other's dtype {torch_name(b.dtype)}")
    rows = b.shape[-1] if _lstsq_is_vector(a, b) else b.shape[-2]
    if b.ndim < 1 or rows != a.shape[-2]:
        raise RuntimeError(f"{op}: input.size(-2) should match other.size(-2)")


defop("linalg_lstsq", _lstsq_fwd, (_lstsq_grad_a, _lstsq_grad_b),
      jvp=(_lstsq_jvp_a, _lstsq_jvp_b), check=_check_lstsq,
      node_name="LinalgLstsqBackward0")
