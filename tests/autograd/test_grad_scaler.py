"""GradScaler: PyTorch's scale sequence for the same pattern of inf steps, step skipping,
the unscale_/step/update stages and their errors, unscale_ before clipping, the state dict,
the disabled passthrough, and a small AMP training loop (autocast + GradScaler) on CPU and on
the GPU (or its stand-in)."""
from __future__ import annotations

import numpy as np
import pytest

from gradtrace import autograd as T
from gradtrace.autograd import backend, nn, optim
from gradtrace.autograd.nn import functional as F

INF_PATTERN = [0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0]

# torch 2.13: torch.amp.GradScaler("cpu", init_scale=8.0, growth_factor=3.0,
# backoff_factor=0.25, growth_interval=3) over INF_PATTERN with SGD(lr=0.1) on ones(3) and
# loss = (p * (inf if bad else 1)).sum(): (get_scale(), _get_growth_tracker(), p[0]) after
# each update().
TORCH_SEQUENCE = [
    (8.0, 1, 0.8999999761581421), (8.0, 2, 0.7999999523162842), (24.0, 0, 0.6999999284744263),
    (6.0, 0, 0.6999999284744263), (6.0, 1, 0.5999999046325684), (6.0, 2, 0.49999991059303284),
    (18.0, 0, 0.3999999165534973), (18.0, 1, 0.2999999225139618), (4.5, 0, 0.2999999225139618),
    (1.125, 0, 0.2999999225139618), (1.125, 1, 0.19999992847442627),
    (1.125, 2, 0.09999992698431015), (3.375, 0, -7.450580596923828e-08),
    (3.375, 1, -0.10000007599592209), (3.375, 2, -0.2000000774860382),
    (10.125, 0, -0.30000007152557373), (10.125, 1, -0.40000006556510925),
]
TORCH_STATE = {"scale": 10.125, "growth_factor": 3.0, "backoff_factor": 0.25,
               "growth_interval": 3, "_growth_tracker": 1}


def _param(values=(1.0, 1.0, 1.0), device="cpu"):
    return nn.Parameter(T.tensor(np.array(values, dtype=np.float32), device=device))


def test_scale_sequence_matches_torch():
    p = _param()
    opt = optim.SGD([p], lr=0.1)
    scaler = T.amp.GradScaler("cpu", init_scale=8.0, growth_factor=3.0, backoff_factor=0.25,
                              growth_interval=3)
    seq = []
    for bad in INF_PATTERN:
        opt.zero_grad()
        loss = (p * (float("inf") if bad else 1.0)).sum()
        scaler.scale(loss).backward()
        ret = scaler.step(opt)
        assert ret is None
        scaler.update()
        seq.append((scaler.get_scale(), scaler._get_growth_tracker(), float(p.detach()[0].item())))
    assert [s[:2] for s in seq] == [s[:2] for s in TORCH_SEQUENCE]
    np.testing.assert_allclose([s[2] for s in seq], [s[2] for s in TORCH_SEQUENCE],
                               rtol=0, atol=1e-6)
    assert scaler.state_dict() == TORCH_STATE


def test_step_is_skipped_on_nan_and_grads_are_unscaled():
    p = _param((1.0, 2.0, 3.0))
    opt = optim.SGD([p], lr=1.0)
    scaler = T.amp.GradScaler("cpu", init_scale=4.0)
    (scaler.scale((p * T.tensor([1.0, float("nan"), 1.0])).sum())).backward()
    scaler.step(opt)
    assert p.detach().tolist() == [1.0, 2.0, 3.0]       # skipped
    scaler.update()
    assert scaler.get_scale() == 2.0
    opt.zero_grad()
    scaled = scaler.scale((p * 3.0).sum())
    assert scaled.item() == pytest.approx(2.0 * 18.0)
    scaled.backward()
    assert p.grad.tolist() == [6.0, 6.0, 6.0]           # scaled gradients
    scaler.unscale_(opt)
    assert p.grad.tolist() == [3.0, 3.0, 3.0]           # true gradients
    scaler.step(opt)
    assert p.detach().tolist() == [-2.0, -1.0, 0.0]


