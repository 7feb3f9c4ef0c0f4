"""Losses and distances beyond the cross-entropy family, each a composition of tensor ops
(so autograd and tracing need no rules), with its module beside it. Read through
`tj.nn.functional` and `tj.nn`."""
from __future__ import annotations

import math
import warnings

from ..tensor.composite import composite
from ..tensor import functional as F
from .functional import _reduce, legacy_reduction
from .module import Module
from ..ops.rules import broadcast_shapes
from ..tensor.creation import arange, ones_like

__all__ = ["l1_loss", "huber_loss", "kl_div", "margin_ranking_loss", "hinge_embedding_loss",
           "soft_margin_loss", "multilabel_soft_margin_loss", "cosine_embedding_loss",
           "triplet_margin_loss", "poisson_nll_loss", "gaussian_nll_loss", "multi_margin_loss",
           "pairwise_distance", "cosine_similarity"]


def _check_reduction(reduction: str) -> None:
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _same_shape(name: str, input, target) -> None:
    if tuple(input.shape) != tuple(target.shape):
        raise ValueError(f"{name}: target size {list(target.shape)} must be the same as "
                         f"input size {list(input.shape)}")


def _broadcast(name: str, *tensors) -> None:
    """Raise RuntimeError, as PyTorch's losses do, when the shapes do not broadcast."""
    try:
        broadcast_shapes(name, *(tuple(t.shape) for t in tensors if hasattr(t, "shape")))
    except ValueError as err:
        raise RuntimeError(str(err)) from None


def _softplus(x):
    """log(1 + exp(x)), without overflow."""
    return F.log1p(F.exp(-F.abs(x))) + F.relu(x)


def _weighted(loss, weight):
    return loss if weight is None else loss * weight


@composite("L1LossBackward0", "input", "target", autocast="fp32")
def l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean",
            weight=None):
    """|input - target|, reduced.

    >>> F.l1_loss(pred, y)
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    _broadcast("l1_loss", input, target)
    return _reduce(_weighted(F.abs(input - target), weight), reduction)


@composite("HuberLossBackward0", "input", "target", autocast="fp32")
def huber_loss(input, target, reduction: str = "mean", delta: float = 1.0, weight=None):
    """0.5 d² where |d| < delta, else delta (|d| - 0.5 delta), for d = input - target.

    >>> F.huber_loss(pred, y, delta=0.5)
    """
    if delta <= 0:
        raise RuntimeError(f"huber_loss does not support non-positive values for delta, "
                           f"got {delta}")
    _broadcast("huber_loss", input, target)
    z = F.abs(input - target)
    loss = F.where(z < delta, 0.5 * z * z, delta * (z - 0.5 * delta))
    return _reduce(_weighted(loss, weight), reduction)


def _xlogx(t):
    """t log t, 0 where t is 0 (and a finite gradient there)."""
    zero = t == 0
    return F.where(zero, 0.0, t * F.log(F.where(zero, 1.0, t)))


@composite(None, "input", "target", autocast="fp32")
def kl_div(input, target, size_average=None, reduce=None, reduction: str = "mean",
           log_target: bool = False):
    """KL(target || exp(input)) per element: target (log target - input), input holding
    log-probabilities (and target too with `log_target`). reduction='batchmean' divides
    the sum by the batch size, the mathematically right mean.

    >>> F.kl_div(F.log_softmax(logits, 1), probs, reduction="batchmean")
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    if log_target:
        loss = F.exp(target) * (target - input)
    else:
        loss = _xlogx(target) - target * input
    if reduction == "batchmean":
        return F.sum(loss) / (input.shape[0] if input.ndim else 1)
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and "
                      "the support size.'batchmean' divides only by the batch size, and "
                      "aligns with the KL div math definition.'mean' will be changed to "
                      "behave the same as 'batchmean' in the next major release.",
                      UserWarning, stacklevel=3)
    return _reduce(loss, reduction)


