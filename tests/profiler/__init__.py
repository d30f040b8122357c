import pytest


def needs_dashboard() -> None:
    """Tests whose second half is the dashboard's: dash is a dependency (CI has it), but the GPU
    machine's image has none and no network (../shared/GPU.md), so there they skip, saying why."""
    pytest.importorskip("dash", reason="dash is not installed (the GPU machine's image has none)")
