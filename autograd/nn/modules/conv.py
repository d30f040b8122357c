"""``torch.nn.modules.conv``: convolutions, importable by PyTorch's module path
(``from torch.nn.modules.conv import Conv1d``); the classes live where the import says."""
from .extra import Conv1d
from .layers import Conv2d

__all__ = ["Conv1d", "Conv2d"]
