"""`tj.nn.functional`: activations and losses as compositions of tensor ops."""
from __future__ import annotations

import math
import warnings

import numpy as np

from ..core import dtypes as dt
from ..tensor.composite import composite
from ..core.modes import is_grad_enabled
from ..tensor import functional as F
from ..ops.windows import out_sizes
from ..tensor.creation import arange, full, full_like, ones, rand, tensor, zeros
from ..tensor.functional import log_softmax, sigmoid, softmax, tanh

__all__ = ["relu", "tanh", "sigmoid", "softmax", "log_softmax", "gelu", "leaky_relu", "silu",
           "linear", "mse_loss", "cross_entropy", "nll_loss", "binary_cross_entropy",
           "smooth_l1_loss", "dropout", "dropout2d", "layer_norm", "embedding", "one_hot",
           "normalize", "binary_cross_entropy_with_logits", "pad", "pixel_shuffle",
           "pixel_unshuffle", "batch_norm", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
           "conv_transpose2d", "conv_transpose3d", "unfold", "fold", "max_pool1d",
           "max_pool2d", "max_pool3d", "max_unpool2d", "avg_pool1d", "avg_pool2d",
           "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool2d",
           "interpolate", "upsample", "upsample_nearest", "upsample_bilinear",
           "scaled_dot_product_attention", "multi_head_attention_forward"]


def relu(input, inplace: bool = False):
    """max(input, 0); `inplace` writes it into `input`."""
    return input.relu_() if inplace else F.relu(input)


def leaky_relu(input, negative_slope: float = 0.01, inplace: bool = False):
    """input where it is > 0, else input * negative_slope; `inplace` writes it into
    `input` (its gradient then still reads the input as it was, for any slope)."""
    if inplace:
        return F.leaky_relu_(input, negative_slope)
    return F.leaky_relu(input, negative_slope)


@composite("SiluBackward0", "input")
def _silu(input):
    return input * sigmoid(input)


def silu(input, inplace: bool = False):
    """x * sigmoid(x) (swish); `inplace` writes it into `input`."""
    F.require_floating("silu", input)
    if inplace:  # computed from a copy, whose value the product's gradient reads
        return F.copy_(input, _silu(F.clone(input) if input.requires_grad else input))
    return _silu(input)


@composite("GeluBackward0", "input")
def gelu(input, approximate: str = "none"):
    """x * Phi(x); `approximate='tanh'` uses the tanh form."""
    if approximate == "tanh":
        inner = (input + input * input * input * 0.044715) * math.sqrt(2.0 / math.pi)
        return input * 0.5 * (F.tanh(inner) + 1.0)
    return input * 0.5 * (F.erf(input * (1.0 / math.sqrt(2.0))) + 1.0)


@composite(None, "input", "weight", "bias", autocast="low")
def linear(input, weight, bias=None):
    """input @ weight.T + bias (weight is [out_features, in_features]). As in PyTorch's
    graph, a 2-D input with a bias gives AddmmBackward0 (TBackward0 on the weight),
    without one MmBackward0."""
    wt = F.t(weight)
    if bias is not None and input.ndim == 2:
        return F.addmm(bias, input, wt)
    out = F.matmul(input, wt)
    return out if bias is None else out + bias


def legacy_reduction(size_average, reduce, reduction: str) -> str:
    """PyTorch's deprecated `size_average`/`reduce` pair as a `reduction`."""
    if size_average is None and reduce is None:
        return reduction
    warnings.warn("size_average and reduce args will be deprecated, please use reduction="
                  "'mean', 'sum' or 'none' instead.", UserWarning, stacklevel=3)
    if reduce is False:
        return "none"
    return "sum" if size_average is False else "mean"


def _reduce(loss, reduction: str):
    if reduction == "mean":
        return F.mean(loss)
    if reduction == "sum":
        return F.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


@composite("MseLossBackward0", "input", "target", autocast="fp32")
def mse_loss(input, target, size_average=None, reduce=None, reduction: str = "mean",
             weight=None):
    """(input - target)², reduced; `weight` scales each element's term."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if tuple(input.shape) != tuple(target.shape):
        raise ValueError(f"mse_loss: input shape {list(input.shape)} and target shape "
                         f"{list(target.shape)} differ; they must match")
    d = input - target
    return _reduce(d * d if weight is None else d * d * weight, reduction)


@composite("NllLossBackward0", "input", autocast="fp32")
def nll_loss(input, target, weight=None, size_average=None, ignore_index: int = -100,
             reduce=None, reduction: str = "mean"):
    """Negative log-likelihood of class indices `target` under log-probabilities `input`.

    input is [N, C] (or [C], or [N, C, d1, ...]); target holds class indices in [0, C).
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    shape = target.shape  # (reduction="none" gives a loss of the target's shape)
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
    picked, w = _picked_weights(input, target, weight, ignore_index)
    loss = -picked * w
    if reduction == "mean":
        return F.sum(loss) / F.sum(w)
    if reduction == "none":
        return F.reshape(loss, shape)
    return _reduce(loss, reduction)


def _picked_weights(input, target, weight, ignore_index):
    """input[k, target[k]] along dim 1 of a 2-D input, and each target's weight (0 where
    it is ignore_index, weight[target] or 1 elsewhere)."""
    c = input.shape[1]
    valid = target != ignore_index
    safe = F.where(valid, target, 0)
    if bool(F.any((safe < 0) | (safe >= c))):
        raise IndexError(f"nll_loss: target {safe._data.tolist()} out of bounds for {c} classes")
    picked = F.squeeze(F.gather(input, 1, F.unsqueeze(safe, 1)), 1)
    w = F.cast(valid, input.dtype)
    if weight is not None:
        w = w * weight[safe]
    return picked, w


def _class_shape(input, class_dim: int, c) -> tuple:
    """The shape that broadcasts a per-class vector along `class_dim` of `input`."""
    return tuple(c if d == class_dim else 1 for d in range(input.ndim))


@composite(None, "input", autocast="fp32")
def cross_entropy(input, target, weight=None, size_average=None, ignore_index: int = -100,
                  reduce=None, reduction: str = "mean", label_smoothing: float = 0.0):
    """log_softmax + nll_loss for class indices; for class probabilities when the target
    is floating (of the input's shape). `label_smoothing` mixes each target with the
    uniform distribution over the C classes, as PyTorch does.

    >>> F.cross_entropy(logits, labels, label_smoothing=0.1)
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    if label_smoothing > 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: "
                           f"{label_smoothing}")
    class_dim = 1 if input.ndim > 1 else 0
    c = input.shape[class_dim]
    logp = log_softmax(input, class_dim)
    w = None if weight is None else F.reshape(weight, _class_shape(input, class_dim, c))
    if target.is_floating_point():
        if tuple(target.shape) != tuple(input.shape):
            raise RuntimeError(f"cross_entropy: a target of class probabilities must have "
                               f"the input's shape {list(input.shape)}, got "
                               f"{list(target.shape)}")
        if label_smoothing > 0:
            target = target * (1 - label_smoothing) + label_smoothing / c
        terms = logp * target if w is None else logp * target * w
        if reduction == "mean":  # over the samples (and positions), not the weights
            return -F.sum(terms) / (input.numel() // c)
        return -_reduce(F.sum(terms, class_dim), reduction)
    loss = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if label_smoothing <= 0:
        return loss
    ignored = target == ignore_index
    smooth = F.where(ignored, 0.0, -F.sum(logp if w is None else logp * w, class_dim))
    if reduction == "mean":
        if weight is None:
            denominator = F.sum(F.logical_not(ignored))
        else:
            denominator = F.sum(F.where(ignored, 0.0, weight[F.where(ignored, 0, target)]))
        smooth = F.sum(smooth) / denominator
    else:
        smooth = _reduce(smooth, reduction)
    return loss * (1 - label_smoothing) + smooth * (label_smoothing / c)


@composite("BinaryCrossEntropyBackward0", "input", "target", autocast="fp32")
def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction: str = "mean"):
    """-weight * (t log(x) + (1 - t) log(1 - x)) of probabilities x in [0, 1] and targets
    t, each log clamped at -100 as PyTorch's is (a prediction of exactly 0 or 1 costs
    100, and its gradient stays finite). `weight` broadcasts to the input.

    >>> F.binary_cross_entropy(F.sigmoid(logits), labels)
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({list(target.shape)}) that is different to the "
                         f"input size ({list(input.shape)}) is deprecated. Please ensure they "
                         f"have the same size.")
    if target.dtype is not input.dtype:
        raise RuntimeError(f"Found dtype {target.dtype.name} but expected {input.dtype.name}")
    if weight is not None and weight.requires_grad and is_grad_enabled():
        raise RuntimeError("The function 'binary_cross_entropy' is not differentiable with "
                           "respect to argument 'weight'. This input cannot have "
                           "requires_grad True.")
    if bool(F.any(F.logical_not((input >= 0) & (input <= 1)))):  # NaN is out of range too
        raise RuntimeError("all elements of input should be between 0 and 1")
    loss = F.binary_cross_entropy(input, target)
    return _reduce(loss if weight is None else loss * weight, reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean",
                   beta: float = 1.0):
    """0.5 d² / beta where |d| < beta, else |d| - 0.5 beta, for d = input - target (the
    Huber loss divided by beta); beta = 0 is the L1 loss."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"Using a target size ({list(target.shape)}) that is different to the "
                      f"input size ({list(input.shape)}). This will likely lead to incorrect "
                      f"results due to broadcasting. Please ensure they have the same size.",
                      UserWarning, stacklevel=2)
    F.require_floating("smooth_l1_loss", input)
    if beta == 0.0:  # as PyTorch: the L1 loss (no division by beta, even in a branch not taken)
        return _reduce(F.abs(input - target), reduction)
    return _smooth_l1(input, target, reduction, beta)


@composite("SmoothL1LossBackward0", "input", "target", autocast="fp32")
def _smooth_l1(input, target, reduction, beta):
    z = F.abs(input - target)
    return _reduce(F.where(z < beta, 0.5 * z * z / beta, z - 0.5 * beta), reduction)


def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero each element with probability p and scale the rest by 1/(1-p) (training only).

    The mask is drawn from tracejit's generator (`tj.manual_seed`), and tracing records
    the draw, so a traced dropout stays random."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    keep = rand(*input.shape, dtype=input.dtype) >= p
    return input * keep * (1.0 / (1.0 - p))


def dropout2d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero whole channels (each input[n, c]) with probability p and scale the rest by
    1/(1-p), while training. A 3-D input is read as [N, C, L], as PyTorch reads it."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if input.ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is "
                      "deprecated and will result in an error in a future release. To retain "
                      "the behavior and silence this warning, please use dropout instead.",
                      UserWarning, stacklevel=2)
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that "
                      "channel-wise 1D dropout behavior is desired - input is interpreted as "
                      "shape (N, C, L), where C is the channel dim.", UserWarning, stacklevel=2)
    if input.ndim < 2:
        raise RuntimeError(f"Feature dropout requires at least 2 dimensions in the input, got "
                           f"{input.ndim}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        out = input * 0.0
    else:
        mask = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
        keep = rand(*mask, dtype=input.dtype, device=input.device) >= p
        out = input * keep * (1.0 / (1.0 - p))
    return F.copy_(input, out) if inplace else out


def _mixed_params(name: str, input, *params):
    """The input's dtype when it is low precision and the parameters float32: PyTorch's
    norms compute that mix in float32 and return the input's dtype. None when every
    dtype agrees; any other mix raises, as PyTorch's CPU kernels do."""
    dtypes = {p.dtype for p in params if p is not None}
    if not dtypes or dtypes == {input.dtype}:
        return None
    if input.dtype in dt.LOW_PRECISION and dtypes == {dt.float32}:
        return input.dtype
    raise RuntimeError(f"{name}: mixed dtype (CPU): expected parameters of the input's dtype "
                       f"{input.dtype.name} (or float32 for a float16 or bfloat16 input), "
                       f"got {', '.join(sorted(d.name for d in dtypes))}")


