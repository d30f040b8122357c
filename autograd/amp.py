"""``torch.amp``: autocast (see :mod:`.autocast_mode`) and ``GradScaler``, which scales the
loss so that float16 gradients do not underflow, unscales the gradients before the optimizer
step, skips the step when any gradient is inf or NaN, and adapts the scale (PyTorch's
torch/amp/grad_scaler.py, with the same methods, errors and state dict).

Also the deprecated spellings ``torch.cuda.amp`` and ``torch.cpu.amp`` (:data:`cuda_amp`,
:data:`cpu_amp`), whose classes fix the device.
"""
from __future__ import annotations

import types
import warnings
from collections import defaultdict
from enum import Enum

import numpy as np

from . import backend
from .autocast_mode import (autocast, clear_autocast_cache, get_autocast_dtype,
                            is_autocast_available, is_autocast_enabled)
from .grad_mode import no_grad
from ._tensor import Tensor, full

__all__ = ["autocast", "GradScaler", "OptState", "is_autocast_available",
           "is_autocast_enabled", "get_autocast_dtype", "clear_autocast_cache"]

_FIX = ("This may indicate your script did not use scaler.scale(loss or outputs) earlier in "
        "the iteration.")


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _refresh_per_optimizer_state() -> dict:
    return {"stage": OptState.READY, "found_inf_per_device": {}}


class GradScaler:
    """``torch.amp.GradScaler``: dynamic loss scaling for float16 training.

    A step: ``scaler.scale(loss).backward()``; optionally ``scaler.unscale_(opt)`` then
    gradient clipping; ``scaler.step(opt)`` (skipped when a gradient is inf/NaN);
    ``scaler.update()``: the scale is multiplied by ``backoff_factor`` after a skipped step
    and by ``growth_factor`` after ``growth_interval`` steps in a row without one.

    Args:
        device: ``"cuda"`` or ``"cpu"`` (the scale lives on the outputs' device).
        init_scale: the first scale.
        growth_factor, backoff_factor, growth_interval: as above.
        enabled: False makes every method a passthrough (``scale`` returns its input,
            ``step`` calls ``optimizer.step()``).
    """

    def __init__(self, device: str = "cuda", init_scale: float = 2.0**16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True):
        self._device = str(device).split(":")[0]
        self._enabled = bool(enabled)
        if self._device == "cuda" and self._enabled and not backend.cuda_is_available():
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  "
                          "Disabling.", stacklevel=2)
            self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
            self._init_scale = init_scale
            self._scale = None            # float32 tensor of shape (), made by the first scale()
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker = None   # int32 tensor: steps in a row without inf/NaN
            self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    # ------------------------------------------------------------------ scaling

    def _check_scale_growth_tracker(self, funcname: str):
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  " + _FIX)
        if self._growth_tracker is None:
            raise AssertionError(f"Attempted {funcname} but _growth_tracker is None.  " + _FIX)
        return self._scale, self._growth_tracker

    def _lazy_init_scale_growth_tracker(self, dev) -> None:
        self._scale = full((), self._init_scale, dtype="float32", device=dev)
        self._growth_tracker = full((), self._init_growth_tracker, dtype="int32", device=dev)

    def scale(self, outputs):
        """``outputs`` (a tensor, or nested lists/tuples of them) times the scale, recorded so
        that their backward gives scaled gradients. Disabled: ``outputs`` as they are."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            if self._scale is None:
                self._lazy_init_scale_growth_tracker(outputs.device)
            return outputs * self._scale.to(device=outputs.device)

        def apply_scale(val):
            if isinstance(val, Tensor):
                if self._scale is None:
                    self._lazy_init_scale_growth_tracker(val.device)
                return val * self._scale.to(device=val.device)
            if isinstance(val, (list, tuple)):
                return type(val)(apply_scale(v) for v in val)
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")

        return apply_scale(outputs)

    def _unscale_grads_(self, optimizer, inv_scale: float, allow_fp16: bool) -> dict:
        """Multiply every gradient of ``optimizer``'s parameters by ``inv_scale`` in place and
        return {device: float32 tensor, 1.0 where some gradient there is inf or NaN}.
        The flag stays on the device (no synchronisation until :meth:`step` reads it)."""
        found = {}
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    if not allow_fp16 and g.dtype == np.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    dev = g.device
                    flag = found.get(dev)
                    if flag is None:
                        flag = found[dev] = full((), 0.0, dtype="float32", device=dev)
                    xp = dev.xp
                    bad = xp.logical_not(xp.isfinite(g._data)).any()
                    flag._data[...] = xp.maximum(flag._data, bad.astype(flag._data.dtype))
                    g.mul_(inv_scale)
        return found

    def unscale_(self, optimizer) -> None:
        """Divide ``optimizer``'s gradients by the scale, in place (once per step; before
        gradient clipping, which then sees the true gradients)."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the "
                               "last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        # 1/scale in float64, then float32: PyTorch's scale.double().reciprocal().float().
        inv_scale = np.float32(1.0 / float(self._scale._data))
        state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale, False)
        state["stage"] = OptState.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """``optimizer.step(*args, **kwargs)`` on unscaled gradients (unscaling them first
        unless :meth:`unscale_` did), skipped when any of them holds inf or NaN.

        Returns:
            What ``optimizer.step`` returned, or None when the step was skipped.
        """
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if not state["found_inf_per_device"]:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        retval = None
        if not sum(v.item() for v in state["found_inf_per_device"].values()):
            retval = optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale=None) -> None:
        """Adjust the scale for the next iteration (PyTorch's ``_amp_update_scale_``): halve
        it (``backoff_factor``) if this iteration's gradients had inf/NaN, grow it after
        ``growth_interval`` clean iterations in a row; or set it to ``new_scale``."""
        if not self._enabled:
            return
        scale, tracker = self._check_scale_growth_tracker("update")
        if new_scale is not None:
            if isinstance(new_scale, float):
                scale._data[...] = new_scale
            else:
                reason = ("new_scale should be a float or a 1-element torch.cuda.FloatTensor "
                          "or torch.FloatTensor with requires_grad=False.")
                if not isinstance(new_scale, Tensor) or new_scale.device.type != self._device:
                    raise AssertionError(reason)
                if new_scale.numel() != 1 or new_scale.requires_grad:
                    raise AssertionError(reason)
                scale._data[...] = new_scale._data.reshape(())
        else:
            found_infs = [f for state in self._per_optimizer_states.values()
                          for f in state["found_inf_per_device"].values()]
            if not found_infs:
                raise AssertionError("No inf checks were recorded prior to update.")
            found_inf = sum(float(f.item()) for f in found_infs)
            self._update_scale(scale, tracker, found_inf)
        self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    def _update_scale(self, scale, tracker, found_inf: float) -> None:
        # PyTorch's amp_update_scale kernel; the products in double, stored as float32.
        if found_inf:
            scale._data[...] = float(scale._data) * self._backoff_factor
            tracker._data[...] = 0
            return
        successful = int(tracker._data) + 1
        if successful == self._growth_interval:
            grown = np.float32(float(scale._data) * self._growth_factor)
            if np.isfinite(grown):
                scale._data[...] = grown
            tracker._data[...] = 0
        else:
            tracker._data[...] = successful

    # ------------------------------------------------------------------ getters and setters

    def get_scale(self) -> float:
        """The current scale (a Python float; 1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale.item())

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = new_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = new_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = new_interval

    def _get_growth_tracker(self) -> int:
        if not self._enabled:
            return 0
        if self._growth_tracker is None:
            return self._init_growth_tracker
        return int(self._growth_tracker.item())

    def is_enabled(self) -> bool:
        return self._enabled

    def state_dict(self) -> dict:
        """{scale, growth_factor, backoff_factor, growth_interval, _growth_tracker} ({} when
        disabled), as PyTorch's."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict: dict) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        if self._scale is not None:
            self._scale._data[...] = state_dict["scale"]
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._growth_tracker is not None:
            self._growth_tracker._data[...] = state_dict["_growth_tracker"]


