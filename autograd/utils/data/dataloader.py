"""``torch.utils.data.dataloader``: DataLoader, ``default_collate`` and ``default_convert``.

Loading happens in the calling process: ``num_workers`` is accepted and changes nothing but
speed (the batches are the ones a worker pool would produce, in the same order)."""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence

import numpy

from ...ops.shape_api import stack
from ..._tensor import Tensor, as_tensor, tensor
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info"]

# --------------------------------------------------------------------------- collation


_COLLATE_ERROR = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or "
                  "lists; found {}")


def default_collate(batch):
    """Merge a list of samples into a batch, as PyTorch's ``default_collate``: tensors and
    NumPy arrays are stacked on a new first dimension, Python floats become a float64 tensor
    and ints an int64 one (bools a bool one), strings stay a list, and dicts, namedtuples,
    tuples and lists are collated field by field (a tuple of fields becomes a list, as in
    PyTorch).

    Args:
        batch: a list of samples of the same structure.

    Returns:
        The batch.
    """
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch), 0)
    if isinstance(elem, numpy.ndarray):
        if elem.dtype.kind in "USO":
            raise TypeError(_COLLATE_ERROR.format(elem.dtype))
        return stack([as_tensor(b) for b in batch], 0)
    if isinstance(elem, numpy.generic):
        return as_tensor(numpy.array(batch))
    if isinstance(elem, float):
        return tensor(batch, dtype="float64")
    if isinstance(elem, numbers.Integral):
        return tensor(batch) if isinstance(elem, bool) else tensor(batch, dtype="int64")
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, Mapping):
        collated = {key: default_collate([d[key] for d in batch]) for key in elem}
        try:
            return type(elem)(collated)
        except TypeError:
            return collated
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, Sequence):
        if any(len(e) != len(elem) for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        fields = [default_collate(list(s)) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return fields
        try:
            return type(elem)(fields)
        except TypeError:
            return fields
    raise TypeError(_COLLATE_ERROR.format(type(elem)))


def default_convert(data):
    """Without batching (``batch_size=None``): NumPy arrays become tensors, containers are
    converted element by element, everything else is returned as is."""
    if isinstance(data, numpy.ndarray) and data.dtype.kind not in "USO":
        return as_tensor(data)
    if isinstance(data, numpy.generic):
        return as_tensor(numpy.asarray(data))
    if isinstance(data, Mapping):
        return type(data)({k: default_convert(v) for k, v in data.items()})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
        return [default_convert(d) for d in data]
    return data


# --------------------------------------------------------------------------- the loader


def get_worker_info():
    """``torch.utils.data.get_worker_info``: None, as PyTorch's in the main process, which is
    where every batch is loaded here (there are no worker processes)."""
    return None


class DataLoader:
    """Iterate a dataset in batches.

    Args:
        dataset: a map-style :class:`Dataset` (``__getitem__``/``__len__``) or an
            :class:`IterableDataset`.
        batch_size: samples per batch; ``None`` turns batching off (one sample at a time,
            through ``default_convert``).
        shuffle: a new random order each epoch (map-style datasets only).
        sampler: the order of indices, instead of ``shuffle``.
        batch_sampler: yields lists of indices; excludes batch_size, shuffle, sampler and
            drop_last.
        num_workers: accepted; loading runs in this process (same batches, same order).
        collate_fn: merges a list of samples into a batch (default :func:`default_collate`).
        pin_memory: accepted; batches stay where the dataset made them.
        drop_last: drop the last incomplete batch.
        generator: the Generator for the shuffle order.
    """

    def __init__(self, dataset, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler=None, batch_sampler=None, num_workers: int = 0, collate_fn=None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers: bool = False,
                 pin_memory_device: str = ""):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        self.dataset = dataset
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.generator = generator
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in (None, False):
                raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle "
                                 f"option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler "
                                 f"option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None and not self._iterable:
            sampler = (RandomSampler(dataset, generator=generator) if shuffle
                       else SequentialSampler(dataset))
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None or (self._iterable and self.batch_size is not None)

    def __iter__(self):
        if self._iterable:
            yield from self._iter_stream()
            return
        if self.batch_sampler is not None:
            for indices in self.batch_sampler:
                yield self.collate_fn([self.dataset[i] for i in indices])
        else:
            for i in self.sampler:
                yield self.collate_fn(self.dataset[i])

    def _iter_stream(self):
        if self.batch_size is None:
            for sample in self.dataset:
                yield self.collate_fn(sample)
            return
        batch = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self) -> int:
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)