@composite("NativeLayerNormBackward0", "input", "weight", "bias",
           autocast="fp32 cuda")
def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """Normalise over the trailing `normalized_shape` dims (biased variance), then affine.
    A float16 or bfloat16 input with float32 parameters is normalised in float32 and
    keeps its dtype, as in PyTorch."""
    low = _mixed_params("layer_norm", input, weight, bias)
    if low is not None:
        return F.cast(layer_norm(F.cast(input, dt.float32), normalized_shape, weight, bias,
                                 eps), low)
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    k = len(normalized_shape)
    if tuple(input.shape[input.ndim - k:]) != tuple(normalized_shape):
        raise RuntimeError(f"layer_norm: expected input with trailing shape "
                           f"{list(normalized_shape)}, got {list(input.shape)}")
    dims = tuple(range(input.ndim - k, input.ndim))
    mu = F.mean(input, dims, keepdim=True)
    centered = input - mu
    var = F.mean(centered * centered, dims, keepdim=True)
    out = centered * F.rsqrt(var + eps)
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


@composite("NativeBatchNormBackward0", "input", "weight", "bias")
def batch_norm(input, running_mean, running_var, weight=None, bias=None,
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5):
    """Normalise each channel (dimension 1) over the batch and the other dimensions.
    Training: with the batch's statistics (biased variance), and the running ones (when
    given) move toward them by `momentum` (the variance unbiased, as PyTorch); eval: with
    the running statistics."""
    c = input.shape[1]
    dims = (0,) + tuple(range(2, input.ndim))
    shape = (1, c) + (1,) * (input.ndim - 2)
    if training:
        count = input.numel() // c
        if count <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got "
                             f"input size {list(input.shape)}")
        if input.ndim == 2:  # [B, C]: sums over rows, which fuse into a row kernel's
            # column sums with the element-wise work that feeds them (the same numbers as
            # a mean over dim 0: numpy adds the rows in order either way)
            mean = F.sum_to(input, (c,)) / count
            centered = input - mean
            squares = centered * centered
            var = F.sum_to(squares, (c,)) / count
            channel_sum = F.sum_to(squares.detach(), (c,))
        else:
            mean = F.mean(input, dims, keepdim=True)
            centered = input - mean
            var = F.mean(centered * centered, dims, keepdim=True)
            channel_sum = None
        if running_mean is not None:
            running_mean.mul_(1 - momentum).add_(mean.detach().reshape(c) * momentum)
        if running_var is not None:  # the unbiased variance (sizes stay symbolic)
            if channel_sum is None:
                channel_sum = F.sum((centered * centered).detach(), dims)
            running_var.mul_(1 - momentum).add_(channel_sum / (count - 1) * momentum)
        out = centered * F.rsqrt(var + eps)
    else:
        out = (input - running_mean.reshape(shape)) * F.rsqrt(running_var.reshape(shape) + eps)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


@composite("EmbeddingBackward0", "weight")
def embedding(input, weight, padding_idx=None):
    """Rows of `weight` picked by the integer tensor `input`; no gradient reaches the
    `padding_idx` row, as in PyTorch."""
    if input.dtype.category != 1:
        raise RuntimeError(f"embedding: expected integer indices, got {input.dtype.name}")
    out = weight[input]
    if padding_idx is not None:
        if padding_idx < 0:
            padding_idx += weight.shape[0]
        pad = F.unsqueeze(input == padding_idx, -1)
        out = F.where(pad, out.detach(), out)
    return out


@composite("BinaryCrossEntropyWithLogitsBackward0", "input", "target", autocast="fp32")
def binary_cross_entropy_with_logits(input, target, weight=None, reduction: str = "mean",
                                     pos_weight=None):
    """Sigmoid + binary cross-entropy, computed stably from logits."""
    if tuple(input.shape) != tuple(target.shape):
        raise ValueError(f"binary_cross_entropy_with_logits: target shape {list(target.shape)} "
                         f"must match input shape {list(input.shape)}")
    softplus_neg = F.log1p(F.exp(-F.abs(input))) + F.relu(-input)  # log(1 + exp(-x))
    if pos_weight is not None:
        log_weight = (pos_weight - 1) * target + 1
        loss = (1 - target) * input + log_weight * softplus_neg
    else:
        loss = (1 - target) * input + softplus_neg
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def one_hot(tensor, num_classes: int = -1):
    """int64 [*, num_classes] with a 1 at each index of the int64 `tensor` and 0 elsewhere
    (num_classes=-1: the largest index + 1, read from the tensor).

    >>> F.one_hot(tj.tensor([0, 2]), 3)   # tensor([[1, 0, 0], [0, 0, 1]])
    """
    if tensor.dtype is not dt.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if tensor.numel() == 0:
        if num_classes <= 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
    else:
        if bool(F.any(tensor < 0)):
            raise RuntimeError("Class values must be non-negative.")
        if num_classes == -1:
            num_classes = int(F.amax(tensor)) + 1
        elif bool(F.any(tensor >= num_classes)):
            raise RuntimeError("Class values must be smaller than num_classes.")
    return F.cast(F.unsqueeze(tensor, -1) == arange(num_classes, device=tensor.device),
                  dt.int64)


def normalize(input, p: float = 2.0, dim: int = 1, eps: float = 1e-12):
    """input / max(||input||_p, eps) along `dim`: unit vectors, a zero vector staying zero.

    >>> F.normalize(tj.tensor([[3.0, 4.0]]))   # tensor([[0.6, 0.8]])
    """
    if not input.is_floating_point():
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor "
                           f"as input. Got {input.dtype.name}")
    if p == 2:  # clamped before the square root, so a zero vector has a finite gradient
        norm = F.sqrt(F.clamp(F.sum(input * input, dim, keepdim=True), min=eps * eps))
    else:
        norm = F.clamp(F.norm(input, p, dim, keepdim=True), min=eps)
    return input / norm


_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def pad(input, pad, mode: str = "constant", value=None):
    """Pad (or, where negative, crop) the last len(pad) // 2 dims: pad = (left_last,
    right_last, left_prev, right_prev, ...). `mode`: 'constant' (fill with `value`, 0 by
    default), 'reflect' (mirror without repeating the edge), 'replicate' (repeat the
    edge), 'circular' (wrap around), as PyTorch's.

    >>> F.pad(x, (1, 1), mode="reflect")   # [a, b, c] -> [b, a, b, c, b]
    """
    pad = tuple(int(p) for p in pad)
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode!r}: expected one of "
                                  f"{', '.join(_PAD_MODES)}")
    if len(pad) % 2:
        raise RuntimeError(f"Padding length must be divisible by 2, got {len(pad)} values")
    if len(pad) // 2 > input.ndim:
        raise RuntimeError(f"Padding length should be less than or equal to two times the "
                           f"input dimension but got padding length {len(pad)} and input of "
                           f"dimension {input.ndim}")
    if mode == "constant":
        return _pad_constant(input, pad, 0 if value is None else value)
    if value:
        raise RuntimeError(f"Padding mode \"{mode}\" doesn't take in value argument")
    k = len(pad) // 2
    if not (input.ndim - 1 <= k + 1 <= input.ndim) or k > 3:
        raise NotImplementedError(
            f"Only 2D, 3D, 4D, 5D padding with non-constant padding are supported for now: "
            f"mode {mode!r} pads {k} dims of a {input.ndim}-D input; it needs an input of "
            f"{k + 1} or {k + 2} dims")
    out = input
    for j in range(k):
        dim = input.ndim - 1 - j
        left, right = pad[2 * j], pad[2 * j + 1]
        if left or right:
            index = _pad_index(mode, int(input.shape[dim]), left, right, dim, input.shape)
            out = F.index_select(out, dim, tensor(index, device=input.device))
    return out


