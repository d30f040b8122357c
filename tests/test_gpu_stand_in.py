"""The GPU code paths, exercised on a machine without a GPU.

``tests/fakecupy`` is a NumPy-backed stand-in for the part of CuPy's API gradtrace uses (see
its docstring). The first test runs every ``cuda`` test of the engine and the profiler against
it in a child process; the others check that the stand-in enforces what it claims to, since
the first test is only worth what the stand-in checks. None of this replaces a run on a real
GPU: no kernel, timing or CuPy numerics is exercised.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
FAKE = ROOT / "tests" / "fakecupy"


def test_cuda_tests_pass_against_the_cupy_stand_in():
    env = dict(os.environ, GRADTRACE_FAKE_CUPY="1", PYTHONPATH=str(ROOT))
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-m", "cuda", "-p", "no:cacheprovider",
         "tests/autograd", "tests/profiler"],
        cwd=ROOT, env=env, capture_output=True, text=True)
    tail = res.stdout[-3000:] + res.stderr[-2000:]
    assert res.returncode == 0, tail
    summary = res.stdout.strip().splitlines()[-1]
    assert "passed" in summary and "skipped" not in summary and "failed" not in summary, tail
    assert int(summary.split(" passed")[0].split()[-1]) >= 150, summary


@pytest.fixture
def cp():
    """The stand-in imported as ``cupy`` for one test, then taken out again."""
    saved = {k: sys.modules.pop(k) for k in list(sys.modules)
             if k in ("cupy", "cupyx") or k.startswith("cupy.")}
    sys.path.insert(0, str(FAKE))
    try:
        import cupy  # noqa: PLC0415 - the stand-in, found first on the path
        import cupyx  # noqa: PLC0415
        assert cupy._IS_FAKE
        yield cupy
    finally:
        sys.path.remove(str(FAKE))
        for k in [k for k in sys.modules if k in ("cupy", "cupyx") or k.startswith("cupy.")]:
            del sys.modules[k]
        sys.modules.update(saved)


def test_device_arrays_are_not_host_arrays(cp):
    a = cp.arange(6, dtype=np.float32).reshape(2, 3)
    assert not isinstance(a, np.ndarray)
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
        np.asarray(a)
    with pytest.raises(TypeError, match="Unsupported type"):
        a + np.ones((2, 3), np.float32)
    with pytest.raises(TypeError, match="Unsupported type"):
        cp.concatenate([a, np.ones((2, 3), np.float32)])
    assert type(a.sum()) is cp.ndarray and a.sum().ndim == 0       # no NumPy scalars
    assert type(a[0, 1]) is cp.ndarray
    host = a.get()
    assert isinstance(host, np.ndarray) and host.tolist() == [[0, 1, 2], [3, 4, 5]]
    b = cp.asarray(host)
    host[0, 0] = 99                                   # a device copy, not a view of the host
    assert float(b[0, 0]) == 0.0
    assert a.__dlpack_device__() == (2, 0)


def test_capture_records_instead_of_running_and_launch_replays(cp):
    s = cp.cuda.Stream(non_blocking=True)
    x = cp.ones(4, dtype=np.float32)
    out = cp.zeros(4, dtype=np.float32)
    with s:
        s.begin_capture()
        y = x * 2.0 + 1.0                          # recorded, not run: garbage until launched
        assert np.isnan(y._a).all()
        out[...] = y                               # a write into an existing buffer: deferred
        assert (out._a == 0).all()
        with pytest.raises(cp.cuda.runtime.CUDARuntimeError, match="capturing"):
            y.get()                                # a host sync inside a capture
        with pytest.raises(cp.cuda.runtime.CUDARuntimeError, match="capturing"):
            float(y.sum())
        graph = s.end_capture()
    assert (out.get() == 0).all()
    graph.launch(s)
    assert out.get().tolist() == [3.0] * 4
    x[...] = 5.0                                   # new input in the same (baked-in) buffer
    graph.launch(s)
    assert out.get().tolist() == [11.0] * 4
    with pytest.raises(RuntimeError, match="legacy"):
        cp.cuda.Stream.null.begin_capture()


def test_a_captured_reduction_is_recomputed_at_each_launch(cp):
    """A reduction to one value writes a 0-d device buffer: the launch recomputes it from the
    inputs of the moment, as a captured reduction kernel does (nll_loss's count of valid
    targets under a CUDA graph)."""
    s = cp.cuda.Stream(non_blocking=True)
    x = cp.asarray(np.array([1.0, 2.0, 3.0], np.float32))
    with s:
        s.begin_capture()
        total = x.sum()
        assert np.isnan(total._a)                  # not run yet
        y = x / total
        graph = s.end_capture()
    graph.launch(s)
    assert y.get().tolist() == pytest.approx([1 / 6, 2 / 6, 3 / 6])
    x[...] = cp.asarray(np.array([1.0, 1.0, 2.0], np.float32))
    graph.launch(s)
    assert y.get().tolist() == pytest.approx([0.25, 0.25, 0.5])


def test_streams_events_and_memory_hooks(cp):
    s1, s2 = cp.cuda.Stream(), cp.cuda.Stream()
    assert s1.ptr != s2.ptr and 0 not in (s1.ptr, s2.ptr)
    assert cp.cuda.get_current_stream().ptr == 0
    with s1:
        assert cp.cuda.get_current_stream() is s1
        with s2:
            assert cp.cuda.get_current_stream() is s2
        assert cp.cuda.get_current_stream() is s1
    start, end = cp.cuda.Event(), cp.cuda.Event()
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError, match="never recorded"):
        cp.cuda.get_elapsed_time(start, end)
    start.record(s1)
    end.record(s1)
    assert cp.cuda.get_elapsed_time(start, end) >= 0.0
    seen = []

    class Hook(cp.cuda.memory_hook.MemoryHook):
        name = "test"

        def malloc_postprocess(self, **kw):
            seen.append(("malloc", kw["mem_size"]))

        def free_postprocess(self, **kw):
            seen.append(("free", kw["mem_size"]))

    with Hook():
        a = cp.zeros(1000, dtype=np.float32)
        del a
    assert seen == [("malloc", 4096), ("free", 4096)]


def test_generator_state_lives_on_the_device_and_restores(cp):
    gen = cp.random.default_rng(3)
    assert callable(gen.bit_generator.state)       # CuPy: a method giving an address
    saved = gen.bit_generator._state.copy()
    first = gen.standard_normal((5,), dtype=np.float32).get()
    gen.bit_generator._state[...] = saved
    again = gen.standard_normal((5,), dtype=np.float32).get()
    np.testing.assert_array_equal(first, again)
