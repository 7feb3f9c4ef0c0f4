"""`tj.profiler`, with PyTorch's API: `profile`, `record_function`, `schedule`,
`ProfilerActivity`, `key_averages().table()`, `export_chrome_trace`.

The profiler subscribes to tracejit's event bus (core/events.py, where the event
names are listed): every eager op (`aten::add`, `aten::linear`, ... PyTorch's names),
every node the backward engine runs, and for compiled programs the traced call, its
guard checks and misses, recording a new trace, each op and fused kernel of the host
programs (forward and backward), and Numba compiling or loading each kernel. With no
profiler active each instrumented point costs one list lookup.
"""
from __future__ import annotations

import enum
import functools
import json
import os
import threading
from collections import defaultdict

from ..core import events
from ..runtime import memory

__all__ = ["profile", "record_function", "schedule", "ProfilerActivity", "ProfilerAction",
           "tensorboard_trace_handler"]


class ProfilerActivity(enum.Enum):
    CPU = "CPU"
    CUDA = "CUDA"


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0):
    """PyTorch's schedule: after `skip_first` steps, cycles of `wait` idle steps, `warmup`
    steps recorded and discarded, `active` steps recorded (the last one saves); `repeat`
    cycles (0: forever)."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise ValueError("Invalid profiler schedule arguments")

    def action(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        cycle = wait + warmup + active
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        mod = step % cycle
        if mod < wait:
            return ProfilerAction.NONE
        if mod < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if mod < cycle - 1 else ProfilerAction.RECORD_AND_SAVE
    return action


def _always(step: int) -> ProfilerAction:
    return ProfilerAction.RECORD


class FunctionEvent:
    """One recorded event, with PyTorch's attribute names."""

    def __init__(self, e: events.Event, origin: int):
        self.name, self.key = e.name, e.name
        self.cat = e.cat
        self.start_ns, self.end_ns = e.start - origin, e.end - origin
        self.thread = e.tid
        self.input_shapes = e.shapes
        self.cpu_memory_usage = e.mem or 0
        self.stack = [e.stack] if e.stack else []
        self.args = e.args or {}
        self.cpu_children: list = []
        self.cpu_parent = None

    @property
    def cpu_time_total(self) -> float:  # microseconds, as PyTorch
        return (self.end_ns - self.start_ns) / 1e3

    @property
    def self_cpu_time_total(self) -> float:
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    @property
    def self_cpu_memory_usage(self) -> int:
        return self.cpu_memory_usage - sum(c.cpu_memory_usage for c in self.cpu_children)

    def __repr__(self) -> str:
        return f"<FunctionEvent {self.name} {self.cpu_time_total:.1f}us>"


class EventList(list):
    """Events in start order, with PyTorch's `table` and `key_averages`."""

    def __init__(self, items=(), profile_memory: bool = False, with_shapes: bool = False):
        super().__init__(items)
        self._profile_memory, self._with_shapes = profile_memory, with_shapes

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0):
        groups: dict = defaultdict(list)
        for e in self:
            key = (e.name,)
            if group_by_input_shape:
                key += (str(e.input_shapes or []),)
            if group_by_stack_n:
                key += (tuple(e.stack[:group_by_stack_n]),)
            groups[key].append(e)
        return EventList([FunctionEventAvg(k, v) for k, v in groups.items()],
                         self._profile_memory, group_by_input_shape)

    def table(self, sort_by: str | None = None, row_limit: int = 100, max_name_column_width:
              int = 55, header: str | None = None, top_level_events_only: bool = False) -> str:
        return _table(self, sort_by, row_limit, max_name_column_width, header,
                      self._profile_memory, self._with_shapes, top_level_events_only)

    def total_average(self):
        return FunctionEventAvg(("Total",), list(self))


