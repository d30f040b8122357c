"""Backward node names as PyTorch 2.13's (``grad_fn.name()``), for the ops whose PyTorch node
depends on the overload (``sum()`` SumBackward0, ``sum(dim)`` SumBackward1), the operands'
shapes (matmul) or that PyTorch computes as one node where a composite would make several.

Each expected name is what torch 2.13 gives for the same expression; the forward range in a
profile is the op's base name (``aten::sum`` for both overloads, as torch's profiler shows).
"""
import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd import record_function as rf
from gradtrace.autograd.nn import functional as F
from gradtrace.autograd.record_function import RecordScope

from .gradcheck import compiled_replay_stats


def _inputs():
    rng = np.random.default_rng(0)

    def t(*shape):
        return ag.tensor(rng.standard_normal(shape), requires_grad=True)

    return {"x": t(3, 4), "v": t(4), "b3": t(2, 3, 4), "b4": t(2, 2, 3, 4), "m": t(4, 5),
            "w": t(5, 4), "bias": t(5), "ag": ag, "F": F}


# expression, torch's grad_fn name (where torch's chain has more nodes, its output node first)
NAMES = [
    # overloads
    ("x.sum()", "SumBackward0"),
    ("x.sum(0)", "SumBackward1"),
    ("x.sum((0, 1))", "SumBackward1"),
    ("x.max()", "MaxBackward1"),
    ("x.min()", "MinBackward1"),
    ("x.max(0).values", "MaxBackward0"),
    ("x.amax()", "AmaxBackward0"),
    ("x ** 2", "PowBackward0"),
    ("x.exp().pow(x)", "PowBackward1"),
    ("2.0 ** x", "PowBackward2"),
    ("(x * 1).pow_(2)", "PowBackward0"),
    ("x.exp().pow_(x)", "PowBackward1"),
    ("ag.pow(2.0, x)", "PowBackward2"),
    ("x.clamp(-0.5, 0.5)", "ClampBackward1"),
    ("x.clamp(min=0)", "ClampBackward1"),
    ("x.clamp(x - 1, x + 1)", "ClampBackward0"),
    ("x.clamp(min=v)", "ClampBackward0"),
    ("2 - x", "RsubBackward1"),
    ("x - 2", "SubBackward0"),
    ("x - x", "SubBackward0"),
    ("x.exp().log1p()", "Log1PBackward0"),
    ("F.linear(x, w)", "MmBackward0"),
    ("F.linear(b3, w)", "MmBackward0"),       # torch: UnsafeViewBackward0 over MmBackward0
    ("F.linear(v, w)", "MmBackward0"),        # torch: SqueezeBackward4 over MmBackward0
    ("F.linear(x, w, bias)", "AddmmBackward0"),
    ("F.linear(b3, w, bias)", "AddmmBackward0"),  # torch: ViewBackward0 over AddmmBackward0
    # matmul by shapes
    ("x @ m", "MmBackward0"),
    ("ag.mm(x, m)", "MmBackward0"),
    ("x.matmul(v)", "MvBackward0"),
    ("x.mv(v)", "MvBackward0"),
    ("v @ v", "DotBackward0"),
    ("ag.dot(v, v)", "DotBackward0"),
    ("b3.bmm(b3.transpose(1, 2))", "BmmBackward0"),
    ("b3 @ b3.transpose(1, 2)", "BmmBackward0"),  # torch: UnsafeViewBackward0 over BmmBackward0
    ("b4 @ b3.transpose(1, 2)", "BmmBackward0"),  # torch: UnsafeViewBackward0 over BmmBackward0
    ("b3 @ m", "MmBackward0"),                    # torch: UnsafeViewBackward0 over MmBackward0
    ("v @ m", "MmBackward0"),                     # torch: SqueezeBackward4 over MmBackward0
    ("b3 @ v", "MvBackward0"),                    # torch: UnsafeViewBackward0 over MvBackward0
    ("v @ b3.transpose(1, 2)", "MvBackward0"),    # torch: UnsafeViewBackward0 over MvBackward0
    # primitives where a composite made several nodes
    ("x.mean()", "MeanBackward0"),
    ("x.mean(1)", "MeanBackward1"),
    ("x.mean((0, 1), keepdim=True)", "MeanBackward1"),
    ("x.var()", "VarBackward0"),
    ("x.var(0)", "VarBackward0"),
    ("x.var(1, correction=0, keepdim=True)", "VarBackward0"),
    ("x.std()", "StdBackward0"),
    ("x.std(0, unbiased=False)", "StdBackward0"),
    ("x.square()", "PowBackward0"),
    ("F.silu(x)", "SiluBackward0"),
    ("F.elu(x)", "EluBackward0"),
    ("F.selu(x)", "EluBackward0"),
    ("F.relu(x)", "ReluBackward0"),
    ("ag.fmod(x, 0.7)", "FmodBackward0"),
    ("ag.fmod(x, x)", "FmodBackward1"),
    ("ag.remainder(x, 0.7)", "RemainderBackward0"),
    ("x % x", "RemainderBackward1"),
    ("x.frac()", "FracBackward0"),
    ("F.glu(x)", "GluBackward0"),
    ("ag.hypot(x, x)", "HypotBackward0"),
    ("ag.logaddexp(x, x)", "LogaddexpBackward0"),
    ("F.celu(x)", "CeluBackward0"),
    ("F.elu(x * 1, inplace=True)", "EluBackward1"),
    ("F.leaky_relu(x * 1, inplace=True)", "LeakyReluBackward1"),
    ("F.elu_(x * 1)", "EluBackward1"),
    ("F.selu_(x * 1)", "EluBackward1"),
    ("F.celu_(x * 1)", "CeluBackward1"),
    ("F.leaky_relu_(x * 1)", "LeakyReluBackward1"),
    ("F.relu_(x * 1)", "ReluBackward0"),
    ("F.hardsigmoid(x)", "HardsigmoidBackward0"),
    ("F.hardswish(x)", "HardswishBackward0"),
    ("F.mish(x)", "MishBackward0"),
    ("F.logsigmoid(x)", "LogSigmoidBackward0"),
    ("F.hardshrink(x)", "HardshrinkBackward0"),
    ("F.softshrink(x)", "SoftshrinkBackward0"),
    ("F.tanhshrink(x)", "SubBackward0"),
    ("x.clamp_min(0.0)", "ClampMinBackward0"),
    ("x.clamp_max(v)", "ClampMaxBackward1"),
    ("ag.fmax(x, v)", "FmaxBackward0"),
    ("F.smooth_l1_loss(x, x.detach() * 0)", "SmoothL1LossBackward0"),
    ("F.huber_loss(x, x.detach() * 0)", "HuberLossBackward0"),
    ("F.relu(x * 1, inplace=True)", "ReluBackward0"),
    ("F.relu6(x)", "HardtanhBackward0"),
    ("F.relu6(x * 1, inplace=True)", "HardtanhBackward0"),
    ("F.hardtanh(x, -0.5, 0.5)", "HardtanhBackward0"),
    ("F.hardtanh_(x * 1)", "HardtanhBackward0"),
    ("F.threshold(x, 0.1, 2.0)", "ThresholdBackward0"),
    ("F.threshold(x * 1, 0.1, 2.0, inplace=True)", "ThresholdBackward1"),
    ("F.threshold_(x * 1, 0.1, 2.0)", "ThresholdBackward1"),
    ("F.mse_loss(x, x.detach() * 0)", "MseLossBackward0"),
    ("F.mse_loss(x, x * 2, reduction='none')", "MseLossBackward0"),
    ("x.lerp(x * 2, 0.5)", "LerpBackward0"),
    ("x.lerp(x * 2, x)", "LerpBackward1"),
    ("(x * 1).lerp_(x * 2, 0.5)", "LerpBackward0"),
    ("(x * 1).lerp_(x * 2, x)", "LerpBackward1"),
    ("x.addcmul(x, x)", "AddcmulBackward0"),
    ("x.addcmul(x, x, value=2)", "AddcmulBackward0"),
    ("(x * 1).addcmul_(x, x)", "AddcmulBackward0"),
    ("F.binary_cross_entropy_with_logits(x, (x > 0).float())",
     "BinaryCrossEntropyWithLogitsBackward0"),
    ("F.binary_cross_entropy_with_logits(x, (x > 0).float(), pos_weight=v.detach(), "
     "reduction='sum')", "BinaryCrossEntropyWithLogitsBackward0"),
    ("x.repeat(2, 1)", "RepeatBackward0"),
    ("x.repeat(2, 1, 3)", "RepeatBackward0"),
    ("x.tile((2,))", "RepeatBackward0"),
    # views and others
    ("x.diagonal()", "DiagonalBackward0"),
    ("b3.diagonal(1, 0, 2)", "DiagonalBackward0"),
    ("x.index_select(0, x.argmax(0))", "IndexSelectBackward0"),
    ("x.index_add(0, x.argmax(0)[:3], x)", "IndexAddBackward0"),
    ("(x * 1).index_add_(0, x.argmax(0)[:3], x)", "IndexAddBackward0"),
    ("x.topk(2).values", "TopkBackward0"),
    ("x.topk(2, dim=0, largest=False).values", "TopkBackward0"),
    ("ag.cdist(x, x)", "CdistBackward0"),
    ("ag.cdist(b3, b3, p=1.0)", "CdistBackward0"),
    ("x.unfold(1, 2, 1)", "UnfoldBackward0"),
    ("x.masked_select(x > 0)", "MaskedSelectBackward0"),
    ("v.masked_select(x > 0)", "MaskedSelectBackward0"),     # torch: one node, broadcast inside
    ("x.scatter(0, x.argmax(0)[None], 0.5)", "ScatterBackward1"),
    ("ag.scatter(x, 1, x.argmax(1)[:, None], value=2.0)", "ScatterBackward1"),
    ("x.scatter(0, x.argmax(0)[None], x)", "ScatterBackward0"),
    ("x.repeat_interleave(2)", "ViewBackward0"),             # torch: over Clone, Expand, Unsqueeze
    ("x.repeat_interleave(2, dim=1)", "ViewBackward0"),
    ("x.repeat_interleave(x.argmax(1), dim=0)", "IndexSelectBackward0"),
    ("ag.diag(v)", "DiagEmbedBackward0"),
    ("ag.diag(v, -1)", "DiagEmbedBackward0"),
    ("x.diag()", "DiagonalBackward0_copy"),
    ("x.diag(1)", "DiagonalBackward0_copy"),
    ("ag.diag_embed(x)", "DiagEmbedBackward0"),
    ("ag.kron(x, v)", "UnsafeViewBackward0"),                # torch: over MulBackward0
    ("x.scatter_reduce(0, x.argmax(0)[None], x, 'amax')", "ScatterReduceBackward0"),
    ("(x * 1).scatter_reduce_(1, x.argmax(1)[:, None], x, 'prod', include_self=False)",
     "ScatterReduceBackward0"),
    ("x.index_reduce(0, x.argmax(0)[:3], x, 'mean')", "IndexReduceBackward0"),
    ("x.index_put((x.argmax(0),), v, accumulate=True)", "IndexPutBackward0"),
    ("(x * 1).index_put_((x.argmax(0),), v)", "IndexPutBackward0"),
    # reductions, scans, order statistics (torch 2.13's nodes for the same calls)
    ("x.prod()", "ProdBackward0"),
    ("x.prod(1)", "ProdBackward1"),
    ("x.cumprod(0)", "CumprodBackward0"),
    ("x.logcumsumexp(1)", "LogcumsumexpBackward0"),
    ("x.nansum()", "NansumBackward0"),
    ("x.nansum(0)", "NansumBackward0"),
    ("x.median()", "MedianBackward0"),
    ("x.median(0).values", "MedianBackward1"),
    ("x.nanmedian()", "NanmedianBackward0"),
    ("x.nanmedian(1).values", "NanmedianBackward1"),
    ("x.kthvalue(1, 0).values", "KthvalueBackward0"),
    ("x.cummax(1).values", "CummaxBackward0"),
    ("x.cummin(0).values", "CumminBackward0"),
    ("x.mode(0).values", "ModeBackward0"),
    ("x.mode().values", "ModeBackward0"),
    ("ag.dist(x, x * 2)", "DistBackward0"),
    ("x.trace()", "TraceBackward0"),
    ("ag.take(x, x.argmax(0))", "TakeBackward0"),
    ("ag.linalg.cross(b3[..., :3], b3[..., 1:4])", "LinalgCrossBackward0"),
    ("ag.msort(x)", "SortBackward0"),
    # torch.linalg's square-matrix functions: torch names the _ex variants it calls
    ("ag.linalg.inv(b3[..., :3])", "LinalgInvExBackward0"),
    ("b3[..., :3].inverse()", "LinalgInvExBackward0"),
    ("ag.linalg.det(b3[..., :3])", "LinalgDetBackward0"),
    ("ag.linalg.slogdet(b3[..., :3]).logabsdet", "LinalgSlogdetBackward0"),
    ("ag.linalg.solve(b3[..., :3], x[:, 0])", "LinalgSolveExBackward0"),
]


