"""No module shares a name with an attribute its package exports (issue 30).

When ``pkg/__init__.py`` binds a name that is also a submodule (``from .tensor import tensor``
once made ``gradtrace.autograd.tensor`` the factory function), the name means one thing until
the submodule is imported again by some other path: the import system then sets the package's
attribute back to the module, and ``ag.tensor([1.0])`` fails with "'module' object is not
callable". So such a module is renamed (``_tensor.py``, as PyTorch names its own).

The check covers every package of ours and its subpackages (:data:`PACKAGES`): so
``profiler.profile`` (the class) lives in ``profiler/profiler.py``, ``profiler.diff`` in
``profiler/profile_diff.py``, ``torch.linalg``'s family in ``ops/_linalg.py``.
"""
from __future__ import annotations

import importlib
import pathlib
import subprocess
import sys
import types

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("autograd", "profiler", "viewer", "cli")   # one line per package held to the rule


def packages_of(folder: str) -> list[str]:
    """``gradtrace.<folder>`` and its subpackages (folders holding an ``__init__.py``)."""
    return sorted("gradtrace." + ".".join(init.parent.relative_to(ROOT).parts)
                  for init in (ROOT / folder).rglob("__init__.py"))


def shadowing(package: str) -> list[str]:
    """``package.name`` for each submodule ``name`` whose package attribute is something else."""
    pkg = importlib.import_module(package)
    folder = pathlib.Path(pkg.__file__).parent
    names = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    names |= {p.name for p in folder.iterdir() if (p / "__init__.py").exists()}
    out = []
    for name in sorted(names):
        attr = pkg.__dict__.get(name)
        is_that_module = isinstance(attr, types.ModuleType) and attr.__name__ == f"{package}.{name}"
        if attr is not None and not is_that_module:
            out.append(f"{package}.{name} (the package exports a {type(attr).__name__})")
    return out


def test_no_module_is_named_like_what_its_package_exports():
    bad = [entry for folder in PACKAGES for pkg in packages_of(folder) for entry in shadowing(pkg)]
    assert not bad, f"rename these modules (e.g. a leading underscore): {bad}"


def test_importing_a_submodule_again_leaves_the_exported_names_callable():
    """The failure the rule prevents, replayed in a fresh interpreter: each renamed module is
    dropped from ``sys.modules`` and imported again by its path after ``import
    gradtrace.autograd as ag`` (which rebinds the package attribute of the module's name);
    ``ag.tensor(...)``, ``ag.checkpoint`` and ``compiled_autograd.capture`` stay functions."""
    code = """
import importlib, sys
import gradtrace.autograd as ag
for name in ("gradtrace.autograd._tensor", "gradtrace.autograd.utils.checkpoint",
             "gradtrace.autograd.compiled_autograd.recorder"):
    sys.modules.pop(name)
    importlib.import_module(name)
print(ag.tensor([1.0, 2.0]).sum().item(), callable(ag.checkpoint),
      callable(ag.compiled_autograd.capture))
"""
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.split() == ["3.0", "True", "True"]
