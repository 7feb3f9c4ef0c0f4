"""Variable-length sequences: padding and packing, with PyTorch's layouts."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...tensor import functional as F
from ...tensor.creation import full, tensor
from ...tensor.tensor import Tensor


class PackedSequence(NamedTuple):
    """Time-major concatenation of the active batch rows at each step.

    data: [sum(lengths), *features]; batch_sizes[t]: rows active at step t (sequences
    sorted by decreasing length); sorted_indices / unsorted_indices map to and from
    the caller's batch order (None when the input was already sorted).
    """

    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None = None
    unsorted_indices: Tensor | None = None


def _lengths_list(lengths) -> list:
    if isinstance(lengths, Tensor):
        return [int(v) for v in lengths.tolist()]
    return [int(v) for v in lengths]


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0) -> Tensor:
    """Stack tensors of shape [L_i, *] into [max L, B, *] (or [B, max L, *])."""
    if not sequences:
        raise RuntimeError("pad_sequence: received an empty list of sequences")
    max_len = max(s.shape[0] for s in sequences)
    rows = []
    for s in sequences:
        extra = max_len - s.shape[0]
        if extra:
            filler = full((extra,) + tuple(s.shape[1:]), padding_value, dtype=s.dtype)
            s = F.cat([s, filler], 0)
        rows.append(s)
    return F.stack(rows, 0 if batch_first else 1)


def pack_padded_sequence(input: Tensor, lengths, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch so that recurrent layers skip the padding."""
    lens = _lengths_list(lengths)
    if batch_first:
        input = F.transpose(input, 0, 1)
    if any(n <= 0 for n in lens):
        raise RuntimeError("pack_padded_sequence: every length must be positive")
    if max(lens) > input.shape[0]:
        raise RuntimeError(f"pack_padded_sequence: a length {max(lens)} exceeds the padded "
                           f"length {input.shape[0]}")
    order = sorted(range(len(lens)), key=lambda i: -lens[i])
    sorted_indices = unsorted_indices = None
    if enforce_sorted and order != list(range(len(lens))):
        raise RuntimeError("pack_padded_sequence: lengths must be sorted in decreasing "
                           "order when enforce_sorted=True (or pass enforce_sorted=False)")
    if not enforce_sorted:  # as PyTorch: the permutation is kept even when it is the identity
        sorted_indices = tensor(order)
        unsorted_indices = tensor(np.argsort(order).tolist())
        input = F.index_select(input, 1, sorted_indices)
        lens = [lens[i] for i in order]
    batch_sizes = [sum(1 for n in lens if n > t) for t in range(lens[0])]
    data = F.cat([input[t, :bs] for t, bs in enumerate(batch_sizes)], 0)
    return PackedSequence(data, tensor(batch_sizes), sorted_indices, unsorted_indices)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False,
                        padding_value: float = 0.0, total_length: int | None = None):
    """Inverse of pack_padded_sequence: (padded, lengths) in the caller's batch order."""
    data, batch_sizes = sequence.data, _lengths_list(sequence.batch_sizes)
    batch = batch_sizes[0]
    steps, start = [], 0
    for bs in batch_sizes:
        step = data[start:start + bs]
        if bs < batch:
            filler = full((batch - bs,) + tuple(data.shape[1:]), padding_value, dtype=data.dtype)
            step = F.cat([step, filler], 0)
        steps.append(step)
        start += bs
    if total_length is not None and total_length > len(steps):
        filler = full((batch,) + tuple(data.shape[1:]), padding_value, dtype=data.dtype)
        steps += [filler] * (total_length - len(steps))
    out = F.stack(steps, 0)
    lengths = [sum(1 for bs in batch_sizes if bs > b) for b in range(batch)]
    lengths_t = tensor(lengths)
    if sequence.unsorted_indices is not None:
        out = F.index_select(out, 1, sequence.unsorted_indices)
        lengths_t = lengths_t[sequence.unsorted_indices]
    if batch_first:
        out = F.transpose(out, 0, 1)
    return out, lengths_t
