"""The fused LSTM layer: one primitive per layer and direction, as PyTorch's CPU LSTM
(``aten::lstm`` calling ``aten::mkldnn_rnn_layer``, whose node is ``MkldnnRnnLayerBackward0``;
the ``lstm`` composite, the layer loop, is in ``nn/modules/rnn_layers.py``).

The layer returns ``(output, h_n, c_n, workspace)``: ``workspace`` (steps, batch, 5 *
hidden) holds each step's gate activations ``[i, f, o, g]`` (the sigmoid gates first; the
weights' rows are PyTorch's order, i, f, g, o) and cell state ``c``, which the
backward reads instead of recomputing them. It is an output like the others (PyTorch's is
too): the rules take its gradient into account, so the backward, written with ``F``, is
itself differentiable.
"""
from __future__ import annotations

from ..backend import matmul
from ..dispatch import TensorF, defop
from .shape import MAX_CAT_INPUTS

__all__ = ["LSTM_LAYER"]


def _steps(n: int, reverse: bool):
    return range(n - 1, -1, -1) if reverse else range(n)


def _check_lstm_layer(x, w_ih, w_hh, b_ih, b_hh, hx, cx, w_hr=None, reverse=False):
    hidden, size = w_hh.shape[0] // 4, w_hh.shape[-1]   # size: proj_size, or hidden
    if x.ndim != 3:
        raise RuntimeError(f"lstm: expected a 3-D input (seq, batch, feature), got shape "
                           f"{list(x.shape)}")
    if (tuple(w_ih.shape) != (4 * hidden, x.shape[2]) or w_hh.shape[0] != 4 * hidden
            or (w_hr is None and size != hidden)
            or (w_hr is not None and tuple(w_hr.shape) != (size, hidden))):
        raise RuntimeError(f"lstm: weights of shapes {list(w_ih.shape)}, {list(w_hh.shape)}"
                           f"{'' if w_hr is None else ', ' + str(list(w_hr.shape))} do not "
                           f"fit an input of {x.shape[2]} features")
    for name, s, n in (("hx", hx, size), ("cx", cx, hidden)):
        if tuple(s.shape) != (x.shape[1], n):
            raise RuntimeError(f"lstm: expected {name} of shape {[x.shape[1], n]}, got "
                               f"{list(s.shape)}")


def _gate_weights(xp, w, hidden):
    """Rows of an LSTM weight (or bias) in the workspace's gate order (i, f, o, g), the
    sigmoid gates' rows halved: sigmoid(z) = 0.5 + 0.5 * tanh(z / 2), so one tanh over all
    four gates and one multiply-add over the first three give every activation (a step's
    ufunc calls are its cost at small sizes), and halving is exact."""
    w = xp.concatenate([w[:2 * hidden], w[3 * hidden:], w[2 * hidden:3 * hidden]])
    w[:3 * hidden] *= 0.5
    return w


def _lstm_layer_fwd(xp, x, w_ih, w_hh, b_ih, b_hh, hx, cx, w_hr=None, reverse=False):
    steps, batch, n_in = x.shape
    hidden, size = w_hh.shape[0] // 4, w_hh.shape[1]
    h3, h4 = 3 * hidden, 4 * hidden
    # The input projection of every step at once: one GEMM instead of one a step.
    gx = matmul(xp, x.reshape(steps * batch, n_in), _gate_weights(xp, w_ih, hidden).T)
    bias = [b for b in (b_ih, b_hh) if b is not None]
    if bias:
        gx += _gate_weights(xp, bias[0] + bias[1] if len(bias) == 2 else bias[0], hidden)
    gx = gx.reshape(steps, batch, h4)
    # Contiguous (hidden, 4 * hidden): the GEMM a step is 5% faster than on the transposed view.
    w_hh_t = xp.ascontiguousarray(_gate_weights(xp, w_hh, hidden).T)
    out = xp.empty((steps, batch, size), dtype=gx.dtype)
    ws = xp.empty((steps, batch, 5 * hidden), dtype=gx.dtype)
    tmp = xp.empty((batch, h4), dtype=gx.dtype)
    w_hr_t = None if w_hr is None else xp.ascontiguousarray(w_hr.T)
    h, c = hx, cx
    for t in _steps(steps, reverse):
        a = ws[t, :, :h4]
        matmul(xp, h, w_hh_t, out=tmp)
        xp.add(tmp, gx[t], out=a)
        xp.tanh(a, out=a)
        sig = a[:, :h3]                            # i, f, o: 0.5 + 0.5 * tanh(z / 2)
        sig *= 0.5
        sig += 0.5
        c_new = ws[t, :, h4:]
        xp.multiply(a[:, hidden:2 * hidden], c, out=c_new)      # f * c + i * g
        i_g = xp.multiply(a[:, :hidden], a[:, h3:], out=tmp[:, :hidden])
        c_new += i_g
        h = out[t] if w_hr is None else tmp[:, :hidden]
        xp.tanh(c_new, out=h)                      # o * tanh(c)
        h *= a[:, 2 * hidden:h3]
        if w_hr is not None:                       # the projection: W_hr (o * tanh(c))
            h = matmul(xp, h, w_hr_t, out=out[t])
        c = c_new
    return out, h.copy(), c.copy(), ws


