"""Optimizer base: parameter groups, zero_grad, state_dict / load_state_dict."""
from __future__ import annotations

import copy

import numpy as np

from ..core import dtypes as dt
from ..backends import registry as backends
from ..runtime import memory
from ..tensor.tensor import _make
from ..core.modes import enable_grad, no_grad
from ..capture.trace import trace
from ..tensor.creation import as_tensor, tensor


class Optimizer:
    """Holds param_groups (dicts with 'params' and hyper-parameters) and per-parameter
    state; subclasses implement step()."""

    def __init__(self, params, defaults: dict):
        self.defaults = defaults
        self.state: dict = {}
        self._scratch = None  # the array _scaled writes into (not part of the state)
        self._traces = None   # foreach: the traced update of each group
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(params[0], dict):
            params = [{"params": params}]
        self.param_groups = []
        for group in params:
            self.add_param_group(group)

    def add_param_group(self, group: dict) -> None:
        g = dict(self.defaults)
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
        """Update every parameter with a gradient; `closure` re-evaluates the loss.

        A group whose parameters all have their state (after the first step) is updated
        by one traced call of `_fused` over all of them (`foreach`, as PyTorch's
        multi-tensor optimizers): one kernel per parameter in one host program instead
        of a dozen eager ops each, with the step's numbers (learning rate, bias
        corrections) passed as 0-dim tensors so that one trace serves every step. The
        kernels give the eager update's bits. `foreach=False` keeps the eager loop."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        pool = memory.enter_pool()  # the update's arrays: tracejit's buffer pool
        try:
            with no_grad():
                for index, group in enumerate(self.param_groups):
                    params = [p for p in group["params"] if p.grad is not None]
                    if params and self._fused_step(index, group, params):
                        continue
                    for p in params:
                        g = -p.grad if group.get("maximize") else p.grad
                        self._update(p, g, group, self.state.setdefault(p, {}))
        finally:
            memory.leave_pool(pool)
        return loss

    def _update(self, p, grad, group: dict, state: dict) -> None:
        raise NotImplementedError

    # ---- foreach: one traced update of a group's parameters --------------------------
    # the group settings `_numbers` passes to each fused step as its inputs, not as the
    # trace's constants: a learning-rate schedule, and OneCycleLR/CyclicLR's momentum or
    # beta1 cycling, change them every step (their zeros still key the trace: a zero
    # momentum is another update)
    step_settings: tuple = ("lr",)

    def _numbers(self, group: dict, states: list):
        """The step's numbers for `_fused` (a tuple of floats), advancing the states'
        step counts; None when the group cannot take a fused step now (a state not made
        yet: the first step is eager)."""
        return None

    def _fused(self, params, grads, buffers, numbers, group: dict) -> None:
        """The update of every parameter of a group, in place, in tracejit ops: `buffers`
        lists each parameter's state tensors, `numbers` are 0-dim float64 tensors."""
        raise NotImplementedError

    def _buffers(self, state: dict) -> list:
        """A parameter's state tensors, in the order `_fused` reads them."""
        return []

    def _fused_step(self, index: int, group: dict, params: list) -> bool:
        # (on the interpreter a traced update runs the same ops one by one: no gain)
        if group.get("foreach") is False or group.get("maximize") or \
                backends.resolve(backends.AUTO) == "interpret" or any(
                type(p._data) is not np.ndarray or p.grad is None or
                type(p.grad._data) is not np.ndarray for p in params):
            return False
        # the settings a schedule changes every step are the trace's inputs (`_numbers`);
        # the others are its constants: new settings, new trace
        key = (index, tuple((k, _zeros(v) if k in self.step_settings else v)
                            for k, v in sorted(group.items())
                            if k not in ("params", "initial_lr")))
        try:
            hash(key)
        except TypeError:  # a setting that is a list or a tensor: the eager loop
            return False
        states = [self.state.setdefault(p, {}) for p in params]
        numbers = self._numbers(group, states)  # (advances the states' step counts)
        if numbers is None:
            return False
        numbers = tuple(tensor(x, dtype=dt.float64) for x in numbers)
        args = (params, [p.grad for p in params], [self._buffers(st) for st in states],
                numbers)
        fused = self._traces.get(key) if self._traces is not None else None
        if fused is None:
            if self._traces is None:
                self._traces = {}
            scratch = ([p.detach().clone().requires_grad_(p.requires_grad) for p in params],
                       args[1],
                       [[b.clone() for b in bs] for bs in args[2]], numbers)

            def update(params, grads, buffers, numbers, group=group):
                self._fused(params, grads, buffers, numbers, group)
            # traced on copies: recording runs the update, which must happen once
            fused = self._traces[key] = trace(update, scratch)
        fused(*args)
        return True

    def _scaled(self, d, factor: float):
        """d * factor, written into one scratch array the updates share. A fresh
        temporary of a parameter's size, freed each step, makes glibc hand memory back
        to the system, and then every activation and gradient of the next step faults its
        pages in again (measured: an MLP step 1.24x slower than with this buffer)."""
        a = d._data
        if not isinstance(a, np.ndarray):  # a CUDA parameter: computed on the device
            return d * factor
        scratch = self._scratch
        if scratch is None or scratch.size < a.size or scratch.dtype != a.dtype:
            size = a.size if scratch is None else max(a.size, scratch.size)
            scratch = self._scratch = np.empty(size, a.dtype)
        out = scratch[:a.size].reshape(a.shape)
        np.multiply(a, factor, out=out)
        return _make(out)

    def state_dict(self) -> dict:
        """{'state': {index: {name: value}}, 'param_groups': [{..., 'params': [index]}]}
        with parameters numbered in group order, as PyTorch does."""
        index, groups = {}, []
        for group in self.param_groups:
            ids = []
            for p in group["params"]:
                index.setdefault(id(p), len(index))
                ids.append(index[id(p)])
            groups.append({**{k: v for k, v in group.items() if k != "params"}, "params": ids})
        state = {}
        for group in self.param_groups:
            for p in group["params"]:
                if p in self.state:
                    state[index[id(p)]] = {k: (v.clone() if hasattr(v, "clone") else v)
                                           for k, v in self.state[p].items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups) or any(
                len(g["params"]) != len(mine["params"]) for g, mine in zip(groups,
                                                                         self.param_groups)):
            raise ValueError("loaded state dict has a different number of parameter groups or "
                             "parameters than this optimizer")
        params = {}
        for g, mine in zip(groups, self.param_groups):
            for i, p in zip(g["params"], mine["params"]):
                params[i] = p
            mine.update({k: copy.deepcopy(v) for k, v in g.items() if k != "params"})
        self.state = {}
        for i, st in state_dict["state"].items():
            p = params[int(i)]
            self.state[p] = {k: (as_tensor(v).to(p.dtype).clone()
                                 if hasattr(v, "shape") and getattr(v, "ndim", 0) > 0
                                 else (v.item() if hasattr(v, "item") else v))
                             for k, v in st.items()}


def _zeros(value):
    """Which parts of a setting are zero (what a trace of the update depends on)."""
    return tuple(v == 0 for v in value) if isinstance(value, (tuple, list)) else value == 0
