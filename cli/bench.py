"""``gradtrace bench``: run the scripts in ``benchmarks/`` and print their tables.

Each script runs in its own process (``python benchmarks/NAME.py``) and prints its own table;
this command shows them one after the other and ends with a summary (status, wall time, JSON
results file). ``--quick`` passes small sizes and a single repeat — only flags a script lists in
its ``--help``. Results are written to ``benchmarks/results/`` only with ``--save``; otherwise
to a temporary directory that is removed at the end, so a run never changes the checkout.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .errors import CLIError

__all__ = ["cmd_bench", "find_benchmarks", "quick_flags", "ORDER"]

ORDER = ("engine_overhead", "profiler_overhead", "analysis_speed", "export_speed", "train_step")
# flag -> value used by --quick, passed only when the script's --help lists the flag.
QUICK = {"--repeats": "1", "--min-time": "0", "--iterations": "200", "--steps": "2", "--warmup": "1",
         "--layers": "4", "--width": "256", "--batch": "64", "--events": "20000"}


def benchmarks_dir(explicit: str | None = None) -> Path:
    """``--dir``, else the checkout's ``benchmarks/`` (next to ``cli/``), else ``./benchmarks``."""
    if explicit:
        d = Path(explicit)
        if not d.is_dir():
            raise CLIError(f"--dir {explicit}: not a directory; give the benchmarks/ folder")
        return d
    for d in (Path(__file__).resolve().parents[1] / "benchmarks", Path.cwd() / "benchmarks"):
        if d.is_dir():
            return d
    raise CLIError("no benchmarks/ directory found (the benchmarks ship with the source checkout); "
                   "run from the checkout or pass --dir PATH")


def find_benchmarks(directory: Path) -> list[Path]:
    """The benchmark scripts, in :data:`ORDER` first, then the rest by name."""
    scripts = {p.stem: p for p in directory.glob("*.py") if not p.name.startswith("_")}
    ordered = [scripts.pop(name) for name in ORDER if name in scripts]
    return ordered + [scripts[k] for k in sorted(scripts)]


def quick_flags(help_text: str) -> list[str]:
    """The ``--quick`` arguments a script accepts, read from its ``--help``."""
    if re.search(r"(^|\s)--quick\b", help_text):
        return ["--quick"]
    flags = []
    for flag, value in QUICK.items():
        if re.search(rf"(^|[\s\[,]){re.escape(flag)}\b", help_text):
            flags += [flag, value]
    return flags


def cmd_bench(args) -> int:
    from .render import bench_table, emit, make_console  # noqa: PLC0415

    directory = benchmarks_dir(args.dir)
    scripts = find_benchmarks(directory)
    if args.only:
        known = {p.stem: p for p in scripts}
        missing = [n for n in args.only if n not in known]
        if missing:
            raise CLIError(f"unknown benchmark {', '.join(missing)}; available: {', '.join(known)}")
        scripts = [known[n] for n in args.only]
    if not scripts:
        raise CLIError(f"{directory}: no benchmark scripts in it")
    console, plain = make_console()
    env = dict(os.environ)
    root = str(directory.resolve().parent)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    results = []
    with tempfile.TemporaryDirectory(prefix="gradtrace-bench-") as tmp:
        out_dir = directory / "results" if args.save else Path(tmp)
        env["GRADTRACE_BENCH_RESULTS"] = str(out_dir)     # scripts without --json (benchmarks/_results.py)
        for script in scripts:
            cmd = [sys.executable, str(script)]
            json_path = None
            help_text = _help(script, env)
            if args.quick:
                cmd += quick_flags(help_text)
            if "--json" in help_text:
                json_path = str(out_dir / f"{script.stem}.json")
                cmd += ["--json", json_path]
            shown = " ".join(Path(c).name if c == str(script) else c for c in cmd[1:])
            console.print(f"\n== {script.stem}: python {shown}", soft_wrap=True)
            sys.stdout.flush()
            t0 = time.perf_counter()
            rc = subprocess.call(cmd, env=env, cwd=root)
            seconds = time.perf_counter() - t0
            results.append({"name": script.stem, "returncode": rc, "seconds": seconds,
                            "json": json_path if args.save else None})
        note = ["--quick: small sizes"] if args.quick else []
        note.append(f"results kept in {out_dir}" if args.save else "results not kept; --save keeps them")
        console.print(f"\nBenchmarks ({'; '.join(note)})")
        emit(console, bench_table(results, plain=plain), plain)
    return 0 if all(r["returncode"] == 0 for r in results) else 1


def _help(script: Path, env: dict) -> str:
    try:
        res = subprocess.run([sys.executable, str(script), "--help"], env=env, capture_output=True,
                             text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return ""
    return res.stdout if res.returncode == 0 else ""
