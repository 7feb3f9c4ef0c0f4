"""Dropout variants beyond F.dropout and F.dropout2d: whole-channel dropout of 1-D and 3-D
feature maps, and alpha dropout (which keeps a SELU network's mean and variance), with
their modules. Masks are drawn from tracejit's generator, and traces record the draw."""
from __future__ import annotations

import warnings

from ..tensor import functional as F
from .module import Module
from ..tensor.creation import rand

__all__ = ["dropout1d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"]

_SELU_ALPHA = 1.7580993408473766  # -(SELU's scale * alpha): the value a dropped unit takes


def _check_p(p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _keep(input, p: float, feature: bool):
    """A mask of kept elements (whole channels input[n, c] with `feature`), float."""
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2) if feature else \
        tuple(input.shape)
    return F.cast(rand(*shape, device=input.device) >= p, input.dtype)


def _channels(input, p: float, training: bool, inplace: bool, batched_rank: int):
    """Channel dropout of [N, C, *] (an input of `batched_rank` dims; any other is read
    as one sample, as PyTorch reads it)."""
    _check_p(p)
    unbatched = input.ndim != batched_rank
    x = F.unsqueeze(input, 0) if unbatched else input
    if not training or p == 0.0:
        return input
    out = x * 0.0 if p == 1.0 else x * _keep(x, p, True) * (1.0 / (1.0 - p))
    out = F.squeeze(out, 0) if unbatched else out
    return F.copy_(input, out) if inplace else out


def dropout1d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero whole channels of [N, C, L] (or unbatched [C, L]) with probability p and scale
    the rest by 1/(1-p), while training."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D "
                           f"input. Note that dropout1d exists to provide channel-wise "
                           f"dropout on inputs with 1 spatial dimension, a channel dimension, "
                           f"and an optional batch dimension (i.e. 2D or 3D inputs).")
    return _channels(input, p, training, inplace, 3)


def dropout3d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero whole channels of [N, C, D, H, W] (or unbatched [C, D, H, W]) with probability
    p and scale the rest by 1/(1-p), while training."""
    if input.ndim not in (4, 5):
        warnings.warn(f"dropout3d: Received a {input.ndim}-D input to dropout3d, which is "
                      "deprecated and will result in an error in a future release. To retain "
                      "the behavior and silence this warning, please use dropout instead. "
                      "Note that dropout3d exists to provide channel-wise dropout on inputs "
                      "with 3 spatial dimensions, a channel dimension, and an optional batch "
                      "dimension (i.e. 4D or 5D inputs).", UserWarning, stacklevel=2)
    return _channels(input, p, training, inplace, 5)


def _alpha(input, p: float, training: bool, inplace: bool, feature: bool):
    _check_p(p)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        out = input * 0.0
    else:
        a = 1.0 / ((_SELU_ALPHA ** 2 * p + 1) * (1 - p)) ** 0.5
        keep = _keep(input, p, feature)
        out = input * keep * a + (keep - 1.0) * (_SELU_ALPHA * a) + _SELU_ALPHA * a * p
    return F.copy_(input, out) if inplace else out


def alpha_dropout(input, p: float = 0.5, training: bool = False, inplace: bool = False):
    """Dropout for SELU networks: dropped elements take SELU's negative saturation value,
    then an affine map restores the mean and variance (PyTorch's constants)."""
    return _alpha(input, p, training, inplace, feature=False)


def feature_alpha_dropout(input, p: float = 0.5, training: bool = False,
                          inplace: bool = False):
    """alpha_dropout of whole channels (input[n, c])."""
    return _alpha(input, p, training, inplace, feature=True)


class _DropoutNd(Module):
    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        _check_p(p)
        self.p, self.inplace = p, inplace

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_DropoutNd):
    def forward(self, input):
        return dropout1d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    def forward(self, input):
        return dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(_DropoutNd):
    def forward(self, input):
        return alpha_dropout(input, self.p, self.training)


class FeatureAlphaDropout(_DropoutNd):
    def forward(self, input):
        return feature_alpha_dropout(input, self.p, self.training)


MODULES = ["Dropout1d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"]