@pytest.mark.parametrize("expr, name", NAMES, ids=[e for e, _ in NAMES])
def test_node_name_is_pytorchs(expr, name):
    y = eval(expr, _inputs())   # noqa: S307 - a fixed table
    assert y.grad_fn.name() == name


# expression, the forward range the profiler shows (torch's aten:: name without the overload)
RANGES = [
    ("x.mean(1)", "mean"), ("x.var(0)", "var"), ("x.std()", "std"), ("x.square()", "square"),
    ("F.silu(x)", "silu"), ("F.elu(x)", "elu"), ("F.mse_loss(x, x * 2)", "mse_loss"),
    ("x.lerp(x * 2, x)", "lerp"), ("x.addcmul(x, x)", "addcmul"), ("x.repeat(2, 1)", "repeat"),
    ("F.binary_cross_entropy_with_logits(x, (x > 0).float())",
     "binary_cross_entropy_with_logits"),
    ("x.diagonal()", "diagonal"), ("x.index_select(0, x.argmax(0))", "index_select"),
    ("x.topk(2).values", "topk"), ("ag.cdist(x, x)", "cdist"), ("x.unfold(1, 2, 1)", "unfold"),
    ("x.sum(0)", "sum"), ("x.max()", "max"), ("x.exp().pow(x)", "pow"), ("2.0 ** x", "pow"),
    ("x.clamp(min=v)", "clamp"), ("2 - x", "rsub"), ("x @ v", "matmul"), ("v @ v", "matmul"),
    ("F.linear(x, w)", "linear"),
]


