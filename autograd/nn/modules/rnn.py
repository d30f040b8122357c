"""Recurrent layers: RNN, LSTM and GRU with PyTorch's gate order, parameter names
(``weight_ih_l0``, ``weight_hh_l0``, ``bias_ih_l0``, ``bias_hh_l0``, ``..._reverse``),
shapes and initialisation U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)); and their one-step
cells, RNNCell, LSTMCell and GRUCell (``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh``).

LSTM, GRU and RNN run each layer as one fused op (``ops/rnn.py``, PyTorch's
``mkldnn_rnn_layer``; ``ops/gru.py``; ``ops/elman.py``), the loop over layers in
``rnn_layers.py``. The cells are one step each, made of linear and elementwise ops whose
backward comes from the op table.
"""
from __future__ import annotations

import math

from ... import ops
from ..._tensor import tensor as _tensor, zeros as _zeros
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ..utils.rnn import PackedSequence, _ints, _lengths, _packed_positions, pad_packed_sequence
from ..._tensor import empty as _empty_t
from .module import Module
from .rnn_layers import gru as _gru, lstm as _lstm
from .rnn_layers import rnn_relu as _rnn_relu, rnn_tanh as _rnn_tanh

__all__ = ["RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"]


class _RNNBase(Module):
    _gates = 1

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, device=None, dtype=None, proj_size: int = 0):
        super().__init__()
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"{type(self).__name__}: dropout should be a number in [0, 1], "
                             f"got {dropout}")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size and proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        directions = 2 if bidirectional else 1
        rows = self._gates * hidden_size
        h_size = proj_size or hidden_size   # the hidden state's (and output's) size
        for layer in range(num_layers):
            for suffix in ("", "_reverse")[:directions]:
                n_in = input_size if layer == 0 else h_size * directions
                names = [("weight_ih", (rows, n_in)), ("weight_hh", (rows, h_size))]
                if bias:
                    names += [("bias_ih", (rows,)), ("bias_hh", (rows,))]
                if proj_size:
                    names += [("weight_hr", (proj_size, hidden_size))]
                for name, shape in names:
                    setattr(self, f"{name}_l{layer}{suffix}",
                            Parameter(_empty_t(*shape, device=device, dtype=dtype)))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def _init_state(self, hx, batch, like, size=None):
        directions = 2 if self.bidirectional else 1
        shape = (self.num_layers * directions, batch, size or self.hidden_size)
        if hx is None:
            return _zeros(*shape, dtype=like.dtype, device=like.device)
        if tuple(hx.shape) != shape:
            raise RuntimeError(f"{type(self).__name__}: expected hidden size {list(shape)}, got "
                               f"{list(hx.shape)}")
        return hx

    def forward(self, input, hx=None):  # noqa: A002
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        unbatched = input.ndim == 2
        if input.ndim not in (2, 3):
            raise ValueError(f"{type(self).__name__}: expected a 2-D (unbatched) or 3-D input, "
                             f"got shape {list(input.shape)}")
        x = input.unsqueeze(1) if unbatched else (input.transpose(0, 1) if self.batch_first
                                                  else input)
        if x.shape[-1] != self.input_size:
            raise RuntimeError(f"{type(self).__name__}: input.size(-1) must be equal to "
                               f"input_size. Expected {self.input_size}, got {x.shape[-1]}")
        if x.shape[0] == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        if unbatched and hx is not None:
            hx = tuple(h.unsqueeze(1) for h in hx) if isinstance(hx, tuple) else hx.unsqueeze(1)
        x, state = self._run(x, hx)   # each subclass's fused layers (rnn_layers.py)
        out = x.squeeze(1) if unbatched else (x.transpose(0, 1) if self.batch_first else x)
        return out, (self._squeeze_state(state) if unbatched else state)

    def flatten_parameters(self) -> None:
        """PyTorch's: compact the weights into one buffer for cuDNN. Nothing to do here, as
        in PyTorch on the CPU: the fused layers read each weight where it lies."""

    def _forward_packed(self, packed: PackedSequence, hx):
        """A packed batch: each sequence runs over its own length only, as PyTorch's.

        The sequences come sorted longest first, so those of one length are a contiguous
        slice of the batch; each such group runs through the fused layers over its length
        (exact: nothing past a sequence's end reaches its states, forward or reverse). The
        cost is one fused call per distinct length. Returns ``(PackedSequence, h_n)``, h_n
        in the caller's batch order.
        """
        lengths = _lengths(_ints(packed.batch_sizes))
        x, _ = pad_packed_sequence(packed._replace(sorted_indices=None, unsorted_indices=None))
        if x.shape[-1] != self.input_size:
            raise RuntimeError(f"{type(self).__name__}: input.size(-1) must be equal to "
                               f"input_size. Expected {self.input_size}, got {x.shape[-1]}")
        steps, batch = x.shape[0], x.shape[1]
        states = hx if isinstance(hx, tuple) else (hx,)
        if hx is not None and packed.sorted_indices is not None:   # into the sorted order
            states = tuple(ops.index_select(h, 1, packed.sorted_indices) for h in states)
        outs, finals = [], []
        start = 0
        for length in sorted(set(lengths.tolist()), reverse=True):
            stop = start + int((lengths == length).sum())
            group = None if hx is None else tuple(h[:, start:stop] for h in states)
            out, state = self._run(x[:length, start:stop],
                                   None if group is None else
                                   (group if isinstance(hx, tuple) else group[0]))
            if length < steps:   # the packed rows never read these: any value will do
                out = ops.cat([out, _zeros(steps - length, *out.shape[1:], dtype=out.dtype,
                                           device=out.device)], 0)
            outs.append(out)
            finals.append(state if isinstance(state, tuple) else (state,))
            start = stop
        out = ops.cat(outs, 1)
        rows = _packed_positions(_ints(packed.batch_sizes), batch)
        data = ops.index_select(out.reshape(steps * batch, out.shape[-1]), 0,
                                _tensor(rows, device=out.device))
        state = [ops.cat([f[k] for f in finals], 1) for k in range(len(finals[0]))]
        if packed.unsorted_indices is not None:   # back to the caller's order
            state = [ops.index_select(h, 1, packed.unsorted_indices) for h in state]
        return packed._replace(data=data), (tuple(state) if len(state) > 1 else state[0])

    def _flat_weights_names(self):
        """Parameter names in PyTorch's order: per layer and direction, w_ih, w_hh, b_ih,
        b_hh."""
        names = []
        for layer in range(self.num_layers):
            for suffix in ("", "_reverse")[:2 if self.bidirectional else 1]:
                names += [f"{n}_l{layer}{suffix}" for n in
                          ("weight_ih", "weight_hh", "bias_ih", "bias_hh")[:4 if self.bias else 2]]
                if self.proj_size:
                    names.append(f"weight_hr_l{layer}{suffix}")
        return names

    def _squeeze_state(self, state):
        return state.squeeze(1)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class RNN(_RNNBase):
    """Elman RNN: ``h' = tanh(W_ih x + b_ih + W_hh h + b_hh)`` (or relu)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: unknown nonlinearity {nonlinearity!r}, use 'tanh' or 'relu'")
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, device, dtype)

    def __setattr__(self, name, value):
        if name == "nonlinearity" and "_parameters" not in self.__dict__:
            object.__setattr__(self, name, value)   # set before Module.__init__ runs
        else:
            super().__setattr__(name, value)

    def _run(self, x, hx):
        # All layers through ops.rnn_tanh / rnn_relu, one fused node a layer and direction.
        h = self._init_state(hx, x.shape[1], x)
        params = [getattr(self, n) for n in self._flat_weights_names()]
        run = _rnn_relu if self.nonlinearity == "relu" else _rnn_tanh
        return run(x, h, params, self.bias, self.num_layers, self.dropout, self.training,
                   self.bidirectional)


class LSTM(_RNNBase):
    """LSTM with PyTorch's gate order (input, forget, cell, output)::

        i = sigmoid(W_ii x + b_ii + W_hi h + b_hi)     f = sigmoid(... f rows ...)
        g = tanh(... g rows ...)                       o = sigmoid(... o rows ...)
        c' = f * c + i * g                             h' = o * tanh(c')

    With ``proj_size > 0``, ``h' = W_hr (o * tanh(c'))`` (``weight_hr_l{k}``, (proj_size,
    hidden_size)): the hidden state and the output have proj_size features.
    ``forward(input, (h_0, c_0))`` returns ``(output, (h_n, c_n))``.
    """

    _gates = 4

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, device, dtype, proj_size)

    def _run(self, x, hx):
        # All layers through ops.lstm, one fused node a layer and direction (see ops/rnn.py).
        h, c = (None, None) if hx is None else hx
        batch = x.shape[1]
        hx = (self._init_state(h, batch, x, self.proj_size), self._init_state(c, batch, x))
        params = [getattr(self, n) for n in self._flat_weights_names()]
        out, h, c = _lstm(x, hx, params, self.bias, self.num_layers, self.dropout,
                             self.training, self.bidirectional, bool(self.proj_size))
        return out, (h, c)

    def _squeeze_state(self, state):
        return tuple(s.squeeze(1) for s in state)


class GRU(_RNNBase):
    """GRU with PyTorch's gate order (reset, update, new)::

        r = sigmoid(W_ir x + b_ir + W_hr h + b_hr)     z = sigmoid(... z rows ...)
        n = tanh(W_in x + b_in + r * (W_hn h + b_hn))  h' = (1 - z) * n + z * h
    """

    _gates = 3

    def _run(self, x, hx):
        # All layers through ops.gru, one fused node a layer and direction (see ops/gru.py).
        h = self._init_state(hx, x.shape[1], x)
        params = [getattr(self, n) for n in self._flat_weights_names()]
        return _gru(x, h, params, self.bias, self.num_layers, self.dropout,
                    self.training, self.bidirectional)


# --------------------------------------------------------------------------- cells
# One time step each, the equations above; the user unrolls the loop. The step functions are
# shared with the multi-layer modules' unrolled paths.


def _lstm_step(x_proj, h, c, w_hh, b_hh):
    i, f, g, o = ops.chunk(x_proj + F.linear(h, w_hh, b_hh), 4, -1)
    c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)
    return F.sigmoid(o) * F.tanh(c), c


class RNNCellBase(Module):
    """The parameters of a one-step cell: ``weight_ih`` (gates * hidden, input),
    ``weight_hh`` (gates * hidden, hidden), ``bias_ih`` and ``bias_hh`` (gates * hidden),
    initialised U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)) as PyTorch's."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int,
                 device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        rows = num_chunks * hidden_size
        self.weight_ih = Parameter(_empty_t(rows, input_size, device=device, dtype=dtype))
        self.weight_hh = Parameter(_empty_t(rows, hidden_size, device=device, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(_empty_t(rows, device=device, dtype=dtype))
            self.bias_hh = Parameter(_empty_t(rows, device=device, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nonlinearity = getattr(self, "nonlinearity", "tanh")
        if nonlinearity != "tanh":
            s += f", nonlinearity={nonlinearity}"
        return s

    def _batched(self, input, states, names):  # noqa: A002
        """``(input, states, unbatched)`` with a batch dim of one added to an unbatched call,
        after PyTorch's checks (its messages); a missing state is zeros."""
        cls = type(self).__name__
        if input.ndim not in (1, 2):
            raise ValueError(f"{cls}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        for name, h in zip(names, states):
            if h is not None and h.ndim not in (1, 2):
                raise ValueError(f"{cls}: Expected {name} to be 1D or 2D, got {h.ndim}D instead")
        unbatched = input.ndim == 1
        if unbatched:
            input = input.unsqueeze(0)
            states = [None if h is None else h.unsqueeze(0) for h in states]
        if input.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[1]} "
                               f"expected {self.input_size}")
        batch = input.shape[0]
        full = []
        for k, h in enumerate(states):
            if h is None:
                h = _zeros(batch, self.hidden_size, dtype=input.dtype, device=input.device)
            elif h.shape[0] != batch:
                raise RuntimeError(f"Input batch size {batch} doesn't match hidden{k} batch "
                                   f"size {h.shape[0]}")
            elif h.shape[1] != self.hidden_size:
                raise RuntimeError(f"hidden{k} has inconsistent hidden_size: got "
                                   f"{h.shape[1]}, expected {self.hidden_size}")
            full.append(h)
        return input, full, unbatched


class RNNCell(RNNCellBase):
    """One Elman step: ``h' = tanh(W_ih x + b_ih + W_hh h + b_hh)`` (or relu).

    ``forward(input, hx=None)``: input (batch, input_size) or (input_size,), hx likewise
    with hidden_size (zeros when omitted); returns h'.
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):  # noqa: A002
        x, (h,), unbatched = self._batched(input, [hx], ["hidden"])
        z = F.linear(x, self.weight_ih, self.bias_ih) + F.linear(h, self.weight_hh, self.bias_hh)
        if self.nonlinearity == "tanh":
            h = F.tanh(z)
        elif self.nonlinearity == "relu":
            h = F.relu(z)
        else:
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        return h.squeeze(0) if unbatched else h


class LSTMCell(RNNCellBase):
    """One LSTM step, PyTorch's gate order (input, forget, cell, output).

    ``forward(input, hx=None)``: hx is ``(h, c)`` (zeros when omitted); returns ``(h', c')``.
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):  # noqa: A002
        h, c = (None, None) if hx is None else hx
        x, (h, c), unbatched = self._batched(input, [h, c], ["hx[0]", "hx[1]"])
        h, c = _lstm_step(F.linear(x, self.weight_ih, self.bias_ih), h, c, self.weight_hh,
                          self.bias_hh)
        return (h.squeeze(0), c.squeeze(0)) if unbatched else (h, c)


class GRUCell(RNNCellBase):
    """One GRU step, PyTorch's gate order (reset, update, new).

    ``forward(input, hx=None)``: returns h' (hx zeros when omitted).
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):  # noqa: A002
        x, (h,), unbatched = self._batched(input, [hx], ["hidden"])
        h = _gru_step(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh,
                      self.bias_hh)
        return h.squeeze(0) if unbatched else h


def _gru_step(x_proj, h, w_hh, b_hh):
    xr, xz, xn = ops.chunk(x_proj, 3, -1)
    hr, hz, hn = ops.chunk(F.linear(h, w_hh, b_hh), 3, -1)
    r, z = F.sigmoid(xr + hr), F.sigmoid(xz + hz)
    n = F.tanh(xn + r * hn)
    return n + z * (h - n)
