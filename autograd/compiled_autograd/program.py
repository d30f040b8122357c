"""What a compiled backward is: a flat list of :class:`Step` s over numbered registers."""
from __future__ import annotations

import enum

__all__ = ["StepKind", "SavedKind", "Step", "Program", "Unsupported"]


class StepKind(enum.Enum):
    """The instructions of a program, each one thing the engine does for a node."""

    ROOT = "root"                          # a gradient given to backward
    UNPACK = "unpack"                      # a saved tensor through its unpack hook
    TENSOR_PRE_HOOKS = "tensor_pre_hooks"  # Tensor.register_hook hooks and retain_grad
    PRE_HOOK = "pre_hook"                  # Node.register_prehook hooks
    CALL = "call"                          # the node's backward rules (or its apply)
    POST_HOOK = "post_hook"                # Node.register_hook hooks
    SUM = "sum"                            # two gradients for the same input buffer slot
    ACCUMULATE_GRAD = "accumulate_grad"    # into .grad, then post-accumulate-grad hooks
    RELEASE = "release"                    # a dead node's saved tensors dropped


#: Steps without side effects: removable when nobody reads what they write.
PURE_KINDS = frozenset({StepKind.ROOT, StepKind.SUM, StepKind.CALL})


class SavedKind(enum.Enum):
    """What an op node saved at one position, as the program reads it."""

    TENSOR = "tensor"      # a SavedVariable: an input of the program, read at replay
    HOOKED = "hooked"      # a SavedVariable with an unpack hook: an UNPACK step
    VALUE = "value"        # a Python scalar or Meta, passed through
    NONE = "none"          # nothing saved there


class Unsupported(Exception):
    """The graph holds something compiled autograd does not handle; run it eagerly."""


class Step:
    """One instruction of a compiled backward.

    Attributes:
        kind: a :class:`StepKind`.
        node: index of the node it belongs to (in the key's walk order), -1 for none.
        reads: registers it reads (None for "no gradient").
        writes: registers it writes.
        arg: kind-specific data (a root index, a saved-value position, output registers...).
        pure: whether it can be dropped when nothing reads what it writes.
    """

    __slots__ = ("kind", "node", "reads", "writes", "arg", "pure")

    def __init__(self, kind, node, reads=(), writes=(), arg=None, pure=None):
        self.kind = StepKind(kind)
        self.node = node
        self.reads = tuple(reads)
        self.writes = tuple(writes)
        self.arg = arg
        self.pure = self.kind in PURE_KINDS if pure is None else pure

    def __repr__(self):
        w = ", ".join(f"v{r}" for r in self.writes)
        r = ", ".join("None" if x is None else f"v{x}" for x in self.reads)
        return f"{w + ' = ' if w else ''}{self.kind.value}[n{self.node}]({r})"


class Program:
    """A captured backward: its steps plus what code generation needs to know about it."""

    def __init__(self, key, nodes_info, steps, n_regs, maybe_none, device, stream, root_meta):
        self.key = key
        self.nodes_info = nodes_info    # per node: dict(cls, kind, meta, edges, saved...)
        self.steps = steps
        self.n_regs = n_regs
        self.maybe_none = maybe_none    # registers that may hold None at run time
        self.device = device
        self.stream = stream
        self.root_meta = root_meta      # per root output: (shape, dtype) it must have
        self.variants: dict = {}        # (keep_graph, profiled, order) -> compiled function
        # Orders of recordings that map to this program (see compile_program): per order,
        # the recording position of each node.
        self.orders: list = []
        self.source: dict = {}          # same keys -> generated source (for the debug log)
        # (step, output) -> (shape, dtype) of a gradient that conform() had to fit to its
        # input at replay; seen_at: how many were noted when each variant was generated.
        self.conform_seen: dict = {}
        self.seen_at: dict = {}
        self.cuda_graph = None          # CudaGraphRunner once captured
        self.cuda_graph_state = "untried"   # "untried", "ready", "unsupported: ..."
        self.runs = 0

    def __repr__(self):
        return f"<Program {len(self.steps)} steps, {self.n_regs} registers>"

    def listing(self) -> str:
        """One line per step: registers written, kind, node, registers read, node name."""
        names = [info["cls"].__name__ for info in self.nodes_info]
        return "\n".join(f"{i:5d}  {s!r}" + (f"  # {names[s.node]}" if s.node >= 0 else "")
                         for i, s in enumerate(self.steps))
