"""``torch.nn.modules.linear``: linear layers, importable by PyTorch's module path
(``from torch.nn.modules.linear import Identity``); the classes live where the import says."""
from .attention import NonDynamicallyQuantizableLinear
from .layers import Identity, Linear

__all__ = ["Identity", "Linear", "NonDynamicallyQuantizableLinear"]
