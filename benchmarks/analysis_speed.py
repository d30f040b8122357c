"""Analysis, save and load speed on synthetic profiles of 38,000 and 1,000,000 events.

The profiles are realistic in shape (profiler.synthetic.training_profile): an MLP training
loop on 4 threads with ProfilerStep#N, forward/backward/optimizer user scopes, composite
forward ops around primitives, backward nodes linked by (sequence_nr, thread), ops inside
backward nodes and one memory record per allocation/free. "analysis" is everything from the
raw columns to the text: nesting, self times, links, memory attribution, key_averages() and
table(); each repeat starts from a fresh ProfileData so nothing is cached.
Targets: 38k <= 0.15 s analysis; 1M <= 4 s analysis, <= 2 s load; peak RSS <= 600 MB.

Usage: python benchmarks/analysis_speed.py [--repeats R] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gradtrace import profiler  # noqa: E402
from gradtrace.profiler import ProfileData  # noqa: E402
from gradtrace.profiler.synthetic import training_profile  # noqa: E402


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0   # KiB on Linux


def fresh(data: ProfileData) -> ProfileData:
    return ProfileData(data.event_columns, data.memory_columns, data.strings, data.metadata)


def analyse(data: ProfileData) -> str:
    return data.key_averages().table(sort_by="self_cpu_time_total", row_limit=100)


def timed(fn, repeats: int) -> tuple[float, list[float], object]:
    runs, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs), runs, result


def measure(n_events: int, repeats: int, directory: str) -> dict:
    t0 = time.perf_counter()
    data = training_profile(n_events, threads=4)
    build_s = time.perf_counter() - t0
    analysis_s, analysis_runs, text = timed(lambda: analyse(fresh(data)), repeats)
    summary_s, _, _ = timed(lambda: fresh(data).forward_backward_summary().table(), repeats)
    path = os.path.join(directory, f"synthetic_{n_events}.gtprof")
    save_s, _, _ = timed(lambda: data.save(path), repeats)
    load_s, load_runs, loaded = timed(lambda: profiler.load(path), repeats)
    assert analyse(loaded) == text         # the file carries everything the analysis needs
    size = os.path.getsize(path)
    return {
        "events": data.n_events, "memory_records": data.n_memory_records, "build_s": build_s,
        "analysis_s": analysis_s, "analysis_runs_s": analysis_runs,
        "forward_backward_summary_s": summary_s, "save_s": save_s, "load_s": load_s,
        "load_runs_s": load_runs, "file_bytes": size, "bytes_per_event": size / data.n_events,
        "peak_rss_mb_so_far": peak_rss_mb(),
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results",
                                                       "analysis_speed.json"))
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        for n in (38_000, 1_000_000):
            rows.append(measure(n, args.repeats, directory))
    print(f"median of {args.repeats}; analysis = nesting + self times + links + memory + key_averages() + table()")
    print(f"{'events':>10}{'analysis s':>12}{'fwd/bwd s':>11}{'save s':>9}{'load s':>9}"
          f"{'B/event':>9}{'peak RSS MB':>13}")
    for r in rows:
        print(f"{r['events']:>10}{r['analysis_s']:>12.3f}{r['forward_backward_summary_s']:>11.3f}"
              f"{r['save_s']:>9.3f}{r['load_s']:>9.3f}{r['bytes_per_event']:>9.1f}{r['peak_rss_mb_so_far']:>13.0f}")
    result = {"benchmark": "analysis_speed", "python": platform.python_version(),
              "machine": platform.machine(), "cpus": os.cpu_count(), "rows": rows,
              "peak_rss_mb": peak_rss_mb(),
              "targets": {"38k_analysis_s": 0.15, "1M_analysis_s": 4.0, "1M_load_s": 2.0, "peak_rss_mb": 600}}
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    main()
