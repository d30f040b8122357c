"""``torch.nn.modules.pixelshuffle``: pixel shuffle, importable by PyTorch's
module path (``from torch.nn.modules.pixelshuffle import PixelShuffle``);
the classes live where the import says."""
from .extra import PixelShuffle, PixelUnshuffle

__all__ = ["PixelShuffle", "PixelUnshuffle"]
