"""The buffer pool of compiled programs (runtime/memory.py): a program's large arrays are
reused across calls instead of being faulted in again, only while a program runs (the
user's arrays keep numpy's allocator), with the same results, counted by the memory
statistics, bounded, safe across threads, and off with TRACEJIT_MEMORY_POOL=0."""
from __future__ import annotations

import gc
import threading

import numpy as np
import pytest
from numpy._core.multiarray import get_handler_name

import tracejit as tj
from tracejit.runtime import memory

from test_memory_stats import _new_process

pytestmark = pytest.mark.compile  # host programs run on the Numba backend


def _made_by(t) -> str:
    """The allocator of a tensor's storage (a view's: its base's)."""
    a = t.detach().numpy()
    while a.base is not None:
        a = a.base
    return get_handler_name(a)


def _program():
    def f(x, w):
        return ((x @ w).relu() * 2).sum(0), (x * 3).exp()

    x = tj.randn(256, 128)
    w = tj.randn(128, 128)
    return tj.trace(f, (x, w), backend="numba"), x, w, f


def test_a_program_reuses_its_blocks_and_leaves_the_handler_as_it_was():
    traced, x, w, f = _program()
    want = [t.numpy() for t in f(x, w)]
    before = get_handler_name()
    traced(x, w)
    hits = memory.pool_stats()["hits"]
    for _ in range(3):
        got = traced(x, w)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a.numpy(), b, rtol=1e-6)
        assert get_handler_name() == before  # restored after each call
        del got
    assert memory.pool_stats()["hits"] >= hits + 3  # each call took freed blocks back
    out = traced(x, w)[1]
    assert _made_by(out) == "tracejit_pool_allocator"
    assert get_handler_name(np.empty(1 << 20)) == before  # the user's arrays: numpy's


def test_pooled_storage_is_counted_by_the_statistics():
    traced, x, w, _ = _program()
    traced(x, w)
    gc.collect()
    base = tj.memory_allocated()
    out = traced(x, w)
    assert tj.memory_allocated() - base == sum(t.numpy().nbytes for t in out)
    del out
    gc.collect()
    assert tj.memory_allocated() == base


def test_empty_cache_frees_what_the_pool_keeps_and_the_pool_stays_bounded():
    traced, x, w, _ = _program()
    for n in range(40, 120):  # many sizes: the pool keeps at most SLOTS blocks
        traced(tj.randn(n * 4, 128), w)
    stats = memory.pool_stats()
    assert 0 < stats["blocks"] <= memory.SLOTS and stats["bytes"] <= memory.POOL_LIMIT
    memory.empty_cache()
    assert memory.pool_stats()["blocks"] == 0 and memory.pool_stats()["bytes"] == 0
    traced(x, w)  # and it fills again


def test_programs_in_threads_share_the_pool_safely():
    traced, x, w, f = _program()
    want = f(x, w)[0].numpy()
    errors = []

    def work():
        try:
            for _ in range(20):
                np.testing.assert_allclose(traced(x, w)[0].numpy(), want, rtol=1e-6)
                np.empty(1 << 18)  # the thread's own arrays, freed between calls
        except Exception as err:  # noqa: BLE001 — reported below
            errors.append(err)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


_POOL_OFF = ("import numpy as np, tracejit as tj\n"
             "from numpy._core.multiarray import get_handler_name\n"
             "from tracejit.runtime import memory\n"
             "f = tj.trace(lambda x: x * 2, (tj.randn(300, 300),), backend='numba')\n"
             "y = f(tj.randn(300, 300))\n"
             "print(get_handler_name(y.numpy()), memory.pool_stats()['hits'])\n")


def test_the_pool_is_off_with_the_environment_variable():
    stats_off = {"TRACEJIT_MEMORY_STATS": ""}
    assert _new_process(_POOL_OFF, dict(stats_off, TRACEJIT_MEMORY_POOL="0")) == [
        "default_allocator", "0"]
    assert _new_process(_POOL_OFF, dict(stats_off, TRACEJIT_MEMORY_POOL=""))[0] == \
        "tracejit_pool_allocator"


@pytest.mark.parametrize("compiled", [False, True])
def test_eager_forward_backward_and_step_allocate_from_the_pool(compiled):
    """An eager training step: the module's activations, the gradients and the update
    come from the pool; an eager op outside them, and the user's arrays, do not."""
    model = tj.nn.Sequential(tj.nn.Linear(128, 256), tj.nn.ReLU(), tj.nn.Linear(256, 64))
    opt = tj.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=compiled)
    x = tj.randn(512, 128)
    before = get_handler_name()
    for _ in range(3):
        opt.zero_grad()
        hidden = model[0](x)
        assert _made_by(hidden) == "tracejit_pool_allocator"
        loss = (model(x) ** 2).mean()
        loss.backward()
        assert _made_by(model[0].weight.grad) == "tracejit_pool_allocator"
        opt.step()
        assert get_handler_name() == before
    assert _made_by(x * 2) == before  # outside a module: numpy's


_KEEPS = ("import tracejit as tj\n"
          "from tracejit.runtime import memory\n"
          "f = tj.trace(lambda x: (x * 2).exp(), (tj.randn(1024, 1024),), backend='numba')\n"
          "for n in (1024, 1032, 1040, 1048):\n"  # four sizes of 4 MiB blocks, freed
          "    f(tj.randn(n, 1024))\n"
          "print(memory.POOL_LIMIT, memory.pool_stats()['bytes'])\n")


def test_the_pool_keeps_at_most_its_limit_which_the_environment_sets():
    limit, held = map(int, _new_process(_KEEPS, {"TRACEJIT_MEMORY_POOL_LIMIT": "6"}))
    assert limit == 6 << 20 and 0 < held <= limit  # one 4 MiB block fits, two do not
    limit, held = map(int, _new_process(_KEEPS, {"TRACEJIT_MEMORY_POOL_LIMIT": ""}))
    assert limit >= 512 << 20 and held > 6 << 20  # by default: a sixteenth of the memory
