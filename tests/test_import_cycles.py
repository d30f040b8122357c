"""No hidden import cycles between our modules (issue 13, part 7; issue 30).

The allow-list (:data:`ALLOWED_CYCLES`) is empty and must stay empty, and no function-level
import may dodge a cycle (:data:`MAX_CYCLE_DODGING_IMPORTS` is 0): fix a new cycle by
layering, never by an entry here or an import moved into a function.

A function-level import, or an attribute set on another module from outside (as
``dispatch.Tensor = Tensor`` once was), hides a dependency from a reader of the module's head
but is a dependency all the same. This test parses every module of ours
(autograd/, profiler/, viewer/, cli/, under their ``gradtrace.*`` names), resolves relative
imports, and builds the module dependency graph from

* imports at module level (``module``) and inside functions (``function``);
* ``importlib.import_module("gradtrace....")`` with a constant name (``dynamic``);
* ``mod.attr = value`` at module level where ``mod`` is one of our modules (``injected``): the
  assigned module depends on the assigner, which is what the assignment hides.

Imports under ``if TYPE_CHECKING:`` are annotations only, never executed, and are left out
(``type-only``); the report counts them. A submodule's implicit import of its parent package
is not an edge (every package would be a cycle with its children).

The strongly connected components of the graph with more than one module are the cycles;
there must be none (the machinery for allowed entries stays, for the report). The report
(``python3 tests/test_import_cycles.py``, or any failure message) lists every cycle with its
edges, and classifies each function-level import:

* **dodges a cycle**: its target reaches back to the importer; at module level it would be
  a circular import. There must be none (:data:`MAX_CYCLE_DODGING_IMPORTS`).
* **redundant**: the importer already loads the target through its module-level imports;
  the import can move to the module's head.
* **lazy**: deferring the import keeps the target (and what it loads) out of
  ``import importer`` — e.g. the engine out of the profile file readers.
"""
from __future__ import annotations

import ast
import pathlib
import sys
from collections import defaultdict
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("autograd", "profiler", "viewer", "cli")
NAMESPACE = "gradtrace"

# Empty, and it must stay so (issue 30): the three cycles it held (the engine knot around
# tensor/dispatch/node/engine/compiled_autograd, backend <-> grad_mode, memory <->
# record_function) were taken apart by layering, not hidden. A new cycle is fixed where it
# appears: a leaf module for what both sides need, or registration from the upper module into
# the lower one (as engine and compiled_autograd put their backward into _tensor.BACKWARD).
ALLOWED_CYCLES: dict[frozenset, str] = {}

# Function-level imports whose target imports the importer back (see the module docstring):
# none, and none may come back. A function-level import is for an optional dependency or to
# keep a heavy module out of an import, with a one-line reason beside it.
MAX_CYCLE_DODGING_IMPORTS = 0


@dataclass(frozen=True)
class Edge:
    """``src`` depends on ``dst``: at ``path:line``, of kind module/function/dynamic/injected/type-only."""

    src: str
    dst: str
    path: str
    line: int
    kind: str


def short(name: str) -> str:
    return name[len(NAMESPACE) + 1:]


def our_modules() -> dict[str, tuple[pathlib.Path, bool]]:
    """``gradtrace.x.y`` -> (path, is a package)."""
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            is_pkg = parts[-1] == "__init__"
            out[".".join([NAMESPACE] + (parts[:-1] if is_pkg else parts))] = (path, is_pkg)
    return out


