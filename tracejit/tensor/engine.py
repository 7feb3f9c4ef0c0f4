"""The backward engine: runs a backward graph iteratively in dependency order.

Used by `Tensor.backward`, `autograd.backward` and `autograd.grad`. Iterative
(no recursion), so a 100,000-op chain is fine; frees saved tensors after use
unless `retain_graph`.
"""
from __future__ import annotations

import contextlib
import threading

import numpy as np

from ..backends.cuda import memory as device_memory
from ..core.modes import STATE
from ..core import events
from ..runtime import memory
from ..core.events import ACTIVE as _EVENTS
from . import node as _node
from .node import FRESH_VIEW, STALE_VIEWS, AccumulateGrad
from ..core.lazy import lazy

_creation = lazy("tracejit.tensor.creation")  # (it imports this module's importers)


def _root_edge(t):
    if STALE_VIEWS and id(t) in STALE_VIEWS:
        FRESH_VIEW[0](t)
    if t.grad_fn is not None:
        return t.grad_fn, t._output_nr
    if t.requires_grad:
        return t._grad_accumulator(), 0
    raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")


def _discover(roots, targets):
    """Dependency counts of every reachable node, and the nodes that lead to a target.

    `targets` is None for backward() (every node runs) or the set of nodes whose
    gradients autograd.grad captures (only nodes leading to one need to run).
    """
    deps = {}
    if targets is None:  # plain backward: a flat walk is enough
        seen = set(roots)
        stack = list(roots)
        while stack:
            for edge in stack.pop()._edges:
                if edge is None:
                    continue
                child = edge[0]
                if child is None:
                    continue
                if child in seen:
                    deps[child] = deps.get(child, 0) + 1
                else:
                    deps[child] = 1
                    seen.add(child)
                    stack.append(child)
        return deps, None
    needed = {}
    seen = set()
    for root in roots:
        if root in seen:
            continue
        seen.add(root)
        stack = [(root, iter(root._edges))]
        while stack:
            node, it = stack[-1]
            for edge in it:
                if edge is None or edge[0] is None:
                    continue
                child = edge[0]
                deps[child] = deps.get(child, 0) + 1
                if child not in seen:
                    seen.add(child)
                    stack.append((child, iter(child._edges)))
                    break
            else:
                stack.pop()
                # a target's gradient is captured as it arrives: its node itself runs
                # only when another target lies beyond it
                needed[node] = any(
                    e is not None and e[0] is not None and (
                        e[0] in targets or needed.get(e[0], False))
                    for e in node._edges)
    return deps, needed


def _anomaly_check(node, grads):
    for i, g in enumerate(grads):
        if g is not None and g.dtype.is_floating_point and np.isnan(g._data).any():
            where = node._extras.where if node._extras is not None else None
            origin = f" The forward op '{where[0]}' ran at {where[1]}." if where else ""
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th "
                               f"output.{origin}")