def _pad_index(mode: str, n: int, left: int, right: int, dim: int, shape):
    """Where each position of a dim padded by (left, right) reads the input (numpy)."""
    if mode == "reflect" and (left >= n or right >= n):
        raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding "
                           f"input dimension, but got: padding ({left}, {right}) at dimension "
                           f"{dim} of input {list(shape)}")
    if mode == "circular" and (left > n or right > n):
        raise RuntimeError(f"Padding value causes wrapping around more than once: padding "
                           f"({left}, {right}) at dimension {dim} of input {list(shape)}")
    if n + left + right < 0 or (mode == "replicate" and n == 0):
        raise RuntimeError(f"input tensor with size {n} at dimension {dim} cannot be padded "
                           f"by ({left}, {right}) in mode {mode!r}")
    at = np.arange(-left, n + right)
    if mode == "reflect":
        at = np.abs(at)
        at = np.where(at >= n, 2 * (n - 1) - at, at)
    elif mode == "replicate":
        at = np.clip(at, 0, n - 1)
    else:  # what a negative side crops is not wrapped around
        start = max(-left, 0)
        kept = n - start - max(-right, 0)
        at = start + np.arange(-max(left, 0), kept + max(right, 0)) % max(kept, 1)
    return at.astype(np.int64)


