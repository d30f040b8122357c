"""Import speed and peak memory of a large torch.profiler (Kineto) trace.

A synthetic trace follows the format PyTorch writes (``prof.export_chrome_trace``): Kineto's
indented one-field-per-line layout, a header with ``deviceProperties``, ``distributedInfo``
and ``baseTimeNanoseconds``, and training steps made of ``ProfilerStep#N`` and
``record_function`` ranges, ``cpu_op`` forward ops with sequence numbers, input dims, types
and strides, ``autograd::engine::evaluate_function`` ranges around backward nodes,
``cudaLaunchKernel`` runtime calls with their ``kernel`` (same ``correlation`` and
``External id``), ``ac2g`` and ``fwdbwd`` flows and ``[memory]`` instants. Times are
microseconds with nanosecond fractions.

Each measurement runs in a fresh process: wall time of ``profiler.load`` (the import) and of
the operator table after it (analysis + ``key_averages().table()``), and the process's peak
resident memory. The reference, measured in the same run, is ``json.load`` of the same file,
which holds every event as a dict and does nothing else.

Targets (1,000,000 events, ~400 MB, on a 2-core machine): import + table <= 10 s, peak <= 1.5 GB.

Run: python benchmarks/torch_trace_import.py [--events 1000000] [--keep]
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

_PID, _MAIN, _BWD = 4242, 4242, 4300
_KERNEL = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
           "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)")
_GEMM = "ampere_sgemm_128x64_tn"


class _Trace:
    """Writes events in Kineto's layout; ``t`` is the running clock in ns."""

    def __init__(self, out):
        self.out = out
        self.t = 1_000_000_000_000
        self.ext = 0
        self.corr = 0
        self.seq = 0
        self.flow = 0
        self.n = 0

    @staticmethod
    def us(ns: int) -> str:
        return f"{ns // 1000}.{ns % 1000:03d}"

    def write(self, text: str) -> None:
        self.out.write(text)
        self.n += 1

    def x(self, cat, name, start, end, tid=_MAIN, args=""):
        self.ext += 1
        self.write(f',\n  {{\n    "ph": "X", "cat": "{cat}", "name": "{name}", "pid": {_PID}, "tid": {tid},\n'
                   f'    "ts": {self.us(start)}, "dur": {self.us(end - start)},\n'
                   f'    "args": {{\n      "External id": {self.ext},{args}\n      "Ev Idx": {self.n}\n    }}\n  }}')
        return self.ext

    def op(self, name, start, end, dims, seq=None, fwd_tid=None, tid=_MAIN):
        extra = ""
        if seq is not None:
            extra += f'\n      "Sequence number": {seq}, "Fwd thread id": {fwd_tid},'
        types = ", ".join('"float"' for _ in dims)
        strides = ", ".join(str([d[-1], 1] if len(d) == 2 else [1]) for d in dims)
        concrete = ", ".join('""' for _ in dims)
        extra += (f'\n      "Record function id": 0, "Concrete Inputs": [{concrete}], "Input type": [{types}], '
                  f'"Input Strides": [{strides}], "Input Dims": {json.dumps(dims)},')
        return self.x("cpu_op", name, start, end, tid, extra)

    def launch(self, kernel, start, tid=_MAIN, ext=0, gemm=False):
        """cudaLaunchKernel at ``start`` (3 us) and its kernel 10 us later (5 or 20 us)."""
        self.corr += 1
        self.x("cuda_runtime", "cudaLaunchKernel", start, start + 3000, tid, f'\n      "cbid": 211, "correlation": {self.corr},')
        k0 = start + 10_000
        k1 = k0 + (20_000 if gemm else 5_000)
        self.write(f',\n  {{\n    "ph": "X", "cat": "kernel", "name": "{kernel}", "pid": 0, "tid": 7,\n'
                   f'    "ts": {self.us(k0)}, "dur": {self.us(k1 - k0)},\n'
                   f'    "args": {{\n      "External id": {ext}, "queued": 0, "device": 0, "context": 1, "stream": 7,'
                   f' "correlation": {self.corr}, "registers per thread": 32, "shared memory": 0,\n'
                   f'      "blocks per SM": 1.5, "warps per SM": 6.0, "grid": [160, 1, 1], "block": [128, 1, 1],'
                   f' "est. achieved occupancy %": 9\n    }}\n  }}')
        for ph, ts, tid_ in (("s", start, tid), ("f", k0, 7)):
            bp = ', "bp": "e"' if ph == "f" else ""
            self.write(f',\n  {{\n    "ph": "{ph}", "id": {self.corr}, "pid": {_PID if ph == "s" else 0}, "tid": {tid_}, '
                       f'"ts": {self.us(ts)},\n    "cat": "ac2g", "name": "ac2g"{bp}\n  }}')

    def memory(self, at, nbytes, total, tid=_MAIN):
        self.write(f',\n  {{\n    "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",\n'
                   f'    "pid": {_PID}, "tid": {tid},\n    "ts": {self.us(at)},\n'
                   f'    "args": {{\n      "Total Reserved": 4194304, "Total Allocated": {total}, "Bytes": {nbytes}, '
                   f'"Addr": 139872, "Device Id": 0, "Device Type": 1, "Ev Idx": {self.n}\n    }}\n  }}')

    def step(self, k: int, layers: int = 8, batch: int = 64, width: int = 512) -> None:
        """One training step: forward, backward on the autograd thread, optimizer."""
        t0 = self.t
        t = t0 + 2_000
        fwd_seq = []
        act = [batch, width]
        forward_start = t
        t += 1_000
        for _ in range(layers):
            lin0 = t
            seq = self.seq
            t += 2_000
            self.op("aten::t", t, t + 4_000, [[width, width]], seq, 0)
            t += 6_000
            self.seq += 1
            a0 = t
            self.launch(_GEMM, t + 5_000, ext=self.ext + 1, gemm=True)
            self.memory(t + 4_000, batch * width * 4, 1 << 24)
            self.op("aten::addmm", a0, a0 + 20_000, [[width], act, [width, width], [], []], seq + 1, 0)
            t = a0 + 22_000
            self.op("aten::linear", lin0, t, [act, [width, width], [width]], seq, 0)
            self.seq += 1
            self.launch(_KERNEL, t + 3_000, ext=self.ext + 1)
            self.op("aten::relu", t, t + 9_000, [act], self.seq, 0)
            fwd_seq.append((seq, self.seq))
            self.seq += 1
            t += 11_000
        self.x("user_annotation", "forward", forward_start, t)
        # Backward: the autograd thread runs the nodes, innermost layer first.
        b = t + 5_000
        for seq_t, seq_relu in reversed(fwd_seq):
            for node, seq, ops in (("ReluBackward0", seq_relu, ["aten::threshold_backward"]),
                                   ("AddmmBackward0", seq_t + 1, ["aten::mm", "aten::mm", "aten::sum"]),
                                   ("TBackward0", seq_t, ["aten::t"])):
                w0 = b
                b += 1_000
                n0 = b
                b += 1_000
                for name in ops:
                    self.launch(_GEMM if name == "aten::mm" else _KERNEL, b + 1_000, tid=_BWD,
                                ext=self.ext + 1, gemm=name == "aten::mm")
                    self.op(name, b, b + 8_000, [act, [width, width]], tid=_BWD)
                    b += 9_000
                self.op(node, n0, b, [act], seq, 1, tid=_BWD)
                b += 1_000
                self.memory(b, -batch * width * 4, 1 << 24, tid=_BWD)
                self.op(f"autograd::engine::evaluate_function: {node}", w0, b + 500, [], seq, 1, tid=_BWD)
                b += 2_000
        self.x("user_annotation", "backward", t + 4_000, b + 1_000)
        o = b + 3_000
        self.launch(_KERNEL, o + 2_000, ext=self.ext + 2)
        self.op("aten::_foreach_add_", o + 1_000, o + 12_000, [[width, width], [width, width], []])
        self.x("user_annotation", "Optimizer.step#SGD.step", o, o + 14_000)
        end = o + 16_000
        self.x("user_annotation", f"ProfilerStep#{k}", t0, end)
        self.t = end + 5_000


