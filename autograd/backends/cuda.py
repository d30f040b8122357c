"""``torch.backends.cuda``: matmul precision flags and the attention-kernel switches, stored
and without effect (see :mod:`gradtrace.autograd.backends`)."""
from __future__ import annotations

from .. import backend

__all__ = ["matmul", "is_built", "enable_flash_sdp", "flash_sdp_enabled",
           "enable_mem_efficient_sdp", "mem_efficient_sdp_enabled", "enable_math_sdp",
           "math_sdp_enabled", "enable_cudnn_sdp", "cudnn_sdp_enabled"]


class _MatmulFlags:
    """``torch.backends.cuda.matmul``: PyTorch's defaults; assignments are kept."""

    def __init__(self):
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True


matmul = _MatmulFlags()

# scaled_dot_product_attention's kernels: PyTorch's switches, all on by default. gradtrace has
# one implementation, which runs whatever they say.
_sdp = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def is_built() -> bool:
    """Whether CUDA can be used here (CuPy imports and a GPU answers); PyTorch's answers
    whether it was built with CUDA."""
    return backend.cuda_is_available()


def enable_flash_sdp(enabled: bool) -> None:
    _sdp["flash"] = bool(enabled)


def flash_sdp_enabled() -> bool:
    return _sdp["flash"]


def enable_mem_efficient_sdp(enabled: bool) -> None:
    _sdp["mem_efficient"] = bool(enabled)


def mem_efficient_sdp_enabled() -> bool:
    return _sdp["mem_efficient"]


def enable_math_sdp(enabled: bool) -> None:
    _sdp["math"] = bool(enabled)


def math_sdp_enabled() -> bool:
    return _sdp["math"]


def enable_cudnn_sdp(enabled: bool) -> None:
    _sdp["cudnn"] = bool(enabled)


def cudnn_sdp_enabled() -> bool:
    return _sdp["cudnn"]
