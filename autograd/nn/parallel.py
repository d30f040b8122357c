"""DistributedDataParallel: one model replica per rank, gradients averaged during backward.

How it works (PyTorch's ``Reducer``, reduced to its core):

* At wrap, rank 0's parameters and buffers are broadcast (one message per dtype and device),
  so every replica starts equal.
* Parameters are put into buckets in reverse order (the order backward produces their
  gradients), a new bucket when one holds ``bucket_cap_mb`` (the first one closes at 1 MB, as
  PyTorch's, so that communication starts early).
* A post-accumulate-grad hook on each parameter copies its ``.grad`` into its bucket; when a
  bucket is complete, and every bucket before it has been launched (all ranks must post their
  collectives in the same order), its all-reduce (AVG) starts asynchronously, while backward
  goes on with the layers below.
* The engine has no ``queue_callback`` (a callback at the end of the graph task): the hook
  that launches the last bucket finishes the iteration instead, waiting for every bucket and
  writing the averaged gradients back into ``.grad``. So when ``loss.backward()`` returns the
  gradients are averaged, as with PyTorch.
* A parameter that gets no gradient keeps its bucket from completing. With
  ``find_unused_parameters=True`` the graph is walked from the forward's outputs and those
  parameters count as ready (zeros) at once; otherwise the next forward raises PyTorch's error
  naming them.

Profiling: each bucket's all-reduce is a ``record_param_comms`` range whose arguments (profile
metadata ``distributed_collectives``) hold ``bucket``, the parameter names, and
``backward_sequence_nrs`` / ``backward_thread_ids``: for each gradient, the sequence_nr of the
backward node that produced it (the node whose edge leads to the parameter's AccumulateGrad;
AccumulateGrad itself has no sequence number of its own) and the thread that created that
node. (sequence_nr, thread) names the backward node's record, and through it the forward op.
The graph is walked for this only while a profiler listens, or with find_unused_parameters.
"""
from __future__ import annotations

import contextlib

from .. import distributed as dist
from .. import record_function as _rf
from ..distributed import ReduceOp, _collective, _pg
from ..grad_mode import is_grad_enabled, no_grad
from ..node import AccumulateGrad
from .._tensor import Tensor
from .modules.module import Module

__all__ = ["DistributedDataParallel"]

_MB = 1024 * 1024
_FIRST_BUCKET_BYTES = 1 * _MB      # torch.distributed._DEFAULT_FIRST_BUCKET_BYTES


class _Bucket:
    """Parameters whose gradients travel in one all-reduce, and the flat buffer they share."""

    __slots__ = ("index", "params", "offsets", "buffer", "pending", "work")

    def __init__(self, index: int, params: list):
        self.index = index
        self.params = params            # indices into the reducer's parameter list
        self.offsets: list = []
        self.buffer = None
        self.pending = 0
        self.work = None


