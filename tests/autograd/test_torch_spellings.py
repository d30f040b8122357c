"""PyTorch spellings a ported script uses: dtype objects, Tensor.to's overloads, new_*."""
import numpy as np

from gradtrace import autograd as ag


def test_dtype_objects_compare_like_torch_and_like_the_old_strings():
    x = ag.randn(2, 3)
    assert x.dtype == ag.float32 and x.dtype == "float32"
    assert ag.float32 == np.float32 and ag.long == ag.int64 == "int64"
    assert ag.float is ag.float32 and ag.double is ag.float64 and ag.half is ag.float16
    assert ag.int is ag.int32 and ag.bool == np.bool_ and ag.bool_ is ag.bool
    assert ag.zeros(2, dtype=ag.bool).dtype == ag.bool
    assert ag.tensor([1, 2]).dtype == ag.long
    assert {ag.float32: "f"}[x.dtype] == "f"
    assert ag.is_tensor(x) and not ag.is_tensor(x.numpy())
    assert ag.is_floating_point(x) and not ag.tensor([1]).is_floating_point()


def test_to_overloads():
    x = ag.randn(2, 3, requires_grad=True)
    assert x.to(ag.float64).dtype == ag.float64
    assert x.to("cpu", ag.float64).dtype == ag.float64
    assert x.to("float16").dtype == ag.float16
    assert x.to(ag.zeros(1, dtype=ag.long)).dtype == ag.long
    assert x.to(device="cpu", dtype=ag.double, non_blocking=True).dtype == ag.double
    assert x.to("cpu") is x and x.to(ag.device("cpu")) is x
    y = x.to(ag.float64)
    y.sum().backward()                       # differentiable cast
    assert x.grad.dtype == ag.float32 and np.all(x.grad.numpy() == 1)


def test_new_factories_take_dtype_and_device_from_self():
    x = ag.randn(2, dtype=ag.float64)
    z = x.new_zeros(2, 3)
    assert z.shape == (2, 3) and z.dtype == ag.float64 and z.device == x.device
    assert x.new_ones((3,)).tolist() == [1.0, 1.0, 1.0]
    assert x.new_full((2,), 7).tolist() == [7.0, 7.0] and x.new_full((2,), 7).dtype == ag.float64
    assert x.new_empty(4, dtype=ag.int64).dtype == ag.int64
    t = x.new_tensor([1, 2], requires_grad=True)
    assert t.dtype == ag.float64 and t.requires_grad and t.is_leaf


def test_nbytes_and_element_size_as_torch():
    # torch: torch.zeros(3, 4).nbytes == 48, .element_size() == 4; float64: 8 per element.
    x = ag.zeros(3, 4)
    assert x.nbytes == 48 and x.element_size() == 4
    assert ag.zeros(5, dtype=ag.float64).nbytes == 40
    p = ag.nn.Parameter(ag.zeros(2, 2))
    assert p.data.nbytes == 16   # p.data is a tensor sharing p's storage
