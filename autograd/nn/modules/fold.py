"""``torch.nn.modules.fold``: unfold, importable by PyTorch's module path
(``from torch.nn.modules.fold import Unfold``); the classes live where the import says."""
from .extra import Unfold

__all__ = ["Unfold"]