def write_trace(path: Path, n_events: int) -> int:
    """Write a trace of about ``n_events`` events to ``path``; returns the exact count."""
    with open(path, "w") as out:
        out.write('{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {"id": 0, "name": "NVIDIA H100", '
                  '"totalGlobalMem": 85000000000, "computeMajor": 9, "computeMinor": 0, "numSms": 132}\n  ],\n'
                  '  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},\n'
                  '  "record_shapes": 1,\n  "profile_memory": 1,\n'
                  '  "baseTimeNanoseconds": 1700000000000000000,\n  "traceEvents": [\n'
                  '  {"name": "process_name", "ph": "M", "ts": 0, "pid": 4242, "tid": 0, "args": {"name": "python"}}')
        trace = _Trace(out)
        k = 0
        while trace.n < n_events:
            trace.step(k)
            k += 1
        out.write('\n],\n  "displayTimeUnit": "ms",\n  "traceName": "synthetic.pt.trace.json"\n}\n')
    return trace.n + 1


_MEASURE = r"""
import json, resource, sys, time
path, what = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
if what == "json.load":
    with open(path) as f:
        doc = json.load(f)
    out = {"load_s": time.perf_counter() - t0, "events": len(doc["traceEvents"])}
else:
    from gradtrace import profiler
    data = profiler.load(path)
    t1 = time.perf_counter()
    text = data.key_averages().table(sort_by="self_cuda_time_total", row_limit=20)
    t2 = time.perf_counter()
    out = {"load_s": t1 - t0, "table_s": t2 - t1, "events": data.n_events,
           "memory_records": data.n_memory_records, "pairing": data.metadata["torch_trace"].get("events"),
           "self_cuda_ms": float(data.analysis.self_cuda_ns.sum()) / 1e6}
usage = resource.getrusage(resource.RUSAGE_SELF)
out["peak_rss_mb"] = usage.ru_maxrss / 1024
out["cpu_s"] = usage.ru_utime + usage.ru_stime   # the machine may be shared: CPU time too
print(json.dumps(out))
"""


