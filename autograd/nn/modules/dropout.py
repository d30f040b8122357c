"""``torch.nn.modules.dropout``: dropout, importable by PyTorch's module path
(``from torch.nn.modules.dropout import Dropout``); the classes live where the import says."""
from .layers import Dropout

__all__ = ["Dropout"]
