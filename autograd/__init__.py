"""gradtrace's autograd engine: tensors on NumPy (cpu) or CuPy (cuda), the backward engine,
and the RecordFunction instrumentation the profiler listens to.

The names follow PyTorch: ``autograd.tensor``, ``autograd.grad``, ``autograd.no_grad``,
``autograd.Function``, ``Tensor.backward``...
"""
from __future__ import annotations

from . import backend, record_function
from .backend import Device, DeviceError, cuda_is_available, device
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled,
                        no_grad, set_grad_enabled)
from .tensor import (Tensor, arange, as_tensor, empty, empty_like, eye, from_dlpack, from_numpy,
                     full, full_like, get_default_dtype, linspace, manual_seed, ones, ones_like,
                     rand, rand_like, randint, randn, randn_like, set_default_dtype, tensor, zeros,
                     zeros_like)
from . import ops  # noqa: E402 - registers the op table and the Tensor methods
from .ops import *  # noqa: F401,F403,E402
from .engine import (backward, grad, is_multithreading_enabled,  # noqa: E402
                     set_multithreading_enabled)
from .anomaly_mode import detect_anomaly, is_anomaly_enabled, set_detect_anomaly  # noqa: E402
from . import forward_ad, functional, graph  # noqa: E402
from .checkpoint import checkpoint, checkpoint_sequential  # noqa: E402
from .function import Function, FunctionCtx, once_differentiable  # noqa: E402
from .node import AccumulateGrad, GraphRoot, Node  # noqa: E402
from .record_function import RecordScope  # noqa: E402

__version__ = "0.1.0"

float16, float32, float64 = "float16", "float32", "float64"
int32, int64, bool_ = "int32", "int64", "bool"

from . import nn, optim  # noqa: E402,F401 - layers and optimizers (issue 3)
from . import compiled_autograd  # noqa: E402,F401 - compiled backward (issue 9)
from . import cuda, utils  # noqa: E402,F401 - torch.cuda's functions, data loading (issue 14)
from .generator import Generator  # noqa: E402
from .serialization import load, save  # noqa: E402
from . import distributed  # noqa: E402,F401 - collectives across processes (issue 19)
