"""Custom differentiable functions: ``class Exp(autograd.Function)`` with forward/backward."""
from __future__ import annotations

import functools

from . import record_function as _rf
from .backend import CPU_STREAM
from .dispatch import TensorF, _gradient_edge
from .dtypes import is_floating
from .grad_mode import STATE as _THREAD, enable_grad, no_grad
from .node import ERR_FREED, Node, SavedVariable
from ._tensor import Tensor

__all__ = ["Function", "FunctionCtx", "once_differentiable"]

_RF = _rf.STATE


class FunctionCtx:
    """What ``forward`` can leave for ``backward`` (the ``ctx`` argument)."""

    def save_for_backward(self, *tensors) -> None:
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save tensors or None, got {type(t).__name__}")
        self._to_save = tensors

    def mark_dirty(self, *tensors) -> None:
        """Declare inputs that ``forward`` modified in place."""
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors) -> None:
        self._non_differentiable = tensors

    def set_materialize_grads(self, value: bool) -> None:
        """When True (the default), missing output gradients reach backward as zeros."""
        self._materialize = bool(value)


class BackwardCFunction(FunctionCtx, Node):
    """The node of a custom Function call; it is also the ``ctx`` its forward and backward see."""

    _fn_cls = None

    def __init__(self):
        Node.__init__(self)
        self._to_save = ()
        self._saved = None
        self._dirty = ()
        self._non_differentiable = ()
        self._materialize = True
        self.needs_input_grad = ()

    def name(self) -> str:
        return f"{self._fn_cls.__name__}Backward"

    @property
    def saved_tensors(self) -> tuple:
        if self._saved is None:
            raise RuntimeError(ERR_FREED)
        return tuple(s.unpack(self) if isinstance(s, SavedVariable) else s for s in self._saved)

    def apply(self, grads, F):
        create = F is TensorF   # the engine passes TensorF only under create_graph
        wrapped = []
        for g, meta in zip(grads, self.input_metadata):
            if g is None and self._materialize:
                g = meta[2].xp.zeros(meta[0], meta[1])
            wrapped.append(g if g is None or isinstance(g, Tensor)
                           else Tensor._make(g, False, None, 0, [0], meta[2]))
        ctx = enable_grad() if create else no_grad()
        with ctx:
            result = self._fn_cls.backward(self, *wrapped)
        if not isinstance(result, tuple):
            result = (result,)
        n = len(self.next_edges)
        if len(result) > n and all(r is None for r in result[n:]):
            result = result[:n]
        if len(result) != n:
            raise RuntimeError(f"function {self.name()} returned an incorrect number of gradients "
                               f"(expected {n}, got {len(result)})")
        out = []
        for i, r in enumerate(result):
            if r is not None and not isinstance(r, Tensor):
                raise TypeError(f"function {self.name()} returned a {type(r).__name__} as "
                                f"gradient {i}; expected a Tensor or None")
            if r is None or self.next_edges[i] is None:
                out.append(None)
            else:
                out.append(r if create else r._data)
        return out

    def release_variables(self) -> None:
        if self._saved is not None:
            for s in self._saved:
                if isinstance(s, SavedVariable):
                    s.release()
            self._saved = None


class _FunctionMeta(type):
    """Gives every Function subclass its own node class, named after it."""

    def __init__(cls, name, bases, ns):
        super().__init__(name, bases, ns)
        cls._backward_cls = type(f"{name}Backward", (BackwardCFunction,), {"_fn_cls": cls})


class Function(metaclass=_FunctionMeta):
    """Base class of custom ops. Define ``forward(ctx, *args)`` and ``backward(ctx, *grads)``
    as static methods and call ``MyFn.apply(*args)``."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a Function subclass must define forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("a Function subclass must define backward(ctx, ...) to be differentiated")

    @classmethod
    def apply(cls, *args, **kwargs):
        tensors = [a for a in args if isinstance(a, Tensor)]
        is_exec = _THREAD.grad_enabled and any(t.requires_grad for t in tensors)
        ctx = cls._backward_cls()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad and is_exec
                                     for a in args)
        rec = None
        if _RF.on:
            dev = tensors[0]._device if tensors else CPU_STREAM.device
            rec = _rf.begin(int(_rf.RecordScope.FUNCTION), cls.__name__,
                            ctx.sequence_nr if is_exec else -1, 0, args, str(dev))
        try:
            with no_grad():
                outputs = cls.forward(ctx, *args, **kwargs)
        finally:
            if rec is not None:
                _rf.end(rec)
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        if not is_exec:
            return outputs
        ctx._set_next_edges([_gradient_edge(a) if isinstance(a, Tensor) and a.requires_grad else None
                             for a in args])
        results = []
        metadata = []
        non_diff = {id(t) for t in ctx._non_differentiable}
        dirty = {id(t) for t in ctx._dirty}
        for i, o in enumerate(outs):
            if not isinstance(o, Tensor):
                results.append(o)
                continue
            if id(o) in dirty:
                o._vc[0] += 1
                o.grad_fn, o._output_nr, o.requires_grad = ctx, i, True
                res = o
            elif id(o) in non_diff or not is_floating(o._data.dtype):
                res = Tensor._make(o._data, False, None, 0, o._vc, o._device)
            else:
                # Outputs that are inputs returned as-is get a new tensor sharing their storage.
                res = Tensor._make(o._data, True, ctx, i, o._vc if any(o is a for a in args) else [0],
                                   o._device)
            metadata.append((o._data.shape, o._data.dtype, o._device, o._device.current_stream()))
            results.append(res)
        ctx.input_metadata = tuple(metadata)
        # Save after outputs exist so outputs can be saved (and rebuilt with this node).
        saved = []
        out_ids = {id(o): r for o, r in zip(outs, results) if isinstance(o, Tensor)}
        for t in ctx._to_save:
            if t is None:
                saved.append(None)
            elif id(t) in out_ids:
                saved.append(SavedVariable(out_ids[id(t)], is_output=out_ids[id(t)].grad_fn is ctx))
            else:
                saved.append(SavedVariable(t))
        ctx._saved = tuple(saved)
        ctx._to_save = ()
        return results[0] if single else tuple(results)


def once_differentiable(fn):
    """Mark a backward as not differentiable itself (it runs under no_grad)."""
    @functools.wraps(fn)
    def wrapper(ctx, *grads):
        with no_grad():
            return fn(ctx, *grads)

    return wrapper
