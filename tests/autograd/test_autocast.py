"""Autocast: the policy table per op (CPU against PyTorch 2.13's CPU autocast with
dtype=float16; CUDA, on the GPU or its stand-in, against PyTorch's CUDA lists), casts recorded
as ToCopyBackward0 so float32 parameters get float32 gradients, the parameter cast cache,
nesting, enabled=False, the decorator, thread-locality and CPU's bfloat16 default."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from gradtrace import autograd as T
from gradtrace.autograd import autocast_mode
from gradtrace.autograd.dispatch import COMPOSITES, OPS
from gradtrace.autograd.nn import functional as F
from gradtrace.autograd import record_function as rf
from gradtrace.autograd.record_function import RecordScope

H, S = "float16", "float32"

# (case, fn(T, F, x, h), CPU dtype, CUDA dtype). x: float32 (4, 4), h: x in float16.
# The CPU column is what PyTorch 2.13 gives under torch.autocast("cpu", dtype=torch.float16)
# (checked by running this table with torch); the CUDA column follows PyTorch's CUDA lists
# (autocast_mode.cpp), which send more ops to float32 than its CPU lists do.
CASES = [
    ("mm", lambda T, F, x, h: T.mm(x, x), H, H),
    ("matmul", lambda T, F, x, h: x @ x, H, H),
    ("bmm", lambda T, F, x, h: T.bmm(x[None], x[None]), H, H),
    ("linear", lambda T, F, x, h: F.linear(x, x), H, H),
    ("linear_bias", lambda T, F, x, h: F.linear(x, x, x[0]), H, H),
    ("addmm", lambda T, F, x, h: T.addmm(x, x, x), H, H),
    ("baddbmm", lambda T, F, x, h: T.baddbmm(x[None], x[None], x[None]), H, H),
    ("einsum", lambda T, F, x, h: T.einsum("ij,jk->ik", x, x), H, H),
    ("conv2d", lambda T, F, x, h: F.conv2d(x[None, None], x[None, None, :3, :3]), H, H),
    ("conv1d", lambda T, F, x, h: F.conv1d(x[None], x[None, :, :3]), H, H),
    ("sdpa", lambda T, F, x, h: F.scaled_dot_product_attention(x[None], x[None], x[None]), H, H),
    ("mm_int64", lambda T, F, x, h: T.mm((x > 0).long(), (x > 0).long()),
     "int64", "int64"),
    ("mm_float64", lambda T, F, x, h: T.mm(x.double(), x.double()), "float64", "float64"),
    ("exp_h", lambda T, F, x, h: T.exp(h), H, S),
    ("log_h", lambda T, F, x, h: T.log(h.abs() + 1), H, S),
    ("pow_h", lambda T, F, x, h: h.pow(2), H, S),
    ("rsqrt_h", lambda T, F, x, h: (h.abs() + 1).rsqrt(), H, S),
    ("softplus_h", lambda T, F, x, h: F.softplus(h), H, S),
    ("softmax_h", lambda T, F, x, h: T.softmax(h, 1), H, S),
    ("log_softmax_h", lambda T, F, x, h: T.log_softmax(h, 1), H, S),
    ("sum_h", lambda T, F, x, h: h.sum(), H, S),
    ("sum_dim_h", lambda T, F, x, h: h.sum(1), H, S),
    ("prod_h", lambda T, F, x, h: h.prod(), S, S),
    ("cumsum_h", lambda T, F, x, h: h.cumsum(0), H, S),
    ("layer_norm_h", lambda T, F, x, h: F.layer_norm(h, (4,)), H, S),
    ("group_norm_h", lambda T, F, x, h: F.group_norm(h[None], 2), H, S),
    ("norm_h", lambda T, F, x, h: h.norm(), H, S),
    ("logsumexp_h", lambda T, F, x, h: T.logsumexp(h, 1), H, S),
    ("cosine_similarity_h", lambda T, F, x, h: F.cosine_similarity(h, h), H, S),
    ("dist_h", lambda T, F, x, h: T.dist(h, h), H, S),
    ("cdist_h", lambda T, F, x, h: T.cdist(h, h), S, S),
    ("mse_loss_h", lambda T, F, x, h: F.mse_loss(h, h), S, S),
    ("l1_loss_h", lambda T, F, x, h: F.l1_loss(h, h), S, S),
    ("cross_entropy_h", lambda T, F, x, h: F.cross_entropy(h, T.arange(4, device=x.device)), S, S),
    ("nll_loss_h", lambda T, F, x, h: F.nll_loss(h, T.arange(4, device=x.device)), S, S),
    ("bce_with_logits_h",
     lambda T, F, x, h: F.binary_cross_entropy_with_logits(h, h.sigmoid()), S, S),
    ("kl_div_h", lambda T, F, x, h: F.kl_div(h, h.softmax(1), reduction="batchmean"), S, S),
    ("cat_hx", lambda T, F, x, h: T.cat([h, x]), S, S),
    ("cat_hh", lambda T, F, x, h: T.cat([h, h]), H, H),
    ("stack_hx", lambda T, F, x, h: T.stack([h, x]), S, S),
    ("addcmul_xhh", lambda T, F, x, h: T.addcmul(x, h, h), S, S),
    ("add_hx", lambda T, F, x, h: h + x, S, S),
    ("relu_h", lambda T, F, x, h: T.relu(h), H, H),
    ("mean_h", lambda T, F, x, h: h.mean(), H, H),
    ("tanh_h", lambda T, F, x, h: T.tanh(h), H, H),
    ("relu_x", lambda T, F, x, h: T.relu(x), S, S),
]


def _inputs(device="cpu"):
    x = T.tensor(np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32),
                 device=device)
    return x, x.half()


def _dtype_name(t):
    return str(t.dtype).replace("torch.", "")


@pytest.mark.parametrize("case,fn,cpu,cuda", CASES, ids=[c[0] for c in CASES])
def test_cpu_policy_matches_torch(case, fn, cpu, cuda):
    x, h = _inputs()
    with T.autocast("cpu", dtype=T.float16):
        out = fn(T, F, x, h)
    assert _dtype_name(out) == cpu
    # Outside a region every case runs in its inputs' dtypes (float32 ones stay float32).
    plain = fn(T, F, x, x)
    assert _dtype_name(plain) in (S, "int64", "float64")


@pytest.mark.cuda
@pytest.mark.parametrize("case,fn,cpu,cuda", CASES, ids=[c[0] for c in CASES])
def test_cuda_policy(case, fn, cpu, cuda):
    x, h = _inputs("cuda")
    with T.autocast("cuda"):
        out = fn(T, F, x, h)
    assert _dtype_name(out) == cuda
    assert out.device.type == "cuda"


def test_policy_table_names_real_ops():
    """Every name in the table is a primitive or a composite (a typo would never match)."""
    for device_type, table in autocast_mode.POLICY.items():
        missing = [n for n in table if n not in OPS and n not in COMPOSITES]
        assert missing == [], (device_type, missing)
        assert set(table.values()) <= {autocast_mode.LOWER, autocast_mode.FP32,
                                       autocast_mode.FP32_OPT, autocast_mode.PROMOTE}


def test_float32_params_get_float32_grads_through_cast_nodes():
    rng = np.random.default_rng(1)
    w = T.tensor(rng.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    b = T.tensor(rng.standard_normal(3).astype(np.float32), requires_grad=True)
    x = T.tensor(rng.standard_normal((5, 4)).astype(np.float32))
    with T.autocast("cpu", dtype=T.float16):
        y = F.linear(x, w, b)
        assert y.dtype == T.float16
        loss = F.mse_loss(y, T.zeros(5, 3))
        assert loss.dtype == T.float32
    # The casts are recorded as PyTorch's: the matmul's inputs come through ToCopyBackward0.
    names = {fn.name() for fn, _ in y.grad_fn.next_functions if fn is not None}
    assert names == {"ToCopyBackward0"}
    loss.backward()
    assert w.grad.dtype == T.float32 and b.grad.dtype == T.float32
    # The gradient is float16 arithmetic's: close to float32's.
    w.grad, b.grad = None, None
    F.mse_loss(F.linear(x, w, b), T.zeros(5, 3)).backward()
    ref = w.grad.numpy()
    w.grad = None
    with T.autocast("cpu", dtype=T.float16):
        F.mse_loss(F.linear(x, w, b), T.zeros(5, 3)).backward()
    np.testing.assert_allclose(w.grad.numpy(), ref, rtol=2e-2, atol=2e-2)


def _cast_node(t):
    fn = t.grad_fn
    while fn is not None and fn.name() != "ToCopyBackward0":
        fn = next(f for f, _ in fn.next_functions if f is not None)
    return fn


def test_parameter_cast_is_cached_per_region():
    """PyTorch's cached_cast: one cast of a float32 leaf per outermost region (not under
    no_grad, not with cache_enabled=False); a new region casts again."""
    w = T.randn(4, 4, requires_grad=True)
    x = T.randn(4, 4)
    with T.autocast("cpu", dtype=T.float16):
        with T.no_grad():
            F.linear(x, w)
        a, b = F.linear(x, w), F.linear(x, w)
        assert a.requires_grad                      # the no_grad cast was not kept (as torch)
        assert _cast_node(a) is _cast_node(b)       # torch: the same ToCopyBackward0
        with T.autocast("cpu", dtype=T.float16):    # nested: same cache
            assert _cast_node(F.linear(x, w)) is _cast_node(a)
    with T.autocast("cpu", dtype=T.float16):
        assert _cast_node(F.linear(x, w)) is not _cast_node(a)
    with T.autocast("cpu", dtype=T.float16, cache_enabled=False):
        assert _cast_node(F.linear(x, w)) is not _cast_node(F.linear(x, w))
    # A non-leaf is never cached.
    with T.autocast("cpu", dtype=T.float16):
        v = w * 1
        assert _cast_node(F.linear(x, v)) is not _cast_node(F.linear(x, v))


def test_nesting_and_disabled_regions():
    x = T.randn(4, 4)
    assert not T.is_autocast_enabled("cpu")
    with T.autocast("cpu", dtype=T.float16):
        assert T.is_autocast_enabled("cpu") and T.get_autocast_dtype("cpu") == T.float16
        with T.autocast("cpu", enabled=False):
            assert not T.is_autocast_enabled("cpu")
            assert (x @ x).dtype == T.float32
            with T.autocast("cpu", dtype=T.float16):
                assert (x @ x).dtype == T.float16
            assert (x @ x).dtype == T.float32
        assert (x @ x).dtype == T.float16
    assert not T.is_autocast_enabled("cpu")
    assert (x @ x).dtype == T.float32


def test_region_restored_after_an_exception():
    x = T.randn(2, 2)
    with pytest.raises(ValueError):
        with T.autocast("cpu", dtype=T.float16):
            raise ValueError("boom")
    assert not T.is_autocast_enabled("cpu")
    assert (x @ x).dtype == T.float32


def test_decorator_form():
    x = T.randn(3, 3)

    @T.autocast("cpu", dtype=T.float16)
    def forward(a):
        return a @ a

    @T.amp.autocast("cpu", dtype=T.float16)
    def recursive(a, n):
        return recursive(a, n - 1) if n else a @ a

    assert forward(x).dtype == T.float16
    assert recursive(x, 3).dtype == T.float16
    assert not T.is_autocast_enabled("cpu")
    assert forward.__name__ == "forward"


def test_autocast_is_thread_local():
    x = T.randn(3, 3)
    seen = {}

    def other():
        seen["enabled"] = T.is_autocast_enabled("cpu")
        seen["dtype"] = (x @ x).dtype

    with T.autocast("cpu", dtype=T.float16):
        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert (x @ x).dtype == T.float16
    assert seen == {"enabled": False, "dtype": T.float32}


def test_cpu_default_is_bfloat16_as_torch():
    """PyTorch's CPU autocast dtype, bfloat16 (ml_dtypes'), is the default here too; values,
    dtypes and the gradient pinned from torch 2.13."""
    assert T.get_autocast_dtype("cpu") == T.bfloat16
    x = T.tensor([[1.1, 2.2, -0.3], [0.5, -1.7, 3.3]])
    w = T.tensor([[0.7, -0.2], [0.15, 0.9], [-1.3, 0.45]], requires_grad=True)
    for make in (lambda: T.autocast("cpu"), lambda: T.amp.autocast("cpu"),
                 lambda: T.cpu.amp.autocast(), lambda: T.autocast("cpu", dtype="bfloat16")):
        with make():
            y = x @ w
        assert y.dtype == T.bfloat16
        np.testing.assert_array_equal(y.float().detach().numpy(),
                                      [[1.4921875, 1.625], [-4.1875, -0.1494140625]])
    y.float().sum().backward()
    assert w.grad.dtype == T.float32
    np.testing.assert_array_equal(w.grad.numpy(), [[1.6015625] * 2, [0.5] * 2, [3.0] * 2])
    with pytest.warns(UserWarning, match="CPU Autocast only supports dtypes of torch.bfloat16, "
                                         "torch.float16 currently."):
        with T.autocast("cpu", dtype=T.float64):
            assert not T.is_autocast_enabled("cpu")
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        T.no_such_name  # noqa: B018 - other missing names keep the usual error


def test_defaults_and_names():
    assert T.get_autocast_dtype("cuda") == T.float16
    assert T.amp.is_autocast_available("cuda") and T.amp.is_autocast_available("cpu")
    with pytest.raises(RuntimeError, match="unsupported autocast device_type 'xpu'"):
        T.autocast("xpu")
    with pytest.warns(UserWarning, match="target dtype is not supported"):
        region = T.autocast("cpu", dtype=T.float32)
    with region:
        assert not T.is_autocast_enabled("cpu")


def test_fp32_opt_policy_keeps_a_given_dtype():
    """PyTorch's fp32_set_opt_dtype (sum, softmax...): float32 unless the call names a dtype;
    promote: float32 when any eligible input is float32; nothing eligible: as it is."""
    f16, f32 = np.dtype("float16"), np.dtype("float32")
    target = autocast_mode.target_dtype
    assert target(autocast_mode.FP32_OPT, f16, [f16], None) == f32
    assert target(autocast_mode.FP32_OPT, f16, [f16], {"dtype": f16}) is None
    assert target(autocast_mode.FP32_OPT, f16, [f16], {"dtype": None}) == f32
    assert target(autocast_mode.PROMOTE, f16, [f16, f16], None) == f16
    assert target(autocast_mode.PROMOTE, f16, [f16, f32], None) == f32
    assert target(autocast_mode.LOWER, f16, [f32], None) == f16
    assert target(autocast_mode.LOWER, f16, [], None) is None


def test_casts_show_as_records_paired_with_their_backward():
    """A cast shows as a forward record (to_dtype) whose backward is ToCopyBackward0, paired
    through (sequence_nr, thread) as every op (PyTorch: aten::_to_copy / ToCopyBackward0)."""
    records = []
    w = T.randn(4, 4, requires_grad=True)
    x = T.randn(4, 4)
    with rf.add_global_callback(lambda rec: None,
                                lambda rec, ctx: records.append((rec.name, int(rec.scope),
                                                                 rec.sequence_nr))):
        with T.autocast("cpu", dtype=T.float16):
            F.linear(x, w).sum().backward()
    fwd = {seq: name for name, scope, seq in records if scope == RecordScope.FUNCTION}
    bwd = [(name, seq) for name, scope, seq in records if scope == RecordScope.BACKWARD_FUNCTION]
    casts = [seq for name, seq in bwd if name == "ToCopyBackward0"]
    assert len(casts) == 1                     # w's cast (x needs no gradient)
    assert fwd[casts[0]] == "to_dtype"


@pytest.mark.cuda
def test_inplace_ops_are_not_autocast():
    """PyTorch's lists name out-of-place ops: exp_ of a float16 tensor stays float16 under
    CUDA autocast, with no cast recorded, where exp gives float32."""
    h = T.randn(3, 3, device="cuda").half().requires_grad_()
    with T.autocast("cuda"):
        assert T.exp(h).dtype == T.float32
        y = h * 1
        y.exp_()
        assert y.dtype == T.float16
        assert y.grad_fn.name() == "ExpBackward0"
        assert [f.name() for f, _ in y.grad_fn.next_functions] == ["MulBackward0"]
        assert T.is_autocast_enabled("cuda")
