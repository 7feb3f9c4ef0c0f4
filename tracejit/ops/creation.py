"""Creation and random primitives (no tensor inputs).

Tracing records them as ops, so a traced `randn` stays random on every call.
The generator is numpy's PCG64, seeded by `tj.manual_seed`.
"""
from __future__ import annotations

import numpy as np

from .registry import AVal, CREATION, RANDOM, register
from ..core.dtypes import from_numpy_dtype


class _Generator:
    """A random number generator (`tj.Generator().manual_seed(0)`), numpy's PCG64."""

    __slots__ = ("rng", "seed")

    def __init__(self, device="cpu"):
        self.manual_seed(np.random.SeedSequence().entropy % (1 << 63))

    def manual_seed(self, seed: int):
        self.seed = int(seed)
        self.rng = np.random.Generator(np.random.PCG64(self.seed))
        return self

    def initial_seed(self) -> int:
        return self.seed


GENERATOR = _Generator()


def _dtype_of(array):
    return from_numpy_dtype(array.dtype)


def _full(shape, value, dtype):
    return np.full(shape, value, dtype.np)


def _arange(start, end, step, dtype):
    return np.arange(start, end, step, dtype=dtype.np)


def _rand(shape, dtype, generator=None):
    rng = (generator or GENERATOR).rng
    return rng.random(shape, dtype=np.float64 if dtype.np == np.float64
                      else np.float32).astype(dtype.np, copy=False)


def _randn(shape, dtype, generator=None):
    rng = (generator or GENERATOR).rng
    return rng.standard_normal(shape, dtype=np.float64 if dtype.np == np.float64
                               else np.float32).astype(dtype.np, copy=False)


def _randint(low, high, shape, dtype):
    return GENERATOR.rng.integers(low, high, shape).astype(dtype.np, copy=False)


def _infer_shape(shape, *a, dtype, **k):
    return AVal(tuple(shape), dtype)


def _infer_arange(start, end, step, dtype):
    n = max(0, int(np.ceil((end - start) / step)))
    return AVal((n,), dtype)


register("constant", CREATION, lambda value: np.array(value, copy=True),
         lambda value: AVal(tuple(value.shape), _dtype_of(value)), arity=0)
register("full", CREATION, _full, lambda shape, value, dtype: AVal(tuple(shape), dtype), arity=0)
register("arange", CREATION, _arange, _infer_arange, arity=0)
register("eye", CREATION, lambda n, m, dtype: np.eye(n, m, dtype=dtype.np),
         lambda n, m, dtype: AVal((n, m), dtype), arity=0)
def _linspace(start, end, steps, dtype):
    """numpy's linspace; for an integer dtype PyTorch's: start and end truncated to
    integers, each value start + k step (from the end in the second half) truncated."""
    if dtype.category != 1:  # (in double: a float32 0-d start would make numpy work in it)
        return np.linspace(float(start), float(end), steps, dtype=dtype.np)
    start, end = int(start), int(end)
    if steps == 1:
        return np.array([start], dtype.np)
    step = (end - start) / (steps - 1)
    k = np.arange(steps)
    values = np.where(k < steps // 2, start + step * k, end - step * (steps - 1 - k))
    return np.trunc(values).astype(dtype.np)


register("linspace", CREATION, _linspace, lambda start, end, steps, dtype: AVal((steps,), dtype),
    arity=0)
register("rand", RANDOM, _rand, lambda shape, dtype, generator=None: AVal(tuple(shape), dtype),
         arity=0)
register("randn", RANDOM, _randn, lambda shape, dtype, generator=None: AVal(tuple(shape),
                                                                              dtype), arity=0)
register("randperm", RANDOM, lambda n, dtype: GENERATOR.rng.permutation(n).astype(
    dtype.np), lambda n, dtype: AVal((n,), dtype), arity=0)
register("randint", RANDOM, _randint,
         lambda low, high, shape, dtype: AVal(tuple(shape), dtype), arity=0)
