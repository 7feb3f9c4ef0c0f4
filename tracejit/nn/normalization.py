"""Group, instance, RMS and local response normalisation, as compositions of tensor ops,
with their modules (PyTorch's parameter and buffer names). Read through
`tj.nn.functional` and `tj.nn`."""
from __future__ import annotations

import math

import numpy as np

from ..core import dtypes as dt
from ..tensor.composite import composite
from ..tensor import functional as F
from .functional import _mixed_params
from .module import Module
from .parameter import Parameter
from ..tensor.creation import ones, tensor, zeros

__all__ = ["group_norm", "instance_norm", "rms_norm", "local_response_norm"]


def _channel_shape(input) -> tuple:
    """The shape that broadcasts a per-channel vector along dim 1 of `input`."""
    return (1, input.shape[1]) + (1,) * (input.ndim - 2)


def _affine(out, weight, bias):
    if weight is not None:
        out = out * F.reshape(weight, _channel_shape(out))
    if bias is not None:
        out = out + F.reshape(bias, _channel_shape(out))
    return out


@composite("NativeGroupNormBackward0", "input", "weight", "bias")
def group_norm(input, num_groups: int, weight=None, bias=None, eps: float = 1e-5):
    """Normalise each sample's channels in `num_groups` groups (over each group's channels
    and positions, biased variance), then scale and shift each channel.

    >>> F.group_norm(x, 4, weight, bias)   # x: [N, C, *], C divisible by 4
    """
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{input.ndim}")
    n, c = input.shape[0], input.shape[1]
    if c % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {list(input.shape)} and "
                           f"num_groups={num_groups}")
    if math.prod(input.shape[2:]) * n * c // num_groups == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input "
                         f"size {[n * c // num_groups, num_groups] + list(input.shape[2:])}")
    low = _mixed_params("group_norm", input, weight, bias)
    if low is not None:
        return F.cast(group_norm(F.cast(input, dt.float32), num_groups, weight, bias, eps), low)
    groups = F.reshape(input, (n, num_groups, c // num_groups * math.prod(input.shape[2:])))
    mu = F.mean(groups, 2, keepdim=True)
    centered = groups - mu
    var = F.mean(centered * centered, 2, keepdim=True)
    out = F.reshape(centered * F.rsqrt(var + eps), tuple(input.shape))
    return _affine(out, weight, bias)


@composite(None, "input", "weight", "bias")
def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats: bool = True, momentum: float = 0.1, eps: float = 1e-5):
    """Normalise each sample's channels over their positions (biased variance), then scale
    and shift each channel. With `use_input_stats`, the running statistics (when given)
    move toward the batch's average of the instances' (the variance unbiased); without,
    they normalise instead.

    >>> F.instance_norm(x)   # x: [N, C, *]
    """
    if input.ndim < 3:
        raise ValueError(f"instance_norm: expected an input [N, C, *] of 3 or more "
                         f"dimensions, got {list(input.shape)}")
    dims = tuple(range(2, input.ndim))
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise RuntimeError("Expected running_mean and running_var to be defined when "
                               "use_input_stats is false")
        shape = _channel_shape(input)
        out = (input - F.reshape(running_mean, shape)) * F.rsqrt(
            F.reshape(running_var, shape) + eps)
        return _affine(out, weight, bias)
    count = math.prod(input.shape[2:])
    if count == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input "
                         f"size {list(input.shape)}")
    mu = F.mean(input, dims, keepdim=True)
    centered = input - mu
    squares = F.sum(centered * centered, dims, keepdim=True)
    out = centered * F.rsqrt(squares / count + eps)
    if running_mean is not None:
        running_mean.mul_(1 - momentum).add_(F.mean(F.flatten(mu.detach(), 1), 0) * momentum)
    if running_var is not None:
        unbiased = F.flatten(squares.detach(), 1) / (count - 1)
        running_var.mul_(1 - momentum).add_(F.mean(unbiased, 0) * momentum)
    return _affine(out, weight, bias)


