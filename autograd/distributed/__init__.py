"""``autograd.distributed``: collectives across processes, with torch.distributed's names.

One process per rank. ``init_process_group(backend="mpi")`` takes rank and size from the MPI
launcher (``mpirun -n 2 python train.py`` or ``gradtrace run --nproc 2 train.py``);
``backend="nccl"`` takes them from ``RANK``/``WORLD_SIZE`` (or the MPI launcher's variables)
and meets the other ranks at ``MASTER_ADDR:MASTER_PORT``. MPI communicates host buffers (a GPU
tensor is staged through a host copy); NCCL communicates GPU buffers on the tensor's stream.

Every collective is non-blocking underneath and waited on with the process group's
``timeout``: a rank whose peer died or never joins reports which collective timed out and
the job is aborted, instead of hanging.

While a profiler listens, every collective is a ``record_param_comms`` range (sequence_nr =
the collective's number in the group, as Kineto's ``Seq``) around a ``{backend}:{collective}``
range (``mpi:all_reduce``, ``nccl:broadcast``), and a ``{backend}:wait`` range while the host
waits for it. Their arguments (Kineto's names: ``Collective name``, ``In msg nelems``, ``dtype``,
``Group size``...) go to the profile's metadata, under ``distributed_collectives``, keyed by
``Seq``; the process group goes under ``distributed_info`` (see :func:`profile_metadata`).
"""
from __future__ import annotations

import collections
import datetime
import importlib.util
import itertools
import os
import time

from .. import backend as _device_backend
from .. import record_function as _rf
from .interface import Backend, DistBackendError, ReduceOp, Work

__all__ = [
    "ReduceOp", "Work", "DistBackendError", "Backend", "init_process_group",
    "destroy_process_group", "is_initialized", "is_available", "is_mpi_available",
    "is_nccl_available", "get_rank", "get_world_size", "get_backend", "barrier", "all_reduce",
    "broadcast", "all_gather", "reduce_scatter", "profile_metadata",
    "default_pg_timeout",
]

default_pg_timeout = datetime.timedelta(minutes=30)   # PyTorch's default

_USER = int(_rf.RecordScope.USER_SCOPE)
# Kineto's "Collective name" values.
_KINETO_NAMES = {"all_reduce": "allreduce", "broadcast": "broadcast", "all_gather": "allgather",
                 "reduce_scatter": "reduce_scatter", "barrier": "barrier"}