def test_stage_errors_as_torch():
    p = _param()
    opt = optim.SGD([p], lr=0.1)
    scaler = T.amp.GradScaler("cpu")
    with pytest.raises(AssertionError, match="Attempted unscale_ but _scale is None"):
        scaler.unscale_(opt)
    with pytest.raises(AssertionError, match="Attempted step but _scale is None"):
        scaler.step(opt)
    scaler.scale(p.sum()).backward()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called on this "
                                           "optimizer since the last update\\(\\)"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="unscale_\\(\\) is being called after step\\(\\)"):
        scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called since the last "
                                           "update\\(\\)"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
        scaler.step(opt, closure=lambda: 0.0)
    scaler.update()
    with pytest.raises(AssertionError, match="No inf checks were recorded prior to update"):
        scaler.update()
    with pytest.raises(ValueError, match="outputs must be a Tensor or an iterable of Tensors"):
        scaler.scale([p.sum(), 3.0])


def test_unscale_fp16_grads_refused():
    p = nn.Parameter(T.ones(2).half())
    opt = optim.SGD([p], lr=0.1)
    scaler = T.amp.GradScaler("cpu")
    scaler.scale(p.sum()).backward()
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients."):
        scaler.step(opt)


def test_unscale_then_clip_grad_norm():
    p = _param((3.0, 4.0, 0.0))
    q = _param((0.0, 0.0, 0.0))
    opt = optim.SGD([p, q], lr=1.0)
    scaler = T.amp.GradScaler("cpu", init_scale=1024.0)
    scaler.scale((p * p).sum() / 2 + (q * 0).sum()).backward()   # grad of p = p
    scaler.unscale_(opt)
    norm = nn.utils.clip_grad_norm_([p, q], max_norm=1.0)
    assert float(norm) == pytest.approx(5.0)            # the unscaled norm
    np.testing.assert_allclose(p.grad.numpy(), [0.6, 0.8, 0.0], rtol=1e-5)
    scaler.step(opt)                                     # no second unscale
    np.testing.assert_allclose(p.detach().numpy(), [2.4, 3.2, 0.0], rtol=1e-5)
    scaler.update()
    assert scaler.get_scale() == 1024.0 and scaler._get_growth_tracker() == 1


def test_scale_nested_outputs():
    scaler = T.amp.GradScaler("cpu", init_scale=2.0)
    a, b, c = T.ones(1), T.full((2,), 3.0), T.zeros(1)
    out = scaler.scale([a, (b, [c])])
    assert isinstance(out, list) and isinstance(out[1], tuple) and isinstance(out[1][1], list)
    assert out[0].tolist() == [2.0] and out[1][0].tolist() == [6.0, 6.0]
    assert out[1][1][0].tolist() == [0.0]


def test_update_with_new_scale():
    p = _param()
    opt = optim.SGD([p], lr=0.1)
    scaler = T.amp.GradScaler("cpu")
    scaler.scale(p.sum()).backward()
    scaler.step(opt)
    scaler.update(new_scale=128.0)
    assert scaler.get_scale() == 128.0
    scaler.update(T.tensor([32.0]))
    assert scaler.get_scale() == 32.0
    with pytest.raises(AssertionError, match="new_scale should be a float"):
        scaler.update(T.tensor([1.0, 2.0]))


