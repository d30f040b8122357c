"""The op table and the one hot path every op goes through.

A primitive is one :func:`defop` entry, and everything about it is there:

- ``fwd(xp, *inputs, **attrs)`` computes the result with the array module of the inputs'
  device;
- ``vjp`` holds one reverse rule per input,
  ``rule(F, g, out, *inputs, **attrs) -> gradient for that input`` (None: not differentiable);
- ``jvp`` the forward-mode rules, one per input, ``rule(F, t, out, *inputs, **attrs)``, or a
  declared property: :data:`SELF_ADJOINT` (a symmetric Jacobian, so the reverse rules serve),
  :class:`linear_in` (the op applied to the tangents);
- ``public``, ``methods``, ``reflected``, ``inplace``: the names of the function in
  ``gradtrace.autograd`` and of the Tensor methods that call it, generated with the forward's
  signature (see :func:`_caller`).

A rule computes with ``F``, the namespace of primitives: plain array functions in a normal
backward, autograd ops under ``create_graph`` so the backward is itself differentiable. The
same one-line rule serves both, and the engine (not the rule) sums a broadcast gradient back to
its input's shape. Composites (:func:`defcomposite`) and hand-written wrappers that check their
arguments (:func:`expose`) declare their public names the same way; the ops package attaches
all of them (``FUNCTIONS``, ``METHODS``) in one loop.

What to save for backward is read from the rules themselves: a rule that mentions ``out`` makes
the op save its output, one that mentions an input saves that input, and only for the inputs
that need a gradient in this call. Inputs listed in ``meta`` are kept as shape and dtype only.
"""
from __future__ import annotations

import dis
import functools
import inspect
import os
import weakref

import numpy

from . import autocast_mode as _amp
from .anomaly_mode import record_trace as _record_anomaly_trace
from . import backend
from . import record_function as _rf
from .backend import CPU
from .grad_mode import STATE as _THREAD
from . import views
from .node import ERR_FREED, INFERENCE_VC, AccumulateGrad, Node, SavedVariable
from .dtypes import BFLOAT16, is_floating
from .promotion import can_cast, float_type, result_type, torch_name
from ._tensor import Tensor, _init_tensor, _new_tensor as _new
from .forward_ad import move_tangent as _move_tangent, propagate as _propagate_tangents

__all__ = ["OpDef", "defop", "defcomposite", "expose", "expose_inplace", "SELF_ADJOINT", "linear_in", "OPS",
           "COMPOSITES", "FUNCTIONS", "METHODS", "apply_op", "apply_inplace", "ArrayF", "TensorF",
           "CopySlices",
           "Meta"]

OPS: dict[str, "OpDef"] = {}
COMPOSITES: dict[str, object] = {}
_RF = _rf.STATE
_FUNCTION = int(_rf.RecordScope.FUNCTION)


class Meta:
    """Shape and dtype of an input whose values the backward does not need."""

    __slots__ = ("shape", "dtype")

    def __init__(self, array):
        self.shape = array.shape
        self.dtype = array.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.strip("_").split("_"))


def _names_used(fn) -> set:
    """Local names a rule reads (its parameters among them), from its bytecode."""
    names = set()
    code = fn.__code__
    for ins in dis.get_instructions(fn):
        if ins.opname.startswith(("LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE")):
            arg = ins.argval
            names.update(arg if isinstance(arg, tuple) else (arg,))
    # A nested function (comprehension, lambda) reads parameters through cells.
    names.update(code.co_cellvars)
    return names


class OpNode(Node):
    """Backward node of a table op; one subclass per op, named like ``MulBackward0``.

    Saved values are reachable by the names the rules give them, as in PyTorch:
    ``node._saved_a`` (the value) and ``node._raw_saved_a`` (the SavedVariable, whose
    ``register_hooks(pack, unpack)`` adds per-tensor hooks); ``out`` (or ``result``) names
    the output. They are properties that each op's node class gets (:func:`_saved_accessors`)
    rather than a ``__getattr__``: a class with ``__getattr__`` makes every attribute read
    of its instances, ``node.next_edges`` in the engine's loop included, about five times
    slower (CPython cannot specialize those reads).
    """

    # _saved: [out, *inputs] as saved (None: not saved); _attrs: the op's attributes;
    # _saves_tensors: whether _saved holds a SavedVariable, to unpack at apply and release
    # after (nodes of ops with a scalar operand often hold none, and skip both loops).
    __slots__ = ("_saved", "_attrs", "_saves_tensors")
    op: "OpDef"

    def apply(self, grads, F):
        saved = self._saved
        if saved is None:
            raise RuntimeError(ERR_FREED)
        op = self.op
        # ``saved`` is [out, *inputs]: saved tensors come back as arrays (tensors when the
        # backward is differentiable), scalars and Meta as they are.
        vals = self._unpack_saved(F is TensorF) if self._saves_tensors else saved
        if op.nout == 1:
            g = grads[0]
        else:
            g = _fill_missing(self, grads, F)
            out = vals[0]
            if out is not None and not isinstance(out, tuple):
                vals = [tuple(out), *vals[1:]]
        attrs = self._attrs
        edges = self.next_edges
        if op.joint is not None and F is not TensorF:
            # One call for every input that needs a gradient (shared intermediates).
            needs = tuple([e is not None for e in edges])
            return list(op.joint(F, g, *vals, needs=needs, **attrs))
        rules = op.vjp
        result = [None] * len(edges)
        # rule(F, g, out, *inputs, **attrs), for each input with somewhere to send a gradient.
        for i, edge in enumerate(edges):
            if edge is not None:
                result[i] = rules[i](F, g, *vals, **attrs) if attrs else rules[i](F, g, *vals)
        return result

    def _unpack_saved(self, differentiable: bool) -> list:
        vals = []
        for s in self._saved:
            if s.__class__ is SavedVariable:
                # The array itself when it is there and unchanged (nearly always, and read
                # here without a call); hooks, a freed save or a stale version go the long way.
                d = s._data
                if differentiable or d is None or s.vc[0] != s.version:
                    d = s.unpack(self) if differentiable else s.unpack_data(self)
                vals.append(d)
            else:
                vals.append(s)
        return vals

    def release_variables(self) -> None:
        saved = self._saved
        if saved is not None:
            if self._saves_tensors:
                for s in saved:
                    if s.__class__ is SavedVariable:
                        s.release()
            self._saved = None


def _saved_accessors(input_names) -> dict:
    """The ``_saved_<name>`` and ``_raw_saved_<name>`` properties of an op's node class."""
    props = {}
    for idx, key in [(0, "out"), (0, "result")] + [(i + 1, n) for i, n in enumerate(input_names)]:
        props[f"_saved_{key}"] = property(_saved_getter(idx, key, raw=False))
        props[f"_raw_saved_{key}"] = property(_saved_getter(idx, key, raw=True))
    return props


def _saved_getter(idx: int, key: str, raw: bool):
    def get(node):
        saved = node._saved
        if saved is None:
            raise RuntimeError(ERR_FREED)
        value = saved[idx]
        if value is None:
            raise AttributeError(f"{node.name()} did not save '{key}' in this call")
        if raw or value.__class__ is not SavedVariable:
            return value
        return value.unpack(node)

    return get


