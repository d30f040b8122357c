"""The built wheel installs beside HIPS `autograd` without touching it (issue: import names
collide). Builds the wheel, installs it into a fresh venv together with HIPS autograd from the
package index, runs `gradtrace demo` there, and checks site-packages' top level."""
import json
import os
import pathlib
import subprocess
import sys
import venv

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run(args, **kw):
    # Without PYTHONPATH: tests/conftest.py may have pointed it at a checkout's links, which
    # would shadow the installed wheel in the venv.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env, **kw)
    assert res.returncode == 0, f"{args}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
          "-w", tmp / "dist", ROOT])
    wheels = list((tmp / "dist").glob("gradtrace-*.whl"))
    assert len(wheels) == 1, wheels
    env_dir = tmp / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    _run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", wheels[0], "autograd"])
    return wheels[0], env_dir, python


def test_wheel_holds_only_the_gradtrace_namespace(wheel_venv):
    import zipfile

    wheel, _, _ = wheel_venv
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert tops == {"gradtrace", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info"}
    names = zipfile.ZipFile(wheel).namelist()
    assert "gradtrace/autograd/data/harbour_town.txt" in names
    assert "gradtrace/viewer/assets/gradtrace.css" in names
    assert "gradtrace/__init__.py" not in names        # a namespace package: nothing to collide


def test_demo_runs_beside_hips_autograd(wheel_venv, tmp_path):
    _, env_dir, python = wheel_venv
    res = _run([env_dir / "bin" / "gradtrace", "demo", "--steps", "2"], cwd=tmp_path)
    assert "profile saved to" in res.stdout
    code = ("import json, autograd, site, os, gradtrace.autograd as ag; "
            "sp = site.getsitepackages()[0]; "
            "print(json.dumps({'hips': autograd.__file__, 'ours': ag.__file__, "
            "'has_grad': hasattr(autograd, 'grad'), 'has_ours': hasattr(autograd, 'cuda_is_available'), "
            "'top': sorted(os.listdir(sp))}))")
    info = json.loads(_run([python, "-c", code], cwd=tmp_path).stdout)
    assert info["has_grad"] and not info["has_ours"]           # `import autograd` is HIPS's
    assert "/site-packages/autograd/" in info["hips"]
    assert "/site-packages/gradtrace/autograd/" in info["ours"]
    ours_at_top = {"profiler", "viewer", "cli"} & set(info["top"])
    assert not ours_at_top, ours_at_top
    assert [t for t in info["top"] if t.startswith("gradtrace")] == ["gradtrace", "gradtrace-0.1.0.dist-info"]
