"""CPU memory statistics: `tj.memory_allocated()` counts tensor storage as it is made and
freed (numpy's data allocator, runtime/memory.py), its peak, and the CUDA names."""
from __future__ import annotations

import gc

import numpy as np

import tracejit as tj
from tracejit.utils.checkpoint import checkpoint

MB = 1 << 20


def test_storage_is_counted_when_made_and_freed():
    gc.collect()
    before = tj.memory_allocated()
    x = tj.zeros(1024, 256)  # 1 MiB of float32
    assert tj.memory_allocated() - before == MB
    v = x[10:20].t()  # a view holds no storage of its own
    assert tj.memory_allocated() - before == MB
    y = x * 2
    assert tj.memory_allocated() - before == 2 * MB
    del x
    assert tj.memory_allocated() - before == 2 * MB  # the view keeps x's storage alive
    del v
    assert tj.memory_allocated() - before == MB
    del y
    assert tj.memory_allocated() == before


def test_peak_and_reset():
    tj.reset_peak_memory_stats()
    base = tj.memory_allocated()
    assert tj.max_memory_allocated() == base
    x = tj.ones(MB // 8, dtype=tj.float64)
    y = x + 1
    del x, y
    assert tj.memory_allocated() == base
    assert tj.max_memory_allocated() >= base + 2 * MB
    tj.reset_peak_memory_stats()
    assert tj.max_memory_allocated() == base


def test_gradients_and_freed_graphs_are_counted():
    w = tj.randn(512, 512, requires_grad=True)  # 1 MiB
    x = tj.randn(64, 512)
    gc.collect()
    base = tj.memory_allocated()
    loss = (x @ w).tanh().sum()
    held = tj.memory_allocated() - base  # the graph keeps the saved tanh output
    assert held >= 64 * 512 * 4
    loss.backward()
    del loss
    gc.collect()
    # what remains is w.grad
    assert tj.memory_allocated() - base == w.grad.numel() * 4


def test_compiled_programs_outputs_are_counted():
    f = tj.trace(lambda a: (a * 2).exp(), (tj.randn(8, 8),))
    a = tj.randn(256, 1024)
    gc.collect()
    base = tj.memory_allocated()
    out = f(a)
    assert tj.memory_allocated() - base >= MB
    del out
    gc.collect()
    assert tj.memory_allocated() - base < MB


def _block(h, w):
    for _ in range(8):
        h = (h @ w).tanh()
    return h


def _peak_of_step(use_checkpoint: bool) -> int:
    w = tj.randn(256, 256, requires_grad=True) * 0.05
    w = w.detach().requires_grad_()
    x = tj.randn(2048, 256)
    gc.collect()
    base = tj.memory_allocated()
    tj.reset_peak_memory_stats()
    h = x
    for _ in range(4):
        h = checkpoint(_block, h, w) if use_checkpoint else _block(h, w)
    h.sum().backward()
    del h
    return tj.max_memory_allocated() - base


def test_checkpointing_lowers_the_peak():
    plain = _peak_of_step(False)
    checkpointed = _peak_of_step(True)
    act = 2048 * 256 * 4  # one activation: 2 MiB
    # plain keeps every tanh output of 32 layers; checkpointing keeps the 4 segment inputs
    # and one segment's 8 outputs during its recomputation
    assert plain >= 32 * act
    assert checkpointed <= plain / 2, (plain / act, checkpointed / act)


def test_cuda_names_without_cuda_tensors_are_zero():
    assert tj.cuda.memory_allocated() == 0
    assert tj.cuda.max_memory_allocated() == 0
    tj.cuda.reset_peak_memory_stats()
    tj.cuda.empty_cache()


def test_numpy_arrays_from_the_allocator_behave():
    base = tj.memory_allocated()
    a = np.arange(10.0)
    a.resize(1000, refcheck=False)  # realloc through the counting allocator
    assert a[:10].tolist() == list(range(10))
    assert tj.memory_allocated() - base == 8000
    del a
    assert tj.memory_allocated() == base
    b = np.zeros(5000)  # calloc
    assert not b.any()


_COUNTS = ("import numpy as np, tracejit as tj\n"
           "from tracejit.runtime import memory\n"
           "b = tj.memory_allocated(); x = tj.zeros(1024, 256)\n"
           "print(memory._INSTALLED[0], tj.memory_allocated() - b)\n")


def _new_process(code: str, env: dict) -> str:
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **env),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_the_allocators_code_is_cached_and_damage_is_repaired(tmp_path):
    env = {"TRACEJIT_CACHE_DIR": str(tmp_path)}
    assert _new_process(_COUNTS, env) == ["True", str(MB)]  # generates and stores it
    [obj] = tmp_path.glob("alloc_*.o")
    stored = obj.read_bytes()
    assert _new_process(_COUNTS, env) == ["True", str(MB)]  # loads it
    assert obj.read_bytes() == stored
    obj.write_bytes(stored[:32] + stored[32:-40])  # truncated: its digest does not match
    assert _new_process(_COUNTS, env) == ["True", str(MB)]
    assert obj.read_bytes() == stored  # made again


_PROCESS_STATE = ("import gc, numpy as np\n"
                  "from numpy._core.multiarray import get_handler_name\n"
                  "def state(): return [gc.isenabled(), gc.get_freeze_count() > 0, "
                  "gc.get_threshold() == (700, 10, 10), get_handler_name()]\n"
                  "before = state()\n"
                  "import tracejit as tj\n"
                  "print(before == state(), *state())\n"
                  "tj.memory_allocated()\n"
                  "print(get_handler_name())\n")


def test_import_leaves_the_collector_and_numpys_allocator_alone():
    out = _new_process(_PROCESS_STATE, {"TRACEJIT_GC_FREEZE": "", "TRACEJIT_MEMORY_STATS": ""})
    assert out == ["True", "True", "False", "True", "default_allocator",
                   "tracejit_counting_allocator"]  # statistics install it when first asked for


def test_freezing_and_counting_from_the_import_are_opt_in():
    env = {"TRACEJIT_GC_FREEZE": "1", "TRACEJIT_MEMORY_STATS": "1"}
    out = _new_process(_PROCESS_STATE, env)
    assert out[:5] == ["False", "True", "True", "True", "tracejit_counting_allocator"]
    disabled = "import gc; gc.disable()\n" + _PROCESS_STATE
    out = _new_process(disabled, env)
    assert out[1:3] == ["False", "False"]  # a collector the program disabled stays unfrozen
    assert _new_process(_PROCESS_STATE, {"TRACEJIT_MEMORY_STATS": "0"})[-1] == "default_allocator"
