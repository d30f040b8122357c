"""Feed N mutated profile files to profiler.load, the CLI and the dashboard pages; print the figures.

The mutations and the consumers are those of the fuzz test (``tests/profiler/fuzzing.py``):
byte flips, truncations, splices, garbage, edits of header, metadata, columns and strings
that keep the container valid, and zlib bombs. Each file is rejected (ProfileFormatError),
loads and works everywhere, or crashes. Prints files, rejected, loaded, crashes (grouped by
error and place), the slowest file and the largest peak of Python memory (tracemalloc, per
file) plus the process's peak RSS.

Run: python benchmarks/fuzz_profiles.py [-n 10000] [--seed 0] [--no-viewer]
Writes benchmarks/results/fuzz_profiles.json.
"""
from __future__ import annotations

import argparse
import collections
import os
import random
import resource
import sys
import tempfile
import time
import tracemalloc
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))   # tests.profiler.fuzzing; gradtrace itself comes from the install

from _results import RESULTS_DIR, write_json  # noqa: E402

from tests.profiler.fuzzing import exercise, mutate, seed_files  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=10_000, help="mutated files (default 10000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-viewer", action="store_true", help="skip the dashboard pages")
    parser.add_argument("--no-cli", action="store_true", help="skip the gradtrace commands")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="gradtrace-fuzz-"))
    seeds = seed_files(tmp)
    # Warm-up on an intact file: imports (dash takes seconds) are not a file's time.
    exercise(tmp / "seed1.gtprof", cli=not args.no_cli, viewer=not args.no_viewer)
    rng = random.Random(args.seed)
    outcomes: collections.Counter = collections.Counter()
    crashes: collections.Counter = collections.Counter()
    worst_time = (0.0, "")
    worst_mem = (0, "")
    started = time.perf_counter()
    for i in range(args.n):
        kind, blob = mutate(rng, seeds)
        path = tmp / f"mutant{i}.gtprof"
        path.write_bytes(blob)
        tracemalloc.start()
        t0 = time.perf_counter()
        try:
            outcomes[exercise(path, cli=not args.no_cli, viewer=not args.no_viewer)] += 1
        except Exception as exc:  # noqa: BLE001 - a crash is what this script counts
            where = traceback.extract_tb(exc.__traceback__)[-1]
            key = f"{type(exc).__name__}: {str(exc)[:80]} at {Path(where.filename).name}:{where.lineno}"
            if key not in crashes:
                print(f"crash #{i} ({kind}): {key}", flush=True)
            crashes[key] += 1
        elapsed = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        worst_time = max(worst_time, (elapsed, f"#{i} {kind}"))
        worst_mem = max(worst_mem, (peak, f"#{i} {kind}"))
        path.unlink()
        if (i + 1) % 1000 == 0:
            print(f"{i + 1} files, {dict(outcomes)}, {sum(crashes.values())} crashes", flush=True)
    total = time.perf_counter() - started
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    result = {
        "files": args.n, "rejected": outcomes["rejected"], "loaded": outcomes["loaded"],
        "crashes": sum(crashes.values()), "crash_kinds": dict(crashes),
        "worst_time_s": round(worst_time[0], 3), "worst_time_file": worst_time[1],
        "worst_peak_python_mib": round(worst_mem[0] / 2**20, 1), "worst_memory_file": worst_mem[1],
        "process_peak_rss_mib": round(rss_mib, 1), "total_s": round(total, 1),
        "seed": args.seed, "cli": not args.no_cli, "viewer": not args.no_viewer,
    }
    print()
    for key in ("files", "rejected", "loaded", "crashes", "worst_time_s", "worst_time_file",
                "worst_peak_python_mib", "worst_memory_file", "process_peak_rss_mib", "total_s"):
        print(f"{key:>24}  {result[key]}")
    write_json(os.path.join(RESULTS_DIR, "fuzz_profiles.json"), result)


if __name__ == "__main__":
    main()
