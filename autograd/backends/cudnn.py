"""``torch.backends.cudnn``: PyTorch's switches, with its defaults, stored and without effect:
gradtrace's ops do not call cuDNN (see :mod:`gradtrace.autograd.backends`). Assign them as a
PyTorch program does (``torch.backends.cudnn.benchmark = True``)."""
from __future__ import annotations

__all__ = ["enabled", "benchmark", "deterministic", "allow_tf32", "is_available", "version"]

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    """False: no op here runs on cuDNN (as PyTorch's answer on a build without it)."""
    return False


def version():
    """None, as PyTorch's without cuDNN."""
    return None
