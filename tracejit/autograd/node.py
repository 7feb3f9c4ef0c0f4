"""Backward graph nodes: one class per op (`MulBackward0`), AccumulateGrad for leaves.

Eager dispatch creates an `OpNode` per differentiable op; its `apply` calls the
op table's vjp rule, so eager backward, traced backward and higher-order
gradients share one definition of every derivative.
"""
from __future__ import annotations

import weakref

from ..ops.registry import OpDef
from ..ops.rules import Meta
from .grad_mode import STATE

FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved "
    "tensors after they have already been freed). Saved intermediate values of the graph "
    "are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if "
    "you need to backward through the graph a second time or if you need to access saved "
    "tensors after calling backward.")


class RemovableHandle:
    """Returned by `register_hook`; `remove()` unregisters the hook."""

    __slots__ = ("_hooks", "_key")

    def __init__(self, hooks: dict, key):
        self._hooks, self._key = hooks, key

    def remove(self) -> None:
        self._hooks.pop(self._key, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


_hook_ids = iter(range(1 << 62))


class Node:
    """A node of the backward graph. `next_functions` are `(node_or_None, output_nr)`."""

    __slots__ = ("_edges", "_pre_hooks", "_retain", "_post_hooks", "_where", "__weakref__")
    num_outputs = 1

    def __init__(self, edges):
        self._edges = edges
        self._pre_hooks = None   # {output_nr: {id: fn}} tensor hooks on this node's outputs
        self._retain = None      # {output_nr: weakref(tensor)} for retain_grad
        self._post_hooks = None
        self._where = None       # (op description, file:line) under detect_anomaly

    def name(self) -> str:
        return type(self).__name__

    @property
    def next_functions(self) -> tuple:
        return tuple(e for e in self._edges if e is not None)

    def register_hook(self, fn) -> RemovableHandle:
        """fn(grad_inputs, grad_outputs) after this node runs."""
        if self._post_hooks is None:
            self._post_hooks = {}
        key = next(_hook_ids)
        self._post_hooks[key] = fn
        return RemovableHandle(self._post_hooks, key)

    def add_tensor_hook(self, output_nr: int, fn) -> RemovableHandle:
        if self._pre_hooks is None:
            self._pre_hooks = {}
        hooks = self._pre_hooks.setdefault(output_nr, {})
        key = next(_hook_ids)
        hooks[key] = fn
        return RemovableHandle(hooks, key)

    def retain_output(self, output_nr: int, tensor) -> None:
        if self._retain is None:
            self._retain = {}
        self._retain[output_nr] = weakref.ref(tensor)

    def apply(self, grads: list) -> tuple:
        raise NotImplementedError

    def release(self) -> None:
        """Free saved tensors (called after use unless retain_graph)."""

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"


class OpNode(Node):
    """Backward of one op-table primitive; the subclass per op fixes `op`."""

    __slots__ = ("saved", "versions", "attrs", "metas", "out_data", "freed")
    op: OpDef = None

    def __init__(self, edges, saved, versions, attrs, metas, out_data):
        Node.__init__(self, edges)
        self.saved = saved          # inputs the vjp reads (Tensor / scalar), else None
        self.versions = versions    # ((counter, value), ...) of saved tensors, for in-place checks
        self.attrs = attrs
        self.metas = metas          # (shape, dtype, requires_grad) of every tensor input
        self.out_data = out_data    # (array, counter, version) when the op saves its output
        self.freed = False

    def _check_versions(self):
        for i, (counter, value) in enumerate(self.versions):
            if counter is not None and counter[0] != value:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified "
                    f"by an inplace operation: the {'output' if i == len(self.versions) - 1 and self.out_data is not None else 'input'} "
                    f"of '{self.op.name}' ({self.name()}) is at version {counter[0]}; expected "
                    f"version {value} instead. Clone it before modifying it in place, or "
                    "avoid the in-place op.")

    def inputs_for_vjp(self) -> list:
        """Saved inputs as tensors, the rest as shape/dtype stand-ins."""
        out = []
        for s, m in zip(self.saved, self.metas):
            if s is not None or m is None:
                out.append(s)
            else:
                out.append(Meta(*m))
        return out

    def saved_output(self):
        from ..tensor.tensor import Tensor

        if self.out_data is None:
            return None
        t = Tensor._make(self.out_data[0])
        t.requires_grad = True
        t.grad_fn = self
        return t

    def apply(self, grads):
        if self.freed:
            raise RuntimeError(FREED_MESSAGE)
        if self.versions:
            self._check_versions()
        from ..tensor import functional as F

        g = grads[0]
        inputs = self.inputs_for_vjp()
        result = self.op.vjp(g, self.saved_output(), *inputs, **self.attrs)
        out = []
        for gi, m in zip(result, self.metas):
            if gi is not None and m is not None:
                shape, dtype, _ = m
                if gi.shape != shape:
                    gi = F.sum_to(gi, shape)
                if gi.dtype is not dtype:
                    gi = F.cast(gi, dtype)
            out.append(gi)
        return out

    def release(self):
        if self.versions or self.out_data is not None:
            self.freed = True
            self.saved = None
            self.out_data = None


def node_class(op: OpDef) -> type:
    """The backward node class of an op, named like PyTorch's (`MulBackward0`)."""
    if op.node_cls is None:
        op.node_cls = type(op.grad_name, (OpNode,), {"__slots__": (), "op": op})
    return op.node_cls


class AccumulateGrad(Node):
    """Sink of a leaf tensor: adds the incoming gradient into `variable.grad`."""

    __slots__ = ("_variable",)

    def __init__(self, variable):
        Node.__init__(self, ())
        self._variable = weakref.ref(variable)

    @property
    def variable(self):
        return self._variable()

    def apply(self, grads):
        var = self._variable()
        g = grads[0]
        if var is None or g is None:
            return ()
        if not STATE.grad_enabled:
            g = g.detach().clone()  # never alias a gradient another leaf may also hold
        if var.grad is None:
            var.grad = g
        else:
            var.grad = var.grad + g
        return ()
