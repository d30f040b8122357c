"""Regression tests that state PyTorch's values (issue 14): gradients at kinks, ties and
zeros, precision in the tails, 0-d and zero-size tensors. Each expected value is the one
PyTorch (2.x, float64) gives for the same call."""
import math

import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd import forward_ad as fwAD
from gradtrace.autograd.nn import functional as F


def leaf(values):
    return ag.tensor(np.array(values, dtype=np.float64), requires_grad=True)


def grad_of(y, x):
    (g,) = ag.grad(y, x)
    return g.numpy()


# --------------------------------------------------------------------------- 3. prod


def test_prod_is_twice_differentiable():
    x = leaf([0.5, -1.2, 2.0])
    (g,) = ag.grad(x.prod() + (x ** 3).sum(), x, create_graph=True)
    assert g.requires_grad
    # torch: Hessian-vector product with v = ones is [3.8, -4.7, 11.3]
    np.testing.assert_allclose(grad_of(g.sum(), x), [3.8, -4.7, 11.3], rtol=1e-12)


def test_prod_second_derivative_with_zeros():
    # torch: d²prod/dx_i dx_j = prod of the others; x = [0, 2, 3]: the Hessian is
    # [[0, 3, 2], [3, 0, 0], [2, 0, 0]], so H @ ones = [5, 3, 2]
    x = leaf([0.0, 2.0, 3.0])
    (g,) = ag.grad(x.prod(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), [6.0, 0.0, 0.0])
    np.testing.assert_allclose(grad_of(g.sum(), x), [5.0, 3.0, 2.0])
    # two zeros: the gradient is 0 everywhere but H[0, 1] = H[1, 0] = x[2] = 4
    x = leaf([0.0, 0.0, 4.0])
    (g,) = ag.grad(x.prod(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), [0.0, 0.0, 0.0])
    np.testing.assert_allclose(grad_of(g.sum(), x), [4.0, 4.0, 0.0])


# --------------------------------------------------------------------------- 4. softplus


def test_softplus_gradient_at_zero():
    x = leaf([0.0])
    # torch: d softplus / dx at 0 = sigmoid(0) = 0.5
    np.testing.assert_allclose(grad_of(F.softplus(x).sum(), x), [0.5])
    x = leaf([0.0])
    loss = F.binary_cross_entropy_with_logits(x, ag.tensor(np.array([1.0])))
    np.testing.assert_allclose(grad_of(loss, x), [-0.5])   # torch: sigmoid(0) - 1 = -0.5


def test_softplus_second_derivative_at_zero():
    x = leaf([0.0])
    (g,) = ag.grad(F.softplus(x).sum(), x, create_graph=True)
    np.testing.assert_allclose(grad_of(g.sum(), x), [0.25])   # torch: sigmoid'(0) = 0.25


# --------------------------------------------------------------------------- 5. norm, std


def test_norm_of_zeros_has_zero_gradient():
    x = leaf([0.0, 0.0])
    np.testing.assert_array_equal(grad_of(x.norm(), x), [0.0, 0.0])   # torch: [0, 0]
    x = leaf([0.0, 0.0])
    np.testing.assert_array_equal(grad_of(ag.linalg.vector_norm(x, 3), x), [0.0, 0.0])


def test_std_of_a_constant_has_zero_gradient():
    x = leaf([[1.0, 1.0, 1.0], [1.0, 2.0, 3.0]])
    # torch: row 0 is constant (std 0): gradient 0; row 1: (x - mean) / ((n-1) std)
    np.testing.assert_allclose(grad_of(x.std(dim=1).sum(), x), [[0, 0, 0], [-0.5, 0, 0.5]])
    x = leaf([[1.0], [2.0]])
    np.testing.assert_array_equal(grad_of(x.std(dim=1, correction=0).sum(), x), [[0.0], [0.0]])


# --------------------------------------------------------------------------- 6. sigmoid


