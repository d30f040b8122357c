"""``utils.data``: datasets, samplers, ``default_collate`` and ``DataLoader``, with PyTorch's
argument names, checks and batching rules.

Loading happens in the calling process: ``num_workers`` is accepted and changes nothing but
speed (the batches are the ones a worker pool would produce, in the same order).
Shuffling draws from a :class:`~gradtrace.autograd.Generator` (a given one, or one seeded from
the global CPU generator that ``manual_seed`` seeds), so a seed fixes the order; the orders
are not PyTorch's own for the same seed (a different random algorithm).
"""
from __future__ import annotations

import bisect
import math
import numbers
from collections.abc import Mapping, Sequence

import numpy

from ..generator import Generator
from ..ops.api import stack
from ..tensor import Tensor, as_tensor, default_generator, tensor
from .distributed_sampler import DistributedSampler

__all__ = ["DistributedSampler", "Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset",
           "random_split", "Sampler", "SequentialSampler", "RandomSampler",
           "SubsetRandomSampler", "BatchSampler", "default_collate", "default_convert",
           "DataLoader"]


# --------------------------------------------------------------------------- datasets


class Dataset:
    """A map-style dataset: subclasses define ``__getitem__`` (and usually ``__len__``)."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A stream of samples: subclasses define ``__iter__``; the DataLoader batches it in order."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


class TensorDataset(Dataset):
    """Sample ``i`` is ``tuple(t[i] for t in tensors)``.

    Args:
        *tensors: tensors with the same first dimension.
    """

    def __init__(self, *tensors: Tensor):
        if any(t.shape[0] != tensors[0].shape[0] for t in tensors):
            raise ValueError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self):
        return len(self.indices)


class ConcatDataset(Dataset):
    """The samples of several map-style datasets, one after the other."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][idx - start]


def _permutation(n: int, generator) -> list:
    gen = generator if generator is not None else _fresh_generator()
    return [int(i) for i in gen.permutation(n)]


def _fresh_generator() -> Generator:
    # As PyTorch's RandomSampler without a generator: a new one seeded from the global RNG.
    return Generator().manual_seed(int(default_generator("cpu").integers(0, 2 ** 63 - 1)))


def random_split(dataset, lengths, generator=None) -> list:
    """Split ``dataset`` into random non-overlapping :class:`Subset` s.

    Args:
        dataset: the dataset to split.
        lengths: the sizes of the parts, or fractions summing to 1 (the remainder of the
            floors goes one by one to the first parts, as PyTorch).
        generator: the Generator of the permutation.

    Returns:
        A list of Subsets.
    """
    n = len(dataset)
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        counts = [int(math.floor(n * frac)) for frac in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    order = _permutation(n, generator)
    out, offset = [], 0
    for length in lengths:
        out.append(Subset(dataset, order[offset:offset + length]))
        offset += length
    return out


# --------------------------------------------------------------------------- samplers


class Sampler:
    """Yields dataset indices (or, for a batch sampler, lists of them)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random order of the indices (a new one per iteration), or with ``replacement``,
    ``num_samples`` independent draws.

    Args:
        data_source: the dataset.
        replacement: draw with replacement.
        num_samples: how many indices per iteration (default: the dataset's length).
        generator: the Generator to draw from.
    """

    _REPLACEMENT_CHUNK = 32   # draws per call with replacement (PyTorch's 32)

    def __init__(self, data_source, replacement: bool = False, num_samples: int | None = None,
                 generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(replacement, bool):
            raise TypeError("replacement should be a boolean value, but got "
                            f"replacement={replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError("num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        gen = self.generator if self.generator is not None else _fresh_generator()
        if self.replacement:
            # Drawn lazily, 32 at a time, as PyTorch's: num_samples may be far more than fits
            # in memory at once (10**10 draws would be 80 GB), and an iteration stopped early
            # draws no more than it used.
            chunk = self._REPLACEMENT_CHUNK
            for _ in range(self.num_samples // chunk):
                yield from gen.integers(0, n, size=chunk).tolist()
            yield from gen.integers(0, n, size=self.num_samples % chunk).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from _permutation(n, gen)
        yield from _permutation(n, gen)[:self.num_samples % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in a random order (a new one per iteration)."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in _permutation(len(self.indices), self.generator):
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class BatchSampler(Sampler):
    """Group another sampler's indices into lists of ``batch_size``.

    Args:
        sampler: the sampler (or any iterable of indices).
        batch_size: the size of each batch.
        drop_last: drop the last batch when it is smaller than ``batch_size``.
    """

    def __init__(self, sampler, batch_size: int, drop_last: bool):
        if (not isinstance(batch_size, numbers.Integral) or isinstance(batch_size, bool)
                or batch_size <= 0):
            raise ValueError("batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError("drop_last should be a boolean value, but got "
                             f"drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = int(batch_size)
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size


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
