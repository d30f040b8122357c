"""The fused Elman RNN layer: one primitive per layer and direction (``rnn_layer``, node
``RnnLayerBackward0``), under PyTorch's ``rnn_tanh`` / ``rnn_relu`` ranges (the composites,
in ``nn/modules/rnn_layers.py``)::

    h' = tanh(W_ih x + b_ih + W_hh h + b_hh)      (or relu)

The layer returns ``(output, h_n)``. The activation's derivative comes from the output
itself (1 - h^2 for tanh, h > 0 for relu), so the layer needs no workspace.
"""
from __future__ import annotations

from ..backend import matmul
from ..dispatch import TensorF, defop
from .rnn import (_h_prev, _input_tangent, _layer_weight_grads_arrays,
                  _stack, _state_before, _steps)

__all__ = ["RNN_LAYER"]


def _check_rnn_layer(x, w_ih, w_hh, b_ih, b_hh, hx, reverse=False, relu=False):
    hidden = w_hh.shape[-1]
    if x.ndim != 3:
        raise RuntimeError(f"rnn: expected a 3-D input (seq, batch, feature), got shape "
                           f"{list(x.shape)}")
    if tuple(w_ih.shape) != (hidden, x.shape[2]) or tuple(w_hh.shape) != (hidden, hidden):
        raise RuntimeError(f"rnn: weights of shapes {list(w_ih.shape)} and {list(w_hh.shape)} "
                           f"do not fit an input of {x.shape[2]} features")
    if tuple(hx.shape) != (x.shape[1], hidden):
        raise RuntimeError(f"rnn: expected hx of shape {[x.shape[1], hidden]}, got "
                           f"{list(hx.shape)}")


def _rnn_layer_fwd(xp, x, w_ih, w_hh, b_ih, b_hh, hx, reverse=False, relu=False):
    steps, batch, n_in = x.shape
    hidden = w_hh.shape[0]
    # Every step's input projection and both biases in one GEMM and one add.
    gx = matmul(xp, x.reshape(steps * batch, n_in), w_ih.T)
    bias = [b for b in (b_ih, b_hh) if b is not None]
    if bias:
        gx += bias[0] + bias[1] if len(bias) == 2 else bias[0]
    gx = gx.reshape(steps, batch, hidden)
    w_hh_t = xp.ascontiguousarray(w_hh.T)   # (see rnn.py)
    out = xp.empty((steps, batch, hidden), dtype=gx.dtype)
    tmp = xp.empty((batch, hidden), dtype=gx.dtype)
    h = hx
    for t in _steps(steps, reverse):
        matmul(xp, h, w_hh_t, out=tmp)
        h = xp.add(tmp, gx[t], out=out[t])
        if relu:
            xp.maximum(h, 0, out=h)
        else:
            xp.tanh(h, out=h)
    return out, h.copy()


def _derivative(output, relu):
    """The activation's derivative at each step, from its output."""
    return (output > 0) if relu else 1 - output * output


def _rnn_layer_grads(F, g, out, x, w_ih, w_hh, b_ih, b_hh, hx, reverse=False, relu=False,
                     needs=(True,) * 6):
    """Every input's gradient (None where ``needs`` is false), written with ``F`` and
    operators: it runs on arrays and, under create_graph, on tensors."""
    g_out, g_hy = g
    if F is TensorF:
        # Outputs of an op with several are kept as arrays (constants to this backward):
        # recomputed as tensors, whose node carries the second derivative.
        out = F.rnn_layer(x, w_ih, w_hh, b_ih, b_hh, hx, reverse=reverse, relu=relu)
    output = out[0]
    steps, batch, n_in = x.shape
    hidden = w_hh.shape[0]
    order = list(_steps(steps, reverse))
    dh = g_hy
    d_pre = [None] * steps
    for t in reversed(order):
        dh = dh + g_out[t]
        d_pre[t] = dh * _derivative(output[t], relu)
        dh = F.matmul(d_pre[t], w_hh)
    rows = steps * batch
    d2 = F.reshape(_stack(F, d_pre), shape=(rows, hidden))
    d2_t = F.transpose(d2, dim0=0, dim1=1)
    grads = [None] * 6
    if needs[0]:
        grads[0] = F.reshape(F.matmul(d2, w_ih), shape=(steps, batch, n_in))
    if needs[1]:
        grads[1] = F.matmul(d2_t, F.reshape(x, shape=(rows, n_in)))
    if needs[2]:
        h_prev = F.reshape(_h_prev(F, output, hx, reverse), shape=(rows, hidden))
        grads[2] = F.matmul(d2_t, h_prev)
    if needs[3] or needs[4]:
        db = F.sum(d2, dim=0)
        grads[3], grads[4] = (db if needs[3] else None), (db if needs[4] else None)
    grads[5] = dh
    return grads


