"""Capture: the engine runs the graph once with a recording call_function.

The engine's own loop (:func:`gradtrace.autograd.engine.execute`) schedules the nodes, with
its ready queue, dependency counts, input buffers and hook order; only how a node is called
is swapped for :class:`Recorder`, whose "gradients" are :class:`Register` s. A node call
records a CALL step and returns fresh registers; the engine's input buffer sums two of them
with ``+``, which records a SUM step. So the program lists what the eager engine does, in
the order it does it, by construction.
"""
from __future__ import annotations

from .. import engine as _engine
from ..dtypes import BFLOAT16
from ..node import AccumulateGrad, GraphRoot, SavedVariable
from .key import ACC, OP, kind_of, parse_key
from .program import Program, SavedKind, Step, StepKind, Unsupported

__all__ = ["capture", "Recorder", "Register"]


class Register:
    """A gradient during capture: the number of the register that will hold it."""

    __slots__ = ("nr", "recorder")

    def __init__(self, nr, recorder):
        self.nr = nr
        self.recorder = recorder

    def __add__(self, other):
        return self.recorder.sum(self, other)


def _saved_kinds(node):
    """What each saved position of an op node holds, as the program reads it.

    A position the op's save plan fills is a VALUE even when it holds None (an operand that
    was None): the key does not tell a None operand from a number (both are read at replay),
    so the program must read that position from the new node rather than assume None.
    """
    mask = 0
    for i, e in enumerate(node.next_edges):
        if e is not None:
            mask |= 1 << i
    save_out, full, meta = node.op.save_plan(mask)
    planned = {i + 1 for i in (*full, *meta)} | ({0} if save_out else set())
    return tuple((SavedKind.TENSOR if s._unpack_hook is None else SavedKind.HOOKED)
                 if s.__class__ is SavedVariable
                 else (SavedKind.NONE if s is None and p not in planned else SavedKind.VALUE)
                 for p, s in enumerate(node._saved))


class Recorder:
    """``(tensor_pre_hooks, call_function)`` for the engine that record steps instead."""

    def __init__(self, nodes, fields):
        self.index = {node: i for i, node in enumerate(nodes)}
        self.fields = fields
        self.steps: list = []
        self.n_regs = 0
        self.maybe_none: set = set()

    def reg(self, none=False) -> Register:
        r = Register(self.n_regs, self)
        self.n_regs += 1
        if none:
            self.maybe_none.add(r.nr)
        return r

    def _nrs(self, regs):
        return tuple(None if r is None else r.nr for r in regs)

    def sum(self, a, b) -> Register:
        out = self.reg(a.nr in self.maybe_none and b.nr in self.maybe_none)
        self.steps.append(Step(StepKind.SUM, -1, (a.nr, b.nr), (out.nr,)))
        return out

    def tensor_pre_hooks(self, task, node, grads):
        j = self.index[node]
        f = self.fields[j]
        if node.__class__ is AccumulateGrad:
            has = f["saved"] is not None and f["saved"][0]
        else:
            has = f["hooks"] is not None and (f["hooks"][1] or f["hooks"][2])
        if not has:
            return grads
        outs = [None if g is None else self.reg(True) for g in grads]
        self.steps.append(Step(StepKind.TENSOR_PRE_HOOKS, j, self._nrs(grads),
                               self._nrs([o for o in outs if o is not None]), self._nrs(outs)))
        return outs

    def call_function(self, task, node, grads):
        cls = node.__class__
        if cls is GraphRoot:
            outs = [self.reg() for _ in node.next_edges]
            for i, r in enumerate(outs):
                self.steps.append(Step(StepKind.ROOT, -1, (), (r.nr,), i))
            return outs
        j = self.index[node]
        if cls is AccumulateGrad:
            g = grads[0]
            self.steps.append(Step(StepKind.ACCUMULATE_GRAD, j, (g.nr,) if g is not None else ()))
            return ()
        hooks = self.fields[j]["hooks"]
        if hooks and hooks[0]:
            new = [self.reg(True) for _ in grads]
            self.steps.append(Step(StepKind.PRE_HOOK, j, self._nrs(grads), self._nrs(new)))
            grads = new
        kind = kind_of(cls)
        unpacked = []
        if kind == OP:
            for p, what in enumerate(_saved_kinds(node)):
                if what is SavedKind.HOOKED:
                    r = self.reg()
                    self.steps.append(Step(StepKind.UNPACK, j, (), (r.nr,), p))
                    unpacked.append(r.nr)
        outs = [self.reg(kind != OP) if e is not None else None for e in node.next_edges]
        self.steps.append(Step(StepKind.CALL, j, self._nrs(grads) + tuple(unpacked),
                               tuple(r.nr for r in outs if r is not None),
                               (len(grads), self._nrs(outs)), pure=kind == OP))
        if hooks and hooks[3]:
            new = [self.reg(True) if r is not None else None for r in outs]
            self.steps.append(Step(StepKind.POST_HOOK, j,
                                   tuple(r.nr for r in outs if r is not None) + self._nrs(grads),
                                   tuple(r.nr for r in new if r is not None),
                                   (self._nrs(outs), self._nrs(grads), self._nrs(new))))
            outs = new
        return outs


def _node_info(node, field):
    cls = node.__class__
    kind = kind_of(cls)
    entry = {"cls": cls, "kind": kind, "meta": node.input_metadata, "name": node.name(),
             "edges": tuple(None if a < 0 else (a, b)
                            for a, b in zip(field["edges"][::2], field["edges"][1::2])),
             "hooks": field["hooks"]}
    if kind == OP:
        entry["op"] = cls.op
        entry["attrs"] = bool(node._attrs)
        entry["saved"] = _saved_kinds(node)
        entry["has_sv"] = any(k in (SavedKind.TENSOR, SavedKind.HOOKED) for k in entry["saved"])
    elif kind == ACC:
        entry["leaf_hooks"] = field["saved"]
    return entry


def capture(nodes, key, root_edges):
    """Run the engine over the graph with a :class:`Recorder`; returns the Program (before
    the passes). Nothing runs: no rule, no hook, no accumulation, nothing released.

    Raises:
        Unsupported: node hooks on an AccumulateGrad, nodes that ran on different streams, or
            a bfloat16 node.
    """
    _, fields = parse_key(key)
    stream = None
    for node, field in zip(nodes, fields):
        if node.__class__ is AccumulateGrad and field["hooks"]:
            raise Unsupported("a node hook registered on an AccumulateGrad node")
        for m in node.input_metadata:
            if m[1] is BFLOAT16:
                # The eager engine runs a bfloat16 node's rules on float32 values
                # (dispatch.OpNode.apply); a program would run them in bfloat16.
                raise Unsupported("a bfloat16 node (its gradients are computed in float32 by "
                                  "the eager engine)")
            if stream is None:
                stream = m[3]
            elif m[3] is not stream and m[3] != stream:
                raise Unsupported("nodes ran on different streams")
    recorder = Recorder(nodes, fields)
    task = _engine.GraphTask(True, False, accumulate=True)
    _engine.execute(task, root_edges, [None] * len(root_edges),
                    calls=(recorder.tensor_pre_hooks, recorder.call_function, False))
    info = [_node_info(node, field) for node, field in zip(nodes, fields)]
    root_meta = [node.input_metadata[nr][:2] for node, nr in root_edges]
    return Program(key, info, recorder.steps, recorder.n_regs, recorder.maybe_none,
                   stream.device if stream is not None else None, stream, root_meta)
