"""``torch.nn.modules.flatten``: flatten and Unflatten, importable by PyTorch's module path
(``from torch.nn.modules.flatten import Flatten``); the classes live where the import says."""
from .extra import Unflatten
from .layers import Flatten

__all__ = ["Flatten", "Unflatten"]
