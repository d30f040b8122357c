"""Shared pytest configuration: the `cuda` marker skips only when no GPU is usable.

``GRADTRACE_FAKE_CUPY=1`` puts ``tests/fakecupy`` first on the path, so that ``import cupy``
loads a NumPy-backed stand-in of CuPy's API and the ``cuda`` tests exercise the GPU code
paths' Python logic on a machine without a GPU (see that module's docstring for what it does
and does not check). It never stands in for a run on a real GPU.
"""
import os
import sys

import pytest

if os.environ.get("GRADTRACE_FAKE_CUPY") == "1":
    _FAKE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fakecupy")
    sys.path.insert(0, _FAKE)
    # Child processes (the CLI tests run scripts) see the same stand-in.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_FAKE, os.environ.get("PYTHONPATH")) if p)


def _gpu_usable() -> bool:
    try:
        from autograd import backend
    except Exception:  # pragma: no cover - import errors surface in the tests themselves
        return False
    return backend.cuda_is_available()


def pytest_collection_modifyitems(config, items):
    if _gpu_usable():
        return
    skip = pytest.mark.skip(reason="no usable CUDA GPU (CuPy) on this machine")
    for item in items:
        # The marker itself, not any keyword (a parameter id may contain "cuda").
        if item.get_closest_marker("cuda") is not None:
            item.add_marker(skip)
