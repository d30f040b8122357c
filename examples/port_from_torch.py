"""A typical PyTorch training script, ported to gradtrace by changing its imports only.

The torch original's import lines were:

    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.utils.data import DataLoader, TensorDataset

Everything below the imports is the PyTorch code, unchanged: an MLP and a small transformer
classifier trained with AdamW, a OneCycleLR (MLP) / LinearLR+CosineAnnealingLR via SequentialLR
(transformer) schedule, clip_grad_norm_, a shuffling DataLoader over a TensorDataset,
model.train()/eval(), no_grad evaluation, and save/load of the model and optimizer state dicts.

Run: ``python examples/port_from_torch.py [--steps N]``.
"""
import argparse
import os
import tempfile

import gradtrace.autograd as torch
import gradtrace.autograd.nn as nn
import gradtrace.autograd.nn.functional as F
from gradtrace.autograd.utils.data import DataLoader, TensorDataset


class MLP(nn.Module):
    def __init__(self, in_features, hidden, num_classes, dropout=0.1):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(in_features, hidden), nn.GELU(), nn.Dropout(dropout),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x):
        return self.net(x)


class TransformerClassifier(nn.Module):
    def __init__(self, vocab_size, d_model, nhead, num_layers, num_classes, max_len=64):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Parameter(torch.zeros(1, max_len, d_model))
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=2 * d_model,
                                           dropout=0.1, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos[:, :tokens.shape[1]]
        x = self.encoder(x)
        return self.head(self.norm(x).mean(dim=1))


def make_data(kind, n, device):
    g = torch.Generator().manual_seed(0)
    if kind == "mlp":
        x = torch.randn(n, 16, generator=g)
        y = (x[:, :4].sum(dim=1) > 0).long() + (x[:, 4:8].sum(dim=1) > 1).long()
        return x.to(device), y.to(device)
    tokens = torch.randint(0, 20, (n, 12), generator=g)
    y = ((tokens < 10).sum(dim=1) > 6).long()
    return tokens.to(device), y.to(device)


def evaluate(model, loader):
    model.eval()
    total, correct, loss_sum = 0, 0, 0.0
    with torch.no_grad():
        for xb, yb in loader:
            logits = model(xb)
            loss_sum += F.cross_entropy(logits, yb, reduction="sum").item()
            correct += (logits.argmax(dim=1) == yb).sum().item()
            total += yb.shape[0]
    return loss_sum / total, correct / total


def train(kind, steps=60, batch_size=32, n=512, device=None, log=print):
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    x, y = make_data(kind, n, device)
    loader = DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=True)
    eval_loader = DataLoader(TensorDataset(x, y), batch_size=256)
    if kind == "mlp":
        model = MLP(16, 64, 3).to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
        scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-2,
                                                        total_steps=steps)
    else:
        model = TransformerClassifier(20, 32, 4, 2, 2).to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
        warmup = max(1, steps // 10)
        scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [
            torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=warmup),
            torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps - warmup),
        ], milestones=[warmup])

    first_loss, _ = evaluate(model, eval_loader)
    step = 0
    while step < steps:
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            optimizer.step()
            scheduler.step()
            step += 1
            if step % 20 == 0:
                log(f"{kind} step {step}: loss {loss.item():.4f} lr {scheduler.get_last_lr()[0]:.2e}")
            if step == steps:
                break
    last_loss, accuracy = evaluate(model, eval_loader)
    log(f"{kind}: eval loss {first_loss:.4f} -> {last_loss:.4f}, accuracy {accuracy:.3f}")

    # Save, rebuild, load: the reloaded model gives the same outputs.
    path = os.path.join(tempfile.mkdtemp(), f"{kind}.pt")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "step": step}, path)
    checkpoint = torch.load(path, map_location=device)
    clone = (MLP(16, 64, 3) if kind == "mlp" else TransformerClassifier(20, 32, 4, 2, 2)).to(device)
    clone.load_state_dict(checkpoint["model"])
    optimizer2 = torch.optim.AdamW(clone.parameters(), lr=1e-3)
    optimizer2.load_state_dict(checkpoint["optimizer"])
    model.eval()
    clone.eval()
    with torch.no_grad():
        same = (model(x[:64]) - clone(x[:64])).abs().max().item() == 0.0
    log(f"{kind}: reloaded model gives identical outputs: {same}")
    return {"first_loss": first_loss, "last_loss": last_loss, "accuracy": accuracy,
            "reload_identical": same, "step": checkpoint["step"]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--device", default=None)
    args = parser.parse_args(argv)
    return {kind: train(kind, args.steps, device=args.device) for kind in ("mlp", "transformer")}


if __name__ == "__main__":
    main()
