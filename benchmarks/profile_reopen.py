"""Reopening a saved profile and printing its operator table: version 5 (mapped, analyses
stored) against version 4 (zlib, analysed on open), each in a fresh process.

The profile is :func:`profiler.synthetic.training_profile` of ``--events`` events (an MLP
training loop on two threads: nested forward ops, backward nodes paired with them, memory
records). Each measurement is the wall time and peak resident memory of one process that
runs ``gradtrace table FILE`` (load + every analysis the table needs + rendering), and of
the other CLI tables (``--group-by forward-op``, ``--group-by shape`` when recorded,
``--per-step``) on the same file.

Targets (issue 31, 2-core machine): reopen + table <= 1 s and <= 300 MB at any size; every CLI
table on a reopened 10M-event profile <= 2 s.

Run: python benchmarks/profile_reopen.py [--events 5000000]
Writes benchmarks/results/profile_reopen.json.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _results import RESULTS_DIR, write_json  # noqa: E402

# One fresh process: the command's wall time and the process's peak RSS.
_MEASURE = """
import sys, time, io, contextlib
t0 = time.perf_counter()
from gradtrace.cli.main import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    status = main(sys.argv[1:])
wall = time.perf_counter() - t0
assert status == 0, status
# VmHWM, not ru_maxrss: the latter keeps the launching process's peak across fork + exec.
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print(wall, int(hwm) / 1024)
"""

TABLES = {"table": [], "forward-op": ["--group-by", "forward-op"], "per-step": ["--per-step"],
          "json": ["--json"]}


def measure(argv: list[str]) -> dict:
    res = subprocess.run([sys.executable, "-c", _MEASURE, *argv], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(res.stderr)
    wall, rss = map(float, res.stdout.strip().splitlines()[-1].split())
    return {"wall_s": round(wall, 3), "peak_rss_mb": round(rss)}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--out", default=os.path.join(RESULTS_DIR, "profile_reopen.json"))
    args = parser.parse_args(argv)
    from gradtrace.profiler.synthetic import training_profile  # noqa: PLC0415

    tmp = Path(tempfile.mkdtemp(prefix="gradtrace-reopen-"))
    data = training_profile(args.events, threads=2)
    result: dict = {"events": data.n_events, "memory_records": data.n_memory_records, "versions": {}}
    files = {}
    for version in (4, 5):
        path = tmp / f"v{version}.gtprof"
        t0 = time.perf_counter()
        data.save(path, version=version)
        files[version] = path
        result["versions"][version] = {"save_s": round(time.perf_counter() - t0, 2),
                                       "bytes_per_event": round(path.stat().st_size / data.n_events, 1)}
    del data
    print(f"{result['events']:,} events, {result['memory_records']:,} memory records")
    print(f"{'':28}{'v4 wall s':>10}{'v4 MB':>8}{'v5 wall s':>11}{'v5 MB':>8}")
    for name, extra in TABLES.items():
        row = {v: measure(["table", str(files[v]), *extra]) for v in (4, 5)}
        for v in (4, 5):
            result["versions"][v][name] = row[v]
        print(f"{'gradtrace table ' + name:28}{row[4]['wall_s']:>10.2f}{row[4]['peak_rss_mb']:>8,}"
              f"{row[5]['wall_s']:>11.2f}{row[5]['peak_rss_mb']:>8,}")
    for v in (4, 5):
        print(f"v{v}: saved in {result['versions'][v]['save_s']} s, {result['versions'][v]['bytes_per_event']} B/event")
    for path in files.values():
        path.unlink()
    tmp.rmdir()
    return write_json(args.out, result)


if __name__ == "__main__":
    main()
