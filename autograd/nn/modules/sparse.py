"""``torch.nn.modules.sparse``: embeddings, importable by PyTorch's module path
(``from torch.nn.modules.sparse import Embedding``); the classes live where the import says."""
from .layers import Embedding

__all__ = ["Embedding"]
