"""Each reference workload learns: 30 steps at small size lower the loss by at least 30%."""
import pytest

from gradtrace.autograd.models import WORKLOADS, make_workload

SMALL = {
    "mlp": dict(hidden=64, depth=2, batch=32),
    "cnn": dict(size=16, channels=4, batch=16, n_samples=128),
    "gpt": dict(block=16, dim=32, heads=2, batch=16, lr=1e-2),
}


def _losses(name, device):
    wl = make_workload(name, device=device, seed=0, **SMALL[name])
    return [wl.train_step() for _ in range(30)]


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_workload_loss_drops_by_30_percent(name):
    losses = _losses(name, "cpu")
    first, last = losses[0], sum(losses[-5:]) / 5   # the last few averaged: batches differ
    assert last <= 0.7 * first, f"{name}: loss went from {first:.4f} to {last:.4f}"


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_workload_is_deterministic_for_a_seed(name):
    a = make_workload(name, seed=3, **SMALL[name])
    b = make_workload(name, seed=3, **SMALL[name])
    assert [a.train_step() for _ in range(2)] == [b.train_step() for _ in range(2)]


def test_make_workload_rejects_unknown_names():
    with pytest.raises(ValueError, match="unknown workload 'rnn'.*cnn.*gpt.*mlp"):
        make_workload("rnn")


@pytest.mark.cuda
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_workload_loss_drops_on_gpu(name):
    losses = _losses(name, "cuda")
    first, last = losses[0], sum(losses[-5:]) / 5   # the last few averaged: batches differ
    assert last <= 0.7 * first, f"{name} on cuda: loss went from {first:.4f} to {last:.4f}"
