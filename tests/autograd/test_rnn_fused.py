"""nn.LSTM, nn.GRU and nn.RNN through their fused layer ops (ops/rnn.py, ops/gru.py,
ops/elman.py): one node a layer and direction, the profiler's ranges (PyTorch's names),
dropout between layers, and the differentiable backward on sequences longer than one stack
of steps."""
import contextlib

import numpy as np
import pytest

from gradtrace import autograd as ag
from gradtrace import profiler
from gradtrace.autograd import nn


def _nodes(root):
    seen, todo = [], [root]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.append(node)
        todo.extend(edge[0] for edge in node.next_edges if edge is not None)
    return [n.name() for n in seen]


@pytest.mark.parametrize("cls, node", [(nn.LSTM, "MkldnnRnnLayerBackward0"),
                                       (nn.GRU, "GruLayerBackward0"),
                                       (nn.RNN, "RnnLayerBackward0")])
def test_one_node_a_layer_and_direction(cls, node):
    m = cls(3, 4, num_layers=2, bidirectional=True)
    out, _ = m(ag.randn(9, 2, 3))
    assert _nodes(out.grad_fn).count(node) == 4   # 2 layers x 2 directions, not 9 steps each


@pytest.mark.parametrize("cls, kw, names", [
    (nn.LSTM, {}, ("lstm", "mkldnn_rnn_layer")), (nn.GRU, {}, ("gru", "gru_layer")),
    (nn.RNN, {}, ("rnn_tanh", "rnn_layer")), (nn.RNN, {"nonlinearity": "relu"},
                                              ("rnn_relu", "rnn_layer"))])
def test_profiler_shows_the_composite_and_its_layers(cls, kw, names):
    m = cls(3, 4, num_layers=2, **kw)
    with profiler.profile() as prof:
        out, _ = m(ag.randn(5, 2, 3))
        out.sum().backward()
    counts = {e.key: e.count for e in prof.key_averages()}
    assert counts[names[0]] == 1 and counts[names[1]] == 2


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN])
def test_dropout_between_layers_in_training_only(cls):
    ag.manual_seed(0)
    m = cls(3, 4, num_layers=2, dropout=0.5)
    x = ag.randn(6, 2, 3)
    m.eval()
    a, b = m(x)[0].detach().numpy(), m(x)[0].detach().numpy()
    np.testing.assert_array_equal(a, b)
    m.train()
    assert not np.allclose(m(x)[0].detach().numpy(), a)
    one = cls(3, 4, num_layers=1, dropout=0.0)   # no dropout after the last layer
    one.train()
    np.testing.assert_array_equal(one(x)[0].detach().numpy(), one(x)[0].detach().numpy())


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN])
def test_long_sequence_differentiable_backward(cls):
    """70 steps: more than one F.stack (64 tensors) in the differentiable backward."""
    m = cls(2, 3, dtype=ag.float64)
    x = ag.tensor(np.random.default_rng(0).standard_normal((70, 2, 2)), requires_grad=True)
    out, _ = m(x)
    plain = ag.grad(out.sum(), [x] + list(m.parameters()), retain_graph=True)
    graph = ag.grad(out.sum(), [x] + list(m.parameters()), create_graph=True)
    for a, b in zip(plain, graph):
        np.testing.assert_allclose(b.detach().numpy(), a.numpy(), rtol=1e-10, atol=1e-12)
    assert graph[0].requires_grad


def test_lstm_hidden_state_errors_are_kept():
    m = nn.LSTM(3, 4)
    with pytest.raises(RuntimeError, match=r"expected hidden size \[1, 2, 4\], got \[1, 3, 4\]"):
        m(ag.randn(5, 2, 3), (ag.randn(1, 3, 4), ag.randn(1, 2, 4)))


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN])
def test_empty_sequence_is_refused_as_pytorch(cls):
    with pytest.raises(RuntimeError, match="Expected sequence length to be larger than 0 in RNN"):
        cls(3, 4)(ag.randn(0, 2, 3))


@pytest.mark.parametrize("cls, kw", [(nn.LSTM, {}), (nn.LSTM, {"proj_size": 3}), (nn.GRU, {}),
                                     (nn.RNN, {"nonlinearity": "relu"})])
def test_compiled_autograd_replays_the_fused_layers_bit_for_bit(cls, kw):
    from gradtrace.autograd import compiled_autograd as ca
    ag.manual_seed(0)
    m = cls(4, 5, num_layers=2, bidirectional=True, **kw)
    x = ag.tensor(np.random.default_rng(1).standard_normal((6, 2, 4)).astype(np.float32),
                  requires_grad=True)
    params = list(m.parameters()) + [x]

    def grads(compiled):
        for p in params:
            p.grad = None
        ca.reset()
        with ca.enable() if compiled else contextlib.nullcontext():
            for _ in range(2):   # the second backward replays the compiled program
                m(x)[0].sum().backward()
        return [p.grad.numpy().copy() for p in params]

    for e, c in zip(grads(False), grads(True)):
        np.testing.assert_array_equal(e, c)
    assert ca.stats()["hits"] == 1
    ca.reset()
