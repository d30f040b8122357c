"""0-d tensors through every op case, and the dim-taking ops' dim 0 / -1 on them.

NumPy's ufuncs return a NumPy scalar, not a 0-d array, for 0-d inputs; a fast path that then
writes in place (``out=``, ``copy=False``, item assignment) failed only for 0-d tensors. The
first test runs each case of ``op_cases.CASES`` on 0-d inputs wherever its NumPy reference
accepts them and gives a 0-d result: forward values, then gradients (array and differentiable
backward) against finite differences in float64.

The expected values of the second test are PyTorch 2.13's (pinned; torch is not needed here).
"""
import math

import numpy as np
import pytest

import gradtrace.autograd as ag

from .gradcheck import check_grad
from .op_cases import CASES

# Cases whose function PyTorch refuses on 0-d tensors too (each checked with torch): they
# must raise, not crash later.
TORCH_RAISES = {
    "squeeze_dim_not_1": "dim 1 of a 0-d tensor",
    "einsum_unary": "subscripts 'ij' for a 0-d operand",
    "batch_norm_eval": "batch_norm needs 2 dims",
    "dot": "dot needs 1-D tensors",
    "renorm": "renorm needs 2 dims",
}
# The case's NumPy reference is not the 0-d value: kl_div's divides by the batch (3) of its
# 2-D inputs (PyTorch's batchmean of a 0-d input divides by 1, as gradtrace's does).
NO_REFERENCE = {"kl_div"}
# cov and corrcoef of one observation are NaN (PyTorch's too): no finite gradient to check.
NAN = {"cov", "corrcoef"}


def _zero_d(x):
    if isinstance(x, np.ndarray) and x.dtype == np.float64 and x.ndim >= 1 and x.size >= 1:
        return np.asarray(x.reshape(-1)[0])
    return x


def _zero_d_cases():
    """(case, 0-d inputs, expected) for every case whose reference takes 0-d inputs."""
    found = []
    for case in CASES:
        raw = [_zero_d(x) for x in case.inputs(np.random.default_rng(0))]
        floats = [x for x in raw if isinstance(x, np.ndarray) and x.dtype == np.float64]
        if not floats or any(x.ndim for x in floats) or case.ref is None:
            continue
        try:
            with np.errstate(all="ignore"):
                expected = case.ref(*raw)
        except Exception:  # noqa: BLE001 - NumPy refuses 0-d here: not a 0-d case
            continue
        if isinstance(expected, tuple) or np.ndim(expected) != 0:
            continue
        found.append(pytest.param(case, raw, expected, id=case.name))
    return found


def _tensors(case, raw):
    out = []
    for i, x in enumerate(raw):
        if isinstance(x, np.ndarray):
            grad = case.grad and x.dtype == np.float64 and i not in case.nondiff
            out.append(ag.tensor(x, requires_grad=grad))
        else:
            out.append(x)
    return out


ZERO_D = _zero_d_cases()


def test_the_table_has_zero_d_cases():
    # A guard that the selection above did not silently shrink (about 300 cases today).
    assert len(ZERO_D) > 200


@pytest.mark.parametrize("case, raw, expected", ZERO_D)
def test_op_on_zero_d_inputs(case, raw, expected):
    tensors = _tensors(case, raw)
    if case.name in TORCH_RAISES:
        with pytest.raises((RuntimeError, IndexError, ValueError)):
            case.fn(*tensors)
        return
    out = case.fn(*tensors)
    if isinstance(out, tuple):
        return
    assert out.shape == ()
    assert isinstance(out._data, np.ndarray)
    if case.name not in NO_REFERENCE:
        np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-6, atol=1e-12)
    if case.grad and case.name not in NAN:
        check_grad(case.fn, tensors, **case.tol)
        check_grad(case.fn, tensors, create_graph=True, **case.tol)


