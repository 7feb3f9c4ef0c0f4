"""nn.functional's operations that PyTorch also exports at the package's top level
(`torch.conv2d`, `torch.layer_norm`, ...), as `tj.<name>`. Most take the same arguments
there and are the same functions (SAME); a few take them in ATen's order and are
written below (embedding: weight first; batch_norm and instance_norm: weight and bias
before the running statistics; the dropouts: `train`)."""
from __future__ import annotations

from . import functional as F

SAME = ("adaptive_avg_pool1d", "alpha_dropout", "avg_pool1d", "bilinear", "celu", "celu_",
        "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
        "conv_transpose3d", "cosine_similarity", "hardshrink", "max_pool1d", "max_pool2d",
        "max_pool3d", "pairwise_distance", "pixel_shuffle", "pixel_unshuffle", "prelu",
        "rms_norm", "rrelu", "rrelu_", "selu", "selu_", "threshold", "threshold_")


def embedding(weight, indices, padding_idx: int = -1, scale_grad_by_freq: bool = False,
              sparse: bool = False):
    """torch.embedding: the rows of `weight` at `indices` (padding_idx -1: none)."""
    return F.embedding(indices, weight, None if padding_idx == -1 else padding_idx)


def batch_norm(input, weight, bias, running_mean, running_var, training: bool,
               momentum: float, eps: float, cudnn_enabled: bool = True):
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum,
                        eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats: bool,
                  momentum: float, eps: float, cudnn_enabled: bool = True):
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats,
                           momentum, eps)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5,
               cudnn_enable: bool = True):
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input, num_groups: int, weight=None, bias=None, eps: float = 1e-5,
               cudnn_enabled: bool = True):
    return F.group_norm(input, num_groups, weight, bias, eps)


def dropout(input, p: float, train: bool):
    return F.dropout(input, p, train)


def feature_alpha_dropout(input, p: float, train: bool):
    return F.feature_alpha_dropout(input, p, train)


def relu_(input):
    """torch.relu_: relu in place."""
    return input.relu_()


NAMES = SAME + ("relu_", "embedding", "batch_norm", "instance_norm", "layer_norm", "group_norm",
                "dropout", "feature_alpha_dropout")


def names() -> dict:
    """{name: function} for the package's top level."""
    here = globals()
    return {n: here[n] if n in here else getattr(F, n) for n in NAMES}
