"""The README's demo runs and computes what it says."""
import subprocess
import sys

import numpy as np

from tracejit import demo


def test_demo_figures():
    out = demo.main()
    g = out["graph"]
    x, w = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(g["y"], np.tanh(x * w).sum(), rtol=1e-6)
    np.testing.assert_allclose(g["x_grad"], w * (1 - np.tanh(x * w) ** 2), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["function"]["grad"], [np.exp(-1.0), 1.0, 1.0], rtol=1e-6)
    assert out["higher_order"] == {"d1": 32.0, "d2": 48.0, "d3": 48.0}
    assert out["training"]["last"] < 0.2 * out["training"]["first"]
    traced = out["traced"]
    assert traced["same"] and traced["compiles"] == 1
    assert traced["nodes_after"] < traced["nodes_before"]


def test_cli_demo_runs():
    r = subprocess.run([sys.executable, "-m", "tracejit", "demo"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "d2y/dx2 = 48" in r.stdout and "AccumulateGrad" in r.stdout


def test_cli_version_and_benchmark_list(capsys):
    import pytest

    import tracejit
    from tracejit.cli import main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == \
        f"tracejit {tracejit.__version__}"
    assert main(["bench", "--list"]) == 0
    listed = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    assert {"mlp_step", "row_kernels", "gpu_check"} <= set(listed)
    assert listed["mlp_step"].startswith("One SGD training step")