def _stack(F, xs):
    """F.stack of any number of tensors (stack takes at most MAX_CAT_INPUTS)."""
    if len(xs) <= MAX_CAT_INPUTS:
        return F.stack(*xs, dim=0)
    parts = [F.stack(*xs[i:i + MAX_CAT_INPUTS], dim=0) for i in range(0, len(xs), MAX_CAT_INPUTS)]
    return F.cat(*parts, dim=0, sizes=tuple(p.shape[0] for p in parts))


def _nonzero(a) -> bool:
    return bool(a.any())


def _h_prev(F, output, hx, reverse):
    """The hidden state each step read, in time order: hx, then the outputs before it."""
    steps, batch, hidden = output.shape
    first = F.reshape(hx, shape=(1, batch, hidden))
    if steps == 1:
        return first
    if reverse:
        return F.cat(output[1:], first, dim=0, sizes=(steps - 1, 1))
    return F.cat(first, output[:-1], dim=0, sizes=(1, steps - 1))


def _state_before(xp, states, first, order):
    """On arrays: the state each step read, in time order: ``first`` for the first step run
    (``order[0]``), then for each later step the state the step before it wrote."""
    before = xp.empty_like(states)
    before[order[0]] = first
    if len(order) > 1:
        before[order[1:]] = states[order[:-1]]
    return before


def _input_tangent(F, tangents: dict, x, w_ih, zeros, biases=(3, 4)):
    """The tangent of every step's input projection ``x W_ih^T + biases`` at once, on
    ``zeros`` (``(steps, batch, gates)``): from the tangents of x (input 0), W_ih (1) and
    the biases named (indices into ``tangents``; those absent are zero)."""
    steps, batch, n_in = x.shape
    rows, gates = steps * batch, zeros.shape[-1]
    t_in = zeros
    if 0 in tangents:
        t_in = t_in + F.reshape(F.matmul(F.reshape(tangents[0], shape=(rows, n_in)),
                                         F.transpose(w_ih, dim0=0, dim1=1)),
                                shape=(steps, batch, gates))
    if 1 in tangents:
        t_in = t_in + F.reshape(F.matmul(F.reshape(x, shape=(rows, n_in)),
                                         F.transpose(tangents[1], dim0=0, dim1=1)),
                                shape=(steps, batch, gates))
    for j in biases:
        if j in tangents:
            t_in = t_in + tangents[j]
    return t_in


def _layer_weight_grads_arrays(xp, grads, needs, x, w_ih, d_x2, d_h2, h_prev):
    """On arrays, after backward-through-time: fill ``grads[0:5]`` (input, W_ih, W_hh, b_ih,
    b_hh) from the pre-activation gradients ``d_x2`` (the input side, ``(rows, gates)``) and
    ``d_h2`` (the hidden side; the same array where the two sides share one sum, and then
    b_ih and b_hh share one gradient). ``h_prev`` is the state each step read or a
    zero-argument callable that builds it (only when W_hh's gradient is needed)."""
    steps, batch, n_in = x.shape
    rows = steps * batch
    if needs[0]:
        grads[0] = matmul(xp, d_x2, w_ih).reshape(steps, batch, n_in)
    if needs[1]:
        grads[1] = matmul(xp, d_x2.T, x.reshape(rows, n_in))
    if needs[2]:
        if callable(h_prev):
            h_prev = h_prev()
        grads[2] = matmul(xp, d_h2.T, h_prev.reshape(rows, h_prev.shape[-1]))
    if d_h2 is d_x2:
        if needs[3] or needs[4]:
            db = d_x2.sum(0)
            grads[3], grads[4] = (db if needs[3] else None), (db if needs[4] else None)
    else:
        if needs[3]:
            grads[3] = d_x2.sum(0)
        if needs[4]:
            grads[4] = d_h2.sum(0)
    return grads


