"""Tensor construction, properties, interop and modes."""
import numpy as np
import pytest

import gradtrace.autograd as ag


def test_factories_and_default_dtypes():
    assert ag.tensor([1.0, 2.0]).dtype == np.float32
    assert ag.tensor([1, 2]).dtype == np.int64
    assert ag.tensor(np.arange(3.0)).dtype == np.float64
    assert ag.zeros(2, 3).shape == (2, 3) and ag.ones((2,)).numpy().tolist() == [1.0, 1.0]
    assert ag.full((2,), 7).dtype == np.int64
    assert ag.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert ag.eye(3).numpy().trace() == 3
    ag.manual_seed(0)
    a = ag.randn(3)
    ag.manual_seed(0)
    np.testing.assert_array_equal(a.numpy(), ag.randn(3).numpy())
    assert ag.zeros_like(a).shape == (3,) and ag.rand_like(a).dtype == np.float32
    assert ag.randint(0, 5, (10,)).dtype == np.int64


def test_requires_grad_only_for_float():
    with pytest.raises(RuntimeError, match="floating point"):
        ag.tensor([1, 2], requires_grad=True)


def test_leaf_and_detach_and_version():
    x = ag.tensor([1.0], requires_grad=True)
    y = x * 2
    assert x.is_leaf and not y.is_leaf
    d = y.detach()
    assert d.is_leaf and not d.requires_grad and d._version == y._version
    with pytest.raises(RuntimeError, match="leaf variables"):
        y.requires_grad_(False)


def test_numpy_item_array_and_dlpack_interop():
    x = ag.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert np.asarray(x).sum() == 10.0
    assert x[1, 0].item() == 3.0
    y = np.from_dlpack(x)
    assert y.shape == (2, 2)
    z = ag.from_dlpack(np.arange(3.0))
    assert z.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(RuntimeError, match="requires grad"):
        ag.tensor([1.0], requires_grad=True).numpy()
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        x.item()


def test_repr_is_readable():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    assert repr(x) == "tensor([1., 2.], requires_grad=True)"
    assert "grad_fn=<MulBackward0>" in repr(x * 2)
    assert "dtype=float64" in repr(ag.tensor(np.ones(1)))


def test_to_cpu_is_identity_and_dtype_cast_is_differentiable():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    assert x.to("cpu") is x and x.cpu() is x
    y = x.to(dtype="float64")
    assert y.dtype == np.float64 and y.grad_fn.name() == "ToCopyBackward0"
    y.sum().backward()
    assert x.grad.dtype == np.float32


def test_no_grad_enable_grad_set_grad_enabled_inference_mode():
    x = ag.tensor([1.0], requires_grad=True)
    with ag.no_grad():
        assert not (x * 2).requires_grad
        with ag.enable_grad():
            assert (x * 2).requires_grad
    with ag.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert ag.is_grad_enabled()

    @ag.no_grad()
    def f():
        return x * 2

    assert not f().requires_grad

    @ag.set_grad_enabled(False)
    def g():
        return x * 2

    assert ag.is_grad_enabled()    # decorating did not switch the mode
    assert not g().requires_grad
    with ag.inference_mode():
        assert ag.is_inference_mode_enabled()
        z = x * 2
    assert not z.requires_grad
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved"):
        x * z


def test_comparisons_and_indexing():
    x = ag.tensor([1.0, 5.0, 3.0])
    assert (x > 2).tolist() == [False, True, True]
    assert x[x > 2].tolist() == [5.0, 3.0]
    assert x[ag.tensor([0, 0])].tolist() == [1.0, 1.0]
    assert len(x) == 3 and [t.item() for t in x] == [1.0, 5.0, 3.0]
    assert hash(x) == id(x) or isinstance(hash(x), int)


@pytest.mark.cuda
def test_cuda_round_trip_and_grad():
    x = ag.tensor([1.0, 2.0], device="cuda", requires_grad=True)
    y = (x * x).sum()
    y.backward()
    assert x.grad.device == "cuda:0"
    np.testing.assert_allclose(x.grad.cpu().numpy(), [2.0, 4.0])
    z = x.detach().cpu()
    assert z.device == "cpu" and z.tolist() == [1.0, 2.0]
    w = ag.tensor([1.0, 2.0], requires_grad=True)
    w.cuda().sum().backward()
    assert w.grad.device == "cpu"


def test_tensor_copies_arrays_and_tensors_but_as_tensor_shares():
    a = np.ones(3)
    t = ag.tensor(a)
    t.data[0] = 5.0
    assert a[0] == 1.0
    u = ag.tensor(t)
    u.data[1] = 7.0
    assert t.data[1] == 1.0
    s = ag.as_tensor(a)
    s.data[2] = 9.0
    assert a[2] == 9.0


@pytest.mark.cuda
def test_two_cuda_memory_hooks_can_overlap():
    from gradtrace.autograd import backend

    seen = {"a": 0, "b": 0}
    remove_a = backend.install_cuda_memory_hook(lambda d, p, n: seen.__setitem__("a", seen["a"] + 1),
                                                lambda d, p, n: None)
    remove_b = backend.install_cuda_memory_hook(lambda d, p, n: seen.__setitem__("b", seen["b"] + 1),
                                                lambda d, p, n: None)
    try:
        ag.zeros(1024, device="cuda")
    finally:
        remove_b()
        remove_a()
    assert seen["a"] >= 1 and seen["b"] >= 1
