"""Ops made primitives for speed (issue 17) give the values of the composites they replaced,
within float32 rounding, forward and backward. Each old composite is written here once, from
the primitives it used; gradients of the new ops are checked in test_ops.py's table."""
import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd import ops
from gradtrace.autograd.nn import functional as F

RNG = np.random.default_rng(0)
EPS32 = np.finfo(np.float32).eps


def _old_layer_norm(x, shape, w, b, eps=1e-5):
    dims = tuple(range(x.ndim - len(shape), x.ndim))
    mean = x.mean(dim=dims, keepdim=True)
    centered = x - mean
    var = (centered * centered).mean(dim=dims, keepdim=True)
    out = centered * ops.rsqrt(var + eps)
    return out * w + b


def _old_attention(q, k, v, scale):
    scores = (q * scale) @ k.mT
    future = np.triu(np.ones(scores.shape[-2:], dtype=bool), 1)
    scores = F.masked_fill(scores, ag.tensor(future), -np.inf)
    return F.softmax(scores, -1) @ v


def _old_cross_entropy(x, target):
    picked = ops.squeeze(ops.gather(F.log_softmax(x, 1), 1, ops.unsqueeze(target, 1)), 1)
    return -picked.sum() / target.shape[0]


def _values_and_grads(fn, arrays, cotangent_seed=1):
    ts = [ag.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    out = fn(*ts)
    cot = np.random.default_rng(cotangent_seed).standard_normal(out.shape).astype(out.dtype)
    out.backward(ag.tensor(cot))
    return [out.detach().numpy()] + [t.grad.numpy() for t in ts if t.requires_grad]


# (new, old, inputs, tolerance in float32 eps relative to each result's largest magnitude)
CASES = [
    ("layer_norm", lambda x, w, b: F.layer_norm(x, (32,), w, b),
     lambda x, w, b: _old_layer_norm(x, (32,), w, b),
     [RNG.standard_normal((4, 8, 32)) * 3 + 1, RNG.standard_normal(32), RNG.standard_normal(32)],
     4),
    ("scaled_dot_product_attention",
     lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
     lambda q, k, v: _old_attention(q, k, v, 1 / np.sqrt(16)),
     [RNG.standard_normal((2, 3, 12, 16)), RNG.standard_normal((2, 3, 10, 16)),
      RNG.standard_normal((2, 3, 10, 8))],
     4),
    ("cross_entropy", F.cross_entropy, _old_cross_entropy,
     [RNG.standard_normal((64, 10)) * 4, RNG.integers(0, 10, 64)], 4),
]


@pytest.mark.parametrize("name, new, old, arrays, tol", CASES, ids=[c[0] for c in CASES])
def test_float32_matches_the_old_composite(name, new, old, arrays, tol):
    arrays = [a.astype(np.float32) if a.dtype.kind == "f" else a for a in arrays]
    got, want = _values_and_grads(new, arrays), _values_and_grads(old, arrays)
    for g, w in zip(got, want):
        assert g.dtype == np.float32
        scale = float(np.abs(w).max())
        np.testing.assert_allclose(g, w, rtol=0, atol=tol * EPS32 * scale)


def test_layer_norm_is_one_node():
    x = ag.tensor(RNG.standard_normal((2, 4)), requires_grad=True)
    w = ag.tensor(np.ones(4), requires_grad=True)
    y = F.layer_norm(x, 4, w)
    assert y.grad_fn.name() == "NativeLayerNormBackward0"
    assert [e[0].name() for e in y.grad_fn.next_edges if e] == ["AccumulateGrad"] * 2


def test_layer_norms_of_one_input_share_nothing_stale():
    """layer_norm's weight rule reuses the normalized input its input rule just computed:
    two layer_norms of the same tensor, one with a frozen weight and another eps, still get
    the composite's gradients."""
    arrays = [RNG.standard_normal((6, 8)), RNG.standard_normal(8), RNG.standard_normal(8)]

    def two(norm):
        def fn(x, w1, w2):
            w1.requires_grad = False
            return norm(x, (8,), w1, None, 1e-5) * 2 + norm(x, (8,), w2, None, 0.5)
        return fn

    def old(x, shape, w, b, eps):
        return _old_layer_norm(x, shape, w, 0.0, eps)

    got = _values_and_grads(two(F.layer_norm), [a.astype(np.float32) for a in arrays])
    want = _values_and_grads(two(old), [a.astype(np.float32) for a in arrays])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=0, atol=8 * EPS32 * float(np.abs(w).max()))


