"""Activation checkpointing: keep only a segment's inputs, recompute it in backward."""
from __future__ import annotations

from ..tensor.function import Function
from ..core.modes import enable_grad
from ..ops.creation import GENERATOR
from ..tensor.tensor import Tensor
from ..tensor.node import AccumulateGrad
from ..autograd import grad as autograd_grad


class _Checkpoint(Function):
    @staticmethod
    def forward(ctx, run, rng_state, *args):
        ctx.run, ctx.rng_state = run, rng_state
        ctx.save_for_backward(*[a for a in args if isinstance(a, Tensor)])
        ctx.args = [None if isinstance(a, Tensor) else a for a in args]
        return run(*args)  # forward runs without recording: nothing inside is saved

    @staticmethod
    def backward(ctx, *grads):
        saved = iter(ctx.saved_tensors)
        inputs = [next(saved).detach().requires_grad_(True) if a is None and _needs(ctx, i)
                  else (next(saved).detach() if a is None else a)
                  for i, a in enumerate(ctx.args)]
        outer = GENERATOR.rng.bit_generator.state
        GENERATOR.rng.bit_generator.state = ctx.rng_state  # the same dropout masks
        try:
            with enable_grad():
                outputs = ctx.run(*inputs)
        finally:
            GENERATOR.rng.bit_generator.state = outer
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads) if isinstance(o, Tensor) and
                 o.requires_grad and g is not None]
        wanted = [x for x in inputs if isinstance(x, Tensor) and x.requires_grad]
        params = _leaves_of([o for o, _ in pairs], exclude=wanted)
        got = autograd_grad([o for o, _ in pairs], wanted + params, [g for _, g in pairs],
                            allow_unused=True) if pairs else [None] * (len(wanted) + len(params))
        for p, g in zip(params, got[len(wanted):]):  # parameters used inside the segment
            if g is not None:
                p.grad = g if p.grad is None else p.grad + g
        by_input = iter(got[:len(wanted)])
        return (None, None) + tuple(next(by_input) if isinstance(x, Tensor) and x.requires_grad
                                    else None for x in inputs)


def _needs(ctx, i: int) -> bool:
    return ctx.needs_input_grad[i + 2]


def _leaves_of(outputs, exclude) -> list:
    """Leaf tensors requiring grad that `outputs` depend on (module parameters)."""
    seen, leaves, stack = set(), [], [o.grad_fn for o in outputs if o.grad_fn is not None]
    skip = {id(x) for x in exclude}
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if isinstance(node, AccumulateGrad):
            v = node.variable
            if v is not None and id(v) not in skip:
                leaves.append(v)
            continue
        stack.extend(e[0] for e in node.next_functions if e[0] is not None)
    return leaves


def checkpoint(function, *args, use_reentrant: bool = False, **kwargs):
    """Run `function(*args)` without keeping its intermediate activations; backward
    recomputes them (with the same random draws) and differentiates the recomputation.

    >>> y = tj.utils.checkpoint.checkpoint(block, x)   # block's activations are not saved
    """
    if kwargs:
        raise ValueError(f"checkpoint: unexpected keyword arguments {sorted(kwargs)}")
    return _Checkpoint.apply(function, GENERATOR.rng.bit_generator.state, *args)
