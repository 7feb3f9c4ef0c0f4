"""`tj.autograd.Function`: user-defined forward and backward.

`MyFn.apply(*args)` runs `forward` without recording, then gives the outputs a
`MyFnBackward` node that calls the user's `backward`.
"""
from __future__ import annotations

from ..core.modes import STATE, set_grad
from .creation import zeros
from .dispatch import _edge, counter
from .node import FREED_MESSAGE, Node
from .tensor import Tensor, _make


class FunctionCtx:
    """The `ctx` passed to forward and backward."""
    def __init__(self):
        self._saved = ()
        self._versions = ()
        self._freed = False
        self.needs_input_grad = ()
        self.non_differentiable = set()
        self.materialize_grads = True

    def save_for_backward(self, *tensors) -> None:
        self._saved = tensors
        self._versions = tuple((counter(t), counter(t)[0]) if t is not None else None
                               for t in tensors)

    @property
    def saved_tensors(self) -> tuple:
        if self._freed:
            raise RuntimeError(FREED_MESSAGE)
        for i, v in enumerate(self._versions):
            if v is not None and v[0][0] != v[1]:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified "
                    f"by an inplace operation: saved tensor {i} of {self._name} is at version "
                    f"{v[0][0]}; expected version {v[1]} instead.")
        return self._saved

    def mark_non_differentiable(self, *tensors) -> None:
        self.non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors) -> None:
        pass

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = value


class FunctionNode(Node):
    """Backward node of a custom Function; named `<Function>Backward`."""
    __slots__ = ("ctx", "fn", "num_outputs", "out_meta", "in_shapes")

    def apply(self, grads):
        ctx = self.ctx
        if ctx.materialize_grads:
            grads = [g if g is not None else zeros(*m[0], dtype=m[1])
                     for g, m in zip(grads, self.out_meta)]
        result = self.fn.backward(ctx, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        n = len(self.in_shapes)
        if len(result) < n or any(r is not None for r in result[n:]):
            raise RuntimeError(f"function {self.name()} returned an incorrect number of "
                               f"gradients (expected {n}, got {len(result)})")
        for i, (g, shape) in enumerate(zip(result, self.in_shapes)):
            if g is not None and shape is not None and tuple(g.shape) != shape:
                raise RuntimeError(f"Function {self.name()} returned an invalid gradient at "
                                   f"index {i} - got {list(g.shape)} but expected shape "
                                   f"compatible with {list(shape)}")
        return result[:n]

    def release(self):
        self.ctx._freed = True
        self.ctx._saved = ()


_node_classes: dict = {}


class Function:
    """Subclass with static `forward(ctx, *args)` and `backward(ctx, *grads)`; call `.apply`.

    >>> class Square(tj.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x); return x * x
    ...     @staticmethod
    ...     def backward(ctx, g):
    ...         (x,) = ctx.saved_tensors; return 2 * x * g
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("Function subclasses must implement forward")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("Function subclasses must implement backward")

    @classmethod
    def apply(cls, *args):
        ctx = FunctionCtx()
        ctx._name = cls.__name__ + "Backward"
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        if STATE.capture is not None and STATE.modes.grad_enabled and any(ctx.needs_input_grad):
            # its backward is arbitrary Python, which a trace cannot replay: the call
            # finishes eagerly (the trace is dropped, with a warning)
            STATE.capture.unsupported(f"autograd.Function {cls.__name__} (with gradients)")
        prev = set_grad(False)
        try:
            outputs = cls.forward(ctx, *args)
        finally:
            set_grad(prev)
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        if not (prev and any(ctx.needs_input_grad)):
            return outputs
        node_cls = _node_classes.get(cls)
        if node_cls is None:
            node_cls = _node_classes[cls] = type(cls.__name__ + "Backward", (FunctionNode,),
                                                 {"__slots__": ()})
        node = node_cls(tuple((_edge(a) if a._rg else (None, 0)) if isinstance(a, Tensor)
                              else None for a in args))
        node.ctx, node.fn = ctx, cls
        node.in_shapes = [tuple(a.shape) if isinstance(a, Tensor) else None for a in args]
        node.num_outputs = len(outs)
        node.out_meta = [(tuple(o.shape), o.dtype) if isinstance(o, Tensor) else ((), None)
                         for o in outs]
        wrapped = []
        for nr, o in enumerate(outs):
            if isinstance(o, Tensor) and o.is_floating_point() and \
                    id(o) not in ctx.non_differentiable:
                t = _make(o._data)
                t._vc = o._vc
                t._rg, t.grad_fn, t._output_nr = True, node, nr
                wrapped.append(t)
            else:
                wrapped.append(o)
        return wrapped[0] if single else tuple(wrapped)
