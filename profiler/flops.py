"""Floating-point operation counts estimated from an op's name and input shapes.

Counts multiply and add separately (a multiply-accumulate is 2 FLOPs), like the usual
convention for matmul. Only the op families below are counted; any other op counts 0.
Convolution strides and padding are not recorded, so a conv's output size is estimated as a
stride-1, no-padding ("valid") convolution.

The names are the engine's primitives, as a profile records them (an overload by its base
name: ``matmul`` for ``matmul.bmm``). FLOPs are counted once, where the arithmetic is done: a
composite (``addmm``, ``bmm``, ``conv1d``, ``scaled_dot_product_attention``...) records its
primitives' ranges inside its own, and they carry its FLOPs, as PyTorch's profiler counts
``aten::mm`` and not the ``aten::matmul`` around it. The profiler may not import the engine
(DESIGN §1), so this table is tied to the engine's op table by a test
(``tests/profiler/test_flops_table.py``): every primitive whose FLOPs PyTorch counts has a
formula here, no composite has one, and every name here is one the engine records.
"""
from __future__ import annotations

import math

__all__ = ["estimate_flops", "COUNTED_OPS"]

# matmul is every product of the engine (mm, bmm, mv, dot are its overloads); linear is
# x @ W^T (+ b).
_MATMUL = {"matmul", "linear"}
_CONV = {"conv2d"}
# The fused recurrent layers (one op for a whole layer's time steps): their GEMMs.
_RNN = {"mkldnn_rnn_layer", "gru_layer", "rnn_layer"}
_ELEMENTWISE = {
    "add", "sub", "mul", "div", "neg", "relu", "exp", "log", "sqrt", "rsqrt", "pow", "tanh",
    "sigmoid", "abs", "maximum", "minimum", "where", "reciprocal", "sin", "cos",
    "clamp", "gelu", "rsub",
}
#: The op names that have a formula.
COUNTED_OPS = frozenset(_MATMUL | _CONV | _RNN | _ELEMENTWISE)


def _numel(shape) -> int:
    return math.prod(shape) if shape else 1


def _broadcast_numel(shapes) -> int:
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(1, ndim + 1):
        out.append(max((s[-k] for s in shapes if len(s) >= k), default=1))
    return _numel(out)


def _matmul_flops(name: str, shapes) -> int:
    if name == "linear":                        # x [..., in], weight [out, in], bias [out]
        if len(shapes) < 2 or not shapes[0] or len(shapes[1]) != 2:
            return 0
        x, w = shapes[0], shapes[1]
        rows = _numel(x[:-1])
        flops = 2 * rows * w[0] * w[1]
        if len(shapes) > 2 and shapes[2]:
            flops += rows * w[0]
        return flops
    if len(shapes) < 2:
        return 0
    a, b = list(shapes[0]), list(shapes[1])
    if not a or not b:
        return 0
    if len(a) == 1:
        a = [1] + a
    if len(b) == 1:
        b = b + [1]
    m, k = a[-2], a[-1]
    n = b[-1]
    batch = _broadcast_numel([a[:-2], b[:-2]])
    return 2 * batch * m * k * n


def _conv_flops(shapes) -> int:
    if len(shapes) < 2:
        return 0
    x, w = shapes[0], shapes[1]              # x [N, C, *spatial], w [O, C/groups, *kernel]
    if len(x) < 3 or len(w) != len(x):
        return 0
    out_spatial = [max(i - k + 1, 1) for i, k in zip(x[2:], w[2:])]
    return 2 * x[0] * w[0] * _numel(w[1:]) * _numel(out_spatial)


def _rnn_flops(name: str, shapes) -> int:
    """A layer's GEMMs over all its steps: 2·T·N·(numel(W_ih) + numel(W_hh) [+ numel(W_hr)]).

    Inputs as recorded: x (T, N, in), W_ih (G·h, in), W_hh (G·h, size), b_ih, b_hh, h0[, c0,
    W_hr (size, h): an LSTM's projection], with G = 4 (LSTM), 3 (GRU), 1 (Elman RNN). For an
    LSTM without projection that is 2·(in·4h + h·4h)·T·N. The gates' pointwise arithmetic is
    not counted, as PyTorch's flop counter counts an unfused RNN by its matrix products only.
    """
    if len(shapes) < 3 or len(shapes[0] or ()) != 3:
        return 0
    weights = [shapes[1], shapes[2]]
    if name == "mkldnn_rnn_layer" and len(shapes) > 7 and shapes[7] and len(shapes[7]) == 2:
        weights.append(shapes[7])
    if any(not w or len(w) != 2 for w in weights):
        return 0
    steps, batch = shapes[0][0], shapes[0][1]
    return 2 * steps * batch * sum(_numel(w) for w in weights)


def estimate_flops(name: str, shapes: list) -> int:
    """FLOPs of one call of ``name`` on inputs of ``shapes`` (list of shape lists); 0 if unknown.

    An input that is a list of tensors (a list of shapes, as torch traces record ``aten::cat``'s)
    counts as no shape: the formulas below read plain shapes only.
    """
    shapes = [s if s is None or all(type(d) is int for d in s) else [] for s in shapes or ()]
    if not shapes:
        return 0
    base = name.rsplit("::", 1)[-1].lower()
    if base in _MATMUL:
        return int(_matmul_flops(base, shapes))
    if base in _CONV:
        return int(_conv_flops(shapes))
    if base in _RNN:
        return int(_rnn_flops(base, shapes))
    if base in _ELEMENTWISE or base.rstrip("_") in _ELEMENTWISE:
        return int(_broadcast_numel([s for s in shapes if s is not None]))
    return 0
