"""Issue 28's leftovers found while porting: ``torch.autograd.*`` after
``import gradtrace.autograd as torch``, ``Module.to``'s forms and dtypes, bfloat16 in
``save``/``load``. Expected values are PyTorch 2.x's (pinned; torch is not needed)."""
import io
import json

import numpy as np
import pytest

import gradtrace.autograd as torch
from gradtrace.autograd import nn


# --------------------------------------------------------------------------- torch.autograd

def test_torch_autograd_namespace_holds_the_engines_objects():
    assert torch.autograd.Function is torch.Function
    assert torch.autograd.grad is torch.grad and torch.autograd.backward is torch.backward
    assert torch.autograd.set_detect_anomaly is torch.set_detect_anomaly
    assert torch.autograd.functional.jacobian is torch.functional.jacobian
    assert torch.autograd.forward_ad is torch.forward_ad
    assert torch.autograd.graph.saved_tensors_hooks is torch.graph.saved_tensors_hooks
    assert torch.autograd.function.once_differentiable is torch.once_differentiable


def test_a_custom_function_through_torch_autograd():
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.tensor([1.0, -3.0], requires_grad=True)
    with torch.autograd.profiler.record_function("user range"):
        y = Square.apply(x).sum()
    (gx,) = torch.autograd.grad(y, x, create_graph=True)
    np.testing.assert_array_equal(gx.detach().numpy(), [2.0, -6.0])
    torch.autograd.backward(gx.sum(), inputs=[x])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])
    h = torch.autograd.functional.hessian(lambda v: (v ** 3).sum(), torch.tensor([1.0, 2.0]))
    np.testing.assert_array_equal(h.numpy(), [[6.0, 0.0], [0.0, 12.0]])


# --------------------------------------------------------------------------- Module.to

def _model():
    return nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))


@pytest.mark.parametrize("call", [lambda m: m.to(torch.bfloat16), lambda m: m.bfloat16(),
                                  lambda m: m.to("cpu", torch.bfloat16),
                                  lambda m: m.to(dtype=torch.bfloat16, non_blocking=True),
                                  lambda m: m.to(torch.zeros(1, dtype=torch.bfloat16))])
def test_module_to_bfloat16_and_back(call):
    m = _model()
    w = m[0].weight.detach().numpy().copy()
    param = m[0].weight
    assert call(m) is m
    assert m[0].weight is param and param.dtype == torch.bfloat16
    assert m[1].running_var.dtype == torch.bfloat16
    assert m[1].num_batches_tracked.dtype == torch.int64      # integer buffers keep theirs
    m.float()
    assert param.dtype == torch.float32
    np.testing.assert_allclose(param.detach().numpy(), w, rtol=2 ** -8)


def test_module_half_double_and_positional_device_dtype():
    m = _model()
    assert m.half()[0].bias.dtype == torch.float16
    assert m.to("cpu", torch.float64)[0].bias.dtype == torch.float64
    assert m.to("cpu", torch.float32, True)[0].bias.dtype == torch.float32   # non_blocking
    assert m.double()[1].running_mean.dtype == torch.float64


def test_module_to_an_integer_dtype_is_pytorchs_type_error():
    with pytest.raises(TypeError, match=r"nn.Module.to only accepts floating point or complex "
                                        r"dtypes, but got desired dtype=torch.int64"):
        _model().to(torch.int64)


# --------------------------------------------------------------------------- save/load bf16

def test_bfloat16_saves_as_safetensors_bf16_and_loads_back():
    t = torch.tensor([1.5, -2.25, 3.0e3]).to(torch.bfloat16)
    buf = io.BytesIO()
    torch.save({"w": t}, buf)
    raw = buf.getvalue()
    n = int.from_bytes(raw[:8], "little")
    entry = json.loads(raw[8:8 + n])["w"]
    assert entry["dtype"] == "BF16" and entry["shape"] == [3]
    # torch.tensor([1.5, -2.25, 3.0e3]).to(torch.bfloat16).view(torch.int16).tolist()
    bits = np.frombuffer(raw[8 + n + entry["data_offsets"][0]:8 + n + entry["data_offsets"][1]],
                         "<i2")
    assert bits.tolist() == [16320, -16368, 17724]
    buf.seek(0)
    back = torch.load(buf)["w"]
    assert back.dtype == torch.bfloat16
    assert back.float().numpy().tolist() == [1.5, -2.25, 3008.0]


def test_a_bfloat16_model_state_dict_round_trips():
    m = _model().bfloat16()
    buf = io.BytesIO()
    torch.save(m.state_dict(), buf)
    buf.seek(0)
    m2 = _model().bfloat16()
    m2.load_state_dict(torch.load(buf))
    np.testing.assert_array_equal(m2[0].weight.detach().float().numpy(),
                                  m[0].weight.detach().float().numpy())


# --------------------------------------------------------------------------- rrelu

def test_rrelu_eval_is_pytorchs_mean_slope_leaky_relu():
    x = torch.tensor([-2.0, -0.5, 0.0, 1.5], dtype=torch.float64, requires_grad=True)
    y = torch.nn.functional.rrelu(x)
    y.sum().backward()
    # torch.nn.functional.rrelu(x) and its gradient (PyTorch 2.13)
    np.testing.assert_allclose(y.detach().numpy(), [-0.4583333333333333, -0.11458333333333333,
                                                    0.0, 1.5], rtol=1e-15)
    np.testing.assert_allclose(x.grad.numpy(), [0.22916666666666666] * 3 + [1.0], rtol=1e-15)


def test_rrelu_module_draws_a_slope_per_entry_while_training():
    m = nn.RReLU(0.1, 0.3)
    assert repr(m) == "RReLU(lower=0.1, upper=0.3)"
    x = torch.tensor(-np.ones(1000), requires_grad=True)
    torch.manual_seed(0)
    y = m(x)
    y.sum().backward()
    slopes = x.grad.numpy()
    np.testing.assert_array_equal(-y.detach().numpy(), slopes)   # d(slope * x)/dx = slope
    assert 0.1 <= slopes.min() and slopes.max() <= 0.3 and len(np.unique(slopes)) > 900
    torch.manual_seed(0)
    np.testing.assert_array_equal(m(x).detach().numpy(), y.detach().numpy())   # seeded
    assert m.eval()(torch.tensor([-1.0])).item() == pytest.approx(-0.2)
    z = torch.tensor([-1.0, 2.0])
    assert torch.nn.functional.rrelu_(z) is z and z.tolist() == pytest.approx([-11 / 48, 2.0])


def test_rrelu_lower_above_upper_is_pytorchs_error():
    with pytest.raises(RuntimeError, match="Lower bound should be less than or equal to the upper"):
        torch.nn.functional.rrelu(torch.tensor([1.0]), 0.5, 0.1, training=True)


# --------------------------------------------------------------------------- attribute order

def test_a_reassigned_child_keeps_its_place_as_in_pytorch():
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.decoder = nn.Linear(2, 2)
            self.emb = nn.Embedding(3, 2)
            self.decoder = nn.Linear(2, 3)   # nn.Transformer subclasses do this
            self.scale = nn.Parameter(torch.ones(1))
            self.scale = nn.Parameter(torch.zeros(1))

    # torch: ['scale', 'decoder.weight', 'decoder.bias', 'emb.weight']
    assert [n for n, _ in Model().named_parameters()] == [
        "scale", "decoder.weight", "decoder.bias", "emb.weight"]
