"""bfloat16 (through ml_dtypes) against PyTorch 2.13's CPU bfloat16: creation, casts,
arithmetic with PyTorch's promotion (bfloat16 + float16 is float32, + a float32 0-d tensor or
a Python float stays bfloat16), matmul/einsum/reductions computed in float32 and rounded,
activations, and gradients. Values pinned from torch; compared to bfloat16's rounding (a
result may be one bfloat16 step from PyTorch's where its kernel rounds intermediates, as its
log_softmax does)."""
import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd import dtypes


def bf16_cases(torch):
    """name -> tensor, the same program in torch and gradtrace."""
    F = torch.nn.functional
    bf = torch.bfloat16
    x = torch.tensor([[1.5, 2.3, -0.7], [0.33, -1.9, 4.1]], dtype=bf, requires_grad=True)
    w = torch.tensor([[0.1, -0.2], [0.3, 0.25], [-1.1, 0.7]], dtype=bf, requires_grad=True)
    out = {
        "x": x, "mul_scalar": x * 2.5, "div_scalar": x / 3.3,
        "add_int": x + torch.tensor([1, 2, 3]),
        "add_float16": x + torch.tensor([1.0, 2.0, 3.0], dtype=torch.float16),
        "add_float32": x + torch.ones(3), "add_float32_0d": x + torch.tensor(1.0),
        "matmul": x @ w, "mm": torch.mm(x, w), "einsum": torch.einsum("ij,jk->ik", x, w),
        "linear": F.linear(x, w.t()), "sum": x.sum(), "mean": x.mean(1), "var": x.var(),
        "norm": x.norm(), "exp": x.exp(), "tanh": torch.tanh(x), "sigmoid": torch.sigmoid(x),
        "gelu": F.gelu(x), "relu": torch.relu(x), "softmax": torch.softmax(x, 1),
        "log_softmax": torch.log_softmax(x, 1), "layer_norm": F.layer_norm(x, (3,)),
        "cumsum": x.cumsum(1), "pow": x ** 2, "sqrt_abs": x.abs().sqrt(), "max": x.max(),
        "where": torch.where(x > 0, x, torch.zeros_like(x)), "float": x.float(),
        "double": x.to(torch.float64), "from_float32": torch.tensor([0.1, 1 / 3, 1e-3]).bfloat16(),
        "arange": torch.arange(0, 1, 0.3, dtype=bf), "full": torch.full((2,), 1.7, dtype=bf),
        "linspace": torch.linspace(0, 1, 4, dtype=bf),
        "add_alpha": torch.zeros(3, dtype=bf).add_(torch.tensor([1.0, 2.0, 3.0], dtype=bf),
                                                   alpha=0.3),
    }
    loss = (F.gelu(x @ w) * 1.7).sum() + (x.exp() * x).mean() + torch.softmax(x, 1)[:, 0].sum()
    loss.backward()
    out.update(loss=loss, x_grad=x.grad, w_grad=w.grad)
    return out