def test_state_dict_round_trip_and_setters():
    p = _param()
    opt = optim.SGD([p], lr=0.1)
    a = T.amp.GradScaler("cpu", init_scale=16.0, growth_interval=2)
    for _ in range(3):
        a.scale(p.sum()).backward()
        a.step(opt)
        a.update()
    sd = a.state_dict()
    assert sd == {"scale": 32.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                  "growth_interval": 2, "_growth_tracker": 1}
    b = T.amp.GradScaler("cpu")
    b.load_state_dict(sd)
    assert b.state_dict() == sd
    assert b.get_scale() == 32.0 and b.get_growth_interval() == 2
    # Loaded into a scaler whose scale exists already, the tensors take the values.
    b.scale(p.sum())
    b.load_state_dict({**sd, "scale": 8.0, "_growth_tracker": 0})
    assert b.get_scale() == 8.0 and b._get_growth_tracker() == 0
    b.set_growth_factor(4.0)
    b.set_backoff_factor(0.125)
    b.set_growth_interval(7)
    assert (b.get_growth_factor(), b.get_backoff_factor(),
            b.get_growth_interval()) == (4.0, 0.125, 7)
    with pytest.raises(RuntimeError, match="The source state dict is empty"):
        b.load_state_dict(T.amp.GradScaler("cpu", enabled=False).state_dict())


def test_disabled_scaler_is_a_passthrough():
    p = _param()
    opt = optim.SGD([p], lr=1.0)
    scaler = T.amp.GradScaler("cpu", enabled=False)
    loss = p.sum()
    assert scaler.scale(loss) is loss
    loss.backward()
    scaler.unscale_(opt)
    assert p.grad.tolist() == [1.0, 1.0, 1.0]
    scaler.step(opt)
    assert p.detach().tolist() == [0.0, 0.0, 0.0]
    scaler.update()
    assert not scaler.is_enabled()
    assert scaler.get_scale() == 1.0 and scaler.state_dict() == {}


def test_cuda_scaler_without_cuda_disables_itself(monkeypatch):
    """PyTorch's GradScaler("cuda") without a GPU warns and disables itself (so do
    autocast("cuda") regions)."""
    monkeypatch.setattr(backend, "cuda_is_available", lambda: False)
    with pytest.warns(UserWarning, match="CUDA is not available"):
        scaler = T.cuda.amp.GradScaler()
    assert not scaler.is_enabled()
    with pytest.warns(UserWarning, match="CUDA is not available"):
        region = T.autocast("cuda")
    with region:
        assert not T.is_autocast_enabled("cuda")


def _train(device: str, steps: int = 60):
    """PyTorch's AMP recipe, unchanged: autocast forward, scaled backward, step, update."""
    T.manual_seed(0)
    rng = np.random.default_rng(0)
    x = T.tensor(rng.standard_normal((64, 8)).astype(np.float32), device=device)
    y = T.tensor((rng.standard_normal((64, 8)) @ rng.standard_normal((8, 1))).astype(np.float32),
                 device=device)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
    opt = optim.SGD(model.parameters(), lr=0.1)
    dtype = {"device_type": device} if device == "cuda" else {"device_type": device,
                                                              "dtype": T.float16}
    scaler = T.amp.GradScaler(device, init_scale=2.0**16)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        with T.autocast(**dtype):
            out = model(x)
            assert out.dtype == T.float16
            loss = F.mse_loss(out, y)
            assert loss.dtype == T.float32
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    for prm in model.parameters():
        assert prm.dtype == T.float32 and prm.grad.dtype == T.float32
        assert prm.device.type == device
    return losses, scaler


def test_amp_training_loop_decreases_the_loss_cpu():
    losses, scaler = _train("cpu")
    assert losses[-1] < 0.5 * losses[0]
    assert np.isfinite(losses).all()
    assert scaler.get_scale() > 0


@pytest.mark.cuda
def test_amp_training_loop_decreases_the_loss_cuda():
    losses, scaler = _train("cuda")
    assert losses[-1] < 0.5 * losses[0]
    assert np.isfinite(losses).all()
    assert scaler._scale.device.type == "cuda"


@pytest.mark.cuda
def test_cuda_autocast_refuses_binary_cross_entropy():
    p = T.rand(4, device="cuda")
    with T.autocast("cuda"):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(p, p)
    assert F.binary_cross_entropy(p, p).dtype == T.float32
