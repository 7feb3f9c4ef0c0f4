"""Where in the user's program something happened: the first frame outside tracejit."""
from __future__ import annotations

import os
import sys

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../tracejit


def user_stacklevel() -> int:
    """The `stacklevel` that attributes a warning to the first caller outside tracejit
    (call it in the argument list of warnings.warn)."""
    f, level = sys._getframe(1), 1
    while f is not None and f.f_code.co_filename.startswith(PACKAGE_DIR):
        f, level = f.f_back, level + 1
    return level


def user_frame() -> str:
    """file:line of the innermost caller outside the tracejit package."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(PACKAGE_DIR):
        f = f.f_back
    return f"{f.f_code.co_filename}:{f.f_lineno}" if f is not None else "<unknown>"