def test_sigmoid_keeps_precision_for_large_negative_inputs():
    x = leaf([-30.0, -36.0, -40.0])
    exact = np.array([1 / (1 + math.exp(30)), 1 / (1 + math.exp(36)), 1 / (1 + math.exp(40))])
    np.testing.assert_allclose(x.sigmoid().detach().numpy(), exact, rtol=1e-14)
    x = leaf(-40.0)
    y = x.sigmoid().log()
    assert y.item() == pytest.approx(-40.0, abs=1e-12)           # torch: -40
    assert grad_of(y, x) == pytest.approx(1.0)                    # torch: 1
    loss = F.binary_cross_entropy(leaf(-40.0).sigmoid(), ag.tensor(np.array(1.0)))
    assert loss.item() == pytest.approx(40.0, abs=1e-12)          # torch: 40 (log not clamped)


# --------------------------------------------------------------------------- 7. masked_fill


def test_masked_fill_with_a_0d_tensor_value_gets_its_gradient():
    mask = ag.tensor(np.array([True, False, True]))
    x, v = leaf([1.0, 2.0, 3.0]), leaf(5.0)
    y = x.masked_fill(mask, v)
    gx, gv = ag.grad(y.sum(), (x, v))
    np.testing.assert_array_equal(y.detach().numpy(), [5.0, 2.0, 5.0])
    assert gv.item() == 2.0                      # torch: the number of filled positions
    np.testing.assert_array_equal(gx.numpy(), [0.0, 1.0, 0.0])
    with fwAD.dual_level():
        dv = fwAD.make_dual(ag.tensor(np.array(5.0)), ag.tensor(np.array(1.0)))
        out = ag.tensor(np.array([1.0, 2.0, 3.0])).masked_fill(mask, dv)
        np.testing.assert_array_equal(fwAD.unpack_dual(out).tangent.numpy(), [1.0, 0.0, 1.0])


# --------------------------------------------------------------------------- 8. max_pool2d


def test_max_pool2d_indices_index_the_flattened_plane():
    x = ag.tensor(np.arange(16.0).reshape(1, 1, 4, 4))
    _, idx = F.max_pool2d(x, 2, return_indices=True)
    np.testing.assert_array_equal(idx.numpy()[0, 0], [[5, 7], [13, 15]])   # torch
    # maxima in the bottom-left corner of each window
    x = ag.tensor((np.arange(4.0)[:, None] * 4 - np.arange(4.0)[None, :]).reshape(1, 1, 4, 4))
    _, idx = F.max_pool2d(x, 2, return_indices=True)
    np.testing.assert_array_equal(idx.numpy()[0, 0], [[4, 6], [12, 14]])   # torch
    assert idx.dtype == np.int64
    # padding: indices still address the unpadded input
    x = ag.tensor(np.arange(9.0).reshape(1, 1, 3, 3))
    _, idx = F.max_pool2d(x, 2, stride=2, padding=1, return_indices=True)
    np.testing.assert_array_equal(idx.numpy()[0, 0], [[0, 2], [6, 8]])     # torch


# --------------------------------------------------------------------------- 9. unbatched losses


def test_unbatched_losses_with_reduction_none_are_0d():
    x, t = leaf([1.0, 2.0, 3.0]), ag.tensor(np.array(1))
    assert F.cross_entropy(x, t, reduction="none").shape == ()   # torch: ()
    assert F.nll_loss(x, t, reduction="none").shape == ()        # torch: ()
    assert F.cross_entropy(x, t, reduction="none", label_smoothing=0.1).shape == ()


# --------------------------------------------------------------------------- 10. 0-d tensors


@pytest.mark.parametrize("dim", [0, -1])
def test_0d_tensors_accept_dim_0_and_minus_1(dim):
    x = leaf(3.0)
    # torch: each is a 0-d tensor; sum/mean/prod/amax/max/logsumexp/norm give 3, var gives
    # nan (one value, correction 1) and 0 with correction=0
    for fn in (lambda: x.sum(dim), lambda: x.mean(dim), lambda: x.prod(dim),
               lambda: x.amax(dim), lambda: x.max(dim).values, lambda: x.logsumexp(dim),
               lambda: x.squeeze(dim), lambda: x.norm(dim=dim)):
        y = fn()
        assert y.shape == () and y.item() == 3.0
    assert math.isnan(x.var(dim).item())
    assert x.var(dim, correction=0).item() == 0.0
    assert x.max(dim).indices.item() == 0 and x.max(dim).indices.shape == ()
    assert grad_of(x.sum(dim) * 2, x) == 2.0


