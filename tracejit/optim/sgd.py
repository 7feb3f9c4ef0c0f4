"""SGD with PyTorch's update equations (momentum, dampening, nesterov, weight decay)."""
from __future__ import annotations

from .optimizer import Optimizer


class SGD(Optimizer):
    """p -= lr * d, where d is the gradient with weight decay, momentum and nesterov applied."""

    step_settings = ("lr", "momentum")  # (OneCycleLR and CyclicLR cycle the momentum)

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, maximize: bool = False,
                 foreach: bool | None = None):
        if lr < 0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize, foreach=foreach))

    def _update(self, p, d, group: dict, state: dict) -> None:
        lr, mom, damp = group["lr"], group["momentum"], group["dampening"]
        if group["weight_decay"]:
            d = d + p * group["weight_decay"]
        if mom:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = d.clone()
            else:
                buf.mul_(mom).add_(self._scaled(d, 1 - damp))
            d = d + buf * mom if group["nesterov"] else buf
        p.sub_(self._scaled(d, lr))

    def _numbers(self, group: dict, states: list):
        if group["momentum"] and any("momentum_buffer" not in st for st in states):
            return None  # the first step makes the buffers (eagerly)
        return group["lr"], group["momentum"]

    def _buffers(self, state: dict) -> list:
        return [state["momentum_buffer"]] if "momentum_buffer" in state else []

    def _fused(self, params, grads, buffers, numbers, group: dict) -> None:
        """`_update`'s equations over every parameter (its buffers made)."""
        (lr, mom), damp = numbers, group["dampening"]
        for p, d, bufs in zip(params, grads, buffers):
            if group["weight_decay"]:
                d = d + p * group["weight_decay"]
            if group["momentum"]:
                bufs[0].mul_(mom).add_(d * (1 - damp))
                d = d + bufs[0] * mom if group["nesterov"] else bufs[0]
            p.sub_(d * lr)
