"""What `import tracejit` does with Python's cyclic garbage collector, and why.

Importing tracejit imports numba (llvmlite, numpy's submodules), and together they leave
some 48,000 objects the collector tracks alive for the life of the process: modules,
functions, classes, Numba's typing templates. Every full collection of the cyclic
collector walks all of them (17 ms for one, measured after the import). Measured on the
MLP benchmark's warm start (a new process, warm kernel cache: import, trace, one
training step), the collector ran 262 times, two of them full collections of 22 and
60 ms, about 100 ms of the start's 450 ms beyond importing numba.

So the import runs with the collector paused and ends by freezing what is alive
(`gc.freeze()`): those objects move to the collector's permanent generation, which later
collections do not walk (the same start: about 40 ms of collection, and the full
collection 20-28 ms). The price: a reference cycle among objects made *before*
`import tracejit` that becomes garbage later is not collected (reference counting still
frees everything outside cycles), nor is the cyclic garbage the imports themselves
leave (363 objects, once, measured); `gc.unfreeze()` undoes it. `TRACEJIT_GC_FREEZE=0`
leaves the collector alone; a collector the program disabled stays disabled, unfrozen.
"""
from __future__ import annotations

import gc
import os

_PAUSED = [False]


def pause_collector() -> None:
    if gc.isenabled() and os.environ.get("TRACEJIT_GC_FREEZE", "1") != "0":
        gc.disable()
        _PAUSED[0] = True


def resume_collector() -> None:
    if _PAUSED[0]:
        _PAUSED[0] = False
        gc.freeze()
        gc.enable()
