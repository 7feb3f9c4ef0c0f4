"""The backends a trace can run on, each described once: what it compiles and how.

A trace names its backend by string (`tj.trace(fn, backend=...)`, `TRACEJIT_BACKEND`);
everything that depends on the choice asks the `Backend` here instead of comparing
names, so that a new backend is one entry in `BACKENDS`.

| backend | fused regions | straight-line graphs | backward |
|---|---|---|---|
| interpret | op by op (numpy) | the interpreter | the interpreter |
| numba | Numba CPU kernels | host programs (backends/host.py) | compiled, cached on disk |
| cuda | Numba CUDA kernels | host programs over device arrays (backends/cuda/host.py) | compiled |
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from ..core.config import default_backend


@dataclass(frozen=True)
class Backend:
    """A backend's modules are named, not imported: the compilers they import (Numba,
    numba-cuda) load when a trace first runs on it."""
    name: str
    device: str                  # where its arrays live: "cpu" or "cuda"
    kernels: str | None          # its kernel module: compile_region(region, label, kind),
    #                              kernel_source(region, kind); None: regions run op by op
    host: str | None             # the module whose host_program runs a straight-line graph
    compiled_backward: bool      # gradients through one compiled backward graph per trace
    backward_cache: bool         # derived backward graphs are kept on disk

    @property
    def host_programs(self) -> bool:
        """Whether straight-line graphs run as generated host programs."""
        return self.host is not None

    def kernel_module(self):
        return importlib.import_module(self.kernels, __package__)

    def host_module(self):
        """host_program(graph, make, bindings, donate) and returns_views(graph)."""
        return importlib.import_module(self.host, __package__)

    def compile_region(self) -> Callable | None:
        """compile_region(region, source, kind) of its kernel module, or None when fused
        regions run op by op."""
        if self.kernels is None:
            return None
        return self.kernel_module().compile_region

    def kernel_source(self, region, kind: str) -> str:
        """The source of the kernel a fused region of this kind compiles to (Unsupported
        where none does)."""
        return self.kernel_module().kernel_source(region, kind)


BACKENDS: dict[str, Backend] = {b.name: b for b in (
    Backend("interpret", "cpu", None, host=None, compiled_backward=False,
            backward_cache=False),
    Backend("numba", "cpu", ".numba_cpu", host=".host", compiled_backward=True,
            backward_cache=True),
    Backend("cuda", "cuda", ".cuda.kernels", host=".cuda.host", compiled_backward=True,
            backward_cache=False),
)}

AUTO = "auto"  # numba, unless TRACEJIT_BACKEND names another


def resolve(name: str) -> str:
    """The backend `name` stands for (`auto`: TRACEJIT_BACKEND, else numba), checked."""
    if name == AUTO:
        name = default_backend()
    get(name)
    return name


def get(name: str) -> Backend:
    backend = BACKENDS.get(name)
    if backend is None:
        raise ValueError(f"unknown backend {name!r}; expected {AUTO!r} or one of "
                         f"{', '.join(repr(b) for b in BACKENDS)}")
    return backend