@pytest.mark.parametrize("expr, name", RANGES, ids=[e for e, _ in RANGES])
def test_forward_range_is_the_base_name(expr, name):
    env = _inputs()
    seen = []
    with rf.add_global_callback(lambda rec: seen.append(rec.name), scopes=[RecordScope.FUNCTION]):
        eval(expr, env)   # noqa: S307
    assert name in seen and not any("." in n for n in seen)


def test_full_max_shares_ties_evenly():
    """torch: x.max() (MaxBackward1, evenly_distribute_backward) and x.amax() both give
    [[0, .5], [.5, 0]] here; max(dim) gives the whole gradient to one index."""
    for fn in (lambda x: x.max(), lambda x: x.amax(), lambda x: -(-x).min()):
        x = ag.tensor([[1.0, 3.0], [3.0, 2.0]], requires_grad=True)
        fn(x).backward()
        np.testing.assert_array_equal(x.grad.numpy(), [[0.0, 0.5], [0.5, 0.0]])


def test_clamp_tensor_bounds_gradients_are_pytorchs():
    """torch 2.13: x=[0, 1, 2] clamped to min=max=1 (tensors) gives x.grad [0, 1, 0],
    min.grad [0, 0, 0] (where min == max the result is max, and at x < min nobody gets the
    gradient), max.grad [0, 0, 1]; with min only, min.grad [1, 0, 0] and x.grad [0, 1, 1]."""
    x = ag.tensor([0.0, 1.0, 2.0], requires_grad=True)
    lo = ag.tensor([1.0, 1.0, 1.0], requires_grad=True)
    hi = ag.tensor([1.0, 1.0, 1.0], requires_grad=True)
    x.clamp(lo, hi).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 0.0]
    assert lo.grad.tolist() == [0.0, 0.0, 0.0]
    assert hi.grad.tolist() == [0.0, 0.0, 1.0]
    x = ag.tensor([0.0, 1.0, 2.0], requires_grad=True)
    lo = ag.tensor([1.0, 1.0, 1.0], requires_grad=True)
    x.clamp(min=lo).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0] and lo.grad.tolist() == [1.0, 0.0, 0.0]


