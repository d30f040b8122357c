"""Nodes of the backward graph, their edges and saved tensors.

A :class:`Node` is one backward function. It is made by a forward op, numbered with the
thread-local ``sequence_nr`` at that moment and the creating thread's logical id, and points
at the nodes that produced its op's inputs through ``next_edges`` (``Edge(node, input_nr)``).
``topological_nr`` is the length of the longest path from the node to any leaf; once a node
has a parent it may not gain children, or that number could go stale.
"""
from __future__ import annotations

import threading
from . import grad_mode
from .anomaly_mode import record_trace
from . import memory as _memory
from .record_function import STATE as _RF
from ._tensor import Tensor
from .hooks import GRAPH_EPOCH, register  # noqa: F401 - GRAPH_EPOCH: read as node.GRAPH_EPOCH

__all__ = ["Edge", "Node", "NodeExtra", "AccumulateGrad", "GraphRoot", "SavedVariable"]

#: AccumulateGrad's sequence_nr: above every other node, so it runs first among ready nodes.
MAX_SEQUENCE_NR = 2**64 - 1

#: Moves whenever a saved tensor gets an unpack hook (:meth:`SavedVariable._apply_hooks`, at
#: creation under default hooks or by ``register_hooks``): while it has not moved since a
#: recording began, none of its nodes' saved tensors has one (``Recording.finish``).
SAVED_HOOKS_EPOCH = [0]


# An edge is a plain ``(node, input_nr)`` tuple: where a gradient goes. Plain tuples because one
# is made per differentiable input of every op, and a NamedTuple costs several times more.
Edge = tuple


# ``Node.input_metadata`` holds one ``(shape, dtype, device, stream)`` tuple per forward output:
# what a gradient flowing into the node must look like, and the stream its op ran on.


_EMPTY: dict = {}


class Node:
    """A backward function. Subclasses implement :meth:`apply`.

    ``apply(grads, F)`` receives one gradient per forward output (None where no gradient
    arrived) and returns one per ``next_edges`` entry (None for "no gradient"). ``F`` is the
    namespace of primitive ops to compute with: array functions normally, autograd ops when
    ``create_graph`` asks for a differentiable backward.
    """

    __slots__ = ("sequence_nr", "thread_id", "topological_nr", "next_edges", "input_metadata",
                 "_has_parent", "_extra", "__weakref__")

    def __init__(self, next_edges=(), sequence_nr: int | None = None):
        state = grad_mode.STATE
        ops = state.ops
        self.sequence_nr = ops.next_seq() if sequence_nr is None else sequence_nr
        self.thread_id = ops.thread_id
        self.input_metadata = ()
        self._extra = None
        self._has_parent = False
        self._set_next_edges(next_edges)
        if ops.anomaly:
            record_trace(self, state)

    def _set_next_edges(self, next_edges) -> None:
        """Attach children and compute ``topological_nr`` (0 for a node with no children)."""
        topo = 0
        for edge in next_edges:
            if edge is not None:
                child = edge[0]
                child._has_parent = True
                if child.topological_nr >= topo:
                    topo = child.topological_nr + 1
        self.next_edges = tuple(next_edges)
        self.topological_nr = topo

    def add_next_edge(self, edge) -> None:
        """Append a child; forbidden once this node has a parent (its number would go stale)."""
        if self._has_parent:
            raise RuntimeError(
                f"{self.name()}: cannot add a next edge to a node that already has a parent; "
                "its topological_nr would no longer be the longest path to a leaf")
        self._set_next_edges(self.next_edges + (edge,))

    # ------------------------------------------------------------------ identity
    def name(self) -> str:
        return type(self).__name__

    @property
    def next_functions(self) -> tuple:
        """PyTorch's view of the edges: ``((node, input_nr), ...)``, None for no gradient."""
        return tuple(e if e is not None else (None, 0) for e in self.next_edges)

    @property
    def num_inputs(self) -> int:
        return len(self.input_metadata)

    @property
    def metadata(self) -> dict:
        return {"sequence_nr": self.sequence_nr, "thread_id": self.thread_id,
                "topological_nr": self.topological_nr}

    def __repr__(self):
        return f"<{self.name()} seq={self.sequence_nr} thread={self.thread_id} topo={self.topological_nr}>"

    # ------------------------------------------------------------------ the work
    def apply(self, grads, F):  # pragma: no cover - abstract
        raise NotImplementedError(f"{self.name()} does not implement apply()")

    def release_variables(self) -> None:
        """Drop saved tensors after a backward that does not retain the graph."""

    def will_release_variables(self) -> bool:
        return True

    # ------------------------------------------------------------------ hooks
    def _extras(self) -> "NodeExtra":
        GRAPH_EPOCH[0] += 1   # every hook registration comes through here
        if self._extra is None:
            self._extra = NodeExtra()
        return self._extra

    def register_hook(self, fn):
        """Post hook ``fn(grad_inputs, grad_outputs) -> new grad_inputs or None``."""
        ex = self._extras()
        if ex.post_hooks is None:
            ex.post_hooks = {}
        return register(ex.post_hooks, fn)

    def register_prehook(self, fn):
        """Pre hook ``fn(grad_outputs) -> new grad_outputs or None``, before the node runs."""
        ex = self._extras()
        if ex.pre_hooks is None:
            ex.pre_hooks = {}
        return register(ex.pre_hooks, fn)

    def _register_tensor_pre_hook(self, output_nr: int, fn):
        """A hook on the gradient of one forward output (``Tensor.register_hook``)."""
        ex = self._extras()
        if ex.tensor_pre_hooks is None:
            ex.tensor_pre_hooks = {}
        return register(ex.tensor_pre_hooks.setdefault(output_nr, {}), fn)

    def _add_retains_grad_hook(self, output_nr: int, tensor) -> None:
        ex = self._extras()
        if ex.retains_grad_hooks is None:
            ex.retains_grad_hooks = {}
        ex.retains_grad_hooks[output_nr] = tensor


