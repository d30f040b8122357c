"""Cases run the same way on PyTorch and on gradtrace, whose values are pinned in
``data/torch_nn_reference.json`` (written by ``data/record_torch_nn.py`` with PyTorch 2.13).

Everything here takes the library as an argument (``lib`` is ``torch`` or
``gradtrace.autograd``): the code of a case is the PyTorch program, run unchanged on both.
Nothing here imports torch, so the tests run without it.
"""
from __future__ import annotations

import numpy as np

# --------------------------------------------------------------------------- state-dict keys
# Every nn module class gradtrace exports (and the ones PyTorch has that may come), each built
# with small arguments: (class name, args, kwargs). A class may appear more than once.
MODULE_CASES = [
    ("Identity", (), {}), ("Linear", (3, 2), {}), ("Linear", (3, 2), {"bias": False}),
    ("Conv1d", (2, 4, 3), {}), ("Conv2d", (2, 4, 3), {}), ("Conv2d", (2, 4, 3), {"bias": False}),
    ("BatchNorm1d", (3,), {}), ("BatchNorm2d", (3,), {}),
    ("BatchNorm2d", (3,), {"affine": False}), ("BatchNorm2d", (3,), {"track_running_stats": False}),
    ("LayerNorm", (4,), {}), ("LayerNorm", (4,), {"bias": False}),
    ("LayerNorm", (4,), {"elementwise_affine": False}),
    ("GroupNorm", (2, 4), {}), ("InstanceNorm1d", (3,), {}), ("InstanceNorm2d", (3,), {}),
    ("InstanceNorm2d", (3,), {"affine": True, "track_running_stats": True}),
    ("Embedding", (5, 3), {}), ("Dropout", (), {}),
    ("ReLU", (), {}), ("GELU", (), {}), ("SiLU", (), {}), ("Tanh", (), {}), ("Sigmoid", (), {}),
    ("LeakyReLU", (), {}), ("Softmax", (), {"dim": 1}), ("Flatten", (), {}),
    ("Unflatten", (1, (2, 2)), {}),
    ("MaxPool2d", (2,), {}), ("AvgPool2d", (2,), {}), ("AdaptiveAvgPool2d", (2,), {}),
    ("MaxPool1d", (2,), {}), ("AvgPool1d", (2,), {}), ("AdaptiveMaxPool2d", (2,), {}),
    ("AdaptiveAvgPool1d", (2,), {}), ("AdaptiveMaxPool1d", (2,), {}), ("Upsample", (), {"scale_factor": 2}),
    ("PixelShuffle", (2,), {}), ("PixelUnshuffle", (2,), {}), ("Unfold", (2,), {}),
    ("ZeroPad2d", (1,), {}), ("ReflectionPad2d", (1,), {}), ("ReplicationPad2d", (1,), {}),
    ("CosineSimilarity", (), {}), ("PairwiseDistance", (), {}),
    ("ELU", (), {}), ("SELU", (), {}), ("CELU", (), {}),
    ("RReLU", (), {}), ("ReLU6", (), {}), ("Hardtanh", (), {}),
    ("Threshold", (0.1, 0.0), {}), ("Hardshrink", (), {}), ("Softshrink", (), {}),
    ("Tanhshrink", (), {}), ("PReLU", (), {}), ("PReLU", (3,), {}), ("Hardsigmoid", (), {}),
    ("Hardswish", (), {}), ("Mish", (), {}), ("LogSigmoid", (), {}), ("Softsign", (), {}),
    ("Softmin", (), {"dim": 1}), ("GLU", (), {}), ("Softplus", (), {}),
    ("LogSoftmax", (), {"dim": 1}),
    ("MSELoss", (), {}), ("CrossEntropyLoss", (), {}), ("L1Loss", (), {}), ("NLLLoss", (), {}),
    ("BCELoss", (), {}), ("BCEWithLogitsLoss", (), {}), ("SmoothL1Loss", (), {}),
    ("HuberLoss", (), {}), ("KLDivLoss", (), {}), ("SoftMarginLoss", (), {}),
    ("RNN", (3, 4), {"num_layers": 2}), ("LSTM", (3, 4), {"bidirectional": True}),
    ("GRU", (3, 4), {"bias": False}),
    ("RNNCell", (3, 4), {}), ("LSTMCell", (3, 4), {}), ("GRUCell", (3, 4), {"bias": False}),
    ("MultiheadAttention", (4, 2), {}), ("MultiheadAttention", (4, 2), {"kdim": 3, "vdim": 5}),
    ("MultiheadAttention", (4, 2), {"add_bias_kv": True, "bias": False}),
    ("NonDynamicallyQuantizableLinear", (3, 2), {}),
    ("TransformerEncoderLayer", (4, 2, 8), {}), ("TransformerDecoderLayer", (4, 2, 8), {}),
    ("Transformer", (), {"d_model": 4, "nhead": 2, "num_encoder_layers": 1,
                         "num_decoder_layers": 2, "dim_feedforward": 8}),
]

