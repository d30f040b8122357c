"""nn modules against PyTorch 2.13: every module's state-dict keys (in order) and buffer
names, loading a PyTorch-style state dict strictly, and MultiheadAttention and the
Transformer modules' outputs and gradients with the same weights (float64, pinned in
``data/torch_nn_reference.json``; ``data/record_torch_nn.py`` regenerates it)."""
import inspect
import json
import os
import warnings

import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd import nn

from . import torch_cases as cases
from .gradcheck import check_grad

with open(os.path.join(os.path.dirname(__file__), "data", "torch_nn_reference.json")) as _f:
    REFERENCE = json.load(_f)

KEYS = REFERENCE["keys"]


def _exported_module_classes():
    return {name for name in nn.__all__
            if inspect.isclass(getattr(nn, name)) and issubclass(getattr(nn, name), nn.Module)}


def test_every_exported_module_class_has_a_case():
    covered = ({name for name, _, _ in cases.MODULE_CASES} | set(cases.COMPOSITE_CASES)
               | cases.NOT_CASES)
    missing = sorted(_exported_module_classes() - covered)
    assert not missing, f"add these to torch_cases.MODULE_CASES and re-record: {missing}"


def _available(cls: str) -> bool:
    # MultiheadAttention's out_proj class is not in torch.nn, only in its module.
    return hasattr(nn, cls) or hasattr(nn.modules.linear, cls)


def _built_cases():
    for name, args, kwargs in cases.MODULE_CASES:
        yield cases.case_id(name, args, kwargs), (
            lambda name=name, args=args, kwargs=kwargs: cases.build_module(nn, name, args, kwargs)
        ), name
    for name, build in cases.COMPOSITE_CASES.items():
        yield name, (lambda build=build: build(ag)), name.split("(")[0]


@pytest.mark.parametrize("case_id,build,cls", list(_built_cases()),
                         ids=[c[0] for c in _built_cases()])
def test_state_dict_keys_and_buffers_are_pytorchs(case_id, build, cls):
    assert _available(cls), f"nn.{cls} has torch's keys pinned but is not in gradtrace"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = build()
    assert list(module.state_dict().keys()) == KEYS[case_id]["state_dict"]
    assert [name for name, _ in module.named_buffers()] == KEYS[case_id]["buffers"]


@pytest.mark.parametrize("case_id,build,cls", list(_built_cases()),
                         ids=[c[0] for c in _built_cases()])
def test_load_state_dict_of_pytorch_keys_is_strict(case_id, build, cls):
    assert _available(cls), f"nn.{cls} has torch's keys pinned but is not in gradtrace"
    src, dst = build(), build()
    rng = np.random.default_rng(0)
    # A PyTorch-style dict: exactly torch's keys, each a fresh array of the entry's shape.
    sd = {k: (rng.integers(0, 5, size=v.shape) if v.dtype.kind == "i" else
              rng.standard_normal(v.shape).astype(v.dtype)) for k, v in src.state_dict().items()}
    assert list(sd) == KEYS[case_id]["state_dict"]
    result = dst.load_state_dict({k: ag.tensor(v) for k, v in sd.items()}, strict=True)
    assert result.missing_keys == [] and result.unexpected_keys == []
    for k, v in dst.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), sd[k])
    if sd:
        with pytest.raises(RuntimeError, match="Missing key"):
            dst.load_state_dict(dict(list({k: ag.tensor(v) for k, v in sd.items()}.items())[1:]))


def test_state_dict_lists_a_shared_module_under_each_name():
    # PyTorch's state_dict walks every attribute path (weight tying keeps both keys).
    shared = nn.Linear(2, 2)
    seq = nn.Sequential(shared, nn.ReLU(), shared)
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert len(list(seq.parameters())) == 2


# --------------------------------------------------------------------------- numbers
@pytest.mark.parametrize("name", list(cases.NUMERIC_CASES))
def test_outputs_and_gradients_equal_pytorchs(name):
    want = REFERENCE["numeric"][name]
    got = cases.run_numeric_case(name, ag)
    assert len(got["outputs"]) == len(want["outputs"])
    for g, w in zip(got["outputs"], want["outputs"]):
        if w is None:
            assert g is None
        else:
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    for g, w in zip(got["input_grads"], want["input_grads"]):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    assert list(got["param_grads"]) == list(want["param_grads"])
    for k, g in got["param_grads"].items():
        np.testing.assert_allclose(g, want["param_grads"][k], rtol=1e-10, atol=1e-12, err_msg=k)