def _resolve(module: str, is_pkg: bool, level: int, name: str | None) -> str:
    """The absolute name of ``from <level dots><name> import ...`` inside ``module``."""
    if level == 0:
        return name or ""
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _is_type_checking(test: ast.expr) -> bool:
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def module_edges(module: str, path: pathlib.Path, is_pkg: bool, mods: dict,
                 source: str | None = None) -> list[Edge]:
    """Every dependency of ``module`` on another module of ours (see the module docstring);
    ``source`` is the module's text (default: read from ``path``)."""

    def ours(name: str) -> str | None:
        parts = name.split(".")
        for k in range(len(parts), 1, -1):          # the longest prefix that is a module of ours
            if ".".join(parts[:k]) in mods:
                return ".".join(parts[:k])
        return None

    rel = path.relative_to(ROOT).as_posix()
    edges: list[Edge] = []
    bound: dict[str, str] = {}                       # module-level name -> our module it names

    def add(target: str | None, node: ast.AST, kind: str) -> None:
        if target and target != module:
            edges.append(Edge(module, target, rel, node.lineno, kind))

    def visit(node: ast.AST, kind: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    visit_one(stmt, "type-only")
                for stmt in child.orelse:
                    visit_one(stmt, kind)
            else:
                visit_one(child, kind)

    def visit_one(node: ast.AST, kind: str) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = ours(alias.name)
                add(target, node, kind)
                if kind == "module" and target and alias.asname:
                    bound[alias.asname] = target
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_pkg, node.level, node.module)
            for alias in node.names:
                sub = ours(f"{base}.{alias.name}")
                target = sub if sub == f"{base}.{alias.name}" else ours(base)
                add(target, node, kind)
                if kind == "module" and sub == f"{base}.{alias.name}":
                    bound[alias.asname or alias.name] = sub
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"):
            add(ours(node.args[0].value), node, "dynamic")
        elif kind == "module" and isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in bound:
                    owner = bound[t.value.id]
                    if owner != module:
                        edges.append(Edge(owner, module, rel, node.lineno, "injected"))
        inner = "function" if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) else kind
        visit(node, inner)

    visit(ast.parse(path.read_text() if source is None else source, filename=str(path)), "module")
    return edges


def all_edges() -> list[Edge]:
    mods = our_modules()
    # One edge per (statement, target): `from .node import A, B` is one dependency.
    return list(dict.fromkeys(e for name, (path, is_pkg) in mods.items()
                              for e in module_edges(name, path, is_pkg, mods)))


def graph_of(edges, kinds=("module", "function", "dynamic", "injected")) -> dict[str, set]:
    graph: dict[str, set] = defaultdict(set)
    for e in edges:
        if e.kind in kinds:
            graph[e.src].add(e.dst)
    return graph


def strongly_connected(graph: dict[str, set], nodes) -> list[set]:
    """Tarjan's algorithm, iterative; components with more than one node, in a stable order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set = set()
    out: list[set] = []
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(comp)
    return sorted(out, key=lambda c: sorted(c))


def reachable(graph: dict[str, set], start: str) -> set:
    seen, todo = {start}, [start]
    while todo:
        for w in graph.get(todo.pop(), ()):
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def classify_function_imports(edges) -> dict[str, list[Edge]]:
    """Function-level imports by why they are in a function (see the module docstring)."""
    full = graph_of(edges)
    head = graph_of(edges, kinds=("module", "injected"))
    out: dict[str, list[Edge]] = {"dodges a cycle": [], "redundant": [], "lazy": []}
    for e in edges:
        if e.kind != "function":
            continue
        if e.src in reachable(full, e.dst):
            out["dodges a cycle"].append(e)
        elif e.dst in reachable(head, e.src):
            out["redundant"].append(e)
        else:
            out["lazy"].append(e)
    return out


def allowed_entry(component: set) -> frozenset | None:
    names = {short(m) for m in component}
    return next((entry for entry in ALLOWED_CYCLES if names <= entry), None)


def report(edges=None) -> str:
    edges = all_edges() if edges is None else edges
    cycles = strongly_connected(graph_of(edges), our_modules())
    kinds = defaultdict(int)
    for e in edges:
        kinds[e.kind] += 1
    lines = [f"{sum(kinds.values())} import edges: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())),
             f"{len(cycles)} cycles:"]
    for comp in cycles:
        entry = allowed_entry(comp)
        lines.append(f"  {'allowed' if entry else 'NOT ALLOWED'}: {' '.join(sorted(short(m) for m in comp))}")
        for e in sorted(edges, key=lambda e: (e.path, e.line)):
            if e.src in comp and e.dst in comp and e.kind != "type-only":
                lines.append(f"      {e.path}:{e.line} {short(e.src)} -> {short(e.dst)} ({e.kind})")
    for label, group in classify_function_imports(edges).items():
        lines.append(f"function-level imports that are {label}: {len(group)}")
        if label != "lazy":
            lines += [f"      {e.path}:{e.line} {short(e.src)} -> {short(e.dst)}" for e in group]
    return "\n".join(lines)


# --------------------------------------------------------------------------- tests


PARSER_CASE = """
from __future__ import annotations
from typing import TYPE_CHECKING
import importlib
from . import dispatch
from .node import Node, Edge
from ..profiler import nesting as nest
import gradtrace.autograd.backend
if TYPE_CHECKING:
    from .engine import GraphTask