# --------------------------------------------------------------------------- 11. zero-size


def test_zero_size_tensors():
    x = ag.tensor(np.zeros((0, 3)), requires_grad=True)
    y = x.prod(0)
    np.testing.assert_array_equal(y.detach().numpy(), [1.0, 1.0, 1.0])   # torch: ones(3)
    assert grad_of(y.sum(), x).shape == (0, 3)
    x = ag.tensor(np.zeros((2, 0)), requires_grad=True)
    assert x.log_softmax(1).shape == (2, 0) and grad_of(x.log_softmax(1).sum(), x).shape == (2, 0)
    x = ag.tensor(np.zeros((2, 2, 0)), requires_grad=True)
    w = ag.tensor(np.zeros((3, 0)), requires_grad=True)
    b = ag.tensor(np.ones(3), requires_grad=True)
    out = F.linear(x, w, b)
    np.testing.assert_array_equal(out.detach().numpy(), np.ones((2, 2, 3)))  # torch: the bias
    gx, gw, gb = ag.grad(out.sum(), (x, w, b))
    assert gx.shape == (2, 2, 0) and gw.shape == (3, 0)
    np.testing.assert_array_equal(gb.numpy(), [4.0, 4.0, 4.0])
    # No rows (a 2-D batch of 0): the weight gradient is zeros of the weight's shape.
    x = ag.tensor(np.zeros((0, 4)), requires_grad=True)
    w = ag.tensor(np.ones((3, 4)), requires_grad=True)
    gw, = ag.grad(F.linear(x, w).sum(), (w,))
    np.testing.assert_array_equal(gw.numpy(), np.zeros((3, 4)))              # torch: zeros(3, 4)


# --------------------------------------------------------------------------- 12-14


def test_pow_0_has_zero_gradient_at_0():
    x = leaf([0.0, 2.0])
    np.testing.assert_array_equal(grad_of((x ** 0).sum(), x), [0.0, 0.0])   # torch: [0, 0]
    x, e = leaf([0.0, 2.0]), leaf([0.0, 0.0])
    gx, ge = ag.grad((x ** e).sum(), (x, e))
    np.testing.assert_array_equal(gx.numpy(), [0.0, 0.0])                    # torch: [0, 0]
    np.testing.assert_allclose(ge.numpy(), [0.0, math.log(2.0)])             # torch: 0 at x=0


def test_sign_requires_grad_with_zero_gradient():
    x = leaf([1.0, -2.0, 0.0])
    s = x.sign()
    assert s.requires_grad                          # torch: True (SignBackward0)
    s.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 0.0])


def test_maximum_minimum_split_ties_evenly():
    a, b = leaf([1.0, 2.0]), leaf([1.0, 0.0])
    ga, gb = ag.grad(ag.maximum(a, b).sum(), (a, b))
    np.testing.assert_array_equal(ga.numpy(), [0.5, 1.0])   # torch
    np.testing.assert_array_equal(gb.numpy(), [0.5, 0.0])
    a, b = leaf([1.0, 2.0]), leaf([1.0, 0.0])
    ga, gb = ag.grad(ag.minimum(a, b).sum(), (a, b))
    np.testing.assert_array_equal(ga.numpy(), [0.5, 0.0])
    np.testing.assert_array_equal(gb.numpy(), [0.5, 1.0])