# --------------------------------------------------------------------------- torch.cuda/cpu.amp


class _CudaAutocast(autocast):
    """``torch.cuda.amp.autocast(enabled=True, dtype=float16, cache_enabled=True)``."""

    def __init__(self, enabled: bool = True, dtype="float16", cache_enabled: bool = True):
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class _CpuAutocast(autocast):
    """``torch.cpu.amp.autocast(enabled=True, dtype=None, cache_enabled=True)``: bfloat16 by
    default, as PyTorch's."""

    def __init__(self, enabled: bool = True, dtype=None, cache_enabled: bool = True):
        super().__init__("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class _CudaGradScaler(GradScaler):
    """``torch.cuda.amp.GradScaler(init_scale, growth_factor, backoff_factor,
    growth_interval, enabled)``: a GradScaler on ``"cuda"``."""

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True):
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled)


class _CpuGradScaler(GradScaler):
    """``torch.cpu.amp.GradScaler``: a GradScaler on ``"cpu"``."""

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True):
        super().__init__("cpu", init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled)


def _namespace(name: str, autocast_cls, scaler_cls) -> types.ModuleType:
    mod = types.ModuleType(name, f"``{name.replace('gradtrace.autograd', 'torch')}``")
    mod.autocast = autocast_cls
    mod.GradScaler = scaler_cls
    return mod


_CudaAutocast.__name__ = _CpuAutocast.__name__ = "autocast"
_CudaGradScaler.__name__ = _CpuGradScaler.__name__ = "GradScaler"
cuda_amp = _namespace("gradtrace.autograd.cuda.amp", _CudaAutocast, _CudaGradScaler)
cpu_amp = _namespace("gradtrace.autograd.cpu.amp", _CpuAutocast, _CpuGradScaler)