# row_sum / row_dot (the fused ops' reductions by GEMV) against xp.sum: contiguous rows,
# several trailing dims, a transposed (non-contiguous) input, rows past the GEMV limit,
# float64 and an empty input.
ROW_CASES = [
    (RNG.standard_normal((16, 64, 128)).astype(np.float32), (-1,)),
    (RNG.standard_normal((4, 3, 5)), (1, 2)),
    (RNG.standard_normal((8, 6)).astype(np.float32).T, (-1,)),
    (RNG.standard_normal((2, 5000)).astype(np.float32), (-1,)),
    (np.zeros((3, 0), np.float32), (-1,)),
]


@pytest.mark.parametrize("a, dims", ROW_CASES, ids=["f32_rows", "two_dims", "transposed", "long",
                                                     "empty"])
def test_row_reductions_match_sum(a, dims):
    from gradtrace.autograd.ops.nn import row_dot, row_sum

    b = RNG.standard_normal(a.shape).astype(a.dtype)
    got_sum, got_dot = row_sum(np, a, dims), row_dot(np, a, b, dims)
    want_sum = np.sum(a, axis=dims, keepdims=True)
    want_dot = np.sum(a * b, axis=dims, keepdims=True)
    assert got_sum.shape == want_sum.shape and got_dot.shape == want_dot.shape
    assert got_sum.dtype == a.dtype
    # Both sum each row in float32 with a few accumulators: n eps of the largest term bounds
    # their difference.
    n_eps = np.finfo(a.dtype).eps * a.size / max(1, want_sum.size)
    np.testing.assert_allclose(got_sum, want_sum, rtol=0, atol=n_eps * np.abs(a).max(initial=0))
    np.testing.assert_allclose(got_dot, want_dot, rtol=0,
                               atol=n_eps * np.abs(a * b).max(initial=0))


def _offset_rows(scores):
    scores[0, 0, 3] -= 200.0    # a row far below its matrix's max: the per-row shift
    return scores


def _nan_row(scores):
    scores[1, 2, 5, 1] = np.nan
    return scores


def _masked_row(scores):
    scores[0, 1, 2] = -np.inf   # every column masked: 0s, as scaled_dot_product_attention gives
    return scores


