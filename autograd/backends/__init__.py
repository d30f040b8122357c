"""``torch.backends``: the switches PyTorch programs set for cuDNN, CUDA matmuls and MPS.

They are accepted and stored, so a program that sets them runs unchanged; none changes what
gradtrace computes. NumPy and CuPy run gradtrace's ops without cuDNN, so ``cudnn.benchmark``,
``cudnn.deterministic`` and ``cudnn.enabled`` select nothing; matmuls follow CuPy's own TF32
setting (its ``CUPY_TF32`` environment variable), not ``allow_tf32``; and there is no MPS
backend.
"""
from . import cuda, cudnn, mps  # noqa: F401

__all__ = ["cuda", "cudnn", "mps"]