F = ag.nn.functional
# name: (call, PyTorch's result and the gradient of its sum at x = 0.7, float64). Each runs
# with dim 0 and dim -1.
DIM_OPS = {
    "softmax": (lambda x, d: ag.softmax(x, d), 1.0, 0.0),
    "log_softmax": (lambda x, d: ag.log_softmax(x, d), 0.0, 0.0),
    "F.softmax": (lambda x, d: F.softmax(x, d), 1.0, 0.0),
    "F.log_softmax": (lambda x, d: F.log_softmax(x, d), 0.0, 0.0),
    "F.softmin": (lambda x, d: F.softmin(x, d), 1.0, 0.0),
    "cumsum": (lambda x, d: ag.cumsum(x, d), 0.7, 1.0),
    "cumprod": (lambda x, d: ag.cumprod(x, d), 0.7, 1.0),
    "logcumsumexp": (lambda x, d: ag.logcumsumexp(x, d), 0.7, 1.0),
    "cummax": (lambda x, d: ag.cummax(x, d)[0], 0.7, 1.0),
    "cummin": (lambda x, d: ag.cummin(x, d)[0], 0.7, 1.0),
    "sum": (lambda x, d: x.sum(d), 0.7, 1.0),
    "mean": (lambda x, d: x.mean(d), 0.7, 1.0),
    "prod": (lambda x, d: x.prod(d), 0.7, 1.0),
    "max": (lambda x, d: x.max(d)[0], 0.7, 1.0),
    "amax": (lambda x, d: x.amax(d), 0.7, 1.0),
    "logsumexp": (lambda x, d: ag.logsumexp(x, d), 0.7, 1.0),
    "var": (lambda x, d: x.var(d), math.nan, math.nan),
    "norm": (lambda x, d: x.norm(dim=d), 0.7, 1.0),
    "sort": (lambda x, d: x.sort(d)[0], 0.7, 1.0),
    "topk": (lambda x, d: x.topk(1, d)[0], 0.7, 1.0),
    "kthvalue": (lambda x, d: x.kthvalue(1, d)[0], 0.7, 1.0),
    "median": (lambda x, d: x.median(d)[0], 0.7, 1.0),
    "flip": (lambda x, d: x.flip(d), 0.7, 1.0),
    "gather": (lambda x, d: x.gather(d, ag.tensor(0)), 0.7, 1.0),
    "index_select": (lambda x, d: x.index_select(d, ag.tensor([0])), 0.7, 1.0),
    "scatter": (lambda x, d: x.scatter(d, ag.tensor(0), x * 2), 1.4, 2.0),
    "transpose": (lambda x, d: x.transpose(d, 0), 0.7, 1.0),
    "movedim": (lambda x, d: x.movedim(d, 0), 0.7, 1.0),
    "squeeze": (lambda x, d: x.squeeze(d), 0.7, 1.0),
    "normalize": (lambda x, d: F.normalize(x, dim=d), 1.0, 0.0),
    "cosine_similarity": (lambda x, d: F.cosine_similarity(x, x, dim=d), 1.0, 0.0),
    "quantile": (lambda x, d: ag.quantile(x, 0.5, dim=d), 0.7, 1.0),
}


@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("name", sorted(DIM_OPS))
def test_dim_ops_take_dim_0_of_a_zero_d_tensor(name, dim):
    fn, value, grad = DIM_OPS[name]
    x = ag.tensor(0.7, dtype=ag.float64, requires_grad=True)
    y = fn(x, dim)
    assert y.shape == ()
    np.testing.assert_allclose(y.detach().numpy(), value, equal_nan=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), grad, equal_nan=True, atol=1e-15)


def test_layer_norm_cumsum_logcumsumexp_on_a_zero_d_leaf():
    # From the fuzz: PyTorch gives 2.4 and gradient 2.0 (layer_norm of equal entries is 0).
    s = ag.tensor(0.9, dtype=ag.float64, requires_grad=True)
    out = ag.logcumsumexp(ag.cumsum(s * 2.0, 0), -1) + F.layer_norm(s.expand(3), (3,)).sum()
    out.backward()
    np.testing.assert_allclose(out.item(), 1.8)
    np.testing.assert_allclose(s.grad.item(), 2.0)