def test_clamp_with_tensor_bounds_keeps_a_tie_on_the_input():
    # torch.clamp(x, min=lo): x gets the gradient where x >= lo (a tie included)
    x, lo = leaf([1.0, 0.0]), leaf([1.0, 1.0])
    gx, glo = ag.grad(ag.clamp(x, min=lo).sum(), (x, lo))
    np.testing.assert_array_equal(gx.numpy(), [1.0, 0.0])
    np.testing.assert_array_equal(glo.numpy(), [0.0, 1.0])


# --------------------------------------------------------------------------- B: added ops


def test_added_ops_match_torch_values():
    x = ag.tensor(np.array([3.0, 1.0, 2.0, 1.0]))
    # torch.median of an even count is the lower middle value: 1.0
    assert x.median().item() == 1.0
    s = x.sort(descending=True)
    np.testing.assert_array_equal(s.values.numpy(), [3.0, 2.0, 1.0, 1.0])
    np.testing.assert_array_equal(s.indices.numpy(), [0, 2, 1, 3])   # torch (stable)
    t = x.topk(2)
    np.testing.assert_array_equal(t.values.numpy(), [3.0, 2.0])
    np.testing.assert_array_equal(t.indices.numpy(), [0, 2])
    # torch.round is half to even: [0., 2., 2., -0., 0.]; with decimals=1 too
    r = ag.tensor(np.array([0.5, 1.5, 2.5, -0.5, 0.4])).round()
    np.testing.assert_array_equal(r.numpy(), [0.0, 2.0, 2.0, -0.0, 0.0])
    assert ag.erfc(ag.tensor(np.array(6.0))).item() == pytest.approx(2.1519736712498913e-17,
                                                                       rel=1e-12)
    assert ag.fmod(ag.tensor(np.array(-3.0)), 2.0).item() == -1.0        # torch: -1
    assert ag.remainder(ag.tensor(np.array(-3.0)), 2.0).item() == 1.0    # torch: 1
    assert ag.xlogy(ag.tensor(np.array(0.0)), ag.tensor(np.array(0.0))).item() == 0.0
    np.testing.assert_array_equal(ag.einsum("ii", ag.tensor(np.eye(3) * 2)).numpy(), 6.0)
    assert ag.log2(ag.tensor(np.array(8.0))).item() == 3.0


def test_added_ops_gradients_at_ties_and_zeros():
    a = leaf([1.0])
    b = leaf([1.0])
    ga, gb = ag.grad(ag.logaddexp(a, b).sum(), (a, b))
    assert ga.item() == 0.5 and gb.item() == 0.5          # torch: exp(a - out) = 0.5 each
    x = leaf([2.0, 0.0, 3.0])
    # torch: d cumprod / dx with a zero: sum over k >= i of prod_{j <= k, j != i} x_j
    np.testing.assert_allclose(grad_of(x.cumprod(0).sum(), x), [1.0, 2.0 + 6.0, 0.0])
    x = leaf([[0.0, 0.0], [3.0, 4.0]])
    y = leaf([[0.0, 0.0]])
    (gx,) = ag.grad(ag.cdist(x, y).sum(), x)
    np.testing.assert_allclose(gx.numpy(), [[0.0, 0.0], [0.6, 0.8]])   # torch: 0 at distance 0
    x = leaf([1.0, 2.0])
    assert x.sign().requires_grad and x.floor().requires_grad           # torch: True


def test_integer_and_bool_casts_end_the_history():
    # PyTorch: x.long().requires_grad and x.bool().requires_grad are False, and
    # (x.long().double()*3 + x).sum().backward() gives x.grad == [1, 1].
    x = ag.tensor([1.7, -2.3], dtype="float64", requires_grad=True)
    assert not x.long().requires_grad and not x.bool().requires_grad and not x.int().requires_grad
    assert x.float().requires_grad
    (x.long().double() * 3 + x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])


