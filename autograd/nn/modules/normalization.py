"""``torch.nn.modules.normalization``: layer and group normalization, importable by PyTorch's
module path (``from torch.nn.modules.normalization import LayerNorm``);
the classes live where the import says."""
from .layers import GroupNorm, LayerNorm

__all__ = ["LayerNorm", "GroupNorm"]
