"""Optimizer base: parameter groups, zero_grad, state_dict."""
from __future__ import annotations


class Optimizer:
    def __init__(self, params, defaults: dict):
        self.defaults = defaults
        self.state: dict = {}
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(params[0], dict):
            params = [{"params": params}]
        self.param_groups = []
        for group in params:
            g = dict(defaults)
            g.update(group)
            g["params"] = list(g["params"])
            self.param_groups.append(g)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    if set_to_none:
                        p.grad = None
                    else:
                        p.grad = p.grad.detach()
                        p.grad.zero_()

    def step(self, closure=None):
        raise NotImplementedError