class DistributedDataParallel(Module):
    """Wrap ``module`` so that ``backward`` leaves every rank with the gradients averaged over
    all ranks (each rank runs the module on its own part of the batch).

    Args:
        module: the model; its parameters are overwritten by rank 0's at wrap.
        device_ids, output_device: accepted for PyTorch compatibility (the module runs where
            its parameters are).
        broadcast_buffers: also broadcast rank 0's buffers at wrap.
        process_group: only the default group (None) exists.
        bucket_cap_mb: bucket size in MiB (default 25).
        find_unused_parameters: walk the graph after each forward and treat parameters that
            did not take part as ready (their gradient counts as zero on this rank).
    """

    def __init__(self, module: Module, device_ids=None, output_device=None,
                 broadcast_buffers: bool = True, process_group=None, bucket_cap_mb: float = 25,
                 find_unused_parameters: bool = False, **_ignored):
        super().__init__()
        pg = _pg(process_group)
        self.module = module
        self.world_size = pg.backend.world_size
        self.rank = pg.backend.rank
        self.find_unused_parameters = bool(find_unused_parameters)
        self.require_backward_grad_sync = True
        self.bucket_bytes_cap = int(bucket_cap_mb * _MB)
        named = []
        seen = set()
        for name, p in module.named_parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                named.append((name, p))
        self._names = [n for n, _ in named]
        self._params = [p for _, p in named]
        self._index = {id(p): i for i, p in enumerate(self._params)}
        self._sync_at_wrap(broadcast_buffers)
        self._buckets = self._assign_buckets()
        self._bucket_of = {}
        for b in self._buckets:
            for i in b.params:
                self._bucket_of[i] = b
        self._hooks = [p.register_post_accumulate_grad_hook(self._grad_ready) for p in self._params]
        self._expect_sync = False       # this iteration's backward must reduce
        self._started = False           # a gradient of this iteration has arrived
        self._ready = [False] * len(self._params)
        self._used = [False] * len(self._params)
        self._next_launch = 0
        self._producers: dict = {}

    # ------------------------------------------------------------------ wrap

    def _sync_at_wrap(self, broadcast_buffers: bool) -> None:
        """Give every replica rank 0's parameters (and buffers): one broadcast per dtype/device."""
        tensors = list(self._params)
        if broadcast_buffers:
            tensors += [b for b in self.module.buffers() if b is not None]
        groups: dict = {}
        for t in tensors:
            groups.setdefault((t._device, t._data.dtype), []).append(t)
        for (dev, dtype), group in groups.items():
            flat = dev.xp.concatenate([t._data.ravel() for t in group])
            dist.broadcast(Tensor._make(flat, False, None, 0, [0], dev), src=0)
            offset = 0
            with no_grad():
                for t in group:
                    n = t._data.size
                    t._data[...] = flat[offset:offset + n].reshape(t._data.shape)
                    t._vc[0] += 1
                    offset += n

    def _assign_buckets(self) -> list:
        """Reverse parameter order, one run of buckets per (device, dtype), each closed when it
        reaches its size limit (1 MB for the first, ``bucket_cap_mb`` after)."""
        open_buckets: dict = {}     # (device, dtype) -> (param indices, bytes, limit)
        done = []
        for i in reversed(range(len(self._params))):
            p = self._params[i]
            key = (p._device, p._data.dtype)
            members, size, limit = open_buckets.get(key, ([], 0, _FIRST_BUCKET_BYTES))
            members.append(i)
            size += p._data.nbytes
            if size >= min(limit, self.bucket_bytes_cap):
                done.append(members)
                members, size, limit = [], 0, self.bucket_bytes_cap
            open_buckets[key] = (members, size, limit)
        done += [members for members, _, _ in open_buckets.values() if members]
        buckets = []
        for k, members in enumerate(done):
            b = _Bucket(k, members)
            offset = 0
            for i in members:
                b.offsets.append(offset)
                offset += self._params[i]._data.size
            p0 = self._params[members[0]]
            b.buffer = p0._device.xp.zeros(offset, p0._data.dtype)
            buckets.append(b)
        return buckets

    # ------------------------------------------------------------------ forward

    def forward(self, *inputs, **kwargs):
        self._check_previous_reduction()
        out = self.module(*inputs, **kwargs)
        if is_grad_enabled() and self.require_backward_grad_sync:
            self._prepare_for_backward(out)
        else:
            self._expect_sync = False
        return out

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes of forwards run inside accumulate gradients locally, without
        communication; the first synchronized backward after them averages the sums."""
        saved = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = saved

    def _check_previous_reduction(self) -> None:
        if not (self._expect_sync and self._started):
            return
        missing = [i for i, r in enumerate(self._ready) if not r]
        raise RuntimeError(
            "Expected to have finished reduction in the prior iteration before starting a new "
            "one. This error indicates that your module has parameters that were not used in "
            "producing loss. You can enable unused parameter detection by passing the keyword "
            "argument `find_unused_parameters=True` to `DistributedDataParallel`, and by making "
            "sure all `forward` function outputs participate in calculating loss. Parameter "
            f"indices which did not receive grad for rank {self.rank}: "
            f"{' '.join(map(str, missing))}; their names: "
            f"{', '.join(self._names[i] for i in missing)}")

    def _prepare_for_backward(self, outputs) -> None:
        """Reset the per-iteration state; find unused parameters and gradient producers."""
        self._expect_sync = True
        self._started = False
        self._ready = [False] * len(self._params)
        self._used = [False] * len(self._params)
        self._next_launch = 0
        for b in self._buckets:
            b.pending = len(b.params)
            b.work = None
        self._producers = {}
        if self.find_unused_parameters or _rf.STATE.on:
            self._producers, reached = _gradient_producers(outputs)
            if self.find_unused_parameters:
                for i, p in enumerate(self._params):
                    if id(p) not in reached:
                        self._mark_ready(i, None)

    # ------------------------------------------------------------------ backward

    def _grad_ready(self, param) -> None:
        """Post-accumulate-grad hook: the parameter's ``.grad`` is final for this backward."""
        if not self._expect_sync:
            return                       # a no_sync() iteration, or no forward through us
        i = self._index[id(param)]
        if self._ready[i]:
            raise RuntimeError(
                f"Expected to mark a variable ready only once. Parameter {self._names[i]} "
                f"(index {i}) got its gradient twice in one iteration (a second backward "
                "through the same forward, or a parameter shared with another DDP module)")
        self._mark_ready(i, param.grad)

    def _mark_ready(self, i: int, grad) -> None:
        self._started = True
        self._ready[i] = True
        b = self._bucket_of[i]
        slot = b.params.index(i)
        off = b.offsets[slot]
        n = self._params[i]._data.size
        if grad is None:
            b.buffer[off:off + n] = 0
        else:
            self._used[i] = True
            b.buffer[off:off + n] = grad._data.ravel()
        b.pending -= 1
        for earlier in self._buckets[:self._next_launch]:
            earlier.work.is_completed()          # drives MPI's progress between launches
        while self._next_launch < len(self._buckets) and self._buckets[self._next_launch].pending == 0:
            self._launch(self._buckets[self._next_launch])
            self._next_launch += 1
        if self._next_launch == len(self._buckets):
            self._finalize()

    def _launch(self, b: _Bucket) -> None:
        extra = {"bucket": b.index, "params": [self._names[i] for i in b.params]}
        if self._producers:
            seqs, threads = [], []
            for i in b.params:
                for seq, tid in self._producers.get(id(self._params[i]), ()):
                    seqs.append(seq)
                    threads.append(tid)
            extra["backward_sequence_nrs"] = seqs
            extra["backward_thread_ids"] = threads
        buf = b.buffer
        b.work = _collective("all_reduce", buf,
                             lambda d: _pg().backend.all_reduce(buf, ReduceOp.AVG, d), extra)

    def _finalize(self) -> None:
        """Wait for every bucket and write the averaged gradients into ``.grad``."""
        globally_used = None
        if self.find_unused_parameters:
            # A parameter unused on every rank keeps ``.grad`` as it was (None), as PyTorch's.
            like = self._params[0]
            used = Tensor._make(_flags(self._used, like), False, None, 0, [0], like._device)
            dist.all_reduce(used, ReduceOp.MAX)
            globally_used = used._data
        for b in self._buckets:
            b.work.wait()
            for slot, i in enumerate(b.params):
                if globally_used is not None and not bool(globally_used[i]):
                    continue
                p = self._params[i]
                off = b.offsets[slot]
                avg = b.buffer[off:off + p._data.size].reshape(p._data.shape)
                if p.grad is None:
                    p.grad = Tensor._make(avg.copy(), False, None, 0, [0], p._device)
                else:
                    p.grad._data[...] = avg
                    p.grad._vc[0] += 1
        self._expect_sync = False


