"""ag.cuda: torch.cuda's functions. Without a GPU, PyTorch-without-CUDA behaviour; with one
(or the CuPy stand-in, GRADTRACE_FAKE_CUPY=1), the real thing."""
import numpy as np
import pytest

import gradtrace.autograd as ag

HAVE_GPU = ag.cuda.is_available()


def test_availability_matches_the_backend():
    assert ag.cuda.is_available() == ag.cuda_is_available()
    assert ag.cuda.device_count() == (ag.backend.device_count() if HAVE_GPU else 0)


@pytest.mark.skipif(HAVE_GPU, reason="checks the behaviour without a GPU")
def test_without_a_gpu_behaves_as_pytorch_without_cuda():
    # PyTorch without CUDA: memory counters read 0, manual_seed is silently ignored, the
    # rest raises.
    assert ag.cuda.memory_allocated() == 0 and ag.cuda.max_memory_allocated() == 0
    assert ag.cuda.memory_reserved() == 0
    ag.cuda.reset_peak_memory_stats()
    ag.cuda.empty_cache()
    ag.cuda.manual_seed(0)
    ag.cuda.manual_seed_all(0)
    for call in (ag.cuda.synchronize, ag.cuda.Stream, ag.cuda.Event, ag.cuda.current_device,
                 ag.cuda.current_stream, ag.cuda.get_device_name):
        with pytest.raises(ag.DeviceError, match="CUDA is not available"):
            call()


@pytest.mark.cuda
def test_with_a_gpu_streams_events_memory_and_seed():
    ag.cuda.synchronize()
    assert isinstance(ag.cuda.get_device_name(), str) and ag.cuda.current_device() == 0
    before = ag.cuda.memory_allocated()
    x = ag.ones(1024, 1024, device="cuda")
    assert ag.cuda.memory_allocated() >= before + 4 * 1024 * 1024
    assert ag.cuda.max_memory_allocated() >= ag.cuda.memory_allocated()
    s = ag.cuda.Stream()
    start, end = ag.cuda.Event(enable_timing=True), ag.cuda.Event(enable_timing=True)
    with ag.cuda.stream(s):
        start.record()
        y = (x * 2).sum()
        end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0 and s.query()
    assert y.item() == 2 * 1024 * 1024
    ag.cuda.manual_seed(3)
    a = ag.randn(4, device="cuda").numpy()
    ag.cuda.manual_seed(3)
    np.testing.assert_array_equal(ag.randn(4, device="cuda").numpy(), a)
    del x