def _fill_missing(node, grads, F):
    """Multi-output ops: a gradient that never arrived is zeros of that output's shape."""
    out = []
    for g, meta in zip(grads, node.input_metadata):
        if g is None:
            g = F.zeros(shape=meta[0], dtype=meta[1], device=meta[2])
        out.append(g)
    return tuple(out)


class OpDef:
    """One primitive: its forward, its backward rules and what its node saves."""

    __slots__ = ("name", "record_name", "fwd", "vjp", "joint", "nout", "differentiable", "view",
                 "moves_device", "node_cls", "_uses_out", "_uses_in", "_meta", "_plans", "check",
                 "jvp", "doc", "input_names", "simple", "fusions", "promote")

    def __init__(self, name, fwd, vjp, nout, view, meta, node_name, check, doc, moves_device,
                 joint=None, promote=None):
        self.name = name
        # An overload ("sum.dim", for its own node, SumBackward1) is recorded and named in
        # errors by its base name, as PyTorch's profiler shows aten::sum for both.
        self.record_name = name.partition(".")[0]
        self.fwd = fwd
        self.vjp = tuple(vjp) if vjp is not None else ()
        self.joint = joint
        self.nout = nout
        self.differentiable = any(r is not None for r in self.vjp)
        self.view = view
        self.moves_device = moves_device
        # One output, never a view, on its inputs' device: apply_op's fast path can run it.
        self.simple = nout == 1 and not view and not moves_device
        self.check = check
        # PyTorch's type promotion where NumPy's differs (see apply_op and promotion.py):
        # None, ELEMENTWISE or FLOATING.
        self.promote = promote
        self.jvp = None
        self.doc = doc
        # {name of an op: fn}: where this op's gradient (from its rule 0) feeds only a node of
        # that op, compiled autograd may run the pair as ``fn(g, args, attrs, next_args,
        # next_attrs)`` (the rules' argument lists; None: run the two rules after all).
        self.fusions: dict = {}
        self._meta = frozenset(meta)
        self._plans: dict[int, tuple] = {}
        # Which parameters each rule reads: decides what a node must save.
        self._uses_out = []
        self._uses_in = []
        self.input_names = ()
        for rule in self.vjp:
            if rule is None:
                self._uses_out.append(False)
                self._uses_in.append(())
                continue
            params = rule.__code__.co_varnames[: rule.__code__.co_argcount]
            used = _names_used(rule)
            # params: (F, g, out, in0, ..., in{n-1}, *attrs): one rule per input, so the
            # first len(vjp) parameters after ``out`` are the inputs, the rest attributes.
            self._uses_out.append(len(params) > 2 and params[2] in used)
            inputs = params[3:3 + len(self.vjp)]
            self.input_names = self.input_names or tuple(inputs)
            self._uses_in.append(tuple(i for i, p in enumerate(inputs) if p in used))
        cls_name = node_name or f"{_camel(name)}Backward0"
        self.node_cls = type(cls_name, (OpNode,), {"__slots__": (), "op": self,
                                                   "__module__": "gradtrace.autograd.ops",
                                                   **_saved_accessors(self.input_names)})

    def save_plan(self, mask: int) -> tuple:
        """(save output?, input indices to save, input indices to keep as Meta) for the set of
        inputs (bit mask) that need a gradient in this call."""
        plan = self._plans.get(mask)
        if plan is None:
            save_out = False
            idx: set = set()
            for i, rule in enumerate(self.vjp):
                if mask >> i & 1 and rule is not None:
                    save_out = save_out or self._uses_out[i]
                    idx.update(self._uses_in[i])
            meta = tuple(sorted(i for i in idx if i in self._meta))
            full = tuple(sorted(i for i in idx if i not in self._meta))
            plan = self._plans[mask] = (save_out, full, meta)
        return plan

    def __repr__(self):
        return f"<op {self.name}>"


def defop(name: str, fwd, vjp=(), *, jvp=None, nout: int = 1, view=False, meta=(),
          node_name: str | None = None, check=None, doc: str = "",
          moves_device: bool = False, public=(), methods=(), reflected=(),
          inplace=(), joint=None, promote=None) -> OpDef:
    """Register a primitive op: its forward, its reverse and forward-mode rules, and the
    public function and Tensor methods that call it.

    Args:
        name: op name as the profiler shows it (``"mul"``); an overload of an op that needs its
            own backward node (``"squeeze.dim"``: SqueezeBackward1) adds ``.<overload>``,
            which the profiler and errors leave out (PyTorch's ``aten::squeeze.dim`` too shows
            as ``aten::squeeze``).
        fwd: ``fwd(xp, *inputs, **attrs)`` returning an array (a tuple when ``nout > 1``).
            Its parameter names and defaults are the signature of the generated function.
        vjp: one rule per input, ``rule(F, g, out, *inputs, **attrs)``, None where an input
            gets no gradient; empty for a non-differentiable op.
        jvp: the forward-mode rules: one per input, ``rule(F, t, out, *inputs, **attrs)``
            giving that input's contribution to the output's tangent (``t``: the input's
            tangent), None where ``vjp`` has None; or :data:`SELF_ADJOINT`; or
            :class:`linear_in`. A differentiable op needs one (a test checks).
        nout: number of outputs (None: as many as each call's forward returns, ``split``).
            The rules of an op with several get ``g`` as a tuple, zeros for an output that
            got no gradient.
        view: the output is a view of input 0 and shares its version counter (in-place on one
            is seen by both); a callable ``view(**attrs)`` decides per call. For an op with
            several outputs, ``view(input_shape, **attrs)`` gives each output's basic index
            key into input 0 (they are all views, under one node).
        meta: input indices the rules need only the shape/dtype of.
        node_name: backward node class name (default ``<Name>Backward0``).
        check: ``check(*datas, **attrs)`` raising a clear error before the forward runs.
        doc: docstring of the generated function.
        moves_device: the output lives on ``attrs["device"]`` rather than the inputs' device.
        public: name(s) of the generated function in ``gradtrace.autograd`` (``"exp"``).
        methods: Tensor method name(s) bound to the same function (``("add", "__add__")``).
        reflected: Tensor method name(s) with the operands swapped (``"__radd__"``).
        inplace: Tensor method name(s) that write the result into ``self`` (``"add_"``).
        joint: ``joint(F, g, out, *inputs, needs, **attrs)`` giving every input's gradient in
            one call (None where ``needs[i]`` is false), for an op whose gradients share work
            (layer_norm's statistics): a node runs it instead of the rules when its backward
            is on arrays. The rules stay for the differentiable backward and decide what is
            saved, so ``joint`` reads only what the rules of the inputs it serves read.
        promote: :data:`ELEMENTWISE` for an op whose result dtype is PyTorch's promotion of
            its inputs' (add, mul, where...), :data:`FLOATING` for one that also makes
            integers the default float (div, exp, sqrt...); None where NumPy's dtype is
            PyTorch's already (or the op fixes its own).

    Returns:
        The :class:`OpDef`, also in ``OPS[name]``.
    """
    if name in OPS:
        raise ValueError(f"op '{name}' is already registered")
    op = OpDef(name, fwd, vjp, nout, view, meta, node_name, check, doc, moves_device, joint,
               promote)
    op.jvp = _forward_rules(op, jvp)
    OPS[name] = op
    ArrayF._add(op)
    TensorF._add(op)
    _expose_op(op, public, methods, reflected, inplace)
    return op


