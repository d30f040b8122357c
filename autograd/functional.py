"""Function transforms: ``jvp``, ``vjp``, ``jacobian`` and ``hessian`` (PyTorch's
``torch.autograd.functional`` names), built on forward- and reverse-mode AD."""
from __future__ import annotations

from . import forward_ad
from .engine import grad
from .grad_mode import enable_grad
from .ops.shape_api import stack
from ._tensor import Tensor, zeros

__all__ = ["jvp", "vjp", "jacobian", "hessian"]


def _tuple(x, what):
    if isinstance(x, Tensor):
        return (x,), True
    if isinstance(x, (tuple, list)) and all(isinstance(t, Tensor) for t in x):
        return tuple(x), False
    raise TypeError(f"{what} must be a Tensor or a tuple of Tensors, got {type(x).__name__}")


def _check_like(vs, xs, what):
    if len(vs) != len(xs):
        raise RuntimeError(f"{what}: got {len(vs)} vectors for {len(xs)} tensors")
    for i, (v, x) in enumerate(zip(vs, xs)):
        if v.shape != x.shape:
            raise RuntimeError(f"{what}: vector {i} has shape {list(v.shape)}, expected {list(x.shape)}")


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J·v) by forward-mode AD."""
    xs, single = _tuple(inputs, "inputs")
    if v is None:
        if any(x.numel() != 1 for x in xs):
            raise RuntimeError("jvp: v can be omitted only when every input has one element")
        vs = tuple(x.detach() * 0 + 1 for x in xs)
    else:
        vs, _ = _tuple(v, "v")
    _check_like(vs, xs, "jvp")
    with forward_ad.dual_level():
        duals = [forward_ad.make_dual(x.detach() if not create_graph else x, t) for x, t in zip(xs, vs)]
        out = func(*duals)
        outs, out_single = _tuple(out, "func's output")
        unpacked = [forward_ad.unpack_dual(o) for o in outs]
    primals = tuple(u.primal.detach() if not create_graph else u.primal for u in unpacked)
    tangents = tuple(u.tangent if u.tangent is not None else zeros(*o.shape, dtype=o.dtype, device=o.device)
                     for u, o in zip(unpacked, outs))
    if strict and any(u.tangent is None for u in unpacked):
        raise RuntimeError("jvp(strict=True): an output does not depend on the inputs")
    if not create_graph:
        tangents = tuple(t.detach() for t in tangents)
    return (primals[0], tangents[0]) if out_single else (primals, tangents)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), vᵀ·J) by reverse-mode AD."""
    xs, single = _tuple(inputs, "inputs")
    xs_req = tuple(x.detach().requires_grad_(True) for x in xs)
    with enable_grad():
        out = func(*xs_req)
    outs, out_single = _tuple(out, "func's output")
    if v is None:
        if any(o.numel() != 1 for o in outs):
            raise RuntimeError("vjp: v can be omitted only when every output has one element")
        vs = None
    else:
        vs, _ = _tuple(v, "v")
        _check_like(vs, outs, "vjp")
    grads = grad(outs, xs_req, vs, create_graph=create_graph, allow_unused=True)
    if strict and any(g is None for g in grads):
        raise RuntimeError("vjp(strict=True): an input is not used by func")
    grads = tuple(g if g is not None else zeros(*x.shape, dtype=x.dtype, device=x.device)
                  for g, x in zip(grads, xs))
    outs_r = tuple(o if create_graph else o.detach() for o in outs)
    return (outs_r[0] if out_single else outs_r, grads[0] if single else grads)


def jacobian(func, inputs, create_graph=False, strict=False, strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: for one input and one output, a tensor of shape
    ``out.shape + in.shape``; otherwise nested tuples [output][input]."""
    xs, single = _tuple(inputs, "inputs")
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError(f"jacobian: unknown strategy '{strategy}' (reverse-mode or forward-mode)")
    xs_req = tuple(x.detach().requires_grad_(True) for x in xs)
    with enable_grad():
        out = func(*xs_req)
    outs, out_single = _tuple(out, "func's output")
    rows = []
    if strategy == "reverse-mode":
        for o in outs:
            per_input = [[] for _ in xs]
            flat = o.reshape(-1)
            for k in range(flat.shape[0]):
                gs = grad(flat[k], xs_req, retain_graph=True, create_graph=create_graph,
                          allow_unused=True)
                for i, (g, x) in enumerate(zip(gs, xs)):
                    per_input[i].append(g if g is not None else zeros(*x.shape, dtype=x.dtype,
                                                                       device=x.device))
            rows.append(tuple(stack(p).reshape(*o.shape, *x.shape) if p else
                              zeros(*o.shape, *x.shape, dtype=o.dtype, device=o.device)
                              for p, x in zip(per_input, xs)))
    else:
        cols = [[[] for _ in xs] for _ in outs]
        for i, x in enumerate(xs):
            for k in range(x.numel()):
                basis = [zeros(*xj.shape, dtype=xj.dtype, device=xj.device) for xj in xs]
                basis[i]._data.reshape(-1)[k] = 1
                _, tangents = jvp(func, tuple(xs), tuple(basis), create_graph=create_graph)
                tangents = (tangents,) if out_single else tangents
                for j, t in enumerate(tangents):
                    cols[j][i].append(t)
        for j, o in enumerate(outs):
            rows.append(tuple(stack(c, dim=-1).reshape(*o.shape, *x.shape)
                              for c, x in zip(cols[j], xs)))
    if not create_graph:
        rows = [tuple(r.detach() for r in row) for row in rows]
    if out_single:
        return rows[0][0] if single else rows[0]
    return tuple(r[0] for r in rows) if single else tuple(rows)


def hessian(func, inputs, create_graph=False, strict=False):
    """The Hessian of a scalar function: the Jacobian of its gradient."""
    xs, single = _tuple(inputs, "inputs")

    def gradient(*args):
        out = func(*args)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError("hessian: func must return a single-element tensor")
        gs = grad(out.reshape(()), args, create_graph=True, allow_unused=True)
        gs = tuple(g if g is not None else a * 0 for g, a in zip(gs, args))
        return gs[0] if single else gs

    return jacobian(gradient, inputs, create_graph=create_graph)
