"""``cupyx.distributed.NCCLBackend`` for the CuPy stand-in: a world of ONE rank.

It checks the calls gradtrace's NCCL backend makes (argument names, array types, counts) and
does what NCCL does for a single rank (all-reduce and broadcast leave the data, all-gather and
reduce-scatter copy it). It says nothing about NCCL itself, several GPUs, or timing.
"""
import cupy as _cupy

_OPS = ("sum", "prod", "max", "min")


def _check(*arrays):
    for a in arrays:
        if type(a) is not _cupy.ndarray:
            raise TypeError(f"NCCLBackend needs cupy.ndarray buffers, got {type(a).__name__}")


class NCCLBackend:
    def __init__(self, n_devices, rank, host="127.0.0.1", port=13333, use_mpi=False):
        if n_devices != 1 or rank != 0:
            raise RuntimeError("the CuPy stand-in's NCCLBackend has a world of one rank")
        self.n_devices, self.rank = n_devices, rank
        self.calls = []

    def all_reduce(self, in_array, out_array, op="sum", stream=None):
        _check(in_array, out_array)
        if op not in _OPS:
            raise ValueError(f"Unknown op {op} for NCCL all reduce")
        self.calls.append("all_reduce")
        if in_array is not out_array:
            out_array[...] = in_array

    def broadcast(self, in_out_array, root=0, stream=None):
        _check(in_out_array)
        self.calls.append("broadcast")

    def all_gather(self, in_array, out_array, count, stream=None):
        _check(in_array, out_array)
        if out_array.size != count * self.n_devices or in_array.size != count:
            raise ValueError("all_gather: out_array must hold count elements per rank")
        self.calls.append("all_gather")
        out_array[...] = in_array.reshape(out_array.shape)

    def reduce_scatter(self, in_array, out_array, count, op="sum", stream=None):
        _check(in_array, out_array)
        if in_array.size != count * self.n_devices or out_array.size != count:
            raise ValueError("reduce_scatter: in_array must hold count elements per rank")
        self.calls.append("reduce_scatter")
        out_array[...] = in_array.reshape(out_array.shape)

    def barrier(self):
        self.calls.append("barrier")
