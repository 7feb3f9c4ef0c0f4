"""Bags of embeddings (PyTorch's F.embedding_bag and nn.EmbeddingBag): each bag's rows
summed, averaged or maxed, as tensor ops over a bag-by-position mask (so autograd and
tracing need no rules)."""
from __future__ import annotations

import math

from ..tensor import functional as F
from ..tensor.creation import arange, empty, tensor
from . import init
from .module import Module
from .parameter import Parameter

__all__ = ["embedding_bag"]


def _bags(input, offsets, include_last_offset: bool):
    """(the indices as one row, the [bags, positions] bool mask of each bag's positions)."""
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated "
                             "is a mini-batch of fixed length sequences. However, found "
                             f"offsets of type {type(offsets).__name__}")
        b, length = input.shape
        flat = F.reshape(input, (-1,))
        starts = arange(b, device=input.device) * length
        ends = starts + length
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor")
        flat, n = input, input.shape[0]
        if include_last_offset:
            starts, ends = offsets[:-1], offsets[1:]
        else:
            starts = offsets
            ends = F.cat([offsets[1:], tensor([n], dtype=offsets.dtype,
                                              device=offsets.device)])
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.ndim}")
    positions = F.unsqueeze(arange(flat.shape[0], device=input.device), 0)
    mask = (positions >= F.unsqueeze(starts, 1)) & (positions < F.unsqueeze(ends, 1))
    return flat, mask


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type: float = 2,
                  scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights=None, include_last_offset: bool = False,
                  padding_idx=None):
    """The sum, mean or max of each bag's rows of `weight`: a bag is a row of a 2-D
    `input`, or for a 1-D input the indices from one offset to the next. An empty bag
    gives zeros; indices equal to `padding_idx` are left out (of the mean's count too);
    `per_sample_weights` (mode 'sum' only) scales each index's row.

    >>> F.embedding_bag(tj.tensor([1, 2, 4, 5]), weight, tj.tensor([0, 2]))   # 2 bags
    """
    if max_norm is not None or scale_grad_by_freq:
        raise NotImplementedError("embedding_bag: max_norm and scale_grad_by_freq are not "
                                  "supported")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max, but got {mode}")
    if input.dtype.category != 1:
        raise RuntimeError(f"embedding_bag: expected integer indices, got {input.dtype.name}")
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. "
                                      f"per_sample_weights is only supported for mode='sum' "
                                      f"(got mode='{mode}'). Please open a feature request "
                                      f"on GitHub.")
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ValueError(f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}"
                             f") is not None, then it must have the same shape as the input "
                             f"({input.shape})")
    flat, mask = _bags(input, offsets, include_last_offset)
    if padding_idx is not None:
        if padding_idx < 0:
            padding_idx += weight.shape[0]
        mask = mask & F.unsqueeze(flat != padding_idx, 0)
    rows = weight[flat]  # [positions, D]
    if mode == "max":
        picked = F.where(F.unsqueeze(mask, 2), F.unsqueeze(rows, 0), -math.inf)
        best = F.amax(picked, 1)
        return F.where(F.unsqueeze(F.any(mask, 1), 1), best, 0.0)
    m = F.cast(mask, weight.dtype)
    if per_sample_weights is not None:
        m = m * F.unsqueeze(F.reshape(per_sample_weights, (-1,)), 0)
    out = F.matmul(m, rows)
    if mode == "mean":
        count = F.sum(F.cast(mask, weight.dtype), 1, keepdim=True)
        out = out / F.clamp(count, min=1.0)
    return out


class EmbeddingBag(Module):
    """Bags of embeddings: weight [num_embeddings, embedding_dim] ~ N(0, 1) (the
    `padding_idx` row zero)."""

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm=None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
                 sparse: bool = False, _weight=None, include_last_offset: bool = False,
                 padding_idx: int | None = None, dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.mode, self.sparse = scale_grad_by_freq, mode, sparse
        self.include_last_offset = include_last_offset
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        if _weight is None:
            self.weight = Parameter(empty(num_embeddings, embedding_dim, dtype=dtype))
            init.normal_(self.weight)
            if padding_idx is not None:
                self.weight._data[padding_idx] = 0
        else:
            self.weight = Parameter(_weight)

    def forward(self, input, offsets=None, per_sample_weights=None):
        return embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                             self.scale_grad_by_freq, self.mode, self.sparse,
                             per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, mode='{self.mode}'"