def defcomposite(name: str, *, public=(), methods=()):
    """Register a composite built from primitives: it needs no backward code and no forward-mode
    rule. Under the profiler it shows as one FUNCTION range (``"softsign"``) around its
    primitives' ranges.

    Args:
        name: the name the profiler shows.
        public: name(s) of the function in ``gradtrace.autograd``.
        methods: Tensor method name(s) bound to it.

    Returns:
        A decorator that registers the function and returns the composite.
    """

    listed = name in _amp.LISTED   # in autocast's table: may run on casts (_autocast_call)

    def wrap(fn):
        def composite(*args, **kwargs):
            if listed and _THREAD.ops.autocast is not None:
                result = _autocast_call(name, composite, args, kwargs, kwargs, _THREAD.ops)
                if result is not None:
                    return result
            if _RF.on:
                rec = _rf.begin(_FUNCTION, name, -1, 0, args, str(_first_device(args)))
                try:
                    return fn(*args, **kwargs)
                finally:
                    _rf.end(rec)
            return fn(*args, **kwargs)

        composite.__name__ = composite.__qualname__ = name
        composite.__doc__ = fn.__doc__
        composite.__wrapped__ = fn
        COMPOSITES[name] = composite
        _expose(composite, public, methods)
        return composite

    return wrap


def expose(*, public=(), methods=()):
    """Decorator for a hand-written public function (one that checks or normalises its
    arguments before calling a primitive, such as ``reshape``'s -1): the names it has in
    ``gradtrace.autograd`` and on Tensor.

    Returns:
        A decorator that registers the function and returns it unchanged.
    """

    def wrap(fn):
        _expose(fn, public, methods)
        return fn

    return wrap


def _first_device(args):
    for a in args:
        if isinstance(a, Tensor):
            return a._device
    return CPU


# --------------------------------------------------------------------------- forward-mode rules


class _SelfAdjoint:
    __slots__ = ()

    def __repr__(self):
        return "SELF_ADJOINT"


#: ``jvp=SELF_ADJOINT``: the op's Jacobian is symmetric (diagonal for an elementwise op, with
#: broadcasting; symmetric for softmax), so J·t equals Jᵀ·t and each reverse rule applied to
#: the tangent is the forward rule.
SELF_ADJOINT = _SelfAdjoint()


class linear_in:
    """``jvp=linear_in(0, 2)``: the op is linear in those inputs taken together (the others are
    constants: indices, masks). Input i's contribution is the op itself with its tangent in
    place of input i and zeros in place of the other linear inputs."""

    __slots__ = ("inputs",)

    def __init__(self, *inputs: int):
        self.inputs = inputs


def _forward_rules(op, jvp):
    """The per-input forward rules that ``jvp`` declares (None: none declared)."""
    if jvp is None:
        return None
    if jvp is SELF_ADJOINT:
        return op.vjp
    if isinstance(jvp, linear_in):
        rules = tuple(_linear_rule(op.name, i, jvp.inputs) if i in jvp.inputs else None
                      for i in range(len(op.vjp)))
    else:
        rules = tuple(jvp)
    if len(rules) != len(op.vjp):
        raise ValueError(f"defop('{op.name}'): {len(rules)} forward rules for {len(op.vjp)} inputs")
    missing = [i for i, (f, r) in enumerate(zip(rules, op.vjp)) if r is not None and f is None]
    if missing:
        raise ValueError(f"defop('{op.name}'): inputs {missing} have a reverse rule but no "
                         "forward rule")
    return rules


def _linear_rule(name, i, linear):
    def rule(F, t, out, *inputs, **attrs):
        args = [t if j == i else (F.zeros_like(x) if j in linear else x)
                for j, x in enumerate(inputs)]
        return getattr(F, name)(*args, **attrs)

    return rule


# --------------------------------------------------------------------------- public names

#: What the ops package attaches, once: the public functions (``autograd.exp``) and the Tensor
#: methods (``Tensor.exp``) that defop, defcomposite and expose declared, by name.
FUNCTIONS: dict[str, object] = {}
METHODS: dict[str, object] = {}


def _names(names) -> tuple:
    return (names,) if isinstance(names, str) else tuple(names)


def _register(table, kind, names, fn) -> None:
    for n in _names(names):
        if n in table:
            raise ValueError(f"{kind} '{n}' is already registered (by {table[n].__name__})")
        table[n] = fn


def _expose(fn, public, methods) -> None:
    _register(FUNCTIONS, "public function", public, fn)
    _register(METHODS, "Tensor method", methods, fn)


def _expose_op(op, public, methods, reflected, inplace) -> None:
    public, methods = _names(public), _names(methods)
    if public or methods:
        _expose(_caller(op, (public or methods)[0], "function"), public, methods)
    for n in _names(reflected):
        _register(METHODS, "Tensor method", n, _caller(op, n, "reflected"))
    for n in _names(inplace):
        _register(METHODS, "Tensor method", n, _caller(op, n, "inplace"))


def _caller(op, name: str, form: str):
    """A function that calls ``op`` straight through apply_op (``form="function"``), with the
    operands swapped (``"reflected"``), or through apply_inplace (``"inplace"``).

    Its parameters are the forward's: the inputs, then the attributes with the forward's
    defaults (``tril(x, diagonal=0)``). It is compiled from source, as dataclasses and
    namedtuple do, so that it has real parameters (``help()`` and ``inspect`` show them) and
    costs exactly one Python call before apply_op, like a hand-written wrapper; a generic
    ``*args, **kwargs`` closure would pay for binding them on every op.
    """
    code = op.fwd.__code__
    if code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS) or code.co_kwonlyargcount:
        raise ValueError(f"defop('{op.name}'): a forward with *args, **kwargs or keyword-only "
                         "parameters has no signature to generate; write the function with "
                         "@expose")
    params = list(code.co_varnames[1:code.co_argcount])           # after xp
    n_inputs = len(op.vjp) if op.vjp else len(params) - len(op.fwd.__defaults__ or ())
    inputs, attrs = params[:n_inputs], params[n_inputs:]
    attr_dict = "{" + ", ".join(f"{a!r}: {a}" for a in attrs) + "}" if attrs else "None"
    if form == "reflected":
        if n_inputs != 2 or attrs:
            raise ValueError(f"defop('{op.name}'): only a binary op without attributes has a "
                             "reflected method")
        sig, call = "self, other", "_apply_op(_OP, (other, self))"
    elif form == "inplace":
        sig = ", ".join(["self", *inputs[1:], *attrs])
        call = f"_apply_inplace(_OP, self, ({''.join(i + ', ' for i in inputs[1:])}), {attr_dict})"
    else:
        sig = ", ".join(inputs + attrs)
        call = f"_apply_op(_OP, ({''.join(i + ', ' for i in inputs)}), {attr_dict})"
    namespace = {"_OP": op, "_apply_op": apply_op, "_apply_inplace": apply_inplace}
    # Named as a file in this package, so that tracebacks say which op's function it is and
    # the profiler's stacks skip its frame as the engine's, not the user's, call site.
    where = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"<defop {op.name}>")
    exec(compile(f"def {name}({sig}):\n    return {call}\n", where, "exec"), namespace)  # noqa: S102
    fn = namespace[name]
    if form != "reflected":
        fn.__defaults__ = op.fwd.__defaults__
    fn.__doc__ = op.doc or f"The ``{op.name}`` primitive (see gradtrace.autograd.ops)."
    fn.__module__ = "gradtrace.autograd"
    return fn


