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

def _installed_from_here() -> bool:
    try:
        spec = importlib.util.find_spec("gradtrace.autograd")
    except ModuleNotFoundError:     # no `gradtrace` namespace at all: nothing installed
        return False
    return spec is not None and os.path.realpath(os.path.dirname(spec.origin)) == os.path.realpath(
        os.path.join(_ROOT, "autograd"))


if not _installed_from_here():
    # An uninstalled checkout (`PYTHONPATH=. pytest`, as on a GPU machine where the project is
    # not pip-installed), or a second checkout beside the installed one: a folder `gradtrace`
    # whose entries link to this checkout's packages gives them their installed names, ahead of
    # any installed copy, here and in the scripts the tests run.
    _LINKS = tempfile.mkdtemp(prefix="gradtrace-checkout-")
    os.mkdir(os.path.join(_LINKS, "gradtrace"))
    for _pkg in ("autograd", "profiler", "viewer", "cli"):
        os.symlink(os.path.join(_ROOT, _pkg), os.path.join(_LINKS, "gradtrace", _pkg))
    sys.path.insert(0, _LINKS)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_LINKS, os.environ.get("PYTHONPATH")) if p)
    for _name in [m for m in sys.modules if m == "gradtrace" or m.startswith("gradtrace.")]:
        del sys.modules[_name]          # the namespace found above, before the links
    importlib.invalidate_caches()
    assert _installed_from_here(), "tests/conftest.py could not put this checkout first"

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