def test_mean_is_sum_over_n():
    """torch's mean is sum / n; the old composite's sum * (1/n) can differ in the last bit
    (here at n = 3 in float32), the primitive's value is sum / n exactly."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((200, 3)).astype(np.float32)
    got = ag.tensor(a).mean(1).numpy()
    np.testing.assert_array_equal(got, a.sum(1) / np.float32(3))
    assert (a.sum(1) * np.float32(1 / 3) != got).any()
    assert np.isnan(ag.zeros(0).mean().item())         # torch: the mean of nothing is nan


def test_var_std_edge_values_are_pytorchs():
    """torch 2.13: one element with correction 1 gives var nan and std nan; a constant row's
    std has a zero gradient (std_backward masks result == 0)."""
    one = ag.tensor([2.0], requires_grad=True)
    assert np.isnan(one.var().item()) and np.isnan(one.std().item())
    x = ag.tensor([[1.0, 1.0, 1.0], [0.0, 1.0, 2.0]], requires_grad=True)
    x.std(1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0.0, 0.0, 0.0], [-0.5, 0.0, 0.5]])


# PyTorch's gradients at kinks and ties of the new primitives (torch 2.13 values)
KINKS = [
    ("elu at 0 takes alpha (torch: elu_backward's x <= 0 branch)",
     lambda x: F.elu(x, alpha=2.0), [0.0, 0.0], [2.0, 2.0]),
    ("silu at 0 is 0.5", F.silu, [0.0], [0.5]),
    ("mse at input == target is 0", lambda x: F.mse_loss(x, x.detach()), [1.0, 2.0], [0.0, 0.0]),
    ("bce with logits at 0 and target 1: sigmoid(0) - 1, over N",
     lambda x: F.binary_cross_entropy_with_logits(x, ag.ones(2)), [0.0, 0.0], [-0.25, -0.25]),
    ("topk at a tie: the gradient goes to the selected indices (1 and 2)",
     lambda x: x.topk(2).values, [1.0, 3.0, 3.0, 2.0], [0.0, 1.0, 1.0, 0.0]),
    ("overlapping unfold windows add up", lambda x: x.unfold(0, 2, 1), [1.0, 2.0, 3.0, 4.0],
     [1.0, 2.0, 2.0, 1.0]),
    ("index_select with a repeated index adds up",
     lambda x: x.index_select(0, ag.tensor([0, 0, 2])), [1.0, 2.0, 3.0], [2.0, 0.0, 1.0]),
]


# torch 2.13: cdist at a zero distance gives that pair no gradient ([[0, 0], [1, 1]] with
# itself: p=2 [[-1.4142, -1.4142], [1.4142, 1.4142]], p=1 [[-2, -2], [2, 2]])
@pytest.mark.parametrize("p, grad", [(2.0, [[-2 ** 0.5] * 2, [2 ** 0.5] * 2]),
                                     (1.0, [[-2.0, -2.0], [2.0, 2.0]])])
def test_cdist_zero_distance_gradient_is_pytorchs(p, grad):
    a = ag.tensor([[0.0, 0.0], [1.0, 1.0]], requires_grad=True)
    ag.cdist(a, a, p=p).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), grad)


@pytest.mark.parametrize("make", [lambda x: x.diagonal(), lambda x: x.diagonal(1),
                                  lambda x: x.unfold(1, 2, 2)], ids=["diagonal", "offset", "unfold"])
def test_diagonal_and_unfold_are_views(make):
    """As torch's: the result shares the input's storage; an in-place op on it writes into
    the base, and the base's gradient goes through it (CopySlices)."""
    leaf = ag.randn(3, 4, requires_grad=True)
    x = leaf * 1.0
    y = make(x)
    assert y._base is x and np.shares_memory(y._data, x._data)
    y.mul_(2.0)
    ref = make(ag.tensor(leaf.detach().numpy()))
    np.testing.assert_array_equal(make(x.detach())._data, ref._data * 2.0)
    x.sum().backward()
    covered = make(ag.tensor(np.arange(12.0).reshape(3, 4)))._data.astype(int).ravel()
    expected = np.ones(12)
    expected[covered] = 2.0    # each covered entry once, doubled by the in-place mul
    expected = expected.reshape(3, 4)
    np.testing.assert_array_equal(leaf.grad.numpy(), expected)



