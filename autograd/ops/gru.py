"""The fused GRU layer: one primitive per layer and direction (``gru_layer``, node
``GruLayerBackward0``), under PyTorch's ``gru`` range (the composite, in
``nn/modules/rnn_layers.py``).

PyTorch's equations, gate order (r, z, n)::

    r = sigmoid(W_ir x + b_ir + W_hr h + b_hr)     z = sigmoid(... z rows ...)
    n = tanh(W_in x + b_in + r * (W_hn h + b_hn))  h' = (1 - z) * n + z * h

The layer returns ``(output, h_n, workspace)``; ``workspace`` (steps, batch, 4 * hidden)
holds each step's ``[r, z, n, hn]`` with ``hn = W_hn h + b_hn``. As the LSTM's, it is an
output whose gradient the rules take into account, so their backward is differentiable.
"""
from __future__ import annotations

from ..backend import matmul
from ..dispatch import TensorF, defop
from .rnn import (_h_prev, _input_tangent, _layer_weight_grads_arrays, _nonzero,
                  _stack, _state_before, _steps)

__all__ = ["GRU_LAYER"]


def _check_gru_layer(x, w_ih, w_hh, b_ih, b_hh, hx, reverse=False):
    hidden = w_hh.shape[-1]
    if x.ndim != 3:
        raise RuntimeError(f"gru: expected a 3-D input (seq, batch, feature), got shape "
                           f"{list(x.shape)}")
    if tuple(w_ih.shape) != (3 * hidden, x.shape[2]) or tuple(w_hh.shape) != (3 * hidden, hidden):
        raise RuntimeError(f"gru: weights of shapes {list(w_ih.shape)} and {list(w_hh.shape)} "
                           f"do not fit an input of {x.shape[2]} features")
    if tuple(hx.shape) != (x.shape[1], hidden):
        raise RuntimeError(f"gru: expected hx of shape {[x.shape[1], hidden]}, got "
                           f"{list(hx.shape)}")


def _halved(xp, w, hidden):
    """``w`` (rows or entries r, z, n) with r and z halved: sigmoid(a) = 0.5 + 0.5 tanh(a/2)
    gives both gates with one tanh and one multiply-add (halving is exact)."""
    w = w.copy()
    w[:2 * hidden] *= 0.5
    return w


def _gru_layer_fwd(xp, x, w_ih, w_hh, b_ih, b_hh, hx, reverse=False):
    steps, batch, n_in = x.shape
    hidden = w_hh.shape[1]
    h2, h3 = 2 * hidden, 3 * hidden
    # Every step's input projection in one GEMM; b_hr and b_hz join it (they add to the
    # same sums), b_hn stays inside r * (W_hn h + b_hn).
    gx = matmul(xp, x.reshape(steps * batch, n_in), _halved(xp, w_ih, hidden).T)
    if b_ih is not None:
        gx += _halved(xp, b_ih, hidden)
    if b_hh is not None:
        gx[:, :h2] += 0.5 * b_hh[:h2]
    gx = gx.reshape(steps, batch, h3)
    w_hh_t = xp.ascontiguousarray(_halved(xp, w_hh, hidden).T)   # (see rnn.py)
    out = xp.empty((steps, batch, hidden), dtype=gx.dtype)
    ws = xp.empty((steps, batch, 4 * hidden), dtype=gx.dtype)
    tmp = xp.empty((batch, h3), dtype=gx.dtype)
    h = hx
    for t in _steps(steps, reverse):
        a = ws[t]
        matmul(xp, h, w_hh_t, out=tmp)
        rz = a[:, :h2]
        xp.add(tmp[:, :h2], gx[t, :, :h2], out=rz)
        xp.tanh(rz, out=rz)
        rz *= 0.5
        rz += 0.5
        hn = a[:, h3:]
        if b_hh is not None:
            xp.add(tmp[:, h2:], b_hh[h2:], out=hn)
        else:
            hn[...] = tmp[:, h2:]
        n = a[:, h2:h3]
        xp.multiply(a[:, :hidden], hn, out=n)
        n += gx[t, :, h2:]
        xp.tanh(n, out=n)
        h_new = out[t]                          # n + z * (h - n)
        xp.subtract(h, n, out=h_new)
        h_new *= a[:, hidden:h2]
        h_new += n
        h = h_new
    return out, h.copy(), ws


