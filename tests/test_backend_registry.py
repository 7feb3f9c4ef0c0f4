"""The backend table (backends/registry.py): every choice that depends on the backend
reads it, so a name it lacks is refused everywhere and each entry's kernels exist."""
from __future__ import annotations

import pytest

import tracejit as tj
from tracejit.backends import registry


def test_an_unknown_backend_is_refused_with_the_known_names():
    with pytest.raises(ValueError, match=r"unknown backend 'numbaa'.*'interpret', 'numba', "
                                         r"'cuda'"):
        tj.trace(lambda x: x + 1, (tj.ones(2),), backend="numbaa")
    with pytest.raises(ValueError, match="unknown backend"):
        registry.get("gpu")


def test_auto_follows_the_environment(monkeypatch):
    monkeypatch.delenv("TRACEJIT_BACKEND", raising=False)
    assert registry.resolve("auto") == "numba"
    monkeypatch.setenv("TRACEJIT_BACKEND", "interpret")
    assert registry.resolve("auto") == "interpret"
    t = tj.trace(lambda x: x * 2, (tj.ones(3),))
    assert t.traces[0].backend == "interpret"
    monkeypatch.setenv("TRACEJIT_BACKEND", "tpu")
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        registry.resolve("auto")


def test_each_backend_that_compiles_kernels_names_a_module_that_does():
    for backend in registry.BACKENDS.values():
        compile_region = backend.compile_region()
        assert (compile_region is None) == (backend.kernels is None), backend.name
        assert backend.device in ("cpu", "cuda")
        # host programs call compiled kernels; a cached backward needs a compiled one
        assert not backend.host_programs or backend.kernels
        assert not backend.backward_cache or backend.compiled_backward
        if backend.host_programs:  # each host module gives the two functions the capture calls
            module = backend.host_module()
            assert callable(module.host_program) and callable(module.returns_views)
