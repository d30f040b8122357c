"""``torch.autograd`` under the name a ported program reaches it by: after
``import gradtrace.autograd as torch``, ``torch.autograd.Function``, ``torch.autograd.grad``,
``torch.autograd.functional.jacobian`` and the rest resolve here.

An alias namespace only: every name is the engine's own object, defined once elsewhere.
"""
from __future__ import annotations

from .. import forward_ad, function, functional, graph
from ..anomaly_mode import detect_anomaly, is_anomaly_enabled, set_detect_anomaly
from ..engine import backward, grad
from ..function import Function, FunctionCtx, once_differentiable
from ..grad_mode import (enable_grad, inference_mode, is_grad_enabled, no_grad,
                         set_grad_enabled)
from . import profiler

__all__ = ["Function", "FunctionCtx", "once_differentiable", "backward", "grad",
           "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled", "no_grad",
           "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode",
           "forward_ad", "function", "functional", "graph", "profiler"]