def measure(path: Path, what: str) -> dict:
    res = subprocess.run([sys.executable, "-c", _MEASURE, str(path), what], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(res.stderr)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keep", action="store_true", help="keep the generated trace")
    parser.add_argument("--out", default=os.path.join(RESULTS_DIR, "torch_trace_import.json"))
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="gradtrace-torchtrace-"))
    path = tmp / "synthetic.pt.trace.json"
    t0 = time.perf_counter()
    n = write_trace(path, args.events)
    gen_s = time.perf_counter() - t0
    size_mb = path.stat().st_size / 1e6
    ours = measure(path, "gradtrace")
    ref = measure(path, "json.load")
    total = ours["load_s"] + ours["table_s"]
    print(f"trace: {n:,} events, {size_mb:,.0f} MB (written in {gen_s:.1f} s)")
    print(f"{'':32}{'wall s':>10}{'peak RSS MB':>14}{'CPU s':>10}")
    print(f"{'json.load (reference)':32}{ref['load_s']:>10.2f}{ref['peak_rss_mb']:>14,.0f}{ref['cpu_s']:>10.2f}")
    print(f"{'gradtrace import + table':32}{'':>10}{ours['peak_rss_mb']:>14,.0f}{ours['cpu_s']:>10.2f}")
    print(f"{'  import':32}{ours['load_s']:>10.2f}")
    print(f"{'  + analysis and table':32}{ours['table_s']:>10.2f}")
    print(f"{'  import + table':32}{total:>10.2f}   (target <= 10 s, <= 1,536 MB)")
    print(f"profile: {ours['events']:,} events, {ours['memory_records']:,} memory records")
    result = {"trace_events": n, "trace_mb": round(size_mb, 1), "gradtrace": ours, "json_load": ref,
              "import_plus_table_s": round(total, 3), "target_s": 10.0, "target_peak_mb": 1536,
              "time_vs_json_load": round(total / ref["load_s"], 3),
              "cpu_vs_json_load": round(ours["cpu_s"] / ref["cpu_s"], 3),
              "peak_vs_json_load": round(ours["peak_rss_mb"] / ref["peak_rss_mb"], 3)}
    if args.keep:
        print(f"kept {path}")
    else:
        path.unlink()
        tmp.rmdir()
    return write_json(args.out, result)


if __name__ == "__main__":
    main()
