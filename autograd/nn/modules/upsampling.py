"""``torch.nn.modules.upsampling``: upsampling, importable by PyTorch's module path
(``from torch.nn.modules.upsampling import Upsample``); the classes live where the import says."""
from .extra import Upsample

__all__ = ["Upsample"]
