"""No module is named like something its package exports (issue 30).

``profiler.profile`` was both a module and the class ``__init__`` bound over it; importing the
module by another path rebinds the name and ``profiler.profile(...)`` fails with "'module'
object is not callable". PyTorch names such a module differently (``_tensor.py``).
"""
import importlib
import pkgutil
import types

import pytest

# Add a package here (one line) to hold it to the rule.
PACKAGES = ["gradtrace.profiler", "gradtrace.viewer", "gradtrace.cli"]


def _clashes(package: str) -> list[str]:
    pkg = importlib.import_module(package)
    exported = set(getattr(pkg, "__all__", ())) | {
        name for name, value in vars(pkg).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)}
    return sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if m.name in exported)


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_shares_a_name_with_what_its_package_exports(package):
    assert _clashes(package) == []