@pytest.mark.parametrize("what, fn, at, grad", KINKS, ids=[k[0] for k in KINKS])
def test_gradients_at_kinks_are_pytorchs(what, fn, at, grad):
    x = ag.tensor(at, requires_grad=True)
    y = fn(x)
    (y.sum() if y.ndim else y).backward()
    np.testing.assert_allclose(x.grad.numpy(), grad)


def test_errors_are_pytorchs():
    x = ag.randn(2, 3)
    with pytest.raises(RuntimeError, match="Number of dimensions of repeat dims can not be "
                                           "smaller than number of dimensions of tensor"):
        x.repeat(2)
    with pytest.raises(RuntimeError, match=r"Trying to create tensor with negative dimension -2"):
        x.repeat(2, -1, 3)
    with pytest.raises(ValueError, match="reduction"):
        F.mse_loss(x, x, reduction="avg")
    with pytest.raises(RuntimeError, match="maximum size for tensor at dimension 1 is 3 but "
                                           "size is 5"):
        x.unfold(1, 5, 1)
    with pytest.raises(RuntimeError, match="step is 0 but must be > 0"):
        x.unfold(1, 2, 0)
    with pytest.raises(IndexError, match=r"index_select\(\): Index is supposed to be a vector"):
        x.index_select(0, ag.tensor([[0]]))
    with pytest.raises(RuntimeError, match=r"index_select\(\): Expected dtype int32 or int64"):
        x.index_select(0, ag.tensor([0.5]))
    with pytest.raises(RuntimeError, match="cdist only supports at least 2D tensors, X1 got: 1D"):
        ag.cdist(ag.randn(4), x)
    with pytest.raises(RuntimeError, match="X1 and X2 must have the same number of columns. "
                                           "X1: 3 X2: 5"):
        ag.cdist(x, ag.randn(2, 5))
    with pytest.raises(RuntimeError, match="diagonal dimensions cannot be identical 0, 0"):
        x.diagonal(0, 0, 0)


