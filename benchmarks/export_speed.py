"""Chrome trace export speed, size and writer memory on a 1,000,000-event synthetic profile.

The profile is profiler.synthetic.training_profile (an MLP training loop on 4 threads with
ProfilerStep#N, user scopes, composite ops, backward nodes linked by (sequence_nr, thread),
ops inside backward nodes, one memory record per allocation/free). Its analysis is computed
before timing (a live profile or a loaded one computes it once for every consumer) and
reported separately. Each export writes all trace events: complete events, fwdbwd flows,
[memory] instants and allocated-bytes counters.

A third row exports the same events without their memory records, and a second table gives
the bytes each kind of trace event takes (per event of that kind and per profile event), read
from the exported text itself.

Memory: the writer's peak over the profile's own, measured two ways in separate runs:
tracemalloc (Python and numpy allocations) and the process's peak RSS (VmHWM, reset through
/proc/self/clear_refs before the export).

Targets: <= 5 s for 1,000,000 events, peak writer memory <= 300 MB, <= 220 bytes per event.

Usage: python benchmarks/export_speed.py [--events N] [--repeats R] [--json PATH]
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import platform
import statistics
import sys
import tempfile
import time
import tracemalloc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gradtrace.profiler import chrome_trace as ct  # noqa: E402
from gradtrace.profiler.data import ProfileData  # noqa: E402
from gradtrace.profiler.records import MEMORY_COLUMNS, empty_columns  # noqa: E402
from gradtrace.profiler.synthetic import training_profile  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _results import write_json  # noqa: E402

TARGET_S = 5.0
TARGET_MB = 300.0
TARGET_BYTES_PER_EVENT = 220.0


def _vm(key: str) -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


_KIND = re.compile(r'\{"ph":"(.)"(?:,"cat":"([^"]*)")?')


def kind_breakdown(trace: ct.ChromeTrace) -> dict[str, list[int]]:
    """Trace event kind ("X cpu_op", "i cpu_instant_event", "C", "s fwdbwd"...) -> [count,
    bytes], bytes including the ",\\n" that separates events in the file."""
    out: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for chunk in trace.iter_event_chunks():
        for line in chunk.split(",\n"):
            ph, cat = _KIND.match(line).groups()
            if ph in "sf":
                cat = "fwdbwd" if '"cat":"fwdbwd"' in line else "ac2g"
            entry = out[f"{ph} {cat}" if cat else ph]
            entry[0] += 1
            entry[1] += len(line.encode("utf-8")) + 2
    return dict(out)


def export_once(data, path) -> tuple[float, ct.ChromeTrace]:
    t0 = time.perf_counter()
    trace = data.export_chrome_trace(path)
    return time.perf_counter() - t0, trace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                       "results", "export_speed.json"))
    args = parser.parse_args()

    t0 = time.perf_counter()
    data = training_profile(args.events)
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    data.analysis  # noqa: B018 - computed once, shared by every export
    analysis_s = time.perf_counter() - t0

    # The same events without memory records (their analysis computed before timing too).
    no_mem = ProfileData(data.event_columns, empty_columns(MEMORY_COLUMNS), data.strings, data.metadata)
    no_mem.analysis  # noqa: B018

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, suffix, prof in ((".json", ".json", data), (".json.gz", ".json.gz", data),
                                    (".json, no memory records", ".json", no_mem)):
            path = os.path.join(tmp, "trace" + suffix)
            runs = []
            trace = None
            for _ in range(args.repeats):
                s, trace = export_once(prof, path)
                runs.append(s)
            file_bytes = os.path.getsize(path)
            n_trace_events = (trace.stats["cpu_events"] + trace.stats["device_events"]
                              + 2 * trace.stats["fwdbwd_flows"] + 2 * trace.stats["ac2g_flows"]
                              + trace.stats["memory_events"] + trace.stats["counter_samples"])
            uncompressed = file_bytes
            if suffix.endswith(".gz"):
                import gzip  # noqa: PLC0415

                with gzip.open(path, "rb") as f:
                    uncompressed = sum(len(b) for b in iter(lambda: f.read(1 << 24), b""))

            # Writer memory, separate runs (tracemalloc slows everything down).
            rss_before = _vm("VmRSS")
            rss_ok = _reset_peak_rss()
            export_once(prof, path)
            rss_peak = _vm("VmHWM")
            rss_delta = (rss_peak - rss_before) if (rss_ok and rss_peak and rss_before) else None
            tracemalloc.start()
            base = tracemalloc.get_traced_memory()[0]
            export_once(prof, path)
            peak = (tracemalloc.get_traced_memory()[1] - base) / 2**20
            tracemalloc.stop()

            rows.append({
                "format": label, "profile_events": prof.n_events,
                "memory_records": prof.n_memory_records, "trace_events": n_trace_events,
                "export_s": statistics.median(runs), "export_runs_s": runs,
                "file_bytes": file_bytes, "uncompressed_bytes": uncompressed,
                "bytes_per_profile_event": uncompressed / prof.n_events,
                "bytes_per_trace_event": uncompressed / n_trace_events,
                "writer_peak_tracemalloc_mb": peak, "writer_peak_rss_delta_mb": rss_delta,
                "stats": trace.stats,
            })
            if label == ".json":
                kinds = kind_breakdown(trace)

    print(f"profile: {data.n_events:,} events, {data.n_memory_records:,} memory records "
          f"(build {build_s:.2f} s, analysis {analysis_s:.2f} s, not in export times)")
    header = (f"{'format':<26} {'export s':>9} {'trace events':>13} {'MB':>8} {'B/prof ev':>10} "
              f"{'B/trace ev':>11} {'peak MB (tm)':>13} {'peak MB (rss)':>14}")
    print(header)
    print("-" * len(header))
    for r in rows:
        rss = f"{r['writer_peak_rss_delta_mb']:.0f}" if r["writer_peak_rss_delta_mb"] is not None else "n/a"
        print(f"{r['format']:<26} {r['export_s']:>9.2f} {r['trace_events']:>13,} {r['file_bytes'] / 1e6:>8.1f} "
              f"{r['bytes_per_profile_event']:>10.1f} {r['bytes_per_trace_event']:>11.1f} "
              f"{r['writer_peak_tracemalloc_mb']:>13.0f} {rss:>14}")
    print(f"targets: export <= {TARGET_S} s, writer peak <= {TARGET_MB} MB, "
          f"<= {TARGET_BYTES_PER_EVENT} bytes per event (uncompressed)")
    print()
    header = f"{'trace event kind (.json)':<26} {'events':>11} {'MB':>8} {'B/event':>8} {'B/prof ev':>10}"
    print(header)
    print("-" * len(header))
    for name, (count, size) in sorted(kinds.items(), key=lambda kv: -kv[1][1]):
        print(f"{name:<26} {count:>11,} {size / 1e6:>8.1f} {size / count:>8.1f} {size / data.n_events:>10.1f}")

    result = {
        "benchmark": "export_speed", "python": platform.python_version(),
        "machine": platform.machine(), "cpus": os.cpu_count(),
        "build_s": build_s, "analysis_s": analysis_s,
        "targets": {"export_s": TARGET_S, "writer_peak_mb": TARGET_MB,
                    "bytes_per_event": TARGET_BYTES_PER_EVENT},
        "rows": rows,
        "kinds": {name: {"events": c, "bytes": b} for name, (c, b) in kinds.items()},
    }
    write_json(args.json, result)


if __name__ == "__main__":
    main()
