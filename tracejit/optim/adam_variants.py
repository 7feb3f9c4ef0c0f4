"""Adamax, NAdam and RAdam with PyTorch's update equations (eager updates)."""
from __future__ import annotations

import numpy as np

from ..tensor.functional import maximum, sqrt
from .adaptive import _zeros
from .optimizer import Optimizer


def _check_adam(lr: float, betas, eps: float, weight_decay: float) -> None:
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


def float32(x: float) -> float:
    """x rounded to float32: scalar state PyTorch keeps in a float32 tensor (its default
    dtype's), rounded as it is there."""
    return float(np.float32(x))


def _decayed(p, g, group: dict):
    """The gradient with L2 weight decay added; with `decoupled_weight_decay`, p shrunk by
    lr * weight_decay in place instead (AdamW's form) and the gradient as it was."""
    wd = group["weight_decay"]
    if not wd:
        return g
    if group.get("decoupled_weight_decay"):
        p.mul_(1 - group["lr"] * wd)
        return g
    return g + p * wd


def _moments(p, state: dict) -> None:
    if not state:
        state["step"] = 0
        state["exp_avg"] = _zeros(p)
        state["exp_avg_sq"] = _zeros(p)


class Adamax(Optimizer):
    """Adam with the infinity norm: m = b1 m + (1 - b1) g;  u = max(b2 u, |g| + eps);
    p -= lr / (1 - b1^t) * m / u."""

    def __init__(self, params, lr: float = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, foreach: bool | None = None, *,
                 maximize: bool = False):
        _check_adam(lr, betas, eps, weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize))

    def _update(self, p, g, group: dict, state: dict) -> None:
        if not state:
            state["step"] = 0
            state["exp_avg"] = _zeros(p)
            state["exp_inf"] = _zeros(p)
        state["step"] += 1
        (b1, b2), eps = group["betas"], group["eps"]
        if group["weight_decay"]:
            g = g + p * group["weight_decay"]
        m = state["exp_avg"].lerp_(g, 1 - b1)
        u = state["exp_inf"]
        u.copy_(maximum(u.mul_(b2), g.abs() + eps))
        p.sub_(m / u * (group["lr"] / (1 - b1 ** state["step"])))


class NAdam(Optimizer):
    """Adam with Nesterov momentum (Dozat, 2016): the momentum coefficient of step t is
    mu_t = b1 (1 - 0.96^(t momentum_decay) / 2), and
    p -= lr (1 - mu_t) / (1 - prod mu) g / d + lr mu_{t+1} / (1 - prod mu * mu_{t+1}) m / d
    with d = sqrt(v / (1 - b2^t)) + eps. The running product of the mu is kept in float32,
    as PyTorch keeps it. `decoupled_weight_decay` decays p directly (NAdamW)."""

    def __init__(self, params, lr: float = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False):
        _check_adam(lr, betas, eps, weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, momentum_decay=momentum_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      foreach=foreach, maximize=maximize))

    def _update(self, p, g, group: dict, state: dict) -> None:
        if not state:
            _moments(p, state)
            state["mu_product"] = 1.0
        state["step"] += 1
        t, lr, (b1, b2), psi = (state["step"], group["lr"], group["betas"],
                                group["momentum_decay"])
        g = _decayed(p, g, group)
        mu = b1 * (1.0 - 0.5 * 0.96 ** (t * psi))
        mu_next = b1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * psi))
        product = state["mu_product"] = float32(state["mu_product"] * float32(mu))
        m = state["exp_avg"].lerp_(g, 1 - b1)
        v = state["exp_avg_sq"].mul_(b2).add_(g * g * (1 - b2))
        denom = sqrt(v / (1 - b2 ** t)) + group["eps"]
        p.add_(g / denom * (-lr * (1.0 - mu) / (1.0 - product)))
        p.add_(m / denom * (-lr * mu_next / (1.0 - product * mu_next)))


class RAdam(Optimizer):
    """Rectified Adam (Liu et al., 2019): while the variance of the adaptive rate is
    intractable (rho_t <= 5) the step is SGD with momentum, p -= lr m / (1 - b1^t);
    after, Adam's step times the rectification r_t. `decoupled_weight_decay` decays p
    directly (RAdamW)."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False):
        _check_adam(lr, betas, eps, weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      foreach=foreach, maximize=maximize))

    def _update(self, p, g, group: dict, state: dict) -> None:
        _moments(p, state)
        state["step"] += 1
        t, lr, (b1, b2) = state["step"], group["lr"], group["betas"]
        g = _decayed(p, g, group)
        m = state["exp_avg"].lerp_(g, 1 - b1)
        v = state["exp_avg_sq"].mul_(b2).add_(g * g * (1 - b2))
        correction2 = 1 - b2 ** t
        corrected = m / (1 - b1 ** t)
        rho_inf = 2 / (1 - b2) - 1
        rho = rho_inf - 2 * t * b2 ** t / correction2
        if rho > 5.0:
            rect = ((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho)) ** 0.5
            adaptive = correction2 ** 0.5 / (sqrt(v) + group["eps"])
            p.sub_(corrected * lr * adaptive * rect)
        else:
            p.sub_(corrected * lr)
