"""Code generation: a program becomes one straight-line Python function.

Registers become local names (reused once dead, so the function has few locals); a node's
rules are called directly with ``ArrayF``; every other step calls the engine's own function
for it (hooks, validation, accumulation), so the replay and the engine cannot disagree.

What the capture cannot know, the first replay tells: a rule's output that does not fit its
input (a bias gradient of the batch's shape, summed down to the bias's) goes through the
engine's :func:`conform`, which notes the shape it got at that site; the code generated
after that sums it down directly, on axes folded at generation time, with conform's own
arithmetic (:func:`sum_over`: the engine's values bit for bit), behind a guard that hands
any other shape to :func:`conform` again.

Two nodes whose ops declare a fusion (``OpDef.fusions``; cross_entropy's NLL and log_softmax)
become one call where nothing else reads the gradient between them, outside profiled and
CUDA-graph variants (see :func:`_fusable`).
"""
from __future__ import annotations

import logging
import math

import numpy

from .. import engine as _engine
from .. import record_function as _rf
from ..dispatch import ArrayF, _fill_missing
from ..node import GraphRoot
from ..ops.shape import ones_vector, sum_axes, sum_over
from .key import GENERIC
from .program import Program, SavedKind, StepKind, Unsupported

__all__ = ["generate", "compile_program"]

log = logging.getLogger("gradtrace.autograd.compiled_autograd")
_BACKWARD = int(_rf.RecordScope.BACKWARD_FUNCTION)
# The node named in errors about the root gradients (the eager engine's GraphRoot).
_ROOT = GraphRoot((), ())