def _lstm_layer_grads(F, g, out, x, w_ih, w_hh, b_ih, b_hh, hx, cx, w_hr=None, reverse=False,
                      needs=(True,) * 8):
    """Every input's gradient (None where ``needs`` is false), backpropagating through time
    with the saved gate activations. Written with ``F`` and operators, so the same code runs
    on arrays and, under create_graph, on tensors."""
    g_out, g_hy, g_cy, g_ws = g
    if F is TensorF:
        # A node keeps the outputs of an op with several as arrays, constants to a
        # differentiable backward: the ones read here are recomputed as tensors, whose node
        # carries the second derivative.
        out = F.mkldnn_rnn_layer(x, w_ih, w_hh, b_ih, b_hh, hx, cx, w_hr, reverse=reverse)
    output, _, _, ws = out
    steps, batch, n_in = x.shape
    hidden, size = w_hh.shape[0] // 4, w_hh.shape[1]
    h1, h2, h3, h4 = hidden, 2 * hidden, 3 * hidden, 4 * hidden
    order = list(_steps(steps, reverse))
    with_ws = _nonzero(g_ws)   # only a differentiated backward sends a workspace gradient
    dh, dc = g_hy, g_cy
    d_gates, d_proj = [None] * steps, [None] * steps
    for k in range(steps - 1, -1, -1):
        t = order[k]
        w = ws[t]
        i, f, o, gg, c = w[:, :h1], w[:, h1:h2], w[:, h2:h3], w[:, h3:h4], w[:, h4:]
        c_prev = cx if k == 0 else ws[order[k - 1]][:, h4:]
        dh = dh + g_out[t]
        if w_hr is not None:   # back through h = W_hr (o * tanh(c))
            d_proj[t] = dh
            dh = F.matmul(dh, w_hr)
        tc = F.tanh(c)
        dc = dc + dh * o * (1 - tc * tc)
        d_i, d_f, d_g, d_o = dc * gg, dc * c_prev, dc * i, dh * tc
        if with_ws:
            gw = g_ws[t]
            dc = dc + gw[:, h4:]
            d_i, d_f = dc * gg + gw[:, :h1], dc * c_prev + gw[:, h1:h2]
            d_g, d_o = dc * i + gw[:, h3:h4], d_o + gw[:, h2:h3]
        d_pre = F.cat(d_i * i * (1 - i), d_f * f * (1 - f), d_g * (1 - gg * gg),
                      d_o * o * (1 - o), dim=1, sizes=(h1, h1, h1, h1))
        d_gates[t] = d_pre
        dh = F.matmul(d_pre, w_hh)
        dc = dc * f
    d2 = F.reshape(_stack(F, d_gates), shape=(steps * batch, h4))
    d2_t = F.transpose(d2, dim0=0, dim1=1)
    grads = [None] * 8
    if needs[0]:
        grads[0] = F.reshape(F.matmul(d2, w_ih), shape=(steps, batch, n_in))
    if needs[1]:
        grads[1] = F.matmul(d2_t, F.reshape(x, shape=(steps * batch, n_in)))
    if needs[2]:
        h_prev = _h_prev(F, output, hx, reverse)
        grads[2] = F.matmul(d2_t, F.reshape(h_prev, shape=(steps * batch, size)))
    if needs[3] or needs[4]:
        db = F.sum(d2, dim=0)
        grads[3], grads[4] = (db if needs[3] else None), (db if needs[4] else None)
    grads[5], grads[6] = dh, dc
    if w_hr is not None and needs[7]:
        hc = ws[:, :, h2:h3] * F.tanh(ws[:, :, h4:])   # o * tanh(c), every step
        grads[7] = F.matmul(F.transpose(F.reshape(_stack(F, d_proj), shape=(steps * batch, size)),
                                        dim0=0, dim1=1),
                            F.reshape(hc, shape=(steps * batch, hidden)))
    return grads


