"""The modes eager dispatch reads before it runs an op: grad mode (record a node or not),
inference mode, anomaly mode, the active trace recorder and the autocast region. Like
PyTorch's they are per thread: another thread's `no_grad()`, trace or autocast does not
change what this thread records. Every layer reads them here; the switches users call
(`no_grad`, `enable_grad`, `set_grad_enabled`, `inference_mode`) are defined here too,
`tj.amp.autocast` in amp/."""
from __future__ import annotations

import functools
import threading


class _State(threading.local):
    def __init__(self):  # runs once in every thread that reads the state
        self.grad_enabled = True
        self.inference = False  # inside tj.inference_mode()
        self.anomaly = False
        self.capture = None  # the active trace recorder, if any (see tracejit.capture)
        self.autocast = None  # (cpu dtype, cuda dtype) while an autocast region is active
                              # (either may be None), else None (see tracejit.amp)


STATE = _State()


def is_grad_enabled() -> bool:
    """Whether ops record autograd history (`tj.is_grad_enabled()`)."""
    return STATE.grad_enabled


def is_inference_mode_enabled() -> bool:
    """Whether a `tj.inference_mode()` region is active."""
    return STATE.inference


class _GradModeContext:
    """Context manager and decorator that sets grad mode, restoring it on exit."""

    mode: bool

    def __enter__(self):
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = self.mode

    def __exit__(self, *exc):
        STATE.grad_enabled = self._prev
        return False

    def __call__(self, fn):
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = STATE.grad_enabled
            STATE.grad_enabled = mode
            try:
                return fn(*args, **kwargs)
            finally:
                STATE.grad_enabled = prev
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
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = self.mode

    def __enter__(self):
        pass

    def __call__(self, fn):
        STATE.grad_enabled = self._prev  # used as a decorator: only the call changes mode
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
        self._prev_inference = STATE.inference
        STATE.inference = self.inference
        super().__enter__()

    def __exit__(self, *exc):
        STATE.inference = self._prev_inference
        return super().__exit__(*exc)

    def __call__(self, fn):
        inference = self.inference

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(inference):
                return fn(*args, **kwargs)
        return wrapper