# --------------------------------------------------------------------------- F namespaces


class _ArrayF:
    """Primitives as plain array functions: ``F.exp(x)`` calls exp's forward on ``x``'s module."""

    def __init__(self, xp):
        self.xp = xp
        for op in OPS.values():
            self._bind(op)

    def _bind(self, op):
        # partial, not a lambda: it binds xp in C, where a ``lambda *a, **k`` wrapper was a
        # second Python frame and an args tuple per call (0.3 us, on every F call of every
        # backward rule).
        setattr(self, op.name, functools.partial(op.fwd, self.xp))


class _ArrayFTable:
    """One :class:`_ArrayF` per array module, made on first use."""

    def __init__(self):
        self._by_xp: dict = {}

    def __call__(self, xp):
        f = self._by_xp.get(xp)
        if f is None:
            f = self._by_xp[xp] = _ArrayF(xp)
        return f

    def _add(self, op):
        for f in self._by_xp.values():
            f._bind(op)


ArrayF = _ArrayFTable()


class _TensorF:
    """Primitives as autograd ops (used when ``create_graph=True``)."""

    def _add(self, op):
        setattr(self, op.name, lambda *a, **k: apply_op(op, a, k))


TensorF = _TensorF()


# --------------------------------------------------------------------------- dispatch

# Results are built with ``_init_tensor(_new(Tensor), ...)``: one call that sets every field
# (``Tensor._init``), without the conversions of ``Tensor.__init__``.


def _describe(inputs) -> str:
    parts = []
    for x in inputs:
        if isinstance(x, Tensor):
            parts.append(f"{x._data.dtype}{list(x._data.shape)} on {x._device}")
        else:
            parts.append(type(x).__name__)
    return ", ".join(parts)


def _op_error(op, inputs, exc) -> Exception:
    """An op's forward failing on its arrays: RuntimeError naming the op and its inputs, or
    IndexError for an index out of range, the class PyTorch's indexing raises (in its words:
    dimension, not NumPy's axis)."""
    if isinstance(exc, IndexError):
        return IndexError(f"{op.record_name}: {str(exc).replace(' for axis ', ' for dimension ')}"
                          f" (inputs: {_describe(inputs)})")
    return RuntimeError(f"{op.record_name}: {exc} (inputs: {_describe(inputs)})")


def _device_error(op, inputs):
    devs = sorted({str(x._device) for x in inputs if isinstance(x, Tensor)})
    return RuntimeError(
        f"{op.record_name}: expected all tensors to be on the same device, but found tensors on "
        f"{' and '.join(devs)} (inputs: {_describe(inputs)})")


def _gradient_edge(t):
    """Where the gradient of tensor ``t`` goes: its grad_fn, or its leaf's AccumulateGrad."""
    fn = t.grad_fn
    if fn is not None:
        return (fn, t._output_nr)
    ref = t._acc
    acc = ref() if ref is not None else None
    if acc is None:
        acc = AccumulateGrad(t)
        t._acc = weakref.ref(acc)
    return (acc, 0)


def apply_op(op: OpDef, inputs, attrs=None):
    """Run ``op`` on ``inputs`` (tensors or scalars) and record its node when grad is needed.

    This is the hot path of the engine: one thread-local read, one test for autocast (whose
    casts, see :func:`_autocast_call`, run the op again on cast inputs), one input loop, the
    record when profiled, the check and the forward. Ops with one output that is not a view, run
    while no anomaly mode, forward-AD level or inference mode is on (one flag per thread),
    finish here; the rest finish in :func:`_finish_general`. Both record the node and its
    results with the same helper, :func:`_record`.

    Args:
        op: the primitive to run.
        inputs: its inputs, tensors or Python scalars, in the order its ``fwd`` takes them.
        attrs: keyword attributes of the op (``{"dim": 1}``), or None.

    Returns:
        The result tensor (a tuple of tensors for an op with several outputs).
    """
    ops = _THREAD.ops   # this op's one thread-local read: the rest are plain slots
    if ops.autocast is not None:   # autocast on in this thread: the op may run on casts
        result = _autocast_op(op, inputs, attrs, ops)
        if result is not None:
            return result
    dev = None
    mask = 0
    bit = 1
    datas = []
    dt = None        # the first tensor's dtype, and whether another tensor has another
    mixed = False
    for x in inputs:
        if isinstance(x, Tensor):
            d = x._device
            if d is not dev:
                if dev is not None:
                    raise _device_error(op, inputs)
                dev = d
            if x.requires_grad:
                mask |= bit
            a = x._data
            if a.dtype is not dt:
                if dt is None:
                    dt = a.dtype
                else:
                    mixed = True
            datas.append(a)
        else:
            datas.append(x)
        bit <<= 1
    if dev is None:
        dev = CPU
    bf16 = dt is _BF16 or (mixed and _any_bfloat16(datas))
    if mask and not (ops.grad_enabled and op.differentiable):
        mask = 0
    # Under the profiler the op runs inside a FUNCTION record; the sequence number is then
    # taken before the op runs so the record can carry the one its node will get.
    # (try/finally costs nothing on Python 3.11+ when no exception is raised.)
    seq = -1
    rec = None
    if _RF.on:
        if mask:
            seq = ops.next_seq()
        rec = _rf.begin(_FUNCTION, op.record_name, seq, 0, inputs, dev._name,
                        ops.cpu_stream.current if dev is CPU else backend.current_stream(dev))
    try:
        if op.check is not None:
            op.check(*datas, **(attrs or {}))
        try:
            if bf16:
                out = _bfloat16_forward(op, dev.xp, datas, attrs)
            else:
                out = op.fwd(dev.xp, *datas, **attrs) if attrs else op.fwd(dev.xp, *datas)
            # NumPy's dtype is PyTorch's when the tensors share one and the result has it
            # (Python numbers are weak in both); anything else is worked out.
            if op.promote is not None and (mixed or out.dtype is not dt):
                out = _promoted(op, datas, attrs, dev, out)
        except (ValueError, TypeError, IndexError) as exc:
            raise _op_error(op, inputs, exc) from None
        if ops.slow or not op.simple:
            return _finish_general(op, inputs, datas, attrs, dev, mask, seq, out, ops)
        if out.__class__ is not dev.ndarray:
            out = dev.xp.asarray(out)
        if not mask:
            return _init_tensor(_new(Tensor), out, False, None, 0, [0], dev)
        if bf16:
            return _bfloat16_node(_record(op, inputs, datas, attrs, mask, seq, dev, ops, out,
                                          [0]))
        return _record(op, inputs, datas, attrs, mask, seq, dev, ops, out, [0])
    finally:
        if rec is not None:
            _rf.end(rec)


