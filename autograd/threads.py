"""``torch.set_num_threads`` / ``get_num_threads`` (and the inter-op pair) over the thread
pools NumPy's BLAS (and OpenMP) use.

With ``threadpoolctl`` installed, ``set_num_threads(n)`` limits those pools to ``n`` threads
(gradtrace's CPU ops are NumPy calls, whose parallel parts are BLAS), and ``get_num_threads``
answers the number set or, before any, the largest pool's size. Without it the number is
only stored (``get_num_threads`` returns it; the pools keep their sizes). The inter-op
setting is stored only: gradtrace runs no inter-op thread pool.
"""
from __future__ import annotations

import os

__all__ = ["set_num_threads", "get_num_threads", "set_num_interop_threads",
           "get_num_interop_threads"]

_state = {"intra": None, "interop": None, "limiter": None}


def _threadpoolctl():
    try:
        import threadpoolctl  # noqa: PLC0415 - optional
    except ImportError:
        return None
    return threadpoolctl


def set_num_threads(num: int) -> None:
    """Limit the CPU threads of NumPy's BLAS/OpenMP pools to ``num`` (stored only without
    threadpoolctl)."""
    if not isinstance(num, int) or isinstance(num, bool) or num <= 0:
        raise RuntimeError("set_num_threads expects a positive integer")
    tpc = _threadpoolctl()
    if tpc is not None:
        # Applied until changed again (not a context): the limiter undoes nothing on its own.
        _state["limiter"] = tpc.threadpool_limits(limits=num)
    _state["intra"] = num


def get_num_threads() -> int:
    """The number set with :func:`set_num_threads`; before any, the largest BLAS/OpenMP pool
    (with threadpoolctl) or the CPU count."""
    if _state["intra"] is not None:
        return _state["intra"]
    tpc = _threadpoolctl()
    if tpc is not None:
        sizes = [pool["num_threads"] for pool in tpc.threadpool_info()]
        if sizes:
            return max(sizes)
    return os.cpu_count() or 1


def set_num_interop_threads(num: int) -> None:
    """Stored only: there is no inter-op pool here."""
    if not isinstance(num, int) or isinstance(num, bool) or num <= 0:
        raise RuntimeError("set_num_interop_threads expects a positive integer")
    _state["interop"] = num


def get_num_interop_threads() -> int:
    return _state["interop"] if _state["interop"] is not None else (os.cpu_count() or 1)
