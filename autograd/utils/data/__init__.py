"""``utils.data``: datasets, samplers, ``default_collate`` and ``DataLoader``, with PyTorch's
argument names, checks and batching rules.

Loading happens in the calling process: ``num_workers`` is accepted and changes nothing but
speed (the batches are the ones a worker pool would produce, in the same order).
Shuffling draws from a :class:`~gradtrace.autograd.Generator` (a given one, or one seeded from
the global CPU generator that ``manual_seed`` seeds), so a seed fixes the order; the orders
are not PyTorch's own for the same seed (a different random algorithm).
"""
from __future__ import annotations

from ..distributed_sampler import DistributedSampler
from . import dataloader, dataset, distributed, sampler  # noqa: F401 - PyTorch's submodules
from .dataloader import DataLoader, default_collate, default_convert, get_worker_info
from .dataset import ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset, random_split
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,
                      SubsetRandomSampler)

__all__ = ["DistributedSampler", "Dataset", "IterableDataset", "TensorDataset", "Subset",
           "ConcatDataset", "random_split", "Sampler", "SequentialSampler", "RandomSampler",
           "SubsetRandomSampler", "BatchSampler", "default_collate", "default_convert",
           "DataLoader", "get_worker_info"]
