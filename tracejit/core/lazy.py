"""Modules named at the top of the module that uses them and imported at their first use.

`import tracejit` imports no compiler: Numba and llvmlite (0.35 s), numba-cuda, and the
modules of tracejit built on them load when a kernel is first compiled or a CUDA tensor
made. A module that needs one says so where its imports are::

    numba = lazy("numba")                       # instead of `import numba` in a function
    cuda_kernels = lazy("tracejit.backends.cuda.kernels")

and uses it as the module (`numba.vectorize(...)`): the first attribute read imports it
(an ImportError then, where the module is missing). The import-layer test reads these
names as the imports they are.
"""
from __future__ import annotations

import importlib


class LazyModule:
    """A module imported at the first read of one of its attributes."""

    __slots__ = ("_name", "_module")

    def __init__(self, name: str):
        self._name = name
        self._module = None

    def load(self):
        """The module, imported now if it was not yet."""
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self._name)
        return module

    def __getattr__(self, attr: str):
        return getattr(self._module or self.load(), attr)

    def __repr__(self) -> str:
        state = "imported" if self._module is not None else "not imported yet"
        return f"<module {self._name!r}, imported at first use ({state})>"


def lazy(name: str) -> LazyModule:
    """The module `name` (absolute), imported at its first use."""
    return LazyModule(name)
