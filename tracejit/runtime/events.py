"""The event bus: timed spans and instants that the profiler (and any other subscriber)
receives. Producers test `ACTIVE[0]` first, so with no subscriber an instrumented path
costs one list lookup; generated host programs have a second, instrumented variant that
runs only while someone listens.

Events are named as the profiler shows them:

    aten::<op>                     an eager op (PyTorch's name for it, see ATEN_NAMES)
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
now = time.perf_counter_ns

# eager ops whose PyTorch name differs from the op table's
ATEN_NAMES = {"cast": "aten::_to_copy", "getitem": "aten::index", "setitem": "aten::index_put_",
              "sum_to": "aten::sum_to_size", "unfold2d": "aten::im2col",
              "fold2d": "aten::col2im", "reshape": "aten::view", "constant": "aten::lift",
              "detach": "aten::detach", "remainder": "aten::remainder",
              "floor_divide": "aten::floor_divide", "tanh_backward": "aten::tanh_backward",
              "sigmoid_backward": "aten::sigmoid_backward",
              "threshold_backward": "aten::threshold_backward"}
_NAMES: dict = {}


def aten_name(op_name: str) -> str:
    name = _NAMES.get(op_name)
    if name is None:
        name = _NAMES[op_name] = ATEN_NAMES.get(op_name, "aten::" + op_name)
    return name


class Event:
    __slots__ = ("name", "cat", "start", "end", "tid", "args", "shapes", "mem", "stack")

    def __init__(self, name, cat, start, end, args=None, shapes=None, mem=None, stack=None):
        self.name, self.cat, self.start, self.end = name, cat, start, end
        self.tid = threading.get_ident()
        self.args, self.shapes, self.mem, self.stack = args, shapes, mem, stack


def subscribe(sink, shapes: bool = False, memory: bool = False, stack: bool = False) -> None:
    _SINKS.append((sink, shapes, memory, stack))
    _refresh()


def unsubscribe(sink) -> None:
    _SINKS[:] = [s for s in _SINKS if s[0] != sink]  # (bound methods compare equal)
    _refresh()


def _refresh() -> None:
    ACTIVE[0] = bool(_SINKS)
    WANT["shapes"] = any(s[1] for s in _SINKS)
    WANT["memory"] = any(s[2] for s in _SINKS)
    WANT["stack"] = any(s[3] for s in _SINKS)


def emit(event: Event) -> None:
    for sink, *_ in list(_SINKS):
        sink(event)


def _memory() -> int:
    from .memory import allocated

    return allocated()


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
