"""Settings the environment gives, read in one place."""
from __future__ import annotations

import os


def default_backend() -> str:
    """The backend `auto` stands for: TRACEJIT_BACKEND, else numba (checked by
    backends.registry.resolve)."""
    return os.environ.get("TRACEJIT_BACKEND", "numba")