def _gru_layer_grads(F, g, out, x, w_ih, w_hh, b_ih, b_hh, hx, reverse=False,
                     needs=(True,) * 6):
    """Every input's gradient (None where ``needs`` is false), written with ``F`` and
    operators: it runs on arrays and, under create_graph, on tensors."""
    g_out, g_hy, g_ws = g
    if F is TensorF:
        # Outputs of an op with several are kept as arrays (constants to this backward):
        # recomputed as tensors, whose node carries the second derivative.
        out = F.gru_layer(x, w_ih, w_hh, b_ih, b_hh, hx, reverse=reverse)
    output, _, ws = out
    steps, batch, n_in = x.shape
    hidden = w_hh.shape[1]
    h1, h2, h3 = hidden, 2 * hidden, 3 * hidden
    order = list(_steps(steps, reverse))
    with_ws = _nonzero(g_ws)
    dh = g_hy
    d_x, d_h = [None] * steps, [None] * steps
    for k in range(steps - 1, -1, -1):
        t = order[k]
        w = ws[t]
        r, z, n, hn = w[:, :h1], w[:, h1:h2], w[:, h2:h3], w[:, h3:]
        h_prev = hx if k == 0 else output[order[k - 1]]
        dh = dh + g_out[t]
        dn, dz = dh * (1 - z), dh * (h_prev - n)
        if with_ws:
            gw = g_ws[t]
            dn, dz = dn + gw[:, h2:h3], dz + gw[:, h1:h2]
        dn_pre = dn * (1 - n * n)
        dr, d_hn = dn_pre * hn, dn_pre * r
        if with_ws:
            dr, d_hn = dr + gw[:, :h1], d_hn + gw[:, h3:]
        dr_pre, dz_pre = dr * r * (1 - r), dz * z * (1 - z)
        d_x[t] = F.cat(dr_pre, dz_pre, dn_pre, dim=1, sizes=(h1, h1, h1))
        d_h[t] = F.cat(dr_pre, dz_pre, d_hn, dim=1, sizes=(h1, h1, h1))
        dh = F.matmul(d_h[t], w_hh) + dh * z
    rows = steps * batch
    dx2 = F.reshape(_stack(F, d_x), shape=(rows, h3))
    dh2 = F.reshape(_stack(F, d_h), shape=(rows, h3))
    grads = [None] * 6
    if needs[0]:
        grads[0] = F.reshape(F.matmul(dx2, w_ih), shape=(steps, batch, n_in))
    if needs[1]:
        grads[1] = F.matmul(F.transpose(dx2, dim0=0, dim1=1),
                            F.reshape(x, shape=(rows, n_in)))
    if needs[2]:
        h_prev = F.reshape(_h_prev(F, output, hx, reverse), shape=(rows, hidden))
        grads[2] = F.matmul(F.transpose(dh2, dim0=0, dim1=1), h_prev)
    if needs[3]:
        grads[3] = F.sum(dx2, dim=0)
    if needs[4]:
        grads[4] = F.sum(dh2, dim=0)
    grads[5] = dh
    return grads


def _gru_layer_joint(F, g, out, x, w_ih, w_hh, b_ih, b_hh, hx, reverse=False, needs=()):
    if _nonzero(g[2]):   # a workspace gradient (a double backward): the general rules
        return _gru_layer_grads(F, g, out, x, w_ih, w_hh, b_ih, b_hh, hx, reverse, needs)
    return _gru_layer_backward_arrays(F.xp, g, out, x, w_ih, w_hh, hx, reverse, needs)


def _gru_layer_backward_arrays(xp, g, out, x, w_ih, w_hh, hx, reverse, needs):
    """The backward on arrays without a workspace gradient (every first backward). Each
    gate's gradient is dh times a factor of the forward's values alone, so the factors are
    computed for all steps at once and a step is a few calls: two products into the gate
    gradients, one GEMM, one update of dh."""
    g_out, g_hy, _ = g
    output, _, ws = out
    steps, batch, n_in = x.shape
    hidden = w_hh.shape[1]
    h3 = 3 * hidden
    dtype = ws.dtype
    r, z, n, hn = (ws[..., k * hidden:(k + 1) * hidden] for k in range(4))
    order = list(_steps(steps, reverse))
    h_prev = _state_before(xp, output, hx, order)
    # d(pre-activation) = dh * k: n's is (1 - z)(1 - n^2), r's that times hn r(1 - r),
    # z's (h_prev - n) z(1 - z); W_hn h + b_hn's is n's times r.
    k_n = (1 - z) * (1 - n * n)
    k_x = xp.empty((steps, batch, 3, hidden), dtype=dtype)   # r, z, n
    xp.multiply(k_n * hn, r * (1 - r), out=k_x[:, :, 0])
    xp.multiply(h_prev - n, z * (1 - z), out=k_x[:, :, 1])
    k_x[:, :, 2] = k_n
    k_hn = k_n * r
    d_x = xp.empty((steps, batch, h3), dtype=dtype)
    d_h = xp.empty((steps, batch, h3), dtype=dtype)
    dh = xp.array(g_hy, dtype=dtype)
    tmp = xp.empty((batch, hidden), dtype=dtype)
    for t in reversed(order):
        dh += g_out[t]
        xp.multiply(k_x[t], dh.reshape(batch, 1, hidden), out=d_x[t].reshape(batch, 3, hidden))
        d_h[t, :, :2 * hidden] = d_x[t, :, :2 * hidden]
        xp.multiply(dh, k_hn[t], out=d_h[t, :, 2 * hidden:])
        matmul(xp, d_h[t], w_hh, out=tmp)
        dh *= z[t]
        dh += tmp
    rows = steps * batch
    dx2, dh2 = d_x.reshape(rows, h3), d_h.reshape(rows, h3)
    grads = _layer_weight_grads_arrays(xp, [None] * 6, needs, x, w_ih, dx2, dh2, h_prev)
    grads[5] = dh
    return grads


