"""Kernel recording on a real GPU (benchmarks/gpu_check.sh's ``kernel_recording`` step).

Profiles a few steps of a small MLP on cuda with ``record_kernels=True`` (CUPTI through
cupti-python), saves the profile, checks what only a GPU can show (the CUPTI clock aligned on
perf_counter: every kernel starts after its launching call started, within the profile; Σ self
CUDA = Σ kernel + memcpy + memset time, never above the wall clock; launch estimates filled),
then runs ``gradtrace gpu`` and ``gradtrace gpu --kernels`` on the file. Exits 1 when a check
fails; prints why kernel recording is off when it is.

    python3 benchmarks/kernel_recording_check.py --out kernels.gtprof
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _checkout_first() -> None:
    """Make this checkout the imported ``gradtrace`` without installing it (the GPU machine has
    no network and no dash): a folder ``gradtrace`` of links to its packages, first on the
    path, as tests/conftest.py does."""
    links = tempfile.mkdtemp(prefix="gradtrace-checkout-")
    os.mkdir(os.path.join(links, "gradtrace"))
    for pkg in ("autograd", "profiler", "viewer", "cli"):
        os.symlink(os.path.join(ROOT, pkg), os.path.join(links, "gradtrace", pkg))
    sys.path.insert(0, links)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="where to save the profile (.gtprof)")
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    _checkout_first()
    import numpy as np  # noqa: PLC0415

    import gradtrace.autograd as ag  # noqa: PLC0415
    from gradtrace import profiler  # noqa: PLC0415
    from gradtrace.autograd import nn, optim  # noqa: PLC0415
    from gradtrace.cli.main import main as cli  # noqa: PLC0415
    from gradtrace.profiler import cupti_activity  # noqa: PLC0415

    reason = cupti_activity.unavailable_reason()
    print("cupti-python:", "importable" if reason is None else reason)
    model = nn.Sequential(nn.Linear(256, 512, device="cuda"), nn.ReLU(), nn.Linear(512, 10, device="cuda"))
    opt = optim.SGD(model.parameters(), lr=0.01)
    x = ag.randn(64, 256, device="cuda")
    model(x).sum().backward()                  # warm-up: cuBLAS handles, kernel compilation
    with profiler.profile(activities=["cpu", "cuda"], record_kernels=None if reason else True) as prof:
        for _ in range(args.steps):
            loss = model(x).relu().sum()
            loss.backward()
            opt.step()
            opt.zero_grad()
            loss.item()
            prof.step()
    data = prof.profile_data
    data.save(args.out)
    meta = data.metadata
    print("kernel_recording:", meta.get("kernel_recording"), meta.get("kernel_recording_reason", ""),
          meta.get("kernel_recording_counts", ""))
    failures = []
    if meta.get("kernel_recording"):
        cols, g, a = data.event_columns, data.gpu_columns, data.analysis
        ev = g["event"]
        dur = cols["device_end_ns"][ev] - cols["device_start_ns"][ev]
        launch = a.parent[ev]
        lag = cols["device_start_ns"][ev] - np.where(launch >= 0, cols["start_ns"][np.maximum(launch, 0)], 0)
        wall = meta["end_time_ns"] - meta["start_time_ns"]
        print(f"{len(ev)} activities, {int(dur.sum())} ns device time, wall {wall} ns; launch -> start lag "
              f"min {int(lag[launch >= 0].min()) if (launch >= 0).any() else None} ns, "
              f"median {float(np.median(lag[launch >= 0])) if (launch >= 0).any() else None} ns")
        if not len(ev):
            failures.append("no kernels recorded")
        if int(a.self_cuda_ns.sum()) != int(dur.sum()):
            failures.append(f"sum of self CUDA {int(a.self_cuda_ns.sum())} != device time {int(dur.sum())}")
        if int(dur.sum()) > wall:
            failures.append("device time above the wall clock")
        if (lag[launch >= 0] < -2_000).any():
            failures.append(f"{int((lag[launch >= 0] < -2_000).sum())} activities start over 2 us before their "
                            "launching call: the clock alignment is off")
        if (launch < 0).any():
            failures.append(f"{int((launch < 0).sum())} activities without their launching call")
        kernels = g["kind"] == 0
        if kernels.any() and np.isnan(g["occupancy_pct"][kernels]).all():
            failures.append("no kernel has an occupancy estimate (device properties?)")
        # The launching calls sit on the threads of the ops that made them, inside those ops
        # (CUPTI names threads by pthread_self; the first H200 run put them all on a new thread).
        print("engine threads (logical: gettid, pthread_self, low 32 bits):", ag.grad_mode.native_thread_ids())
        unmatched = meta["kernel_recording_counts"].get("unmatched_os_threads")
        if unmatched:
            failures.append(f"API calls on OS threads {unmatched} matched no engine thread")
        outside = int(((launch >= 0) & (a.parent[np.maximum(launch, 0)] < 0)).sum())
        if outside:
            failures.append(f"{outside} launching calls inside no op")
        if a.unlinked_backward:
            failures.append(f"{a.unlinked_backward} backward events without their forward op")
    for argv in (["gpu", args.out], ["gpu", args.out, "--kernels"]):
        print("$ gradtrace", " ".join(argv))
        try:
            rc = cli(argv)
        except SystemExit as exc:
            rc = exc.code
        if rc not in (0, None):
            failures.append(f"gradtrace {' '.join(argv)} exited {rc}")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
