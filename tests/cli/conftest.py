"""Fixtures for the CLI tests: run ``python -m gradtrace.cli`` in a subprocess, small saved profiles."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 300   # a bound on each subprocess so a hang fails the test instead of the run


def cli_env(**extra) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("NO_COLOR", None)
    env["COLUMNS"] = "100"
    env.update(extra)
    return env


def run_cli(*args, cwd=None, env=None, timeout=TIMEOUT) -> subprocess.CompletedProcess:
    """``python -m gradtrace.cli ARGS`` (stdout is a pipe, so output is plain text)."""
    return subprocess.run([sys.executable, "-m", "gradtrace.cli", *map(str, args)], cwd=cwd or ROOT,
                          env=env or cli_env(), capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def demo_profile(tmp_path_factory) -> Path:
    """A real profile: 2 MLP steps with shapes, stacks, memory and module ranges."""
    out = tmp_path_factory.mktemp("demo") / "mlp.gtprof"
    res = run_cli("demo", "mlp", "--steps", "2", "--device", "cpu", "--out", out, "--record-shapes",
                  "--with-stack", "--memory", "--with-modules")
    assert res.returncode == 0, res.stdout + res.stderr
    return out


@pytest.fixture(scope="session")
def small_profile(tmp_path_factory) -> Path:
    """A hand-made profile (fixed times), saved to a file."""
    from tests.cli.profiles import hand_made

    path = tmp_path_factory.mktemp("small") / "small.gtprof"
    hand_made().save(path)
    return path
