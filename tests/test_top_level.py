"""nn.functional's operations at the package's top level (tracejit/nn/top_level.py), as
PyTorch exports them: the same values as `torch.<name>` called with the same arguments,
ATen's argument order included (torch.embedding takes the weight first)."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from conftest import requires_torch

pytestmark = requires_torch

R = np.random.default_rng(0)


def _a(*shape):
    return R.standard_normal(shape).astype(np.float32)


# name -> the arguments (numpy arrays become tensors of each library; everything else is
# passed as it is)
CALLS = {
    "conv1d": (_a(2, 3, 9), _a(4, 3, 3), _a(4), 2, 1),
    "conv2d": (_a(2, 3, 7, 6), _a(4, 3, 3, 2), _a(4), 1, 1),
    "conv3d": (_a(1, 2, 5, 4, 4), _a(3, 2, 2, 2, 2)),
    "conv_transpose1d": (_a(2, 3, 5), _a(3, 4, 3), None, 2),
    "conv_transpose2d": (_a(2, 3, 4, 4), _a(3, 2, 3, 3), _a(2), 2, 1),
    "conv_transpose3d": (_a(1, 2, 3, 3, 3), _a(2, 2, 2, 2, 2)),
    "avg_pool1d": (_a(2, 3, 8), 2),
    "adaptive_avg_pool1d": (_a(2, 3, 8), 3),
    "max_pool1d": (_a(2, 3, 8), 3, 2),
    "max_pool2d": (_a(2, 3, 6, 6), 2),
    "max_pool3d": (_a(1, 2, 4, 4, 4), 2),
    "bilinear": (_a(4, 3), _a(4, 5), _a(2, 3, 5), _a(2)),
    "celu": (_a(3, 4), 0.7),
    "selu": (_a(3, 4),),
    "rrelu": (_a(3, 4), 0.1, 0.3, False),  # (eval: the mean slope)
    "hardshrink": (_a(3, 4), 0.3),
    "threshold": (_a(3, 4), 0.1, -2.0),
    "prelu": (_a(2, 3, 4), np.array([0.1, 0.2, 0.3], np.float32)),
    "pixel_shuffle": (_a(1, 8, 2, 3), 2),
    "pixel_unshuffle": (_a(1, 2, 4, 6), 2),
    "cosine_similarity": (_a(4, 5), _a(4, 5)),
    "pairwise_distance": (_a(4, 5), _a(4, 5)),
    "rms_norm": (_a(3, 4), [4], _a(4)),
    "layer_norm": (_a(3, 4), [4], _a(4), _a(4), 1e-5),
    "group_norm": (_a(2, 4, 3), 2, _a(4), _a(4)),
    "embedding": (_a(6, 3), np.array([[0, 5], [2, 2]]), -1),
    "batch_norm": (_a(4, 3, 2), _a(3), _a(3), np.zeros(3, np.float32),
                   np.ones(3, np.float32), True, 0.1, 1e-5, False),
    "instance_norm": (_a(2, 3, 5), _a(3), _a(3), None, None, True, 0.1, 1e-5, False),
    "dropout": (_a(3, 4), 0.5, False),
    "feature_alpha_dropout": (_a(3, 4, 2), 0.5, False),
    "alpha_dropout": (_a(3, 4), 0.5, False),
}


def _args(lib, args):
    return [lib.from_numpy(a.copy()) if isinstance(a, np.ndarray) else a for a in args]


@pytest.mark.parametrize("name", sorted(CALLS))
def test_top_level_functions_take_pytorchs_arguments(name):
    import torch

    want = getattr(torch, name)(*_args(torch, CALLS[name]))
    got = getattr(tj, name)(*_args(tj, CALLS[name]))
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_every_top_level_name_is_checked_and_in_place_ones_update_the_input():
    from tracejit.nn import top_level

    in_place = {n for n in top_level.NAMES if n.endswith("_")}
    assert set(top_level.NAMES) - in_place == set(CALLS)
    import torch

    for name in sorted(in_place):
        args = CALLS.get(name[:-1], (_a(3, 4),))[1:]
        x = _a(3, 4)
        t, u = torch.from_numpy(x.copy()), tj.from_numpy(x.copy())
        if name == "rrelu_":  # random slopes in training: the eval form
            args = (0.1, 0.3, False)
        getattr(torch, name)(t, *args)
        out = getattr(tj, name)(u, *args)
        assert out is u
        np.testing.assert_allclose(u.numpy(), t.numpy(), rtol=1e-5, atol=1e-6)
