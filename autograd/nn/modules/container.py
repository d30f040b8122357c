"""``torch.nn.modules.container``: containers, importable by PyTorch's module path
(``from torch.nn.modules.container import Sequential``); the classes live where the import says."""
from .module import ModuleDict, ModuleList, Sequential

__all__ = ["Sequential", "ModuleList", "ModuleDict"]