def test_augmented_assignment_is_in_place():
    # PyTorch: `a += 1` changes the tensor itself (an alias sees it) and bumps its version;
    # on a tensor saved for backward, the backward then raises.
    a = ag.tensor([1.0, 2.0])
    alias = a
    a += 1
    a *= 3
    a -= 1
    a /= 2
    a **= 2
    assert alias is a
    np.testing.assert_allclose(alias.numpy(), [6.25, 16.0])   # ((x + 1) * 3 - 1) / 2, squared
    x = ag.tensor([1.0, 2.0], dtype="float64", requires_grad=True)
    y = x * 1
    z = y * y                      # saves y
    version = y._version
    y += 1
    assert y._version > version
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


# --------------------------------------------------------------------------- 2 and 16. views


def ones23():
    return ag.ones(2, 3, dtype=np.float64, requires_grad=True)


def test_view_is_rebased_after_its_base_is_modified_in_place():
    # Item 2: PyTorch regenerates v's grad_fn from b's new history, so x.grad[:, 0] = [2, 20].
    x = ones23()
    b = x * 1
    v = b[:, 0]
    b.mul_(2)
    (v * ag.tensor([1.0, 10.0], dtype=np.float64)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[2, 0, 0], [20, 0, 0]])


def test_in_place_on_a_view_of_a_non_leaf_goes_through_copy_slices():
    # Item 16: PyTorch gives 2 in row 0 and 1 elsewhere; b's grad_fn is CopySlices.
    x = ones23()
    b = x * 1
    b[0].mul_(2)
    assert b.grad_fn.name() == "CopySlices"
    assert b.grad_fn.next_functions[0][0].name() == "MulBackward0"
    b.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[2, 2, 2], [1, 1, 1]])


def test_view_after_in_place_on_itself_has_history_from_the_base():
    x = ones23()
    b = x * 1
    v = b[0]
    v.mul_(2)
    assert v.grad_fn.next_functions[0][0] is b.grad_fn
    assert b.grad_fn.name() == "CopySlices"


def _x23():
    return ag.tensor([[0.5, -1.2, 2.0], [1.5, 0.3, 0.7]], dtype=np.float64, requires_grad=True)


def _setitem_with_an_index_on_a_view(x):
    b = x * 1
    v = b[1]
    v[ag.tensor([0, 2])] = x[0, :2] * 5
    return (b * b).sum()


def _in_place_on_a_view_of_a_view(x):
    b = x * 2
    v = b.t()[1:]
    v.mul_(x[:, 1:].t())
    return (b ** 2).sum()


def _in_place_on_a_reshape(x):
    b = x + 0
    v = b.reshape(3, 2)
    v[0].exp_()
    return (b * x).sum()


def _in_place_on_two_overlapping_views(x):
    b = x * 1
    v1 = b[0]
    v2 = b[:, 1]
    v1.mul_(x[1])
    v2.tanh_()
    return (b * b).sum()


def _base_modified_then_view_of_view(x):
    b = x * x
    v = b[:, 1:]
    b.add_(x)
    w = v.t()
    return (w * w * x[0, 0]).sum()


# (function, PyTorch's value, gradient and Hessian-vector product with v = ones, float64)
VIEW_CASES = [
    (_setitem_with_an_index_on_a_view, 48.03, [[26.0, -62.4, 4.0], [0.0, 0.6, 0.0]],
     [[52.0, 52.0, 2.0], [0.0, 2.0, 0.0]]),
    (_in_place_on_a_view_of_a_view, 83.2872, [[4.0, -27.648, 128.0], [12.0, 0.432, 5.488]],
     [[8.0, 69.12, 192.0], [8.0, 4.32, 23.52]]),
    (_in_place_on_a_reshape, 7.292927581055421,
     [[2.4730819060501923, -0.06023884238244043, 4.0], [3.0, 0.6, 1.4]],
     [[4.121803176750321, 0.2409553695297617, 2.0], [2.0, 2.0, 2.0]]),
    (_in_place_on_two_overlapping_views, 5.466535767537491,
     [[2.25, -0.18244436128367528, 1.96], [3.75, 1.2629593233361556, 7.0]],
     [[7.5, -0.913742241386116, 6.58], [5.5, 1.978535716917666, 15.6]]),
    (_base_modified_then_view_of_view, 18.8129,
     [[37.6258, -0.336, 30.0], [0.0, 0.624, 2.856]],
     [[66.288, 1.768, 97.0], [0.0, 4.588, 13.852]]),
]


