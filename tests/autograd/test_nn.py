"""nn: modules, hooks, state dicts, train/eval behaviour, profiler ranges, init, in-place ops."""
import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd import nn
from gradtrace.autograd import record_function as rf
from gradtrace.autograd.nn import functional as F


def _mlp():
    ag.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 2))


def test_parameters_buffers_children_and_names():
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
    names = [n for n, _ in m.named_parameters()]
    assert names == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in m.parameters())
    assert [n for n, _ in m.named_buffers()] == ["1.running_mean", "1.running_var",
                                                 "1.num_batches_tracked"]
    assert len(list(m.children())) == 3 and len(list(m.modules())) == 4


def test_repr_reads_like_pytorch():
    m = nn.Sequential(nn.Linear(4, 8, bias=False), nn.ReLU())
    assert repr(m) == ("Sequential(\n  (0): Linear(in_features=4, out_features=8, bias=False)\n"
                       "  (1): ReLU()\n)")
    assert "Conv2d(3, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))" in repr(
        nn.Sequential(nn.Conv2d(3, 4, 3, padding=1)))


def test_forward_hooks_run_and_can_replace_values_and_are_removable():
    m = nn.Linear(3, 2)
    calls = []
    pre = m.register_forward_pre_hook(lambda mod, args: (args[0] * 0.0,))
    post = m.register_forward_hook(lambda mod, args, out: calls.append(out.shape) or out + 1.0)
    out = m(ag.randn(5, 3))
    assert calls == [(5, 2)]
    np.testing.assert_allclose(out.detach().numpy(), np.broadcast_to(m.bias.detach().numpy() + 1.0, (5, 2)),
                               rtol=1e-6)
    pre.remove()
    with post:
        pass   # handles are context managers: leaving removes the hook
    m(ag.randn(5, 3))
    assert calls == [(5, 2)]


def test_state_dict_round_trip():
    a, b = _mlp(), nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 2))
    res = b.load_state_dict(a.state_dict())
    assert res.missing_keys == [] and res.unexpected_keys == []
    x = ag.randn(3, 4)
    a.eval(), b.eval()
    np.testing.assert_array_equal(a(x).detach().numpy(), b(x).detach().numpy())
    assert b[0].weight._version >= 1


def test_batch_norm_state_dict_holds_running_stats():
    bn = nn.BatchNorm2d(3)
    bn(ag.randn(4, 3, 2, 2) * 3 + 1)
    sd = bn.state_dict()
    assert set(sd) == {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}
    fresh = nn.BatchNorm2d(3)
    fresh.load_state_dict(sd)
    np.testing.assert_array_equal(fresh.running_mean.numpy(), bn.running_mean.numpy())
    assert int(fresh.num_batches_tracked.item()) == 1


def test_load_state_dict_non_strict_reports_keys():
    m = nn.Linear(2, 2)
    sd = dict(m.state_dict())
    sd.pop("bias")
    sd["extra"] = ag.zeros(1)
    res = m.load_state_dict(sd, strict=False)
    assert res.missing_keys == ["bias"] and res.unexpected_keys == ["extra"]


def test_dropout_train_eval_and_seeded_generator():
    d = nn.Dropout(0.5)
    x = ag.ones(1000)
    ag.manual_seed(1)
    y1 = d(x).numpy()
    ag.manual_seed(1)
    y2 = d(x).numpy()
    np.testing.assert_array_equal(y1, y2)
    assert set(np.unique(y1)) <= {0.0, 2.0} and 300 < (y1 == 0).sum() < 700
    d.eval()
    assert d(x) is x
    gen = np.random.default_rng(5)
    out = F.dropout(x, 0.5, generator=gen).numpy()
    np.testing.assert_array_equal(out, (np.random.default_rng(5).random(1000, dtype=np.float32) >= 0.5) * 2.0)


