"""What `import tracejit` does with Python's cyclic garbage collector: nothing lasting.

Importing tracejit imports numba (llvmlite, numpy's submodules), and together they leave
some 48,000 objects the collector tracks alive for the life of the process: modules,
functions, classes, Numba's typing templates. Every full collection of the cyclic
collector walks all of them (17 ms for one, measured after the import). Measured on the
MLP benchmark's warm start (a new process, warm kernel cache: import, trace, one
training step), the collector ran 262 times, two of them full collections of 22 and
60 ms, about 100 ms of the start's 450 ms beyond importing numba.

A library must leave the process as it found it, so the import only pauses the collector
while it runs (no collections of half-built modules) and restores it as it was.
`freeze_imports()` is the opt-in for programs that start often and want the rest: it
moves what is alive to the collector's permanent generation (`gc.freeze()`), which later
collections do not walk (the same start: about 40 ms of collection, and the full
collection 20-28 ms). The price, which is why it is not the default: a reference cycle
among objects alive at that moment (the caller's too) that becomes garbage later is never
collected. The command line (`python -m tracejit ...`) and the benchmarks call it;
`TRACEJIT_GC_FREEZE=1` makes the import call it.

`python -m tracejit` imports the package before the command line runs; there the
package's names wait for a command that needs them (`command_line_starting`), so that
`--help` answers in the time Python takes to start, without numpy.
"""
from __future__ import annotations

import gc
import os
import sys

_PAUSED = [False]


def pause_collector() -> None:
    if gc.isenabled():
        gc.disable()
        _PAUSED[0] = True


def resume_collector() -> None:
    if _PAUSED[0]:
        _PAUSED[0] = False
        gc.enable()
        if os.environ.get("TRACEJIT_GC_FREEZE") == "1":
            freeze_imports()


def freeze_imports() -> None:
    """Move every object alive now out of the collector's walks (`gc.freeze()`); a
    collector the program disabled is left alone. `gc.unfreeze()` undoes it."""
    if gc.isenabled():
        gc.freeze()


def command_line_starting() -> bool:
    """Is this the import that `python -m tracejit ...` makes to find the package's
    __main__? (While -m looks for its module, sys.argv[0] is "-m".)"""
    if getattr(sys, "argv", [])[:1] != ["-m"]:
        return False
    argv = sys.orig_argv
    return "-m" in argv and argv[argv.index("-m") + 1:][:1] == ["tracejit"]