# --------------------------------------------------------------------------- bfloat16

_BF16 = BFLOAT16
_FLOAT32 = numpy.dtype(numpy.float32)


def _any_bfloat16(datas) -> bool:
    return any(getattr(d, "dtype", None) is _BF16 for d in datas)


def _bfloat16_forward(op, xp, datas, attrs):
    """``op``'s forward for bfloat16 inputs: run on their float32 values (NumPy's matmul,
    einsum and reductions have no bfloat16 loops, and PyTorch's CPU kernels compute in float32
    too), floating results rounded to bfloat16 where PyTorch's result dtype is bfloat16 (not
    where another float input or an explicit ``dtype=`` decides). A view op runs on the
    bfloat16 array itself, so that the view shares its memory."""
    view = op.view
    if view is True or (view and (op.nout != 1 or view(**(attrs or {})))):
        return op.fwd(xp, *datas, **attrs) if attrs else op.fwd(xp, *datas)
    rounds = not (attrs and "dtype" in attrs) and result_type(*datas) is _BF16
    cast = [d.astype(_FLOAT32) if getattr(d, "dtype", None) is _BF16 else d for d in datas]
    out = op.fwd(xp, *cast, **attrs) if attrs else op.fwd(xp, *cast)
    if not rounds:
        return out
    if isinstance(out, (tuple, list)):
        return tuple(_to_bfloat16(o) for o in out)
    return _to_bfloat16(out)


def _to_bfloat16(a):
    dt = getattr(a, "dtype", None)
    return a.astype(_BF16) if dt is not None and dt.kind == "f" else a


class _BFloat16Node:
    """Mixed into a node class for a node of an op on bfloat16 values: its rules run on
    float32 values (its gradient and saved arrays upcast), as its forward did; the engine
    rounds each gradient to its input's dtype as it hands it on. A node gets this class (of
    the same name, :func:`_bfloat16_node`) only where bfloat16 is involved, so that other
    nodes pay nothing for it."""

    __slots__ = ()

    def apply(self, grads, F):
        if F is not TensorF:
            grads = [_upcast(g) if g is not None else None for g in grads]
        return super().apply(grads, F)

    def _unpack_saved(self, differentiable: bool) -> list:
        vals = super()._unpack_saved(differentiable)
        return vals if differentiable else [_upcast(v) for v in vals]


_BF16_NODE_CLASSES: dict = {}


def _bfloat16_node(result):
    """``result`` (a tensor or a tuple of them), its node's class made the bfloat16 one."""
    for t in (result if isinstance(result, tuple) else (result,)):
        node = t.grad_fn if isinstance(t, Tensor) else None
        if node is not None:
            cls = node.__class__
            sub = _BF16_NODE_CLASSES.get(cls)
            if sub is None:
                sub = _BF16_NODE_CLASSES[cls] = type(cls.__name__, (_BFloat16Node, cls), {
                    "__slots__": (), "__module__": cls.__module__})
            node.__class__ = sub
            break
    return result


def _upcast(a):
    """A bfloat16 array (or a tuple of arrays) as float32; anything else as it is."""
    if a.__class__ is tuple:
        return tuple(_upcast(x) for x in a)
    if a.__class__ is numpy.ndarray and a.dtype is _BF16:   # (not Meta, not numbers)
        return a.astype(_FLOAT32)
    return a


# --------------------------------------------------------------------------- autocast


def _autocast_op(op, inputs, attrs, ops):
    """apply_op inside an autocast region: the op run with autocast off on its inputs cast as
    :data:`autocast_mode.POLICY` says, or None when the table leaves it as it is."""
    if op.name not in ops.autocast.names:   # most ops: as they are, after this lookup
        return None
    return _autocast_call(op.name, op, inputs, {}, attrs, ops)


def _autocast_call(name, fn, args, kwargs, attrs, ops):
    """``fn(*args, **kwargs)`` for op ``name`` (a composite; for a primitive ``fn`` is its
    OpDef, run by apply_op with ``attrs``) under autocast:
    eligible tensors cast to the dtype its policy gives, then run with autocast off in this
    thread (PyTorch's ExcludeDispatchKeyGuard: a composite's own ops are not cast again).
    ``attrs``: the call's keyword attributes (a ``dtype`` there keeps an fp32_opt op as it is).
    None when the op has no policy on its tensors' device type or nothing to cast to."""
    state = ops.autocast
    tensors = [x for x in args if isinstance(x, Tensor)]
    if kwargs:
        tensors += [x for x in kwargs.values() if isinstance(x, Tensor)]
    if not tensors:
        return None
    device_type = tensors[0]._device.type
    lower = state.active.get(device_type)
    if lower is None:
        return None
    policy = _amp.POLICY[device_type].get(name)
    if policy is None:
        banned = _amp.BANNED[device_type].get(name)
        if banned is not None:
            raise RuntimeError(banned)
        return None
    dtypes = [x._data.dtype for x in tensors
              if _amp.eligible(x._data, device_type, x._device.type)]
    dtype = _amp.target_dtype(policy, lower, dtypes, attrs)
    if dtype is None:
        return None

    def cast(x):
        if (isinstance(x, Tensor) and x._data.dtype != dtype
                and _amp.eligible(x._data, device_type, x._device.type)):
            return _autocast_cast(x, dtype, lower, state, ops.grad_enabled)
        return x

    ops.autocast = None
    try:
        if fn.__class__ is OpDef:
            return apply_op(fn, [cast(x) for x in args], attrs)
        return fn(*[cast(x) for x in args], **{k: cast(v) for k, v in kwargs.items()})
    finally:
        ops.autocast = state


def _autocast_cast(x, dtype, lower, state, grad_enabled):
    """``x`` cast to ``dtype`` as a recorded ``to_dtype`` op (ToCopyBackward0: its gradient
    arrives in ``x``'s dtype). The lower-precision cast of a float32 leaf that requires grad
    (a parameter) is made once per outermost region when the cache is on and grad mode too
    (PyTorch's ``cached_cast``: a cast made under no_grad, without history, is not kept for
    later ops; the entry holds the leaf, so its id stays its own)."""
    cache = (grad_enabled and state.cache_enabled and dtype == lower
             and x._data.dtype == _amp.FLOAT32 and x.requires_grad and x._base is None
             and x.grad_fn is None)
    if cache:
        hit = state.cache.get(id(x))
        if hit is not None:
            return hit[1]
    out = apply_op(OPS["to_dtype"], (x,), {"dtype": dtype})
    if cache:
        state.cache[id(x)] = (x, out)
    return out


#: ``defop(promote=...)``: the result dtype is PyTorch's promotion of the inputs' dtypes
#: (ELEMENTWISE), and for FLOATING ops integers and bools become the default float.
ELEMENTWISE, FLOATING = "elementwise", "floating"