@composite(None, "input1", "input2", "target", autocast="fp32")
def margin_ranking_loss(input1, input2, target, margin: float = 0.0, size_average=None,
                        reduce=None, reduction: str = "mean"):
    """max(0, -target (input1 - input2) + margin), target being 1 or -1."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if not input1.ndim == input2.ndim == target.ndim:
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same "
                           f"dimension but got sizes: input1: {list(input1.shape)}, input2: "
                           f"{list(input2.shape)}, target: {list(target.shape)} ")
    return _reduce(F.relu(-target * (input1 - input2) + margin), reduction)


@composite(None, "input", autocast="fp32")
def hinge_embedding_loss(input, target, margin: float = 1.0, size_average=None, reduce=None,
                         reduction: str = "mean"):
    """input where target is 1, max(0, margin - input) where it is -1."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    hinge = F.where(target != 1, F.relu(margin - input), 0.0)
    return _reduce(hinge + F.where(target != -1, input, 0.0), reduction)


@composite("SoftMarginLossBackward0", "input", "target", autocast="fp32")
def soft_margin_loss(input, target, size_average=None, reduce=None, reduction: str = "mean"):
    """log(1 + exp(-target input)), target being 1 or -1."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _broadcast("soft_margin_loss", input, target)
    return _reduce(_softplus(-target * input), reduction)


@composite(None, "input", "target", autocast="fp32")
def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction: str = "mean"):
    """The binary cross-entropy of sigmoid(input) against 0/1 targets, averaged over the
    classes (the last dim), then reduced over the samples."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    loss = target * _softplus(-input) + (1 - target) * _softplus(input)
    loss = _weighted(loss, weight)
    c = input.shape[-1] if input.ndim else 1
    return _reduce(F.sum(loss, input.ndim - 1) / c if input.ndim else loss, reduction)


@composite(None, "input1", "input2", autocast="fp32")
def cosine_embedding_loss(input1, input2, target, margin: float = 0.0, size_average=None,
                          reduce=None, reduction: str = "mean"):
    """1 - cos(input1, input2) where target is 1, max(0, cos - margin) where it is -1 (the
    cosine along the last dim)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if input1.ndim not in (1, 2) or tuple(input1.shape) != tuple(input2.shape):
        raise RuntimeError(f"cosine_embedding_loss: expected 1-D or 2-D inputs of one shape, "
                           f"got {list(input1.shape)} and {list(input2.shape)}")
    if target.ndim != input1.ndim - 1:
        raise RuntimeError(f"{input1.ndim}D target tensor expected, multi-target not "
                           f"supported" if input1.ndim == 2 else
                           "0D target tensor expects 1D input tensors, but found inputs with "
                           f"sizes {list(input1.shape)} and {list(input2.shape)}.")
    eps = 1e-12
    dim = target.ndim
    prod = F.sum(input1 * input2, dim)
    mag = (F.sum(input1 * input1, dim) + eps) * (F.sum(input2 * input2, dim) + eps)
    cos = prod / F.sqrt(mag)
    loss = F.where(target == 1, 1 - cos, 0.0) + F.where(target == -1, F.relu(cos - margin),
                                                          0.0)
    return _reduce(loss, reduction)


def pairwise_distance(x1, x2, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
    """The p-norm of x1 - x2 + eps along the last dim.

    >>> F.pairwise_distance(a, b)   # [N] distances of rows
    """
    d = x1 - x2 + eps
    if d.ndim == 0:
        return F.abs(d)
    return F.norm(d, p, d.ndim - 1, keepdim)


@composite(None, "anchor", "positive", "negative", autocast="fp32")
def triplet_margin_loss(anchor, positive, negative, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-6, swap: bool = False, size_average=None, reduce=None,
                        reduction: str = "mean"):
    """max(0, margin + d(anchor, positive) - d(anchor, negative)), d the pairwise
    p-distance; `swap` takes the nearer of the negative to the anchor and the positive."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have "
                           f"the same number of dimensions, but got: anchor {anchor.ndim}D, "
                           f"positive {positive.ndim}D, and negative {negative.ndim}D inputs")
    if margin <= 0:
        raise ValueError(f"triplet_margin_loss: expected margin to be greater than 0, got "
                         f"{margin} instead")
    _broadcast("triplet_margin_loss", anchor, positive, negative)
    pos = pairwise_distance(anchor, positive, p, eps)
    neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        neg = F.minimum(neg, pairwise_distance(positive, negative, p, eps))
    return _reduce(F.relu(margin + pos - neg), reduction)


