"""The porting example trains, learns, and reloads to identical outputs; it mentions gradtrace
only in its import lines (the rest is PyTorch code, unchanged)."""
import importlib.util
import os

import pytest

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples",
                     "port_from_torch.py")


def _load():
    spec = importlib.util.spec_from_file_location("port_from_torch", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("kind", ["mlp", "transformer"])
def test_port_from_torch_trains_and_reloads(kind):
    result = _load().train(kind, steps=24, batch_size=32, n=256, device="cpu", log=lambda *a: None)
    assert result["last_loss"] < result["first_loss"]
    assert result["reload_identical"] is True
    assert result["step"] == 24


def test_port_from_torch_differs_only_in_imports():
    with open(_PATH, encoding="utf-8") as f:
        code = [line for line in f.read().split('"""', 2)[2].splitlines()]
    mentions = [line for line in code if "gradtrace" in line]
    assert mentions and all(line.startswith(("import ", "from ")) for line in mentions)
