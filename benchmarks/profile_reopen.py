"""Every CLI table of a reopened profile, each in a fresh process: wall time and peak memory.

Two profiles, ``--kinds synthetic torch``:

* ``synthetic``: :func:`profiler.synthetic.training_profile` of ``--events`` events (an MLP
  training loop on two threads: nested forward ops, backward nodes paired with them, input
  shapes, memory records), saved as version 5;
* ``torch``: a torch.profiler (Kineto) trace of ``--events`` events written by
  :func:`profiler.synthetic_trace.write_torch_trace` (runtime calls, kernels with launch
  arguments, memcpy/memset, Python frames, module ranges, ``[memory]`` instants) and
  imported as ``gradtrace import`` does, so its GPU tables have real structure.

Each row is one process running one command (load + every analysis it needs + rendering to
a string): ``gradtrace table`` with each ``--group-by``, ``--per-step``, ``--device-rows``,
``--memory``, ``--json`` and the combinations users run, and on the torch-import profile
``gradtrace gpu`` (``--kernels``, ``--kernels --by-op``). A grouping the profile has no data
for (stacks or modules of the synthetic one) is listed as "n/a". ``--with-v4`` also measures
a version-4 copy of the synthetic profile (analysed on open, slow at 10M events).

Targets (issue 31, 2-core machine): reopen + table <= 1 s and <= 300 MB at any size; every CLI
table on a reopened 10M-event profile <= 2 s.

Run: python benchmarks/profile_reopen.py [--events 10000000] [--kinds synthetic torch]
     [--keep DIR]   (DIR keeps the generated profiles and reuses them on the next run)
Writes benchmarks/results/profile_reopen.json.
"""
from __future__ import annotations

import argparse
import os
import shutil
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
out, err = io.StringIO(), io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try:
        status = main(sys.argv[1:])
    except SystemExit as e:
        status = e.code
wall = time.perf_counter() - t0
# VmHWM, not ru_maxrss: the latter keeps the launching process's peak across fork + exec.
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print(status, wall, int(hwm) / 1024, repr(err.getvalue()[-300:]))
"""

# (label, arguments after FILE, kinds it applies to)
COMMANDS = [
    ("table", ["table"], ()),
    ("table --group-by shape", ["table", "--group-by", "shape"], ()),
    ("table --group-by stack", ["table", "--group-by", "stack"], ()),
    ("table --group-by module", ["table", "--group-by", "module"], ()),
    ("table --group-by forward-op", ["table", "--group-by", "forward-op"], ()),
    ("table --per-step", ["table", "--per-step"], ()),
    ("table --group-by shape --per-step", ["table", "--group-by", "shape", "--per-step"], ()),
    ("table --device-rows", ["table", "--device-rows"], ()),
    ("table --memory", ["table", "--memory"], ()),
    ("table --group-by module --memory", ["table", "--group-by", "module", "--memory"], ()),
    ("table --json", ["table", "--json"], ()),
    ("table --group-by stack --json", ["table", "--group-by", "stack", "--json"], ()),
    ("gpu", ["gpu"], ("torch",)),
    ("gpu --kernels", ["gpu", "--kernels"], ("torch",)),
    ("gpu --kernels --by-op", ["gpu", "--kernels", "--by-op"], ("torch",)),
]


def measure(path: Path, args: list[str]) -> dict:
    """One command in a fresh process: wall s, peak MB, its exit status (2: a usage error,
    e.g. a grouping the profile has no data for)."""
    argv = [args[0], str(path), *args[1:]]
    res = subprocess.run([sys.executable, "-c", _MEASURE, *argv], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(res.stderr[-2000:])
    status, wall, rss, err = res.stdout.strip().splitlines()[-1].split(" ", 3)
    return {"status": int(status) if status != "None" else 0, "wall_s": round(float(wall), 3),
            "peak_rss_mb": round(float(rss)), "stderr": eval(err)}  # noqa: S307 - our own repr


def make_profile(kind: str, n_events: int, folder: Path, version: int = 5) -> Path:
    """The ``kind`` profile of ``n_events`` events in ``folder`` (reused when already there)."""
    path = folder / f"{kind}_{n_events}_v{version}.gtprof"
    if path.exists():
        return path
    t0 = time.perf_counter()
    if kind == "synthetic":
        from gradtrace.profiler.synthetic import training_profile  # noqa: PLC0415

        training_profile(n_events, threads=2).save(path, version=version)
    else:
        from gradtrace import profiler  # noqa: PLC0415
        from gradtrace.profiler.synthetic_trace import write_torch_trace  # noqa: PLC0415

        trace = folder / f"torch_{n_events}.json"
        write_torch_trace(trace, n_events)
        profiler.load(trace).save(path, version=version)
        trace.unlink()
    print(f"made {path.name} in {time.perf_counter() - t0:.0f} s ({path.stat().st_size / 1e6:,.0f} MB)")
    return path


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--kinds", nargs="+", default=["synthetic", "torch"], choices=["synthetic", "torch"])
    parser.add_argument("--with-v4", action="store_true", help="also a version-4 copy of the synthetic profile")
    parser.add_argument("--only", nargs="*", default=None, metavar="LABEL", help="only these command labels")
    parser.add_argument("--keep", metavar="DIR", help="keep the profiles in DIR and reuse them")
    parser.add_argument("--out", default=os.path.join(RESULTS_DIR, "profile_reopen.json"))
    args = parser.parse_args(argv)

    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="gradtrace-reopen-"))
    folder.mkdir(parents=True, exist_ok=True)
    files = {kind: make_profile(kind, args.events, folder) for kind in args.kinds}
    if args.with_v4 and "synthetic" in files:
        files["synthetic v4"] = make_profile("synthetic", args.events, folder, version=4)
    result: dict = {"events": args.events, "cpu_count": os.cpu_count(), "profiles": {}}
    target = 2.0 if args.events >= 10_000_000 else 1.0
    print(f"{'command':36}" + "".join(f"{k + ' s':>16}{'MB':>7}" for k in files))
    for label, cmd, kinds in COMMANDS:
        if args.only is not None and label not in args.only:
            continue
        cells = ""
        for kind, path in files.items():
            if kinds and kind.split()[0] not in kinds:
                cells += f"{'':>16}{'':>7}"
                continue
            r = measure(path, cmd)
            result["profiles"].setdefault(kind, {"file_mb": round(path.stat().st_size / 1e6)})[label] = r
            if r["status"] == 2 and "no " in r["stderr"]:
                cells += f"{'n/a':>16}{'':>7}"
            else:
                flag = "" if r["status"] == 0 and r["wall_s"] <= target else (" !" if r["status"] == 0 else " ERR")
                cells += f"{r['wall_s']:>14.2f}{flag:2}{r['peak_rss_mb']:>7,}"
        print(f"{label:36}{cells}", flush=True)
    print(f"(! over the {target:g} s target; n/a: the profile has no data for it)")
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    return write_json(args.out, result)


if __name__ == "__main__":
    main()
