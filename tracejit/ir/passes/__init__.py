"""Graph -> Graph passes and the pass manager.

Each pass is a named function returning a new graph whose header says which
pass made it. `TRACEJIT_LOG=passes` prints the graph after each pass;
`PassManager(verify=True)` runs the verifier after each (the tests do).
"""
from __future__ import annotations

import os
import sys
import time

from ...core.log import enabled
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
        log = enabled("passes")
        for p in self.passes:
            t0 = time.perf_counter()
            before, graph = graph, p(graph)
            seconds = time.perf_counter() - t0
            if self.verify:
                verify_graph(graph)
            if log:  # (a pass that changed nothing returns its input: not printed again)
                print(f"[tracejit:passes] after {p.__name__} ({seconds * 1e3:.2f} ms)" +
                      (": no change" if graph is before else f"\n{graph}"), file=sys.stderr)
            stages.append((p.__name__, graph, seconds))
        return stages


__all__ = ["PassManager", "DEFAULT_PIPELINE", "dce", "cse", "fold_constants", "simplify",
           "hoist_invariants", "fuse"]


class Stages:
    """The graphs a pipeline made from `recorded`, as `[(pass, graph, seconds)]` when
    asked: only the summary is kept (a trace keeps its recorded and final graphs; a full
    copy of the graph per pass, kept for every trace, is most of a long-running
    process's objects and slows each of Python's full garbage collections)."""

    def __init__(self, recorded, stages: list, post=None):
        self._recorded, self.post = recorded, post  # (or a function making it)
        self.summary = [(name, len(g.nodes), seconds) for name, g, seconds in stages]

    @property
    def recorded(self):
        if callable(self._recorded):
            self._recorded = self._recorded()
        return self._recorded

    @classmethod
    def from_summary(cls, recorded, summary: list, post=None) -> "Stages":
        """Stages whose pipeline ran in another process (their graphs are made again when
        asked, from `recorded`: a graph, or a function returning it)."""
        self = cls(recorded, [], post)
        self.summary = [(str(name), int(n), float(seconds)) for name, n, seconds in summary]
        return self

    def __iter__(self):
        return iter(self.materialize())

    def __len__(self) -> int:
        return len(self.summary)

    def __getitem__(self, k):
        return self.materialize()[k]

    def materialize(self) -> list:
        stages = PassManager().run(self.recorded)
        if self.post is not None:
            extra = self.post(stages[-1][1])
            if extra is not stages[-1][1]:
                stages.append((self.post.__name__, extra, 0.0))
        return stages
