"""DistributedSampler: each rank's share of a dataset's indices (``torch.utils.data.distributed``)."""
from __future__ import annotations

import math

import numpy

from .. import distributed as dist

__all__ = ["DistributedSampler"]


class DistributedSampler:
    """Indices of ``dataset`` for one rank: every ``num_replicas``-th index from ``rank`` of a
    (shuffled) order that all ranks agree on, padded so that all ranks get the same count.

    Args:
        dataset: anything with ``len()``.
        num_replicas: number of ranks (default: the process group's world size).
        rank: this rank (default: the process group's rank).
        shuffle: a new permutation per epoch, seeded by ``seed + epoch`` (call
            :meth:`set_epoch` at the start of each epoch, as with PyTorch).
        seed: the shared seed; it must be the same on every rank.
        drop_last: drop the tail so that the ranks split the data evenly, instead of padding
            with repeated indices.
    """

    def __init__(self, dataset, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False):
        if num_replicas is None or rank is None:
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        if not 0 <= rank < num_replicas:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 0
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            order = numpy.random.default_rng(self.seed + self.epoch).permutation(n).tolist()
        else:
            order = list(range(n))
        if self.drop_last:
            order = order[:self.total_size]
        else:
            pad = self.total_size - len(order)
            while pad > 0:                      # repeat from the start (more than once if tiny)
                order += order[:pad]
                pad = self.total_size - len(order)
        return iter(order[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Use the permutation of ``epoch`` (all ranks must pass the same value)."""
        self.epoch = epoch
