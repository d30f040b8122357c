"""What every communication backend offers, and the handle an asynchronous collective returns.

A backend works on raw arrays (NumPy or CuPy), never on Tensors: the public functions in
``distributed/__init__.py`` unwrap tensors, record the collective for the profiler and bump
version counters, so that each backend is only the transport. Two implementations:
``mpi.py`` (mpi4py, host buffers) and ``nccl.py`` (cupyx.distributed, device buffers).
"""
from __future__ import annotations

import enum
import os
import sys
import time

__all__ = ["ReduceOp", "Work", "Backend", "DistBackendError", "poll_until", "report_abort"]


class DistBackendError(RuntimeError):
    """A collective failed or timed out (PyTorch's ``torch.distributed.DistBackendError``)."""


class ReduceOp(enum.Enum):
    """How :func:`all_reduce` and :func:`reduce_scatter` combine the ranks' values."""

    SUM = "sum"
    AVG = "avg"
    PRODUCT = "prod"
    MAX = "max"
    MIN = "min"


class Work:
    """An asynchronous collective (``async_op=True``): ``wait()`` finishes it.

    Args:
        test: ``test() -> bool``, True once the transport has completed (it may also drive
            progress, as MPI's ``Test`` does).
        finish: run once after completion (copy back from a staging buffer, divide for AVG).
        describe: the collective's name for error messages ("all_reduce #12 (800 bytes)").
        timeout_s: how long :meth:`wait` waits before giving up.
        on_timeout: ``on_timeout(message)`` ends the job (a backend's abort); it may return,
            in which case :meth:`wait` raises :class:`DistBackendError`.
    """

    def __init__(self, test, finish=None, describe: str = "collective", timeout_s: float = 1800.0,
                 on_timeout=None):
        self._test = test
        self._finish = finish
        self.describe = describe
        self.timeout_s = timeout_s
        self._on_timeout = on_timeout
        self._done = False
        self.completed_ns = -1       # perf_counter_ns when completion was first seen

    def is_completed(self) -> bool:
        """True when the collective has finished (does not wait; drives MPI progress)."""
        if not self._done and self._test():
            self._complete()
        return self._done

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the collective has finished, at most ``timeout`` seconds (default: the
        process group's timeout); on expiry the backend aborts the job.

        Returns:
            True.
        """
        if self._done:
            return True
        limit = self.timeout_s if timeout is None else float(timeout)
        if not poll_until(self._test, limit):
            message = f"{self.describe} timed out after {limit:g} s waiting for the other ranks"
            if self._on_timeout is not None:
                self._on_timeout(message)
            raise DistBackendError(message)
        self._complete()
        return True

    def _complete(self) -> None:
        self._done = True
        self.completed_ns = time.perf_counter_ns()
        if self._finish is not None:
            finish, self._finish = self._finish, None
            finish()


def poll_until(test, timeout_s: float) -> bool:
    """Call ``test()`` until it returns True or ``timeout_s`` has passed; True if it did.

    The first calls spin (a small message completes in microseconds); after that the poll
    sleeps, up to a millisecond, so that ranks waiting on a slow peer leave the cores to it
    (several ranks often share a few cores).
    """
    deadline = time.monotonic() + timeout_s
    for _ in range(200):
        if test():
            return True
    pause = 1e-5
    while True:
        if test():
            return True
        if time.monotonic() > deadline:
            return bool(test())
        time.sleep(pause)
        pause = min(pause * 2, 1e-3)


class Backend:
    """The transport of one process group. Arrays are contiguous; results are written in place.

    Each method starts the collective and returns a :class:`Work`; the caller waits on it.
    """

    name = "none"

    def __init__(self, rank: int, world_size: int, timeout_s: float):
        self.rank = rank
        self.world_size = world_size
        self.timeout_s = timeout_s

    def all_reduce(self, array, op: ReduceOp, describe: str) -> Work:
        raise NotImplementedError

    def broadcast(self, array, src: int, describe: str) -> Work:
        raise NotImplementedError

    def all_gather(self, out, array, describe: str) -> Work:
        """``out`` has shape ``(world_size, *array.shape)``; row ``r`` gets rank r's ``array``."""
        raise NotImplementedError

    def reduce_scatter(self, out, array, op: ReduceOp, describe: str) -> Work:
        """``array`` has shape ``(world_size, *out.shape)``; ``out`` gets this rank's row of the
        reduction."""
        raise NotImplementedError

    def barrier(self, describe: str) -> Work:
        raise NotImplementedError

    def abort(self, message: str) -> None:
        """End the whole job after a timeout: print ``message`` and stop every rank."""
        raise NotImplementedError

    def shutdown(self) -> None:
        """Release the communicator (``destroy_process_group``)."""


def report_abort(message: str) -> None:
    """Say why the job is being aborted: one line on stderr, and the same line in the file
    named by ``GRADTRACE_RANK_ERROR_FILE`` when set (``gradtrace run --nproc`` sets it per rank
    and prints it as the job's error)."""
    print(f"gradtrace.distributed: {message}; aborting the job", file=sys.stderr, flush=True)
    path = os.environ.get("GRADTRACE_RANK_ERROR_FILE")
    if path:
        try:
            with open(path, "w") as f:
                f.write(message + "\n")
        except OSError:
            pass
