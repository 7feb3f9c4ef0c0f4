"""Eager dispatch: run an op-table entry on tensors, record autograd history.

Every tensor operation funnels through `apply` (out-of-place) or
`apply_inplace`; tracing hooks in here too, so what is traced is exactly what
eager execution does.
"""
from __future__ import annotations

import threading
import weakref

import numpy as np

from ..core import dtypes as dt
from ..core.modes import STATE, set_grad, SPECIAL_THREADS as _SPECIAL
from .node import FRESH_VIEW, STALE_VIEWS, Node, mark_stale, node_class, take_stale
from ..core.diagnostics import PACKAGE_DIR, user_frame, user_stacklevel  # noqa: F401
from ..core.float_errors import quiet, restore
from ..core.symbolic import SymInt
from ..ops import OPS
from ..ops.registry import ELEMENTWISE, FLOAT, LOGICAL
from ..ops.rules import aval_of
from .tensor import Tensor, _make
from . import device as _device  # the CUDA step (it imports this module)
from ..backends.cuda.memory import ACTIVE as _DEVICES  # [True] once a CUDA tensor exists
from ..core import events
from ..core.events import ACTIVE as _EVENTS
from ..backends.cuda import memory
from ..core.lazy import lazy

_copy_slices = lazy("tracejit.tensor.copy_slices")  # (it imports this module)

_SKIP = [False]  # the next apply is the one `_profiled` is timing

_ndarray = np.ndarray
_from_np = dt._BY_NP
# Python scalars as operands; a size outside a recording (the eager iterations that finish a
# scripted loop, reading a size taken before it) is the int it stands for
_SCALAR_CATEGORY = {bool: 0, int: 1, float: 2, SymInt: 1}
_PACKAGE_DIR = PACKAGE_DIR


def _compute_dtype(op, args, attrs=None):
    """The dtype an elementwise op computes in (PyTorch promotion), or None if no cast."""
    rule = op.dtype_rule
    if op.promote_attrs and attrs:
        args = tuple(args) + tuple(attrs[k] for k in op.promote_attrs
                                   if attrs.get(k) is not None)
    if rule is LOGICAL or rule == "cast":
        return None
    d = None
    scalar_cat = -1
    mixed = False
    operands = args[1:] if rule == "where" else args
    for a in operands:
        if isinstance(a, Tensor):
            ad = a._data.dtype
            if d is None:
                d = ad
            elif ad != d:
                mixed = True
        else:
            c = _SCALAR_CATEGORY.get(type(a), 1 if isinstance(a, int) else 2)
            if c > scalar_cat:
                scalar_cat = c
    if d is None:
        return None
    if mixed or scalar_cat > 0:
        ct = dt.result_type(*operands)
    else:
        ct = _from_np[d]
    if rule is FLOAT and ct.category != 2:
        ct = dt.default_float
    return ct


def _arrays(op, args, attrs=None) -> list:
    """The numpy operands of an op, cast to its compute dtype where promotion asks."""
    ct = _compute_dtype(op, args, attrs) if op.kind is ELEMENTWISE else None
    if ct is None:
        return [a._data if isinstance(a, Tensor) else a.hint if type(a) is SymInt else a
                for a in args]
    npd = ct.np
    first = 1 if op.dtype_rule == "where" else 0  # where's condition keeps its dtype
    out = []
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            a = a._data
            if i >= first and a.dtype != npd:
                a = a.astype(npd)
        elif type(a) is SymInt:
            a = a.hint
        out.append(a)
    return out


def _explain(op, args, attrs, err):
    """Re-raise a numpy failure as the op's own shape/dtype error when it has one."""
    try:
        op.infer(*[aval_of(a) for a in args], **attrs)
    except (ValueError, TypeError, IndexError, RuntimeError) as clear:
        raise clear.with_traceback(None) from None
    raise err


# what eager execution runs for an op with a loop nest (ops/registry.Loops): set at import
# to backends.eager_impl (the CPU backend's compiled nest where it is the default)
EAGER_LOOPS: list = [lambda op: op.impl]


