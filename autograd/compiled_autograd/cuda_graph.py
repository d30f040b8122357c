"""CUDA graphs: a program's replay captured once (stream capture) and launched after.

Saved arrays are copied into static inputs before each launch (their addresses are baked
into the graph); the gradients for the leaves come out in static buffers and are accumulated
into ``.grad`` after the launch. Programs that hold something that cannot be captured (a
Python hook, a custom Function, an unpack hook, a host sync) fall back to plain replay.
"""
from __future__ import annotations

import logging

from .. import engine as _engine
from ..backend import Stream, graph_capture
from ..dispatch import Meta
from .codegen import generate
from .program import SavedKind, StepKind, Unsupported

__all__ = ["CudaGraphRunner", "gather", "try_cuda_graph"]

log = logging.getLogger("gradtrace.autograd.compiled_autograd")


class CudaGraphRunner:
    """One CUDA graph of a program: static inputs, the graph, static outputs.

    Saved arrays are copied into the static inputs before each launch (their addresses are
    baked into the graph); the gradients for the leaves come out in static buffers and are
    accumulated into ``.grad`` after the launch. Non-array saved values (Python scalars) and
    op attributes are baked into the kernels, so they are compared before each launch.
    """

    def __init__(self, program, nodes, grads):
        src, ns, n_inputs = generate(program, True, False, graph_mode=True)
        exec(compile(src, "<compiled_autograd cuda graph>", "exec"), ns)  # noqa: S102
        self.body = ns["run"]
        self.task = _engine.GraphTask(True, False, accumulate=True)
        self.program = program
        self.acc_nodes = [s.node for s in program.steps if s.kind is StepKind.ACCUMULATE_GRAD]
        inputs, consts = gather(program, nodes)
        if len(inputs) != n_inputs:  # pragma: no cover - generator and gather disagree
            raise Unsupported("internal: input count mismatch")
        self.consts = consts
        # Capture on a side stream (the legacy default stream cannot be captured), ordered
        # against the program's stream with events.
        self.main = program.stream
        self.side = side = Stream(program.device)
        side.wait_event(self.main.record_event())
        with side:
            # Static buffers: copies of this run's inputs, kept for the graph's lifetime.
            self.static_in = [x.copy() for x in inputs]
            self.static_grads = [g.copy() for g in grads]
            # Warm-up on the side stream so its memory pool holds the blocks the capture
            # will ask for (no cudaMalloc may happen while capturing), with the products on
            # the cuBLAS handle the capture uses (made here; its heuristics cached here).
            with graph_capture():
                self.body(self.task, nodes, self.static_grads, self.static_in, [], [])
        side.synchronize()
        self.keep = []
        self.outputs = []
        native = side.native
        native.begin_capture()
        try:
            with side, graph_capture():
                self.body(self.task, nodes, self.static_grads, self.static_in, self.outputs,
                          self.keep)
        except BaseException:
            try:
                native.end_capture()
            except Exception:  # noqa: BLE001 - the capture is already broken
                pass
            raise
        self.graph = native.end_capture()

    def run(self, nodes, grads, keep_graph):
        inputs, consts = gather(self.program, nodes)
        if consts != self.consts:
            return False
        side = self.side
        side.wait_event(self.main.record_event())
        with side:
            for dst, src in zip(self.static_grads, grads):
                dst[...] = src
            for dst, src in zip(self.static_in, inputs):
                dst[...] = src
            self.graph.launch(side.native)
        self.main.wait_event(side.record_event())
        with self.main:
            task = _engine.GraphTask(keep_graph, False, accumulate=True)
            for j, g in zip(self.acc_nodes, self.outputs):
                _engine.accumulate_grad(task, nodes[j], g)
        if not keep_graph:
            for node in nodes:
                node.release_variables()
        return True


def gather(program, nodes):
    """The saved arrays of every op node (graph inputs) and the values baked into kernels."""
    inputs, consts = [], []
    for s in program.steps:
        if s.kind is not StepKind.CALL:
            continue
        node = nodes[s.node]
        entry = program.nodes_info[s.node]
        for p, what in enumerate(entry["saved"]):
            if what is SavedKind.TENSOR:
                inputs.append(node._saved[p].unpack_data(node))
            elif what is SavedKind.VALUE:
                value = node._saved[p]
                # A Meta (shape and dtype of an input the rule does not read) has no value
                # equality; compare what it stands for.
                consts.append((value.shape, value.dtype) if type(value) is Meta else value)
        if entry["attrs"]:
            consts.append(node._attrs)
    return inputs, consts


def try_cuda_graph(program, nodes, grads, keep_graph, stats) -> bool:
    """Replay with the program's CUDA graph (capturing it on first use); False: plain replay."""
    state = program.cuda_graph_state
    if state.startswith("unsupported"):
        return False
    try:
        if program.cuda_graph is None:
            program.cuda_graph = CudaGraphRunner(program, nodes, grads)
            program.cuda_graph_state = "ready"
            stats["cudagraph_captures"] += 1
            log.debug("captured a CUDA graph of %d steps", len(program.steps))
        ok = program.cuda_graph.run(nodes, grads, keep_graph)
    except Unsupported as exc:
        program.cuda_graph_state = f"unsupported: {exc}"
        stats["cudagraph_fallbacks"] += 1
        log.debug("CUDA graph not used, plain replay instead: the program holds %s", exc)
        return False
    except Exception as exc:  # noqa: BLE001 - e.g. a host sync inside the capture
        program.cuda_graph = None
        program.cuda_graph_state = f"unsupported: capture failed ({type(exc).__name__}: {exc})"
        stats["cudagraph_fallbacks"] += 1
        log.debug("CUDA graph capture failed (%s: %s); plain replay instead",
                  type(exc).__name__, exc)
        return False
    if not ok:
        log.debug("CUDA graph not replayed: a scalar or attribute baked into it changed; "
                  "plain replay")
        program.cuda_graph_state = "ready; not replayed: a scalar or attribute baked into it changed"
        stats["cudagraph_fallbacks"] += 1
        return False
    stats["cudagraph_replays"] += 1
    return True


