import importlib.util
import os

import numpy as np
import pytest

os.environ.setdefault("TRACEJIT_VERIFY", "1")  # the verifier runs after every pass in tests
# The fast tier interprets traces; tests of the Numba backend ask for it by name and share
# one warm kernel cache inside the checkout.
os.environ.setdefault("TRACEJIT_BACKEND", "interpret")
# Kernels compile at their first call here (a test of compiled kernels runs them); the
# background compiler has its own tests (tests/test_background_compile.py).
os.environ.setdefault("TRACEJIT_BACKGROUND_COMPILE", "0")
os.environ.setdefault("TRACEJIT_CACHE_DIR", os.path.join(os.path.dirname(__file__), "..",
                                                         ".cache", "kernels"))

import tracejit as tj

# tests/cuda_backend runs in a process of its own (`make test` starts it with the CUDA
# simulator on, which must happen before Numba's first import)
collect_ignore = [] if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" or os.environ.get(
    "TRACEJIT_CUDA_TESTS") == "1" else ["cuda_backend"]


# ---- tiers: `pytest --fast` runs the tests that compile nothing with Numba ----------------

def pytest_addoption(parser):
    parser.addoption("--fast", action="store_true",
                     help="the fast tier: leave out tests marked `compile`; a test that "
                          "compiles with Numba anyway fails, naming the mark it needs")
    parser.addoption("--opinfo-full", action="store_true",
                     help="tests/test_opinfo.py: run every OpInfo sample of every op (the "
                          "default runs the first samples of each dtype)")


def pytest_configure(config):
    config.addinivalue_line("markers", "compile: compiles kernels with Numba (the full tier; "
                                       "`pytest --fast` leaves it out)")
    if config.getoption("--fast"):
        from numba.core import dispatcher

        plain = dispatcher.Dispatcher.compile

        def counted(self, sig):
            _COMPILES.append(getattr(self, "__qualname__", None) or repr(self.py_func))
            return plain(self, sig)
        dispatcher.Dispatcher.compile = counted


_COMPILES: list = []


def pytest_collection_modifyitems(config, items):
    for item in items:  # a test parametrised over backends compiles in its numba case
        params = getattr(getattr(item, "callspec", None), "params", {})
        if any(isinstance(v, str) and v == "numba" for v in params.values()):
            item.add_marker(pytest.mark.compile)
    if config.getoption("--fast"):
        slow = [i for i in items if i.get_closest_marker("compile")]
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [i for i in items if not i.get_closest_marker("compile")]


@pytest.fixture(autouse=True)
def _fast_tier_compiles_nothing(request):
    start = len(_COMPILES)
    yield
    if request.config.getoption("--fast") and len(_COMPILES) > start:
        pytest.fail(f"this test compiled with Numba ({', '.join(sorted(set(_COMPILES[start:])))}"
                    "): mark it @pytest.mark.compile, or keep it on the interpreter",
                    pytrace=False)


@pytest.fixture(autouse=True)
def _seed():
    tj.manual_seed(0)
    np.random.seed(0)
    yield


def has_torch() -> bool:
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


requires_torch = pytest.mark.skipif(not has_torch(), reason="PyTorch oracle not installed "
                                    "(pip install '.[bench]')")


def has_opinfo() -> bool:
    """PyTorch's op database (torch.testing._internal) imports expecttest beside torch."""
    return has_torch() and importlib.util.find_spec("expecttest") is not None


requires_opinfo = pytest.mark.skipif(not has_opinfo(), reason="PyTorch's OpInfo database "
                                     "needs torch and expecttest (pip install '.[test,bench]')")
