"""Importing a run folder's torch traces, one per rank, in parallel: in N local processes, or
spread over the ranks of an MPI job (``mpirun -n K gradtrace import DIR -o OUT``).

Each trace is imported by :func:`import_one` — the same function whichever way the work is
shared — and saved as a version-5 profile, so a serial, a ``--nproc`` and an MPI import write
the same bytes. Files are written under a temporary name and renamed to ``rank{R}.gtprof``
once every trace has been read and no two claim one rank.

Processes are started with ``spawn`` (no fork of a parent holding threads, maps or an MPI
library), and each returns a small tuple, never a profile: the profile goes through the
file, which the parent maps instead of unpickling columns.
"""
from __future__ import annotations

import os
import re
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

__all__ = ["import_one", "import_traces", "import_run", "mpi_world", "PARALLEL_MIN_BYTES"]

# Below this many bytes of traces, starting processes costs more than it saves.
PARALLEL_MIN_BYTES = 64 << 20
# The environment Open MPI (and other PMI launchers) give each rank.
# ``rank1``, ``rank_1``, ``rank-1`` in a trace file name.
RANK_IN_NAME = re.compile(r"rank[_-]?(\d+)", re.IGNORECASE)
_WORLD_SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE")


def trace_rank(data, path: Path) -> int | None:
    """The rank of a torch trace: ``distributedInfo.rank``, else ``rankN`` in its file name;
    None when neither says."""
    info = data.metadata.get("distributed_info")
    rank = info.get("rank") if isinstance(info, dict) else None
    if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0:
        return rank
    m = RANK_IN_NAME.search(path.name)
    return int(m.group(1)) if m else None


def import_one(trace: str, out_dir: str, compress: bool = False) -> tuple[int, str, int, int]:
    """Import one trace and save it in ``out_dir`` under a temporary name.

    Returns:
        (rank, the file written, events, trace events in the file).
    Raises:
        ProfileFormatError: the trace cannot be read; ValueError: it names no rank.
    """
    from .data import load  # noqa: PLC0415 - in the worker process

    data = load(trace)
    rank = trace_rank(data, Path(trace))
    if rank is None:
        raise ValueError(f"{trace}: no rank (no distributedInfo.rank in the trace, no rankN in its name)")
    out = Path(out_dir) / f".rank{rank}.{os.getpid()}.{Path(trace).name}.gtprof.part"
    data.save(out, compress=compress, release_memory=True)
    counts = data.metadata.get("torch_trace") or {}
    return rank, str(out), data.n_events, int(counts.get("events_in_file", 0))


def import_traces(traces: list, out_dir, nproc: int = 1, compress: bool = False) -> list[tuple]:
    """:func:`import_one` of each trace, in ``nproc`` processes (1: in this one), in order.

    Raises:
        the first trace's error (in trace order), once every trace is done; the files of the
        others are removed then.
    """
    traces = [str(t) for t in traces]
    results, errors = [], []
    if nproc <= 1 or len(traces) < 2:
        for t in traces:
            try:
                results.append(import_one(t, str(out_dir), compress))
            except (ValueError, OSError) as exc:     # ProfileFormatError is a ValueError
                errors.append(exc)
                break
    else:
        with ProcessPoolExecutor(max_workers=min(nproc, len(traces)), mp_context=get_context("spawn")) as pool:
            futures = [pool.submit(import_one, t, str(out_dir), compress) for t in traces]
            for future in futures:
                try:
                    results.append(future.result())
                except (ValueError, OSError) as exc:
                    errors.append(exc)
    if errors:
        _discard(results)
        raise errors[0]
    return results


def _check_ranks(results: list[tuple], traces: list) -> None:
    seen: dict = {}
    for (rank, *_), trace in zip(results, traces):
        if rank in seen:
            raise ValueError(f"{trace}: a second trace of rank {rank} (the first: {seen[rank]})")
        seen[rank] = trace


def _discard(results: list[tuple]) -> None:
    for _, part, *_ in results:
        Path(part).unlink(missing_ok=True)


def import_run(traces: list, out_dir, nproc: int = 1, compress: bool = False, comm=None) -> dict:
    """Import a folder's traces to ``out_dir/rank{R}.gtprof``.

    Args:
        traces: the trace files (``ranks.run_files``).
        nproc: local processes (on each MPI rank, when ``comm`` is given).
        comm: an MPI communicator: rank k of it imports traces k, k + size, ... and every
            rank learns every result (so each reports the same outcome).
    Returns:
        ``{rank: (path, events, trace events)}`` in rank order.
    Raises:
        ProfileFormatError, ValueError: a trace that cannot be imported or names no rank,
            or two traces of one rank (nothing is left in ``out_dir`` then). Under MPI, every
            rank raises the first error of any rank.
    """
    traces = [Path(t) for t in traces]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if comm is None:
        results = import_traces(traces, out_dir, nproc, compress)
        mine = results
    else:
        mine_idx = list(range(comm.Get_rank(), len(traces), comm.Get_size()))
        try:
            mine = import_traces([traces[i] for i in mine_idx], out_dir, nproc, compress)
            error = None
        except (ValueError, OSError) as exc:     # ProfileFormatError is a ValueError
            mine, error = [], str(exc)
        shares = comm.allgather((mine_idx, mine, error))
        errors = [e for _, _, e in shares if e]
        if errors:
            _discard(mine)
            raise ValueError(errors[0])
        results = [None] * len(traces)
        for idx, res, _ in shares:
            for i, r in zip(idx, res):
                results[i] = r
    try:
        _check_ranks(results, traces)
    except ValueError:
        _discard(mine)
        raise
    # Each process renames what it wrote (under MPI, on its own machine).
    for rank, part, *_ in mine:
        os.replace(part, out_dir / f"rank{rank}.gtprof")
    return {rank: (out_dir / f"rank{rank}.gtprof", n, n_trace) for rank, _, n, n_trace in sorted(results)}


def mpi_world():
    """COMM_WORLD when this process is one of several ranks of an MPI job, else None."""
    size = next((os.environ[v] for v in _WORLD_SIZE_VARS if os.environ.get(v, "").strip()), "1")
    if int(size) <= 1:
        return None
    from mpi4py import MPI  # noqa: PLC0415 - only under mpirun

    return MPI.COMM_WORLD if MPI.COMM_WORLD.Get_size() > 1 else None