# On the CPU scaled_softmax shifts all rows by the largest score, not each row by its own
# (NumPy's max over short rows is slow), falling back to the per-row shift where that would
# lose a row. Each case against softmax in float64, rows shifted by their own max, at
# float32 rounding; NaN exactly where the float64 softmax has NaN.
SHIFT_CASES = [
    ("plain", lambda s: s * 3),
    ("row_far_below", _offset_rows),
    ("nan_in_one_row", _nan_row),
    ("row_all_masked", _masked_row),
    ("rows_spread", lambda s: s - 8.0 * np.arange(8)[:, None]),   # up to 28 below: one shift kept
    ("large_future_score", lambda s: np.where(np.arange(8) == 7, 90.0, s)),  # masked when causal
    ("inf_score", lambda s: np.where(np.arange(8) == 0, np.inf, s)),   # never masked
]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("make", [c[1] for c in SHIFT_CASES], ids=[c[0] for c in SHIFT_CASES])
def test_scaled_softmax_one_shift_matches_the_row_shift(make, causal):
    scores = make(RNG.standard_normal((2, 3, 8, 8)))
    x = ag.tensor(scores.astype(np.float32))
    got = ag.ops.apply_op(ag.OPS["scaled_softmax"], (x,), {"scale": 0.5, "causal": causal})
    ref = scores.astype(np.float32).astype(np.float64) * 0.5
    if causal:
        ref = np.where(np.triu(np.ones((8, 8), bool), 1), -np.inf, ref)
    # A row with nothing to attend to: 0s (torch's safe softmax in attention), not NaN.
    empty = np.isneginf(ref).all(-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        ref = np.exp(ref - ref.max(-1, keepdims=True))
        ref /= ref.sum(-1, keepdims=True)
    ref = np.where(empty, 0.0, ref)
    got = got.numpy()
    assert got.dtype == np.float32
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_allclose(got, ref, rtol=0, atol=4 * EPS32, equal_nan=True)


def test_layer_norm_of_no_rows_gives_zero_parameter_gradients():
    """An empty batch: the weight's gradient (a GEMV over no rows) and the bias's are zeros of
    their shapes, as PyTorch gives (torch.zeros(4) for both)."""
    x = ag.tensor(np.zeros((0, 3, 4), np.float32), requires_grad=True)
    w = ag.tensor(np.ones((3, 4), np.float32), requires_grad=True)
    b = ag.tensor(np.zeros((3, 4), np.float32), requires_grad=True)
    F.layer_norm(x, (3, 4), w, b).sum().backward()
    assert x.grad.shape == (0, 3, 4)
    for p in (w, b):
        assert p.grad.shape == (3, 4) and p.grad.dtype == np.float32
        np.testing.assert_array_equal(p.grad.numpy(), np.zeros((3, 4), np.float32))


@pytest.mark.parametrize("float_mask", [False, True])
def test_attention_query_with_every_key_masked_gets_zeros(float_mask):
    """torch 2.13: scaled_dot_product_attention gives 0s (not NaN) for a query whose mask hides
    every key, and that query adds nothing to any gradient: the gradients equal those of the
    same attention without that query."""
    rng = np.random.default_rng(5)
    qa, ka, va = (rng.standard_normal(s) for s in ((3, 4), (5, 4), (5, 2)))
    keep = np.array([[1, 0, 1, 1, 0], [0, 0, 0, 0, 0], [0, 1, 1, 0, 1]], bool)
    weights = np.arange(1.0, 7.0).reshape(3, 2)      # d loss / d out, per query row

    def run(rows):
        q, k, v = (ag.tensor(a, requires_grad=True) for a in (qa[rows], ka, va))
        m = keep[rows]
        mask = ag.tensor(np.where(m, 0.0, -np.inf)) if float_mask else ag.tensor(m)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        (out * ag.tensor(weights[rows])).sum().backward()
        return out.detach().numpy(), q.grad.numpy(), k.grad.numpy(), v.grad.numpy()

    out, gq, gk, gv = run([0, 1, 2])
    np.testing.assert_array_equal(out[1], 0.0)
    np.testing.assert_array_equal(gq[1], 0.0)
    assert not np.isnan(gq).any() and not np.isnan(gk).any() and not np.isnan(gv).any()
    out2, gq2, gk2, gv2 = run([0, 2])
    np.testing.assert_allclose(out[[0, 2]], out2, rtol=1e-12)
    np.testing.assert_allclose(gq[[0, 2]], gq2, rtol=1e-12)
    np.testing.assert_allclose(gk, gk2, rtol=1e-12)
    np.testing.assert_allclose(gv, gv2, rtol=1e-12)


@pytest.mark.parametrize("needs", [(True, True, True), (True, False, False), (False, True, False),
                                   (False, False, True), (False, True, True), (True, True, False)])
def test_layer_norm_backward_is_one_call_for_the_inputs_that_need_it(needs, monkeypatch):
    """On arrays a layer_norm node computes its gradients in one call (the statistics once
    for the input's and the weight's: defop's ``joint``), for exactly the inputs that need
    one, and gives what the differentiable rules give; a compiled replay makes the same one
    call and the same values, bit for bit."""
    from gradtrace.autograd import compiled_autograd

    rng = np.random.default_rng(7)
    op = ag.OPS["layer_norm"]
    joint, calls = op.joint, []
    monkeypatch.setattr(op, "joint", lambda *a, **k: calls.append(k["needs"]) or joint(*a, **k))
    arrays = (rng.standard_normal((3, 5, 6)), rng.uniform(0.5, 1.5, 6), rng.standard_normal(6))
    up = ag.tensor(rng.standard_normal((3, 5, 6)))

    def grads(mode):
        x, w, b = (ag.tensor(a, requires_grad=n) for a, n in zip(arrays, needs))
        want = [t for t in (x, w, b) if t.requires_grad]
        if mode == "tensor":            # the rules, differentiably
            return [g.detach().numpy() for g in ag.grad((F.layer_norm(x, (6,), w, b) * up).sum(), want,
                                                        create_graph=True)]
        if mode == "compiled":
            with compiled_autograd.enable():
                (F.layer_norm(x, (6,), w, b) * up).sum().backward()
        else:
            (F.layer_norm(x, (6,), w, b) * up).sum().backward()
        return [t.grad.numpy() for t in want]

    eager = grads("eager")
    assert calls == [needs]
    for got, ref in zip(eager, grads("tensor")):
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    compiled_autograd.reset()
    for _ in range(3):                  # capture, then replays
        calls.clear()
        replayed = grads("compiled")
        assert calls == [needs]
        for got, ref in zip(replayed, eager):
            np.testing.assert_array_equal(got, ref)
    stats = compiled_autograd.stats()
    assert stats["captures"] == 1 and stats["hits"] == 2 and stats["eager_fallbacks"] == 0