def _pad_constant(input, pad, value):
    out = input
    for k in range(len(pad) // 2):
        dim = input.ndim - 1 - k
        left, right = pad[2 * k], pad[2 * k + 1]
        size = int(out.shape[dim])
        if left < 0 or right < 0:  # a negative side crops
            start, stop = max(-left, 0), size - max(-right, 0)
            if stop < start:
                raise RuntimeError(f"The input size {size}, plus negative padding {left} and "
                                   f"{right} resulted in a negative output size, which is "
                                   f"invalid. Check dimension {dim} of your input.")
            out = F.narrow(out, dim, start, stop - start)
            left, right = max(left, 0), max(right, 0)
        parts = []
        for width in (left, None, right):
            if width is None:
                parts.append(out)
            elif width:
                shape = list(out.shape)
                shape[dim] = width
                parts.append(full(tuple(shape), value, dtype=out.dtype, device=out.device))
        out = F.cat(parts, dim) if len(parts) > 1 else out
    return out


def _pixel_check(name: str, input, factor: int, what: str) -> None:
    if input.ndim < 3:
        raise RuntimeError(f"{name} expects input to have at least 3 dimensions, but got input "
                           f"with {input.ndim} dimension(s)")
    if factor <= 0:
        raise RuntimeError(f"{name} expects a positive {what}, but got {factor}")


@composite("PixelShuffleBackward0", "input")
def pixel_shuffle(input, upscale_factor: int):
    """[*, C r², H, W] -> [*, C, H r, W r]: each r² channels of a pixel become an r x r
    block of pixels (sub-pixel upsampling), r = upscale_factor."""
    r = upscale_factor
    _pixel_check("pixel_shuffle", input, r, "upscale_factor")
    *batch, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)={c} "
                           f"is not divisible by {r * r}")
    n = len(batch)
    x = F.reshape(input, (*batch, c // (r * r), r, r, h, w))
    x = F.permute(x, (*range(n), n, n + 3, n + 1, n + 4, n + 2))  # [*, C, H, r, W, r]
    return F.reshape(x, (*batch, c // (r * r), h * r, w * r))


@composite("PixelUnshuffleBackward0", "input")
def pixel_unshuffle(input, downscale_factor: int):
    """[*, C, H r, W r] -> [*, C r², H, W], pixel_shuffle's inverse (r = downscale_factor)."""
    r = downscale_factor
    _pixel_check("pixel_unshuffle", input, r, "downscale_factor")
    *batch, c, h, w = input.shape
    for what, size, d in (("height", h, -2), ("width", w, -1)):
        if size % r:
            raise RuntimeError(f"pixel_unshuffle expects {what} to be divisible by "
                               f"downscale_factor, but input.size({d})={size} is not divisible "
                               f"by {r}")
    n = len(batch)
    x = F.reshape(input, (*batch, c, h // r, r, w // r, r))
    x = F.permute(x, (*range(n), n, n + 2, n + 4, n + 1, n + 3))  # [*, C, r, r, H, W]
    return F.reshape(x, (*batch, c * r * r, h // r, w // r))


# ---- convolution and pooling (windows from F.unfold2d, then matmul or a reduction) ------
def _ntuple(v, n: int, name: str) -> tuple:
    if isinstance(v, int):
        return (v,) * n
    v = tuple(int(x) for x in v)
    if len(v) == 1:
        return v * n
    if len(v) != n:
        raise ValueError(f"{name} must be an int or a tuple of {n} ints, got {v}")
    return v


def _pair(v, name: str) -> tuple:
    return _ntuple(v, 2, name)


def _windows(x, kernel, stride, padding, dilation, value=0.0, ceil_mode=False):
    """The windows of x [N, C, *S] over its 1, 2 or 3 spatial dims: [N, C, *K, *O]. A
    length is a 2-D image of height one; a volume takes windows over (H, W) with its
    depth folded into the channels, then over the depth of those."""
    n, c = x.shape[0], x.shape[1]
    if len(kernel) == 2:
        return F.unfold2d(x, kernel, stride, padding, dilation, value, ceil_mode)
    if len(kernel) == 1:
        cols = F.unfold2d(F.unsqueeze(x, 2), (1,) + kernel, (1,) + stride, (0,) + padding,
                          (1,) + dilation, value, ceil_mode)  # [N, C, 1, K, 1, O]
        return F.reshape(cols, (n, c, kernel[0], cols.shape[5]))
    d, h, w = x.shape[2:]
    cols = F.unfold2d(F.reshape(x, (n, c * d, h, w)), kernel[1:], stride[1:], padding[1:],
                      dilation[1:], value, ceil_mode)  # [N, C D, KH, KW, OH, OW]
    inner = tuple(cols.shape[2:])
    cols = F.unfold2d(F.reshape(cols, (n, c, d, math.prod(inner))), (kernel[0], 1),
                      (stride[0], 1),
                      (padding[0], 0), (dilation[0], 1), value, ceil_mode)
    cols = F.reshape(cols, (n, c, kernel[0], cols.shape[4]) + tuple(inner))
    return F.permute(cols, (0, 1, 2, 4, 5, 3, 6, 7))  # [N, C, KD, KH, KW, OD, OH, OW]


def _unwindows(cols, shape, kernel, stride, padding, dilation):
    """_windows' adjoint: windows [N, C, *K, *O] summed into a tensor of `shape`."""
    n, c = shape[0], shape[1]
    if len(kernel) == 2:
        return F.fold2d(cols, shape, kernel, stride, padding, dilation)
    if len(kernel) == 1:
        out = F.fold2d(F.reshape(cols, (n, c, 1, kernel[0], 1, cols.shape[3])),
                       (n, c, 1, shape[2]), (1,) + kernel, (1,) + stride, (0,) + padding,
                       (1,) + dilation)
        return F.reshape(out, tuple(shape))
    d, h, w = shape[2:]
    inner = tuple(cols.shape[3:5]) + tuple(cols.shape[6:8])  # KH, KW, OH, OW
    cols = F.permute(cols, (0, 1, 2, 5, 3, 4, 6, 7))  # [N, C, KD, OD, KH, KW, OH, OW]
    cols = F.reshape(cols, (n, c, kernel[0], 1, cols.shape[3], math.prod(inner)))
    out = F.fold2d(cols, (n, c, d, cols.shape[5]), (kernel[0], 1), (stride[0], 1),
                   (padding[0], 0), (dilation[0], 1))
    out = F.fold2d(F.reshape(out, (n, c * d) + inner), (n, c * d, h, w), kernel[1:],
                   stride[1:], padding[1:], dilation[1:])
    return F.reshape(out, tuple(shape))


def _batch(input, dims: int, name: str, what: str = "input", nonempty: bool = False):
    """input with a batch dim (and whether it had none): [N, C, *S] from [C, *S];
    `nonempty`: the channel and spatial dims must not be empty (the pools')."""
    if input.ndim not in (dims + 1, dims + 2):
        raise RuntimeError(f"Expected {dims + 1}D (unbatched) or {dims + 2}D (batched) "
                           f"{what} to {name}, but got {what} of size: {list(input.shape)}")
    if nonempty and 0 in tuple(input.shape)[input.ndim - dims - 1:]:
        raise RuntimeError(f"{name}: Expected {dims + 1}D or {dims + 2}D (batch mode) tensor "
                           f"with optional 0 dim batch size for input, but got "
                           f"{list(input.shape)}: only the batch dim may be empty")
    if input.ndim == dims + 1:
        return F.unsqueeze(input, 0), True
    return input, False


def _conv_checks(name, input, weight, bias, dims, stride, dilation):
    if weight.ndim != dims + 2:
        raise RuntimeError(f"{name}: expected a {dims + 2}-D weight [out, in/groups, "
                           f"*kernel], got weight of size {list(weight.shape)}")
    if input.dtype is not weight.dtype or (bias is not None and bias.dtype is not
                                           input.dtype):
        found = weight.dtype if input.dtype is not weight.dtype else bias.dtype
        raise RuntimeError(f"{name}: Input type ({input.dtype.name}) and weight type "
                           f"({found.name}) should be the same")
    if any(s <= 0 for s in stride):
        raise RuntimeError(f"{name}: non-positive stride is not supported, got {list(stride)}")
    if any(d <= 0 for d in dilation):
        raise RuntimeError(f"{name}: dilation should be greater than zero, got "
                           f"{list(dilation)}")


def _conv_padding(input, padding, kernel, dilation, stride, dims, name):
    """Symmetric padding ints for the windows, and the input padded on the right where
    padding='same' needs one more there (an even dilated kernel)."""
    if not isinstance(padding, str):
        padding = _ntuple(padding, dims, "padding")
        if any(p < 0 for p in padding):
            raise RuntimeError(f"{name}: negative padding is not supported, got "
                               f"{list(padding)}")
        return input, padding
    if padding == "valid":
        return input, (0,) * dims
    if padding != "same":
        raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                         "{'valid', 'same'}")
    if any(s != 1 for s in stride):
        raise RuntimeError(f"{name}: padding='same' is not supported for strided "
                           f"convolutions, got stride={list(stride)}")
    totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
    extra = [t % 2 for t in totals]
    if any(extra):  # PyTorch puts the odd one on the right
        input = pad(input, tuple(v for e in reversed(extra) for v in (0, e)))
    return input, tuple(t // 2 for t in totals)


def _conv(input, weight, bias, stride, padding, dilation, groups, dims, name):
    """Cross-correlation over `dims` spatial dims: the windows of the input times the
    weight, one matmul per group."""
    x, unbatched = _batch(input, dims, name)
    stride, dilation = _ntuple(stride, dims, "stride"), _ntuple(dilation, dims, "dilation")
    _conv_checks(name, x, weight, bias, dims, stride, dilation)
    o, cg, *kernel = (int(s) for s in weight.shape)
    kernel = tuple(kernel)
    c = x.shape[1]
    if groups <= 0:
        raise RuntimeError(f"{name}: non-positive groups is not supported, got {groups}")
    if c != cg * groups:
        raise RuntimeError(f"{name}: given groups={groups}, weight of size {list(weight.shape)}"
                           f", expected input{list(x.shape)} to have {cg * groups} "
                           f"channels, but got {c} channels instead")
    if o % groups:
        raise RuntimeError(f"{name}: out_channels ({o}) must be divisible by groups "
                           f"({groups})")
    x, padding = _conv_padding(x, padding, kernel, dilation, stride, dims, name)
    cols = _windows(x, kernel, stride, padding, dilation)  # [N, C, *K, *O]
    n, out = cols.shape[0], tuple(cols.shape[2 + dims:])
    k, positions = cg * math.prod(kernel), math.prod(out)
    if groups == 1:  # [O, C*K] @ [N, C*K, O...]: [N, O, O...], channels-first order
        y = F.matmul(F.reshape(weight, (o, k)), F.reshape(cols, (n, k, positions)))
    else:  # [G, O/G, k] @ [N, G, k, O...]: [N, G, O/G, O...]
        y = F.matmul(F.reshape(weight, (groups, o // groups, k)),
                     F.reshape(cols, (n, groups, k, positions)))
    y = F.reshape(y, (n, o) + out)
    if bias is not None:
        y = y + F.reshape(bias, (1, o) + (1,) * dims)
    return F.squeeze(y, 0) if unbatched else y


@composite("ConvolutionBackward0", "input", "weight", "bias", autocast="low")
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1):
    """1-D cross-correlation of [N, C, L] (or [C, L]) with weight [O, C/groups, K]."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 1, "conv1d")


@composite("ConvolutionBackward0", "input", "weight", "bias", autocast="low")
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1):
    """2-D cross-correlation of [N, C, H, W] (or [C, H, W]) with weight [O, C/groups, KH,
    KW] (PyTorch's conv2d): the windows of the input (F.unfold2d) times the weight.
    padding: ints, 'valid' or 'same' (an even kernel pads one more on the right)."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 2, "conv2d")


@composite("ConvolutionBackward0", "input", "weight", "bias", autocast="low")
def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1):
    """3-D cross-correlation of [N, C, D, H, W] (or [C, D, H, W]) with weight
    [O, C/groups, KD, KH, KW]."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 3, "conv3d")


def _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation,
                    dims, name):
    """The adjoint of a convolution with `weight` [C_in, C_out/groups, *K]: each input
    pixel times the weight gives a window of the output, and the windows are summed
    where they overlap (_unwindows)."""
    x, unbatched = _batch(input, dims, name)
    stride, dilation = _ntuple(stride, dims, "stride"), _ntuple(dilation, dims, "dilation")
    padding = _ntuple(padding, dims, "padding")
    output_padding = _ntuple(output_padding, dims, "output_padding")
    _conv_checks(name, x, weight, bias, dims, stride, dilation)
    for op, s, d in zip(output_padding, stride, dilation):
        if op >= s and op >= d:
            raise RuntimeError(f"{name}: output padding must be smaller than either stride "
                               f"or dilation, but got output_padding={list(output_padding)}, "
                               f"stride={list(stride)}, dilation={list(dilation)}")
    if any(p < 0 for p in padding) or any(p < 0 for p in output_padding):
        raise RuntimeError(f"{name}: negative padding is not supported, got {list(padding)}")
    cin, og, *kernel = (int(s) for s in weight.shape)
    kernel = tuple(kernel)
    if groups <= 0 or cin % groups or x.shape[1] != cin:
        raise RuntimeError(f"{name}: given groups={groups}, weight of size "
                           f"{list(weight.shape)}, expected input{list(x.shape)} to have "
                           f"{cin} channels (divisible by groups), but got {x.shape[1]} "
                           f"channels instead")
    n, size = x.shape[0], tuple(int(s) for s in x.shape[2:])
    shape = (n, og * groups) + tuple(
        (i - 1) * s - 2 * p + d * (k - 1) + op + 1
        for i, s, p, d, k, op in zip(size, stride, padding, dilation, kernel, output_padding))
    windows = out_sizes(shape, kernel, stride, padding, dilation)
    if windows != size:  # output_padding >= stride: windows that read zeros only
        x = pad(x, tuple(v for w, i in zip(reversed(windows), reversed(size))
                         for v in (0, w - i)))
        size = windows
    k, positions = og * math.prod(kernel), math.prod(size)
    w = F.transpose(F.reshape(weight, (groups, cin // groups, k)), 1, 2)  # [G, k, C_in/G]
    cols = F.matmul(w, F.reshape(x, (n, groups, cin // groups, positions)))
    cols = F.reshape(cols, (n, og * groups) + kernel + size)
    y = _unwindows(cols, shape, kernel, stride, padding, dilation)
    if bias is not None:
        y = y + F.reshape(bias, (1, og * groups) + (1,) * dims)
    return F.squeeze(y, 0) if unbatched else y


@composite("ConvolutionBackward0", "input", "weight", "bias", autocast="low")
def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups: int = 1, dilation=1):
    """Transposed 1-D convolution of [N, C_in, L] with weight [C_in, C_out/groups, K]."""
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups,
                           dilation, 1, "conv_transpose1d")


@composite("ConvolutionBackward0", "input", "weight", "bias", autocast="low")
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups: int = 1, dilation=1):
    """Transposed 2-D convolution ("deconvolution") of [N, C_in, H, W] with weight
    [C_in, C_out/groups, KH, KW]: conv2d's gradient with respect to its input.

    >>> F.conv_transpose2d(x, w, stride=2, output_padding=1)   # doubles H and W for K=3, p=1
    """
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups,
                           dilation, 2, "conv_transpose2d")


@composite("ConvolutionBackward0", "input", "weight", "bias", autocast="low")
def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups: int = 1, dilation=1):
    """Transposed 3-D convolution of [N, C_in, D, H, W] with weight
    [C_in, C_out/groups, KD, KH, KW]."""
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups,
                           dilation, 3, "conv_transpose3d")


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """The sliding windows of [N, C, H, W] (or [C, H, W]) as columns:
    [N, C * KH * KW, L], L the number of windows (PyTorch's im2col).

    >>> F.unfold(tj.ones(1, 2, 4, 4), 2).shape   # (1, 8, 9)
    """
    x, unbatched = _batch(input, 2, "unfold")
    kernel, dilation = _pair(kernel_size, "kernel_size"), _pair(dilation, "dilation")
    padding, stride = _pair(padding, "padding"), _pair(stride, "stride")
    cols = F.unfold2d(x, kernel, stride, padding, dilation)
    n, c = cols.shape[0], cols.shape[1]
    out = F.reshape(cols, (n, c * kernel[0] * kernel[1], cols.shape[4] * cols.shape[5]))
    return F.squeeze(out, 0) if unbatched else out


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """unfold's adjoint: columns [N, C * KH * KW, L] (or unbatched) summed into
    [N, C, *output_size] where their windows overlap (PyTorch's col2im)."""
    cols, unbatched = _batch(input, 1, "fold")
    size = _pair(output_size, "output_size")
    kernel, dilation = _pair(kernel_size, "kernel_size"), _pair(dilation, "dilation")
    padding, stride = _pair(padding, "padding"), _pair(stride, "stride")
    n, ck, length = cols.shape
    blocks = out_sizes(size, kernel, stride, padding, dilation)
    k = kernel[0] * kernel[1]
    if ck % k:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the "
                           f"product of kernel_size, but got input.size(1)={ck} and "
                           f"kernel_size={kernel}")
    if length != blocks[0] * blocks[1]:
        raise RuntimeError(f"Given output_size={size}, kernel_size={kernel}, dilation="
                           f"{dilation}, padding={padding}, stride={stride}, expected "
                           f"size of input's dimension 2 to match the calculated number of "
                           f"sliding blocks {blocks[0]} * {blocks[1]} = "
                           f"{blocks[0] * blocks[1]}, but got input.size(2)={length}.")
    out = F.fold2d(F.reshape(cols, (n, ck // k) + kernel + blocks), (n, ck // k) + size,
                   kernel, stride, padding, dilation)
    return F.squeeze(out, 0) if unbatched else out


def _pool_args(dims, kernel_size, stride, padding, dilation, name):
    kernel = _ntuple(kernel_size, dims, "kernel_size")
    stride = kernel if stride is None or stride == [] or stride == () else \
        _ntuple(stride, dims, "stride")
    padding, dilation = _ntuple(padding, dims, "padding"), _ntuple(dilation, dims, "dilation")
    for what, v in (("kernel size", kernel), ("stride", stride), ("dilation", dilation)):
        if any(x <= 0 for x in v):
            raise RuntimeError(f"{name}: {what} should be greater than zero, but got "
                               f"{what}={list(v)}")
    for p, k, d in zip(padding, kernel, dilation):
        if p < 0 or p > ((k - 1) * d + 1) // 2:
            raise RuntimeError(f"{name}: pad should be at most half of effective kernel "
                               f"size, but got pad={p}, kernel_size={k} and dilation={d}")
    return kernel, stride, padding, dilation


def _window_positions(size, kernel, stride, padding, dilation, out):
    """For windows [*K, *O] over an input of spatial `size`: each window point's index in
    the flattened input, and whether it lies inside the input (not padding)."""
    at = np.zeros(tuple(kernel) + tuple(out), np.int64)
    inside = np.ones(at.shape, bool)
    dims = len(kernel)
    for i, (n, k, s, p, d, o) in enumerate(zip(size, kernel, stride, padding, dilation, out)):
        pos = np.arange(o)[None, :] * s - p + np.arange(k)[:, None] * d  # [K_i, O_i]
        shape = [1] * (2 * dims)
        shape[i], shape[dims + i] = k, o
        pos = pos.reshape(shape)
        at = at * n + pos
        inside = inside & (pos >= 0) & (pos < n)
    return at.reshape((-1,) + tuple(out)), inside.reshape((-1,) + tuple(out))


def _max_pool(input, dims, kernel_size, stride, padding, dilation, ceil_mode,
              return_indices, name):
    """The maximum of each window, PyTorch's first maximum (a NaN counting as the
    maximum), and with return_indices its position in the flattened input plane."""
    kernel, stride, padding, dilation = _pool_args(dims, kernel_size, stride, padding,
                                                   dilation, name)
    x, unbatched = _batch(input, dims, name, nonempty=True)
    if x.dtype is dt.bool_:
        raise RuntimeError(f"\"{name}\" not implemented for 'Bool'")
    cols = _windows(x, kernel, stride, padding, dilation, -math.inf, ceil_mode)
    n, c, out = cols.shape[0], cols.shape[1], tuple(int(o) for o in cols.shape[2 + dims:])
    count = math.prod(kernel)
    flat = F.reshape(cols, (n, c, count) + out)
    at, inside = _window_positions(tuple(int(s) for s in x.shape[2:]), kernel, stride,
                                   padding, dilation, out)
    first = inside.argmax(0)  # a window's first point inside the input
    index = _first_max(flat, count, tensor(first, device=x.device) if first.any() else 0)
    y = F.squeeze(F.gather(flat, 2, index), 2)
    if return_indices:
        where = F.gather(F.expand(tensor(at, device=x.device), (n, c, count) + out), 2,
                         F.detach(index))
        where = F.squeeze(where, 2)
        return (F.squeeze(y, 0), F.squeeze(where, 0)) if unbatched else (y, where)
    return F.squeeze(y, 0) if unbatched else y


def _first_max(windows, count: int, first=0):
    """Per window of [N, C, K, *O], the index along K of its first maximum, a NaN
    counting as the maximum (PyTorch's pools take `val > max || isnan(val)`): K - 1
    comparisons and selects, elementwise ops a trace fuses into one kernel (numpy's
    argmax along an inner dimension costs as much as the rest of a pool). `first` (per
    window) is where a window of padding and -inf points to: its first point inside."""
    if count == 1:
        return F.argmax(windows, 2, keepdim=True)
    w = F.detach(windows)
    best, index = w[:, :, 0], first
    for k in range(1, count):
        v = w[:, :, k]
        take = (v > best) | (v != v)
        best = F.where(take, v, best)
        index = F.where(take, k, index)
    return F.unsqueeze(index, 2)


@composite("MaxPool2DWithIndicesBackward0", "input")
def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """The maximum of each window of [N, C, L] (or [C, L]); see max_pool2d."""
    return _max_pool(input, 1, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices, "max_pool1d")


@composite("MaxPool2DWithIndicesBackward0", "input")
def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """The maximum of each window of [N, C, H, W] (or [C, H, W]); its gradient goes to
    the window's first maximum, as in PyTorch (padding never wins). return_indices=True
    also gives each maximum's index in the flattened H * W plane; ceil_mode=True adds
    the last partial windows.

    >>> out, where = F.max_pool2d(x, 2, return_indices=True)
    """
    return _max_pool(input, 2, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices, "max_pool2d")


@composite("MaxPool3DWithIndicesBackward0", "input")
def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """The maximum of each window of [N, C, D, H, W] (or [C, D, H, W]); see max_pool2d."""
    return _max_pool(input, 3, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices, "max_pool3d")


def _max_unpool(input, indices, dims, kernel_size, stride, padding, output_size, name):
    """Each value of `input` put at its `indices` (max_pool's) in a zero plane."""
    kernel = _ntuple(kernel_size, dims, "kernel_size")
    stride = kernel if stride is None else _ntuple(stride, dims, "stride")
    padding = _ntuple(padding, dims, "padding")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"{name}: Expected shape of indices to be same as that of the "
                           f"input tensor ({list(input.shape)}) but got indices tensor with "
                           f"shape: {list(indices.shape)}")
    if indices.dtype is not dt.int64:
        raise RuntimeError(f"{name}: elements in indices should be type int64 but got: "
                           f"{indices.dtype.name}")
    x, unbatched = _batch(input, dims, name)
    idx = F.reshape(indices, tuple(x.shape))
    size = tuple((int(i) - 1) * s - 2 * p + k for i, s, p, k in
                 zip(x.shape[2:], stride, padding, kernel))
    if output_size is not None:
        size = tuple(output_size)[-dims:]
    n, c, plane = x.shape[0], x.shape[1], math.prod(size)
    flat = F.reshape(idx, (n, c, -1))
    if flat.numel() and bool(F.any((flat < 0) | (flat >= plane))):
        raise RuntimeError(f"{name}: Found an invalid max index: indices must lie in "
                           f"[0, {plane}) for an output of size {list(size)}")
    values = F.reshape(x, (n, c, -1))
    out = F.scatter_add_raw(values, flat, 2, (n, c, plane))
    repeats = F.scatter_add_raw(full_like(F.detach(values), 1), flat, 2, (n, c, plane))
    if bool(F.any(repeats > 1)):  # overlapping windows name a maximum more than once: it
        # is put there once, its gradient read by each (the extra copies are constants)
        extra = F.detach(values) * (1 - 1 / F.gather(repeats, 2, flat))
        out = out - F.scatter_add_raw(extra, flat, 2, (n, c, plane))
    out = F.reshape(out, (n, c) + size)
    return F.squeeze(out, 0) if unbatched else out


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """max_pool2d's partial inverse: each value of [N, C, H, W] placed at its index (from
    max_pool2d(return_indices=True)) in an [N, C, H_out, W_out] plane of zeros."""
    return _max_unpool(input, indices, 2, kernel_size, stride, padding, output_size,
                       "max_unpool2d")


def _avg_pool(input, dims, kernel_size, stride, padding, ceil_mode, count_include_pad,
              divisor_override, name):
    """The mean of each window, its divisor as PyTorch's: the window's size clipped to
    the padded input (count_include_pad) or to the input, or divisor_override."""
    kernel, stride, padding, _ = _pool_args(dims, kernel_size, stride, padding, 1, name)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError(f"{name}: divisor must be not zero")
    x, unbatched = _batch(input, dims, name, nonempty=True)
    if x.dtype is dt.bool_:
        raise RuntimeError(f"\"{name}\" not implemented for 'Bool'")
    cols = _windows(x, kernel, stride, padding, (1,) * dims, 0.0, ceil_mode)
    out = tuple(int(o) for o in cols.shape[2 + dims:])
    total = F.sum(cols, tuple(range(2, 2 + dims)))
    if divisor_override is not None:
        divisor = int(divisor_override)
    else:
        divisor = np.ones(out, np.int64)
        for i, (n, k, s, p, o) in enumerate(zip(x.shape[2:], kernel, stride, padding, out)):
            start = np.arange(o) * s - p
            stop = np.minimum(start + k, int(n) + p)
            if not count_include_pad:
                start, stop = np.maximum(start, 0), np.minimum(stop, int(n))
            shape = [1] * dims
            shape[i] = o
            divisor = divisor * (stop - start).reshape(shape)
        if (divisor == divisor.flat[0]).all():
            divisor = int(divisor.flat[0])
        else:
            divisor = tensor(divisor, device=x.device)
    if x.is_floating_point():
        y = total / divisor
    else:  # integers divide as C's do (toward zero), as PyTorch's kernels
        y = F.div(total, divisor, rounding_mode="trunc")
    return F.squeeze(y, 0) if unbatched else y


@composite("AvgPool2DBackward0", "input")
def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """The mean of each window of [N, C, L] (or [C, L]); see avg_pool2d."""
    return _avg_pool(input, 1, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     None, "avg_pool1d")


@composite("AvgPool2DBackward0", "input")
def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """The mean of each window of [N, C, H, W] (or [C, H, W]): padding counts as zeros
    in it unless count_include_pad=False; divisor_override replaces the window's size.
    An integer input gives integers (the mean truncated), as PyTorch's."""
    return _avg_pool(input, 2, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override, "avg_pool2d")


@composite("AvgPool3DBackward0", "input")
def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """The mean of each window of [N, C, D, H, W] (or [C, D, H, W]); see avg_pool2d."""
    return _avg_pool(input, 3, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override, "avg_pool3d")


def _adaptive_size(output_size, size, name):
    dims = len(size)
    out = (output_size,) * dims if isinstance(output_size, int) else tuple(output_size)
    if len(out) != dims:
        raise RuntimeError(f"{name}: output_size must be {dims} ints (None keeps a size), "
                           f"got {output_size}")
    out = tuple(s if o is None else int(o) for o, s in zip(out, size))
    if any(o < 0 for o in out):
        raise RuntimeError(f"{name}: elements of output_size must be greater than or equal "
                           f"to 0 but received {list(out)}")
    return out


def _adaptive_batch(input, dims: int, name: str):
    if input.ndim < dims + 1:  # PyTorch's Python wrapper checks this one first
        raise ValueError(f"{name}: Input dimension should be at least {dims + 1}, got a "
                         f"{input.ndim}-D input")
    return _batch(input, dims, name)


def _bins(size: int, out: int):
    """PyTorch's adaptive bins: bin i of `out` over `size` spans
    [floor(i size / out), ceil((i + 1) size / out))."""
    return [((i * size) // out, -((-(i + 1) * size) // out)) for i in range(out)]


def adaptive_avg_pool1d(input, output_size):
    """Average of [N, C, L] (or [C, L]) over PyTorch's adaptive bins (see
    adaptive_avg_pool2d)."""
    x, unbatched = _adaptive_batch(input, 1, "adaptive_avg_pool1d")
    if int(x.shape[-1]) == 0:
        raise RuntimeError(f"adaptive_avg_pool1d: Expected input to have non-zero size for "
                           f"non-batch dimensions, but input has sizes {list(input.shape)}")
    (size,) = _adaptive_size(output_size, (int(x.shape[2]),), "adaptive_avg_pool1d")
    out = F.squeeze(adaptive_avg_pool2d(F.unsqueeze(x, 2), (1, size)), 2)
    return F.squeeze(out, 0) if unbatched else out


def adaptive_avg_pool2d(input, output_size):
    """Average over PyTorch's adaptive bins: bin i of n over a size H spans
    [floor(i H / n), ceil((i + 1) H / n))."""
    x, unbatched = _adaptive_batch(input, 2, "adaptive_avg_pool2d")
    h, w = int(x.shape[2]), int(x.shape[3])
    oh, ow = _adaptive_size(output_size, (h, w), "adaptive_avg_pool2d")
    if (oh, ow) == (1, 1):  # a global average (PyTorch's graph: MeanBackward1 too)
        out = F.mean(x, (2, 3), keepdim=True)
    else:
        out = _adaptive_bins(x, h, w, oh, ow)
    return F.squeeze(out, 0) if unbatched else out


@composite("AdaptiveAvgPool2DBackward0", "x")
def _adaptive_bins(x, h, w, oh, ow):
    if h % oh == 0 and w % ow == 0:
        return avg_pool2d(x, (h // oh, w // ow))
    rows = []
    for y0, y1 in _bins(h, oh):
        cols = [F.mean(x[:, :, y0:y1, x0:x1], (2, 3), keepdim=True) for x0, x1 in _bins(w, ow)]
        rows.append(F.cat(cols, 3))
    return F.cat(rows, 2)


# ---- attention -----------------------------------------------------------------------------
def _attention_checks(query, key, value, attn_mask, dropout_p: float) -> None:
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise RuntimeError(f"Expected query, key, and value to all be at least 2 dimensional, "
                           f"but got query.dim: {query.ndim} key.dim: {key.ndim} and "
                           f"value.dim: {value.ndim} instead.")
    if not query.dtype is key.dtype is value.dtype:
        raise RuntimeError(f"Expected query, key, and value to have the same dtype, but got "
                           f"query.dtype: {query.dtype.name} key.dtype: {key.dtype.name} and "
                           f"value.dtype: {value.dtype.name} instead.")
    if not query.is_floating_point():
        raise RuntimeError(f"scaled_dot_product_attention: expected floating-point query, "
                           f"key and value, got {query.dtype.name}")
    if query.shape[-1] != key.shape[-1]:
        raise RuntimeError(f"scaled_dot_product_attention: query and key must have the same "
                           f"embedding size, got {query.shape[-1]} and {key.shape[-1]}")
    if key.shape[-2] != value.shape[-2]:
        raise RuntimeError(f"scaled_dot_product_attention: key and value must have the same "
                           f"sequence length, got {key.shape[-2]} and {value.shape[-2]}")
    if attn_mask is not None and attn_mask.dtype is not dt.bool_ and \
            attn_mask.dtype is not query.dtype:
        raise RuntimeError(f"Expected attn_mask dtype to be bool or float or to match query "
                           f"dtype, but got attn_mask.dtype: {attn_mask.dtype.name} and "
                           f"query.dtype: {query.dtype.name} instead.")
    if not 0.0 <= dropout_p <= 1.0:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got "
                           f"{dropout_p}")


def _repeat_heads(x, groups: int):
    """Each head of [..., H, S, E] repeated `groups` times in place: [..., H * groups, S, E]
    (PyTorch's repeat_interleave along dim -3, for grouped-query attention)."""
    if groups == 1:
        return x
    *batch, h, s, e = x.shape
    x = F.expand(F.unsqueeze(x, -3), (*batch, h, groups, s, e))
    return F.reshape(x, (*batch, h * groups, s, e))


def _safe_softmax(scores):
    """softmax over the last dim, a row masked everywhere (all -inf) giving zeros, as
    PyTorch's attention does. The row's maximum is shifted to 0 when it is -inf and the
    sum replaced by 1 when it is 0, so no NaN is made, in the values or the gradient;
    the same two reductions and elementwise steps as softmax, fused alike."""
    m = F.amax(scores, -1, keepdim=True).detach()
    e = F.exp(scores - F.where(m == -math.inf, 0.0, m))
    s = F.sum(e, -1, keepdim=True)
    return e / F.where(s == 0.0, 1.0, s)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False):
    """softmax(query @ key^T * scale + mask) @ value over the last two dims, the leading
    dims broadcast (PyTorch's math). query [..., L, E], key [..., S, E], value [..., S, Ev];
    scale defaults to 1/sqrt(E). `attn_mask` broadcasts to [..., L, S]: a bool mask keeps
    the positions that are True, a float mask is added to the scores. `is_causal` keeps
    key j <= query i (the lower triangle from the top left). A query whose every key is
    masked gives zeros. Dropout (`dropout_p`) applies to the attention weights whenever
    it is > 0. `enable_gqa` repeats each key and value head for the query heads it serves
    (dim -3 of query a multiple of theirs).

    >>> q = k = v = tj.randn(2, 4, 5, 8)              # batch, heads, seq, head_dim
    >>> F.scaled_dot_product_attention(q, k, v, is_causal=True).shape
    tracejit.Size([2, 4, 5, 8])
    """
    _attention_checks(query, key, value, attn_mask, dropout_p)
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be "
                           "set when is_causal=True")
    if enable_gqa and query.ndim >= 3:
        hq, hk, hv = query.shape[-3], key.shape[-3], value.shape[-3]
        if hq % hk or hq % hv:
            raise RuntimeError(f"Number of heads in key and value must divide the number of "
                               f"heads in query, got query heads {hq}, key heads {hk} and "
                               f"value heads {hv}")
        key, value = _repeat_heads(key, hq // hk), _repeat_heads(value, hq // hv)
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    scores = F.matmul(query * scale, F.transpose(key, -2, -1))
    if is_causal:
        attn_mask = F.tril(ones(query.shape[-2], key.shape[-2], dtype=dt.bool_,
                                device=query.device))
    if attn_mask is not None:
        scores = F.where(attn_mask, scores, -math.inf) if attn_mask.dtype is dt.bool_ \
            else scores + attn_mask
    weights = _safe_softmax(scores)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)
    return F.matmul(weights, value)


def _canonical_mask(mask, mask_name: str, other_type, other_name: str, target_type,
                    check_other: bool = True):
    """A bool mask (True: masked out) as an additive float mask of `target_type` (-inf
    where masked); a float mask as it is; any other dtype refused (PyTorch's rule for the
    masks of MultiheadAttention and the Transformer layers)."""
    if mask is None:
        return None
    if mask.dtype is not dt.bool_ and not mask.is_floating_point():
        raise AssertionError(f"only bool and floating types of {mask_name} are supported, "
                             f"got {mask.dtype.name}")
    if check_other and other_type is not None and mask.dtype is not other_type:
        warnings.warn(f"Support for mismatched {mask_name} and {other_name} is deprecated. "
                      "Use same type for both instead.", UserWarning, stacklevel=3)
    if mask.dtype is dt.bool_:
        return F.masked_fill(zeros(tuple(mask.shape), dtype=target_type, device=mask.device),
                             mask, -math.inf)
    return mask


def _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads: int) -> bool:
    """Whether the call is batched ([L, N, E]) or not ([L, E]); the other inputs' ranks must
    agree (AssertionError, as PyTorch's)."""
    if query.ndim not in (2, 3):
        raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received "
                             f"{query.ndim}-D query tensor")
    batched = query.ndim == 3
    if key.ndim != query.ndim or value.ndim != query.ndim:
        raise AssertionError(f"For {'batched (3-D)' if batched else 'unbatched (2-D)'} "
                             f"`query`, expected `key` and `value` to be {query.ndim}-D but "
                             f"found {key.ndim}-D and {value.ndim}-D tensors respectively")
    if key_padding_mask is not None and key_padding_mask.ndim != query.ndim - 1:
        raise AssertionError(f"For {'batched' if batched else 'unbatched'} `query`, expected "
                             f"`key_padding_mask` to be `None` or {query.ndim - 1}-D but "
                             f"found {key_padding_mask.ndim}-D tensor instead")
    if attn_mask is not None:
        if attn_mask.ndim not in (2, 3):
            raise AssertionError(f"Expected `attn_mask` to be `None`, 2-D or 3-D but found "
                                 f"{attn_mask.ndim}-D tensor instead")
        want = (num_heads, query.shape[0], key.shape[0])
        if not batched and attn_mask.ndim == 3 and tuple(attn_mask.shape) != want:
            raise AssertionError(f"Expected `attn_mask` shape to be {want} but got "
                                 f"{tuple(attn_mask.shape)}")
    return batched


def _in_projection(query, key, value, in_proj_weight, in_proj_bias, separate: tuple | None):
    """q, k, v projected: one matmul with the packed [3E, E] weight for self-attention
    (query, key and value one tensor), its thirds otherwise, or the separate weights."""
    if separate is None and query is key and key is value:
        return F.chunk(linear(query, in_proj_weight, in_proj_bias), 3, -1)
    weights = separate or F.chunk(in_proj_weight, 3)
    biases = (None,) * 3 if in_proj_bias is None else F.chunk(in_proj_bias, 3)
    return tuple(linear(x, w, b) for x, w, b in zip((query, key, value), weights, biases))


def multi_head_attention_forward(query, key, value, embed_dim_to_check: int, num_heads: int,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v,
                                 add_zero_attn: bool, dropout_p: float, out_proj_weight,
                                 out_proj_bias, training: bool = True, key_padding_mask=None,
                                 need_weights: bool = True, attn_mask=None,
                                 use_separate_proj_weight: bool = False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights: bool = True,
                                 is_causal: bool = False):
    """Multi-head attention of sequence-first inputs (query [L, N, E], key and value
    [S, N, *], or unbatched [L, E]), PyTorch's function behind nn.MultiheadAttention.
    Masks are True or -inf where attention is *not* allowed (the opposite of
    scaled_dot_product_attention's bool mask). Returns (output [L, N, E], the attention
    weights [N, L, S] averaged over heads, per head [N, H, L, S], or None without
    need_weights). With need_weights the weights come from a plain softmax, so a query
    with every key masked gives NaN; without it the attention is scaled_dot_product_
    attention's, which gives zeros there (both as PyTorch)."""
    batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:  # one sequence: a batch of one (self-attention stays one tensor)
        same = query is key and key is value
        query = F.unsqueeze(query, 1)
        key, value = (query, query) if same else (F.unsqueeze(key, 1), F.unsqueeze(value, 1))
        if key_padding_mask is not None:
            key_padding_mask = F.unsqueeze(key_padding_mask, 0)
    tgt_len, bsz, embed_dim = query.shape
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask",
                                       None if attn_mask is None else attn_mask.dtype,
                                       "attn_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the "
                           "Transformer module method `generate_square_subsequent_mask` to "
                           "create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # scaled_dot_product_attention's is_causal stands for the mask
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype,
                                    check_other=False)
        if key_padding_mask is not None:
            is_causal = False
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but "
                             f"got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(f"key's sequence and batch dims {tuple(key.shape[:2])} do "
                                 f"not match value's {tuple(value.shape[:2])}")
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is True but q_proj_weight, "
                                 "k_proj_weight or v_proj_weight is None")
        separate = (q_proj_weight, k_proj_weight, v_proj_weight)
    else:
        if tuple(key.shape) != tuple(value.shape):
            raise AssertionError(f"key shape {tuple(key.shape)} does not match value shape "
                                 f"{tuple(value.shape)}")
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is "
                                 "None")
        separate = None
    q, k, v = _in_projection(query, key, value, in_proj_weight, in_proj_bias, separate)
    src_len = key.shape[0]
    if attn_mask is not None:
        want = (tgt_len, src_len) if attn_mask.ndim == 2 else \
            (bsz * num_heads, tgt_len, src_len)
        if tuple(attn_mask.shape) != want:
            raise RuntimeError(f"The shape of the {attn_mask.ndim}D attn_mask is "
                               f"{tuple(attn_mask.shape)}, but should be {want}.")
        if attn_mask.ndim == 2:
            attn_mask = F.unsqueeze(attn_mask, 0)
    if bias_k is not None and bias_v is not None:
        if static_k is not None or static_v is not None:
            raise AssertionError("bias cannot be added to static key and value.")
        k = F.cat([k, F.repeat(bias_k, 1, bsz, 1)])
        v = F.cat([v, F.repeat(bias_v, 1, bsz, 1)])
        attn_mask = None if attn_mask is None else pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else pad(key_padding_mask, (0, 1))
    elif bias_k is not None or bias_v is not None:
        raise AssertionError("bias_k and bias_v must both be given or both be None")
    q = F.transpose(F.reshape(q, (tgt_len, bsz * num_heads, head_dim)), 0, 1)
    k = F.transpose(F.reshape(k, (k.shape[0], bsz * num_heads, head_dim)), 0, 1) \
        if static_k is None else static_k
    v = F.transpose(F.reshape(v, (v.shape[0], bsz * num_heads, head_dim)), 0, 1) \
        if static_v is None else static_v
    if add_zero_attn:
        k = F.cat([k, zeros(bsz * num_heads, 1, head_dim, dtype=k.dtype, device=k.device)], 1)
        v = F.cat([v, zeros(bsz * num_heads, 1, head_dim, dtype=v.dtype, device=v.device)], 1)
        attn_mask = None if attn_mask is None else pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else pad(key_padding_mask, (0, 1))
    src_len = k.shape[1]
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise AssertionError(f"expecting key_padding_mask shape of {(bsz, src_len)}, but "
                                 f"got {tuple(key_padding_mask.shape)}")
        key_padding_mask = F.reshape(F.expand(F.reshape(key_padding_mask, (bsz, 1, 1, src_len)),
                                              (bsz, num_heads, 1, src_len)),
                                     (bsz * num_heads, 1, src_len))
        attn_mask = key_padding_mask if attn_mask is None else attn_mask + key_padding_mask
    if not training:
        dropout_p = 0.0
    if need_weights:
        scores = F.matmul(q * math.sqrt(1.0 / float(head_dim)), F.transpose(k, -2, -1))
        if attn_mask is not None:
            scores = attn_mask + scores
        weights = softmax(scores, -1)
        if dropout_p > 0.0:
            weights = dropout(weights, dropout_p)
        out = F.matmul(weights, v)  # [N * H, L, head_dim]
        weights = F.reshape(weights, (bsz, num_heads, tgt_len, src_len))
        if average_attn_weights:
            weights = F.mean(weights, 1)
    else:
        if attn_mask is not None:
            attn_mask = F.unsqueeze(attn_mask, 0) if attn_mask.shape[0] == 1 else \
                F.reshape(attn_mask, (bsz, num_heads, -1, src_len))
        q, k, v = (F.reshape(x, (bsz, num_heads, x.shape[1], head_dim)) for x in (q, k, v))
        out = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
        out = F.reshape(out, (bsz * num_heads, tgt_len, head_dim))
        weights = None
    out = F.reshape(F.transpose(out, 0, 1), (tgt_len * bsz, embed_dim))
    out = F.reshape(linear(out, out_proj_weight, out_proj_bias), (tgt_len, bsz, -1))
    if not batched:
        out = F.squeeze(out, 1)
        weights = None if weights is None else F.squeeze(weights, 0)
    return out, weights


@composite("AdaptiveMaxPool2DBackward0", "input")
def adaptive_max_pool2d(input, output_size, return_indices=False):
    """The maximum of [N, C, H, W] (or [C, H, W]) over PyTorch's adaptive bins (see
    adaptive_avg_pool2d), the first maximum as max_pool2d's; return_indices=True also
    gives its index in the flattened H * W plane."""
    x, unbatched = _adaptive_batch(input, 2, "adaptive_max_pool2d")
    size = tuple(int(s) for s in x.shape[2:])
    if 0 in size:
        raise RuntimeError(f"adaptive_max_pool2d: Expected input to have non-zero size for "
                           f"non-batch dimensions, but input has sizes {list(input.shape)}")
    out = _adaptive_size(output_size, size, "adaptive_max_pool2d")
    # each bin as a window of the largest bin's size, short bins repeating their last
    # point (a repeat neither changes the maximum nor where the first one is)
    picks, widths = [], []
    for n, o in zip(size, out):
        bins = _bins(n, o)
        width = max((b - a for a, b in bins), default=1)
        picks.append(np.array([[min(a + k, b - 1) for k in range(width)] for a, b in bins],
                              np.int64).reshape(o, width))
        widths.append(width)
    v = x
    for i, p in enumerate(picks):  # [N, C, OH * KH, OW * KW]
        v = F.index_select(v, 2 + i, tensor(p.reshape(-1), device=x.device))
    n, c = x.shape[0], x.shape[1]
    v = F.reshape(v, (n, c, out[0], widths[0], out[1], widths[1]))
    v = F.reshape(F.permute(v, (0, 1, 3, 5, 2, 4)), (n, c, widths[0] * widths[1]) + out)
    index = _first_max(v, widths[0] * widths[1])
    y = F.squeeze(F.gather(v, 2, index), 2)
    y = F.squeeze(y, 0) if unbatched else y
    if not return_indices:
        return y
    at = (picks[0].T[:, None, :, None] * size[1] + picks[1].T[None, :, None, :])
    where = F.gather(F.expand(tensor(at.reshape((-1,) + out), device=x.device),
                              (n, c, widths[0] * widths[1]) + out), 2, F.detach(index))
    where = F.squeeze(where, 2)
    return y, (F.squeeze(where, 0) if unbatched else where)


# ---- resampling (interpolate): one dim at a time, each output point a weighted sum -----
def _resample(x, dim: int, picks, weights=None):
    """x resampled along `dim`: out[o] = sum_t x[picks[o, t]] * weights[o, t] (picks and
    weights numpy [O, T]; without weights, T is 1 and the point is copied)."""
    o, taps = picks.shape
    v = F.index_select(x, dim, tensor(picks.reshape(-1), device=x.device))
    if weights is None:
        return v
    shape = tuple(x.shape)
    v = F.reshape(v, shape[:dim] + (o, taps) + shape[dim + 1:])
    w = tensor(weights.reshape((o, taps) + (1,) * (x.ndim - dim - 1)), device=x.device)
    return F.sum(v * (w if w.dtype is x.dtype else F.cast(w, x.dtype)), dim + 1)


def _source_scale(n: int, out: int, align_corners: bool, scale, real):
    """PyTorch's step between source points per output point (area_pixel_compute_scale),
    in the precision `real` its kernels compute it in."""
    if align_corners:
        return real((n - 1) / (out - 1)) if out > 1 else real(0)
    return real(1.0 / scale) if scale is not None and scale > 0 else real(n) / real(out)


def _nearest_taps(n: int, out: int, scale, exact: bool):
    if not exact and out == n:
        return np.arange(out)[:, None]
    if not exact and out == 2 * n:
        return (np.arange(out) // 2)[:, None]
    step = _source_scale(n, out, False, scale, np.float32)
    if exact:  # (dst + 0.5) * scale in double, rounded to float by floorf
        src = np.floor(((np.arange(out) + 0.5) * np.float64(step)).astype(np.float32))
    else:
        src = np.floor(np.arange(out).astype(np.float32) * step)
    return np.minimum(src.astype(np.int64), n - 1)[:, None]


def _linear_taps(n: int, out: int, align_corners: bool, scale, real):
    step = _source_scale(n, out, align_corners, scale, real)
    dst = np.arange(out).astype(real)
    src = step * dst if align_corners else np.maximum(step * (dst + real(0.5)) - real(0.5), 0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n - 1)
    lam = np.clip(src - i0, 0, 1).astype(real)
    i1 = i0 + (i0 < n - 1)
    return np.stack([i0, i1], 1), np.stack([1 - lam, lam], 1)


def _cubic_taps(n: int, out: int, align_corners: bool, scale, real):
    a = real(-0.75)  # PyTorch's (Keys') cubic convolution constant
    step = _source_scale(n, out, align_corners, scale, real)
    dst = np.arange(out).astype(real)
    src = step * dst if align_corners else step * (dst + real(0.5)) - real(0.5)
    i = np.floor(src).astype(np.int64)
    t = (src - i).astype(real)

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    weights = np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], 1).astype(real)
    return np.clip(i[:, None] + np.arange(-1, 3), 0, n - 1), weights


def _area_taps(n: int, out: int, real):
    """adaptive average pooling's bins as taps of the longest bin's length (shorter bins
    weigh their extra taps 0)."""
    bins = _bins(n, out)
    width = max(b - a for a, b in bins)
    picks = np.array([[min(a + k, b - 1) for k in range(width)] for a, b in bins], np.int64)
    weights = np.array([[real(1) / real(b - a) if k < b - a else 0 for k in range(width)]
                        for a, b in bins], real)
    return picks.reshape(out, width), weights.reshape(out, width)


_INTERPOLATE_DIMS = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}


def _interpolate_sizes(input, size, scale_factor, recompute_scale_factor, dims):
    """The output's spatial sizes and the scales PyTorch's kernels read (None: in/out)."""
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined" if size is not
                         None else "either size or scale_factor should be defined")
    spatial = tuple(int(s) for s in input.shape[2:])
    if size is not None:
        out = (int(size),) * dims if isinstance(size, int) else tuple(int(s) for s in size)
        if len(out) != dims:
            raise ValueError(f"Input and output must have the same number of spatial "
                             f"dimensions, but got input with spatial dimensions of "
                             f"{list(spatial)} and output size of {list(out)}. Please provide "
                             f"input tensor in (N, C, d1, d2, ...,dK) format and output size "
                             f"in (o1, o2, ...,oK) format.")
        return out, (None,) * dims
    scales = (float(scale_factor),) * dims if isinstance(scale_factor, (int, float)) else \
        tuple(float(s) for s in scale_factor)
    if len(scales) != dims:
        raise ValueError(f"Input and scale_factor must have the same number of spatial "
                         f"dimensions, but got input with spatial dimensions of "
                         f"{list(spatial)} and scale_factor of shape {list(scales)}.")
    out = tuple(math.floor(n * s) for n, s in zip(spatial, scales))
    return out, (None,) * dims if recompute_scale_factor else scales


def interpolate(input, size=None, scale_factor=None, mode: str = "nearest", align_corners=None,
                recompute_scale_factor=None, antialias: bool = False):
    """Resample the spatial dims of [N, C, *S] (1 to 3 of them) to `size` or by
    `scale_factor`, as PyTorch's: mode 'nearest', 'nearest-exact', 'linear', 'bilinear',
    'bicubic', 'trilinear' (align_corners: corner pixels' centres meet) or 'area'
    (adaptive average pooling). Each dim is resampled in turn, so gradients are those of
    index_select and products.

    >>> F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
    """
    modes = ("nearest", "nearest-exact", "area") + tuple(_INTERPOLATE_DIMS)
    if mode not in modes:
        raise NotImplementedError(f"Input Error: interpolate got mode {mode!r}; it supports "
                                  f"{', '.join(modes)}")
    if mode in ("nearest", "nearest-exact", "area"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating "
                             "modes: linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported")
    dims = input.ndim - 2
    if dims not in (1, 2, 3) or _INTERPOLATE_DIMS.get(mode, dims) != dims:
        raise NotImplementedError(
            f"Got {input.ndim}D input, but {mode} mode needs "
            f"{_INTERPOLATE_DIMS.get(mode, 1) + 2}D input" if dims in (1, 2, 3) else
            f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for "
            f"the modes: nearest | linear | bilinear | bicubic | trilinear | area | "
            f"nearest-exact (got {mode})")
    out, scales = _interpolate_sizes(input, size, scale_factor, recompute_scale_factor, dims)
    if any(o <= 0 for o in out):
        raise RuntimeError(f"interpolate: input and output sizes should be greater than 0, "
                           f"but got input {list(input.shape[2:])} and output {list(out)}")
    if mode == "area":
        return (adaptive_avg_pool1d, adaptive_avg_pool2d, _adaptive_avg)[dims - 1](input, out)
    real = np.float32 if input.dtype.itemsize <= 4 else np.float64
    y = input
    for i, (n, o, s) in enumerate(zip(input.shape[2:], out, scales)):
        n = int(n)
        if mode in ("nearest", "nearest-exact"):
            y = _resample(y, 2 + i, _nearest_taps(n, o, s, mode == "nearest-exact"))
        elif mode == "bicubic":
            y = _resample(y, 2 + i, *_cubic_taps(n, o, align_corners, s, real))
        else:
            y = _resample(y, 2 + i, *_linear_taps(n, o, align_corners, s, real))
    return y


def _adaptive_avg(input, output_size):
    """Average of [N, C, *S] over PyTorch's adaptive bins, one spatial dim at a time."""
    real = np.float32 if input.dtype.itemsize <= 4 else np.float64
    y = input
    for i, (n, o) in enumerate(zip(input.shape[2:], output_size)):
        y = _resample(y, 2 + i, *_area_taps(int(n), o, real))
    return y


def upsample(input, size=None, scale_factor=None, mode: str = "nearest", align_corners=None):
    """interpolate (PyTorch's deprecated spelling; it warns as PyTorch does)."""
    warnings.warn("nn.functional.upsample is deprecated. Use nn.functional.interpolate "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """interpolate(mode='nearest') (PyTorch's deprecated spelling)."""
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """interpolate(mode='bilinear', align_corners=True) (PyTorch's deprecated spelling)."""
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


from ._activations import *  # noqa: E402,F401,F403  (elu, hardtanh, softplus, prelu, ...)
from . import _activations  # noqa: E402

__all__ += _activations.__all__

# the functions of nn/losses.py, normalization.py, linear.py, sparse.py and dropout.py,
# re-exported here as PyTorch's namespace has them
from .losses import *  # noqa: E402, F401, F403
from .losses import __all__ as _losses  # noqa: E402
from .normalization import *  # noqa: E402, F401, F403
from .normalization import __all__ as _norms  # noqa: E402
from .linear import bilinear  # noqa: E402, F401
from .sparse import embedding_bag  # noqa: E402, F401
from .dropout import *  # noqa: E402, F401, F403
from .dropout import __all__ as _dropouts  # noqa: E402

__all__ += _losses + _norms + ["bilinear", "embedding_bag"] + _dropouts