def _lstm_layer_rule(i):
    def rule(F, g, out, x, w_ih, w_hh, b_ih, b_hh, hx, cx, w_hr, reverse=False):
        needs = tuple(j == i for j in range(8))
        return _lstm_layer_grads(F, g, out, x, w_ih, w_hh, b_ih, b_hh, hx, cx, w_hr, reverse,
                                 needs)[i]
    return rule


def _lstm_layer_joint(F, g, out, x, w_ih, w_hh, b_ih, b_hh, hx, cx, w_hr=None, reverse=False,
                      needs=()):
    if _nonzero(g[3]):   # a workspace gradient (a double backward): the general rules
        return _lstm_layer_grads(F, g, out, x, w_ih, w_hh, b_ih, b_hh, hx, cx, w_hr, reverse,
                                 needs)
    return _lstm_layer_backward_arrays(F.xp, g, out, x, w_ih, w_hh, hx, cx, w_hr, reverse,
                                       needs)


def _lstm_layer_backward_arrays(xp, g, out, x, w_ih, w_hh, hx, cx, w_hr, reverse, needs):
    """The backward on arrays, for a workspace without gradient (every first backward).

    The same equations as :func:`_lstm_layer_grads`, arranged for few ufunc calls a step
    (the loop is the cost once the GEMMs are batched): every factor that does not depend on
    the incoming gradient is computed for all steps at once before the loop, so a step is
    two updates of (dh, dc), two products into that step's rows of the gate gradients, one
    GEMM and one product.
    """
    g_out, g_hy, g_cy, _ = g
    output, _, _, ws = out
    steps, batch, n_in = x.shape
    hidden, size = w_hh.shape[0] // 4, w_hh.shape[1]
    h1, h2, h3, h4 = hidden, 2 * hidden, 3 * hidden, 4 * hidden
    dtype = ws.dtype
    i, f, o, gg, c = (ws[..., k * hidden:(k + 1) * hidden] for k in range(5))
    order = list(_steps(steps, reverse))
    c_prev = _state_before(xp, c, cx, order)
    # Per step, with tc = tanh(c):  dc += dh * o * (1 - tc^2);
    # [d_i, d_f, d_g] = dc * [g * i(1-i), c_prev * f(1-f), i * (1 - g^2)];
    # d_o = dh * tc * o(1-o);  then dh = d_gates @ W_hh, dc *= f.
    tc = xp.tanh(c)
    k_dc = 1 - tc * tc
    k_dc *= o
    k_o = 1 - o
    k_o *= o
    k_o *= tc
    k_ifg = xp.empty((steps, batch, 3, hidden), dtype=dtype)
    xp.multiply(i, 1 - i, out=k_ifg[:, :, 0])
    k_ifg[:, :, 0] *= gg
    xp.multiply(f, 1 - f, out=k_ifg[:, :, 1])
    k_ifg[:, :, 1] *= c_prev
    xp.multiply(gg, gg, out=k_ifg[:, :, 2])
    xp.subtract(1, k_ifg[:, :, 2], out=k_ifg[:, :, 2])
    k_ifg[:, :, 2] *= i
    d_gates = xp.empty((steps, batch, h4), dtype=dtype)
    dh = xp.array(g_hy, dtype=dtype)   # copies: updated in place below
    dc = xp.array(g_cy, dtype=dtype)
    tmp = xp.empty((batch, hidden), dtype=dtype)
    if w_hr is not None:   # dh of each step kept for W_hr's gradient; dhc: through W_hr
        d_proj = xp.empty((steps, batch, size), dtype=dtype)
        dhc = xp.empty((batch, hidden), dtype=dtype)
    for t in reversed(order):
        if w_hr is None:
            dh += g_out[t]
            dhc = dh
        else:
            xp.add(dh, g_out[t], out=d_proj[t])
            matmul(xp, d_proj[t], w_hr, out=dhc)
        xp.multiply(dhc, k_dc[t], out=tmp)
        dc += tmp
        d = d_gates[t]
        xp.multiply(k_ifg[t], dc.reshape(batch, 1, hidden),
                    out=d[:, :h3].reshape(batch, 3, hidden))
        xp.multiply(dhc, k_o[t], out=d[:, h3:])
        matmul(xp, d, w_hh, out=dh)
        dc *= f[t]
    rows = steps * batch
    d2 = d_gates.reshape(rows, h4)
    grads = _layer_weight_grads_arrays(xp, [None] * 8, needs, x, w_ih, d2, d2,
                                       lambda: _state_before(xp, output, hx, order))
    grads[5], grads[6] = dh, dc
    if w_hr is not None and needs[7]:
        hc = o * tc   # o * tanh(c), every step
        grads[7] = matmul(xp, d_proj.reshape(rows, size).T, hc.reshape(rows, hidden))
    return grads


