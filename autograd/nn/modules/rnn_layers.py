"""PyTorch's ``torch.lstm``, ``torch.gru``, ``torch.rnn_tanh`` and ``torch.rnn_relu`` (what
nn.LSTM, nn.GRU and nn.RNN call): the loop over layers and directions, each one fused layer op
(``ops/rnn.py``, ``ops/gru.py``, ``ops/elman.py``), with dropout between layers in training.
Composites, so the profiler shows them as ``lstm``/``gru``/``rnn_tanh``/``rnn_relu`` ranges
around their layers, as PyTorch's ``aten::lstm`` around ``aten::mkldnn_rnn_layer``.

They live beside the modules rather than in ``ops``: the dropout between layers is
``nn.functional.dropout``, which the ops package must not import.
"""
from __future__ import annotations

from ... import ops
from ...dispatch import apply_op, defcomposite
from ...ops.elman import RNN_LAYER
from ...ops.gru import GRU_LAYER
from ...ops.rnn import LSTM_LAYER
from .. import functional as F

__all__ = ["run_layers", "lstm", "gru", "rnn_tanh", "rnn_relu"]


def run_layers(layer_op, input, states, params, has_biases: bool, num_layers: int,  # noqa: A002
               dropout: float, train: bool, bidirectional: bool, proj=None, **attrs):
    """The layer loop of torch.lstm / torch.gru: each layer and direction one ``layer_op``
    call (input, w_ih, w_hh, b_ih, b_hh, *states[, w_hr]) -> (output, *final states[,
    workspace]); the directions' outputs concatenated, dropout between layers in training.
    ``proj``: None for an op without a projection input (GRU, RNN), else whether ``params``
    holds each layer's ``w_hr`` (last of its weights) or the op gets None. ``attrs``: the
    op's other attributes (the RNN's ``relu``).

    Returns:
        ``(output, [each state's finals stacked (num_layers * directions, batch, hidden)])``.
    """
    directions = 2 if bidirectional else 1
    per = (4 if has_biases else 2) + bool(proj)
    x = input
    finals = [[] for _ in states]
    for layer in range(num_layers):
        outs = []
        for d in range(directions):
            k = layer * directions + d
            w = params[k * per:(k + 1) * per]
            b_ih, b_hh = (w[2], w[3]) if has_biases else (None, None)
            extra = () if proj is None else (w[-1] if proj else None,)
            res = apply_op(layer_op, (x, w[0], w[1], b_ih, b_hh, *(s[k] for s in states),
                                      *extra), {"reverse": bool(d), **attrs})
            outs.append(res[0])
            for f, e in zip(finals, res[1:]):
                f.append(e)
        x = outs[0] if directions == 1 else ops.cat(outs, -1)
        if dropout and train and layer < num_layers - 1:
            x = F.dropout(x, dropout, True)
    return x, [ops.stack(f, 0) for f in finals]


@defcomposite("lstm")
def lstm(input, hx, params, has_biases: bool, num_layers: int, dropout: float,  # noqa: A002
         train: bool, bidirectional: bool, has_proj: bool = False):
    """PyTorch's ``torch.lstm`` (what ``nn.LSTM`` calls) on a time-major input.

    Args:
        input: (seq, batch, input_size).
        hx: ``(h_0, c_0)``, each (num_layers * directions, batch, hidden_size).
        params: per layer and direction, ``w_ih, w_hh[, b_ih, b_hh][, w_hr]``.
        has_biases: whether ``params`` holds the biases.
        num_layers, dropout, train, bidirectional: as nn.LSTM's (dropout between layers
            in training only).
        has_proj: whether ``params`` holds the projections ``w_hr`` (proj_size > 0).

    Returns:
        ``(output, h_n, c_n)``.
    """
    out, (h, c) = run_layers(LSTM_LAYER, input, list(hx), params, has_biases, num_layers,
                             dropout, train, bidirectional, proj=has_proj)
    return out, h, c


@defcomposite("gru")
def gru(input, hx, params, has_biases: bool, num_layers: int, dropout: float,  # noqa: A002
        train: bool, bidirectional: bool):
    """PyTorch's ``torch.gru`` (what ``nn.GRU`` calls) on a time-major input.

    Args:
        input: (seq, batch, input_size).
        hx: h_0, (num_layers * directions, batch, hidden_size).
        params: per layer and direction, ``w_ih, w_hh[, b_ih, b_hh]``.
        has_biases, num_layers, dropout, train, bidirectional: as for :func:`lstm`.

    Returns:
        ``(output, h_n)``.
    """
    out, (h,) = run_layers(GRU_LAYER, input, [hx], params, has_biases, num_layers, dropout,
                           train, bidirectional)
    return out, h


def _elman(input, hx, params, has_biases: bool, num_layers: int, dropout: float,  # noqa: A002
           train: bool, bidirectional: bool, relu: bool):
    out, (h,) = run_layers(RNN_LAYER, input, [hx], params, has_biases, num_layers, dropout,
                           train, bidirectional, relu=relu)
    return out, h


@defcomposite("rnn_tanh")
def rnn_tanh(input, hx, params, has_biases: bool, num_layers: int, dropout: float,  # noqa: A002
             train: bool, bidirectional: bool):
    """PyTorch's ``torch.rnn_tanh`` (nn.RNN's tanh layers) on a time-major input; arguments
    as :func:`gru`'s. Returns ``(output, h_n)``."""
    return _elman(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                  False)


@defcomposite("rnn_relu")
def rnn_relu(input, hx, params, has_biases: bool, num_layers: int, dropout: float,  # noqa: A002
             train: bool, bidirectional: bool):
    """PyTorch's ``torch.rnn_relu`` (nn.RNN with nonlinearity='relu'); as :func:`rnn_tanh`."""
    return _elman(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                  True)
