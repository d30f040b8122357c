"""Reference workloads: an MLP regression, a small CNN classifier and a tiny character-level GPT.

Each workload owns its model, data and optimizer; ``train_step()`` runs forward, backward and
one optimizer step and returns the loss as a float. The CLI demo, the dashboard and the
benchmarks build them through :func:`make_workload` or :data:`WORKLOADS`::

    wl = make_workload("gpt", device="cpu", seed=0)
    losses = [wl.train_step() for _ in range(30)]

Default sizes keep one CPU step well under a second on two cores.
"""
from __future__ import annotations

import math
from importlib import resources

import numpy

from .. import backend, nn, optim
from ..nn import functional as F
from .._tensor import Tensor, manual_seed

__all__ = ["Workload", "MLP", "CNN", "GPT", "WORKLOADS", "make_workload", "load_text"]


def _to(arr, dev):
    return Tensor._make(backend.to_device(arr, dev), False, None, 0, [0], dev)


class Workload:
    """Base: a model, its optimizer and a batch source; ``train_step() -> float``."""

    name = "workload"

    def __init__(self, device="cpu", seed: int = 0):
        self.device = backend.device(device)
        self.seed = seed
        self.rng = numpy.random.default_rng(seed)   # batches are drawn on the host
        manual_seed(seed)                          # parameters and dropout masks

    def batch(self):
        """A random batch of rows of ``self.x``/``self.y`` (workloads over a dataset array)."""
        idx = self.rng.integers(0, len(self.x), self.batch_size)
        return _to(self.x[idx], self.device), _to(self.y[idx], self.device)

    def loss(self, batch):
        raise NotImplementedError(f"{type(self).__name__} must define loss(batch)")

    def train_step(self) -> float:
        """One step: forward, backward, optimizer update; returns the loss."""
        batch = self.batch()
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss(batch)
        loss.backward()
        self.optimizer.step()
        return float(loss.item())

    def parameters(self):
        return self.model.parameters()

    def __repr__(self):
        n = sum(p.numel() for p in self.model.parameters())
        return f"{type(self).__name__}(device={self.device}, parameters={n})"


class MLP(Workload):
    """Regression of a fixed random teacher network's output from Gaussian inputs (MSE loss).

    Args:
        in_features, hidden, depth, out_features: the student MLP (``depth`` hidden layers).
        batch: samples per step; ``n_samples``: size of the fixed training set.
    """

    name = "mlp"

    def __init__(self, device="cpu", seed: int = 0, in_features: int = 32, hidden: int = 128,
                 depth: int = 3, out_features: int = 4, batch: int = 64, n_samples: int = 2048,
                 lr: float = 3e-3, dtype="float32"):
        super().__init__(device, seed)
        rng = self.rng
        x = rng.standard_normal((n_samples, in_features))
        w1 = rng.standard_normal((in_features, 32)) / math.sqrt(in_features)
        w2 = rng.standard_normal((32, out_features)) / math.sqrt(32)
        y = numpy.tanh(x @ w1) @ w2 + 0.5 * numpy.sin(x[:, :out_features])
        self.x, self.y = x.astype(dtype), y.astype(dtype)
        self.batch_size = batch
        layers = []
        width = in_features
        for _ in range(depth):
            layers += [nn.Linear(width, hidden, dtype=dtype), nn.ReLU()]
            width = hidden
        layers.append(nn.Linear(width, out_features, dtype=dtype))
        self.model = nn.Sequential(*layers).to(self.device)
        self.optimizer = optim.Adam(self.model.parameters(), lr=lr)

    def loss(self, batch):
        x, y = batch
        return F.mse_loss(self.model(x), y)


