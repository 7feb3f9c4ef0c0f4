"""The threading layer the numba backend picks, and when a kernel runs on threads."""
import importlib.metadata
import os
import subprocess
import sys

import pytest

from tracejit.backends import threads

PROBE = """
import numpy as np
import tracejit as tj
import numba
f = tj.trace(lambda x: (x * 2.0).tanh(), (tj.randn(4, 8),), backend="numba")
x = tj.randn(512, 1024)  # large enough to run in parallel under any layer
for _ in range(3):  # threaded from the third large call
    np.testing.assert_allclose(f(x).numpy(), np.tanh(x.numpy() * 2), rtol=1e-6, atol=1e-6)
print(numba.threading_layer())
"""


def _tbb_installed() -> bool:
    try:
        importlib.metadata.version("tbb")
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def _layer(env: dict) -> str:
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, check=True,
                         capture_output=True, text=True)
    return out.stdout.split()[-1]


def test_tbb_when_installed_else_workqueue_never_openmp():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_THREADING_LAYER"}
    assert _layer(env) == ("tbb" if _tbb_installed() else "workqueue")


@pytest.mark.parametrize("layer", ["workqueue"] + (["tbb"] if _tbb_installed() else []))
def test_the_users_threading_layer_wins(layer):
    assert _layer(dict(os.environ, NUMBA_THREADING_LAYER=layer)) == layer


def test_serial_threshold_follows_the_launch_cost():
    # a cheap launch makes smaller kernels worth threads; one thread never launches
    assert threads.serial_below("tbb", 2) < threads.serial_below("workqueue", 2)
    assert threads.serial_below("tbb", 4) < threads.serial_below("tbb", 2)
    assert threads.serial_below("tbb", 1) > 1 << 40
    # 2 threads: parallel pays when n * c / 2 > launch
    assert threads.serial_below("tbb", 2) == pytest.approx(
        2 * threads.LAUNCH_NS["tbb"] / threads.ELEMENT_NS)
