"""PyTorch's module paths a program imports from (``torch.nn.modules.*``,
``torch.utils.data.*``) exist here with the same names, each the class ``nn``/``utils.data``
exports."""
import importlib

import pytest

import gradtrace.autograd as torch

# (submodule under gradtrace.autograd, names PyTorch 2.13's module of that path holds)
PATHS = [
    ("nn.modules.activation", ["MultiheadAttention", "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid",
                               "LeakyReLU", "Softmax", "ELU", "PReLU", "Softplus", "LogSoftmax"]),
    ("nn.modules.linear", ["Identity", "Linear", "NonDynamicallyQuantizableLinear"]),
    ("nn.modules.conv", ["Conv1d", "Conv2d"]),
    ("nn.modules.container", ["Sequential", "ModuleList", "ModuleDict"]),
    ("nn.modules.module", ["Module"]),
    ("nn.modules.loss", ["CrossEntropyLoss", "MSELoss", "L1Loss", "NLLLoss", "BCELoss",
                         "BCEWithLogitsLoss", "SmoothL1Loss", "HuberLoss", "KLDivLoss",
                         "SoftMarginLoss"]),
    ("nn.modules.normalization", ["LayerNorm", "GroupNorm"]),
    ("nn.modules.batchnorm", ["BatchNorm1d", "BatchNorm2d"]),
    ("nn.modules.instancenorm", ["InstanceNorm1d", "InstanceNorm2d"]),
    ("nn.modules.dropout", ["Dropout"]),
    ("nn.modules.sparse", ["Embedding"]),
    ("nn.modules.transformer", ["Transformer", "TransformerEncoder", "TransformerDecoder",
                                "TransformerEncoderLayer", "TransformerDecoderLayer"]),
    ("nn.modules.rnn", ["RNN", "LSTM", "GRU"]),
    ("nn.modules.pooling", ["MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d",
                            "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d"]),
    ("nn.modules.flatten", ["Flatten", "Unflatten"]),
    ("nn.modules.padding", ["ZeroPad2d", "ReflectionPad2d", "ReplicationPad2d"]),
    ("nn.modules.pixelshuffle", ["PixelShuffle", "PixelUnshuffle"]),
    ("nn.modules.upsampling", ["Upsample"]),
    ("nn.modules.distance", ["CosineSimilarity", "PairwiseDistance"]),
    ("nn.modules.fold", ["Unfold"]),
    ("utils.data.dataloader", ["DataLoader", "default_collate", "default_convert",
                               "get_worker_info"]),
    ("utils.data.dataset", ["Dataset", "IterableDataset", "TensorDataset", "Subset",
                            "ConcatDataset", "random_split"]),
    ("utils.data.sampler", ["Sampler", "SequentialSampler", "RandomSampler",
                            "SubsetRandomSampler", "BatchSampler"]),
    ("utils.data.distributed", ["DistributedSampler"]),
]


@pytest.mark.parametrize("path,names", PATHS, ids=[p for p, _ in PATHS])
def test_pytorch_module_paths_import_the_exported_classes(path, names):
    module = importlib.import_module(f"gradtrace.autograd.{path}")
    package = torch.nn if path.startswith("nn.") else torch.utils.data
    for name in names:
        obj = getattr(module, name)
        if name != "NonDynamicallyQuantizableLinear":
            assert obj is getattr(package, name), f"{path}.{name}"
    # ``torch.nn.modules.conv.Conv2d`` works as an attribute chain too, without an import.
    obj = torch
    for part in path.split("."):
        obj = getattr(obj, part)
    assert obj is module


def test_from_imports_read_as_pytorchs():
    from gradtrace.autograd.nn.modules.activation import MultiheadAttention
    from gradtrace.autograd.utils.data import DataLoader, TensorDataset
    from gradtrace.autograd.utils.data.dataloader import DataLoader as Loader

    assert Loader is DataLoader and MultiheadAttention is torch.nn.MultiheadAttention
    batches = list(DataLoader(TensorDataset(torch.arange(4)), batch_size=2))
    assert [b[0].tolist() for b in batches] == [[0, 1], [2, 3]]
    assert torch.utils.data.get_worker_info() is None      # the main process, as PyTorch's