# name: (PyTorch's dtype name, its values as float)
TORCH = {'add_alpha': ('bfloat16', [0.30078125, 0.6015625, 0.90234375]),
 'add_float16': ('float32', [[2.5, 4.296875, 2.30078125], [1.330078125, 0.1015625, 7.09375]]),
 'add_float32': ('float32', [[2.5, 3.296875, 0.30078125], [1.330078125, -0.8984375, 5.09375]]),
 'add_float32_0d': ('bfloat16', [[2.5, 3.296875, 0.30078125], [1.328125, -0.8984375, 5.09375]]),
 'add_int': ('bfloat16', [[2.5, 4.3125, 2.296875], [1.328125, 0.1015625, 7.09375]]),
 'arange': ('bfloat16', [0.0, 0.30078125, 0.6015625, 0.8984375]),
 'cumsum': ('bfloat16', [[1.5, 3.796875, 3.09375], [0.330078125, -1.5703125, 2.53125]]),
 'div_scalar': ('bfloat16',
                [[0.455078125, 0.6953125, -0.2119140625], [0.10009765625, -0.57421875, 1.2421875]]),
 'double': ('float64', [[1.5, 2.296875, -0.69921875], [0.330078125, -1.8984375, 4.09375]]),
 'einsum': ('bfloat16', [[1.609375, -0.21484375], [-5.0625, 2.328125]]),
 'exp': ('bfloat16', [[4.46875, 9.9375, 0.49609375], [1.390625, 0.1494140625, 60.0]]),
 'float': ('float32', [[1.5, 2.296875, -0.69921875], [0.330078125, -1.8984375, 4.09375]]),
 'from_float32': ('bfloat16', [0.10009765625, 0.333984375, 0.00099945068359375]),
 'full': ('bfloat16', [1.703125, 1.703125]),
 'gelu': ('bfloat16', [[1.3984375, 2.265625, -0.1689453125], [0.2080078125, -0.0546875, 4.09375]]),
 'layer_norm': ('bfloat16',
                [[0.369140625, 0.99609375, -1.3671875], [-0.20703125, -1.109375, 1.3125]]),
 'linear': ('bfloat16', [[1.609375, -0.21484375], [-5.0625, 2.328125]]),
 'linspace': ('bfloat16', [0.0, 0.333984375, 0.6640625, 1.0]),
 'log_softmax': ('bfloat16', [[-1.203125, -0.40625, -3.40625], [-3.78125, -6.0, -0.023193359375]]),
 'loss': ('bfloat16', 52.75),
 'matmul': ('bfloat16', [[1.609375, -0.21484375], [-5.0625, 2.328125]]),
 'max': ('bfloat16', 4.09375),
 'mean': ('bfloat16', [1.03125, 0.84375]),
 'mm': ('bfloat16', [[1.609375, -0.21484375], [-5.0625, 2.328125]]),
 'mul_scalar': ('bfloat16', [[3.75, 5.75, -1.75], [0.82421875, -4.75, 10.25]]),
 'norm': ('bfloat16', 5.34375),
 'pow': ('bfloat16', [[2.25, 5.28125, 0.48828125], [0.10888671875, 3.609375, 16.75]]),
 'relu': ('bfloat16', [[1.5, 2.296875, 0.0], [0.330078125, 0.0, 4.09375]]),
 'sigmoid': ('bfloat16',
             [[0.81640625, 0.91015625, 0.33203125], [0.58203125, 0.1298828125, 0.984375]]),
 'softmax': ('bfloat16',
             [[0.30078125, 0.66796875, 0.033203125], [0.0225830078125, 0.00244140625, 0.9765625]]),
 'sqrt_abs': ('bfloat16', [[1.2265625, 1.515625, 0.8359375], [0.57421875, 1.375, 2.015625]]),
 'sum': ('bfloat16', 5.625),
 'tanh': ('bfloat16', [[0.90625, 0.98046875, -0.60546875], [0.318359375, -0.95703125, 1.0]]),
 'var': ('bfloat16', 4.65625),
 'w_grad': ('bfloat16', [[2.875, 1.4375], [4.40625, -2.109375], [-1.3359375, 6.9375]]),
 'where': ('bfloat16', [[1.5, 2.296875, 0.0], [0.330078125, 0.0, 4.09375]]),
 'x': ('bfloat16', [[1.5, 2.296875, -0.69921875], [0.330078125, -1.8984375, 4.09375]]),
 'x_grad': ('bfloat16', [[2.15625, 5.96875, -1.703125], [-0.02734375, 0.42578125, 52.25]])}


@pytest.fixture(scope="module")
def ours():
    return bf16_cases(ag)


@pytest.mark.parametrize("name", sorted(TORCH))
def test_bfloat16_matches_torch(ours, name):
    dtype, values = TORCH[name]
    t = ours[name]
    assert t.dtype.name == dtype
    got = t.detach().float().numpy() if t.dtype == ag.bfloat16 else t.detach().numpy()
    # One bfloat16 step (2**-8 relative) and a small absolute slack near 0.
    np.testing.assert_allclose(got, values, rtol=2.0 ** -7, atol=2.0 ** -8)


def test_bfloat16_is_a_dtype_of_its_own():
    t = ag.tensor([1.0, 2.0], dtype=ag.bfloat16)
    assert t.dtype == ag.bfloat16 and t.dtype.itemsize == 2 and t.is_floating_point()
    assert t.type() == "torch.BFloat16Tensor" and t.element_size() == 2
    assert ag.randn(3, dtype=ag.bfloat16).dtype == ag.bfloat16
    assert ag.rand(1000, dtype=ag.bfloat16).max().item() < 1.0
    assert t.requires_grad_().requires_grad
    assert "dtype=bfloat16" in repr(t)