dispatch.Tensor = object

def backward():
    from .engine import run_backward
    return importlib.import_module("gradtrace.cli.main")

class Tensor:
    def grad_fn(self):
        from . import ops
        return ops.api
"""


def test_graph_sees_function_level_relative_and_injected_imports():
    """The parser itself, on the patterns that hide dependencies (a module written here, so
    that the test does not depend on how the engine's modules look today)."""
    names = ["autograd", "autograd.tensor", "autograd.dispatch", "autograd.node", "autograd.engine",
             "autograd.backend", "autograd.ops", "autograd.ops.api", "profiler", "profiler.nesting",
             "cli", "cli.main"]
    mods = {f"{NAMESPACE}.{m}": (ROOT / "x.py", m in ("autograd", "autograd.ops", "profiler", "cli"))
            for m in names}
    got = {(short(e.src), short(e.dst), e.kind)
           for e in module_edges(f"{NAMESPACE}.autograd.tensor", ROOT / "autograd" / "tensor.py",
                                 False, mods, PARSER_CASE)}
    assert got == {
        ("autograd.tensor", "autograd.dispatch", "module"),        # from . import <module>
        ("autograd.tensor", "autograd.node", "module"),            # from .node import <names>
        ("autograd.tensor", "profiler.nesting", "module"),         # two dots
        ("autograd.tensor", "autograd.backend", "module"),         # absolute
        ("autograd.tensor", "autograd.engine", "type-only"),       # under TYPE_CHECKING
        ("autograd.tensor", "autograd.engine", "function"),        # inside a function
        ("autograd.tensor", "cli.main", "dynamic"),                # import_module("...")
        ("autograd.tensor", "autograd.ops", "function"),           # inside a method
        ("autograd.dispatch", "autograd.tensor", "injected"),      # dispatch.Tensor = ...
    }
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert strongly_connected(graph, "abcde") == [{"a", "b", "c"}]
    assert all(e.src in our_modules() and e.dst in our_modules() for e in all_edges())


def test_no_import_cycle_outside_the_allow_list():
    edges = all_edges()
    cycles = strongly_connected(graph_of(edges), our_modules())
    bad = [sorted(short(m) for m in comp) for comp in cycles if allowed_entry(comp) is None]
    assert not bad, f"import cycles not in ALLOWED_CYCLES: {bad}\n{report(edges)}"


def test_allow_list_is_empty():
    """No cycle is allowed, and no function-level import may dodge one (issue 30)."""
    assert ALLOWED_CYCLES == {}
    assert MAX_CYCLE_DODGING_IMPORTS == 0


def test_no_function_level_import_dodges_a_cycle():
    edges = all_edges()
    dodging = classify_function_imports(edges)["dodges a cycle"]
    assert len(dodging) <= MAX_CYCLE_DODGING_IMPORTS, report(edges)


if __name__ == "__main__":
    sys.exit(print(report()))
