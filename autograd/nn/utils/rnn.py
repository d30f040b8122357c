"""``nn.utils.rnn``: padding a list of sequences, and PyTorch's packed sequences.

A :class:`PackedSequence` holds the entries of a batch of sequences of different lengths,
time-major, sorted by length (longest first): at step t, the ``batch_sizes[t]`` sequences
still running. ``nn.LSTM``/``GRU``/``RNN`` accept one and run each sequence only over its own
length (``rnn.py``). Packing and unpacking are gathers by integer index, so gradients flow
through both.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy

from ...ops.indexing_api import index_select
from ...ops.shape_api import cat, stack
from ..._tensor import Tensor, full, tensor

__all__ = ["PackedSequence", "pad_sequence", "pack_padded_sequence", "pad_packed_sequence",
           "pack_sequence", "unpad_sequence", "unpack_sequence"]


class PackedSequence(NamedTuple):
    """PyTorch's PackedSequence: ``data`` (sum of lengths, *), ``batch_sizes`` (int64, one
    entry a step), and the permutation from the caller's batch order to the sorted one
    (``sorted_indices``) and back (``unsorted_indices``); both None when the batch came sorted.
    """

    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None = None
    unsorted_indices: Tensor | None = None

    def to(self, *args, **kwargs) -> "PackedSequence":
        """The same packing with ``data`` moved or cast (``Tensor.to``'s arguments)."""
        return self._replace(data=self.data.to(*args, **kwargs))

    @property
    def is_cuda(self) -> bool:
        return self.data.device.type == "cuda"


def _ints(values) -> numpy.ndarray:
    """Lengths or indices as a host int64 array (PyTorch keeps them on the CPU)."""
    if isinstance(values, Tensor):
        values = values.detach().cpu().numpy()
    return numpy.asarray(values, dtype=numpy.int64).reshape(-1)


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Stack sequences of shapes (L_i, *) into (T, B, *) (or (B, T, *) with ``batch_first``),
    T the longest L_i, each padded with ``padding_value`` on ``padding_side``."""
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got "
                           f"{padding_side}.")
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        short = longest - s.shape[0]
        if short:
            pad = full((short, *s.shape[1:]), padding_value, dtype=s.dtype, device=s.device)
            s = cat([s, pad] if padding_side == "right" else [pad, s], 0)
        padded.append(s)
    return stack(padded, 0 if batch_first else 1)


def _packed_positions(batch_sizes: numpy.ndarray, batch: int) -> numpy.ndarray:
    """For each packed row, its row in the (T * B) flattening of the padded, sorted batch."""
    steps = numpy.repeat(numpy.arange(len(batch_sizes)), batch_sizes)
    within = numpy.concatenate([numpy.arange(b) for b in batch_sizes]) if len(batch_sizes) \
        else numpy.zeros(0, numpy.int64)
    return steps * batch + within


def _batch_sizes(lengths: numpy.ndarray) -> numpy.ndarray:
    """Sorted (descending) lengths -> how many sequences run at each step."""
    steps = numpy.arange(int(lengths[0]))
    return (lengths[None, :] > steps[:, None]).sum(1).astype(numpy.int64)


def pack_padded_sequence(input, lengths, batch_first: bool = False,  # noqa: A002
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded (T, B, *) batch (or (B, T, *) with ``batch_first``) whose sequence b has
    ``lengths[b]`` valid steps. ``enforce_sorted``: the lengths must come longest first;
    otherwise the batch is sorted here and the permutation kept in the result."""
    lengths = _ints(lengths)
    if enforce_sorted:
        if numpy.any(lengths[:-1] < lengths[1:]):
            raise RuntimeError(
                "`lengths` array must be sorted in decreasing order when `enforce_sorted` is "
                "True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
                "pack_sequence to sidestep this requirement if you do not need ONNX "
                "exportability.")
        sorted_indices = None
    else:
        sorted_indices = numpy.argsort(-lengths, kind="stable")
        lengths = lengths[sorted_indices]
    if lengths.size == 0 or lengths[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an "
                           "element in 'lengths' that is <= 0")
    x = input.transpose(0, 1) if batch_first else input
    if int(lengths[0]) > x.shape[0]:
        raise RuntimeError(f"Expected sequence length to be at most {x.shape[0]}, but got a "
                           f"length of {int(lengths[0])}")
    if sorted_indices is not None:
        x = index_select(x, 1, tensor(sorted_indices, device=x.device))
    steps, batch = int(lengths[0]), x.shape[1]
    batch_sizes = _batch_sizes(lengths)
    flat = x[:steps].reshape(steps * batch, *x.shape[2:])
    data = index_select(flat, 0, tensor(_packed_positions(batch_sizes, batch), device=x.device))
    if sorted_indices is None:
        return PackedSequence(data, tensor(batch_sizes))
    return PackedSequence(data, tensor(batch_sizes), tensor(sorted_indices),
                          tensor(numpy.argsort(sorted_indices)))


def _lengths(batch_sizes: numpy.ndarray) -> numpy.ndarray:
    """Sorted lengths from a packing's batch sizes."""
    batch = int(batch_sizes[0])
    return (batch_sizes[None, :] > numpy.arange(batch)[:, None]).sum(1).astype(numpy.int64)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False,
                        padding_value: float = 0.0, total_length: int | None = None):
    """The inverse of :func:`pack_padded_sequence`: ``(padded, lengths)``, the batch in the
    caller's original order, padded with ``padding_value`` to the longest length (or to
    ``total_length``)."""
    data = sequence.data
    batch_sizes = _ints(sequence.batch_sizes)
    steps, batch = len(batch_sizes), int(batch_sizes[0])
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and max "
                             f"sequence length being {steps}")
        steps = total_length
    # One gather from the packed rows plus a padding row: every padded slot reads its packed
    # row or the padding (the last row), so the gradient flows back to the packed rows.
    source = numpy.full(steps * batch, data.shape[0], dtype=numpy.int64)
    source[_packed_positions(batch_sizes, batch)] = numpy.arange(data.shape[0])
    pad_row = full((1, *data.shape[1:]), padding_value, dtype=data.dtype, device=data.device)
    padded = index_select(cat([data, pad_row], 0), 0, tensor(source, device=data.device))
    padded = padded.reshape(steps, batch, *data.shape[1:])
    lengths = _lengths(batch_sizes)
    if sequence.unsorted_indices is not None:
        unsorted = _ints(sequence.unsorted_indices)
        padded = index_select(padded, 1, tensor(unsorted, device=data.device))
        lengths = lengths[unsorted]
    return (padded.transpose(0, 1) if batch_first else padded), tensor(lengths)


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of (L_i, *) sequences (longest first unless ``enforce_sorted=False``)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences, lengths, batch_first: bool = False) -> list:
    """The list of sequences a :func:`pad_sequence` (right padding) was made from."""
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [x[b, :int(n)] for b, n in enumerate(_ints(lengths))]


def unpack_sequence(packed_sequences: PackedSequence) -> list:
    """The list of sequences a :func:`pack_sequence` was made from, in their original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
