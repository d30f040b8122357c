"""``torch.nn.modules.loss``: loss modules, importable by PyTorch's module path
(``from torch.nn.modules.loss import L1Loss``); the classes live where the import says."""
from .extra import (BCELoss, BCEWithLogitsLoss, HuberLoss, KLDivLoss, L1Loss, NLLLoss,
                    SmoothL1Loss, SoftMarginLoss)
from .layers import CrossEntropyLoss, MSELoss

__all__ = ["L1Loss", "MSELoss", "CrossEntropyLoss", "NLLLoss", "BCELoss", "BCEWithLogitsLoss",
           "SmoothL1Loss", "HuberLoss", "KLDivLoss", "SoftMarginLoss"]
