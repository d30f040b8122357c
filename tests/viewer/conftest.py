"""Browser tests: dash[testing]'s ``dash_duo`` driving Debian's headless Chromium.

Headless is forced (CI has no display). A browser test fails — never skips — when Chromium
or its driver is missing. Screenshots go to ``test-artifacts/viewer/``.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from . import workloads

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "viewer"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def _chromium() -> str | None:
    return next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)


def pytest_configure(config):
    # dash[testing] reads --headless; CI (CI=true) and desktops alike run without a window.
    config.option.headless = True


def pytest_setup_options():
    """Chrome options handed to dash[testing]'s webdriver."""
    from selenium.webdriver.chrome.options import Options

    options = Options()
    binary = _chromium()
    if binary:
        options.binary_location = binary
    options.add_argument("--window-size=1440,1000")
    # Plotly's WebGL traces need a software GL in a headless container without a GPU.
    options.add_argument("--enable-unsafe-swiftshader")
    options.add_argument("--use-angle=swiftshader")
    options.add_argument("--hide-scrollbars")
    return options


@pytest.fixture(autouse=True)
def _require_chromium(request):
    if request.node.get_closest_marker("browser") is None:
        return
    missing = [what for what, found in (("chromium", _chromium()), ("chromedriver", shutil.which("chromedriver")))
               if not found]
    if missing:
        pytest.fail(f"browser test needs {' and '.join(missing)} on PATH: "
                    f"apt-get install -y chromium chromium-driver (as .ci/run does)", pytrace=False)


@pytest.fixture(scope="session")
def profiles(tmp_path_factory):
    """Profile files shared by the viewer tests."""
    d = tmp_path_factory.mktemp("profiles")
    return {
        "mlp": str(workloads.mlp_profile(d / "mlp.gtprof")),
        "workload": str(workloads.workload_profile(d / "workload.gtprof", "mlp")),
        "cnn": str(workloads.workload_profile(d / "cnn.gtprof", "cnn", steps=2)),
        "xss": str(workloads.xss_profile(d / "xss.gtprof")),
        "big": str(workloads.synthetic_profile(d / "big.gtprof", 200_000)),
        "bad": str(_bad_file(d / "bad.gtprof")),
    }


@pytest.fixture(scope="session")
def step_profiles(tmp_path_factory):
    """A 3-step GPT from ``gradtrace demo gpt --steps 3`` and a 100-step run without a schedule."""
    d = tmp_path_factory.mktemp("step_profiles")
    return {"gpt3": str(workloads.demo_profile(d / "gpt3.gtprof", "gpt", 3)),
            "steps100": str(workloads.many_steps_profile(d / "steps100.gtprof", 100))}


def _bad_file(path: Path) -> Path:
    path.write_bytes(b"\x93GTPROF\n" + b"\x01\x00\x00\x00" + b"\xff\xff\x00\x00" + b"{not json")
    return path


@pytest.fixture
def shot(dash_duo):
    """``shot(name)`` saves a screenshot of the page under test-artifacts/viewer/."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def save(name: str) -> Path:
        path = ARTIFACTS / f"{name}.png"
        dash_duo.driver.save_screenshot(str(path))
        return path

    return save