# Classes built from other modules: (case name, builder(lib) -> module).
COMPOSITE_CASES = {
    "Sequential": lambda lib: lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.ReLU(),
                                                lib.nn.BatchNorm1d(3)),
    "ModuleList": lambda lib: lib.nn.ModuleList([lib.nn.Linear(2, 3), lib.nn.LayerNorm(3)]),
    "ModuleDict": lambda lib: lib.nn.ModuleDict({"b": lib.nn.Linear(2, 3),
                                                 "a": lib.nn.Conv1d(1, 2, 3)}),
    "TransformerEncoder": lambda lib: lib.nn.TransformerEncoder(
        lib.nn.TransformerEncoderLayer(4, 2, 8), 2, norm=lib.nn.LayerNorm(4)),
    "TransformerDecoder": lambda lib: lib.nn.TransformerDecoder(
        lib.nn.TransformerDecoderLayer(4, 2, 8), 2, norm=lib.nn.LayerNorm(4)),
    # Loss modules holding a class weight register it as a buffer ("weight", "pos_weight").
    "CrossEntropyLoss(weight)": lambda lib: lib.nn.CrossEntropyLoss(weight=lib.ones(3)),
    "NLLLoss(weight)": lambda lib: lib.nn.NLLLoss(weight=lib.ones(3)),
    "BCELoss(weight)": lambda lib: lib.nn.BCELoss(weight=lib.ones(3)),
    "BCEWithLogitsLoss(pos_weight)": lambda lib: lib.nn.BCEWithLogitsLoss(
        weight=lib.ones(3), pos_weight=lib.ones(3)),
}

# Not modules one builds (the base class, gradtrace's own GPT block).
NOT_CASES = {"Module", "TransformerBlock"}


def case_id(name, args, kwargs) -> str:
    extra = ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
    return f"{name}({extra})"


def build_module(nn, name, args, kwargs):
    # torch.nn does not export the class of MultiheadAttention.out_proj; its module does.
    cls = getattr(nn, name, None) or getattr(nn.modules.linear, name)
    return cls(*args, **kwargs)


# --------------------------------------------------------------------------- numeric cases
def fill_parameters(module, lib, seed: int) -> None:
    """Give every parameter, in state-dict order, values from one seeded generator (the same
    on both libraries: the keys are asserted equal first)."""
    rng = np.random.default_rng(seed)
    with lib.no_grad():
        for _, p in module.named_parameters():
            p.copy_(lib.tensor(0.5 * rng.standard_normal(tuple(p.shape))))


def _t(lib, rng, *shape, requires_grad=True):
    return lib.tensor(rng.standard_normal(shape), requires_grad=requires_grad)


def _mha(**mod_kw):
    """MultiheadAttention(4, 2) on (L=3, N=2) queries and S=5 keys, with ``mod_kw``."""
    def run(lib, rng):
        m = lib.nn.MultiheadAttention(4, 2, dtype=lib.float64, **mod_kw)
        fill_parameters(m, lib, 1)
        bf = mod_kw.get("batch_first", False)

        def inp(length, dim):
            return _t(lib, rng, *((2, length, dim) if bf else (length, 2, dim)))

        q, k, v = inp(3, 4), inp(5, mod_kw.get("kdim", 4)), inp(5, mod_kw.get("vdim", 4))
        kpm = lib.tensor(np.array([[False, False, False, False, True], [False] * 5]))
        attn_mask = lib.tensor(rng.standard_normal((3, 5)))
        bool_mask = lib.tensor(np.triu(np.ones((3, 5), dtype=bool), 3))
        out1, w1 = m(q, k, v, key_padding_mask=kpm, attn_mask=bool_mask)
        out2, w2 = m(q, k, v, attn_mask=attn_mask, average_attn_weights=False)
        out3, _ = m(q, k, v, need_weights=False, attn_mask=attn_mask)
        return [out1, w1, out2, w2, out3], [q, k, v], m
    return run


