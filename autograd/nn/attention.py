"""``torch.nn.attention``: ``SDPBackend`` and the ``sdpa_kernel`` context manager that picks
scaled_dot_product_attention's kernels. gradtrace has one implementation of the attention,
which runs whatever is picked; the choice is recorded in ``torch.backends.cuda``'s switches
(``flash_sdp_enabled()``...) inside the block, as PyTorch's."""
from __future__ import annotations

import contextlib
import enum

from ..backends import cuda as _cuda

__all__ = ["SDPBackend", "sdpa_kernel"]


class SDPBackend(enum.IntEnum):
    """PyTorch's kernels of scaled_dot_product_attention (values as PyTorch's)."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


# SDPBackend -> the torch.backends.cuda switch it turns on.
_SWITCHES = {SDPBackend.MATH: "math", SDPBackend.FLASH_ATTENTION: "flash",
             SDPBackend.EFFICIENT_ATTENTION: "mem_efficient",
             SDPBackend.CUDNN_ATTENTION: "cudnn"}


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority: bool = False):
    """Inside the block, only ``backends`` (one SDPBackend or a list) are enabled; the
    switches are restored after it. ``set_priority`` is accepted (there is one kernel)."""
    chosen = [backends] if isinstance(backends, SDPBackend) else list(backends)
    if not all(isinstance(b, SDPBackend) for b in chosen):
        raise AssertionError("Backend must be an instance of SDPBackend")
    saved = dict(_cuda._sdp)
    try:
        for backend, switch in _SWITCHES.items():
            _cuda._sdp[switch] = backend in chosen
        yield
    finally:
        _cuda._sdp.update(saved)
