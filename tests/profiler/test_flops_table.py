"""profiler/flops.py tied to the engine's op table (the profiler may not import the engine,
DESIGN §1; a test may): the ops whose FLOPs PyTorch counts have a formula, counted once, and
flops.py names no op that the engine does not record.

PyTorch's ``torch.utils.flop_counter`` counts the matrix products (``aten.mm``, ``addmm``,
``bmm``, ``baddbmm``, ``_scaled_mm``; ``matmul``, ``linear`` and ``einsum`` through them), the
convolutions (``aten.convolution`` and its backward) and the attention kernels of
``scaled_dot_product_attention``. Below, each engine op doing that arithmetic, by the name a
profile records it under: a primitive has a formula; a composite runs primitives whose ranges
lie inside its own and carry its FLOPs, so it has none (it would count them twice).
"""
from __future__ import annotations

import pytest

import gradtrace.autograd as ag
from gradtrace import profiler
from gradtrace.autograd.dispatch import COMPOSITES, OPS
from gradtrace.autograd.nn import functional as F
from gradtrace.profiler.flops import COUNTED_OPS, estimate_flops

RECORDED_PRIMITIVES = {op.record_name for op in OPS.values()}

# Primitive -> (recorded input shapes, FLOPs).
PRIMITIVES = {
    "matmul": ([[2, 8, 16], [2, 16, 4]], 2 * 2 * 8 * 16 * 4),     # mm, bmm, mv, dot (its overloads)
    "linear": ([[8, 16], [4, 16], [4]], 2 * 8 * 16 * 4 + 8 * 4),  # addmm / mm
    "conv2d": ([[1, 3, 8, 8], [6, 3, 3, 3], [6]], 2 * 6 * 27 * 36),  # convolution
    # Fused recurrent layers (PyTorch counts an unfused one by its mm/addmm): the GEMMs of T
    # steps, 2·T·N·(in·Gh + h·Gh), for x (T=3, N=2, in=5), h=7.
    "mkldnn_rnn_layer": ([[3, 2, 5], [28, 5], [28, 7], [28], [28], [2, 7], [2, 7], []],
                         2 * 3 * 2 * (5 * 28 + 7 * 28)),
    "gru_layer": ([[3, 2, 5], [21, 5], [21, 7], [21], [21], [2, 7]], 2 * 3 * 2 * (5 * 21 + 7 * 21)),
    "rnn_layer": ([[3, 2, 5], [7, 5], [7, 7], [7], [7], [2, 7]], 2 * 3 * 2 * (5 * 7 + 7 * 7)),
}
# Counted by PyTorch, but not from what a profile records.
NOT_ESTIMABLE = {
    "einsum": "its equation is an attribute, not a recorded shape: the contraction is unknown",
}
# Composites whose products run inside them as matmul / conv2d / the RNN layers.
COMPOSITES_COUNTED_INSIDE = {
    "bmm", "addmm", "baddbmm", "addbmm", "addmv", "addr", "inner", "outer", "tensordot", "multi_dot",
    "conv1d", "conv_transpose2d", "scaled_dot_product_attention", "lstm", "gru", "rnn_tanh", "rnn_relu",
}


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_each_primitive_pytorch_counts_has_a_formula(name):
    shapes, expected = PRIMITIVES[name]
    assert name in RECORDED_PRIMITIVES, f"{name} is no longer a primitive of the engine"
    assert estimate_flops(name, shapes) == expected


def test_an_lstm_projection_is_counted():
    x, w_ih, w_hh, w_hr = [3, 2, 5], [28, 5], [28, 4], [4, 7]
    shapes = [x, w_ih, w_hh, [28], [28], [2, 4], [2, 7], w_hr]
    assert estimate_flops("mkldnn_rnn_layer", shapes) == 2 * 3 * 2 * (28 * 5 + 28 * 4 + 4 * 7)


def test_the_lists_above_follow_the_op_table():
    assert set(NOT_ESTIMABLE) <= RECORDED_PRIMITIVES
    assert not set(NOT_ESTIMABLE) & COUNTED_OPS
    assert COMPOSITES_COUNTED_INSIDE <= set(COMPOSITES), "a listed composite is gone or became a primitive"


def test_no_composite_has_a_formula():
    """A composite's own range would count its primitives' FLOPs a second time."""
    assert not COUNTED_OPS & set(COMPOSITES)


def test_no_dead_entries():
    """Every name with a formula is one the engine records (a primitive, by its base name)."""
    assert COUNTED_OPS <= RECORDED_PRIMITIVES, sorted(COUNTED_OPS - RECORDED_PRIMITIVES)


def _profiled_flops(fn) -> dict:
    with profiler.profile(with_flops=True) as prof:
        fn()
    return {r.key: r.flops for r in prof.key_averages() if r.flops}


def test_a_composite_is_counted_once_through_its_primitives():
    a, b, bias = ag.randn(4, 8), ag.randn(8, 16), ag.randn(16)
    assert _profiled_flops(lambda: ag.addmm(bias, a, b)) == {"matmul": 2 * 4 * 8 * 16, "add": 4 * 16}
    x, w = ag.randn(2, 3, 10), ag.randn(6, 3, 3)
    assert _profiled_flops(lambda: F.conv1d(x, w)) == {"conv2d": 2 * 2 * 6 * 9 * 8}
    q = ag.randn(1, 2, 5, 4)
    counted = _profiled_flops(lambda: F.scaled_dot_product_attention(q, q, q))
    assert "scaled_dot_product_attention" not in counted
    assert counted["matmul"] == 2 * (2 * 2 * 5 * 4 * 5)    # q k^T and p v


def test_a_recurrent_layer_is_counted_by_its_layer_op():
    lstm = ag.nn.LSTM(5, 7)
    counted = _profiled_flops(lambda: lstm(ag.randn(3, 2, 5)))
    assert counted == {"mkldnn_rnn_layer": 2 * 3 * 2 * (5 * 28 + 7 * 28)}
