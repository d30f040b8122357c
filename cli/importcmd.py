"""``gradtrace import TRACE -o run.gtprof``: save a torch.profiler trace as a gradtrace profile.

Every command reads torch traces directly; importing once saves the parsing on each later
read (a gradtrace profile is mapped, with its analyses, in a fraction of the time).

``gradtrace import DIR -o OUT [--nproc N]``: a folder of traces, one per rank, becomes a run
folder (``OUT/rank{R}.gtprof``), imported in N processes; under ``mpirun`` (world size > 1)
the MPI ranks share the traces, each importing its own on its machine
(:mod:`profiler.rank_import`). The profiles are the same bytes however the work was shared.
"""
from __future__ import annotations

from pathlib import Path

from .errors import EXIT_USAGE, CLIError, check_output_path, load_profile

__all__ = ["cmd_import", "default_output"]


def default_output(trace: str) -> Path:
    """``run.pt.trace.json.gz`` -> ``run.pt.trace.gtprof`` (beside the trace)."""
    from gradtrace.profiler import FILE_SUFFIX  # noqa: PLC0415

    p = Path(trace)
    name = p.name
    for suffix in (".gz", ".json"):
        if name.endswith(suffix):
            name = name[:-len(suffix)]
    return p.with_name((name or "trace") + FILE_SUFFIX)


def cmd_import(args) -> int:
    from gradtrace.profiler.torch_trace import forward_backward_pairing, is_torch_trace  # noqa: PLC0415

    if getattr(args, "nproc", 1) < 1:
        raise CLIError(f"--nproc {args.nproc}: give at least 1 process")
    if Path(args.trace).is_dir():
        return _import_folder(args)
    if Path(args.trace).is_file() and not is_torch_trace(args.trace):
        raise CLIError(f"{args.trace}: not a torch trace (JSON or gzip JSON); a .gtprof profile "
                       "needs no import")
    out = check_output_path(args.out) if args.out else default_output(args.trace)
    data = load_profile(args.trace)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        data.save(out, compress=getattr(args, "compress", False), release_memory=True)
    except OSError as exc:
        raise CLIError(f"{out}: cannot write ({exc.strerror or exc})") from None
    counts = data.metadata["torch_trace"]
    print(f"wrote {out}: {data.n_events:,} events, {data.n_memory_records:,} memory records "
          f"(from {counts['events_in_file']:,} trace events)")
    pairing = forward_backward_pairing(data)
    if len(pairing.backward):
        print(pairing.summary())
    return 0


def _import_folder(args) -> int:
    """A folder of rank traces to a run folder; under MPI, every rank runs this, rank 0 reports."""
    from gradtrace.profiler import ProfileFormatError  # noqa: PLC0415
    from gradtrace.profiler.rank_import import import_run, mpi_world  # noqa: PLC0415
    from gradtrace.profiler.ranks import RUN_FILE, TRACE_FILE  # noqa: PLC0415
    from gradtrace.profiler.torch_trace import is_torch_trace  # noqa: PLC0415

    folder = Path(args.trace)
    traces = sorted(p for p in folder.iterdir() if p.is_file() and TRACE_FILE.search(p.name) and is_torch_trace(p))
    if not traces:
        raise CLIError(f"{folder}: no torch traces (*.json, *.json.gz) in this folder")
    out = Path(args.out) if args.out else folder
    if out.exists() and not out.is_dir():
        raise CLIError(f"{out}: exists and is not a folder; importing a folder writes a run folder")
    comm = mpi_world()
    if comm is None or comm.Get_rank() == 0:
        out.mkdir(parents=True, exist_ok=True)
        for stale in (p for p in out.iterdir() if RUN_FILE.match(p.name)):
            stale.unlink()          # a profile of a rank this import does not write would mix in
    if comm is not None:
        comm.Barrier()
    try:
        imported = import_run(traces, out, nproc=args.nproc, compress=args.compress, comm=comm)
    except (ProfileFormatError, ValueError) as exc:
        if comm is not None and comm.Get_rank() != 0:
            return EXIT_USAGE           # every rank has the same error; rank 0 says it
        raise CLIError(str(exc)) from None
    except OSError as exc:
        raise CLIError(f"{out}: cannot write ({exc.strerror or exc})") from None
    if comm is not None and comm.Get_rank() != 0:
        return 0
    where = f" on {comm.Get_size()} MPI ranks" if comm is not None else ""
    for rank, (path, n, n_trace) in imported.items():
        print(f"wrote {path}: rank {rank}, {n:,} events (from {n_trace:,} trace events)")
    print(f"imported {len(imported)} trace(s) in {args.nproc} process(es){where}; "
          f"next: gradtrace table {out}")
    return 0