def _lstm_layer_tangents(F, tangents: dict, out, x, w_ih, w_hh, b_ih, b_hh, hx, cx, w_hr=None,
                         reverse=False):
    """The outputs' tangents for the inputs' tangents ``{input index: tangent}``: the
    linearised recurrence, run forward."""
    output, _, _, ws = out
    steps, batch, n_in = x.shape
    hidden = w_hh.shape[0] // 4
    h1, h2, h3, h4 = hidden, 2 * hidden, 3 * hidden, 4 * hidden
    t_in = _input_tangent(F, tangents, x, w_ih, F.zeros_like(ws[:, :, :h4]))
    dh = tangents.get(5, F.zeros_like(hx))
    dc = tangents.get(6, F.zeros_like(cx))
    t_w_hh = F.transpose(tangents[2], dim0=0, dim1=1) if 2 in tangents else None
    w_hh_t = F.transpose(w_hh, dim0=0, dim1=1)
    d_out, d_ws = [None] * steps, [None] * steps
    order = list(_steps(steps, reverse))
    for k, t in enumerate(order):
        w = ws[t]
        i, f, o, gg, c = w[:, :h1], w[:, h1:h2], w[:, h2:h3], w[:, h3:h4], w[:, h4:]
        c_prev = cx if k == 0 else ws[order[k - 1]][:, h4:]
        pre = t_in[t] + F.matmul(dh, w_hh_t)
        if t_w_hh is not None:
            pre = pre + F.matmul(hx if k == 0 else output[order[k - 1]], t_w_hh)
        d_i, d_f = pre[:, :h1] * i * (1 - i), pre[:, h1:h2] * f * (1 - f)
        d_g, d_o = pre[:, h2:h3] * (1 - gg * gg), pre[:, h3:h4] * o * (1 - o)
        dc = d_f * c_prev + f * dc + d_i * gg + i * d_g
        tc = F.tanh(c)
        dh = d_o * tc + o * (1 - tc * tc) * dc
        if w_hr is not None:   # h = W_hr (o * tanh(c))
            dh = F.matmul(dh, F.transpose(w_hr, dim0=0, dim1=1))
            if 7 in tangents:
                dh = dh + F.matmul(o * tc, F.transpose(tangents[7], dim0=0, dim1=1))
        d_out[t] = dh
        d_ws[t] = F.cat(d_i, d_f, d_o, d_g, dc, dim=1, sizes=(h1,) * 5)
    return _stack(F, d_out), dh, dc, _stack(F, d_ws)


def _lstm_layer_jvp(i):
    def rule(F, t, out, x, w_ih, w_hh, b_ih, b_hh, hx, cx, w_hr, reverse=False):
        return _lstm_layer_tangents(F, {i: t}, out, x, w_ih, w_hh, b_ih, b_hh, hx, cx, w_hr,
                                    reverse)
    return rule


# NOTE: a primitive for speed. Unrolled, every time step of an LSTM is a dozen small ops,
# each a node the engine records, saves for and walks back (35 steps x 2 layers: ~900 nodes a
# forward), and each weight's gradient a GEMM a step. Fused, the forward computes the input
# projection of every step with one GEMM before the loop (as cuDNN and PyTorch do), then one
# GEMM and ten ufunc calls a step; the backward walks the steps with the saved gate
# activations and ends with one GEMM per weight over all steps. A training step at the
# word-language-model example's sizes went from 2.4x PyTorch's CPU time to 1.5x (the rest
# is the GEMMs themselves), at tiny sizes from 4.4x to 1.1x (benchmarks/train_step.py).
# The name is PyTorch's, so a profile of this and one of PyTorch's line up.
LSTM_LAYER = defop("mkldnn_rnn_layer", _lstm_layer_fwd,
                    tuple(_lstm_layer_rule(i) for i in range(8)),
                    jvp=tuple(_lstm_layer_jvp(i) for i in range(8)), nout=4,
                    joint=_lstm_layer_joint, check=_check_lstm_layer,
                    node_name="MkldnnRnnLayerBackward0")