# Kineto's dtype names (c10::ScalarType), as HolisticTraceAnalysis reads them.
_KINETO_DTYPES = {"float64": "Double", "float32": "Float", "float16": "Half", "int64": "Long",
                  "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


class _ProcessGroup:
    """The default (and only) process group: its backend and its collective counter."""

    def __init__(self, transport: Backend):
        self.backend = transport
        self.seq = itertools.count(1)
        # Arguments of the collectives run while a profiler listened (bounded: a long job
        # with a profiler attached for a few steps keeps the last ones).
        self.log: collections.deque = collections.deque(maxlen=100_000)
        self.start_ns = 0   # perf_counter_ns when the start barrier was passed


_group: _ProcessGroup | None = None


def _timeout_seconds(timeout) -> float:
    if timeout is None:
        return default_pg_timeout.total_seconds()
    seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else float(timeout)
    if seconds <= 0:
        raise ValueError(f"timeout must be positive, got {timeout!r}")
    return seconds


def _env_int(*names, default=None):
    for name in names:
        if os.environ.get(name, "").strip():
            return int(os.environ[name])
    return default


def init_process_group(backend: str | None = None, init_method: str | None = None,
                       timeout=None, world_size: int = -1, rank: int = -1, **_ignored) -> None:
    """Join the default process group.

    Args:
        backend: ``"mpi"`` (default; CPU or GPU tensors through host buffers) or ``"nccl"``
            (GPU tensors).
        init_method: ``"tcp://HOST:PORT"`` for NCCL's rendezvous (default
            ``MASTER_ADDR:MASTER_PORT``, or 127.0.0.1:29500); ignored by MPI.
        timeout: a ``datetime.timedelta`` or seconds; every collective that takes longer
            aborts the job with an error naming the rank and the collective (default 30 min).
        world_size, rank: for NCCL (default ``WORLD_SIZE``/``RANK``, or the MPI launcher's);
            with MPI they must agree with the MPI world when given.
    """
    global _group
    if _group is not None:
        raise RuntimeError("trying to initialize the default process group twice!")
    name = (backend or "mpi").lower()
    seconds = _timeout_seconds(timeout)
    if name == "mpi":
        from .mpi import MPIBackend  # noqa: PLC0415 - imports mpi4py

        transport = MPIBackend(seconds)
        for what, given, actual in (("world_size", world_size, transport.world_size),
                                    ("rank", rank, transport.rank)):
            if given not in (-1, None) and given != actual:
                raise ValueError(f"init_process_group(backend='mpi', {what}={given}): the MPI "
                                 f"world says {actual}; leave it out, mpirun sets it")
    elif name == "nccl":
        from .nccl import NCCLBackend  # noqa: PLC0415 - only for backend='nccl' (a GPU's)

        rank = rank if rank not in (-1, None) else _env_int("RANK", "OMPI_COMM_WORLD_RANK", default=0)
        world_size = (world_size if world_size not in (-1, None)
                      else _env_int("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", default=1))
        host, port = os.environ.get("MASTER_ADDR", "127.0.0.1"), _env_int("MASTER_PORT", default=29500)
        if init_method and init_method.startswith("tcp://"):
            host, _, port_text = init_method[len("tcp://"):].rpartition(":")
            port = int(port_text)
        transport = NCCLBackend(rank, world_size, seconds, host, port)
    else:
        raise ValueError(f"unknown backend {backend!r}: expected 'mpi' or 'nccl'")
    _group = _ProcessGroup(transport)
    # The common clock of the ranks' profiles: every rank leaves this barrier at about the
    # same moment, so times measured from it line up across processes and machines.
    transport.barrier("the process group's start barrier").wait()
    _group.start_ns = time.perf_counter_ns()


def destroy_process_group(group=None) -> None:
    """Leave the default process group (another ``init_process_group`` may follow)."""
    global _group
    pg, _group = _group, None
    if pg is not None:
        pg.backend.shutdown()


def is_initialized() -> bool:
    return _group is not None


def is_available() -> bool:
    return True


def is_mpi_available() -> bool:
    return importlib.util.find_spec("mpi4py") is not None


def is_nccl_available() -> bool:
    return _device_backend.cuda_is_available()


def _pg(group=None) -> _ProcessGroup:
    if group is not None and group is not _group:
        raise ValueError("only the default process group exists (group=None)")
    if _group is None:
        raise RuntimeError("Default process group has not been initialized, please make sure "
                           "to call init_process_group.")
    return _group


def get_rank(group=None) -> int:
    return _pg(group).backend.rank


def get_world_size(group=None) -> int:
    return _pg(group).backend.world_size


def get_backend(group=None) -> str:
    return _pg(group).backend.name


# --------------------------------------------------------------------------- recording


class _RecordedWork:
    """A Work whose wait is a ``{backend}:wait`` range and whose completion time is logged."""

    __slots__ = ("work", "entry", "name", "seq")

    def __init__(self, work: Work, entry: dict | None, name: str, seq: int):
        self.work, self.entry, self.name, self.seq = work, entry, name, seq

    def is_completed(self) -> bool:
        done = self.work.is_completed()
        if done:
            self._log_completion()
        return done

    def wait(self, timeout=None) -> bool:
        if self.work._done:
            self._log_completion()
            return True
        rec = _rf.begin(_USER, self.name, self.seq) if _rf.STATE.on else None
        try:
            self.work.wait(timeout)
        finally:
            _rf.end(rec)
        self._log_completion()
        return True

    def _log_completion(self) -> None:
        if self.entry is not None and self.entry.get("completed_ns", -1) < 0:
            self.entry["completed_ns"] = self.work.completed_ns


def _collective(name: str, array, launch, extra: dict | None = None,
                out_nelems: int | None = None) -> _RecordedWork:
    """Start a collective on ``array`` through ``launch(describe) -> Work``, recorded.

    Args:
        name: ``all_reduce``, ``broadcast``...
        array: the input buffer (its size and dtype describe the message).
        extra: more arguments for the profile (DDP puts the bucket's backward nodes here).
        out_nelems: elements of the output, when they differ from the input's.
    """
    pg = _pg()
    transport = pg.backend
    seq = next(pg.seq)
    nelems = int(array.size) if array is not None else 0
    dtype = str(array.dtype) if array is not None else "float32"
    nbytes = int(array.nbytes) if array is not None else 0
    describe = f"rank {transport.rank}: {name} #{seq} ({nbytes} bytes of {dtype})"
    if not _rf.STATE.on:
        return _RecordedWork(launch(describe), None, f"{transport.name}:wait", seq)
    dev = _device_backend.device_of_array(array) if array is not None else _device_backend.CPU
    stream = _device_backend.current_stream(dev) if dev.type == "cuda" else None
    entry = {
        "Seq": seq, "Collective name": _KINETO_NAMES.get(name, name),
        "In msg nelems": nelems, "Out msg nelems": nelems if out_nelems is None else out_nelems,
        "In msg bytes": nbytes, "dtype": _KINETO_DTYPES.get(dtype, dtype),
        "Group size": transport.world_size, "Rank": transport.rank,
        "Process Group Name": "0", "Process Group Ranks": list(range(transport.world_size)),
        "backend": transport.name, "start_ns": time.perf_counter_ns(), "completed_ns": -1,
    }
    entry.update(extra or {})
    outer = _rf.begin(_USER, "record_param_comms", seq, 0, None, str(dev), stream)
    inner = _rf.begin(_USER, f"{transport.name}:{name}", -1, 0, None, str(dev), stream)
    try:
        work = launch(describe)
    finally:
        _rf.end(inner)
        _rf.end(outer)
    pg.log.append(entry)
    return _RecordedWork(work, entry, f"{transport.name}:wait", seq)


def _finish(work: _RecordedWork, async_op: bool, *tensors):
    """Wait unless ``async_op``; in both cases the tensors count as modified in place."""
    for t in tensors:
        t._vc[0] += 1
    if async_op:
        return work
    work.wait()
    return None


def _contiguous(t):
    data = t._data
    if not data.flags.c_contiguous:
        raise ValueError("collectives need contiguous tensors; call .contiguous() first")
    return data


# --------------------------------------------------------------------------- collectives


def all_reduce(tensor, op: ReduceOp = ReduceOp.SUM, group=None, async_op: bool = False):
    """Combine ``tensor`` across all ranks with ``op``, in place on every rank.

    Returns:
        A Work to ``wait()`` on when ``async_op``, else None.
    """
    _pg(group)
    data = _contiguous(tensor)
    op = ReduceOp(op)
    work = _collective("all_reduce", data, lambda d: _group.backend.all_reduce(data, op, d))
    return _finish(work, async_op, tensor)


def broadcast(tensor, src: int, group=None, async_op: bool = False):
    """Copy rank ``src``'s ``tensor`` into every other rank's ``tensor`` (in place)."""
    _pg(group)
    data = _contiguous(tensor)
    work = _collective("broadcast", data, lambda d: _group.backend.broadcast(data, src, d))
    return _finish(work, async_op, tensor)


def all_gather(tensor_list: list, tensor, group=None, async_op: bool = False):
    """Fill ``tensor_list[r]`` with rank r's ``tensor`` on every rank."""
    pg = _pg(group)
    n = pg.backend.world_size
    if len(tensor_list) != n:
        raise ValueError(f"all_gather: tensor_list has {len(tensor_list)} tensors for a world of {n}")
    data = _contiguous(tensor)
    xp = tensor._device.xp
    out = xp.empty((n,) + data.shape, data.dtype)
    work = _collective("all_gather", data, lambda d: pg.backend.all_gather(out, data, d),
                       out_nelems=int(out.size))

    def scatter_rows():
        for r, t in enumerate(tensor_list):
            t._data[...] = out[r]

    return _finish(_Then(work, scatter_rows), async_op, *tensor_list)


def reduce_scatter(output, input_list: list, op: ReduceOp = ReduceOp.SUM, group=None,
                   async_op: bool = False):
    """``output`` on rank r gets the reduction over ranks of their ``input_list[r]``."""
    pg = _pg(group)
    n = pg.backend.world_size
    if len(input_list) != n:
        raise ValueError(f"reduce_scatter: input_list has {len(input_list)} tensors for a world of {n}")
    xp = output._device.xp
    send = xp.stack([t._data for t in input_list])
    data = _contiguous(output)
    op = ReduceOp(op)
    work = _collective("reduce_scatter", send,
                       lambda d: pg.backend.reduce_scatter(data, send, op, d),
                       out_nelems=int(data.size))
    return _finish(work, async_op, output)


def barrier(group=None, async_op: bool = False, device_ids=None):
    """Wait until every rank has reached its barrier."""
    pg = _pg(group)
    work = _collective("barrier", None, lambda d: pg.backend.barrier(d))
    return _finish(work, async_op)


class _Then:
    """A work followed by one host step once it has completed."""

    __slots__ = ("work", "step")

    def __init__(self, work, step):
        self.work, self.step = work, step

    def _run_step(self):
        step, self.step = self.step, None
        if step is not None:
            step()

    def is_completed(self) -> bool:
        done = self.work.is_completed()
        if done:
            self._run_step()
        return done

    def wait(self, timeout=None) -> bool:
        self.work.wait(timeout)
        self._run_step()
        return True


# --------------------------------------------------------------------------- profiles


def profile_metadata(start_ns: int, end_ns: int) -> dict:
    """What a profile of this rank records about the group, for the collector.

    Returns:
        ``{"distributed_info": {"backend", "rank", "world_size"}, "distributed_collectives":
        [entries]}`` for the collectives started in ``[start_ns, end_ns]`` (perf_counter ns),
        or ``{}`` outside a process group.
    """
    if _group is None:
        return {}
    transport = _group.backend
    entries = [dict(e) for e in _group.log if start_ns <= e["start_ns"] <= end_ns]
    return {"distributed_info": {"backend": transport.name, "rank": transport.rank,
                                 "world_size": transport.world_size,
                                 "start_barrier_ns": _group.start_ns},
            "distributed_collectives": entries}