def _mha_unbatched(lib, rng):
    m = lib.nn.MultiheadAttention(4, 2, dtype=lib.float64)
    fill_parameters(m, lib, 2)
    x = _t(lib, rng, 3, 4)
    out, w = m(x, x, x)
    return [out, w], [x], m


def _encoder_layer(norm_first, activation):
    def run(lib, rng):
        m = lib.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, activation=activation,
                                           norm_first=norm_first, dtype=lib.float64)
        fill_parameters(m, lib, 3)
        x = _t(lib, rng, 3, 2, 4)
        mask = lib.nn.Transformer.generate_square_subsequent_mask(3, dtype=lib.float64)
        kpm = lib.tensor(np.array([[False, False, True], [False, False, False]]))
        return [m(x, src_mask=mask, src_key_padding_mask=kpm)], [x], m
    return run


def _decoder(norm_first, batch_first):
    def run(lib, rng):
        nn = lib.nn
        # activation as a string: PyTorch's deep copies of a layer built with an activation
        # *module* fall back to relu (its __setstate__ sets one), gradtrace's keep the module.
        layer = nn.TransformerDecoderLayer(4, 2, 8, dropout=0.0, norm_first=norm_first,
                                           batch_first=batch_first, activation="gelu",
                                           dtype=lib.float64)
        m = nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(4, dtype=lib.float64))
        fill_parameters(m, lib, 4)
        shape = (lambda n, length: (n, length, 4)) if batch_first else \
            (lambda n, length: (length, n, 4))
        tgt, mem = _t(lib, rng, *shape(2, 3)), _t(lib, rng, *shape(2, 5))
        mask = nn.Transformer.generate_square_subsequent_mask(3, dtype=lib.float64)
        mpm = lib.tensor(np.array([[False] * 4 + [True], [False] * 5]))
        out = m(tgt, mem, tgt_mask=mask, memory_key_padding_mask=mpm, tgt_is_causal=True)
        return [out], [tgt, mem], m
    return run


def _transformer(lib, rng):
    nn = lib.nn
    m = nn.Transformer(d_model=4, nhead=2, num_encoder_layers=2, num_decoder_layers=1,
                       dim_feedforward=8, dropout=0.0, batch_first=True, dtype=lib.float64)
    fill_parameters(m, lib, 5)
    src, tgt = _t(lib, rng, 2, 5, 4), _t(lib, rng, 2, 3, 4)
    tgt_mask = m.generate_square_subsequent_mask(3, dtype=lib.float64)
    out = m(src, tgt, tgt_mask=tgt_mask, tgt_is_causal=True)
    return [out], [src, tgt], m


NUMERIC_CASES = {
    "mha_seq_first": _mha(),
    "mha_batch_first": _mha(batch_first=True),
    "mha_kdim_vdim": _mha(kdim=3, vdim=5),
    "mha_bias_kv_zero_attn": _mha(add_bias_kv=True, add_zero_attn=True),
    "mha_unbatched": _mha_unbatched,
    "encoder_layer_post_norm": _encoder_layer(False, "relu"),
    "encoder_layer_pre_norm_gelu": _encoder_layer(True, "gelu"),
    "decoder_post_norm": _decoder(False, False),
    "decoder_pre_norm_batch_first": _decoder(True, True),
    "transformer": _transformer,
}


def run_numeric_case(name, lib):
    """Outputs, input gradients and parameter gradients (by name) of a case, as float64 NumPy
    arrays, for ``loss = sum_i (outputs[i] * c_i).sum()`` with fixed coefficients c_i."""
    rng = np.random.default_rng(100)
    outputs, inputs, module = NUMERIC_CASES[name](lib, rng)
    crng = np.random.default_rng(200)
    loss = 0
    for out in outputs:
        if out is not None:
            loss = loss + (out * lib.tensor(crng.standard_normal(tuple(out.shape)))).sum()
    loss.backward()
    as_np = lambda t: np.asarray(t.detach().numpy(), dtype=np.float64)  # noqa: E731
    return {
        "outputs": [as_np(o) if o is not None else None for o in outputs],
        "input_grads": [as_np(x.grad) for x in inputs],
        "param_grads": {k: as_np(p.grad) for k, p in module.named_parameters()},
    }