def _promoted(op, datas, attrs, dev, out):
    """``out`` in PyTorch's result dtype: as it is where NumPy's agrees, else the forward run
    again on inputs cast to that dtype (PyTorch computes in the result dtype: an int64 tensor
    times 2.5 is float32 arithmetic). Python numbers stay as they are (weak, as in both).
    A FLOATING op's forward must give a float for integer inputs (NumPy's ufuncs give
    float64 or float16), so that the mismatch is seen."""
    want = result_type(*datas)
    if op.promote is FLOATING:
        want = float_type(want)
    if out.dtype == want:
        return out
    cast = _cast(datas, want)
    out = op.fwd(dev.xp, *cast, **attrs) if attrs else op.fwd(dev.xp, *cast)
    return out if out.dtype == want else out.astype(want)


def _cast(datas, dtype):
    """The arrays (and NumPy scalars) among ``datas`` in ``dtype``; Python numbers as they are."""
    return [d.astype(dtype) if getattr(d, "dtype", dtype) != dtype else d for d in datas]


def _finish_general(op, inputs, datas, attrs, dev, mask, seq, out, ops):
    """The result of everything the common case leaves out: several outputs, views, ops
    that move devices, inference mode, forward AD and anomaly mode."""
    if op.moves_device:
        dev = attrs["device"]
    if op.nout != 1:
        out = tuple(o if o.__class__ is dev.ndarray else dev.xp.asarray(o) for o in out)
        if op.view and isinstance(inputs[0], Tensor):
            result = _finish_view(op, inputs, datas, attrs, dev, mask, seq, out, ops)
        else:
            result = _finish_multi(op, inputs, datas, attrs, dev, mask, seq, out, ops)
            if mask and any(o.dtype is _BF16 for o in out):
                _bfloat16_node(result)
    else:
        if out.__class__ is not dev.ndarray:
            out = dev.xp.asarray(out)
        view = op.view
        if view and (view is True or view(**attrs)) and isinstance(inputs[0], Tensor):
            result = _finish_view(op, inputs, datas, attrs, dev, mask, seq, out, ops)
        elif not mask:
            result = _init_tensor(_new(Tensor), out, False, None, 0,
                                  INFERENCE_VC if ops.inference else [0], dev)
        else:
            result = _record(op, inputs, datas, attrs, mask, seq, dev, ops, out, [0])
            if out.dtype is _BF16 or _any_bfloat16(datas):
                _bfloat16_node(result)
    if ops.fw_level:
        _propagate_tangents(op, TensorF, inputs, attrs, result, _THREAD)
    return result


def _record(op, inputs, datas, attrs, mask, seq, dev, ops, out, vc, result_cls=None):
    """The backward node of one op call and the result that has it as ``grad_fn``, built
    without ``Node.__init__`` (this is the hot path, one call per recorded op).

    The node is numbered (with ``seq`` when the profiler took it already), linked to the
    inputs that need a gradient (``mask``), given one metadata entry per output, and saves
    what its backward rules read (:meth:`OpDef.save_plan`): the output, the inputs needing a
    gradient whose values a rule uses, and Meta for those it only sizes. ``topological_nr``
    is one more than the highest of its children's; a child that gains a parent here may not
    gain children of its own afterwards (:meth:`Node.add_next_edge`).

    Args:
        out: the output array, or for an op with several outputs the tuple of them.
        vc: the result's version counter (a view's is its base's); None for several outputs
            that are not views (each gets its own).
        result_cls: the result's class (:class:`View` for a view; default Tensor).

    Returns:
        The result tensor, or the tuple of them for an op with several outputs.
    """
    cls = op.node_cls
    node = cls.__new__(cls)
    node.sequence_nr = ops.next_seq() if seq < 0 else seq
    node.thread_id = ops.thread_id
    edges = []
    topo = 0
    bit = 1
    for x in inputs:
        if mask & bit:
            fn = x.grad_fn
            if fn is not None:
                edge = (fn, x._output_nr)
            else:
                edge = _gradient_edge(x)
                fn = edge[0]
            fn._has_parent = True
            if fn.topological_nr >= topo:
                topo = fn.topological_nr + 1
            edges.append(edge)
        else:
            edges.append(None)
        bit <<= 1
    node.next_edges = tuple(edges)
    node.topological_nr = topo
    node._has_parent = False
    node._extra = None
    stream = ops.cpu_stream.current if dev is CPU else backend.current_stream(dev)
    single = op.nout == 1
    if single:
        node.input_metadata = ((out.shape, out.dtype, dev, stream),)
        result = _init_tensor(_new(result_cls or Tensor), out, True, node, 0, vc, dev)
    else:
        node.input_metadata = tuple([(o.shape, o.dtype, dev, stream) for o in out])
        # Integer and boolean outputs (indices) carry no gradient.
        cls = result_cls or Tensor
        result = tuple(_init_tensor(_new(cls), o, is_floating(o.dtype),
                                    node if is_floating(o.dtype) else None, i,
                                    [0] if vc is None else vc, dev) for i, o in enumerate(out))
    if ops.anomaly:   # keep where the forward op was called (and the running node, if any)
        _record_anomaly_trace(node, _THREAD)
    save_out, full, meta = op._plans.get(mask) or op.save_plan(mask)
    saved = [None] * (len(inputs) + 1)
    tensors = False
    if save_out:
        # One output is saved with its version; several are kept as arrays.
        saved[0] = SavedVariable(result, is_output=True) if single else out
        tensors = single
    for i in full:
        x = inputs[i]
        if isinstance(x, Tensor):
            saved[i + 1] = SavedVariable(x)
            tensors = True
        else:
            saved[i + 1] = x
    if meta:
        for i in meta:
            d = datas[i]
            saved[i + 1] = Meta(d) if hasattr(d, "shape") else d
    node._saved = saved
    node._attrs = attrs
    node._saves_tensors = tensors
    rec = ops.ca_recording   # compiled autograd keys the node now (None: one slot read)
    if rec is not None:
        rec.add(node)
    return result


def _finish_view(op, inputs, datas, attrs, dev, mask, seq, out, ops):
    """A view shares its base's storage and version counter, so in-place writes to either are
    detected, and remembers how it was made from its root base (:mod:`.views`).

    An op with several outputs (split, unbind) gives several views under its one node; its
    ``view(shape, **attrs)`` names each output's index key into the input, which is the step
    that output remembers (so replaying it slices one piece, not all of them)."""
    base, data = inputs[0], datas[0]
    multi = op.nout != 1
    # Of the view ops only reshape may copy (a non-contiguous input); then its result is a
    # new tensor, as PyTorch's reshape gives. (Checked for it alone: the check costs ~0.4 us.)
    if op.name == "reshape" and not dev.xp.may_share_memory(out, data):
        if not mask:
            return _init_tensor(_new(Tensor), out, False, None, 0, [0], dev)
        return _record(op, inputs, datas, attrs, mask, seq, dev, ops, out, [0])
    vc = base._vc
    if mask:
        result = _record(op, inputs, datas, attrs, mask, seq, dev, ops, out, vc, View)
    elif multi:
        result = tuple(_init_tensor(_new(View), o, False, None, 0, vc, dev) for o in out)
    else:
        result = _init_tensor(_new(View), out, False, None, 0, vc, dev)
    root = base._base
    meta = views.creation_meta(ops.grad_enabled, multi,
                               base._creation_meta if root is not None else views.DEFAULT)
    prefix = base._view_steps if root is not None else ()
    root = root if root is not None else base
    if not multi:
        _link_view(result, root, prefix + ((op, attrs, Meta(data)),), vc, meta)
        return result
    index, shape = OPS["index"], Meta(data)
    keys = op.view(data.shape, **attrs) if attrs else op.view(data.shape)
    for r, key in zip(result, keys):
        _link_view(r, root, prefix + ((index, {"key": key}, shape),), vc, meta)
    return result


