"""CUDA streams and events with PyTorch's API (`tj.cuda.Stream`, `tj.cuda.stream(s)`,
`tj.cuda.Event`), over Numba's. tracejit's own kernels are launched on the default
stream; a Stream orders and times the work a program submits to it. On the simulator,
where every launch runs to completion at once, an event's time is the host clock's."""
from __future__ import annotations

import contextlib
import threading
import time

from ..backends.cuda.device import is_available
from ..core.lazy import lazy

numba = lazy("numba")
numba_cuda = lazy("numba.cuda")


def _cuda():
    if not is_available():
        raise RuntimeError("CUDA streams and events need CUDA: a GPU with numba-cuda, or "
                           "the simulator (NUMBA_ENABLE_CUDASIM=1 before Numba is imported)")
    return numba_cuda.load()


def _simulated() -> bool:
    return bool(numba.config.ENABLE_CUDASIM)


class Stream:
    """A CUDA stream: `synchronize()`, `wait_event(e)`, `wait_stream(s)`,
    `record_event()`; use with `tj.cuda.stream(s)` to make it the current one.

    >>> s = tj.cuda.Stream()
    >>> with tj.cuda.stream(s): ...
    """

    def __init__(self, device=None, priority: int = 0, _numba=None):
        cuda = _cuda()
        self.device, self.priority = device, priority
        self.numba_stream = _numba if _numba is not None else cuda.stream()

    def synchronize(self) -> None:
        """Wait until the work submitted to the stream is done."""
        self.numba_stream.synchronize()

    def query(self) -> bool:
        """Whether the stream's work is done (it is, once synchronized)."""
        self.synchronize()
        return True

    def wait_event(self, event: "Event") -> None:
        event.wait(self)

    def wait_stream(self, stream: "Stream") -> None:
        self.wait_event(stream.record_event())

    def record_event(self, event: "Event | None" = None) -> "Event":
        event = event if event is not None else Event()
        event.record(self)
        return event

    def __enter__(self):
        self._context = stream(self)
        return self._context.__enter__()

    def __exit__(self, *exc):
        return self._context.__exit__(*exc)

    def __repr__(self) -> str:
        return f"<tj.cuda.Stream device=cuda:0 priority={self.priority}>"


_current = threading.local()


def default_stream(device=None) -> Stream:
    """The stream tracejit's kernels run on."""
    return Stream(device, _numba=_cuda().default_stream())


def current_stream(device=None) -> Stream:
    """The stream `tj.cuda.stream(...)` made current, else the default stream."""
    got = getattr(_current, "stream", None)
    return got if got is not None else default_stream(device)


def set_stream(s: Stream) -> None:
    _current.stream = s


@contextlib.contextmanager
def stream(s: Stream | None):
    """Make `s` the current stream inside the block (None: a no-op), as PyTorch's."""
    if s is None:
        yield None
        return
    previous = getattr(_current, "stream", None)
    _current.stream = s
    try:
        yield s
    finally:
        _current.stream = previous


class Event:
    """A CUDA event: `record(stream)`, `synchronize()`, `query()`, `wait(stream)`, and
    `elapsed_time(end)` in milliseconds between two events made with
    `enable_timing=True`.

    >>> start, end = tj.cuda.Event(enable_timing=True), tj.cuda.Event(enable_timing=True)
    >>> start.record(); y = model(x); end.record(); end.synchronize()
    >>> start.elapsed_time(end)
    """

    def __init__(self, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False):
        cuda = _cuda()
        self.enable_timing, self.blocking, self.interprocess = enable_timing, blocking, \
            interprocess
        self._event = cuda.event() if _simulated() else cuda.event(timing=enable_timing)
        self._recorded_at = None

    def record(self, stream: Stream | None = None) -> None:
        s = stream if stream is not None else current_stream()
        self._event.record(s.numba_stream)
        self._recorded_at = time.perf_counter()

    def wait(self, stream: Stream | None = None) -> None:
        s = stream if stream is not None else current_stream()
        self._event.wait(s.numba_stream)

    def synchronize(self) -> None:
        self._event.synchronize()

    def query(self) -> bool:
        """Whether the work before the event is done."""
        if _simulated():
            return True
        return bool(self._event.query())

    def elapsed_time(self, end_event: "Event") -> float:
        """Milliseconds from this event to `end_event` (both recorded and done)."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument "
                               "'enable_timing=True'.")
        if self._recorded_at is None or end_event._recorded_at is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed "
                               "time.")
        if _simulated():
            return (end_event._recorded_at - self._recorded_at) * 1000.0
        end_event.synchronize()
        return float(numba_cuda.event_elapsed_time(self._event, end_event._event))
