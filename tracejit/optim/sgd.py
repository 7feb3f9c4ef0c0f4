"""SGD with PyTorch's update equations (momentum, dampening, nesterov, weight decay)."""
from __future__ import annotations

from ..autograd.grad_mode import no_grad
from .optimizer import Optimizer


class SGD(Optimizer):
    """p -= lr * d, where d is the gradient with weight decay, momentum and nesterov applied."""

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, maximize: bool = False):
        if lr < 0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize))

    @no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            from ..autograd.grad_mode import enable_grad

            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, mom, damp = group["lr"], group["momentum"], group["dampening"]
            wd, nesterov = group["weight_decay"], group["nesterov"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                d = p.grad if not group["maximize"] else -p.grad
                if wd:
                    d = d + p * wd
                if mom:
                    state = self.state.setdefault(p, {})
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        buf = state["momentum_buffer"] = d.clone()
                    else:
                        buf.mul_(mom).add_(d * (1 - damp))
                    d = d + buf * mom if nesterov else buf
                p.sub_(d * lr)
        return loss