@pytest.mark.parametrize("fn, value, grad, hvp", VIEW_CASES,
                         ids=[c[0].__name__ for c in VIEW_CASES])
def test_in_place_through_views_matches_torch_and_finite_differences(fn, value, grad, hvp):
    x = _x23()
    y = fn(x)
    (g,) = ag.grad(y, x, create_graph=True)
    (h,) = ag.grad(g.sum(), x)
    np.testing.assert_allclose(y.item(), value, rtol=1e-12)
    np.testing.assert_allclose(g.detach().numpy(), grad, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(h.numpy(), hvp, rtol=1e-12, atol=1e-12)
    # Central differences of the same function (run without history) agree too.
    base, eps = x.detach().numpy(), 1e-6
    numeric = np.zeros_like(base)
    for i in np.ndindex(base.shape):
        step = np.zeros_like(base)
        step[i] = eps
        with ag.no_grad():
            hi = fn(ag.tensor(base + step)).item()
            lo = fn(ag.tensor(base - step)).item()
        numeric[i] = (hi - lo) / (2 * eps)
    np.testing.assert_allclose(g.detach().numpy(), numeric, rtol=1e-6, atol=1e-6)


def test_copy_slices_backward_twice_with_retain_graph():
    x = _x23()
    b = x * 1
    b[0].mul_(3)
    y = (b * b).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [[18.0, -43.2, 72.0], [6.0, 1.2, 2.8]])


def test_base_without_grad_gains_history_through_its_views():
    # PyTorch: b does not require grad until b[0].mul_(x[0]); b's row 0 was 0, so x[0] gets 0.
    x = _x23()
    b = ag.zeros(2, 3, dtype=np.float64)
    v = b[1]
    b[0].mul_(x[0])
    b[1].copy_(x[1] * 2)
    assert b.grad_fn.name() == "CopySlices" and v.requires_grad and not v.is_leaf
    (b * b).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0, 0, 0], [12.0, 2.4, 5.6]])


@pytest.mark.parametrize("modify", [lambda b, v: b[1].mul_(2), lambda b, v: v.mul_(2)],
                         ids=["other view", "the view itself"])
def test_saved_view_modified_in_place_still_raises(modify):
    x = _x23()
    b = x * 1
    v = b[0]
    y = (v * v).sum()
    modify(b, v)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_in_place_on_a_view_of_a_leaf_requiring_grad_raises():
    x = _x23()
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        x[0].mul_(2)
    with ag.no_grad():
        x[0].mul_(1)   # allowed without grad mode, as in PyTorch
    assert x._version == 1


def test_view_made_in_no_grad_mode_is_not_rebased():
    # PyTorch's CreationMeta::NO_GRAD_MODE errors, for the view's own in-place and its base's.
    x = _x23()
    b = x * 1
    with ag.no_grad():
        v = b[0]
    with pytest.raises(RuntimeError, match="A view was created in no_grad mode and is being"):
        v.mul_(2)
    b.mul_(2)
    with pytest.raises(RuntimeError, match="its base or another view of its base"):
        v.grad_fn


def test_reshape_that_copies_is_not_a_view():
    # PyTorch: reshape of a non-contiguous slice copies, so writing the copy leaves b (and
    # its gradient, all ones) alone.
    x = ag.ones(4, 6, dtype=np.float64, requires_grad=True)
    b = x * 1
    r = b[:, :2].reshape(8)
    r.mul_(2)
    assert r._version == 1 and b._version == 0
    b.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones((4, 6)))


def test_expanded_view_cannot_be_written_in_place():
    b = _x23()[0:1] * 1
    with pytest.raises(RuntimeError, match="mul_"):
        b.expand(3, 3).mul_(2)


# --------------------------------------------------------------------------- p.data


