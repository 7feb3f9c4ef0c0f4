"""One backward node, as PyTorch shows it, for a function tracejit composes of primitives.

`F.mse_loss`, `F.softmax`, `F.layer_norm`, linear's addmm ... are compositions of
op-table primitives: that is what traces record and fuse, and it gives one
definition of every derivative. PyTorch's graph has one node for each
(`MseLossBackward0`, `AddmmBackward0`), and users walk `grad_fn.next_functions`
expecting those. `composite(name, *params)` gives a composed function's output a
node named as PyTorch's whose `next_functions` lists the parameters' edges.

The primitives' nodes stay in the graph underneath: the composite node's only
engine edge leads to the composition's own output node, and its backward passes the
gradient through. So gradients, hooks on the inputs, in-place checks, freed-graph
errors and higher-order gradients are exactly the primitives' (nothing is
recomputed), and the cost is one pass-through node. Traces and scripted programs
call the composition directly and record the primitives.
"""
from __future__ import annotations

import functools
import inspect

from ..core import events
from ..core.events import ACTIVE as _EVENTS
from ..core.modes import STATE
from .dispatch import cast_inputs
from .node import Node
from .tensor import Tensor

_NO_EDGE = (None, 0)
_CLASSES: dict = {}


class CompositeNode(Node):
    """Shows a composition as one node; the engine runs the primitives beneath it."""
    __slots__ = ("_shown",)

    def __init__(self, inner, shown):
        Node.__init__(self, (inner,))
        self._shown = shown  # the parameters' edges, as PyTorch's node lists them

    @property
    def next_functions(self) -> tuple:
        return self._shown

    def apply(self, grads):
        return grads


def _autocast(category, where, args, kwargs):
    """The call's `params` cast as autocast `category` asks (tracejit.amp)."""
    args = list(args)
    for i, p, _default in where:
        if i < len(args):
            args[i] = cast_inputs(category, (args[i],))[0]
        elif p in kwargs:
            kwargs = dict(kwargs)
            kwargs[p] = cast_inputs(category, (kwargs[p],))[0]
    return tuple(args), kwargs


def composite_class(name: str) -> type:
    cls = _CLASSES.get(name)
    if cls is None:
        cls = _CLASSES[name] = type(name, (CompositeNode,), {"__slots__": ()})
    return cls


def composite(name: str | None, *params: str, autocast: str | None = None):
    """Decorate a composed function: in eager autograd its output's node is `name`,
    whose `next_functions` has one entry per parameter in `params`, in that order (a
    parameter holding a list of tensors gives one per tensor; None or a tensor that
    does not require grad gives `(None, 0)`). `autocast` is the function's category
    under tracejit.amp (its `params` are cast on entry); with `name` None the function
    only has the category."""
    def deco(fn):
        sig = inspect.signature(fn)
        names = list(sig.parameters)
        where = [(names.index(p), p, sig.parameters[p].default) for p in params]
        cls = composite_class(name) if name is not None else None

        event = "aten::" + fn.__name__.lstrip("_")

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if _EVENTS[0]:
                with events.span(event, "cpu_op"):
                    return _body(args, kwargs)
            return _body(args, kwargs)

        def _body(args, kwargs):
            if autocast is not None and STATE.modes.autocast is not None:
                args, kwargs = _autocast(autocast, where, args, kwargs)
            out = fn(*args, **kwargs)
            if cls is None or STATE.capture is not None or not isinstance(out, Tensor):
                return out
            inner = out.grad_fn
            if inner is None:
                return out
            shown = []
            for i, p, default in where:
                v = args[i] if i < len(args) else kwargs.get(p, default)
                for t in (v if isinstance(v, (list, tuple)) else (v,)):
                    if t is out:  # the composition passed an input through
                        return out
                    if isinstance(t, Tensor) and t._rg:
                        f = t.grad_fn
                        shown.append((f, t._output_nr) if f is not None
                                     else (t._grad_accumulator(), 0))
                    else:
                        shown.append(_NO_EDGE)
            out.grad_fn = cls((inner, out._output_nr), tuple(shown))
            out._output_nr = 0
            return out

        def cast_entry(inner):
            """`inner` (the composition as script mode converts it) casting its arguments
            on entry as the wrapper does: the same autocast lists in compiled code."""
            if autocast is None:
                return inner

            @functools.wraps(inner)
            def cast_then_run(*args, **kwargs):
                if STATE.modes.autocast is not None:
                    args, kwargs = _autocast(autocast, where, args, kwargs)
                return inner(*args, **kwargs)
            return cast_then_run

        wrapper.composed = fn  # the composition itself (script mode converts it)
        wrapper.cast_entry = cast_entry
        return wrapper
    return deco