@composite(None, "input", "target", autocast="fp32")
def poisson_nll_loss(input, target, log_input: bool = True, full: bool = False,
                     size_average=None, eps: float = 1e-8, reduce=None,
                     reduction: str = "mean"):
    """The negative log-likelihood of `target` under Poisson(rate): exp(input) - target
    input for a log rate (`log_input`), else input - target log(input + eps); `full` adds
    Stirling's approximation of log(target!) where target > 1."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _broadcast("poisson_nll_loss", input, target)
    if log_input:
        loss = F.exp(input) - target * input
    else:
        loss = input - target * F.log(input + eps)
    if full:
        big = target > 1
        t = F.where(big, target, 2.0)
        stirling = t * F.log(t) - t + 0.5 * F.log(2 * math.pi * t)
        loss = loss + F.where(big, stirling, 0.0)
    return _reduce(loss, reduction)


@composite(None, "input", "target", "var", autocast="fp32")
def gaussian_nll_loss(input, target, var, full: bool = False, eps: float = 1e-6,
                      reduction: str = "mean"):
    """0.5 (log var + (input - target)² / var) (+ 0.5 log 2π with `full`): the negative
    log-likelihood of target under N(input, var). `var` has the input's shape, or lacks
    its last dim, or has 1 there (one variance per sample); it is clamped at `eps` with
    the gradient of the unclamped value, as PyTorch does.

    >>> F.gaussian_nll_loss(mean, y, var)
    """
    if not hasattr(var, "shape"):  # one variance for every element
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = var * ones_like(input)
    elif bool(F.any(var < 0)):
        raise ValueError("var has negative entry/entries")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = F.unsqueeze(var, -1)
        elif input.ndim != var.ndim or sum(v for i, v in zip(input.shape, var.shape)
                                           if i != v) != 1:  # not one dim of size 1
            raise ValueError(f"var is of incorrect size: input {list(input.shape)}, var "
                             f"{list(var.shape)}")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(reduction + " is not valid")
    _broadcast("gaussian_nll_loss", input, target, var)
    var = var + (F.clamp(var.detach(), min=eps) - var.detach())
    loss = 0.5 * (F.log(var) + (input - target) * (input - target) / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


@composite("MultiMarginLossBackward0", "input", autocast="fp32")
def multi_margin_loss(input, target, p: int = 1, margin: float = 1.0, weight=None,
                      size_average=None, reduce=None, reduction: str = "mean"):
    """The multi-class hinge loss: for each sample, the sum over the classes i other than
    its target y of max(0, margin - input[y] + input[i])^p (times weight[y]), over C."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.ndim != 1:
        raise ValueError("weight must be one-dimensional")
    if input.ndim > 2 or target.ndim > 1:
        raise RuntimeError(f"multi_margin_loss: expected a 0-D, 1-D or 2-D input and a 0-D "
                           f"or 1-D target, got {list(input.shape)} and {list(target.shape)}")
    shape = tuple(target.shape)
    x = F.reshape(input, (-1, input.shape[-1] if input.ndim else 1))
    y = F.reshape(target, (-1,))
    c = x.shape[1]
    if bool(F.any((y < 0) | (y >= c))):
        raise RuntimeError(f"multi_margin_loss: target out of range for {c} classes")
    picked = F.gather(x, 1, F.unsqueeze(y, 1))
    z = F.relu(margin - picked + x)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * F.unsqueeze(weight[y], 1)
    z = F.where(F.unsqueeze(y, 1) == arange(c, device=input.device), 0.0, z)
    loss = F.sum(z, 1) / c
    return _reduce(F.reshape(loss, shape) if reduction == "none" else loss, reduction)


