"""``gradtrace view``: start the dashboard on a free port, fetch / over 127.0.0.1, terminate."""
from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

from tests.cli.conftest import ROOT, TIMEOUT, cli_env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_view_serves_the_dashboard(small_profile):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "gradtrace.cli", "view", str(small_profile), "--no-browser",
                             "--port", str(port)], cwd=ROOT, env=cli_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    body = None
    try:
        for _ in range(600):                        # bounded: at most ~600 attempts
            if proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as resp:
                    body = resp.read().decode("utf-8", "replace")
                    status = resp.status
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.2)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=TIMEOUT)
    err = proc.stderr.read()
    assert body is not None, err
    assert status == 200 and "<html" in body.lower()
    # waitress, not the development server; no request log without --verbose.
    assert "development server" not in err and "GET /" not in err, err


def test_view_bad_port_is_one_line(small_profile):
    res = subprocess.run([sys.executable, "-m", "gradtrace.cli", "view", str(small_profile), "--no-browser",
                          "--port", "70000"], cwd=ROOT, env=cli_env(), capture_output=True, text=True,
                         timeout=TIMEOUT)
    assert res.returncode == 2 and "--port 70000" in res.stderr and "Traceback" not in res.stderr


def test_view_on_a_busy_port_is_one_line_exit_2(small_profile):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = subprocess.run([sys.executable, "-m", "gradtrace.cli", "view", str(small_profile), "--no-browser",
                              "--port", str(port)], cwd=ROOT, env=cli_env(), capture_output=True, text=True,
                             timeout=TIMEOUT)
    err = res.stderr.strip()
    assert res.returncode == 2 and len(err.splitlines()) == 1, err
    assert "try another --port" in err and "http://" not in err and "Traceback" not in err
