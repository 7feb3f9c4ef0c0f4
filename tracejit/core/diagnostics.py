"""Where in the user's program something happened: the first frame outside tracejit."""
from __future__ import annotations

import copy
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


# ---- raising at the user's line ------------------------------------------------------------
def raise_from_line(exc: BaseException, where: str, function: str) -> None:
    """Raise `exc` from a frame on the line `where` ("file:line") names, as `function`:
    the user's line is the traceback's last frame (not the compiler's or the runtime's),
    and neither the frames it was first raised through nor an exception being handled
    are printed with it. Raises `exc` as it is when `where` names no line."""
    exc = exc.with_traceback(None)
    exc.__suppress_context__ = True
    file, _, line = where.rpartition(":")
    if not line.isdigit() or int(line) < 1:
        raise exc
    code = compile("\n" * (int(line) - 1) + "raise __tj_exc", file, "exec")
    code = code.replace(co_name=function, co_qualname=function)
    exec(code, {"__tj_exc": exc})  # noqa: S102 — one raise statement of ours


def raise_at(exc: BaseException, where: str, function: str = "<script>"):
    """Raise a copy of `exc` whose message starts with the user's file:line, from a frame
    on that line of that file: a scripted function's `raise`/`assert` then reads as
    eager's, the user's line the last frame of the traceback (not the runtime's)."""
    raise_from_line(_located(exc, where), where, function)


def _located(exc: BaseException, where: str) -> BaseException:
    try:
        new = type(exc)(*exc.args)
    except Exception:  # noqa: BLE001 — an exception class with its own constructor
        new = copy.copy(exc)
    args = exc.args
    if not args:
        new.args = (where,)
    elif isinstance(args[0], str) and len(args) == 1:
        new.args = (f"{where}: {args[0]}",)
    else:
        new.add_note(f"raised at {where}")
    return new