class NodeExtra:
    """The rarely used parts of a node, kept out of the hot path: hooks and anomaly data.

    Hook tables are dicts keyed by handle id; ``tensor_pre_hooks`` and ``retains_grad_hooks``
    are keyed by output number first.
    """

    __slots__ = ("pre_hooks", "tensor_pre_hooks", "retains_grad_hooks", "post_hooks",
                 "anomaly_trace", "anomaly_parent")

    def __init__(self):
        self.pre_hooks = self.tensor_pre_hooks = self.retains_grad_hooks = None
        self.post_hooks = None
        self.anomaly_trace = None
        self.anomaly_parent = None


class GraphRoot(Node):
    """Feeds the gradients given to ``backward`` into the roots' nodes."""

    __slots__ = ("_grads",)

    def __init__(self, edges, grads):
        super().__init__(edges, sequence_nr=MAX_SEQUENCE_NR)
        self._grads = list(grads)

    def apply(self, grads, F):
        return self._grads


class AccumulateGrad(Node):
    """Adds the incoming gradient into a leaf's ``.grad``. Runs before any other ready node."""

    __slots__ = ("variable",)

    _lock = threading.Lock()   # .grad accumulation is race-free across backward threads

    def __init__(self, variable):
        super().__init__((), sequence_nr=MAX_SEQUENCE_NR)
        self.variable = variable
        data = variable._data
        self.input_metadata = ((data.shape, data.dtype, variable.device,
                                variable.device.current_stream()),)

    def apply(self, grads, F):
        """Accumulation itself happens in the engine (it needs the graph task's mode)."""
        return ()


# --------------------------------------------------------------------------- saved tensors

ERR_FREED = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward."
)


#: The version counter of inference tensors (made under inference_mode): shared, never checked,
#: and refused by SavedVariable, since no history or version was kept for them.
INFERENCE_VC = [0]


