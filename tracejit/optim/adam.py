"""Adam and AdamW with PyTorch's update equations (bias correction, amsgrad)."""
from __future__ import annotations

import math

from ..tensor.functional import maximum, sqrt
from .optimizer import Optimizer


class Adam(Optimizer):
    """m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
    p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
    weight_decay adds wd * p to g (L2); AdamW decays p directly instead."""

    decoupled = False

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, maximize: bool = False):
        if lr < 0 or eps < 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError(f"invalid Adam hyper-parameters lr={lr}, betas={betas}, eps={eps}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize))

    def _update(self, p, g, group: dict, state: dict) -> None:
        lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        if not state:
            state["step"] = 0
            state["exp_avg"] = p.detach() * 0
            state["exp_avg_sq"] = p.detach() * 0
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = p.detach() * 0
        state["step"] += 1
        t = state["step"]
        if wd:
            if self.decoupled:
                p.mul_(1 - lr * wd)
            else:
                g = g + p * wd
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m.mul_(b1).add_(g * (1 - b1))
        v.mul_(b2).add_(g * g * (1 - b2))
        if group["amsgrad"]:
            state["max_exp_avg_sq"].copy_(maximum(state["max_exp_avg_sq"], v))
            v = state["max_exp_avg_sq"]
        denom = sqrt(v) / math.sqrt(1 - b2 ** t) + eps
        p.sub_(m / denom * (lr / (1 - b1 ** t)))


class AdamW(Adam):
    decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, maximize: bool = False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize)
