"""Eager autograd: `backward`, `grad`, `Function`, grad mode, anomaly detection, gradcheck."""
from __future__ import annotations

import contextlib

import numpy as np

from .engine import _root_edge, run_backward
from .function import Function, FunctionCtx
from .gradcheck import GradcheckError, gradcheck
from .grad_mode import (STATE, enable_grad, inference_mode, is_grad_enabled,
                        is_inference_mode_enabled, no_grad, set_grad_enabled)
from .node import AccumulateGrad, Node


def _seq(x):
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _seed_grads(outputs, grads):
    grads = _seq(grads) or [None] * len(outputs)
    if len(grads) != len(outputs):
        raise RuntimeError(f"grad_tensors/grad_outputs has {len(grads)} entries, expected "
                           f"{len(outputs)} (one per output)")
    seeds = []
    for out, g in zip(outputs, grads):
        if g is None:
            if out.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs; "
                                   f"pass `gradient=` for an output of shape {list(out.shape)}")
            d = out._data
            g = _make(np.ones(d.shape, d.dtype))
            if not isinstance(d, np.ndarray):  # the seed lives where the output does
                from ..backends.cuda import memory

                g = _make(memory.to_device(g._data))
        elif tuple(g.shape) != tuple(out.shape):
            raise RuntimeError(f"Mismatch in shape: grad_output has a shape of {list(g.shape)} "
                               f"and output has a shape of {list(out.shape)}")
        seeds.append(g)
    return seeds


def _roots(outputs):
    for i, out in enumerate(outputs):
        if not out.requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not "
                               "have a grad_fn")
    return [_root_edge(o) for o in outputs]


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate gradients of `tensors` into the `.grad` of the leaves they depend on."""
    outputs = _seq(tensors)
    seeds = _seed_grads(outputs, grad_tensors)
    if retain_graph is None:
        retain_graph = create_graph
    if inputs is not None:
        ins = _seq(inputs)
        grads = grad(outputs, ins, seeds, retain_graph, create_graph, allow_unused=True)
        for x, g in zip(ins, grads):
            if g is not None:
                x.grad = g if x.grad is None else x.grad + g
        return
    run_backward(_roots(outputs), seeds, retain_graph, create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=False, materialize_grads=False):
    """Gradients of `outputs` with respect to `inputs`, returned instead of accumulated.

    >>> x = tj.tensor(3.0, requires_grad=True)
    >>> (dx,) = tj.autograd.grad(x ** 3, x, create_graph=True)   # 27
    >>> tj.autograd.grad(dx, x)                                   # (tensor(18.),)
    """
    outs = _seq(outputs)
    ins = _seq(inputs)
    seeds = _seed_grads(outs, grad_outputs)
    if retain_graph is None:
        retain_graph = create_graph
    keys = []
    for k, x in enumerate(ins):
        if not x.requires_grad:
            raise RuntimeError(f"One of the differentiated Tensors (input {k}) does not require "
                               "grad")
        keys.append((x.grad_fn, x._output_nr) if x.grad_fn is not None
                    else (x._grad_accumulator(), 0))
    capture = {}
    for k, key in enumerate(keys):
        capture.setdefault(key, k)
    results = run_backward(_roots(outs), seeds, retain_graph, create_graph, capture=capture,
                           accumulate=False)
    out = []
    for k, x in enumerate(ins):
        g = results[capture[keys[k]]]
        if g is None:
            if materialize_grads:
                from ..tensor.creation import zeros_like

                g = zeros_like(x)
            elif not allow_unused:
                raise RuntimeError(f"One of the differentiated Tensors (input {k}) appears to "
                                   "not have been used in the graph. Set allow_unused=True if "
                                   "this is the desired behavior.")
        elif not create_graph:
            g = g.detach()
        out.append(g)
    return tuple(out)


@contextlib.contextmanager
def detect_anomaly(check_nan: bool = True):
    """Record where each op ran; backward raises naming the op whose gradient became NaN."""
    prev = STATE.anomaly
    STATE.anomaly = check_nan
    try:
        yield
    finally:
        STATE.anomaly = prev


def set_detect_anomaly(mode: bool) -> None:
    STATE.anomaly = bool(mode)


def _bind(make) -> None:
    global _make
    _make = make


_make = None  # tracejit.tensor.tensor._make, bound by tracejit.tensor

__all__ = ["backward", "grad", "Function", "FunctionCtx", "gradcheck", "GradcheckError",
           "detect_anomaly", "set_detect_anomaly", "no_grad", "enable_grad", "set_grad_enabled",
           "is_grad_enabled", "inference_mode", "is_inference_mode_enabled", "Node",
           "AccumulateGrad"]
