"""Adagrad, RMSprop and Adadelta with PyTorch's update equations (eager updates)."""
from __future__ import annotations

from ..tensor.functional import sqrt
from .optimizer import Optimizer


def _zeros(p):
    return p.detach() * 0


def _check(**values) -> None:
    for name, v in values.items():
        if v < 0:
            raise ValueError(f"Invalid {name.replace('_', ' ')} value: {v}")


class Adagrad(Optimizer):
    """sum += g²;  p -= lr / (1 + (t - 1) lr_decay) * g / (sqrt(sum) + eps)."""

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0.0,
                 weight_decay: float = 0.0, initial_accumulator_value: float = 0.0,
                 eps: float = 1e-10, foreach: bool | None = None, *, maximize: bool = False):
        _check(learning_rate=lr, lr_decay=lr_decay, weight_decay=weight_decay,
               initial_accumulator_value=initial_accumulator_value, epsilon=eps)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      eps=eps, foreach=foreach, maximize=maximize))
        for group in self.param_groups:  # PyTorch makes the state on construction
            for p in group["params"]:
                self.state[p] = {"step": 0, "sum": _zeros(p) + group[
                    "initial_accumulator_value"]}

    def _update(self, p, g, group: dict, state: dict) -> None:
        state["step"] += 1
        if group["weight_decay"]:
            g = g + p * group["weight_decay"]
        clr = group["lr"] / (1 + (state["step"] - 1) * group["lr_decay"])
        state["sum"].add_(g * g)
        p.sub_(g / (sqrt(state["sum"]) + group["eps"]) * clr)


class RMSprop(Optimizer):
    """v = alpha v + (1 - alpha) g²;  p -= lr g / (sqrt(v) + eps), with `centered` taking
    the running mean of g out of v, and `momentum` a buffer of those steps."""

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False,
                 foreach: bool | None = None, maximize: bool = False):
        _check(learning_rate=lr, epsilon=eps, momentum=momentum, weight_decay=weight_decay,
               alpha=alpha)
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered, foreach=foreach,
                                      maximize=maximize))

    def _update(self, p, g, group: dict, state: dict) -> None:
        if not state:
            state["step"] = 0
            state["square_avg"] = _zeros(p)
            if group["momentum"] > 0:
                state["momentum_buffer"] = _zeros(p)
            if group["centered"]:
                state["grad_avg"] = _zeros(p)
        state["step"] += 1
        alpha, eps = group["alpha"], group["eps"]
        if group["weight_decay"]:
            g = g + p * group["weight_decay"]
        v = state["square_avg"].mul_(alpha).add_(g * g * (1 - alpha))
        if group["centered"]:
            mean = state["grad_avg"].mul_(alpha).add_(g * (1 - alpha))
            avg = sqrt(v - mean * mean) + eps
        else:
            avg = sqrt(v) + eps
        if group["momentum"] > 0:
            buf = state["momentum_buffer"].mul_(group["momentum"]).add_(g / avg)
            p.sub_(buf * group["lr"])
        else:
            p.sub_(g / avg * group["lr"])


class Adadelta(Optimizer):
    """v = rho v + (1 - rho) g²;  delta = sqrt(u + eps) / sqrt(v + eps) g;
    u = rho u + (1 - rho) delta²;  p -= lr delta."""

    def __init__(self, params, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0.0, foreach: bool | None = None, *,
                 maximize: bool = False):
        _check(learning_rate=lr, epsilon=eps, weight_decay=weight_decay)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize))

    def _update(self, p, g, group: dict, state: dict) -> None:
        if not state:
            state["step"] = 0
            state["square_avg"] = _zeros(p)
            state["acc_delta"] = _zeros(p)
        state["step"] += 1
        rho, eps = group["rho"], group["eps"]
        if group["weight_decay"]:
            g = g + p * group["weight_decay"]
        v = state["square_avg"].mul_(rho).add_(g * g * (1 - rho))
        delta = sqrt(state["acc_delta"] + eps) / sqrt(v + eps) * g
        state["acc_delta"].mul_(rho).add_(delta * delta * (1 - rho))
        p.sub_(delta * group["lr"])