def test_batch_norm_train_uses_batch_stats_and_eval_uses_running_stats():
    bn = nn.BatchNorm2d(2, momentum=0.5)
    x = ag.tensor(np.random.default_rng(0).normal(3.0, 2.0, (8, 2, 3, 3)).astype(np.float32))
    y = bn(x).detach().numpy()
    np.testing.assert_allclose(y.mean(axis=(0, 2, 3)), 0, atol=1e-5)
    np.testing.assert_allclose(y.std(axis=(0, 2, 3)), 1, atol=1e-3)
    xs = x.numpy()
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.5 * xs.mean(axis=(0, 2, 3)), rtol=1e-5)
    np.testing.assert_allclose(bn.running_var.numpy(), 0.5 + 0.5 * xs.var(axis=(0, 2, 3), ddof=1),
                               rtol=1e-5)
    bn.eval()
    ye = bn(x).detach().numpy()
    rm, rv = bn.running_mean.numpy(), bn.running_var.numpy()
    np.testing.assert_allclose(ye, (xs - rm[:, None, None]) / np.sqrt(rv[:, None, None] + 1e-5),
                               rtol=1e-4, atol=1e-5)
    before = bn.running_mean.numpy().copy()
    bn(x)
    np.testing.assert_array_equal(bn.running_mean.numpy(), before)   # eval leaves stats alone


def test_module_calls_are_user_scope_ranges_only_when_profiling():
    seen = []
    m = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    handle = rf.add_global_callback(lambda rec: seen.append(rec.name),
                                    scopes=[rf.RecordScope.USER_SCOPE])
    try:
        m(ag.randn(1, 2))
    finally:
        handle.remove()
    assert seen == ["nn.Module: Sequential", "nn.Module: Linear", "nn.Module: ReLU"]
    m(ag.randn(1, 2))
    assert len(seen) == 3


def test_functional_composites_show_as_one_function_range():
    seen = []
    handle = rf.add_global_callback(lambda rec: seen.append(rec.name),
                                    scopes=[rf.RecordScope.FUNCTION])
    try:
        F.cross_entropy(ag.randn(3, 4), ag.tensor([0, 1, 3]))
    finally:
        handle.remove()
    assert seen[0] == "cross_entropy" and "log_softmax" in seen and "nll_loss" in seen


def test_node_names_users_know():
    x = ag.randn(1, 2, 5, 5, requires_grad=True)
    w = ag.randn(3, 2, 3, 3, requires_grad=True)
    assert F.conv2d(x, w).grad_fn.name() == "ConvolutionBackward0"
    assert F.softmax(x, -1).grad_fn.name() == "SoftmaxBackward0"
    w = ag.randn(4, 3, requires_grad=True)
    # torch 2.13: without a bias F.linear is MmBackward0, with one AddmmBackward0.
    assert F.linear(ag.randn(2, 3), w).grad_fn.name() == "MmBackward0"
    assert F.linear(ag.randn(2, 3), w, ag.randn(4)).grad_fn.name() == "AddmmBackward0"


def test_module_to_keeps_parameter_identity_and_zero_grad():
    m = nn.Linear(3, 3)
    w = m.weight
    m(ag.randn(2, 3)).sum().backward()
    assert w.grad is not None
    m.zero_grad(set_to_none=False)
    assert float(np.abs(w.grad.numpy()).sum()) == 0.0
    m.zero_grad()
    assert w.grad is None
    m.to("cpu", dtype="float64")
    assert m.weight is w and w.dtype == np.float64


def test_init_helpers_are_seeded_and_scaled():
    t = nn.Parameter(ag.empty(256, 128))
    ag.manual_seed(0)
    nn.init.kaiming_uniform_(t, nonlinearity="relu")
    bound = np.sqrt(2.0) * np.sqrt(3.0 / 128)
    a = t.detach().numpy().copy()
    assert np.abs(a).max() <= bound and np.abs(a).max() > 0.9 * bound
    ag.manual_seed(0)
    nn.init.kaiming_uniform_(t, nonlinearity="relu")
    np.testing.assert_array_equal(a, t.detach().numpy())
    nn.init.xavier_normal_(t)
    assert abs(t.detach().numpy().std() - np.sqrt(2.0 / 384)) < 0.01
    nn.init.zeros_(t)
    assert not t.detach().numpy().any()
    nn.init.ones_(t)
    nn.init.normal_(t, 1.0, 0.1)
    assert abs(t.detach().numpy().mean() - 1.0) < 0.01
    nn.init.uniform_(t, -1, 1)
    nn.init.xavier_uniform_(t)
    nn.init.kaiming_normal_(t)


