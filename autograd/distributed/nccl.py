"""The NCCL backend: ``cupyx.distributed.NCCLBackend`` on GPU arrays, on the tensor's stream.

Each collective is launched on the stream the tensor's ops run on (the current stream of its
device), so it is ordered after the kernels that produced the data without a host sync. An
event recorded after the launch is the :class:`Work`: ``wait()`` polls it with the process
group's deadline, so a rank whose peer died does not hang forever (it blocks the host until
the collective is done, where PyTorch's would only make the stream wait; the deadline needs
the host to look).

NCCL has no average in cupyx's op names: AVG is a sum followed by a division on the same
stream. Written against CuPy's documented API; in this project's CI it runs only against the
one-rank stand-in in tests/fakecupy.
"""
from __future__ import annotations

import os

from .. import backend
from .interface import Backend, DistBackendError, ReduceOp, Work, report_abort

__all__ = ["NCCLBackend"]

_OPS = {ReduceOp.SUM: "sum", ReduceOp.AVG: "sum", ReduceOp.PRODUCT: "prod",
        ReduceOp.MAX: "max", ReduceOp.MIN: "min"}


class NCCLBackend(Backend):
    """One NCCL communicator; rank and world size from ``RANK``/``WORLD_SIZE`` (or the MPI
    launcher's ``OMPI_COMM_WORLD_RANK``/``OMPI_COMM_WORLD_SIZE``), the rendezvous at
    ``MASTER_ADDR:MASTER_PORT``."""

    name = "nccl"

    def __init__(self, rank: int, world_size: int, timeout_s: float, host: str, port: int):
        if not backend.cuda_is_available():
            raise DistBackendError("backend='nccl' needs a CUDA GPU with CuPy; use backend='mpi' on CPUs")
        super().__init__(rank, world_size, timeout_s)
        self.comm = backend.nccl_communicator(world_size, rank, host, port)

    def _check(self, *arrays):
        for a in arrays:
            if backend.device_of_array(a).type != "cuda":
                raise DistBackendError("backend='nccl' communicates GPU arrays only; this tensor "
                                       "is on the CPU (move it with .to('cuda') or use backend='mpi')")

    def _launched(self, array, describe) -> Work:
        """The Work of a collective just launched on ``array``'s current stream."""
        event = backend.Event(backend.device_of_array(array))
        event.record(self._stream(array))
        return Work(event.query, None, describe, self.timeout_s, self.abort)

    @staticmethod
    def _stream(array):
        return backend.current_stream(backend.device_of_array(array))

    def all_reduce(self, array, op, describe):
        self._check(array)
        stream = self._stream(array)
        self.comm.all_reduce(array, array, _OPS[op], stream=stream.native)
        if op is ReduceOp.AVG:
            with stream:
                array /= self.world_size
        return self._launched(array, describe)

    def broadcast(self, array, src, describe):
        self._check(array)
        self.comm.broadcast(array, root=src, stream=self._stream(array).native)
        return self._launched(array, describe)

    def all_gather(self, out, array, describe):
        self._check(out, array)
        self.comm.all_gather(array, out, array.size, stream=self._stream(array).native)
        return self._launched(out, describe)

    def reduce_scatter(self, out, array, op, describe):
        self._check(out, array)
        stream = self._stream(array)
        self.comm.reduce_scatter(array, out, out.size, _OPS[op], stream=stream.native)
        if op is ReduceOp.AVG:
            with stream:
                out /= self.world_size
        return self._launched(out, describe)

    def barrier(self, describe):
        self.comm.barrier()
        return Work(lambda: True, None, describe, self.timeout_s, self.abort)

    def abort(self, message):
        # The kernel of a stuck collective never ends and cannot be cancelled from here:
        # leave the process, so that the launcher stops the other ranks.
        report_abort(message)
        os._exit(1)
