"""nn.utils.rnn (pad_sequence, packing) and packed input to nn.LSTM/GRU/RNN, against PyTorch
2.13's values (pinned) and against running each sequence alone over its own length."""
import numpy as np
import pytest

import gradtrace.autograd as torch
from gradtrace.autograd import nn
from gradtrace.autograd.nn.utils.rnn import (PackedSequence, pack_padded_sequence,
                                             pack_sequence, pad_packed_sequence, pad_sequence,
                                             unpack_sequence)


def test_pad_sequence_sides_and_layouts():
    a, b = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0, 5.0])
    assert pad_sequence([a, b]).tolist() == [[1.0, 3.0], [2.0, 4.0], [0.0, 5.0]]
    assert pad_sequence([a, b], batch_first=True, padding_value=-1.0,
                        padding_side="left").tolist() == [[-1.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    with pytest.raises(RuntimeError, match="Expected padding_side to be one of left or right, "
                                           "but got x."):
        pad_sequence([a], padding_side="x")


def test_packing_is_pytorchs_layout_and_round_trips():
    x = torch.arange(6.0).reshape(3, 2, 1)
    p = pack_padded_sequence(x, [1, 3], enforce_sorted=False)
    # torch: data [[1.], [0.], [3.], [5.]], batch_sizes [2, 1, 1], sorted/unsorted [1, 0]
    assert isinstance(p, PackedSequence)
    assert p.data.reshape(-1).tolist() == [1.0, 0.0, 3.0, 5.0]
    assert p.batch_sizes.tolist() == [2, 1, 1] and p.batch_sizes.dtype == torch.int64
    assert p.sorted_indices.tolist() == [1, 0] and p.unsorted_indices.tolist() == [1, 0]
    padded, lengths = pad_packed_sequence(p, total_length=4)
    assert lengths.tolist() == [1, 3]
    assert padded[:, :, 0].tolist() == [[0.0, 1.0], [0.0, 3.0], [0.0, 5.0], [0.0, 0.0]]
    seqs = [torch.tensor([1.0, 2.0, 3.0]), torch.tensor([4.0])]
    assert [s.tolist() for s in unpack_sequence(pack_sequence(seqs))] == [[1.0, 2.0, 3.0], [4.0]]


def test_packing_errors_are_pytorchs():
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
        pack_padded_sequence(torch.ones(3, 2, 1), [1, 2])
    with pytest.raises(RuntimeError, match="Length of all samples has to be greater than 0"):
        pack_padded_sequence(torch.ones(3, 2, 1), [0, 2], enforce_sorted=False)


def test_gradient_flows_through_pack_and_pad():
    x = torch.arange(6.0).reshape(3, 2, 1).requires_grad_()
    padded, _ = pad_packed_sequence(pack_padded_sequence(x, [3, 1]), padding_value=7.0)
    (padded * padded).sum().backward()
    # Only the packed (valid) entries get a gradient: 2x at each, zero at the padding.
    assert x.grad[:, :, 0].tolist() == [[0.0, 2.0], [4.0, 0.0], [8.0, 0.0]]


def _sin_weights(m):
    with torch.no_grad():
        for i, p in enumerate(m.parameters()):
            p.copy_(torch.tensor(np.sin(np.arange(p.numel()) * 0.7 + i).reshape(p.shape)))
    return m


def test_packed_bidirectional_lstm_matches_pytorch():
    m = _sin_weights(nn.LSTM(2, 3, bidirectional=True).double())
    x = torch.tensor(np.cos(np.arange(4 * 3 * 2) * 0.3).reshape(4, 3, 2))
    out, (h, c) = m(pack_padded_sequence(x, [2, 4, 1], enforce_sorted=False))
    assert isinstance(out, PackedSequence)
    pad, lengths = pad_packed_sequence(out, batch_first=True, padding_value=-1.0)
    # PyTorch 2.13, the same weights and input
    assert pad.sum().item() == pytest.approx(-31.866346640599147, abs=1e-12)
    assert h.sum().item() == pytest.approx(0.24121505754804107, abs=1e-12)
    np.testing.assert_allclose(c[1].detach().numpy(), [
        [-0.8928383970284274, -0.35080835948575273, -0.014618825623165667],
        [-1.5720474346823474, -0.40681446201109506, -0.05553083624608218],
        [-0.47552389736279305, -0.6267255625696679, -0.4893014700366364]], atol=1e-12)
    np.testing.assert_allclose(pad[0, :, 0].detach().numpy(),
                               [0.562401264693342, 0.6057038811578089, -1.0, -1.0], atol=1e-12)
    assert lengths.tolist() == [2, 4, 1]


@pytest.mark.parametrize("cls,kwargs", [("LSTM", {"num_layers": 2}),
                                        ("GRU", {"bidirectional": True}),
                                        ("RNN", {"nonlinearity": "relu"}),
                                        ("LSTM", {"proj_size": 2, "bidirectional": True})])
def test_packed_equals_each_sequence_alone(cls, kwargs):
    """A packed batch is exactly each sequence run alone over its length, states included,
    gradients included (the initial state given in the caller's order)."""
    torch.manual_seed(0)
    m = getattr(nn, cls)(3, 4, **kwargs).double()
    rng = np.random.default_rng(1)
    lengths = [3, 5, 1, 3]
    seqs = [torch.tensor(rng.standard_normal((n, 3)), requires_grad=True) for n in lengths]
    layers = m.num_layers * (2 if m.bidirectional else 1)
    h0 = torch.tensor(rng.standard_normal((layers, 4, m.proj_size or 4)))
    c0 = torch.tensor(rng.standard_normal((layers, 4, 4)))
    hx = (h0, c0) if cls == "LSTM" else h0
    out, state = m(pack_sequence(seqs, enforce_sorted=False), hx)
    padded, _ = pad_packed_sequence(out)
    h_n = state[0] if cls == "LSTM" else state
    (padded.sum() + (h_n * h_n).sum()).backward()
    grads = [s.grad.numpy().copy() for s in seqs]
    for b, s in enumerate(seqs):
        s.grad = None
        alone_hx = (h0[:, b:b + 1], c0[:, b:b + 1]) if cls == "LSTM" else h0[:, b:b + 1]
        o, st = m(s.unsqueeze(1), alone_hx)
        hb = st[0] if cls == "LSTM" else st
        np.testing.assert_allclose(padded[:lengths[b], b].detach().numpy(),
                                   o[:, 0].detach().numpy(), atol=1e-13)
        assert np.all(padded[lengths[b]:, b].detach().numpy() == 0.0)
        np.testing.assert_allclose(h_n[:, b].detach().numpy(), hb[:, 0].detach().numpy(),
                                   atol=1e-13)
        (o.sum() + (hb * hb).sum()).backward()
        np.testing.assert_allclose(grads[b], s.grad.numpy(), atol=1e-12)
