"""Module: the base of every layer, and the containers Sequential, ModuleList, ModuleDict."""
from __future__ import annotations

from collections import OrderedDict, namedtuple

import numpy

from ... import backend
from ... import memory as _memory
from ... import record_function as _rf
from ...hooks import register
from ...dtypes import BFLOAT16
from ..._tensor import Tensor, _is_dtype, _is_float
from ..parameter import Parameter

__all__ = ["Module", "Sequential", "ModuleList", "ModuleDict"]

_RF = _rf.STATE

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class Module:
    """Base class of layers: holds parameters, buffers and sub-modules as attributes.

    Assigning a :class:`Parameter` registers a parameter, assigning a Module registers a child,
    ``register_buffer`` registers a (non-learnable) tensor saved in the state dict.
    """

    training: bool

    def __init__(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", {})
        object.__setattr__(self, "_forward_hooks", {})

    # ------------------------------------------------------------------ attributes
    def __setattr__(self, name, value):
        d = self.__dict__
        if "_parameters" not in d:
            raise AttributeError(f"cannot assign '{name}' before Module.__init__() is called")
        params, buffers, modules = d["_parameters"], d["_buffers"], d["_modules"]
        if isinstance(value, Parameter):
            self._forget(name, keep="_parameters")
            params[name] = value
        elif isinstance(value, Module):
            self._forget(name, keep="_modules")
            modules[name] = value
        elif name in params or name in modules:
            if value is not None:
                kind = "parameter" if name in params else "child module"
                raise TypeError(f"cannot assign {type(value).__name__} as {kind} '{name}' "
                                "(a Parameter/Module or None is expected)")
            (params if name in params else modules)[name] = None
        elif name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign {type(value).__name__} as buffer '{name}' "
                                "(a Tensor or None is expected)")
            buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _forget(self, name, keep=None):
        """Drop ``name`` from the other tables: one reassigned in its own table keeps its
        place there, as PyTorch's (nn.Transformer's subclass that replaces ``self.decoder``
        with a Linear lists it where the TransformerDecoder was, in parameters() too)."""
        d = self.__dict__
        d.pop(name, None)
        for table in ("_parameters", "_buffers", "_modules"):
            if table != keep:
                d[table].pop(name, None)

    def __getattr__(self, name):
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            t = d.get(table)
            if t is not None and name in t:
                return t[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                del table[name]
                return
        object.__delattr__(self, name)

    def register_parameter(self, name: str, param) -> None:
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign {type(param).__name__} as parameter '{name}' "
                            "(a Parameter or None is expected)")
        self.__dict__.pop(name, None)
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor, persistent: bool = True) -> None:
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign {type(tensor).__name__} as buffer '{name}'")
        self.__dict__.pop(name, None)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)

    def add_module(self, name: str, module) -> None:
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self.__dict__.pop(name, None)
        self._modules[name] = module

    register_module = add_module

    # ------------------------------------------------------------------ calling
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"Module [{type(self).__name__}] is missing the required "
                                  "\"forward\" function")

    def __call__(self, *args, **kwargs):
        if _RF.on:
            with _rf.record_function(f"nn.Module: {type(self).__name__}"):
                return self._call_impl(args, kwargs)
        return self._call_impl(args, kwargs)

    def _call_impl(self, args, kwargs):
        if self._forward_pre_hooks:
            for hook in tuple(self._forward_pre_hooks.values()):
                res = hook(self, args)
                if res is not None:
                    args = res if isinstance(res, tuple) else (res,)
        out = self.forward(*args, **kwargs)
        if self._forward_hooks:
            for hook in tuple(self._forward_hooks.values()):
                res = hook(self, args, out)
                if res is not None:
                    out = res
        return out

    def register_forward_pre_hook(self, hook):
        """``hook(module, args) -> None or new args`` before each forward; returns a handle."""
        return register(self._forward_pre_hooks, hook)

    def register_forward_hook(self, hook):
        """``hook(module, args, output) -> None or new output`` after each forward."""
        return register(self._forward_hooks, hook)

    # ------------------------------------------------------------------ traversal
    def named_modules(self, memo=None, prefix: str = ""):
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(memo, f"{prefix}.{name}" if prefix else name)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named(self, table, prefix, recurse):
        seen = set()
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mp, m in mods:
            for name, t in getattr(m, table).items():
                if t is None or id(t) in seen:
                    continue
                seen.add(id(t))
                yield (f"{mp}.{name}" if mp else name), t

    def named_parameters(self, prefix: str = "", recurse: bool = True):
        yield from self._named("_parameters", prefix, recurse)

    def parameters(self, recurse: bool = True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True):
        yield from self._named("_buffers", prefix, recurse)

    def buffers(self, recurse: bool = True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ------------------------------------------------------------------ modes and devices
    def train(self, mode: bool = True):
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad._data[...] = 0

    def _apply_to_tensors(self, fn):
        for m in self.modules():
            for table in (m._parameters, m._buffers):
                for t in table.values():
                    if t is not None:
                        fn(t)
        return self

    def to(self, *args, device=None, dtype=None, non_blocking: bool = False):
        """Move (and/or cast) every parameter and buffer in place: the Parameter objects stay
        the same, so an optimizer built before still holds them.

        PyTorch's forms: ``to(device)``, ``to(dtype)``, ``to(device, dtype)``,
        ``to(tensor)`` (its device and dtype), the keywords, and ``non_blocking`` (accepted;
        copies follow the stream order anyway). A dtype casts the floating-point and complex
        tensors only (bfloat16 included, both ways); integer buffers keep theirs.
        """
        device, dtype = _to_args(args, device, dtype)
        dev = backend.device(device) if device is not None else None

        def move(t):
            data = t._data
            if dtype is not None and _is_float(data.dtype) and data.dtype != dtype:
                data = data.astype(dtype)
            if dev is not None and dev is not t._device:
                data = backend.to_device(data, dev)
            if data is not t._data:
                t._data = data
                t._device = backend.device_of_array(data)
                t._vc[0] += 1
                if _RF.memory and isinstance(t, Parameter):
                    _memory.classify(data, _memory.Category.PARAMETER, first_seen=True)
                if t.grad is not None:
                    t.grad = t.grad.to(t._device, dtype=data.dtype)

        return self._apply_to_tensors(move)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to(device or "cuda")

    def float(self):
        return self.to(dtype=numpy.float32)

    def double(self):
        return self.to(dtype=numpy.float64)

    def half(self):
        return self.to(dtype=numpy.float16)

    def bfloat16(self):
        return self.to(dtype=BFLOAT16)

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------------ state dict
    def state_dict(self, prefix: str = "", keep_vars: bool = False) -> OrderedDict:
        """Parameters and persistent buffers by dotted name (detached tensors sharing memory)."""
        out = OrderedDict()
        # Every attribute path, as PyTorch's: a module (or tied weight) reachable under two
        # names is listed under both.
        stack = [(prefix.rstrip("."), self)]
        while stack:
            mp, m = stack.pop()
            for name, p in m._parameters.items():
                if p is not None:
                    out[f"{mp}.{name}" if mp else name] = p if keep_vars else p.detach()
            for name, b in m._buffers.items():
                if b is not None and name not in m._non_persistent:
                    out[f"{mp}.{name}" if mp else name] = b if keep_vars else b.detach()
            stack.extend(reversed([(f"{mp}.{name}" if mp else name, c)
                                   for name, c in m._modules.items() if c is not None]))
        return out

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copy values into the parameters and buffers by name.

        With ``assign`` (PyTorch's), the state dict's tensors become the module's instead:
        a parameter is a new Parameter over the given tensor's storage (keeping the
        module's ``requires_grad``), a buffer the given tensor itself.

        Returns ``(missing_keys, unexpected_keys)``; with ``strict`` either being non-empty, or
        a shape mismatch, raises a RuntimeError listing them.
        """
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        for k, t in own.items():
            if k not in state_dict:
                continue
            v = state_dict[k]
            arr = v._data if isinstance(v, Tensor) else v
            if tuple(getattr(arr, "shape", ())) != tuple(t.shape):
                errors.append(f"size mismatch for {k}: copying a param with shape "
                              f"{list(getattr(arr, 'shape', ()))} from checkpoint, the shape in "
                              f"current model is {list(t.shape)}.")
        if strict:
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in missing) + ".")
            if unexpected:
                errors.insert(0 if not missing else 1, "Unexpected key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in unexpected) + ".")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                               + "\n\t".join(errors))
        if assign:
            self._assign(own, state_dict)
            return IncompatibleKeys(missing, unexpected)
        for k, t in own.items():
            if k in state_dict:
                v = state_dict[k]
                arr = v._data if isinstance(v, Tensor) else v
                if not backend.is_device_array(arr):
                    arr = numpy.asarray(arr)
                t._data[...] = backend.to_device(arr, t._device)
                t._vc[0] += 1
        return IncompatibleKeys(missing, unexpected)

    def _assign(self, own, state_dict) -> None:
        """``load_state_dict(assign=True)``: put the given tensors in place of the module's."""
        for k, t in own.items():
            if k not in state_dict:
                continue
            v = state_dict[k]
            if not isinstance(v, Tensor):
                v = Tensor._make(v if backend.is_device_array(v) else numpy.asarray(v), False,
                                 None, 0, [0], t._device)
            owner = self
            *path, name = k.split(".")
            for part in path:
                owner = owner._modules[part]
            if name in owner._parameters:
                owner._parameters[name] = Parameter(v.detach(), t.requires_grad)
            else:
                owner._buffers[name] = v

    # ------------------------------------------------------------------ repr
    def extra_repr(self) -> str:
        return ""

    def __repr__(self):
        lines = []
        extra = self.extra_repr()
        if extra:
            lines.extend(extra.split("\n"))
        for name, m in self._modules.items():
            body = repr(m).replace("\n", "\n  ")
            lines.append(f"({name}): {body}")
        main = type(self).__name__ + "("
        if not self._modules:
            return main + (extra if extra else "") + ")"
        return main + "\n  " + "\n  ".join(lines) + "\n)"

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers)
                      | set(self._modules))


