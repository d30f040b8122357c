"""gradtrace's autograd engine: tensors on NumPy (cpu) or CuPy (cuda), the backward engine,
and the RecordFunction instrumentation the profiler listens to.

The names follow PyTorch: ``autograd.tensor``, ``autograd.grad``, ``autograd.no_grad``,
``autograd.Function``, ``Tensor.backward``...
"""
from __future__ import annotations

import numpy as _numpy

from . import backend, record_function
from .backend import Device, DeviceError, cuda_is_available, device
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled,
                        no_grad, set_grad_enabled)
from ._tensor import (Tensor, arange, as_tensor, empty, empty_like, eye, from_dlpack, from_numpy,
                     full, full_like, get_default_dtype, linspace, manual_seed, ones, ones_like,
                     rand, rand_like, randint, randn, randn_like, set_default_dtype, tensor, zeros,
                     zeros_like)
from . import ops  # noqa: E402 - registers the op table and the Tensor methods
from .ops import *  # noqa: F401,F403,E402
from .engine import (backward, grad, is_multithreading_enabled,  # noqa: E402
                     set_multithreading_enabled)
from .anomaly_mode import detect_anomaly, is_anomaly_enabled, set_detect_anomaly  # noqa: E402
from . import forward_ad, functional, graph  # noqa: E402
from .utils.checkpoint import checkpoint, checkpoint_sequential  # noqa: E402
from .function import Function, FunctionCtx, once_differentiable  # noqa: E402
from .node import AccumulateGrad, GraphRoot, Node  # noqa: E402
from .record_function import RecordScope  # noqa: E402

__version__ = "0.1.0"

# PyTorch's dtype names. They are NumPy dtype objects, the type ``Tensor.dtype`` has, so
# ``x.dtype == gradtrace.autograd.float32`` holds, and they still compare equal to the older
# string spellings ("float32") and pass anywhere a dtype is accepted.
float16 = half = _numpy.dtype("float16")
float32 = float = _numpy.dtype("float32")  # noqa: A001 - torch.float
float64 = double = _numpy.dtype("float64")
int8, uint8, int16 = _numpy.dtype("int8"), _numpy.dtype("uint8"), _numpy.dtype("int16")
int32 = int = _numpy.dtype("int32")  # noqa: A001 - torch.int
int64 = long = _numpy.dtype("int64")
bool = bool_ = _numpy.dtype("bool")  # noqa: A001 - torch.bool
complex64, complex128 = _numpy.dtype("complex64"), _numpy.dtype("complex128")
# bfloat16 through ml_dtypes (see dtypes.py for what computes how); finfo/iinfo as torch's.
from .dtypes import BFLOAT16 as bfloat16, finfo, iinfo  # noqa: E402


def is_tensor(obj) -> bool:  # noqa: A001 - the builtin bool is shadowed above on purpose
    """``torch.is_tensor``."""
    return isinstance(obj, Tensor)


def is_floating_point(t) -> bool:
    """``torch.is_floating_point``."""
    return t.is_floating_point()

from . import nn, optim  # noqa: E402,F401 - layers and optimizers (issue 3)
from . import compiled_autograd  # noqa: E402,F401 - compiled backward (issue 9)
from . import cuda, utils  # noqa: E402,F401 - torch.cuda's functions, data loading (issue 14)
from . import amp, cpu  # noqa: E402,F401 - mixed precision: torch.amp, torch.cpu.amp
from .autocast_mode import (autocast, clear_autocast_cache, get_autocast_dtype,  # noqa: E402
                            is_autocast_cache_enabled, is_autocast_enabled,
                            set_autocast_cache_enabled, set_autocast_dtype,
                            set_autocast_enabled)
from .generator import Generator  # noqa: E402
from .serialization import load, save  # noqa: E402
from . import distributed  # noqa: E402,F401 - collectives across processes (issue 19)
from . import accelerator, backends  # noqa: E402,F401 - torch.accelerator, torch.backends
from . import autograd  # noqa: E402,F401 - torch.autograd.Function, .grad, .functional...
from .tensortype import (BFloat16Tensor, BoolTensor, ByteTensor, CharTensor, DoubleTensor,  # noqa: E402,F401
                         FloatTensor, HalfTensor, IntTensor, LongTensor, ShortTensor)
from .threads import (get_num_interop_threads, get_num_threads,  # noqa: E402,F401
                      set_num_interop_threads, set_num_threads)
