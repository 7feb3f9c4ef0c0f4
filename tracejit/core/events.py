"""The event bus: timed spans and instants that the profiler (and any other subscriber)
receives. Producers test `ACTIVE[0]` first, so with no subscriber an instrumented path
costs one list lookup; generated host programs have a second, instrumented variant that
runs only while someone listens.

Events are named as the profiler shows them:

    aten::<op>                     an eager op (PyTorch's name for it, see aten_name)
    autograd::engine::evaluate_function: <Node>   a backward node in eager backward
    tracejit::call <fn>            a traced or scripted call, guard checks included
    tracejit::guards <fn>          checking a trace's entry guards
    tracejit::guard_miss <fn>      (instant) no trace fitted; args: the failed guard
    tracejit::trace <fn>           recording a new trace (the call runs eagerly inside)
    tracejit::forward / backward   a compiled part of a traced call
    tracejit::kernel <region>      a fused kernel of a host program, `fused[kind] file:line`
    tracejit::compile <kernel>     Numba compiling a kernel at its first call
    tracejit::cache_load <kernel>  Numba loading a kernel from the disk cache instead
    <name>                         a user's `tj.profiler.record_function(name)`
"""
from __future__ import annotations

import threading
import time


ACTIVE = [False]      # is anyone subscribed?
WANT = {"shapes": False, "memory": False, "stack": False}
_SINKS: list = []
_MEMORY: list = [None]  # the first subscriber's memory counter
now = time.perf_counter_ns

# PyTorch's names for the ops whose table name differs from theirs
_TORCH_NAMES = {"cast": "_to_copy", "getitem": "index", "setitem": "index_put_",
                "sum_to": "sum_to_size", "unfold2d": "im2col", "fold2d": "col2im",
                "reshape": "view", "constant": "lift"}
_NAMES: dict = {}  # OpDef -> its event name


def aten_name(op) -> str:
    """An op's event name: `aten::` and PyTorch's name for it, which is the op table's
    but for the few spelled above (cached per OpDef: it is asked once per profiled op)."""
    name = _NAMES.get(op)
    if name is None:
        name = _NAMES[op] = "aten::" + _TORCH_NAMES.get(op.name, op.name)
    return name


class Event:
    __slots__ = ("name", "cat", "start", "end", "tid", "args", "shapes", "mem", "stack")

    def __init__(self, name, cat, start, end, args=None, shapes=None, mem=None, stack=None):
        self.name, self.cat, self.start, self.end = name, cat, start, end
        self.tid = threading.get_ident()
        self.args, self.shapes, self.mem, self.stack = args, shapes, mem, stack


def subscribe(sink, shapes: bool = False, memory=None, stack: bool = False) -> None:
    """`sink(event)` receives every event; `memory`: a function giving the bytes allocated
    now (each span then records the change), None for no memory statistics."""
    _SINKS.append((sink, shapes, memory, stack))
    _refresh()


def unsubscribe(sink) -> None:
    _SINKS[:] = [s for s in _SINKS if s[0] != sink]  # (bound methods compare equal)
    _refresh()


def _refresh() -> None:
    ACTIVE[0] = bool(_SINKS)
    WANT["shapes"] = any(s[1] for s in _SINKS)
    counters = [s[2] for s in _SINKS if s[2]]
    WANT["memory"] = bool(counters)
    _MEMORY[0] = counters[0] if counters else None
    WANT["stack"] = any(s[3] for s in _SINKS)


def emit(event: Event) -> None:
    for sink, *_ in list(_SINKS):
        sink(event)


def _memory() -> int:
    return _MEMORY[0]()


class span:
    """`with span(name, cat): ...` emits one timed event (only while someone listens)."""

    __slots__ = ("name", "cat", "args", "start", "mem")

    def __init__(self, name: str, cat: str = "tracejit", args: dict | None = None):
        self.name, self.cat, self.args = name, cat, args

    def __enter__(self):
        if ACTIVE[0]:
            self.mem = _memory() if WANT["memory"] else None
            self.start = now()
        else:
            self.start = None
        return self

    def __exit__(self, *exc):
        if self.start is not None and ACTIVE[0]:
            end = now()
            mem = _memory() - self.mem if self.mem is not None else None
            emit(Event(self.name, self.cat, self.start, end, self.args, mem=mem))
        return False


def instant(name: str, cat: str = "tracejit", args: dict | None = None) -> None:
    if ACTIVE[0]:
        t = now()
        emit(Event(name, cat, t, t, args))


def op_event(name: str, start: int, mem0, shapes, stack) -> None:
    """An eager op's event (dispatch measured it)."""
    end = now()
    mem = _memory() - mem0 if mem0 is not None else None
    emit(Event(name, "cpu_op", start, end, None, shapes, mem, stack))
