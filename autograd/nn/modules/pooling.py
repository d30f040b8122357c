"""``torch.nn.modules.pooling``: pooling, importable by PyTorch's module path
(``from torch.nn.modules.pooling import MaxPool1d``); the classes live where the import says."""
from .extra import AdaptiveAvgPool1d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AvgPool1d, MaxPool1d
from .layers import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d

__all__ = ["MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool1d",
           "AdaptiveAvgPool2d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d"]
