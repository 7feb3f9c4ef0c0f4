"""`tj.nn.functional`: activations and losses as compositions of tensor ops."""
from __future__ import annotations

import math

from ..tensor import functional as F
from ..tensor.functional import log_softmax, relu, sigmoid, softmax, tanh

__all__ = ["relu", "tanh", "sigmoid", "softmax", "log_softmax", "gelu", "linear", "mse_loss",
           "cross_entropy", "nll_loss"]


def gelu(input, approximate: str = "none"):
    """x * Phi(x); `approximate='tanh'` uses the tanh form."""
    if approximate == "tanh":
        inner = (input + input * input * input * 0.044715) * math.sqrt(2.0 / math.pi)
        return input * 0.5 * (F.tanh(inner) + 1.0)
    return input * 0.5 * (F.erf(input * (1.0 / math.sqrt(2.0))) + 1.0)


def linear(input, weight, bias=None):
    """input @ weight.T + bias (weight is [out_features, in_features])."""
    out = F.matmul(input, F.t(weight))
    return out if bias is None else out + bias


def _reduce(loss, reduction: str):
    if reduction == "mean":
        return F.mean(loss)
    if reduction == "sum":
        return F.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


def mse_loss(input, target, reduction: str = "mean"):
    if tuple(input.shape) != tuple(target.shape):
        raise ValueError(f"mse_loss: input shape {list(input.shape)} and target shape "
                         f"{list(target.shape)} differ; they must match")
    d = input - target
    return _reduce(d * d, reduction)


def nll_loss(input, target, weight=None, ignore_index: int = -100, reduction: str = "mean"):
    """Negative log-likelihood of class indices `target` under log-probabilities `input`.

    input is [N, C] (or [C]); target holds class indices in [0, C).
    """
    if input.ndim == 1:
        input, target = F.unsqueeze(input, 0), F.unsqueeze(target, 0)
    if input.ndim > 2:  # [N, C, d1, ...] -> [N*d1*..., C]
        c = input.shape[1]
        input = F.reshape(F.transpose(F.flatten(input, 2), 1, 2), -1, c)
        target = F.reshape(target, -1)
    if target.dtype.category != 1:
        raise RuntimeError(f"nll_loss: expected target of integer class indices, got "
                           f"{target.dtype.name}")
    n, c = input.shape
    valid = target != ignore_index
    safe = F.where(valid, target, 0)
    if bool(F.any((safe < 0) | (safe >= c))):
        raise IndexError(f"nll_loss: target {safe._data.tolist()} out of bounds for {c} classes")
    picked = -F.squeeze(F.gather(input, F.unsqueeze(safe, 1), 1), 1)
    w = F.cast(valid, input.dtype)
    if weight is not None:
        w = w * weight[safe]
    loss = picked * w
    if reduction == "mean":
        return F.sum(loss) / F.sum(w)
    return _reduce(loss, reduction)


def cross_entropy(input, target, weight=None, ignore_index: int = -100,
                  reduction: str = "mean", label_smoothing: float = 0.0):
    """log_softmax + nll_loss for class indices; for class probabilities when target is float."""
    logp = log_softmax(input, 1 if input.ndim > 1 else 0)
    if target.is_floating_point():
        loss = -F.sum(logp * target, 1 if input.ndim > 1 else 0)
        return _reduce(loss, reduction)
    loss = nll_loss(logp, target, weight, ignore_index, reduction)
    if label_smoothing:
        smooth = -F.mean(logp, 1 if input.ndim > 1 else 0)
        loss = loss * (1 - label_smoothing) + _reduce(smooth, reduction) * label_smoothing
    return loss