def cosine_similarity(x1, x2, dim: int = 1, eps: float = 1e-8):
    """The cosine of the angle between x1 and x2 along `dim` (broadcast): each divided by
    its norm clamped at `eps` (the clamp outside the gradient, as PyTorch's).

    >>> F.cosine_similarity(a, b, dim=-1)
    """
    shape = broadcast_shapes("cosine_similarity", tuple(x1.shape), tuple(x2.shape))
    x1, x2 = F.broadcast_to(x1, shape), F.broadcast_to(x2, shape)
    n1 = F.norm(x1, 2, dim, keepdim=True)
    n2 = F.norm(x2, 2, dim, keepdim=True)
    n1 = n1 + (F.clamp(n1.detach(), min=eps) - n1.detach())
    n2 = n2 + (F.clamp(n2.detach(), min=eps) - n2.detach())
    return F.sum((x1 / n1) * (x2 / n2), dim)


# ---- modules ---------------------------------------------------------------------------

class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__()
        self.reduction = legacy_reduction(size_average, reduce, reduction)


class _WeightedLoss(_Loss):
    """A loss with a per-class `weight`, kept as a buffer (it follows `.to()`)."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class L1Loss(_Loss):
    def forward(self, input, target):
        return l1_loss(input, target, reduction=self.reduction)


class HuberLoss(_Loss):
    def __init__(self, reduction: str = "mean", delta: float = 1.0):
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input, target):
        return huber_loss(input, target, self.reduction, self.delta)


class KLDivLoss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction: str = "mean",
                 log_target: bool = False):
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input, target):
        return kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class MarginRankingLoss(_Loss):
    def __init__(self, margin: float = 0.0, size_average=None, reduce=None,
                 reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return margin_ranking_loss(input1, input2, target, self.margin,
                                   reduction=self.reduction)


class HingeEmbeddingLoss(_Loss):
    def __init__(self, margin: float = 1.0, size_average=None, reduce=None,
                 reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input, target):
        return hinge_embedding_loss(input, target, self.margin, reduction=self.reduction)


class SoftMarginLoss(_Loss):
    def forward(self, input, target):
        return soft_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    def forward(self, input, target):
        return multilabel_soft_margin_loss(input, target, self.weight,
                                           reduction=self.reduction)


class CosineEmbeddingLoss(_Loss):
    def __init__(self, margin: float = 0.0, size_average=None, reduce=None,
                 reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return cosine_embedding_loss(input1, input2, target, self.margin,
                                     reduction=self.reduction)


class TripletMarginLoss(_Loss):
    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6,
                 swap: bool = False, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got "
                             f"{margin} instead")
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor, positive, negative):
        return triplet_margin_loss(anchor, positive, negative, self.margin, self.p, self.eps,
                                   self.swap, reduction=self.reduction)


class PoissonNLLLoss(_Loss):
    def __init__(self, log_input: bool = True, full: bool = False, size_average=None,
                 eps: float = 1e-8, reduce=None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input, target):
        return poisson_nll_loss(log_input, target, self.log_input, self.full, eps=self.eps,
                                reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean"):
        super().__init__(reduction=reduction)
        self.full, self.eps = full, eps

    def forward(self, input, target, var):
        return gaussian_nll_loss(input, target, var, self.full, self.eps, self.reduction)


class MultiMarginLoss(_WeightedLoss):
    def __init__(self, p: int = 1, margin: float = 1.0, weight=None, size_average=None,
                 reduce=None, reduction: str = "mean"):
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        self.p, self.margin = p, margin

    def forward(self, input, target):
        return multi_margin_loss(input, target, self.p, self.margin, self.weight,
                                 reduction=self.reduction)


class CosineSimilarity(Module):
    def __init__(self, dim: int = 1, eps: float = 1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


MODULES = ["L1Loss", "HuberLoss", "KLDivLoss", "MarginRankingLoss", "HingeEmbeddingLoss",
           "SoftMarginLoss", "MultiLabelSoftMarginLoss", "CosineEmbeddingLoss",
           "TripletMarginLoss", "PoissonNLLLoss", "GaussianNLLLoss", "MultiMarginLoss",
           "CosineSimilarity", "PairwiseDistance"]
