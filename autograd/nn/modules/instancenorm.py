"""``torch.nn.modules.instancenorm``: instance normalization, importable by PyTorch's
module path (``from torch.nn.modules.instancenorm import InstanceNorm1d``);
the classes live where the import says."""
from .extra import InstanceNorm1d, InstanceNorm2d

__all__ = ["InstanceNorm1d", "InstanceNorm2d"]