def test_data_is_a_tensor_sharing_storage_without_history():
    # PyTorch: p.data has requires_grad False and a version counter of its own; an in-place
    # op on it changes p without bumping p's version.
    p = ag.ones(3, requires_grad=True)
    d = p.data
    assert isinstance(d, ag.Tensor) and not d.requires_grad and d.grad_fn is None
    d.mul_(0.5)
    np.testing.assert_array_equal(p.detach().numpy(), [0.5, 0.5, 0.5])
    assert (p._version, d._version) == (0, 1)
    y = (p * p).sum()
    p.data.mul_(2)        # unseen by the saved-tensor check; the saved p is now 1, as in PyTorch
    y.backward()
    np.testing.assert_array_equal(p.grad.numpy(), [2.0, 2.0, 2.0])


def test_assigning_data_replaces_the_values():
    p = ag.ones(3, requires_grad=True)
    p.data = ag.zeros(2)
    assert p.shape == (2,) and p.requires_grad
    np.testing.assert_array_equal(p.detach().numpy(), [0.0, 0.0])
    with pytest.raises(TypeError, match="data must be a Tensor"):
        p.data = np.zeros(2)


def test_forward_mode_tangents_follow_in_place_ops_through_views():
    # PyTorch keeps a view's tangent a view of its base's: [2, 20], then row 0 times 3, then
    # a base without a tangent that gains one in its row 1 only.
    ones = ag.ones(2, 3, dtype=np.float64)
    with fwAD.dual_level():
        p = fwAD.make_dual(ones, ag.ones(2, 3, dtype=np.float64))
        b = p * 1
        v = b[:, 0]
        b.mul_(2)
        tangent = fwAD.unpack_dual(v * ag.tensor([1.0, 10.0], dtype=np.float64)).tangent
        np.testing.assert_array_equal(tangent.numpy(), [2, 20])
        b = p * 1
        b[0].mul_(3)
        np.testing.assert_array_equal(fwAD.unpack_dual(b).tangent.numpy(), [[3] * 3, [1] * 3])
        c = ag.zeros(2, 3, dtype=np.float64)
        w = c[1]
        c[1].copy_(p[0] * 3)
        np.testing.assert_array_equal(fwAD.unpack_dual(c).tangent.numpy(), [[0] * 3, [3] * 3])
        np.testing.assert_array_equal(fwAD.unpack_dual(w).tangent.numpy(), [3, 3, 3])


@pytest.mark.parametrize("requires_grad", [False, True])
def test_detach_in_place_on_a_view_raises_as_torch(requires_grad):
    # torch 2.13: b[0:2].detach_() raises "Can't detach views in-place. Use detach()
    # instead." whether or not the base requires grad; detach() (out of place) works.
    b = ag.zeros(3, requires_grad=True) * 1 if requires_grad else ag.zeros(3)
    v = b[0:2]
    with pytest.raises(RuntimeError, match="Can't detach views in-place"):
        v.detach_()
    d = v.detach()
    assert not d.requires_grad and d.shape == (2,)
    b.sum()                       # the base is untouched and still usable


def test_retain_grad_on_a_view_follows_its_regenerated_grad_fn():
    # torch 2.13, x = ones(2, 3) float64: b = x*1; v = b[:, 0]; v.retain_grad();
    # v.register_hook(h); b.mul_(2); (v * [1, 10]).sum().backward() gives v.grad = [1, 10],
    # x.grad[:, 0] = [2, 20], and h is not called (a hook registered before the in-place
    # stays on the old grad_fn, which the backward no longer reaches).
    x = ag.ones(2, 3, dtype=ag.float64, requires_grad=True)
    b = x * 1
    v = b[:, 0]
    v.retain_grad()
    seen = []
    v.register_hook(lambda g: seen.append(g))
    b.mul_(2)
    (v * ag.tensor([1.0, 10.0], dtype=ag.float64)).sum().backward()
    assert v.grad.tolist() == [1.0, 10.0]
    assert x.grad.tolist() == [[2.0, 0.0, 0.0], [20.0, 0.0, 0.0]]
    assert seen == []