def apply(op, *args, **attrs) -> Tensor:
    """Run `op` on tensors/scalars eagerly; record a backward node when needed.

    The one chain every eager op goes through, in this order: profile (an event when a
    profiler listens), refresh stale views, autocast (cast the inputs as the op's category
    asks), capture (a trace being recorded takes the op), device (CUDA tensors compute on
    the device), compute (the op table's impl on arrays), record (a node when grad mode
    is on and an input requires grad), mark views. `unary` and `binary` are a cache of
    this chain for the common case: they take the op only when every step before compute
    has nothing to do, and otherwise call this."""
    if _EVENTS[0]:  # a profiler listens (core/events.py)
        if _SKIP[0]:
            _SKIP[0] = False
        else:
            return _profiled(op, args, attrs, apply, events.aten_name(op))
    if STALE_VIEWS:  # a view used after a write into its base
        _fresh_args(args)
    if STATE.modes.autocast is not None and op.autocast is not None:  # tracejit.amp
        args = cast_inputs(op.autocast, args)
    if STATE.capture is not None:  # tracing: run eagerly on concrete values, record IR
        return STATE.capture.apply(op, args, attrs)
    on_device = _device if _DEVICES[0] and _device.on_device(args) else None
    if on_device is not None:  # computed there; views are copies so far (device.py)
        try:
            out = on_device.compute(op, args, attrs)
        except (ValueError, TypeError, IndexError) as err:  # as clear as on the CPU
            _explain(op, args, attrs, err)
    else:
        token = quiet()  # 0/0 = nan without numpy's warning (core/float_errors.py)
        try:
            impl = op.impl if op.loops is None else EAGER_LOOPS[0](op)
            out = impl(*_arrays(op, args, attrs), **attrs)
        except Exception as err:  # noqa: BLE001 — re-raised with a clearer message
            _explain(op, args, attrs, err)
        finally:
            restore(token)
        if type(out) is not _ndarray:
            out = np.asarray(out)
    t = _make(out)
    if STATE.modes.grad_enabled and op.vjp is not None and (out.dtype.kind == "f" or
                                                      out.dtype is dt.BF16_NP):
        for a in args:
            if isinstance(a, Tensor) and a._rg:
                _record(op, args, attrs, t)
                break
    if op.view:
        if on_device is not None:
            on_device.VIEWS.add(t, args[0])
        else:
            _mark_view(op, args[0], attrs, t)
    return t


def _profiled(op, args, attrs, fn, name: str):
    """`fn(op, *args, **attrs)` timed as one profiler event (its nested ops are events of
    their own)."""
    want = events.WANT
    shapes = [list(a._data.shape) if isinstance(a, Tensor) else [] for a in args] \
        if want["shapes"] else None
    mem0 = events._memory() if want["memory"] else None
    stack = user_frame() if want["stack"] else None
    start = events.now()
    _SKIP[0] = True
    try:
        return fn(op, *args, **attrs)
    finally:
        _SKIP[0] = False
        events.op_event(name, start, mem0, shapes, stack)


# Fast paths for the common elementwise cases (same dtypes, no promotion needed).
# They compute exactly what `apply` computes and fall back to it for anything else: for
# every op while some thread traces or autocasts (SPECIAL_THREADS, core/modes.py), a
# CUDA tensor exists, a profiler listens or a view is stale.
def unary(op, x: Tensor) -> Tensor:
    a = x._data
    if (op.dtype_rule is FLOAT and a.dtype.kind != "f") or _SPECIAL[0] or _DEVICES[0] or \
            _EVENTS[0] or STALE_VIEWS:
        return apply(op, x)
    token = quiet()
    try:
        out = op.impl(a)
    finally:
        restore(token)
    if type(out) is not _ndarray:
        out = np.asarray(out)
    t = _make(out)
    if x._rg and STATE.modes.grad_enabled and op.vjp is not None and (
            out.dtype.kind == "f" or out.dtype is dt.BF16_NP):
        _record_unary(op, x, t)
    return t


