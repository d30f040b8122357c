"""Shared pytest configuration: the `cuda` marker skips only when no GPU is usable.

``GRADTRACE_FAKE_CUPY=1`` puts ``tests/fakecupy`` first on the path, so that ``import cupy``
loads a NumPy-backed stand-in of CuPy's API and the ``cuda`` tests exercise the GPU code
paths' Python logic on a machine without a GPU (see that module's docstring for what it does
and does not check). It never stands in for a run on a real GPU.
"""
import importlib.util
import os
import sys
import tempfile

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

if importlib.util.find_spec("gradtrace") is None:
    # An uninstalled checkout (`PYTHONPATH=. pytest`, as on a GPU machine where the project is
    # not pip-installed): a folder `gradtrace` whose entries link to the checkout's packages
    # gives them their installed names, here and in the scripts the tests run.
    _LINKS = tempfile.mkdtemp(prefix="gradtrace-checkout-")
    os.mkdir(os.path.join(_LINKS, "gradtrace"))
    for _pkg in ("autograd", "profiler", "viewer", "cli"):
        os.symlink(os.path.join(_ROOT, _pkg), os.path.join(_LINKS, "gradtrace", _pkg))
    sys.path.insert(0, _LINKS)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_LINKS, os.environ.get("PYTHONPATH")) if p)

if os.environ.get("GRADTRACE_FAKE_CUPY") == "1":
    _FAKE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fakecupy")
    sys.path.insert(0, _FAKE)
    # Child processes (the CLI tests run scripts) see the same stand-in.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_FAKE, os.environ.get("PYTHONPATH")) if p)


def _gpu_usable() -> bool:
    try:
        from gradtrace.autograd import backend
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
