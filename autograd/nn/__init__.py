"""``autograd.nn``: modules, parameters, functional layers and initializers (PyTorch's names)."""
from __future__ import annotations

from . import functional, init, utils  # noqa: F401
from . import attention  # noqa: F401 - torch.nn.attention (sdpa_kernel, SDPBackend)
from . import parallel  # noqa: F401 - DistributedDataParallel (issue 19)
from .modules import *  # noqa: F401,F403
from .modules import __all__ as _modules_all
from .parameter import Parameter

__all__ = ["Parameter", "functional", "init", "utils"] + list(_modules_all)