_NO_ATTRS: dict = {}


def binary(op, x: Tensor, y) -> Tensor:
    if _SPECIAL[0] or _DEVICES[0] or _EVENTS[0] or STALE_VIEWS:
        return apply(op, x, y)
    a = x._data
    ty = type(y)
    if ty is float:
        if a.dtype.kind != "f":
            return apply(op, x, y)
        b = y
    elif ty is int:
        if a.dtype.kind not in "fiu" or (op.dtype_rule is FLOAT and a.dtype.kind != "f"):
            return apply(op, x, y)
        b = y
    elif isinstance(y, Tensor):
        b = y._data
        if a.dtype is not b.dtype or (op.dtype_rule is FLOAT and a.dtype.kind != "f"):
            return apply(op, x, y)
    else:
        return apply(op, x, y)
    token = quiet()
    try:
        out = op.impl(a, b)
    except Exception:  # noqa: BLE001 — the general path explains the error
        return apply(op, x, y)
    finally:
        restore(token)
    if type(out) is not _ndarray:
        out = np.asarray(out)
    t = _make(out)
    if (x._rg or (ty is not float and ty is not int and y._rg)) and STATE.modes.grad_enabled \
            and op.vjp is not None and (out.dtype.kind == "f" or out.dtype is dt.BF16_NP):
        _record_binary(op, x, y, t)
    return t


def counter(t: Tensor) -> list:
    """The version counter of `t`, shared with its views (made on first need)."""
    c = t._vc
    if c is None:
        c = t._vc = [0]
    return c


def _edge(a: Tensor):
    fn = a.grad_fn
    if fn is not None:
        return (fn, a._output_nr)
    return (a._grad_accumulator(), 0)


def _save_plan(op, rgs: tuple) -> tuple:
    """Which inputs `op` saves when the inputs' requires_grad flags are `rgs` (cached)."""
    plan = op.save_plans.get(rgs)
    if plan is None:
        when = op.save_when or {}
        plan = op.save_plans[rgs] = tuple(
            i in op.saves and (i not in when or any(rgs[j] for j in when[i]))
            for i in range(len(rgs)))
    return plan


def _edge_of(a: Tensor):
    fn = a.grad_fn
    return (fn, a._output_nr) if fn is not None else (a._grad_accumulator(), 0)


def _finish_node(op, out: Tensor, edges, saved, versions, attrs, metas) -> Node:
    out_data = None
    if op.save_out:
        c = out._vc
        if c is None:
            c = out._vc = [0]
        versions.append((c, c[0]))
        out_data = out._data
    node = (op.node_cls or node_class(op))(edges, saved, versions, attrs, metas, out_data)
    if STATE.modes.anomaly:
        node.extras().where = (op.name, user_frame())
    out._rg = True
    out.grad_fn = node
    return node


def _version_of(a: Tensor) -> tuple:
    c = a._vc
    if c is None:
        c = a._vc = [0]
    return (c, c[0])


def _record(op, args, attrs, out: Tensor) -> Node:
    """Give `out` a backward node of `op` with edges to the inputs' history."""
    rgs = tuple(isinstance(a, Tensor) and a._rg for a in args)
    plan = _save_plan(op, rgs)
    edges, saved, metas, versions = [], [], [], []
    for a, rg, save in zip(args, rgs, plan):
        if isinstance(a, Tensor):
            d = a._data
            edges.append(_edge_of(a) if rg else _NO_EDGE)
            metas.append((d.shape, d.dtype, rg))
            if save:
                saved.append(a)
                versions.append(_version_of(a))
            else:
                saved.append(None)
        else:
            edges.append(None)
            metas.append(None)
            saved.append(a)
    return _finish_node(op, out, edges, saved, versions, attrs, metas)


def _record_unary(op, x: Tensor, out: Tensor) -> Node:
    d = x._data
    versions = []
    if op.saves:
        saved = [x]
        versions.append(_version_of(x))
    else:
        saved = [None]
    return _finish_node(op, out, [_edge_of(x)], saved, versions, _NO_ATTRS,
                        [(d.shape, d.dtype, True)])