class SmallCNN(nn.Module):
    """conv-bn-relu-pool, conv-relu-pool, linear."""

    def __init__(self, channels: int, classes: int, size: int, dtype):
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1, dtype=dtype)
        self.bn1 = nn.BatchNorm2d(channels, dtype=dtype)
        self.conv2 = nn.Conv2d(channels, 2 * channels, 3, padding=1, dtype=dtype)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(2 * channels * (size // 4) ** 2, classes, dtype=dtype)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = self.pool(F.relu(self.conv2(x)))
        return self.fc(x.flatten(1))


class CNN(Workload):
    """Classify synthetic 32x32 RGB images: the class is the quadrant holding a bright,
    class-coloured square, under Gaussian noise (cross-entropy loss)."""

    name = "cnn"

    def __init__(self, device="cpu", seed: int = 0, size: int = 32, channels: int = 8,
                 classes: int = 4, batch: int = 32, n_samples: int = 512, lr: float = 3e-3,
                 dtype="float32"):
        super().__init__(device, seed)
        rng = self.rng
        labels = rng.integers(0, classes, n_samples)
        imgs = rng.standard_normal((n_samples, 3, size, size)) * 0.5
        half, side = size // 2, size // 4
        for i, c in enumerate(labels):
            q = c % 4
            r0 = (q // 2) * half + rng.integers(0, half - side + 1)
            c0 = (q % 2) * half + rng.integers(0, half - side + 1)
            imgs[i, c % 3, r0:r0 + side, c0:c0 + side] += 2.0
        self.x, self.y = imgs.astype(dtype), labels.astype(numpy.int64)
        self.batch_size = batch
        self.model = SmallCNN(channels, classes, size, dtype).to(self.device)
        self.optimizer = optim.Adam(self.model.parameters(), lr=lr)

    def loss(self, batch):
        x, y = batch
        return F.cross_entropy(self.model(x), y)


def load_text(name: str = "harbour_town.txt") -> str:
    """A text bundled in ``autograd/data``."""
    return resources.files("gradtrace.autograd").joinpath("data", name).read_text(encoding="utf-8")


class TinyGPT(nn.Module):
    """Token + position embeddings, ``layers`` causal transformer blocks, a final norm and head."""

    def __init__(self, vocab: int, block: int, dim: int, heads: int, layers: int,
                 dropout: float, dtype):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim, dtype=dtype)
        self.pos = nn.Embedding(block, dim, dtype=dtype)
        for emb in (self.tok, self.pos):
            emb.weight._data *= 0.1
        self.blocks = nn.ModuleList(nn.TransformerBlock(dim, heads, dropout=dropout, dtype=dtype)
                                    for _ in range(layers))
        self.ln = nn.LayerNorm(dim, dtype=dtype)
        self.head = nn.Linear(dim, vocab, dtype=dtype)

    def forward(self, idx):
        n, t = idx.shape
        pos = Tensor._make(idx.device.xp.arange(t), False, None, 0, [0], idx.device)
        x = self.tok(idx) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


class GPT(Workload):
    """Next-character prediction on a bundled text with a 2-layer causal transformer."""

    name = "gpt"

    def __init__(self, device="cpu", seed: int = 0, block: int = 32, dim: int = 64,
                 heads: int = 4, layers: int = 2, batch: int = 16, dropout: float = 0.0,
                 lr: float = 3e-3, text: str | None = None, dtype="float32"):
        super().__init__(device, seed)
        text = text if text is not None else load_text()
        self.chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        self.data = numpy.array([self.stoi[c] for c in text], dtype=numpy.int64)
        self.block, self.batch_size = block, batch
        self.model = TinyGPT(len(self.chars), block, dim, heads, layers, dropout, dtype).to(self.device)
        self.optimizer = optim.AdamW(self.model.parameters(), lr=lr, weight_decay=0.0)

    def batch(self):
        starts = self.rng.integers(0, len(self.data) - self.block - 1, self.batch_size)
        offs = numpy.arange(self.block)
        x = self.data[starts[:, None] + offs]
        y = self.data[starts[:, None] + offs + 1]
        return _to(x, self.device), _to(y, self.device)

    def loss(self, batch):
        x, y = batch
        logits = self.model(x)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)


WORKLOADS = {"mlp": MLP, "cnn": CNN, "gpt": GPT}


def make_workload(name: str, device="cpu", seed: int = 0, **sizes) -> Workload:
    """Build the workload ``name`` ("mlp", "cnn", "gpt") with optional size overrides."""
    try:
        cls = WORKLOADS[name]
    except KeyError:
        raise ValueError(f"unknown workload {name!r}; choose one of {sorted(WORKLOADS)}") from None
    return cls(device=device, seed=seed, **sizes)
