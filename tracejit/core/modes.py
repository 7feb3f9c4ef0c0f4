"""The modes eager dispatch reads before it runs an op: grad mode (record a node or not),
inference mode, anomaly mode and the autocast region, plus the active trace recorder.

The modes are one immutable frame (`Modes`), and each thread has its own current frame
(`STATE.modes`): another thread's `no_grad()`, trace or autocast does not change what this
thread records, as in PyTorch. A switch replaces the frame with one differing in its field
and puts its field back on exit (the `with` blocks are the stack; a field another switch
set meanwhile, `set_detect_anomaly` say, stays as PyTorch's does). Frames are interned, so
the frame is one hashable key: a trace's entry guard compares it by identity (`STATE.modes
is MODES`), the backward cache keys on it, and a recorded graph carries the frame it was
traced under (`Graph.modes`).

Every layer reads the modes here; the switches users call (`no_grad`, `enable_grad`,
`set_grad_enabled`, `inference_mode`) are defined here too, `tj.amp.autocast` in amp/."""
from __future__ import annotations

import dataclasses
import functools
import threading


@dataclasses.dataclass(frozen=True, slots=True)
class Modes:
    """One frame: what eager dispatch does with an op. Compare frames with `is`."""

    grad_enabled: bool = True
    inference: bool = False          # inside tj.inference_mode()
    anomaly: bool = False            # tj.autograd.detect_anomaly()
    autocast: tuple | None = None    # (cpu dtype, cuda dtype) inside an autocast region
                                     # (either may be None), else None (tracejit.amp)

    def but(self, **changes) -> Modes:
        """This frame with `changes`: the one interned frame of those values."""
        key = (self, *changes.items())
        frame = _FRAMES.get(key)
        if frame is None:
            frame = _intern(dataclasses.replace(self, **changes))
            _FRAMES[key] = frame
        return frame

    def describe(self) -> str:
        """The frame in words, for a guard's explanation."""
        words = [f"grad mode {'enabled' if self.grad_enabled else 'disabled'}"]
        if self.inference:
            words.append("inference mode")
        if self.anomaly:
            words.append("anomaly detection")
        if self.autocast is None:
            words.append("no autocast")
        else:
            for device, dtype in zip(("cpu", "cuda"), self.autocast):
                if dtype is not None:
                    words.append(f"{device} autocast to {dtype.name}")
        return ", ".join(words)


_FRAMES: dict = {}      # (frame, *changes) -> frame
_INTERNED: dict = {}    # frame -> the one frame equal to it


def _intern(frame: Modes) -> Modes:
    return _INTERNED.setdefault(frame, frame)


DEFAULT = _intern(Modes())


# How many threads are recording a trace or inside an autocast region now. Eager
# dispatch's fast paths read this one number rather than their thread's state (reading a
# thread-local attribute costs about as much as the rest of the fast path's checks):
# while it is 0 no thread needs the full chain; otherwise every thread takes it, which
# is slower, never different. (A thread that ends while tracing leaves it above 0.)
SPECIAL_THREADS = [0]
_COUNTING = threading.Lock()


class _State(threading.local):
    def __init__(self):  # runs once in every thread that reads the state
        set_field = threading.local.__setattr__
        set_field(self, "modes", DEFAULT)
        set_field(self, "capture", None)  # the active trace recorder, if any (tracejit.capture)

    def __setattr__(self, name: str, value) -> None:
        plain = self.capture is None and self.modes.autocast is None
        threading.local.__setattr__(self, name, value)
        if plain is not (self.capture is None and self.modes.autocast is None):
            with _COUNTING:
                SPECIAL_THREADS[0] += 1 if plain else -1


STATE = _State()


def set_grad(flag: bool) -> bool:
    """Switch grad mode in this thread's frame; the previous setting, to put back."""
    flag, modes = bool(flag), STATE.modes
    if modes.grad_enabled is not flag:
        STATE.modes = modes.but(grad_enabled=flag)
    return modes.grad_enabled


def is_grad_enabled() -> bool:
    """Whether ops record autograd history (`tj.is_grad_enabled()`)."""
    return STATE.modes.grad_enabled


def is_inference_mode_enabled() -> bool:
    """Whether a `tj.inference_mode()` region is active."""
    return STATE.modes.inference


class _GradModeContext:
    """Context manager and decorator that sets grad mode, restoring it on exit."""

    mode: bool

    def __enter__(self):
        self._prev = set_grad(self.mode)

    def __exit__(self, *exc):
        set_grad(self._prev)
        return False

    def __call__(self, fn):
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = set_grad(mode)
            try:
                return fn(*args, **kwargs)
            finally:
                set_grad(prev)
        return wrapper


class no_grad(_GradModeContext):
    """Disable gradient recording: `with tj.no_grad(): ...` or `@tj.no_grad()`."""

    mode = False


class enable_grad(_GradModeContext):
    """Enable gradient recording inside a `no_grad` region."""

    mode = True


class set_grad_enabled(_GradModeContext):
    """Set grad mode to `mode`; takes effect immediately, like PyTorch's."""

    def __init__(self, mode: bool):
        self.mode = bool(mode)
        self._prev = set_grad(self.mode)

    def __enter__(self):
        pass

    def __call__(self, fn):
        set_grad(self._prev)  # used as a decorator: only the call changes mode
        return super().__call__(fn)


class inference_mode(_GradModeContext):
    """Inference mode: no autograd history is recorded, as under `no_grad`. A context
    manager or decorator (`@tj.inference_mode()` or `@tj.inference_mode`), as PyTorch's;
    `inference_mode(False)` leaves it, recording again.

    >>> with tj.inference_mode():
    ...     logits = model(x)
    """

    def __new__(cls, mode=True):
        if not isinstance(mode, bool) and callable(mode):  # @tj.inference_mode, uncalled
            return cls(True)(mode)
        return super().__new__(cls)

    def __init__(self, mode: bool = True):
        self.inference = bool(mode)
        self.mode = not self.inference

    def __enter__(self):
        self._prev_inference = STATE.modes.inference
        STATE.modes = STATE.modes.but(inference=self.inference)
        super().__enter__()

    def __exit__(self, *exc):
        STATE.modes = STATE.modes.but(inference=self._prev_inference)
        return super().__exit__(*exc)

    def __call__(self, fn):
        inference = self.inference

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(inference):
                return fn(*args, **kwargs)
        return wrapper