def _rnn_layer_joint(F, g, out, x, w_ih, w_hh, b_ih, b_hh, hx, reverse=False, relu=False,
                     needs=()):
    """The backward on arrays: the derivative of every step at once, then a step is an add,
    a product and one GEMM."""
    xp = F.xp
    g_out, g_hy = g
    output = out[0]
    steps, batch, n_in = x.shape
    hidden = w_hh.shape[0]
    k = _derivative(output, relu).astype(output.dtype, copy=False)
    d_pre = xp.empty_like(output)
    dh = xp.array(g_hy, dtype=output.dtype)   # a copy: updated in place
    order = list(_steps(steps, reverse))
    for t in reversed(order):
        dh += g_out[t]
        xp.multiply(dh, k[t], out=d_pre[t])
        matmul(xp, d_pre[t], w_hh, out=dh)
    rows = steps * batch
    d2 = d_pre.reshape(rows, hidden)
    grads = _layer_weight_grads_arrays(xp, [None] * 6, needs, x, w_ih, d2, d2,
                                       lambda: _state_before(xp, output, hx, order))
    grads[5] = dh
    return grads


def _rnn_layer_rule(i):
    def rule(F, g, out, x, w_ih, w_hh, b_ih, b_hh, hx, reverse=False, relu=False):
        needs = tuple(j == i for j in range(6))
        return _rnn_layer_grads(F, g, out, x, w_ih, w_hh, b_ih, b_hh, hx, reverse, relu,
                                needs)[i]
    return rule


def _rnn_layer_tangents(F, tangents: dict, out, x, w_ih, w_hh, b_ih, b_hh, hx, reverse=False,
                        relu=False):
    """The outputs' tangents for the inputs' tangents ``{input index: tangent}``: the
    linearised recurrence, run forward."""
    output = out[0]
    steps, batch, n_in = x.shape
    t_in = _input_tangent(F, tangents, x, w_ih, F.zeros_like(output))
    dh = tangents.get(5, F.zeros_like(hx))
    w_hh_t = F.transpose(w_hh, dim0=0, dim1=1)
    t_w_hh = F.transpose(tangents[2], dim0=0, dim1=1) if 2 in tangents else None
    d_out = [None] * steps
    order = list(_steps(steps, reverse))
    for k, t in enumerate(order):
        pre = t_in[t] + F.matmul(dh, w_hh_t)
        if t_w_hh is not None:
            pre = pre + F.matmul(hx if k == 0 else output[order[k - 1]], t_w_hh)
        dh = pre * _derivative(output[t], relu)
        d_out[t] = dh
    return _stack(F, d_out), dh


def _rnn_layer_jvp(i):
    def rule(F, t, out, x, w_ih, w_hh, b_ih, b_hh, hx, reverse=False, relu=False):
        return _rnn_layer_tangents(F, {i: t}, out, x, w_ih, w_hh, b_ih, b_hh, hx, reverse, relu)
    return rule


# NOTE: a primitive for speed, as the LSTM's (see rnn.py): one node a layer instead of three
# a time step, one GEMM per weight over all steps (nn.RNN at tiny sizes, 35 steps: 2x
# PyTorch's CPU time unrolled). PyTorch's CPU RNN has no fused layer op (``aten::rnn_tanh``
# unrolls into per-step cells), so the layer has a name of its own.
RNN_LAYER = defop("rnn_layer", _rnn_layer_fwd, tuple(_rnn_layer_rule(i) for i in range(6)),
                  jvp=tuple(_rnn_layer_jvp(i) for i in range(6)), nout=2,
                  joint=_rnn_layer_joint, check=_check_rnn_layer,
                  node_name="RnnLayerBackward0")
