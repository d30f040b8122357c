"""``torch.nn.modules.batchnorm``: batch normalization, importable by PyTorch's module path
(``from torch.nn.modules.batchnorm import BatchNorm1d``); the classes live where the import says."""
from .extra import BatchNorm1d
from .layers import BatchNorm2d

__all__ = ["BatchNorm1d", "BatchNorm2d"]
