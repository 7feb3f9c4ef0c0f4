import os

import numpy as np
import pytest

os.environ.setdefault("TRACEJIT_VERIFY", "1")  # the verifier runs after every pass in tests
# The fast tier interprets traces; tests of the Numba backend ask for it by name and share
# one warm kernel cache inside the checkout.
os.environ.setdefault("TRACEJIT_BACKEND", "interpret")
os.environ.setdefault("TRACEJIT_CACHE_DIR", os.path.join(os.path.dirname(__file__), "..",
                                                         ".cache", "kernels"))

import tracejit as tj

# tests/cuda_backend runs in a process of its own (`make test` starts it with the CUDA
# simulator on, which must happen before Numba's first import)
collect_ignore = [] if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" or os.environ.get(
    "TRACEJIT_CUDA_TESTS") == "1" else ["cuda_backend"]


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
