"""`tj.nn.utils`: gradient clipping and sequence packing."""
from __future__ import annotations

from . import rnn
from ...core.modes import no_grad
from ...tensor import functional as F
from ...tensor.creation import tensor
from ...tensor.tensor import Tensor


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False):
    """Scale gradients in place so their joint norm is at most max_norm; returns the norm."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return tensor(0.0)
    with no_grad():
        if norm_type == float("inf"):
            total = F.stack([F.amax(F.abs(g)) for g in grads]).max()
        else:
            total = F.norm(F.stack([F.norm(g, norm_type) for g in grads]), norm_type)
        if error_if_nonfinite and not bool(F.isfinite(total)):
            raise RuntimeError(f"The total norm of order {norm_type} for gradients is "
                               "non-finite, so it cannot be clipped")
        coef = max_norm / (float(total) + 1e-6)
        if coef < 1:
            for g in grads:
                g.mul_(coef)
    return total


__all__ = ["clip_grad_norm_", "rnn"]
