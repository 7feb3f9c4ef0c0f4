"""The model benchmarks' user code (benchmarks/models/) runs on tracejit as written for
PyTorch: three eager training steps of each model at its small size, from PyTorch's
initial weights, give PyTorch's losses (dropout off, so that both draw nothing)."""
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
MODELS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "benchmarks", "models")
sys.path.insert(0, MODELS)
import run  # noqa: E402

import tracejit as tj  # noqa: E402


@pytest.mark.parametrize("name", ["gpt", "mnist_cnn", "resnet", "lstm_lm", "gru_char", "dcgan",
                                  "super_res"])
def test_eager_steps_match_pytorch(name):
    spec = run.load(name)
    cfg = dict(spec.SIZES["small"])
    if "dropout" in cfg:
        cfg["dropout"] = 0.0
    state = run.reference_state(spec, cfg)
    batch = spec.data(cfg, np.random.default_rng(0))
    losses = []
    for lib in (tj, torch):
        step = run.make_step(lib, spec, cfg, state, batch)[0]
        losses.append([step().item() for _ in range(3)])
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-5)


def test_models_tracejit_lacks_are_named():
    assert run._missing(run.load("super_res")) == ["nn.functional.pixel_shuffle"] or \
        hasattr(tj.nn.functional, "pixel_shuffle")
