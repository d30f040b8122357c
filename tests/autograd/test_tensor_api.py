"""Tensor API a PyTorch user reaches for at once: layout queries, casts, in-place unary math,
scatter_/put_, bitwise ops, in-place view ops. Expected values are PyTorch 2.13's."""
from __future__ import annotations

import numpy as np
import pytest

import gradtrace.autograd as ag

# (method, torch's node after ``(x * 1).<method>()``)
INPLACE_UNARY_NODES = [
    ("log_", "LogBackward0"), ("log2_", "Log2Backward0"), ("log10_", "Log10Backward0"),
    ("log1p_", "Log1PBackward0"), ("exp2_", "Exp2Backward0"), ("expm1_", "Expm1Backward0"),
    ("sin_", "SinBackward0"), ("cos_", "CosBackward0"), ("tan_", "TanBackward0"),
    ("asin_", "AsinBackward0"), ("arcsin_", "AsinBackward0"), ("acos_", "AcosBackward0"),
    ("atan_", "AtanBackward0"), ("sinh_", "SinhBackward0"), ("cosh_", "CoshBackward0"),
    ("asinh_", "AsinhBackward0"), ("atanh_", "AtanhBackward0"), ("rsqrt_", "RsqrtBackward0"),
    ("reciprocal_", "ReciprocalBackward0"), ("floor_", "FloorBackward0"),
    ("ceil_", "CeilBackward0"), ("round_", "RoundBackward0"), ("trunc_", "TruncBackward0"),
    ("fix_", "TruncBackward0"), ("frac_", "FracBackward0"), ("sign_", "SignBackward0"),
]


@pytest.mark.parametrize("method,node", INPLACE_UNARY_NODES)
def test_inplace_unary_records_torchs_node_and_bumps_version(method, node):
    a = ag.tensor([0.3, 0.6], dtype=np.float64, requires_grad=True)
    b = a * 1
    out = getattr(b, method)()
    assert out is b and b._version == 1 and b.grad_fn.name() == node
    expected = getattr(ag.tensor([0.3, 0.6], dtype=np.float64), method.rstrip("_"))()
    np.testing.assert_allclose(b.detach().numpy(), expected.numpy())


# torch: a float result cannot be written into an integer tensor.
@pytest.mark.parametrize("method", ["log_", "sin_", "cos_", "reciprocal_", "rsqrt_", "atanh_"])
def test_inplace_float_op_on_int_tensor_raises_torchs_error(method):
    x = ag.tensor([1, 2])
    with pytest.raises(RuntimeError,
                       match="result type Float can't be cast to the desired output type Long"):
        getattr(x, method)()
    assert x.tolist() == [1, 2] and x._version == 0


# torch: floor_/ceil_/round_/trunc_/sign_ keep an integer tensor's values and dtype.
@pytest.mark.parametrize("method,expected", [("floor_", [-2, 3]), ("ceil_", [-2, 3]),
                                             ("round_", [-2, 3]), ("trunc_", [-2, 3]),
                                             ("sign_", [-1, 1])])
def test_inplace_rounding_on_int_tensor_keeps_it(method, expected):
    x = ag.tensor([-2, 3])
    getattr(x, method)()
    assert x.tolist() == expected and x.dtype == np.int64