def _record_binary(op, x: Tensor, y, out: Tensor) -> Node:
    """`_record` for the binary fast path, unrolled (it runs once per recorded op)."""
    xd = x._data
    xrg = x._rg
    versions = []
    if type(y) is float or type(y) is int:
        plan = op.save_plans.get((xrg, False)) or _save_plan(op, (xrg, False))
        if plan[0]:
            versions.append(_version_of(x))
        if xrg:
            fn = x.grad_fn
            ex = (fn, x._output_nr) if fn is not None else (x._grad_accumulator(), 0)
        else:
            ex = _NO_EDGE
        edges = [ex, None]
        metas = [(xd.shape, xd.dtype, xrg), None]
        saved = [x if plan[0] else None, y]
    else:
        yd = y._data
        yrg = y._rg
        plan = op.save_plans.get((xrg, yrg)) or _save_plan(op, (xrg, yrg))
        edges = [_edge_of(x) if xrg else _NO_EDGE, _edge_of(y) if yrg else _NO_EDGE]
        metas = [(xd.shape, xd.dtype, xrg), (yd.shape, yd.dtype, yrg)]
        saved = [x if plan[0] else None, y if plan[1] else None]
        if plan[0]:
            versions.append(_version_of(x))
        if plan[1]:
            versions.append(_version_of(y))
    return _finish_node(op, out, edges, saved, versions, _NO_ATTRS, metas)


_NO_EDGE = (None, 0)


def _mark_view(op, src: Tensor, attrs, t: Tensor):
    ob = t._data.base
    x = src._data
    if ob is None or not (ob is x or ob is x.base):
        return
    if src._base is None:
        t._base, t._view = src, ((op, attrs),)
    else:
        t._base, t._view = src._base, src._view + ((op, attrs),)
    t._vc = counter(src)
    # the base knows its live views: a write through one of them (or into the base)
    # gives each of the others a history that reads the new value (_refresh_views). A
    # view made under no_grad keeps none (PyTorch refuses to give it one)
    if not STATE.modes.grad_enabled:
        return
    base = t._base
    views = getattr(base, "_views", None)
    if views is None:
        views = base._views = _Views()
    views.append(_weakref(t))
    if len(views) >= views.limit:
        views.sweep()


class _Views(list):
    """A base's live views as plain weak references. Not a WeakSet: its add and the
    removal callback when a view dies cost as much as making the view. The dead
    references are dropped when the list has grown to twice the live ones (plus 8) since
    the last sweep, so appending stays O(1) amortised and the list within twice the live
    views. Threads may make views of one base at once: appends take no lock (a list's
    append is atomic), a sweep takes one and rewrites only the part it read, so a view
    appended meanwhile is kept."""
    __slots__ = ("limit",)

    def __init__(self):
        super().__init__()
        self.limit = 8

    def sweep(self):
        with _SWEEP_LOCK:
            n = len(self)
            self[:n] = [r for r in self[:n] if r() is not None]
            self.limit = 2 * len(self) + 8

    def alive(self):
        return [v for r in self if (v := r()) is not None]


_weakref = weakref.ref
_SWEEP_LOCK = threading.Lock()


# ---- in-place -----------------------------------------------------------------------------

