"""Optimizer base: parameter groups, per-parameter state, zero_grad, state dicts.

Steps update ``p._data`` in place with the array module (no graph) and bump each parameter's
version counter; each ``step()`` is one USER_SCOPE range ``Optimizer.step#<Name>.step`` when a
RecordFunction callback is active.

Updates allocate nothing per step: every intermediate goes through an ``out=`` argument into
a scratch buffer (:meth:`Optimizer._scratch`), one flat array per slot, device and dtype,
reused by every parameter. A temporary per product was a third of the update's time on a
small MLP; the order of the arithmetic is PyTorch's, so the results are the same bits.
"""
from __future__ import annotations

import copy

from .. import backend
from .. import memory as _memory
from .. import record_function as _rf
from ..grad_mode import enable_grad, no_grad
from .._tensor import Tensor

__all__ = ["Optimizer"]

_RF = _rf.STATE


class _Required:
    def __repr__(self):
        return "<required parameter>"


required = _Required()


class Optimizer:
    """Base class: subclasses set ``defaults`` and implement ``_step_group(group)``."""

    def __init__(self, params, defaults: dict):
        self.defaults = defaults
        self.state: dict = {}
        self.param_groups: list[dict] = []
        self._buffers: dict = {}   # (slot, device, dtype) -> flat scratch array, see _scratch
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, group: dict) -> None:
        group = dict(group)
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, got {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        group["params"] = params
        for k, v in self.defaults.items():
            if v is required and k not in group:
                raise ValueError(f"parameter group didn't specify a value of required "
                                 f"optimization parameter {k}")
            group.setdefault(k, v)
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad._data[...] = 0

    def step(self, closure=None):
        """One update of every parameter with a gradient; ``closure`` re-evaluates the loss."""
        # Read by the learning-rate schedulers, which warn (as PyTorch's) when they are
        # stepped before the optimizer ever was.
        self._opt_called = True
        if _RF.on:
            # Timed on the parameters' GPU too: the update runs as array code, not ops, so
            # its kernels have no op record of their own to carry their CUDA time.
            device = next((p.device for g in self.param_groups for p in g["params"]), None)
            with _rf.record_function(f"Optimizer.step#{type(self).__name__}.step", device):
                return self._step(closure)
        return self._step(closure)

    def _step(self, closure):
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                self._step_group(group)
        if _RF.memory:
            self._classify_memory()
        return loss

    def _classify_memory(self) -> None:
        """Tell the memory profiler what the optimizer holds: its parameters, their gradients
        and its state (first seen here when made before the profiler started, or by this
        step's update: the state is plain arrays, which no tensor reported)."""
        category = _memory.Category
        for group in self.param_groups:
            for p in group["params"]:
                _memory.classify(p._data, category.PARAMETER, first_seen=True)
                if p.grad is not None:
                    _memory.classify(p.grad._data, category.GRADIENT, first_seen=True)
                for value in self.state.get(p, {}).values():
                    if hasattr(value, "nbytes") and hasattr(value, "shape"):
                        _memory.classify(value, category.OPTIMIZER_STATE, first_seen=True)

    def _step_group(self, group):
        raise NotImplementedError

    # ------------------------------------------------------------------ scratch space
    def _scratch(self, like, device, slot: int = 0):
        """An uninitialised array shaped like ``like`` on ``device``, a view of a flat buffer
        kept per ``slot``, device and dtype (grown to the largest parameter): the updates
        write their intermediates there with ``out=`` instead of allocating them. Two
        intermediates alive at once use two slots.

        Args:
            like: the array whose shape and dtype the scratch takes.
            device: the parameter's Device (its ``xp`` allocates the buffer).
            slot: which buffer; views of one slot overwrite each other.
        Returns:
            A C-contiguous array of ``like``'s shape and dtype; its contents are garbage.
        """
        key = (slot, device, like.dtype)
        buf = self._buffers.get(key)
        if buf is None or buf.size < like.size:
            buf = self._buffers[key] = device.xp.empty_like(like, order="C").reshape(-1)
        return buf[:like.size].reshape(like.shape)

    def _grad(self, p, maximize: bool, weight_decay: float):
        """``p``'s gradient array, negated when maximizing and plus ``weight_decay * p`` (L2)
        when asked — in scratch slot 1, the gradient itself left alone."""
        g = p.grad._data
        if not (maximize or weight_decay):
            return g
        xp = p.device.xp
        out = self._scratch(g, p.device, 1)
        if maximize:
            g = xp.negative(g, out=out)
        if weight_decay:
            decay = xp.multiply(p._data, weight_decay, out=self._scratch(g, p.device, 0))
            g = xp.add(g, decay, out=out)
        return g

    def _params_with_grad(self, group, init_state=None, decoupled: bool = False):
        """The head of every update's per-parameter loop, in one place: skip a parameter
        without a gradient, read its gradient through :meth:`_grad` (``maximize``, L2
        ``weight_decay``; with ``decoupled``, AdamW's ``p *= 1 - lr * weight_decay`` first
        instead), make its state on its first step and count the step.

        Args:
            group: the parameter group (``maximize``, ``weight_decay``, ``lr`` read from it).
            init_state: ``(p, xp) -> dict``, the state besides ``step`` (which comes first, 0);
                None where the optimizer keeps no step count (then ``st`` is None).
            decoupled: decoupled weight decay, as AdamW.
        Yields:
            ``(p, xp, g, st)``: the parameter, its array module, its gradient array (maybe a
            view of scratch slot 1: the update's own scratch must use other slots) and its
            state dict with ``step`` already counted.
        """
        maximize, wd = group["maximize"], group["weight_decay"]
        for p in group["params"]:
            if p.grad is None:
                continue
            xp = p.device.xp
            if wd and decoupled:
                p._data *= 1 - group["lr"] * wd
                g = self._grad(p, maximize, 0.0)
            else:
                g = self._grad(p, maximize, wd)
            st = None
            if init_state is not None:
                st = self.state.get(p)
                if not st:
                    st = self.state[p] = {"step": 0, **init_state(p, xp)}
                st["step"] += 1
            yield p, xp, g, st

    # ------------------------------------------------------------------ state dicts
    def state_dict(self) -> dict:
        """``{"state": {index: {name: array copy}}, "param_groups": [... "params": [index]]}``,
        parameters numbered across groups in order, as PyTorch does."""
        index = {}
        groups = []
        for g in self.param_groups:
            ids = []
            for p in g["params"]:
                index.setdefault(id(p), len(index))
                ids.append(index[id(p)])
            groups.append({**{k: v for k, v in g.items() if k != "params"}, "params": ids})
        state = {}
        for g in self.param_groups:
            for p in g["params"]:
                st = self.state.get(p)
                if st:
                    state[index[id(p)]] = {k: (v.copy() if hasattr(v, "copy") else v)
                                           for k, v in st.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError(f"loaded state dict has {len(groups)} parameter groups, the "
                             f"optimizer has {len(self.param_groups)}")
        for mine, theirs in zip(self.param_groups, groups):
            if len(mine["params"]) != len(theirs["params"]):
                raise ValueError(f"loaded state dict contains a parameter group of "
                                 f"{len(theirs['params'])} parameters that doesn't match the "
                                 f"size of the optimizer's group ({len(mine['params'])})")
        by_index = {}
        for mine, theirs in zip(self.param_groups, groups):
            for p, i in zip(mine["params"], theirs["params"]):
                by_index[i] = p
            for k, v in theirs.items():
                if k != "params":
                    mine[k] = copy.deepcopy(v)
        self.state = {}
        for i, st in state_dict["state"].items():
            p = by_index[int(i)]
            self.state[p] = {k: (backend.to_device(v, p.device).astype(p.dtype)
                                 if backend.is_device_array(v) and v.ndim else v)
                             for k, v in st.items()}

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(k for k in g if k != "params"):
                lines.append(f"    {k}: {g[k]}")
        return "\n".join(lines) + "\n)"


def lerp_(start, end, weight: float, tmp, xp):
    """``start += weight * (end - start)`` in place, by PyTorch's ``lerp_`` formula (from the
    nearer end: ``end - (end - start) * (1 - weight)`` when ``weight >= 0.5``), so moving
    averages written with ``lerp_`` round as PyTorch's; ``tmp`` (scratch shaped like
    ``start``) holds the difference. Returns ``start``."""
    diff = xp.subtract(end, start, out=tmp)
    if weight < 0.5:
        diff *= weight
        start += diff
    else:
        diff *= 1 - weight
        xp.subtract(end, diff, out=start)
    return start


def square_average_(avg, g, decay: float, tmp, xp):
    """``avg = decay * avg + (1 - decay) * g^2`` in place, in PyTorch's order (``avg *= decay``,
    then ``(1 - decay) * g * g`` added); ``tmp`` (scratch shaped like ``avg``) holds the
    added term. Returns ``avg``."""
    avg *= decay
    tmp = xp.multiply(g, g, out=tmp)
    tmp *= 1 - decay
    avg += tmp
    return avg


def check_hyperparameters(**values) -> None:
    """PyTorch's ValueErrors for negative hyperparameters: each keyword is a message name
    (``learning_rate`` reads "learning rate", ``eps`` "epsilon value", others "<name>
    value")."""
    for name, value in values.items():
        if value < 0.0:
            label = {"learning_rate": "learning rate", "eps": "epsilon value"}.get(
                name, f"{name} value")
            raise ValueError(f"Invalid {label}: {value}")


def check_betas(betas) -> None:
    for i, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {beta}")