def test_containers():
    ml = nn.ModuleList([nn.Linear(2, 2), nn.ReLU()])
    ml.append(nn.Tanh())
    assert len(ml) == 3 and isinstance(ml[2], nn.Tanh)
    md = nn.ModuleDict({"a": nn.Linear(2, 3)})
    md["b"] = nn.GELU()
    assert list(md.keys()) == ["a", "b"] and len(list(md.parameters())) == 2
    seq = nn.Sequential(nn.Linear(2, 2), nn.SiLU(), nn.Sigmoid())
    assert isinstance(seq[1:], nn.Sequential) and len(seq[1:]) == 2


def test_multihead_attention_is_causal():
    ag.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    x = ag.randn(1, 5, 8)
    mask = nn.Transformer.generate_square_subsequent_mask(5)
    out1, _ = mha(x, x, x, attn_mask=mask, is_causal=True)
    x2 = ag.tensor(x.detach().numpy().copy())
    x2[0, -1] += 10.0   # changing the last position must not change earlier outputs
    out2, _ = mha(x2, x2, x2, attn_mask=mask, is_causal=True)
    np.testing.assert_allclose(out1.detach().numpy()[0, :-1], out2.detach().numpy()[0, :-1], rtol=1e-5,
                               atol=1e-6)


def test_embedding_padding_row_gets_no_gradient():
    emb = nn.Embedding(5, 3, padding_idx=0)
    assert not emb.weight.detach().numpy()[0].any()
    emb(ag.tensor([[0, 2, 0]])).sum().backward()
    g = emb.weight.grad.numpy()
    assert not g[0].any() and g[2].all()


def test_amax_splits_gradient_evenly_among_ties():
    x = ag.tensor([[1.0, 3.0, 3.0], [2.0, 0.0, 2.0]], requires_grad=True)
    x.amax(dim=1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0, 0.5, 0.5], [0.5, 0, 0.5]])
    y = ag.tensor([1.0, 3.0, 3.0], requires_grad=True)
    y.max(dim=0).values.backward()
    np.testing.assert_allclose(y.grad.numpy(), [0, 1, 0])   # max(dim) picks one index


def test_inplace_variants_bump_version_and_setitem_records_history():
    x = ag.randn(3, 4)
    v = x._version
    x.fill_(1.0)
    x.clamp_(max=0.5)
    x.relu_()
    x.copy_(ag.zeros(4))
    x.masked_fill_(x == 0, 2.0)
    x[0] = 5.0
    assert x._version == v + 6
    np.testing.assert_array_equal(x.numpy()[0], [5, 5, 5, 5])
    a = ag.randn(3, requires_grad=True)
    b = a * 2.0
    b[1] = 0.0
    assert b.grad_fn.name() == "IndexPutBackward0"
    b.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [2.0, 0.0, 2.0])


def test_inplace_on_a_saved_tensor_is_detected():
    a = ag.randn(3, requires_grad=True)
    b = a * 1.0
    c = b.sin()   # sin saves its input
    b.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        (c * b).sum().backward()
    d = a.exp()
    d.relu_()   # exp saved its output, which relu_ overwrote
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        d.sum().backward()


def test_float32_stays_float32_through_layers():
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.GELU(), nn.Flatten(),
                      nn.Linear(4 * 4 * 4, 2))
    out = m(ag.randn(2, 3, 6, 6))
    assert out.dtype == np.float32
    loss = F.cross_entropy(out, ag.tensor([0, 1]))
    loss.backward()
    assert all(p.grad.dtype == np.float32 for p in m.parameters())