class SavedVariable:
    """A tensor saved for backward, with the version it had when saved.

    An input is kept as the tensor itself; an op's own output keeps only its array (a
    reference to the tensor would make a cycle through ``grad_fn``) and is rebuilt with the
    node as ``grad_fn`` when a differentiable backward unpacks it.

    With saved-tensor hooks (a default ``saved_tensors_hooks`` context when saved, or
    :meth:`register_hooks` afterwards) only ``pack_hook(tensor)``'s result is kept, and
    ``unpack_hook(packed)`` must give back a tensor of the same shape and dtype.
    """

    __slots__ = ("tensor", "_data", "version", "vc", "is_output", "output_nr", "_freed",
                 "_packed", "_unpack_hook", "_meta")

    def __init__(self, tensor, is_output: bool = False):
        if tensor._vc is INFERENCE_VC:
            raise RuntimeError(
                "Inference tensors cannot be saved for backward: a tensor made under "
                "inference_mode() was used in an op that records a graph. Make a clone() "
                "of it outside inference_mode to use it with autograd.")
        self.vc = tensor._vc
        self.version = tensor._vc[0]
        self.is_output = is_output
        self.output_nr = tensor._output_nr
        self._freed = False
        self._unpack_hook = None
        self._packed = None
        self._meta = None
        self.tensor = None if is_output else tensor
        self._data = tensor._data
        if _RF.memory:
            _memory.classify(tensor._data, _memory.Category.ACTIVATION)
        hooks = grad_mode.STATE.saved_hooks
        if hooks:
            pack, unpack = hooks[-1]
            self._apply_hooks(pack, unpack, tensor)

    def register_hooks(self, pack_hook, unpack_hook) -> None:
        """Pack this saved tensor now with ``pack_hook``; ``unpack_hook`` restores it at backward."""
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError("register_hooks expects two callables: pack_hook and unpack_hook")
        if self._unpack_hook is not None:
            raise RuntimeError("SavedTensor hooks have already been set on this saved tensor")
        if self._data is None:
            raise RuntimeError(ERR_FREED)
        t = self.tensor if self.tensor is not None else Tensor._make(
            self._data, False, None, 0, self.vc)
        self._apply_hooks(pack_hook, unpack_hook, t)

    def _apply_hooks(self, pack, unpack, tensor) -> None:
        # Hooks run with the default hooks off, so a pack hook's own ops are not packed.
        state = grad_mode.STATE
        saved, state.saved_hooks = state.saved_hooks, []
        try:
            self._packed = pack(tensor)
        finally:
            state.saved_hooks = saved
        self._unpack_hook = unpack
        SAVED_HOOKS_EPOCH[0] += 1
        self._meta = (tensor._data.shape, tensor._data.dtype)
        self.tensor = None
        self._data = None

    def unpack_data(self, node):
        """The saved array (the fast path of a non-differentiable backward)."""
        data = self._data
        if data is None:
            if self._unpack_hook is not None:
                return self._run_unpack_hook(node)._data
            raise RuntimeError(ERR_FREED if self._freed else "saved tensor is missing")
        if self.vc[0] != self.version:
            raise self._version_error(node)
        return data

    def unpack(self, node):
        """The saved tensor (with history) for a differentiable backward or a hook."""
        if self._data is None:
            if self._unpack_hook is not None:
                return self._run_unpack_hook(node)
            raise RuntimeError(ERR_FREED if self._freed else "saved tensor is missing")
        if self.vc[0] != self.version:
            raise self._version_error(node)
        if self.tensor is not None:
            return self.tensor
        return Tensor._make(self._data, True, node, self.output_nr, self.vc)

    def _run_unpack_hook(self, node):
        if self.vc[0] != self.version:
            raise self._version_error(node)
        t = self._unpack_hook(self._packed)
        if not isinstance(t, Tensor):
            raise TypeError(f"unpack hook of a tensor saved by {node.name()} returned a "
                            f"{type(t).__name__}; it must return a Tensor")
        shape, dtype = self._meta
        if t._data.shape != shape or t._data.dtype != dtype:
            raise RuntimeError(
                f"unpack hook of a tensor saved by {node.name()} returned a tensor of shape "
                f"{list(t._data.shape)} and dtype {t._data.dtype}; the saved tensor had shape "
                f"{list(shape)} and dtype {dtype}")
        if self.is_output and t.grad_fn is None:
            # An output comes back with this node as its history, like PyTorch's.
            t = Tensor._make(t._data, True, node, self.output_nr, self.vc, t._device)
        return t

    def _version_error(self, node) -> RuntimeError:
        shape, dtype = self._meta if self._meta is not None else (self._data.shape, self._data.dtype)
        where = f"output {self.output_nr} of {node.name()}" if self.is_output else f"an input of {node.name()}"
        return RuntimeError(
            "one of the variables needed for gradient computation has been modified by an "
            f"inplace operation: [{dtype} {list(shape)}], which is {where}, is at version "
            f"{self.vc[0]}; expected version {self.version} instead. Hint: enable anomaly "
            "detection to find the operation that failed to compute its gradient, with "
            "autograd.set_detect_anomaly(True)."
        )

    def release(self) -> None:
        self.tensor = None
        self._data = None
        self._packed = None
        self._unpack_hook = None
        self._freed = True
