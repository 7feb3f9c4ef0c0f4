"""Backward graph nodes: one class per op (`MulBackward0`), AccumulateGrad for leaves.

Eager dispatch creates an `OpNode` per differentiable op; its `apply` calls the
op table's vjp rule, so eager backward, traced backward and higher-order
gradients share one definition of every derivative.
"""
from __future__ import annotations

import weakref

import numpy as np

from ..core import dtypes as _dt
from ..ops.registry import OpDef
from ..ops.rules import Meta
from ..core.modes import STATE

# views whose base was written since their history was made: id -> view (dropped when the
# view dies). Each gets a history that reads the rewritten base when it is next used (as
# an op's input, a backward root, asked whether it requires grad), as PyTorch
# regenerates a view's grad_fn when next read. tensor/dispatch.py marks them and sets
# FRESH_VIEW[0] to the function that re-derives one
# (a plain dict of weak references: its truth is tested on every op's fast path)
STALE_VIEWS: dict = {}
FRESH_VIEW: list = [None]


def mark_stale(view) -> None:
    key = id(view)

    def forget(ref, key=key):
        if STALE_VIEWS.get(key) is ref:
            del STALE_VIEWS[key]

    if key not in STALE_VIEWS:
        STALE_VIEWS[key] = weakref.ref(view, forget)


def take_stale(t) -> bool:
    """Whether `t` is a stale view (it is one no longer once taken)."""
    ref = STALE_VIEWS.get(id(t))
    if ref is None or ref() is not t:
        return False
    del STALE_VIEWS[id(t)]
    return True

_from_np = _dt._BY_NP
_F = None        # tracejit.tensor.functional (bound by tracejit.tensor)
_make = None     # tracejit.tensor.tensor._make (bound by tracejit.tensor)
FreshTensor = None  # tracejit.tensor.tensor.FreshTensor (bound by tracejit.tensor)

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


class NodeExtras:
    """Rarely used per-node state, kept out of line so recording a node stays cheap."""

    __slots__ = ("pre_hooks", "retain", "post_hooks", "where")

    def __init__(self):
        self.pre_hooks = None   # {output_nr: {id: fn}}: tensor hooks on this node's outputs
        self.retain = None      # {output_nr: weakref(tensor)}: retain_grad
        self.post_hooks = None  # {id: fn(grad_inputs, grad_outputs)}
        self.where = None       # (op name, file:line) recorded under detect_anomaly


class Node:
    """A node of the backward graph. `next_functions` are `(node_or_None, output_nr)`."""

    __slots__ = ("_edges", "_extras", "__weakref__")
    num_outputs = 1

    def __init__(self, edges):
        self._edges = edges
        self._extras = None

    def extras(self) -> NodeExtras:
        if self._extras is None:
            self._extras = NodeExtras()
        return self._extras

    def name(self) -> str:
        return type(self).__name__

    @property
    def next_functions(self) -> tuple:
        return tuple(e for e in self._edges if e is not None)

    def register_hook(self, fn) -> RemovableHandle:
        """fn(grad_inputs, grad_outputs) after this node runs."""
        if STATE.capture is not None:  # a compiled backward would not call it
            STATE.capture.unsupported("grad_fn.register_hook()")
        ex = self.extras()
        if ex.post_hooks is None:
            ex.post_hooks = {}
        key = next(_hook_ids)
        ex.post_hooks[key] = fn
        return RemovableHandle(ex.post_hooks, key)

    def add_tensor_hook(self, output_nr: int, fn) -> RemovableHandle:
        ex = self.extras()
        if ex.pre_hooks is None:
            ex.pre_hooks = {}
        hooks = ex.pre_hooks.setdefault(output_nr, {})
        key = next(_hook_ids)
        hooks[key] = fn
        return RemovableHandle(hooks, key)

    def retain_output(self, output_nr: int, tensor) -> None:
        ex = self.extras()
        if ex.retain is None:
            ex.retain = {}
        ex.retain[output_nr] = weakref.ref(tensor)

    def apply(self, grads: list) -> tuple:
        raise NotImplementedError

    def release(self) -> None:
        """Free saved tensors (called after use unless retain_graph)."""

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"


