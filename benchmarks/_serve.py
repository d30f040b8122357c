"""What the dashboard benchmarks share: a free port, waiting for the server process to open
it, the server's peak memory, stopping it."""
from __future__ import annotations

import socket
import subprocess
import time


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    """Return once ``proc`` accepts connections on ``port``; raise if it exits first (with
    the end of its stderr, where that is a pipe) or ``timeout`` seconds pass."""
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            err = proc.stderr.read().decode()[-2000:] if proc.stderr is not None else ""
            raise RuntimeError(f"server exited with status {proc.returncode}"
                               + (f": {err}" if err else ""))
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.05):
                return
        except OSError:
            time.sleep(0.01)
    raise TimeoutError("server did not open its port")


def peak_rss_mb(pid: int) -> float:
    """Process ``pid``'s peak resident memory (VmHWM) in MB; NaN where it is not reported."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def stop(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """Terminate the server process; kill it if it has not exited after ``grace`` seconds."""
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
