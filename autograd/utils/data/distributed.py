"""``torch.utils.data.distributed``: ``DistributedSampler``, importable by PyTorch's module
path; it lives in :mod:`gradtrace.autograd.utils.distributed_sampler`."""
from ..distributed_sampler import DistributedSampler

__all__ = ["DistributedSampler"]
