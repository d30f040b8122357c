"""Data-parallel training over MPI: step time of 1, 2 and 3 ranks, all-reduce bandwidth against
message size, and the share of gradient communication hidden behind backward.

Each measurement is one ``mpirun -n N`` job of this script in ``--worker`` mode (Open MPI from
the ``mpi`` extra). Weak scaling: every rank trains the same MLP on its own batch of
``--batch`` rows, with DistributedDataParallel (1 rank: DDP over a world of one, so the
reducer's own cost is in the baseline). Step time is the slowest rank's, median over steps.
The hidden share comes from profiled steps (profiler/ranks.py): communication in flight while
the host ran backward, over all time in flight. On a machine with fewer cores than ranks, the
ranks share cores and the numbers say more about that than about MPI. The ranks' BLAS threads
are set as ``gradtrace run --nproc`` sets them (cli/launch.py): without that, every rank's
OpenBLAS spins one thread per core and 2 ranks on 2 cores ran 20 to 50 times slower.

Usage: python benchmarks/data_parallel.py [--steps 20] [--width 512] [--batch 64] [--quick]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _results import RESULTS_DIR, write_json  # noqa: E402


def worker_step(args) -> dict:
    import numpy as np

    import gradtrace.autograd as ag
    from gradtrace import profiler
    from gradtrace.autograd import distributed as dist, nn, optim
    from gradtrace.autograd.nn.parallel import DistributedDataParallel as DDP
    from gradtrace.profiler.ranks import rank_steps

    rank, n = dist.get_rank(), dist.get_world_size()
    layers = []
    for _ in range(args.layers):
        layers += [nn.Linear(args.width, args.width), nn.Tanh()]
    model = nn.Sequential(*layers, nn.Linear(args.width, 10))
    ddp = DDP(model, bucket_cap_mb=args.bucket_mb)
    opt = optim.SGD(ddp.parameters(), lr=1e-3)
    rng = np.random.default_rng(rank)
    x = ag.tensor(rng.standard_normal((args.batch, args.width)).astype("float32"))
    y = ag.tensor(rng.standard_normal((args.batch, 10)).astype("float32"))

    def step():
        opt.zero_grad()
        ((ddp(x) - y) ** 2).mean().backward()
        opt.step()

    for _ in range(args.warmup):
        step()
    times = []
    for _ in range(args.steps):
        dist.barrier()
        t0 = time.perf_counter_ns()
        step()
        t = ag.tensor([float(time.perf_counter_ns() - t0)], dtype="float64")
        dist.all_reduce(t, dist.ReduceOp.MAX)        # the step ends when the slowest rank's does
        times.append(t.item())
    profiled = max(2, args.steps // 4)
    with profiler.profile(schedule=profiler.schedule(wait=0, warmup=1, active=profiled)) as prof:
        for _ in range(profiled + 1):
            step()
            prof.step()
    rows = rank_steps(prof.profile_data)
    flight = sum(r["communication_ns"] for r in rows)
    hidden = sum(r["hidden_ns"] for r in rows)
    share = ag.tensor([hidden / flight if flight else 0.0], dtype="float64")
    dist.all_reduce(share, dist.ReduceOp.AVG)
    params = sum(p.numel() for p in model.parameters())
    return {"ranks": n, "step_ms": statistics.median(times) / 1e6, "params": params,
            "buckets": len(ddp._buckets), "hidden_share": share.item()}


def worker_bandwidth(args) -> dict:
    import gradtrace.autograd as ag
    from gradtrace.autograd import distributed as dist

    n = dist.get_world_size()
    rows = []
    for nbytes in args.sizes:
        t = ag.zeros(nbytes // 4, dtype="float32")
        for _ in range(2):
            dist.all_reduce(t)
        times = []
        for _ in range(args.repeats):
            dist.barrier()
            t0 = time.perf_counter_ns()
            dist.all_reduce(t)
            times.append(time.perf_counter_ns() - t0)
        seconds = statistics.median(times) / 1e9
        algbw = nbytes / seconds / 1e9
        rows.append({"bytes": nbytes, "time_us": seconds * 1e6, "algbw_GBps": algbw,
                     "busbw_GBps": algbw * 2 * (n - 1) / n})
    return {"ranks": n, "rows": rows}


def run_worker(args) -> None:
    from gradtrace.autograd import distributed as dist

    dist.init_process_group("mpi", timeout=300)
    result = worker_step(args) if args.worker == "step" else worker_bandwidth(args)
    if dist.get_rank() == 0:
        print("RESULT " + json.dumps(result), flush=True)
    dist.destroy_process_group()


def mpirun(n: int, argv: list, blas_threads: int | None = None) -> dict:
    """One ``mpirun -n N`` job of this script, started as ``gradtrace run --nproc N`` starts
    its ranks (root's permission, each rank's share of the cores for BLAS), or with
    ``blas_threads`` per rank."""
    from gradtrace.cli.errors import CLIError
    from gradtrace.cli.launch import mpirun_env, mpirun_path

    try:
        exe = mpirun_path()
    except CLIError as exc:
        sys.exit(f"this benchmark needs Open MPI's mpirun: {exc}")
    env, env_args, threads = mpirun_env(n)
    if blas_threads is not None:
        threads = blas_threads
        env["OMP_NUM_THREADS"], env_args = str(threads), ["-x", "OMP_NUM_THREADS"]
    res = subprocess.run([exe, "-n", str(n), "--oversubscribe", *env_args, sys.executable,
                          os.path.abspath(__file__), *argv], capture_output=True, text=True, env=env,
                         timeout=1800)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")]
    if res.returncode != 0 or not lines:
        sys.exit(f"mpirun -n {n} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
    result = json.loads(lines[0][len("RESULT "):])
    result["blas_threads"] = threads if threads is not None else env.get("OMP_NUM_THREADS", "default")
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20, help="timed steps per rank count (default 20)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--width", type=int, default=512, help="MLP width (default 512)")
    p.add_argument("--layers", type=int, default=4, help="hidden layers (default 4)")
    p.add_argument("--batch", type=int, default=64, help="rows per rank (default 64)")
    p.add_argument("--bucket-mb", type=float, default=1.0, help="DDP bucket_cap_mb (default 1)")
    p.add_argument("--repeats", type=int, default=20, help="all-reduces per message size (default 20)")
    p.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    p.add_argument("--json", default=os.path.join(RESULTS_DIR, "data_parallel.json"))
    p.add_argument("--worker", choices=("step", "bandwidth"), help=argparse.SUPPRESS)
    p.add_argument("--sizes", type=int, nargs="*", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.quick:
        args.steps, args.warmup, args.width, args.layers, args.repeats = 3, 1, 64, 2, 3
    if args.worker:
        run_worker(args)
        return
    common = ["--steps", str(args.steps), "--warmup", str(args.warmup), "--width", str(args.width),
              "--layers", str(args.layers), "--batch", str(args.batch), "--bucket-mb", str(args.bucket_mb)]
    # One rank twice: with every core for its BLAS (what a single process gets), and with one
    # thread, as each of 2 or 3 ranks on two cores gets: the second is the baseline of
    # "vs 1 rank", so that the ratio measures DDP and sharing the cores, not BLAS threading.
    steps = [mpirun(1, common + ["--worker", "step"]),
             mpirun(1, common + ["--worker", "step"], blas_threads=1)]
    steps += [mpirun(n, common + ["--worker", "step"]) for n in (2, 3)]
    base = steps[1]["step_ms"]
    print(f"\nDDP step time, MLP {args.layers}x{args.width} ({steps[0]['params']:,} params, "
          f"{steps[0]['buckets']} buckets of <= {args.bucket_mb} MB), {args.batch} rows per rank, "
          f"{os.cpu_count()} cores; 'vs 1 rank': against 1 rank with 1 BLAS thread")
    print(f"{'ranks':>5} {'BLAS threads':>12} {'step ms':>9} {'vs 1 rank':>9} {'rows/s':>9} {'hidden comm':>12}")
    for s in steps:
        rows_s = s["ranks"] * args.batch / (s["step_ms"] / 1e3)
        hidden = "-" if s["ranks"] == 1 else f"{100 * s['hidden_share']:.1f}%"
        print(f"{s['ranks']:>5} {s['blas_threads']!s:>12} {s['step_ms']:>9.2f} {s['step_ms'] / base:>8.2f}x "
              f"{rows_s:>9.0f} {hidden:>12}")
    sizes = [4 << 10, 64 << 10, 1 << 20] if args.quick else [4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20]
    bws = [mpirun(n, ["--worker", "bandwidth", "--repeats", str(args.repeats), "--sizes", *map(str, sizes)])
           for n in (2, 3)]
    print("\nall_reduce (float32, MPI, one machine): median time and bandwidth")
    heads = [(str(b["ranks"]) + " ranks us", "busbw GB/s") for b in bws]
    print(f"{'bytes':>10} " + " ".join(f"{t:>12} {w:>10}" for t, w in heads))
    for i, nbytes in enumerate(sizes):
        print(f"{nbytes:>10} " + " ".join(f"{b['rows'][i]['time_us']:>12.1f} {b['rows'][i]['busbw_GBps']:>10.3f}"
                                          for b in bws))
    write_json(args.json, {"benchmark": "data_parallel", "args": {k: v for k, v in vars(args).items()
                                                                  if k not in ("worker", "sizes", "json")},
                           "cpu_count": os.cpu_count(), "steps": steps, "all_reduce": bws})


if __name__ == "__main__":
    main()
