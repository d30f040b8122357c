"""Cut a torch.profiler (Kineto) trace down to one ProfilerStep: how ``gpu_1step.json.gz`` was made.

    python tests/profiler/data/cut_trace.py ../shared/kineto-samples/gpu_5steps_rank0.json.gz \\
        tests/profiler/data/gpu_1step.json.gz --step "ProfilerStep#550"

The source is HTA's test data (MIT licence; see ``KINETO_SAMPLES.md`` here). The cut keeps a
real trace's structure — the runtime calls, kernels with their launch arguments, memcpys,
memsets, NCCL kernels launched from threads the trace did not record, flows, the header —
so that kernel attribution and the GPU analyses are tested on real data whether or not
``../shared/kineto-samples`` is there, at a fifth of the sample's size.

What is kept:

* every metadata event (``"ph": "M"``: process and thread names) and the header;
* host events (ops, user annotations, runtime calls, instants) that start inside the step's
  host range ``[ts, ts + dur)``;
* GPU activities launched by a kept runtime call (same ``correlation``), wherever they ran
  (a step's kernels may end after its host range: the device tail); activities whose launch
  is in no thread of the trace are kept when they start inside the step's range;
* ``ac2g`` flow events of the kept launches; the ``Trace`` span event, clipped to the step.

The output is deterministic (events keep the source's order; gzip's time stamp is 0): running
the script again gives the same bytes.
"""
from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def cut(doc: dict, step: str) -> dict:
    """The trace ``doc`` (Kineto's JSON object) cut to the ProfilerStep named ``step``."""
    events = doc["traceEvents"]
    (marker,) = [e for e in events if e.get("name") == step and e.get("ph") == "X"]
    lo, hi = marker["ts"], marker["ts"] + marker["dur"]
    launched = {e["args"]["correlation"] for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and lo <= e["ts"] < hi
                and "correlation" in e.get("args", {})}
    all_launches = {e["args"]["correlation"] for e in events
                    if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    kept = []
    for e in events:
        cat, ph = e.get("cat"), e.get("ph")
        if ph == "M":
            kept.append(e)
        elif cat in GPU_CATEGORIES:
            corr = e.get("args", {}).get("correlation")
            if corr in launched or (corr not in all_launches and lo <= e["ts"] < hi):
                kept.append(e)
        elif cat == "ac2g":
            if e.get("id") in launched:
                kept.append(e)
        elif cat == "Trace":
            kept.append(dict(e, ts=lo, dur=hi - lo))
        elif "ts" in e and lo <= e["ts"] < hi:
            kept.append(e)
    return dict(doc, traceEvents=kept)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--step", default="ProfilerStep#550")
    args = parser.parse_args()
    opener = gzip.open if args.source.suffix == ".gz" else open
    with opener(args.source, "rt") as f:
        doc = json.load(f)
    small = cut(doc, args.step)
    text = json.dumps(small, separators=(",", ":"))
    with open(args.out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
        f.write(text.encode())
    print(f"{args.out}: {len(doc['traceEvents'])} -> {len(small['traceEvents'])} events, "
          f"{args.out.stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()