def test_finfo_is_torchs():
    f = ag.finfo(ag.bfloat16)
    assert (f.bits, f.eps, f.max, f.min, f.tiny, f.smallest_normal, f.resolution, f.dtype) == (
        16, 0.0078125, 3.3895313892515355e+38, -3.3895313892515355e+38,
        1.1754943508222875e-38, 1.1754943508222875e-38, 0.01, "bfloat16")
    assert ag.finfo().dtype == "float32" and ag.finfo(ag.float16).eps == 0.0009765625
    assert ag.iinfo(ag.int8).min == -128
    with pytest.raises(TypeError):
        ag.finfo(ag.int64)


def test_promotion_table_is_torchs():
    from gradtrace.autograd.promotion import promote_types
    bf = ag.bfloat16
    for other, want in ((ag.float16, ag.float32), (ag.float32, ag.float32),
                        (ag.float64, ag.float64), (ag.complex64, ag.complex64),
                        (ag.int64, bf), (ag.bool, bf), (ag.uint8, bf), (bf, bf)):
        assert promote_types(bf, other) == want and promote_types(other, bf) == want


def test_gradient_through_a_cast_comes_back_in_each_dtype():
    x = ag.tensor([0.5, -1.25], requires_grad=True)        # float32 leaf
    y = (x.bfloat16() * 3.0).float().sum()
    y.backward()
    assert x.grad.dtype == ag.float32
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_is_floating_knows_bfloat16():
    assert dtypes.is_floating(ag.bfloat16) and not dtypes.is_floating(ag.int64)


@pytest.mark.cuda
def test_cuda_of_a_bfloat16_tensor_names_the_problem():
    t = ag.tensor([1.0, 2.0], dtype=ag.bfloat16)
    for move in (lambda: t.cuda(), lambda: t.to("cuda"), lambda: t.to("cuda", ag.bfloat16),
                 lambda: t.type("torch.cuda.BFloat16Tensor"),
                 lambda: ag.ones(2).to("cuda", dtype=ag.bfloat16)):
        with pytest.raises(RuntimeError, match="bfloat16 is not supported on CUDA devices "
                                               "here: CuPy has no bfloat16 dtype"):
            move()
    # float16 on the GPU is the way: the error says so, and it works.
    assert t.to("cuda", dtype=ag.float16).dtype == ag.float16


def test_multi_output_ops_keep_bfloat16_differentiable():
    x = ag.tensor([[1.5, -2.0], [0.25, 3.0]], dtype=ag.bfloat16, requires_grad=True)
    values, indices = x.max(1)
    assert values.dtype == ag.bfloat16 and values.requires_grad and not indices.requires_grad
    values.sum().backward()
    np.testing.assert_array_equal(x.grad.float().numpy(), [[1.0, 0.0], [0.0, 1.0]])
    assert ag.nanmean(x).item() == 0.6875   # torch: 0.6875


@pytest.mark.cuda
def test_bfloat16_factories_on_cuda_name_the_problem():
    for make in (lambda: ag.tensor([1.0], dtype=ag.bfloat16, device="cuda"),
                 lambda: ag.as_tensor([1.0], dtype=ag.bfloat16, device="cuda"),
                 lambda: ag.zeros(2, dtype=ag.bfloat16, device="cuda"),
                 lambda: ag.randn(2, dtype=ag.bfloat16, device="cuda")):
        with pytest.raises(RuntimeError, match="CuPy has no bfloat16 dtype"):
            make()


def test_only_bfloat16_nodes_pay_for_the_float32_backward():
    a = ag.tensor([1.5, 2.0], requires_grad=True)
    assert type((a * a).grad_fn) is ag.OPS["mul"].node_cls        # float32: the op's own class
    b = a.bfloat16()
    y = b * b
    assert y.grad_fn.name() == "MulBackward0" and isinstance(y.grad_fn, ag.OPS["mul"].node_cls)
    assert type(y.grad_fn) is not ag.OPS["mul"].node_cls          # its bfloat16 subclass
    y.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [3.0, 4.0])