def _link_view(view, root, steps, vc, meta) -> None:
    view._base = root
    view._view_steps = steps
    view._attr_version = vc[0]
    view._creation_meta = meta


def regenerate_view_grad_fn(view, fn):
    """The ``grad_fn`` of ``view`` now that its base's version moved past the one ``fn`` was
    made at: its view ops replayed on the base's current history (PyTorch's
    ``VariableHooks::grad_fn``). The replay records no profiler range (PyTorch's does not).

    Args:
        view: a :class:`View`.
        fn: its stored ``grad_fn`` (None when it was made without history).

    Returns:
        The new ``grad_fn`` (also stored on the view), or ``fn`` when the base has no history
        to replay from.
    """
    base = view._base
    if not base.requires_grad:
        return fn
    if view._creation_meta != views.DEFAULT:
        raise RuntimeError(views.inplace_view_error(
            view._creation_meta, fn.name() if fn is not None else None, view._output_nr,
            rebased=True))
    version = view._vc[0]
    ops = _THREAD.ops
    dev = base._device
    cur, data = base, base._data
    for op, attrs, _meta in view._view_steps:
        out = op.fwd(dev.xp, data, **attrs) if attrs else op.fwd(dev.xp, data)
        cur = _record(op, (cur,), (data,), attrs, 1, -1, dev, ops, out, [0])
        data = out
    old, old_nr = fn, view._output_nr
    fn = cur.grad_fn
    view.grad_fn = fn
    view._output_nr = 0
    view.requires_grad = True
    view._attr_version = version
    # retain_grad follows the tensor's current value onto the new node, as PyTorch's
    # update_tensor_hooks_on_new_gradfn moves it; hooks registered before stay on the old
    # node and see the gradient of the old value (PyTorch's documented behaviour).
    ex = old._extra if old is not None else None
    if ex is not None and ex.retains_grad_hooks and ex.retains_grad_hooks.get(old_nr) is view:
        del ex.retains_grad_hooks[old_nr]
        fn._add_retains_grad_hook(0, view)
    return fn


# View lives here, beside the replay that its grad_fn runs (regenerate_view_grad_fn) and the
# dispatcher that makes views; the slots its properties wrap are Tensor's.
_GRAD_FN = Tensor.__dict__["grad_fn"]
_REQUIRES_GRAD = Tensor.__dict__["requires_grad"]


class View(Tensor):
    """A tensor made by a view op (indexing with slices, transpose, permute, expand, a reshape
    that copies nothing): it shares its base's storage and version counter (PyTorch's
    ``DifferentiableViewMeta``).

    Its ``grad_fn`` is checked on every read: when the shared version moved since it was made
    (the base, or another view of it, was modified in place), it is regenerated from the
    base's current history (:func:`regenerate_view_grad_fn`). A plain tensor's
    ``grad_fn`` stays a plain slot read, so only views pay for the check.

    Attributes:
        _base: the root base (never itself a view).
        _view_steps: the view ops from the base to this view (:data:`~.views.ViewSteps`).
        _attr_version: the version ``grad_fn`` was made at.
        _creation_meta: how it was made (PyTorch's ``CreationMeta``: :data:`~.views.DEFAULT`,
            ``NO_GRAD_MODE`` with grad mode off, ``MULTI_OUTPUT_NODE`` as one of several views
            that one op returned).
    """

    __slots__ = ("_view_steps", "_attr_version", "_creation_meta")

    @property
    def grad_fn(self):
        fn = _GRAD_FN.__get__(self)
        if self._attr_version == self._vc[0]:
            return fn
        return regenerate_view_grad_fn(self, fn)

    @grad_fn.setter
    def grad_fn(self, fn):
        _GRAD_FN.__set__(self, fn)

    @property
    def requires_grad(self):
        # A view of a base that gains history in place gains it too (PyTorch's view of a
        # tensor that did not require grad, after ``base.mul_(w)``).
        if _REQUIRES_GRAD.__get__(self):
            return True
        if self._attr_version == self._vc[0] or self._creation_meta == views.NO_GRAD_MODE:
            return False
        if self._creation_meta == views.MULTI_OUTPUT_NODE:
            # Its grad_fn cannot be regenerated (reading it raises); it needs a gradient
            # when its base does (PyTorch's DifferentiableViewMeta::requires_grad).
            return self._base.requires_grad
        return self.grad_fn is not None

    @requires_grad.setter
    def requires_grad(self, value):
        _REQUIRES_GRAD.__set__(self, value)

    def detach_(self):
        # Detaching a view in place would cut the history its base shares (PyTorch refuses
        # it for every view, with these words).
        raise RuntimeError("Can't detach views in-place. Use detach() instead.")


def _finish_multi(op, inputs, datas, attrs, dev, mask, seq, out, ops):
    if not mask:
        return tuple(Tensor._make(o, False, None, 0, [0], dev) for o in out)
    return _record(op, inputs, datas, attrs, mask, seq, dev, ops, out, None)


# --------------------------------------------------------------------------- in-place ops


