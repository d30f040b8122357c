"""torch.backends, torch.accelerator, set_num_threads/get_num_threads and the legacy tensor
types (torch.LongTensor...), with PyTorch 2.13's defaults and answers on a machine without a
GPU (noted beside each)."""
import numpy as np
import pytest

import gradtrace.autograd as torch
from gradtrace.autograd import threads


def test_backends_flags_have_pytorchs_defaults_and_are_stored(monkeypatch):
    # torch: matmul.allow_tf32 False, cudnn.allow_tf32 True, benchmark False,
    # deterministic False, enabled True
    assert torch.backends.cuda.matmul.allow_tf32 is False
    assert torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction is True
    assert torch.backends.cudnn.allow_tf32 is True
    assert torch.backends.cudnn.benchmark is False
    assert torch.backends.cudnn.deterministic is False
    assert torch.backends.cudnn.enabled is True
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", True)
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", True)
    import gradtrace.autograd.backends.cudnn as cudnn   # `import torch.backends.cudnn as cudnn`

    assert cudnn.benchmark is True and torch.backends.cuda.matmul.allow_tf32 is True
    assert torch.backends.cudnn.is_available() is False and torch.backends.cudnn.version() is None
    assert torch.backends.mps.is_available() is False and torch.backends.mps.is_built() is False
    assert torch.backends.cuda.flash_sdp_enabled() is True
    torch.backends.cuda.enable_flash_sdp(False)
    try:
        assert torch.backends.cuda.flash_sdp_enabled() is False
    finally:
        torch.backends.cuda.enable_flash_sdp(True)


def test_accelerator_answers_as_pytorch():
    if torch.cuda.is_available():
        assert torch.accelerator.is_available()
        assert torch.accelerator.current_accelerator().type == "cuda"
        assert torch.accelerator.device_count() == torch.cuda.device_count()
        return
    # torch (CPU build): None, False, 0, and a RuntimeError for the current index
    assert torch.accelerator.current_accelerator() is None
    assert torch.accelerator.is_available() is False
    assert torch.accelerator.device_count() == 0
    with pytest.raises(RuntimeError, match="Cannot access accelerator device when none is "
                                           "available"):
        torch.accelerator.current_device_index()
    device = torch.accelerator.current_accelerator() or "cpu"    # the idiom programs use
    assert torch.zeros(1, device=device).device.type == "cpu"


def test_num_threads_are_set_and_read_back():
    saved = dict(threads._state)
    try:
        torch.set_num_threads(3)
        assert torch.get_num_threads() == 3
        torch.set_num_interop_threads(2)
        assert torch.get_num_interop_threads() == 2
        with pytest.raises(RuntimeError, match="set_num_threads expects a positive integer"):
            torch.set_num_threads(0)
    finally:
        if threads._state["limiter"] is not None:
            threads._state["limiter"].restore_original_limits()
        threads._state.update(saved)
    assert torch.get_num_threads() >= 1


@pytest.mark.parametrize("name,dtype", [("FloatTensor", np.float32), ("DoubleTensor", np.float64),
                                        ("LongTensor", np.int64), ("IntTensor", np.int32),
                                        ("BoolTensor", np.bool_)])
def test_legacy_tensor_types_construct_and_check_as_pytorch(name, dtype):
    cls = getattr(torch, name)
    t = cls([1, 0])
    assert t.dtype == dtype and t.tolist() == np.array([1, 0], dtype=dtype).tolist()
    assert cls(2, 3).shape == (2, 3) and cls(2, 3).dtype == dtype      # uninitialized
    assert cls().shape == (0,)
    assert isinstance(t, cls) and isinstance(torch.zeros(2, dtype=dtype), cls)
    assert isinstance(t, torch.Tensor)
    other = np.float32 if dtype != np.float32 else np.int64
    assert not isinstance(torch.zeros(2, dtype=other), cls)
    assert cls(t) is t
    with pytest.raises(TypeError, match="expected"):
        cls(torch.zeros(2, dtype=other))


def test_long_tensor_truncates_floats_as_pytorch():
    assert torch.LongTensor([1.5, -2.7]).tolist() == [1, -2]     # torch: tensor([ 1, -2])


def test_tensor_type_names_and_converts_as_pytorch():
    t = torch.zeros(2)
    assert t.type() == "torch.FloatTensor" and torch.zeros(2, dtype=torch.long).type() == \
        "torch.LongTensor"
    assert t.type(torch.FloatTensor) is t                        # already that type
    assert t.type(torch.LongTensor).dtype == torch.int64
    assert t.type("torch.DoubleTensor").dtype == torch.float64
    assert t.type(torch.float16).dtype == torch.float16
    with pytest.raises(ValueError, match="invalid type: 'torch.Nope'"):
        t.type("torch.Nope")


def test_cuda_legacy_types_are_the_gpu_ones():
    assert torch.cuda.FloatTensor.dtype == torch.float32
    assert not isinstance(torch.zeros(2), torch.cuda.FloatTensor)
    if torch.cuda.is_available():
        t = torch.cuda.LongTensor([1, 2])
        assert t.device.type == "cuda" and isinstance(t, torch.cuda.LongTensor)
        assert not isinstance(t, torch.LongTensor) and t.type() == "torch.cuda.LongTensor"
        assert torch.zeros(2).type(torch.cuda.FloatTensor).device.type == "cuda"
    else:
        with pytest.raises(torch.DeviceError, match="needs a usable CUDA GPU"):
            torch.cuda.FloatTensor([1.0])


def test_sdpa_kernel_switches_the_backends_inside_its_block():
    from gradtrace.autograd.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):                 # torch: flash off, math on inside
        assert torch.backends.cuda.math_sdp_enabled()
        assert not torch.backends.cuda.flash_sdp_enabled()
        q = torch.randn(1, 2, 3, 4)
        out = torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
        assert out.shape == (1, 2, 3, 4)
    assert torch.backends.cuda.flash_sdp_enabled()
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
        assert not torch.backends.cuda.math_sdp_enabled()
    with pytest.raises(AssertionError, match="Backend must be an instance of SDPBackend"):
        with sdpa_kernel(["math"]):
            pass
