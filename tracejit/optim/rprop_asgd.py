"""Rprop and ASGD with PyTorch's update equations (eager updates)."""
from __future__ import annotations

from ..tensor.functional import where
from .adam_variants import float32
from .adaptive import _zeros
from .optimizer import Optimizer


class Rprop(Optimizer):
    """Resilient backpropagation: each element's step size grows by etas[1] while its
    gradient keeps its sign and shrinks by etas[0] when the sign flips (that step then
    skipped, its gradient taken as 0), clamped to step_sizes; p -= sign(g) * step."""

    def __init__(self, params, lr: float = 1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 foreach: bool | None = None, maximize: bool = False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        super().__init__(params, dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes),
                                      foreach=foreach, maximize=maximize))

    def _update(self, p, g, group: dict, state: dict) -> None:
        if not state:
            state["step"] = 0
            state["prev"] = _zeros(p)
            state["step_size"] = _zeros(p) + group["lr"]
        state["step"] += 1
        (shrink, grow), (low, high) = group["etas"], group["step_sizes"]
        agree = g * state["prev"]
        one, zero = _zeros(g) + 1, _zeros(g)
        factor = where(agree > 0, one * grow, where(agree < 0, one * shrink, one))
        size = state["step_size"]
        size.copy_((size * factor).clamp(low, high))
        g = where(agree < 0, zero, g)
        p.sub_(g.sign() * size)
        state["prev"].copy_(g)


class ASGD(Optimizer):
    """Averaged SGD (Polyak & Juditsky, 1992): p = p (1 - lambd eta) - eta g, with
    eta_t = lr / (1 + lambd lr t)^alpha, and `ax` the running average of p from step t0
    on (before: p itself). eta and the averaging weight mu are kept in float32, as PyTorch
    keeps them."""

    def __init__(self, params, lr: float = 1e-2, lambd: float = 1e-4, alpha: float = 0.75,
                 t0: float = 1e6, weight_decay: float = 0.0, foreach: bool | None = None,
                 maximize: bool = False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize))

    def _update(self, p, g, group: dict, state: dict) -> None:
        if not state:
            state["step"] = 0
            state["eta"] = float32(group["lr"])
            state["mu"] = 1.0
            state["ax"] = _zeros(p)
        state["step"] += 1
        t, lr, lambd, eta = state["step"], group["lr"], group["lambd"], state["eta"]
        if group["weight_decay"]:
            g = g + p * group["weight_decay"]
        p.mul_(1 - lambd * eta)
        p.sub_(g * eta)
        if state["mu"] != 1:
            state["ax"].add_((p - state["ax"]) * state["mu"])
        else:
            state["ax"].copy_(p)
        state["eta"] = float32(lr / (1 + lambd * lr * t) ** group["alpha"])
        state["mu"] = float32(1 / max(1, t - group["t0"]))
