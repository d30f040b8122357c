"""Import speed and peak memory of large torch.profiler (Kineto) traces, plain and gzip.

The traces come from :func:`profiler.synthetic_trace.write_torch_trace`: Kineto's layout, the
event mix of a real training trace (runtime calls with correlation, ops with shapes and
sequence numbers, kernels with launch arguments, memcpy/memset, ac2g and fwdbwd flows, Python
frames, module ranges, ``[memory]`` instants, ProfilerSteps), 1M / 5M / 10M events by default.

Each import runs in a fresh process: wall time and CPU time (the process and its parsing
workers) of ``profiler.load`` (the read); peak resident memory of the process (bytes per event
of the file) and of its largest worker; then the whole import as ``gradtrace import`` does it
(the read, then the stored analyses computed and the file written: wall time and peak memory),
the ``.gtprof`` size, and the time to reopen it and print the operator table. The machine may be shared: CPU seconds say what the import
costs whatever the load, events per CPU second are given beside events per second.

``--baseline DIR`` measures another checkout the same way in the same run (e.g. the reader
before the msgspec one: ``git archive 2aef58d autograd profiler viewer cli | tar -x -C DIR``).
``--parsers FILE`` times the candidate JSON parsers on a trace (parse only).

Targets (2-core machine): >= 330k events/s, <= 150 bytes of peak memory per event
(5M events <= 15 s within 750 MB, 10M <= 30 s within 1.5 GB).

Run: python benchmarks/torch_trace_import.py [--events 1000000 5000000] [--gzip] [--baseline DIR]
Writes benchmarks/results/torch_trace_import.json.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _results import RESULTS_DIR, write_json  # noqa: E402

_MEASURE = r"""
import json, os, resource, sys, time
path, saved = sys.argv[1], sys.argv[2]
from gradtrace import profiler
import numpy, msgspec  # noqa: F401  (imported before the baseline is taken)
def cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
base_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t0, c0 = time.perf_counter(), cpu()
data = profiler.load(path)
t1, c1 = time.perf_counter(), cpu()
out = {"load_s": t1 - t0, "load_cpu_s": c1 - c0, "events_in_file": data.metadata["torch_trace"]["events_in_file"],
       "events": data.n_events, "base_mb": base_mb,
       "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
       "worker_peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}
# What `gradtrace import` does after reading: the analyses the file stores (nesting, tables,
# forward/backward, the GPU summary) computed and the file written.
t3 = time.perf_counter()
data.save(saved, release_memory=True)   # as `gradtrace import` saves
out["save_s"] = time.perf_counter() - t3
out["import_s"] = out["load_s"] + out["save_s"]
out["import_peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
del data
out["gtprof_mb"] = os.path.getsize(saved) / 1e6
t2 = time.perf_counter()
again = profiler.load(saved)
again.key_averages().table(sort_by="self_cuda_time_total", row_limit=20)
out["reopen_table_s"] = time.perf_counter() - t2
print(json.dumps(out))
"""


def _links(checkout: Path) -> str:
    """A folder whose ``gradtrace`` package links to ``checkout``'s packages."""
    folder = Path(tempfile.mkdtemp(prefix="gradtrace-links-"))
    (folder / "gradtrace").mkdir()
    for pkg in ("autograd", "profiler", "viewer", "cli"):
        os.symlink(checkout.resolve() / pkg, folder / "gradtrace" / pkg)
    return str(folder)


def measure(path: Path, checkout: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=_links(checkout))
    with tempfile.TemporaryDirectory(prefix="gradtrace-bench-") as tmp:
        res = subprocess.run([sys.executable, "-c", _MEASURE, str(path), os.path.join(tmp, "t.gtprof")],
                             capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise RuntimeError(res.stderr[-2000:])
    out = json.loads(res.stdout.strip().splitlines()[-1])
    n = out["events_in_file"]
    out.update(events_per_s=n / out["load_s"], events_per_cpu_s=n / out["load_cpu_s"],
               bytes_per_event=out["peak_mb"] * 2**20 / n, import_bytes_per_event=out["import_peak_mb"] * 2**20 / n)
    return out


# --------------------------------------------------------------------------- parsers


def compare_parsers(path: Path) -> list[dict]:
    """Parse-only time of each candidate on the events of ``path`` (plain JSON), in chunks of
    whole events as the reader cuts them; ijson streams the file itself."""
    import re

    import msgspec

    sys.path.insert(0, _links(Path(__file__).resolve().parents[1]))
    from gradtrace.profiler.torch_trace_events import Event

    data = path.read_bytes()
    start = data.index(b"[", data.index(b'"traceEvents"')) + 1
    body = data[start:data.rindex(b"]")]
    cut = re.compile(rb"\}\s*,\s*(?=\{)")
    chunks, pos = [], 0
    while pos < len(body):
        m = cut.search(body, pos + (1 << 22))
        end = m.start() + 1 if m else len(body)
        chunks.append(b"[" + body[pos:end] + b"]")
        pos = m.end() if m else len(body)
    typed = msgspec.json.Decoder(list[Event])
    candidates = {"json.loads (stdlib)": lambda b: json.loads(b.decode())}
    try:   # optional: compared where installed
        import orjson
        candidates[f"orjson {orjson.__version__} (dicts)"] = orjson.loads
    except ImportError:
        pass
    candidates[f"msgspec {msgspec.__version__} (dicts)"] = msgspec.json.decode
    candidates[f"msgspec {msgspec.__version__} (typed Struct)"] = typed.decode
    rows = []
    for name, parse in candidates.items():
        c0 = time.process_time()
        n = sum(len(parse(c)) for c in chunks)
        rows.append({"parser": name, "events": n, "cpu_s": time.process_time() - c0})
    try:
        import ijson
        c0 = time.process_time()
        with open(path, "rb") as f:
            n = sum(1 for _ in ijson.items(f, "traceEvents.item", use_float=True))
        rows.append({"parser": f"ijson {ijson.__version__} ({ijson.backend})", "events": n,
                     "cpu_s": time.process_time() - c0})
    except ImportError:
        pass
    mb = len(body) / 1e6
    print(f"{path.name}: {rows[0]['events']:,} events, {mb:,.0f} MB")
    print(f"{'parser':36}{'CPU s':>8}{'events/CPU s':>15}{'MB/CPU s':>10}")
    for r in rows:
        r["events_per_cpu_s"] = r["events"] / r["cpu_s"]
        print(f"{r['parser']:36}{r['cpu_s']:>8.2f}{r['events_per_cpu_s']:>15,.0f}{mb / r['cpu_s']:>10.0f}")
    return rows


# --------------------------------------------------------------------------- main


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, nargs="+", default=[1_000_000, 5_000_000, 10_000_000])
    parser.add_argument("--gzip", action=argparse.BooleanOptionalAction, default=True,
                        help="also import the gzip form of each trace (default: yes)")
    parser.add_argument("--baseline", type=Path, help="another checkout, measured the same way")
    parser.add_argument("--parsers", type=Path, help="compare JSON parsers on this plain trace and stop")
    parser.add_argument("--quick", action="store_true", help="one 200,000-event trace")
    parser.add_argument("--keep", type=Path, help="keep the generated traces in this folder")
    parser.add_argument("--out", default=os.path.join(RESULTS_DIR, "torch_trace_import.json"))
    args = parser.parse_args(argv)
    if args.parsers:
        return write_json(args.out.replace(".json", "_parsers.json"), {"parsers": compare_parsers(args.parsers)})
    sizes = [200_000] if args.quick else args.events
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, _links(root))
    from gradtrace.profiler.synthetic_trace import write_torch_trace

    checkouts = {"this": root}
    if args.baseline:
        checkouts["baseline"] = args.baseline
    folder = args.keep or Path(tempfile.mkdtemp(prefix="gradtrace-torchtrace-"))
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    # read: profiler.load (the trace into columns); import: read + the stored analyses computed
    # and the file written, what `gradtrace import` does.
    print(f"{'trace':24}{'code':10}{'events':>12}{'MB':>7}{'read s':>8}{'CPU s':>7}{'ev/s':>10}"
          f"{'ev/CPU s':>10}{'peak MB':>9}{'B/ev':>6}{'worker MB':>10}{'import s':>9}{'peak MB':>9}{'B/ev':>6}"
          f"{'gtprof MB':>10}{'reopen+table s':>15}")
    for n in sizes:
        for gz in ([False, True] if args.gzip else [False]):
            path = folder / f"trace_{n}.json{'.gz' if gz else ''}"
            if not path.exists():
                write_torch_trace(path, n, gz=gz)
            for code, checkout in checkouts.items():
                r = measure(path, checkout)
                r.update(trace=path.name, code=code, file_mb=path.stat().st_size / 1e6)
                rows.append(r)
                print(f"{path.name:24}{code:10}{r['events_in_file']:>12,}{r['file_mb']:>7,.0f}{r['load_s']:>8.1f}"
                      f"{r['load_cpu_s']:>7.1f}{r['events_per_s']:>10,.0f}{r['events_per_cpu_s']:>10,.0f}"
                      f"{r['peak_mb']:>9,.0f}{r['bytes_per_event']:>6.0f}{r['worker_peak_mb']:>10,.0f}"
                      f"{r['import_s']:>9.1f}{r['import_peak_mb']:>9,.0f}{r['import_bytes_per_event']:>6.0f}"
                      f"{r['gtprof_mb']:>10.1f}{r['reopen_table_s']:>15.2f}", flush=True)
            if not args.keep:
                path.unlink()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end "
          f"(a shared machine makes wall times longer; CPU seconds are not)")
    return write_json(args.out, {"runs": rows, "targets": {"events_per_s": 330_000, "bytes_per_event": 150}})


if __name__ == "__main__":
    main()