class FunctionEventAvg:
    """Events of one name (and shapes) summed: PyTorch's key_averages() rows."""

    def __init__(self, key: tuple, evs: list):
        self.key = self.name = key[0]
        self.input_shapes = evs[0].input_shapes if len(key) > 1 else None
        self.count = len(evs)
        self.cpu_time_total = sum(e.cpu_time_total for e in evs)
        self.self_cpu_time_total = sum(e.self_cpu_time_total for e in evs)
        self.cpu_memory_usage = sum(e.cpu_memory_usage for e in evs)
        self.self_cpu_memory_usage = sum(e.self_cpu_memory_usage for e in evs)
        self.cpu_parent = None if any(e.cpu_parent is None for e in evs) else 1

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / max(self.count, 1)

    def __repr__(self) -> str:
        return (f"<FunctionEventAvg key={self.key} self_cpu_time="
                f"{self.self_cpu_time_total:.1f}us cpu_time={self.cpu_time_total:.1f}us>")


def _fmt_time(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _fmt_mem(b: int) -> str:
    for unit, size in (("Gb", 1 << 30), ("Mb", 1 << 20), ("Kb", 1 << 10)):
        if abs(b) >= size:
            return f"{b / size:.2f} {unit}"
    return f"{b} b"


def _table(rows, sort_by, row_limit, width, header, memory, shapes, top_only) -> str:
    rows = [r for r in rows if not top_only or r.cpu_parent is None]
    if sort_by:
        key = sort_by
        if rows and not hasattr(rows[0], key):
            raise AttributeError(f"sort_by={sort_by!r}: events have no such attribute")
        rows = sorted(rows, key=lambda r: getattr(r, key), reverse=True)
    total_self = sum(r.self_cpu_time_total for r in rows) or 1.0
    cols = [("Name", width), ("Self CPU %", 12), ("Self CPU", 12), ("CPU total %", 12),
            ("CPU total", 12), ("CPU time avg", 12)]
    if memory:
        cols += [("CPU Mem", 12), ("Self CPU Mem", 12)]
    cols += [("# of Calls", 12)]
    if shapes:
        cols += [("Input Shapes", 40)]
    sep = "-" * (sum(w for _, w in cols) + 2 * (len(cols) - 1))
    line = "  ".join(
        (f"{n:<{w}}" if i == 0 else f"{n:>{w}}") for i, (n, w) in enumerate(cols))
    out = [header] if header else []
    out += [sep, line, sep]
    for r in rows[:row_limit]:
        name = r.name if len(r.name) <= width else r.name[:width - 3] + "..."
        cells = [f"{name:<{width}}",
                 f"{100 * r.self_cpu_time_total / total_self:.2f}%",
                 _fmt_time(r.self_cpu_time_total),
                 f"{100 * r.cpu_time_total / total_self:.2f}%",
                 _fmt_time(r.cpu_time_total),
                 _fmt_time(r.cpu_time_total / max(getattr(r, 'count', 1), 1))]
        if memory:
            cells += [_fmt_mem(r.cpu_memory_usage), _fmt_mem(r.self_cpu_memory_usage)]
        cells += [str(getattr(r, "count", 1))]
        if shapes:
            cells += [str(r.input_shapes or [])]
        out.append("  ".join(c if i == 0 else f"{c:>{w}}"
                             for i, (c, (_, w)) in enumerate(zip(cells, cols))))
    out += [sep, f"Self CPU time total: {_fmt_time(total_self)}", ""]
    return "\n".join(out)


class profile:
    """`with tj.profiler.profile(activities=[ProfilerActivity.CPU]) as prof: ...`"""

    def __init__(self, activities=None, schedule=None, on_trace_ready=None,
                 record_shapes: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_flops: bool = False,
                 with_modules: bool = False, experimental_config=None,
                 use_cuda: bool | None = None):
        self.activities = set(activities or [ProfilerActivity.CPU])
        self.schedule = schedule or _always
        self.on_trace_ready = on_trace_ready
        self.record_shapes, self.profile_memory = record_shapes, profile_memory
        self.with_stack = with_stack
        self.step_num = 0
        self._raw: list = []
        self._kept: list = []   # the events of the last saved (or current) window
        self._subscribed = False
        self._action = ProfilerAction.NONE
        self._origin = events.now()
        self._lock = threading.Lock()

    # ---- recording ----------------------------------------------------------------------
    def _sink(self, event: events.Event) -> None:
        with self._lock:
            self._raw.append(event)

    def _subscribe(self, on: bool) -> None:
        if on and not self._subscribed:
            events.subscribe(self._sink, self.record_shapes,
                             memory.allocated if self.profile_memory else None, self.with_stack)
        elif not on and self._subscribed:
            events.unsubscribe(self._sink)
        self._subscribed = on

    def start(self) -> None:
        self._enter_action(self.schedule(self.step_num))

    def stop(self) -> None:
        if self._action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self._save()
        self._subscribe(False)
        self._action = ProfilerAction.NONE

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def step(self) -> None:
        """Mark the end of a training step (moves along the schedule)."""
        prev = self._action
        self.step_num += 1
        nxt = self.schedule(self.step_num)
        if prev is ProfilerAction.RECORD_AND_SAVE or (
                prev is ProfilerAction.RECORD and nxt in (ProfilerAction.NONE,
                                                          ProfilerAction.WARMUP)):
            self._save()
        elif prev is ProfilerAction.WARMUP and nxt is not ProfilerAction.WARMUP:
            self._raw = []  # warm-up steps are recorded and dropped
        self._enter_action(nxt)

    def _enter_action(self, action: ProfilerAction) -> None:
        self._action = action
        self._subscribe(action is not ProfilerAction.NONE)

    def _save(self) -> None:
        with self._lock:
            self._kept, self._raw = self._raw, []
        self._events_cache = None
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    # ---- results ------------------------------------------------------------------------
    def events(self) -> EventList:
        cached = getattr(self, "_events_cache", None)
        if cached is not None:
            return cached
        raw = self._kept or self._raw
        evs = [FunctionEvent(e, self._origin) for e in raw]
        evs.sort(key=lambda e: (e.thread, e.start_ns, -e.end_ns))
        stacks: dict = {}
        for e in evs:  # nesting by time on each thread: the innermost enclosing event
            stack = stacks.setdefault(e.thread, [])
            while stack and not (stack[-1].start_ns <= e.start_ns and
                                 e.end_ns <= stack[-1].end_ns):
                stack.pop()
            if stack:
                e.cpu_parent = stack[-1]
                stack[-1].cpu_children.append(e)
            if e.end_ns > e.start_ns:
                stack.append(e)
        evs.sort(key=lambda e: e.start_ns)
        self._events_cache = EventList(evs, self.profile_memory, False)
        return self._events_cache

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0):
        return self.events().key_averages(group_by_input_shape, group_by_stack_n)

    def export_chrome_trace(self, path: str) -> None:
        """The events as a Chrome trace (JSON) for Perfetto or chrome://tracing."""
        pid = os.getpid()
        trace = []
        for e in self.events():
            ev = {"name": e.name, "cat": e.cat, "ph": "X" if e.end_ns > e.start_ns else "i",
                  "ts": e.start_ns / 1e3, "pid": pid, "tid": e.thread % (1 << 31)}
            if e.end_ns > e.start_ns:
                ev["dur"] = (e.end_ns - e.start_ns) / 1e3
            else:
                ev["s"] = "t"
            args = dict(e.args)
            if e.input_shapes is not None:
                args["Input Dims"] = e.input_shapes
            if self.profile_memory:
                args["Memory delta (bytes)"] = e.cpu_memory_usage
            if e.stack:
                args["Call stack"] = e.stack[0]
            if args:
                ev["args"] = args
            trace.append(ev)
        with open(path, "w") as f:
            json.dump({"traceEvents": trace, "displayTimeUnit": "ms"}, f)

    def table(self, **kwargs) -> str:
        return self.key_averages().table(**kwargs)


class record_function:
    """A user-named span in the profile: `with record_function("data loading"): ...`
    (also a decorator)."""

    def __init__(self, name: str, args: str | None = None):
        self.name = name
        self._span = None

    def __enter__(self):
        self._span = events.span(self.name, "user_annotation").__enter__()
        return self

    def __exit__(self, *exc):
        self._span.__exit__(*exc)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with record_function(self.name):
                return fn(*args, **kwargs)
        return wrapper


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None):
    """An `on_trace_ready` that writes each saved window as a Chrome trace file."""
    def handler(prof: profile) -> None:
        os.makedirs(dir_name, exist_ok=True)
        name = worker_name or f"{os.uname().nodename}_{os.getpid()}"
        prof.export_chrome_trace(os.path.join(
            dir_name, f"{name}.{prof.step_num}.pt.trace.json"))
    return handler