def apply_inplace(op: OpDef, self, others=(), attrs=None):
    """Run ``op`` on ``(self, *others)`` and write the result into ``self``'s storage.

    The tensor's version counter is bumped; when grad is recorded, ``self`` is rebased onto
    the new node (its old history becomes the node's first edge). When ``self`` is a view,
    its base is rebased instead, on a :class:`CopySlices` node, and the view's own
    ``grad_fn`` is regenerated from the base's when next read (PyTorch's ``rebase_history``).
    """
    if _THREAD.ops.autocast is not None:
        # PyTorch's autocast lists name out-of-place ops: an in-place one runs as it is.
        with _op_flag("autocast", None):
            return apply_inplace(op, self, others, attrs)
    inputs = (self,) + tuple(others)
    mask = 0
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor) and x.requires_grad:
            mask |= 1 << i
    grad_mode = _THREAD.ops.grad_enabled and op.differentiable
    recording = bool(mask) and grad_mode
    base = self._base
    # A view made in no_grad mode counts as requiring grad when its base does (PyTorch's);
    # that, or one of several views an op returned, may not be modified while recording.
    if (base is not None and self._creation_meta != views.DEFAULT and grad_mode
            and (mask or base.requires_grad)):
        fn = Tensor.__dict__["grad_fn"].__get__(self)   # as stored, not regenerated
        raise RuntimeError(f"{op.record_name}_: " + views.inplace_view_error(
            self._creation_meta, fn.name() if fn is not None else None, self._output_nr,
            rebased=False))
    if recording and base is not None:
        if base.grad_fn is None and base.requires_grad:
            raise RuntimeError(f"{op.record_name}_: {views.ERR_LEAF_VIEW}")
    elif recording and self.grad_fn is None and self.requires_grad:
        raise RuntimeError(
            f"{op.record_name}_: a leaf Variable that requires grad is being used in an in-place "
            "operation; use out-of-place ops or wrap it in autograd.no_grad()")
    if not recording:
        with _op_flag("grad_enabled", False):
            out = apply_op(op, inputs, attrs)
        _check_castable(op, self, out)
        _write_into(op, self, out._data)
        self._vc[0] += 1
        if _THREAD.ops.fw_level:
            _move_tangent(out, self)
        return self
    # When the rules need input 0's old values, which the write destroys, they get a copy.
    needs_old = 0 in op.save_plan(mask)[1]
    old = Tensor._make(self._data.copy() if needs_old else self._data, self.requires_grad,
                       self.grad_fn, self._output_nr, [0], self._device)
    out = apply_op(op, (old,) + inputs[1:], attrs)
    _check_castable(op, self, out)
    _write_into(op, self, out._data)
    self._vc[0] += 1
    node = out.grad_fn
    if base is not None:
        _rebase_view(self, base, node)
    else:
        self.grad_fn = node
        self._output_nr = 0
        self.requires_grad = True
    # Whatever the node saved of its output must be checked against self's versions now.
    saved = node._saved
    if saved and saved[0].__class__ is SavedVariable:
        if base is not None:
            # The output is the view as it is now, whose history runs through the base's
            # CopySlices (as PyTorch's SavedVariable with is_inplace_on_view): saved as the
            # view itself, its grad_fn then the one regenerated from the base.
            saved[0] = SavedVariable(self)
        else:
            sv = saved[0]
            sv.vc = self._vc
            sv.version = self._vc[0]
    if _THREAD.ops.fw_level:
        _move_tangent(out, self)
    return self


class CopySlices(Node):
    """The base's node after an in-place op on one of its views (PyTorch's ``CopySlices``).

    Its edges are the base's previous history followed by the in-place op's other inputs. The
    gradient of the base is the incoming gradient outside the view's region, and inside it
    the in-place op's gradient for its ``self`` (the view before the write). The in-place op's
    node ``fn`` is not in the graph itself: this node calls it, which is why it carries
    ``fn``'s sequence number and thread (a profiler pairs it with the forward op).
    """

    __slots__ = ("_fn", "_steps")

    def __init__(self, base_edge, fn, steps: "views.ViewSteps", base_shape):
        """
        Args:
            base_edge: where the base's gradient went before the write (None: nowhere).
            fn: the node the in-place op recorded, its input 0 being the view.
            steps: how the view is made from the base.
            base_shape: the base's shape.
        """
        super().__init__((base_edge, *fn.next_edges[1:]), fn.sequence_nr)
        self.thread_id = fn.thread_id
        _shape, dtype, device, stream = fn.input_metadata[0]
        self.input_metadata = ((tuple(base_shape), dtype, device, stream),)
        self._fn = fn
        self._steps = steps

    def apply(self, grads, F):
        g = grads[0]
        view_grad = views.replay(F, g, self._steps)
        result = list(self._fn.apply([view_grad], F))
        if self.next_edges[0] is None:
            result[0] = None
            return result
        inner = result[0] if result[0] is not None else F.zeros_like(view_grad)
        result[0] = F.where(self._region(), views.scatter(F, inner, self._steps), g)
        return result

    def _region(self):
        """Boolean mask, shaped like the base, of the elements the view covers."""
        af = ArrayF(self.input_metadata[0][2].xp)   # the mask is an array in either mode
        shape = self._fn.input_metadata[0][0]
        return views.scatter(af, af.xp.ones(shape, dtype=bool), self._steps) != 0

    def release_variables(self) -> None:
        self._fn.release_variables()


def _check_castable(op, self, out) -> None:
    """PyTorch's refusal to write a promoted result into a tensor of a lower category
    (``int_tensor.add_(2.5)``, ``int_tensor.sqrt_()``, ``clamp_(0.5)``), where NumPy would
    truncate; before anything is written, so ``self`` keeps its values. ``copy_`` casts by
    definition."""
    if op.name != "copy" and not can_cast(out._data.dtype, self._data.dtype):
        raise RuntimeError(f"result type {torch_name(out._data.dtype)} can't be cast to the "
                           f"desired output type {torch_name(self._data.dtype)}")


def expose_inplace(fn, name: str):
    """Register Tensor method ``name`` as the in-place form of the composite ``fn``
    (``x.addmm_(a, b)``): ``fn(self, ...)`` written into self with ``copy_``, which records
    CopyBackwards where PyTorch records the op's own node (the gradients are the same). A
    result of a higher category is refused first, as apply_inplace refuses it (copy_ alone
    would cast it)."""
    def method(self, *args, **kwargs):
        out = fn(self, *args, **kwargs)
        if not can_cast(out._data.dtype, self._data.dtype):
            raise RuntimeError(f"result type {torch_name(out._data.dtype)} can't be cast to "
                               f"the desired output type {torch_name(self._data.dtype)}")
        return self.copy_(out)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"In-place :func:`{fn.__name__}`."
    _expose(method, (), name)
    return method


def _rebase_view(view, base, node) -> None:
    """After an in-place op on ``view`` recorded ``node``: the base's history goes through a
    CopySlices node, and the view (whose version is now ahead of its ``grad_fn``) replays
    itself on it when its ``grad_fn`` is next read."""
    base_edge = _gradient_edge(base) if base.requires_grad else None
    base.grad_fn = CopySlices(base_edge, node, view._view_steps, base._data.shape)
    base._output_nr = 0
    base.requires_grad = True
    view.requires_grad = True


def _write_into(op, self, data) -> None:
    if data.shape != self._data.shape:
        raise RuntimeError(
            f"{op.record_name}_: output with shape {list(self._data.shape)} doesn't match the "
            f"broadcast shape {list(data.shape)}")
    try:
        self._data[...] = data
    except ValueError as exc:  # e.g. a read-only broadcast view
        raise RuntimeError(f"{op.record_name}_: cannot write into this tensor in place ({exc})") from None


class _op_flag:
    """One of this thread's op flags (OpState: grad mode, autocast) set for the block, and
    restored after it: an in-place op's inner apply_op runs with grad mode or autocast off.
    Only flags that OpState.slow does not depend on."""

    __slots__ = ("_name", "_value", "_prev")

    def __init__(self, name, value):
        self._name = name
        self._value = value

    def __enter__(self):
        ops = _THREAD.ops
        self._prev = getattr(ops, self._name)
        setattr(ops, self._name, self._value)

    def __exit__(self, *exc):
        setattr(_THREAD.ops, self._name, self._prev)
        return False