def rms_norm(input, normalized_shape, weight=None, eps: float | None = None):
    """input / sqrt(mean(input²) + eps) over the trailing `normalized_shape` dims, times
    `weight`; eps defaults to the machine epsilon of the input's dtype.

    >>> F.rms_norm(x, (x.shape[-1],), weight)
    """
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    k = len(normalized_shape)
    if k == 0:
        raise RuntimeError(f"Expected normalized_shape to be at least 1-dimensional, i.e., "
                           f"containing at least one element, but got normalized_shape = "
                           f"{list(normalized_shape)}")
    if weight is not None and tuple(weight.shape) != tuple(normalized_shape):
        raise RuntimeError(f"Expected weight to be of same shape as normalized_shape, but got "
                           f"weight of shape {list(weight.shape)} and normalized_shape = "
                           f"{list(normalized_shape)}")
    if tuple(input.shape[input.ndim - k:]) != tuple(normalized_shape):
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input "
                           f"with shape [*, {', '.join(map(str, normalized_shape))}], but got "
                           f"input of size {list(input.shape)}")
    if eps is None:
        eps = float(np.finfo(input.dtype.np).eps)
    dims = tuple(range(input.ndim - k, input.ndim))
    out = input * F.rsqrt(F.mean(input * input, dims, keepdim=True) + eps)
    return out if weight is None else out * weight


def local_response_norm(input, size: int, alpha: float = 1e-4, beta: float = 0.75,
                        k: float = 1.0):
    """input / (k + alpha * mean of input² over `size` neighbouring channels)^beta, the
    window zero-padded at the ends (size // 2 channels before, (size - 1) // 2 after).

    >>> F.local_response_norm(x, 5)   # x: [N, C, *]
    """
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.ndim} "
                         f"dimensions)")
    if input.numel() == 0:
        return input
    c = input.shape[1]
    sq = input * input
    pad = [zeros(*(input.shape[0], p, *input.shape[2:]), dtype=input.dtype,
                 device=input.device) for p in (size // 2, (size - 1) // 2)]
    padded = F.cat([t for t in (pad[0], sq, pad[1]) if t.shape[1]], 1)
    window = padded[:, 0:c]
    for j in range(1, size):
        window = window + padded[:, j:j + c]
    if not input.is_floating_point():  # PyTorch's average pool of integers truncates
        return input / F.pow(F.floor_divide(window, size) * alpha + k, beta)
    return input / F.pow(window * (alpha / size) + k, beta)


# ---- modules ---------------------------------------------------------------------------

def _ones_zeros(n, dtype, bias: bool = True):
    return Parameter(ones(*n, dtype=dtype)), (Parameter(zeros(*n, dtype=dtype)) if bias
                                              else None)


class GroupNorm(Module):
    """Group normalisation over `num_groups` groups of `num_channels`; weight ones and
    bias zeros [num_channels] with `affine`."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, dtype=None):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels = num_groups, num_channels
        self.eps, self.affine = eps, affine
        weight, bias = _ones_zeros((num_channels,), dtype) if affine else (None, None)
        self.register_parameter("weight", weight)
        self.register_parameter("bias", bias)

    def forward(self, input):
        return group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class _InstanceNorm(Module):
    """Instance normalisation (PyTorch's InstanceNorm*d): no affine parameters and no
    running statistics unless asked for."""

    _batched: int = 3

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = False, track_running_stats: bool = False, dtype=None):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        weight, bias = _ones_zeros((num_features,), dtype) if affine else (None, None)
        self.register_parameter("weight", weight)
        self.register_parameter("bias", bias)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=dt.int64))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)

    def forward(self, input):
        if input.ndim not in (self._batched - 1, self._batched):
            raise ValueError(f"expected {self._batched - 1}D or {self._batched}D input (got "
                             f"{input.ndim}D input)")
        unbatched = input.ndim == self._batched - 1
        x = F.unsqueeze(input, 0) if unbatched else input
        if x.shape[1] != self.num_features and self.affine:
            raise ValueError(f"expected input's size at dim=1 to match num_features "
                             f"({self.num_features}), but got: {x.shape[1]}.")
        use_stats = self.training or not self.track_running_stats
        out = instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            use_stats, self.momentum if self.momentum is not None else 0.0,
                            self.eps)
        return F.squeeze(out, 0) if unbatched else out

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class InstanceNorm1d(_InstanceNorm):
    _batched = 3


class InstanceNorm2d(_InstanceNorm):
    _batched = 4


class InstanceNorm3d(_InstanceNorm):
    _batched = 5


class RMSNorm(Module):
    """RMS normalisation over the trailing `normalized_shape`; weight ones with
    `elementwise_affine`."""

    def __init__(self, normalized_shape, eps: float | None = None,
                 elementwise_affine: bool = True, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape, self.eps = tuple(normalized_shape), eps
        self.elementwise_affine = elementwise_affine
        weight = _ones_zeros(self.normalized_shape, dtype, bias=False)[0] \
            if elementwise_affine else None
        self.register_parameter("weight", weight)

    def forward(self, input):
        return rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, " \
               f"elementwise_affine={self.elementwise_affine}"


class LocalResponseNorm(Module):
    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


MODULES = ["GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "RMSNorm",
           "LocalResponseNorm"]
