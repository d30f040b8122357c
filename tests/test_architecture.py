"""Dependency direction between the packages (DESIGN §1), checked on the source and at import."""
import ast
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
OURS = {"autograd", "profiler", "viewer", "cli"}


def _imports(path: pathlib.Path) -> set:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _modules(package: str):
    return sorted((ROOT / package).rglob("*.py"))


def test_autograd_imports_no_other_package_of_ours():
    for path in _modules("autograd"):
        bad = _imports(path) & (OURS - {"autograd"})
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_cupy_is_imported_in_exactly_one_module():
    users = [p.relative_to(ROOT).as_posix() for pkg in OURS for p in _modules(pkg)
             if {"cupy", "cupyx"} & _imports(p)]
    assert users == ["autograd/backend.py"], users


def test_import_autograd_pulls_in_no_ui_library():
    code = ("import sys, autograd; bad = [m for m in ('dash', 'plotly', 'rich', 'pandas', 'torch')"
            " if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_profiler_analysis_and_io_work_without_the_engine():
    """Only the collector may import autograd: loading and analysing a saved profile must not."""
    offenders = []
    for path in _modules("profiler"):
        if "autograd" in _imports(path) and path.name not in {"collector.py", "profile.py", "__init__.py"}:
            offenders.append(path.relative_to(ROOT).as_posix())
    assert not offenders, f"profiler modules importing the engine: {offenders}"
