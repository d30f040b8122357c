"""The contributor's map names real files: every path in backticks in docs/ARCHITECTURE.md and
CONTRIBUTING.md that looks like one of ours (a .py file or a folder of the repository) exists."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("docs/ARCHITECTURE.md", "CONTRIBUTING.md")
# `autograd/ops/linalg.py`, `tests/viewer/test_app.py`, `autograd/ops/` ...
PATH = re.compile(r"`((?:autograd|profiler|viewer|cli|tests|benchmarks|docs)/[\w./-]*)`")


def _paths(doc: str) -> list[str]:
    return sorted(set(PATH.findall((ROOT / doc).read_text())))


@pytest.mark.parametrize("doc", DOCS)
def test_every_path_the_map_names_exists(doc):
    paths = _paths(doc)
    assert len(paths) >= 10, f"{doc} names too few files to be a map"
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, f"{doc} names files that do not exist: {missing}"