def apply_inplace(op, target: Tensor, *others, **attrs) -> Tensor:
    """`target.op_(...)`: write op(target, *others) into target's memory.

    Autograd sees the write as a new value of `target` (and, for a view, of its
    base, through `CopySlices`); the version counter makes stale saved tensors
    raise at backward.
    """
    if _EVENTS[0]:
        if _SKIP[0]:
            _SKIP[0] = False
        else:
            return _profiled(op, (target,) + others, attrs,
                             lambda op, t, *o, **a: apply_inplace(op, t, *o, **a),
                             events.aten_name(op) + "_")
    if STALE_VIEWS:
        _fresh_args((target,) + others)
    if STATE.capture is not None:
        return STATE.capture.apply_inplace(op, target, others, attrs)
    args = (target,) + others
    if _DEVICES[0] and _device.on_device(args):
        return _device_inplace(op, target, args, attrs, _device)
    record = STATE.modes.grad_enabled and op.vjp is not None and any(
        isinstance(a, Tensor) and a._rg for a in args)
    if record:
        _check_inplace_allowed(target)
    pre_version = counter(target)[0]
    if op.inplace is not None:
        old_data = target._data.copy() if (record and 0 in op.saves) else target._data
        token = quiet()
        try:
            op.inplace(*_arrays(op, args), **attrs)
        except Exception as err:  # noqa: BLE001
            _explain(op, args, attrs, err)
        finally:
            restore(token)
    elif not record and type(op.impl) is np.ufunc and not attrs and _writes_in_place(
            op, target, others):
        old_data = target._data  # a ufunc writes straight into the target (no temporary)
        token = quiet()
        try:
            op.impl(*_arrays(op, args), out=target._data)
        finally:
            restore(token)
    else:
        result = apply_no_record(op, args, attrs)
        _check_inplace_result(op, target, result)
        old_data = target._data.copy() if (record and 0 in op.saves) else target._data
        np.copyto(target._data, result, casting="unsafe")
    counter(target)[0] += 1
    if record:
        _rebase_history(op, target, old_data, others, attrs, pre_version)
    return target


def _device_inplace(op, target: Tensor, args, attrs, cuda_eager) -> Tensor:
    """An in-place op on a CUDA tensor: computed on the device, written into the
    target's array (without autograd history yet)."""
    cuda_eager.inplace_check(target)
    if STATE.modes.grad_enabled and op.vjp is not None and any(
            isinstance(a, Tensor) and a._rg for a in args):
        raise NotImplementedError(f"{op.name}_: in-place ops on CUDA tensors that record "
                                  "gradients are not supported yet (use the out-of-place op, "
                                  "or run under tj.no_grad())")
    result = cuda_eager.compute(op, args, attrs)
    if tuple(result.shape) != tuple(target._data.shape):
        raise RuntimeError(f"{op.name}_: output with shape {list(target._data.shape)} doesn't "
                           f"match the broadcast shape {list(result.shape)}")
    if result.dtype != target._data.dtype:
        result = memory.to_device(memory.to_host(result).astype(target._data.dtype))
    target._data.copy_to_device(result)
    counter(target)[0] += 1
    return target


def _writes_in_place(op, target: Tensor, others) -> bool:
    """The op's result has exactly the target's dtype and shape (so `out=` is exact)."""
    d = target._data
    for o in others:
        if isinstance(o, Tensor):
            if o._data.dtype is not d.dtype or o._data.ndim > d.ndim:
                return False
        elif not (type(o) is float and d.dtype.kind == "f"):
            return False
    ct = _compute_dtype(op, (target,) + others)
    return ct is not None and ct.np is d.dtype and \
        np.broadcast_shapes(d.shape, *[o._data.shape for o in others
                                       if isinstance(o, Tensor)]) == d.shape


def apply_no_record(op, args, attrs) -> np.ndarray:
    token = quiet()
    try:
        impl = op.impl if op.loops is None else EAGER_LOOPS[0](op)
        out = impl(*_arrays(op, args, attrs), **attrs)
    except Exception as err:  # noqa: BLE001
        _explain(op, args, attrs, err)
    finally:
        restore(token)
    return out if type(out) is _ndarray else np.asarray(out)


def _check_inplace_allowed(t: Tensor):
    if t.grad_fn is None and t._rg:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation.")
    base = t._base
    if base is not None and base.grad_fn is None and base._rg:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an "
                           "in-place operation.")


def _check_inplace_result(op, target: Tensor, result: np.ndarray):
    if result.shape != target._data.shape:
        raise RuntimeError(f"{op.name}_: output with shape {list(target._data.shape)} doesn't "
                           f"match the broadcast shape {list(result.shape)}")
    rd, td = _from_np[result.dtype], _from_np[target._data.dtype]
    if rd.category > td.category:
        raise RuntimeError(f"{op.name}_: result type {rd.name} can't be cast to the desired "
                           f"output type {td.name}")