def test_multihead_attention_gradients_match_finite_differences():
    ag.manual_seed(0)
    m = nn.MultiheadAttention(4, 2, kdim=3, vdim=5, add_bias_kv=True, add_zero_attn=True,
                              dtype=ag.float64)
    rng = np.random.default_rng(1)
    q, k, v = (ag.tensor(rng.standard_normal(s), requires_grad=True)
               for s in ((3, 2, 4), (5, 2, 3), (5, 2, 5)))
    kpm = ag.tensor(np.array([[False] * 4 + [True], [False] * 5]))
    check_grad(lambda q, k, v: m(q, k, v, key_padding_mask=kpm)[0], [q, k, v], atol=1e-6)


def test_transformer_decoder_layer_gradients_match_finite_differences():
    ag.manual_seed(1)
    layer = nn.TransformerDecoderLayer(4, 2, 8, dropout=0.0, norm_first=True,
                                       dtype=ag.float64)
    rng = np.random.default_rng(2)
    tgt = ag.tensor(rng.standard_normal((3, 2, 4)), requires_grad=True)
    mem = ag.tensor(rng.standard_normal((5, 2, 4)), requires_grad=True)
    mask = nn.Transformer.generate_square_subsequent_mask(3, dtype=ag.float64)
    mpm = ag.tensor(np.array([[False] * 4 + [True], [False] * 5]))
    check_grad(lambda t, m: layer(t, m, tgt_mask=mask, memory_key_padding_mask=mpm,
                                  tgt_is_causal=True), [tgt, mem], atol=1e-6)


def test_multihead_attention_defaults_and_errors_are_pytorchs():
    m = nn.MultiheadAttention(4, 2)
    assert m.batch_first is False and m.in_proj_weight.shape == (12, 4)
    assert type(m.out_proj).__name__ == "NonDynamicallyQuantizableLinear"
    x = ag.randn(3, 2, 4)
    out, w = m(x, x, x)
    assert out.shape == (3, 2, 4) and w.shape == (2, 3, 3)
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        m(x, x, x, is_causal=True)
    with pytest.raises(RuntimeError, match=r"The shape of the 2D attn_mask is \(2, 2\), but "
                                           r"should be \(3, 3\)"):
        m(x, x, x, attn_mask=ag.zeros(2, 2))
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        nn.MultiheadAttention(5, 2)


def test_generate_square_subsequent_mask_is_pytorchs():
    mask = nn.Transformer.generate_square_subsequent_mask(3)
    np.testing.assert_array_equal(mask.numpy(), [[0, -np.inf, -np.inf], [0, 0, -np.inf],
                                                 [0, 0, 0]])
    assert mask.dtype == ag.float32


def test_transformer_checks_pytorchs_errors():
    m = nn.Transformer(d_model=4, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                       dim_feedforward=8)
    with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
        m(ag.randn(3, 2, 4), ag.randn(3, 1, 4))
    with pytest.raises(RuntimeError, match="the feature number of src and tgt must be equal "
                                           "to d_model"):
        m(ag.randn(3, 2, 5), ag.randn(3, 2, 5))
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerEncoderLayer(4, 2, activation="tanh")


def test_load_state_dict_assign_puts_the_given_tensors_in_place():
    # torch: assign=True makes each parameter a Parameter over the given tensor (keeping
    # requires_grad) and each buffer the given tensor itself.
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    sd = {k: ag.ones(*v.shape, dtype=v.dtype) for k, v in model.state_dict().items()}
    model.load_state_dict(sd, assign=True)
    assert isinstance(model[0].weight, nn.Parameter) and model[0].weight.requires_grad
    assert model[0].weight.data_ptr() == sd["0.weight"].data_ptr()
    assert model[1].running_mean is sd["1.running_mean"]
    with pytest.raises(RuntimeError, match="size mismatch for 0.bias"):
        model.load_state_dict({**sd, "0.bias": ag.ones(3)}, assign=True)