class Sequential(Module):
    """Modules called in order, each on the previous one's output."""

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], (dict, OrderedDict)):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, idx):
        mods = list(self._modules.values())
        if isinstance(idx, slice):
            return Sequential(*mods[idx])
        return mods[idx]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self._modules)), module)
        return self


class ModuleList(Module):
    """A list of modules, registered as children ``0``, ``1``..."""

    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module):
        self.add_module(str(len(self._modules)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def __getitem__(self, idx):
        mods = list(self._modules.values())
        return ModuleList(mods[idx]) if isinstance(idx, slice) else mods[idx]

    def __setitem__(self, idx, module):
        key = list(self._modules)[idx]
        self.add_module(key, module)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class ModuleDict(Module):
    """A dict of modules, registered as children under their keys."""

    def __init__(self, modules=None):
        super().__init__()
        if modules:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()

    def update(self, modules):
        items = modules.items() if hasattr(modules, "items") else modules
        for k, m in items:
            self.add_module(k, m)


def _to_args(args, device, dtype):
    """(device, dtype) from ``Module.to``'s positional forms, PyTorch's checks included."""
    if len(args) > 3:
        raise TypeError(f"to() takes at most 3 positional arguments ({len(args)} given)")
    for a in args:
        if isinstance(a, bool):   # to(device, dtype, non_blocking) / to(tensor, non_blocking)
            continue
        if isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        elif _is_dtype(a):
            dtype = a
        elif a is not None:
            device = a
    if dtype is not None:
        dtype = numpy.dtype(dtype)
        if not _is_float(dtype):
            raise TypeError("nn.Module.to only accepts floating point or complex dtypes, but "
                            f"got desired dtype=torch.{dtype.name}")
    return device, dtype