def run_backward(roots, root_grads, retain_graph: bool, create_graph: bool,
                 capture: dict | None = None, accumulate: bool = True):
    """Propagate `root_grads` from `roots` ((node, output_nr) pairs).

    capture: {(node, output_nr): slot} — gradients arriving there are returned in a
    list by slot (autograd.grad); accumulate=False skips AccumulateGrad nodes.
    """
    if STATE.capture is not None:
        STATE.capture.unsupported("backward()/autograd.grad()")
    if len(roots) == 1 and roots[0][0].num_outputs == 1:  # the common loss.backward()
        root_nodes = [roots[0][0]]
        buffers: dict = {root_nodes[0]: [root_grads[0]]}
    else:
        buffers = {}
        for (node, nr), g in zip(roots, root_grads):
            buf = buffers.setdefault(node, [None] * node.num_outputs)
            buf[nr] = g if buf[nr] is None else buf[nr] + g
        root_nodes = list(dict.fromkeys(n for n, _ in roots))
    targets = None if capture is None else {n for n, _ in capture}
    deps, needed = _discover(root_nodes, targets if not accumulate else None)
    results = [None] * (len(capture) if capture else 0)
    running = _running()
    running.append(id(results))
    ready = [n for n in root_nodes if deps.get(n, 0) == 0]
    owned: dict = {}  # id -> gradient sum made by this run and held only in `buffers`
    caller = STATE.modes
    anomaly = caller.anomaly
    # backward runs in the dtypes the forward chose (autocast off, as PyTorch's)
    STATE.modes = caller.but(grad_enabled=bool(create_graph), autocast=None)
    pool = memory.enter_pool()  # gradients: tracejit's buffer pool (runtime/memory.py)
    try:
        while ready:
            node = ready.pop()
            grads = buffers.pop(node, None)
            if grads is None:
                grads = [None] * node.num_outputs
            else:
                if owned:  # a sum handed to its node is no longer the engine's alone
                    for g in grads:
                        if owned.pop(id(g), None) is g and type(node) is AccumulateGrad and \
                                node._extras is None:
                            g.__class__ = _node.FreshTensor  # the leaf may keep it as is
                if node._extras is not None:
                    grads = _run_tensor_hooks(node, grads)
            if capture:
                for nr, g in enumerate(grads):
                    slot = capture.get((node, nr))
                    if slot is not None:
                        results[slot] = g
            if len(grads) == 1:
                run = grads[0] is not None
            else:
                run = any(g is not None for g in grads)
            if needed is not None and run:
                run = needed.get(node, False)
            if type(node) is AccumulateGrad:
                if run and accumulate:
                    if _EVENTS[0]:
                        with events.span("autograd::engine::evaluate_function: "
                                         "AccumulateGrad", "cpu_op"):
                            node.apply(grads)
                    else:
                        node.apply(grads)
                    if node._extras is not None and node._extras.post_hooks:
                        var = node.variable  # post-accumulate hooks: hook(tensor)
                        for hook in list(node._extras.post_hooks.values()):
                            hook(var)
                continue
            if run:
                if _EVENTS[0]:
                    with events.span("autograd::engine::evaluate_function: " + node.name(),
                                     "cpu_op"):
                        in_grads = node.apply(grads)
                else:
                    in_grads = node.apply(grads)
                if anomaly:
                    _anomaly_check(node, in_grads)
                if node._extras is not None and node._extras.post_hooks:
                    for hook in list(node._extras.post_hooks.values()):
                        hook(in_grads, grads)
            else:
                in_grads = _NONES * len(node._edges)
            if not retain_graph and run:  # a node that did not run keeps what it saved:
                node.release()            # another backward (beyond grad's inputs) needs it
            for edge, g in zip(node._edges, in_grads):
                if edge is None:
                    continue
                child, nr = edge
                if child is None:
                    continue
                if g is not None:
                    buf = buffers.get(child)
                    if buf is None:
                        if child.num_outputs == 1:
                            buffers[child] = [g]
                        else:
                            buf = buffers[child] = [None] * child.num_outputs
                            buf[nr] = g
                    else:
                        old = buf[nr]
                        buf[nr] = g if old is None else _sum(old, g, owned, create_graph)
                left = deps[child] - 1
                if left:
                    deps[child] = left
                else:
                    ready.append(child)
    finally:
        memory.leave_pool(pool)
        STATE.modes = STATE.modes.but(grad_enabled=caller.grad_enabled,
                                      autocast=caller.autocast)
        running.pop()
        callbacks = _CALLBACKS.pop(id(results), ())
    for fn in callbacks:  # queued during this backward: run once it is done
        fn()
    return results


_NONES = (None,)
_LOCAL = threading.local()  # per thread: the backward passes running, innermost last
_CALLBACKS: dict = {}       # a pass's key -> callbacks to run when it finishes


def _running() -> list:
    running = getattr(_LOCAL, "running", None)
    if running is None:
        running = _LOCAL.running = []
    return running


def queue_callback(fn) -> None:
    """Run `fn()` when the backward pass running now (in this thread) has finished
    (PyTorch's `Variable._execution_engine.queue_callback`: DDP waits for its
    reductions there)."""
    running = _running()
    if not running:
        raise RuntimeError("queue_callback: no backward pass is running")
    _CALLBACKS.setdefault(running[-1], []).append(fn)


def _sum(old, g, owned: dict, create_graph: bool):
    """old + g for two gradients reaching one input; in place into a sum this run made."""
    if create_graph or STATE.capture is not None:  # the sum is recorded
        return old + g
    a, b = old._data, g._data
    if type(a) is not np.ndarray or type(b) is not np.ndarray:
        return old + g  # on a device (or across devices: its error)
    if owned.get(id(old)) is old and a.shape == b.shape and a.dtype == b.dtype:
        np.add(a, b, out=a)
        return old
    if a.dtype != b.dtype:
        return old + g  # promotion rules apply
    out = _node._make(np.asarray(a + b))
    owned[id(out)] = out
    return out


def _run_tensor_hooks(node, grads):
    grads = list(grads)
    for nr, g in enumerate(grads):
        if g is None:
            continue
        ex = node._extras
        if ex.pre_hooks and nr in ex.pre_hooks:
            for hook in list(ex.pre_hooks[nr].values()):
                r = hook(g)
                if r is not None:
                    g = r
            grads[nr] = g
        if ex.retain and nr in ex.retain:
            t = ex.retain[nr]()
            if t is not None:
                gd = g if STATE.modes.grad_enabled else g.detach()
                t.grad = gd.clone() if t.grad is None else t.grad + gd
    return grads


# ---- the entry points: tj.autograd.backward, grad, anomaly mode -----------------------------
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
            g = _node._make(np.ones(d.shape, d.dtype))
            if not isinstance(d, np.ndarray):  # the seed lives where the output does
                g = _node._make(device_memory.to_device(g._data))
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
                g = _creation.zeros_like(x)
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
    prev = STATE.modes.anomaly
    STATE.modes = STATE.modes.but(anomaly=bool(check_nan))
    try:
        yield
    finally:
        STATE.modes = STATE.modes.but(anomaly=prev)


def set_detect_anomaly(mode: bool) -> None:
    STATE.modes = STATE.modes.but(anomaly=bool(mode))
