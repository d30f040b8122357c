"""``torch.nn.modules.padding``: padding, importable by PyTorch's module path
(``from torch.nn.modules.padding import ZeroPad2d``); the classes live where the import says."""
from .extra import ReflectionPad2d, ReplicationPad2d, ZeroPad2d

__all__ = ["ZeroPad2d", "ReflectionPad2d", "ReplicationPad2d"]
