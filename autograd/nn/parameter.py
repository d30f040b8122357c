"""Parameter: a leaf tensor that a Module registers as one of its parameters."""
from __future__ import annotations

from .._tensor import Tensor, _to_array
from .. import backend
from .. import memory as _memory
from .. import record_function as _rf


class Parameter(Tensor):
    """A Tensor subclass marking a module's learnable leaf (``requires_grad=True`` by default).

    ``Parameter(t)`` shares ``t``'s array; ops on a Parameter return plain Tensors.
    """

    __slots__ = ()

    def __init__(self, data=None, requires_grad: bool = True):
        if data is None:
            data = []
        arr = _to_array(data, None, None)
        Tensor._init(self, arr, False, None, 0, [0], backend.device_of_array(arr))
        if _rf.STATE.memory:
            _memory.classify(arr, _memory.Category.PARAMETER, first_seen=True)
        if requires_grad:
            self.requires_grad_(True)

    def __repr__(self):
        return "Parameter containing:\n" + Tensor.__repr__(self)

    def __reduce_ex__(self, protocol):
        return (Parameter, (self.detach().numpy() if self.device.type == "cpu" else self._data.get(),
                            self.requires_grad))
