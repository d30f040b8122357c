"""``torch.nn.modules.distance``: distances, importable by PyTorch's
module path (``from torch.nn.modules.distance import CosineSimilarity``);
the classes live where the import says."""
from .extra import CosineSimilarity, PairwiseDistance

__all__ = ["CosineSimilarity", "PairwiseDistance"]