def _gru_layer_rule(i):
    def rule(F, g, out, x, w_ih, w_hh, b_ih, b_hh, hx, reverse=False):
        needs = tuple(j == i for j in range(6))
        return _gru_layer_grads(F, g, out, x, w_ih, w_hh, b_ih, b_hh, hx, reverse, needs)[i]
    return rule


def _gru_layer_tangents(F, tangents: dict, out, x, w_ih, w_hh, b_ih, b_hh, hx, reverse=False):
    """The outputs' tangents for the inputs' tangents ``{input index: tangent}``: the
    linearised recurrence, run forward."""
    output, _, ws = out
    steps, batch, n_in = x.shape
    hidden = w_hh.shape[1]
    h1, h2, h3 = hidden, 2 * hidden, 3 * hidden
    # b_hh's tangent (4) goes with W_hh h, inside the reset gate's product: not here.
    t_in = _input_tangent(F, tangents, x, w_ih, F.zeros_like(ws[:, :, :h3]), biases=(3,))
    dh = tangents.get(5, F.zeros_like(hx))
    w_hh_t = F.transpose(w_hh, dim0=0, dim1=1)
    t_w_hh = F.transpose(tangents[2], dim0=0, dim1=1) if 2 in tangents else None
    d_out, d_ws = [None] * steps, [None] * steps
    order = list(_steps(steps, reverse))
    for k, t in enumerate(order):
        w = ws[t]
        r, z, n, hn = w[:, :h1], w[:, h1:h2], w[:, h2:h3], w[:, h3:]
        h_prev = hx if k == 0 else output[order[k - 1]]
        t_h = F.matmul(dh, w_hh_t)   # the tangent of W_hh h + b_hh
        if t_w_hh is not None:
            t_h = t_h + F.matmul(h_prev, t_w_hh)
        if 4 in tangents:
            t_h = t_h + tangents[4]
        dr = (t_in[t][:, :h1] + t_h[:, :h1]) * r * (1 - r)
        dz = (t_in[t][:, h1:h2] + t_h[:, h1:h2]) * z * (1 - z)
        d_hn = t_h[:, h2:]
        dn = (t_in[t][:, h2:] + dr * hn + r * d_hn) * (1 - n * n)
        dh = dn + dz * (h_prev - n) + z * (dh - dn)
        d_out[t] = dh
        d_ws[t] = F.cat(dr, dz, dn, d_hn, dim=1, sizes=(h1,) * 4)
    return _stack(F, d_out), dh, _stack(F, d_ws)


def _gru_layer_jvp(i):
    def rule(F, t, out, x, w_ih, w_hh, b_ih, b_hh, hx, reverse=False):
        return _gru_layer_tangents(F, {i: t}, out, x, w_ih, w_hh, b_ih, b_hh, hx, reverse)
    return rule


# NOTE: a primitive for speed, as the LSTM's (see rnn.py): one node a layer instead of ~10
# a time step, one GEMM per weight over all steps (a word-language-model step: 1.4x PyTorch's
# CPU time unrolled, 0.85x fused). PyTorch's CPU GRU has no fused layer op (it unrolls
# ``aten::gru`` into per-step linear and pointwise ops), so the layer has a name of its own.
GRU_LAYER = defop("gru_layer", _gru_layer_fwd, tuple(_gru_layer_rule(i) for i in range(6)),
                   jvp=tuple(_gru_layer_jvp(i) for i in range(6)), nout=3,
                   joint=_gru_layer_joint, check=_check_gru_layer,
                   node_name="GruLayerBackward0")