def _flags(values, like):
    """A float array of 0/1 on ``like``'s device."""
    xp = like._device.xp
    return xp.asarray([1.0 if v else 0.0 for v in values], dtype=xp.float64)


def _tensors(obj):
    """The tensors in a forward's output (nested tuples, lists and dicts)."""
    stack = [obj]
    while stack:
        x = stack.pop()
        if isinstance(x, Tensor):
            yield x
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, dict):
            stack.extend(x.values())


def _gradient_producers(outputs):
    """Walk the graph from ``outputs``: for each leaf reached, the (sequence_nr, thread_id)
    of the nodes that send it a gradient.

    Returns:
        (producers: {id(leaf): [(sequence_nr, thread_id), ...]}, ids of the leaves reached).
    """
    producers: dict = {}
    reached = set()
    stack = []
    seen = set()
    for t in _tensors(outputs):
        if t.grad_fn is not None and id(t.grad_fn) not in seen:
            seen.add(id(t.grad_fn))
            stack.append(t.grad_fn)
        elif t.grad_fn is None and t.requires_grad:
            reached.add(id(t))               # the output is the parameter itself
    while stack:
        node = stack.pop()
        for edge in node.next_edges:
            child = edge[0] if edge else None
            if child is None:
                continue
            if isinstance(child, AccumulateGrad):
                reached.add(id(child.variable))
                producers.setdefault(id(child.variable), []).append((node.sequence_nr, node.thread_id))
            elif id(child) not in seen:
                seen.add(id(child))
                stack.append(child)
    return producers, reached