def _rebase_history(op, target: Tensor, old_data, others, attrs, pre_version: int):
    old = _make(old_data)
    old._rg, old.grad_fn, old._output_nr = target._rg, target.grad_fn, target._output_nr
    if old_data is target._data:
        old._vc = target._vc
    value = _make(target._data)
    value._vc = target._vc
    if value._data.dtype.kind != "f" and value._data.dtype is not dt.BF16_NP:
        return
    node = _record(op, (old,) + others, attrs, value)
    # inputs are saved as they were before this op wrote (an argument aliasing the
    # target is now stale), the output as it is after
    n_inputs = len(node.versions) - op.save_out
    for i in range(n_inputs):
        if node.versions[i][0] is target._vc:
            node.versions[i] = (target._vc, pre_version)
    base = target._base
    if base is None:
        target.grad_fn, target._rg, target._output_nr = value.grad_fn, True, 0
        _refresh_views(target)
        return
    node = _copy_slices.CopySlices(base, target._view, (value.grad_fn, 0))
    base.grad_fn, base._rg, base._output_nr = node, True, 0
    _refresh_views(base)  # the target's own history among them


def _refresh_views(base: Tensor) -> None:
    """After a write into `base`'s memory, each live view of it is to get a history that
    reads the rewritten base (through its chain of view ops): otherwise a view made
    before the write (a sibling of the view written through) would differentiate its old
    value. Marked now, re-derived when used (`fresh_view`): a write costs nothing per
    live view, and a view never used again costs nothing."""
    views = getattr(base, "_views", None)
    if views:
        for view in views.alive():
            mark_stale(view)


def fresh_view(view: Tensor) -> None:
    """Give a view whose base was written (see _refresh_views) a history reading the
    base as it is now."""
    if not take_stale(view):
        return
    base = view._base
    fresh = _make(base._data)
    fresh.grad_fn, fresh._rg, fresh._output_nr, fresh._vc = \
        base.grad_fn, base._rg, base._output_nr, base._vc
    # made as it would have been at the write: with grad mode on, and outside any trace
    # being recorded (a recorder re-derives views in its graph itself)
    grad, capture = set_grad(True), STATE.capture
    STATE.capture = None
    try:
        for vop, vattrs in view._view:
            fresh = apply(vop, fresh, **vattrs)
    finally:
        set_grad(grad)
        STATE.capture = capture
    view.grad_fn, view._rg, view._output_nr = fresh.grad_fn, fresh._rg, 0


FRESH_VIEW[0] = fresh_view


def _fresh_args(args) -> None:
    for a in args:
        if type(a) is Tensor and id(a) in STALE_VIEWS:
            fresh_view(a)


# ---- autocast: the casts an op's category asks for while a region is active (tracejit.amp) --
def cast_inputs(category: str, args):
    """`args` with each floating tensor cast as `category` asks under the active region
    (lists and tuples of tensors too); other values unchanged."""
    return tuple(_cast_value(category, a) for a in args)


def _cast_value(category, a):
    if isinstance(a, Tensor):
        return _cast_tensor(category, a)
    if isinstance(a, (list, tuple)) and a and isinstance(a[0], Tensor):
        return type(a)(_cast_value(category, x) for x in a)
    return a


def _cast_tensor(category, t):
    d = t.dtype
    if d.category != 2:
        return t
    cuda = type(t._data).__name__ != "ndarray"
    target = STATE.modes.autocast[1 if cuda else 0]
    if target is None:
        return t
    if category == "low":
        if d is target or d is dt.float64:
            return t
        return apply(OPS.cast, t, dtype=target)
    if category == "fp32" or (category == "fp32 cuda" and cuda):
        return apply(OPS.cast, t, dtype=dt.float32) if d in dt.LOW_PRECISION else t
    return t
