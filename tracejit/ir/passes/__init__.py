"""Graph -> Graph passes and the pass manager.

Each pass is a named function returning a new graph whose header says which
pass made it. `TRACEJIT_LOG=passes` prints the graph after each pass;
`PassManager(verify=True)` runs the verifier after each (the tests do).
"""
from __future__ import annotations

import os
import sys
import time

from ..graph import Graph
from ..verifier import verify as verify_graph
from .dce import dce
from .cse import cse
from .fold import fold_constants
from .fuse import fuse
from .licm import hoist_invariants
from .simplify import simplify

DEFAULT_PIPELINE = (dce, cse, fold_constants, simplify, hoist_invariants, dce, fuse)


class PassManager:
    """Runs passes in order; keeps every stage for dumps (`stages`)."""

    def __init__(self, passes=DEFAULT_PIPELINE, verify: bool | None = None):
        self.passes = tuple(passes)
        self.verify = verify if verify is not None else bool(os.environ.get("TRACEJIT_VERIFY"))

    def run(self, graph: Graph) -> list[tuple[str, Graph, float]]:
        """[(pass name, graph after it, seconds)], starting with the input graph."""
        stages = [(graph.made_by, graph, 0.0)]
        log = "passes" in os.environ.get("TRACEJIT_LOG", "").split(",")
        for p in self.passes:
            t0 = time.perf_counter()
            graph = p(graph)
            seconds = time.perf_counter() - t0
            if self.verify:
                verify_graph(graph)
            if log:
                print(f"[tracejit:passes] after {p.__name__} ({seconds * 1e3:.2f} ms)\n{graph}",
                      file=sys.stderr)
            stages.append((p.__name__, graph, seconds))
        return stages


__all__ = ["PassManager", "DEFAULT_PIPELINE", "dce", "cse", "fold_constants", "simplify",
           "hoist_invariants", "fuse"]