def _add(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def _generic(task, node, grads):
    """A node that is not a table op (a custom Function...): the engine applies it and
    validates its outputs."""
    outs = _engine.apply_node(task, node, grads, task.ops)
    return _engine.validate_outputs(task, node, outs) if outs else [None] * len(node.next_edges)


def _conform_noted(seen, site, task, node, i, g, shape, dtype):
    """:func:`engine.conform`, noting at ``site`` the shape and dtype that needed it (for the
    next code generation, :func:`_fold_conform`)."""
    out = _engine.conform(task, node, i, g, shape, dtype)
    seen[site] = (g.shape, g.dtype)
    return out


def _fold_axes(seen_shape, seen_dtype, shape, dtype):
    """The axes conform() sums a gradient of ``seen_shape`` over to fit ``shape`` (empty: a
    reshape alone); None where it takes more than that (a cast, which stays with conform(),
    or a shape it does not broadcast from)."""
    if seen_dtype != dtype or seen_shape == shape or not _engine._expandable(shape, seen_shape):
        return None
    return sum_axes(seen_shape, shape)


def _unpack(node, p):
    return node._saved[p]._run_unpack_hook(node)._data


def _multi_out(out):
    if out is not None and out.__class__ is not tuple:
        out = tuple(out)
    return out


def _liveness(steps):
    """For each step, the registers whose last use it is (to free them right after)."""
    last = {}
    for i, s in enumerate(steps):
        for r in s.writes:
            last[r] = i
        for r in s.reads:
            if r is not None:
                last[r] = i
    frees = [[] for _ in steps]
    for r, i in last.items():
        frees[i].append(r)
    return frees


_GRAPH_REFUSES = {StepKind.UNPACK: "an unpack hook", StepKind.TENSOR_PRE_HOOKS: "a tensor hook",
                  StepKind.PRE_HOOK: "a node pre-hook", StepKind.POST_HOOK: "a node post-hook"}


def generate(program: Program, keep_graph: bool, profiled: bool, graph_mode: bool = False,
             order=None):
    """Straight-line Python for the program; returns (source, namespace, number of inputs).

    The function is ``run(T, N, G)`` with ``T`` the graph task, ``N`` the new graph's nodes in
    walk order (with ``order``, a recording's nodes: node ``j`` is ``N[order[j]]``) and ``G``
    the root gradients. With ``graph_mode`` (CUDA graph capture) it is
    ``run(T, N, G, I, O, K)``: saved arrays come from the static inputs ``I``, the gradients to
    accumulate go to ``O`` and every register is kept alive in ``K`` (the captured graph owns
    that memory).

    Raises:
        Unsupported: in graph mode, for a step that cannot be captured (a Python hook...).
    """
    info = program.nodes_info
    ns = {"_add": _add, "_generic": _generic, "_unpack": _unpack, "_fill": _fill_missing,
          "_multi": _multi_out, "_conform": _engine.conform, "_ROOT": _ROOT,
          "_tph": _engine.call_tensor_pre_hooks, "_pre": _engine.call_pre_hooks,
          "_post": _engine.call_post_hooks, "_acc": _engine.accumulate_grad,
          "_into": _engine._accumulate_into_tensor,
          "_begin": _rf.begin, "_end": _rf.end, "_BW": _BACKWARD,
          "_noted": _conform_noted, "_SEEN": program.conform_seen, "_sum_over": sum_over,
          "_mm": numpy.matmul,
          "_fused": _fused,
          "F": ArrayF(program.device.xp) if program.device else None}
    lines = ["def run(T, N, G, I=None, O=None, K=None):" if graph_mode else "def run(T, N, G):"]
    emit = lines.append
    maybe_none = program.maybe_none
    frees = _liveness(program.steps) if not graph_mode else None
    # Whether any step runs user code (a hook, an unpack hook, a custom node's backward),
    # which could register a hook on a leaf during the replay.
    direct_acc = not any(s.kind in _GRAPH_REFUSES or (
        s.kind is StepKind.CALL and info[s.node]["kind"] == GENERIC) for s in program.steps)
    consts: dict = {}
    n_inputs = [0]

    def const(value, prefix):
        try:
            ident = (prefix, value, type(value))   # equal shapes/dtypes share one name
            hash(ident)
        except TypeError:
            ident = (prefix, id(value))
        name = consts.get(ident)
        if name is None:
            name = f"{prefix}{len(consts)}"
            consts[ident] = name
            ns[name] = value
        return name

    names: dict = {}
    pool: list = []

    def v(r):
        if r is None:
            return "None"
        name = names.get(r)
        if name is None:
            name = names[r] = pool.pop() if pool else f"v{len(names)}"
        return name

    def validate(r, shape, dtype, node, i, site, indent="    "):
        s, d, x = const(shape, "S"), const(dtype, "D"), v(r)
        guard = f"{x} is not None and " if r in maybe_none else ""
        seen = program.conform_seen.get(site)
        axes = _fold_axes(*seen, shape, dtype) if seen is not None else None
        if axes is None:
            fix = (f"_conform(T, {node}, {i}, {x}, {s}, {d})" if seen is not None else
                   f"_noted(_SEEN, {site!r}, T, {node}, {i}, {x}, {s}, {d})")
            emit(f"{indent}if {guard}({x}.shape != {s} or {x}.dtype != {d}): {x} = {fix}")
            return
        # The shape the first replay saw here, summed down as conform() sums it.
        emit(f"{indent}if {guard}{x}.shape == {const(seen[0], 'S')} and {x}.dtype == {d}: "
             f"{x} = " + (sum_code(x, seen[0], axes, shape, dtype, s) if axes
                          else f"{x}.reshape({s})"))
        emit(f"{indent}elif {guard}({x}.shape != {s} or {x}.dtype != {d}): "
             f"{x} = _conform(T, {node}, {i}, {x}, {s}, {d})")

    def sum_code(x, seen_shape, axes, shape, dtype, s):
        """The code summing ``x`` (of ``seen_shape``) over ``axes`` to ``shape``. A bias's
        gradient on NumPy (leading axes, to the one axis left, float32/64) is one GEMV
        with its ones vector a constant of the program: sum_over's arithmetic without its
        tests, its cache lookup and its reshapes, where these cost two thirds of a small
        layer's sum."""
        lead = len(axes)
        rows = math.prod(seen_shape[:lead])
        general = f"_sum_over(F.xp, {x}, {axes!r}, {s})"
        if (ns["F"] is None or ns["F"].xp is not numpy or axes != tuple(range(lead))
                or len(shape) != 1 or tuple(shape) != tuple(seen_shape[lead:])
                or dtype.kind != "f" or dtype.itemsize < 4 or not rows or not shape[0]):
            return general
        ones = const(ones_vector(numpy, rows, dtype), "O")
        rhs = x if lead == 1 else f"{x}.reshape({rows}, {shape[0]})"
        # Contiguous only, as sum_over's own fast path: the same GEMV, so the same bits as
        # the eager engine's sum (a strided array goes to sum_over, which sums it with sum).
        return f"_mm({ones}, {rhs}) if {x}.flags.c_contiguous else {general}"

    def keep(regs, indent="    "):
        if graph_mode and regs:
            emit(f"{indent}K.extend(({', '.join(v(r) for r in regs)},))")

    def begin_record(j, indent="    "):
        if not profiled:
            return indent
        meta = info[j]["meta"]
        dev = str(meta[0][2]) if meta else "cpu"
        st = const(meta[0][3], "T") if meta else "None"
        emit(f"{indent}_r = _begin(_BW, {info[j]['name']!r}, _n.sequence_nr, _n.thread_id, "
             f"None, {dev!r}, {st}, _n)")
        emit(f"{indent}try:")
        return indent + "    "

    def end_record(indent="    "):
        if profiled:
            emit(f"{indent}finally:")
            emit(f"{indent}    _end(_r)")

    def regs(rs):
        return ", ".join(v(r) for r in rs)

    # Two nodes in one call (see _fusable), at the first's step: the second's step emits
    # nothing, and the register between them is never made.
    fused = {} if graph_mode or profiled else _fusable(program)
    absorbed = {k2 for k2, _ in fused.values()}
    never_made = {program.steps[k1].arg[1][0] for k1 in fused}
    current = -1
    for k, s in enumerate(program.steps):
        kind = s.kind
        j = s.node
        if graph_mode and kind in _GRAPH_REFUSES:
            raise Unsupported(_GRAPH_REFUSES[kind])
        if j >= 0 and j != current and k not in absorbed:
            emit(f"    _n = N[{j if order is None else order[j]}]  # {info[j]['name']}")
            current = j
        if kind is StepKind.ROOT:
            r = s.writes[0]
            emit(f"    {v(r)} = G[{s.arg}]")
            shape, dtype = program.root_meta[s.arg]
            validate(r, shape, dtype, "_ROOT", s.arg, (k, s.arg))
        elif kind is StepKind.SUM:
            a, b = s.reads
            op = "_add({}, {})" if a in maybe_none or b in maybe_none else "{} + {}"
            emit(f"    {v(s.writes[0])} = " + op.format(v(a), v(b)))
        elif kind is StepKind.UNPACK:
            emit(f"    {v(s.writes[0])} = _unpack(_n, {s.arg})")
        elif kind is StepKind.TENSOR_PRE_HOOKS:
            lhs = ", ".join("_" if r is None else v(r) for r in s.arg)
            emit(f"    {lhs}, = _tph(T, _n, [{regs(s.reads)}])")
        elif kind is StepKind.PRE_HOOK:
            emit(f"    {regs(s.writes)}, = _pre(T, _n, [{regs(s.reads)}])")
        elif kind is StepKind.POST_HOOK:
            outs, grads, new = s.arg
            lhs = ", ".join("_" if r is None else v(r) for r in new)
            emit(f"    {lhs}, = _post(T, _n, [{regs(outs)}], [{regs(grads)}])")
        elif kind is StepKind.CALL and k in fused:
            _gen_fused(program, s, *fused[k], emit, v, const, validate, keep_graph, order)
        elif kind is StepKind.CALL and k in absorbed:
            pass
        elif kind is StepKind.CALL:
            _gen_call(program, k, s, emit, v, const, validate, keep, begin_record, end_record,
                      keep_graph, graph_mode, n_inputs)
        elif kind is StepKind.RELEASE:
            if not keep_graph and not graph_mode:
                emit("    _n.release_variables()")
        elif kind is StepKind.ACCUMULATE_GRAD:
            g = v(s.reads[0]) if s.reads else "None"
            if graph_mode:
                leaf = info[j].get("leaf_hooks")
                if leaf and leaf[1]:
                    raise Unsupported("a post-accumulate-grad hook")
                emit(f"    O.append({g})")
            else:
                ind = begin_record(j)
                if direct_acc and not info[j].get("leaf_hooks") and s.reads and \
                        s.reads[0] not in maybe_none:
                    # accumulate_grad's own work without its checks, which a replay settles
                    # here: its task always accumulates, into every leaf, without a graph;
                    # this leaf has no hooks and nothing the program runs can add one (no
                    # user code). 2: the references the register and the callee's parameter
                    # hold (see engine._accumulate_into_tensor).
                    emit(f"{ind}_into(_n.variable, {g}, False, 2)")
                else:
                    emit(f"{ind}_acc(T, _n, {g})")
                end_record()
        else:  # pragma: no cover - every kind is handled above
            raise AssertionError(kind)
        if frees is not None and frees[k]:
            dead = [v(r) for r in frees[k] if r not in never_made]
            if dead:
                emit(f"    del {', '.join(dead)}")
            pool.extend(dead)
            for r in frees[k]:
                names.pop(r, None)
    emit("    return None")
    return "\n".join(lines) + "\n", ns, n_inputs[0]


# --------------------------------------------------------------------------- fusion


def _fusable(program):
    """``{step: (step, fn)}``: each call of a node whose op declares a fusion with the op of
    the one node that reads its gradient (``OpDef.fusions``: cross_entropy's NllLossBackward0
    into LogSoftmaxBackward0), both with one gradient in and the first with one out, nothing
    but releases between them and no unpack hook on either (their saved tensors come straight
    from the nodes)."""
    steps, info = program.steps, program.nodes_info
    readers: dict = {}
    for k, s in enumerate(steps):
        for r in s.reads:
            if r is not None:
                readers.setdefault(r, []).append(k)
    pairs = {}
    for k, s in enumerate(steps):
        op = info[s.node].get("op") if s.kind is StepKind.CALL else None
        if op is None or not op.fusions or len(s.reads) != 1 or op.nout != 1:
            continue
        r, *others = s.arg[1]
        if r is None or any(o is not None for o in others) or len(readers.get(r, ())) != 1:
            continue
        k2 = readers[r][0]
        s2 = steps[k2]
        op2 = info[s2.node].get("op") if s2.kind is StepKind.CALL else None
        fn = op.fusions.get(op2.name) if op2 is not None else None
        if (fn is not None and op2.nout == 1 and s2.reads == (r,) and len(s2.arg[1]) == 1
                and s2.arg[1][0] is not None
                and all(steps[i].kind is StepKind.RELEASE for i in range(k + 1, k2))):
            pairs[k] = (k2, fn)
    return pairs


def _fused(task, F, fn, g, first, args, second, args2, shape, dtype):
    """Two nodes' rules through their op's fusion ``fn`` (see :func:`_fusable`), or, where it
    declines (None), the two rules with the first's gradient fitted to the second's input as
    the engine fits it (``shape``, ``dtype``)."""
    attrs, attrs2 = first._attrs or {}, second._attrs or {}
    out = fn(g, args, attrs, args2, attrs2)
    if out is None:
        w = first.op.vjp[0](F, g, *args, **attrs)
        if w.shape != shape or w.dtype != dtype:
            w = _engine.conform(task, first, 0, w, shape, dtype)
        out = second.op.vjp[0](F, w, *args2, **attrs2)
    return out


def _gen_fused(program, s, k2, fn, emit, v, const, validate, keep_graph, order):
    """The code of a fused pair (see :func:`_fusable`): ``_n`` is the first node (the caller
    set it), ``_m`` the second."""
    info = program.nodes_info
    s2 = program.steps[k2]
    first, second = info[s.node], info[s2.node]
    emit(f"    _m = N[{s2.node if order is None else order[s2.node]}]  # {second['name']}, fused")
    args = _rule_args(first, emit, "    ", v, [], False, None)
    args2 = _rule_args(second, emit, "    ", v, [], False, None, node="_m", prefix="b")
    shape, dtype = second["meta"][0][:2]
    r = s2.arg[1][0]
    emit(f"    {v(r)} = _fused(T, F, {const(fn, 'X')}, {v(s.reads[0])}, _n, "
         f"({', '.join(args)},), _m, ({', '.join(args2)},), {const(shape, 'S')}, "
         f"{const(dtype, 'D')})")
    e = second["edges"][0]
    meta = info[e[0]]["meta"][e[1]]
    validate(r, meta[0], meta[1], "_m", 0, (k2, 0))
    _release(first, emit, args, keep_graph)
    _release(second, emit, args2, keep_graph, node="_m", prefix="b")


def _gen_call(program, k, s, emit, v, const, validate, keep, begin_record, end_record,
              keep_graph, graph_mode, n_inputs):
    j = s.node
    entry = program.nodes_info[j]
    n_grads, outs = s.arg
    grads = s.reads[:n_grads]
    hooked = list(s.reads[n_grads:])
    name = entry["name"]
    if entry["kind"] == GENERIC:
        if graph_mode:
            raise Unsupported(f"a custom node ({name})")
        ind = begin_record(j)
        lhs = ", ".join("_" if r is None else v(r) for r in outs)
        emit(f"{ind}{lhs}, = _generic(T, _n, [{', '.join(v(r) for r in grads)}])")
        end_record()
        if not keep_graph:
            emit("    _n.release_variables()")
        return
    op = entry["op"]
    saved = entry["saved"]
    ind = begin_record(j)
    args = _rule_args(entry, emit, ind, v, hooked, graph_mode, n_inputs)
    if op.nout == 1:
        g = v(grads[0])
    else:
        emit(f"{ind}_g = _fill(_n, ({', '.join(v(r) for r in grads)},), F)")
        g = "_g"
        if saved and saved[0] is not SavedKind.NONE:   # a multi-output op saves a tuple
            emit(f"{ind}_o0 = _multi({args[0]})")
            args[0] = "_o0"
    kw = ", **_n._attrs" if entry["attrs"] else ""
    argstr = ", ".join(args)
    if op.joint is not None:   # every gradient in one call, as the node's apply does on arrays
        lhs = ", ".join("_" if r is None else v(r) for r in outs)
        needs = tuple(e is not None for e in entry["edges"])
        emit(f"{ind}{lhs}, = {const(op.joint, 'J')}(F, {g}, {argstr}, needs={needs!r}{kw})")
    for i, e in enumerate(entry["edges"]):
        if e is None:
            continue
        rule = op.vjp[i]
        r = outs[i]
        if op.joint is None:
            if rule is None:
                emit(f"{ind}{v(r)} = None")
                continue
            emit(f"{ind}{v(r)} = {const(rule, 'R')}(F, {g}, {argstr}{kw})")
        meta = program.nodes_info[e[0]]["meta"][e[1]]
        validate(r, meta[0], meta[1], "_n", i, (k, i), ind)
    end_record()
    keep([r for r in outs if r is not None])
    _release(entry, emit, args, keep_graph or graph_mode)


def _rule_args(entry, emit, ind, v, hooked, graph_mode, n_inputs, node="_n", prefix="a"):
    """The arguments of a table op node's rules, ``out`` then the inputs, as code: a saved
    tensor unpacked once into a local (``a{position}``; ``_s`` is the node's ``_saved``)."""
    saved = entry["saved"]
    sv = _saved_local(node, prefix)
    if any(what in (SavedKind.VALUE, SavedKind.TENSOR) for what in saved):
        emit(f"{ind}{sv} = {node}._saved")
    args = []
    for p, what in enumerate(saved):
        if what is SavedKind.NONE:
            args.append("None")
        elif what is SavedKind.VALUE:
            args.append(f"{sv}[{p}]")
        elif what is SavedKind.HOOKED:
            args.append(v(hooked.pop(0)))
        elif graph_mode:
            args.append(f"I[{n_inputs[0]}]")
            n_inputs[0] += 1
        else:
            emit(f"{ind}{prefix}{p} = {sv}[{p}].unpack_data({node})")
            args.append(f"{prefix}{p}")
    return args


def _saved_local(node, prefix):
    return "_s" if node == "_n" else f"_s{prefix}"


def _release(entry, emit, args, keep, node="_n", prefix="a"):
    """After a node's rules: its unpacked locals deleted and, unless the graph is kept, its
    saved tensors released (OpNode.release_variables() with the saved positions known: the
    key fixes which hold a SavedVariable, so no loop and no class test per position)."""
    temps = [a for a in args if a.startswith(prefix) and a[len(prefix):].isdigit()]
    if temps:
        emit(f"    del {', '.join(temps)}")
    if keep:
        return
    saved = entry["saved"]
    if entry["has_sv"]:
        sv = _saved_local(node, prefix)
        if not any(what in (SavedKind.VALUE, SavedKind.TENSOR) for what in saved):
            emit(f"    {sv} = {node}._saved")   # not read for the rules (_rule_args)
        emit("    " + "".join(f"{sv}[{p}].release(); " for p, what in enumerate(saved)
                              if what in (SavedKind.TENSOR, SavedKind.HOOKED))
             + f"{node}._saved = None")
    else:
        emit(f"    {node}._saved = None")


def compile_program(program: Program, keep_graph: bool, profiled: bool, order=None):
    """The program's function for this variant, generated and compiled on first use.

    ``order``: None for nodes passed in walk order, else the id of a recording's order in
    ``program.orders`` (nodes passed as that recording holds them).
    """
    variant = (keep_graph, profiled) if order is None else (keep_graph, profiled, order)
    fn = program.variants.get(variant)
    # Regenerated once a replay noted a shape the code does not fold yet.
    if fn is None or program.seen_at[variant] != len(program.conform_seen):
        program.seen_at[variant] = len(program.conform_seen)
        src, ns, _ = generate(program, keep_graph, profiled,
                              order=None if order is None else program.orders[order])
        code = compile(src, f"<compiled_autograd {len(program.steps)} steps>", "exec")
        exec(code, ns)  # noqa: S102 - our own generated code
        fn = program.variants[variant] = ns["run"]
        program.source[variant] = src
        if log.isEnabledFor(logging.DEBUG):
            log.debug("compiled autograd program (keep_graph=%s, profiled=%s), %d steps:\n%s",
                      keep_graph, profiled, len(program.steps), program.listing())
    return fn