def test_new_nodes_replay_compiled_bit_identical():
    """Compiled autograd replays the new nodes (overloads, multi-output topk, views) with the
    eager gradients, bit for bit."""
    rng = np.random.default_rng(3)
    x = ag.tensor(rng.standard_normal((4, 4)), requires_grad=True)
    v = ag.tensor(rng.standard_normal(4), requires_grad=True)
    b3 = ag.tensor(rng.standard_normal((2, 4, 4)), requires_grad=True)

    def build():
        parts = [x.sum(0), x.mean(1), x.var(0), x.std(1, correction=0), x.max().reshape(1),
                 x.exp().pow(x).sum(0), (2 - x).clamp(x - 1, x + 1).sum(1), x @ v, v @ v,
                 (b3 @ b3).sum((0, 1)), F.silu(x).sum(0), F.elu(x).sum(1),
                 x.lerp(x * 2, x).sum(0), x.addcmul(x, x, value=2).sum(0),
                 x.repeat(2, 1).sum(0), x.diagonal() * 1.0, x.unfold(1, 2, 2).sum((0, 2)),
                 x.index_select(0, ag.tensor([0, 0, 3])).sum(0), x.topk(2).values.sum(1),
                 ag.cdist(x, x * 2).sum(0), F.mse_loss(x, x * 0.5).reshape(1),
                 F.binary_cross_entropy_with_logits(x, (x > 0).float()).reshape(1)]
        return ag.cat([p.reshape(-1) for p in parts]).square().sum()

    def grads():
        for p in (x, v, b3):
            p.grad = None
        build().backward()
        return [p.grad.numpy().copy() for p in (x, v, b3)]

    stats = compiled_replay_stats(grads)
    assert stats["captures"] >= 1 and stats["eager_fallbacks"] == 0
