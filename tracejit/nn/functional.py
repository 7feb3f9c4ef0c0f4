"""`tj.nn.functional`: activations and losses as compositions of tensor ops."""
from __future__ import annotations

import math
import warnings

from .. import dtypes as dt
from ..autograd.composite import composite
from ..autograd.grad_mode import is_grad_enabled
from ..tensor import functional as F
from ..tensor.functional import log_softmax, sigmoid, softmax, tanh

__all__ = ["relu", "tanh", "sigmoid", "softmax", "log_softmax", "gelu", "leaky_relu", "silu",
           "linear", "mse_loss", "cross_entropy", "nll_loss", "binary_cross_entropy",
           "smooth_l1_loss", "dropout", "dropout2d", "layer_norm", "embedding", "one_hot",
           "normalize", "binary_cross_entropy_with_logits", "pad", "pixel_shuffle",
           "pixel_unshuffle", "batch_norm", "conv1d", "conv2d", "max_pool2d", "avg_pool2d",
           "adaptive_avg_pool2d", "scaled_dot_product_attention",
           "multi_head_attention_forward"]


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
    from ..tensor.creation import rand

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
        from ..tensor.creation import rand

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
    from ..tensor.creation import arange

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


def pad(input, pad: tuple, value: float = 0.0):
    """Constant padding of the last dims: pad = (left_last, right_last, left_prev, ...)."""
    from ..tensor.creation import full

    out = input
    for k in range(len(pad) // 2):
        dim = input.ndim - 1 - k
        left, right = pad[2 * k], pad[2 * k + 1]
        parts = []
        if left:
            shape = list(out.shape)
            shape[dim] = left
            parts.append(full(tuple(shape), value, dtype=out.dtype))
        parts.append(out)
        if right:
            shape = list(out.shape)
            shape[dim] = right
            parts.append(full(tuple(shape), value, dtype=out.dtype))
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
def _pair(v, name: str) -> tuple:
    if isinstance(v, int):
        return (v, v)
    v = tuple(v)
    if len(v) == 1:
        return (v[0], v[0])
    if len(v) != 2:
        raise ValueError(f"{name} must be an int or a pair of ints, got {v}")
    return v


def _same_padding(kernel, dilation, stride) -> tuple:
    if stride != (1, 1):
        raise ValueError("padding='same' is not supported for strided convolutions")
    pads = []
    for k, d in zip(kernel, dilation):
        total = d * (k - 1)
        if total % 2:
            raise NotImplementedError(
                "padding='same' with an even (dilated) kernel pads unevenly; pad the input "
                "with F.pad and use padding=0")
        pads.append(total // 2)
    return tuple(pads)


@composite("ConvolutionBackward0", "input", "weight", "bias", autocast="low")
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1):
    """2-D cross-correlation of [N, C, H, W] with weight [O, C/groups, KH, KW] (PyTorch's
    conv2d): the windows of the input (F.unfold2d) times the weight, one matmul per
    group."""
    if input.ndim != 4:
        raise RuntimeError(f"conv2d: expected a 4-D input [N, C, H, W], got shape "
                           f"{list(input.shape)}")
    if weight.ndim != 4:
        raise RuntimeError(f"conv2d: expected a 4-D weight [O, C/groups, KH, KW], got shape "
                           f"{list(weight.shape)}")
    o, cg, kh, kw = (int(s) for s in weight.shape)
    c = input.shape[1]
    if c != cg * groups:
        raise RuntimeError(f"conv2d: given groups={groups}, weight of size {list(weight.shape)}"
                           f", expected input{list(input.shape)} to have {cg * groups} "
                           f"channels, but got {c} channels instead")
    if o % groups:
        raise RuntimeError(f"conv2d: out_channels ({o}) must be divisible by groups "
                           f"({groups})")
    stride, dilation = _pair(stride, "stride"), _pair(dilation, "dilation")
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ValueError(f"padding must be 'same', 'valid' or ints, got {padding!r}")
        padding = (0, 0) if padding == "valid" else _same_padding((kh, kw), dilation, stride)
    padding = _pair(padding, "padding")
    cols = F.unfold2d(input, (kh, kw), stride, padding, dilation)  # [N, C, KH, KW, OH, OW]
    n, oh, ow = cols.shape[0], cols.shape[4], cols.shape[5]
    k = cg * kh * kw
    if groups == 1:  # [O, C*KH*KW] @ [N, C*KH*KW, OH*OW]: [N, O, OH*OW], NCHW order
        out = F.matmul(F.reshape(weight, (o, k)), F.reshape(cols, (n, k, oh * ow)))
    else:  # [G, O/G, k] @ [N, G, k, OH*OW]: [N, G, O/G, OH*OW]
        out = F.matmul(F.reshape(weight, (groups, o // groups, k)),
                       F.reshape(cols, (n, groups, k, oh * ow)))
    out = F.reshape(out, (n, o, oh, ow))
    if bias is not None:
        out = out + F.reshape(bias, (1, o, 1, 1))
    return out


@composite("ConvolutionBackward0", "input", "weight", "bias", autocast="low")
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1):
    """1-D cross-correlation of [N, C, L] with weight [O, C/groups, K]: conv2d on a
    height of one."""
    if input.ndim != 3:
        raise RuntimeError(f"conv1d: expected a 3-D input [N, C, L], got shape "
                           f"{list(input.shape)}")
    one = lambda v: (1, v) if isinstance(v, int) else (1,) + tuple(v)  # noqa: E731
    pad = padding if isinstance(padding, str) else (0,) + one(padding)[1:]
    out = conv2d(F.unsqueeze(input, 2), F.unsqueeze(weight, 2), bias, one(stride), pad,
                 one(dilation), groups)
    return F.squeeze(out, 2)


def _pool_args(kernel_size, stride, padding, dilation, ceil_mode, name):
    if ceil_mode:
        raise NotImplementedError(f"{name}: ceil_mode=True is not supported; pad the input "
                                  "so the windows tile it, or use ceil_mode=False")
    kernel = _pair(kernel_size, "kernel_size")
    stride = kernel if stride is None or stride == [] or stride == () else \
        _pair(stride, "stride")
    padding, dilation = _pair(padding, "padding"), _pair(dilation, "dilation")
    for p, k in zip(padding, kernel):
        if p > k // 2:
            raise RuntimeError(f"{name}: pad should be at most half of effective kernel "
                               f"size, but got pad={p}, kernel_size={k}")
    return kernel, stride, padding, dilation


def _batched(input, name):
    if input.ndim == 3:
        return F.unsqueeze(input, 0), True
    if input.ndim != 4:
        raise RuntimeError(f"{name}: expected a 3-D or 4-D input, got shape "
                           f"{list(input.shape)}")
    return input, False


@composite("MaxPool2DWithIndicesBackward0", "input")
def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """The maximum of each window; its gradient goes to the window's first maximum, as
    in PyTorch (padding counts as -inf)."""
    if return_indices:
        raise NotImplementedError("max_pool2d: return_indices=True is not supported")
    kernel, stride, padding, dilation = _pool_args(kernel_size, stride, padding, dilation,
                                                   ceil_mode, "max_pool2d")
    x, unbatched = _batched(input, "max_pool2d")
    cols = F.unfold2d(x, kernel, stride, padding, dilation, value=-math.inf)
    n, c, oh, ow = cols.shape[0], cols.shape[1], cols.shape[4], cols.shape[5]
    flat = F.reshape(cols, (n, c, kernel[0] * kernel[1], oh, ow))
    out = F.squeeze(F.gather(flat, 2, _first_max(flat, kernel[0] * kernel[1])), 2)
    return F.squeeze(out, 0) if unbatched else out


def _first_max(windows, count: int):
    """Per window of [N, C, K, OH, OW], the index along K of its first maximum, a NaN
    counting as the maximum (PyTorch's pools take `val > max || isnan(val)`): K - 1
    comparisons and selects, elementwise ops a trace fuses into one kernel (numpy's
    argmax along an inner dimension costs as much as the rest of a pool)."""
    if count == 1:
        return F.argmax(windows, 2, keepdim=True)
    w = F.detach(windows)
    best, index = w[:, :, 0], None
    for k in range(1, count):
        v = w[:, :, k]
        take = (v > best) | (v != v)
        best = F.where(take, v, best)
        index = F.where(take, k, 0 if index is None else index)
    return F.unsqueeze(index, 2)


@composite("AvgPool2DBackward0", "input")
def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """The mean of each window (padding counts as zeros in it, as PyTorch's default)."""
    kernel, stride, padding, _ = _pool_args(kernel_size, stride, padding, 1, ceil_mode,
                                            "avg_pool2d")
    if not count_include_pad and padding != (0, 0):
        raise NotImplementedError("avg_pool2d: count_include_pad=False with padding is not "
                                  "supported")
    x, unbatched = _batched(input, "avg_pool2d")
    cols = F.unfold2d(x, kernel, stride, padding, (1, 1))
    out = F.sum(cols, (2, 3)) / (divisor_override or kernel[0] * kernel[1])
    return F.squeeze(out, 0) if unbatched else out


def adaptive_avg_pool2d(input, output_size):
    """Average over PyTorch's adaptive bins: bin i of n over a size H spans
    [floor(i H / n), ceil((i + 1) H / n))."""
    x, unbatched = _batched(input, "adaptive_avg_pool2d")
    h, w = int(x.shape[2]), int(x.shape[3])
    oh, ow = _pair(output_size, "output_size")
    oh, ow = oh or h, ow or w
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
    for i in range(oh):
        y0, y1 = (i * h) // oh, -((-(i + 1) * h) // oh)
        cols = [F.mean(x[:, :, y0:y1, (j * w) // ow:-((-(j + 1) * w) // ow)], (2, 3),
                       keepdim=True) for j in range(ow)]
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
        from ..tensor.creation import ones

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
        from ..tensor.creation import zeros

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
        from ..tensor.creation import zeros

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