class OpNode(Node):
    """Backward of one op-table primitive; the subclass per op fixes `op`.

    `next_functions` lists what PyTorch's node for the op lists: one entry per input
    its schema differentiates (`op.grad_inputs`), and `(None, 0)` for a Python scalar
    operand where PyTorch wraps the scalar as a tensor (add, mul, where, ...), none
    where the overload takes a Scalar (pow, remainder, rsub: `scalar_edges` False).
    """

    __slots__ = ("saved", "versions", "attrs", "metas", "out_data")
    op: OpDef = None
    scalar_edges = True

    @property
    def next_functions(self) -> tuple:
        shown = self.op.grad_inputs
        scalars = self.scalar_edges and self.op.kind == "elementwise"
        out = []
        for i, e in enumerate(self._edges):
            if shown is not None and i not in shown:
                continue
            if e is None:
                if not scalars:
                    continue
                e = _NO_EDGE
            out.append(e)
        return tuple(out)

    def __init__(self, edges, saved, versions, attrs, metas, out_data):
        self._edges = edges  # Node.__init__ inlined: this runs once per recorded op
        self._extras = None
        self.saved = saved          # inputs the vjp reads (Tensor / scalar), else None
        self.versions = versions    # [(counter, value)] of saved tensors, for in-place checks
        self.attrs = attrs
        self.metas = metas          # (shape, numpy dtype, requires_grad) of each tensor input
        self.out_data = out_data    # the output array, when the op saves its output

    def _check_versions(self):
        n_saved = len(self.versions) - (self.out_data is not None)
        for i, (counter, value) in enumerate(self.versions):
            if counter[0] != value:
                what = "output" if i >= n_saved else "an input"
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified "
                    f"by an inplace operation: {what} of '{self.op.name}' ({self.name()}) is "
                    f"at version {counter[0]}; expected version {value} instead. Clone it "
                    "before modifying it in place, or avoid the in-place op.")

    def apply(self, grads):
        if self.saved is None:  # released after an earlier backward
            raise RuntimeError(FREED_MESSAGE)
        for counter, value in self.versions:
            if counter[0] != value:
                self._check_versions()
        inputs = self.saved
        metas = self.metas
        if self.op.meta_inputs:
            for i, s in enumerate(inputs):
                if s is None and metas[i] is not None:  # the rule reads only its type
                    inputs = [s if s is not None or m is None else
                              Meta(m[0], _from_np[m[1]], m[2]) for s, m in zip(inputs, metas)]
                    break
        out = None
        if self.out_data is not None:
            out = _make(self.out_data)
            if STATE.modes.grad_enabled:  # create_graph: the output keeps its place in the graph
                out._rg, out.grad_fn = True, self
        result = self.op.vjp(grads[0], out, *inputs, **self.attrs)
        fixed = None
        tracing = STATE.capture is not None  # then sizes are symbolic: compare those
        for i, gi in enumerate(result):
            m = metas[i]
            if gi is not None and m is not None:
                d = gi._data
                shape = tuple(gi.shape) if tracing else d.shape
                # ranks first: comparing the sizes of different ranks pairwise would, while
                # tracing, record guards relating unrelated sizes
                reduce = len(shape) != len(m[0]) or shape != m[0]
                if reduce or d.dtype is not m[1]:  # undo broadcasting / promotion
                    if fixed is None:
                        fixed = list(result)
                    if reduce:
                        gi = _F.sum_to(gi, m[0])
                    if gi._data.dtype is not m[1]:
                        gi = _F.cast(gi, _from_np[m[1]])
                    fixed[i] = gi
        return result if fixed is None else fixed

    def release(self):
        if self.versions:
            self.saved = None
            self.out_data = None


_NO_EDGE = (None, 0)


def node_class(op: OpDef) -> type:
    """The backward node class of an op, named like PyTorch's (`MulBackward0`)."""
    if op.node_cls is None:
        op.node_cls = type(op.grad_name, (OpNode,), {"__slots__": (), "op": op,
                                                     "scalar_edges": op.scalar_edges})
    return op.node_cls


_VARIANTS: dict = {}


def rename(t, op: OpDef, name: str, scalar_edges: bool = True):
    """Give `t`'s node of `op` the name PyTorch's overload has (`TBackward0` for `t()`,
    `SumBackward1` for a sum over dims, `RsubBackward1` for `2 - x`): the same op and
    rule under another class name. Returns `t`."""
    fn = t.grad_fn
    if fn is not None and getattr(type(fn), "op", None) is op:
        cls = _VARIANTS.get((op, name, scalar_edges))
        if cls is None:
            cls = _VARIANTS[(op, name, scalar_edges)] = type(
                name, (node_class(op),), {"__slots__": (), "scalar_edges": scalar_edges})
        fn.__class__ = cls
    return t


class AccumulateGrad(Node):
    """Sink of a leaf tensor: adds the incoming gradient into `variable.grad`.

    As in PyTorch, the node holds its leaf (a graph keeps its leaves alive) and the leaf
    holds its node weakly, unless hooks were registered on it (Tensor._grad_accumulator).
    """

    __slots__ = ("variable",)

    def __init__(self, variable):
        Node.__init__(self, ())
        self.variable = variable

    def apply(self, grads):
        var = self.variable
        g = grads[0]
        if var is None or g is None:
            return ()
        if STATE.modes.grad_enabled:  # create_graph: the gradient keeps its history
            var._grad = g if var.grad is None else var.grad + g
        elif not isinstance(g._data, np.ndarray):
            # on a device: out of place, through dispatch (no views of device arrays yet)
            var._grad = g.clone() if var.grad is None else var.grad + g
        elif var.grad is None:
            # never alias an array another leaf may hold, unless nothing else holds it
            var._grad = _make(g._data if type(g) is FreshTensor else
                              g._data.copy())
        else:
            acc, gd = var._grad._data, g._data
            if acc.shape == gd.shape and acc.dtype == gd.dtype and acc.flags.writeable:
                np.add(acc, gd, out=acc)  # in place, as PyTorch accumulates without grad mode
            else:
                var._grad = _make(acc + gd)
        return ()
