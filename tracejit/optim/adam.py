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
    step_settings = ("lr", "betas")  # (OneCycleLR and CyclicLR cycle beta1)

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, maximize: bool = False,
                 foreach: bool | None = None):
        if lr < 0 or eps < 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError(f"invalid Adam hyper-parameters lr={lr}, betas={betas}, eps={eps}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize, foreach=foreach))

    def _update(self, p, g, group: dict, state: dict) -> None:
        if not state:
            state["step"] = 0
            state["exp_avg"] = p.detach() * 0
            state["exp_avg_sq"] = p.detach() * 0
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = p.detach() * 0
        self._math(p, g, *self._buffers(state), self._numbers(group, [state]), group)

    def _numbers(self, group: dict, states: list):
        """(1 - lr * wd, lr / (1 - b1^t), sqrt(1 - b2^t), b1, b2) of the step the states
        take."""
        steps = {st.get("step") for st in states}
        if len(steps) != 1 or None in steps or (
                group["amsgrad"] and "max_exp_avg_sq" not in states[0]):
            return None
        t = steps.pop() + 1
        for st in states:
            st["step"] = t
        lr, (b1, b2), wd = group["lr"], group["betas"], group["weight_decay"]
        return 1 - lr * wd, lr / (1 - b1 ** t), math.sqrt(1 - b2 ** t), b1, b2

    def _buffers(self, state: dict) -> list:
        return [state["exp_avg"], state["exp_avg_sq"]] + (
            [state["max_exp_avg_sq"]] if "max_exp_avg_sq" in state else [])

    def _fused(self, params, grads, buffers, numbers, group: dict) -> None:
        for p, g, bufs in zip(params, grads, buffers):
            self._math(p, g, *bufs, numbers, group)

    def _math(self, p, g, m, v, *rest) -> None:
        """One parameter's update, in place: the step's numbers are floats (eager) or
        0-dim tensors (fused)."""
        *vmax, (decay, step_size, bias_sqrt, b1, b2), group = rest
        eps, wd = group["eps"], group["weight_decay"]
        if wd:
            if self.decoupled:
                p.mul_(decay)
            else:
                g = g + p * wd
        m.mul_(b1).add_(g * (1 - b1))
        v.mul_(b2).add_(g * g * (1 - b2))
        if vmax:
            vmax[0].copy_(maximum(vmax[0], v))
            v = vmax[0]
        denom = sqrt(v) / bias_sqrt + eps
        p.sub_(m / denom * step_size)


class AdamW(Adam):
    decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, maximize: bool = False,
                 foreach: bool | None = None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize, foreach)
