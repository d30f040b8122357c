"""Dependency direction between the packages (DESIGN §1), checked on the source and at import,
and the install layout: our import names are ``gradtrace.*`` only."""
import ast
import pathlib
import subprocess
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]
OURS = {"autograd", "profiler", "viewer", "cli"}


def imported_names(path: pathlib.Path) -> set:
    """Top-level names a module imports; ours are reported by subpackage (``gradtrace.cli.x``
    and ``from gradtrace import cli`` both give ``cli``), relative imports count as their own
    subpackage."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                names.add(parts[1] if parts[0] == "gradtrace" and len(parts) > 1 else parts[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            parts = node.module.split(".")
            if parts == ["gradtrace"]:
                names.update(a.name for a in node.names)
            else:
                names.add(parts[1] if parts[0] == "gradtrace" else parts[0])
        elif isinstance(node, ast.ImportFrom) and node.level:
            names.add(path.relative_to(ROOT).parts[0])
    return names


def _modules(package: str):
    return sorted((ROOT / package).rglob("*.py"))


def _all_sources():
    for folder in ("autograd", "profiler", "viewer", "cli", "tests", "benchmarks", "examples"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "fakecupy" not in path.parts:
                yield path


def test_no_module_imports_our_folders_by_their_bare_names():
    """`import autograd` would be HIPS autograd in a user's environment: ours is gradtrace.autograd."""
    offenders = []
    for path in _all_sources():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                bad = [a.name for a in node.names if a.name.split(".")[0] in OURS]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                bad = [node.module] if node.module.split(".")[0] in OURS else []
            else:
                bad = []
            offenders += [f"{path.relative_to(ROOT)}:{node.lineno} {name}" for name in bad]
    assert not offenders, offenders


def test_every_package_folder_is_installed_under_gradtrace():
    """pyproject lists the subpackages by hand (package-dir maps folders into the namespace);
    a new folder with an __init__.py that is not listed would be left out of the wheel."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"] == {f"gradtrace.{p}": p for p in sorted(OURS)} | config["package-dir"]
    on_disk = {"gradtrace." + ".".join(init.parent.relative_to(ROOT).parts)
               for pkg in OURS for init in (ROOT / pkg).rglob("__init__.py")}
    assert on_disk == set(config["packages"]), on_disk ^ set(config["packages"])


def test_autograd_imports_no_other_package_of_ours():
    for path in _modules("autograd"):
        bad = imported_names(path) & (OURS - {"autograd"})
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_cupy_is_imported_in_exactly_one_module():
    users = [p.relative_to(ROOT).as_posix() for pkg in OURS for p in _modules(pkg)
             if {"cupy", "cupyx"} & imported_names(p)]
    assert users == ["autograd/backend.py"], users


def test_import_autograd_pulls_in_no_ui_library():
    code = ("import sys, gradtrace.autograd; bad = [m for m in ('dash', 'plotly', 'rich', 'pandas', 'torch')"
            " if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_profiler_analysis_and_io_work_without_the_engine():
    """Only the collector may import autograd: loading and analysing a saved profile must not."""
    offenders = []
    for path in _modules("profiler"):
        if "autograd" in imported_names(path) and path.name not in {"collector.py", "profiler.py", "__init__.py"}:
            offenders.append(path.relative_to(ROOT).as_posix())
    assert not offenders, f"profiler modules importing the engine: {offenders}"
