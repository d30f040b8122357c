"""Shared pytest configuration: the `cuda` marker skips only when no GPU is usable."""
import pytest


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
