"""The backward graph a user walks (`grad_fn`, `next_functions`, `AccumulateGrad.variable`)
has PyTorch's node names and edges, checked against PyTorch's own graph."""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import tracejit as tj
from conftest import requires_torch

# Each program builds a graph from x [3, 4] (requires grad), w [5, 4] and b [5] (require
# grad), c [3, 4] (does not) and an index tensor t; `lib` is tracejit or torch.
PROGRAMS = {
    "mul scalar": lambda lib, F, x, w, b, c, t: x * 2,
    "reflected mul": lambda lib, F, x, w, b, c, t: 2 * x,
    "add scalar": lambda lib, F, x, w, b, c, t: x + 2,
    "reflected add": lambda lib, F, x, w, b, c, t: 2 + x,
    "rsub": lambda lib, F, x, w, b, c, t: 1 - x,
    "div scalar": lambda lib, F, x, w, b, c, t: x / 2,
    "pow scalar": lambda lib, F, x, w, b, c, t: x ** 2,
    "pow tensor": lambda lib, F, x, w, b, c, t: x.abs() ** x,
    "scalar pow": lambda lib, F, x, w, b, c, t: 2 ** x,
    "mul no-grad tensor": lambda lib, F, x, w, b, c, t: x * c,
    "where": lambda lib, F, x, w, b, c, t: lib.where(c > 0, x, 0.0),
    "linear": lambda lib, F, x, w, b, c, t: F.linear(x, w, b),
    "linear without bias": lambda lib, F, x, w, b, c, t: F.linear(x, w),
    "nn.Linear": lambda lib, F, x, w, b, c, t: lib.nn.Linear(4, 5, dtype=x.dtype)(x),
    "addmm": lambda lib, F, x, w, b, c, t: lib.addmm(b, x, w.t()),
    "t": lambda lib, F, x, w, b, c, t: x.t(),
    "transpose": lambda lib, F, x, w, b, c, t: x.transpose(0, 1),
    "dot": lambda lib, F, x, w, b, c, t: x[0] @ w[0],
    "mv": lambda lib, F, x, w, b, c, t: x @ w[0],
    "sum": lambda lib, F, x, w, b, c, t: x.sum(),
    "sum over dim": lambda lib, F, x, w, b, c, t: x.sum(1),
    "mean over dims": lambda lib, F, x, w, b, c, t: x.mean((0, 1)),
    "max": lambda lib, F, x, w, b, c, t: x.max(),
    "max over dim": lambda lib, F, x, w, b, c, t: x.max(1)[0],
    "min over dim": lambda lib, F, x, w, b, c, t: x.min(0, keepdim=True).values,
    "squeeze": lambda lib, F, x, w, b, c, t: x.unsqueeze(0).squeeze(),
    "squeeze dim": lambda lib, F, x, w, b, c, t: x.unsqueeze(0).squeeze(0),
    "select": lambda lib, F, x, w, b, c, t: x[0],
    "slice": lambda lib, F, x, w, b, c, t: x[:, 1:],
    "index": lambda lib, F, x, w, b, c, t: x[t],
    "clamp": lambda lib, F, x, w, b, c, t: x.clamp(0, 1),
    "softmax": lambda lib, F, x, w, b, c, t: lib.softmax(x, 1),
    "log_softmax": lambda lib, F, x, w, b, c, t: F.log_softmax(x, 1),
    "mse_loss": lambda lib, F, x, w, b, c, t: F.mse_loss(x, c),
    "mse_loss target grad": lambda lib, F, x, w, b, c, t: F.mse_loss(c, x),
    "cross_entropy": lambda lib, F, x, w, b, c, t: F.cross_entropy(x, t),
    "nll_loss": lambda lib, F, x, w, b, c, t: F.nll_loss(F.log_softmax(x, 1), t),
    "bce with logits": lambda lib, F, x, w, b, c, t: F.binary_cross_entropy_with_logits(x, c),
    "gelu": lambda lib, F, x, w, b, c, t: F.gelu(x),
    "layer_norm": lambda lib, F, x, w, b, c, t: F.layer_norm(x, (4,)),
    "layer_norm affine": lambda lib, F, x, w, b, c, t: F.layer_norm(x, (4,), w[0], w[1]),
    "batch_norm": lambda lib, F, x, w, b, c, t: F.batch_norm(
        x, lib.zeros(4, dtype=x.dtype), lib.ones(4, dtype=x.dtype), w[0], w[1], training=True),
    "batch_norm eval": lambda lib, F, x, w, b, c, t: F.batch_norm(
        x, lib.zeros(4, dtype=x.dtype), lib.ones(4, dtype=x.dtype), w[0], w[1]),
    "stack": lambda lib, F, x, w, b, c, t: lib.stack([x, c]),
    "cat": lambda lib, F, x, w, b, c, t: lib.cat([x, c]),
    "var": lambda lib, F, x, w, b, c, t: x.var(),
    "std": lambda lib, F, x, w, b, c, t: x.std(),
    "norm": lambda lib, F, x, w, b, c, t: x.norm(),
    "logsumexp": lambda lib, F, x, w, b, c, t: lib.logsumexp(x, 1),
    "embedding": lambda lib, F, x, w, b, c, t: F.embedding(t, x),
    "reshape": lambda lib, F, x, w, b, c, t: x.reshape(2, 6),
    "cast": lambda lib, F, x, w, b, c, t: (x * 1).double(),
    "conv2d": lambda lib, F, x, w, b, c, t: F.conv2d(x.reshape(1, 1, 3, 4), w[:2].reshape(
        2, 1, 2, 2), b[:2], padding=1),
    "conv1d": lambda lib, F, x, w, b, c, t: F.conv1d(x.reshape(1, 3, 4), lib.ones(
        2, 3, 2, dtype=x.dtype, requires_grad=True), stride=2),
    "max_pool2d": lambda lib, F, x, w, b, c, t: F.max_pool2d(x.reshape(1, 1, 3, 4), 2),
    "avg_pool2d": lambda lib, F, x, w, b, c, t: F.avg_pool2d(x.reshape(1, 3, 4), 2),
    "adaptive global": lambda lib, F, x, w, b, c, t: F.adaptive_avg_pool2d(
        x.reshape(1, 1, 3, 4), 1),
    "adaptive bins": lambda lib, F, x, w, b, c, t: F.adaptive_avg_pool2d(
        x.reshape(1, 1, 3, 4), (2, 3)),
    "flatten": lambda lib, F, x, w, b, c, t: x.reshape(1, 3, 4).flatten(1),
    "MLP loss": lambda lib, F, x, w, b, c, t: F.mse_loss(
        lib.relu(F.linear(x, w, b)), lib.zeros(3, 5)),
}


def walk(fn) -> list:
    """Every node reachable from `fn`, depth first, as (depth, class name or None)."""
    out = []

    def visit(node, depth):
        out.append((depth, None if node is None else type(node).__name__))
        if node is not None:
            for child, nr in node.next_functions:
                assert isinstance(nr, int)
                visit(child, depth + 1)

    visit(fn, 0)
    return out


def _inputs(lib, dtype=np.float64):
    rng = np.random.default_rng(0)

    def data(shape):
        return rng.standard_normal(shape).astype(dtype)
    x = lib.tensor(data((3, 4)), requires_grad=True)
    w = lib.tensor(data((5, 4)), requires_grad=True)
    b = lib.tensor(data((5,)), requires_grad=True)
    c = lib.tensor(data((3, 4)))
    t = lib.tensor([0, 1, 2])
    return x, w, b, c, t


@requires_torch
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_graph_walk_matches_pytorch(name):
    import torch

    program = PROGRAMS[name]
    expected = walk(program(torch, torch.nn.functional, *_inputs(torch)).grad_fn)
    got = walk(program(tj, tj.nn.functional, *_inputs(tj)).grad_fn)
    assert got == expected


@requires_torch
@pytest.mark.parametrize("name", ["linear", "mse_loss", "mse_loss target grad", "softmax",
                                  "layer_norm affine", "stack", "cross_entropy",
                                  "max over dim", "gelu", "std", "MLP loss"])
def test_composite_nodes_give_pytorchs_gradients_and_second_derivatives(name):
    """A composite node's backward, and its double backward (which recomputes the
    composition from the real inputs), against PyTorch's."""
    import torch

    program = PROGRAMS[name]
    results = []
    for lib in (tj, torch):
        x, w, b, c, t = _inputs(lib)
        out = program(lib, lib.nn.functional, x, w, b, c, t)
        seed = lib.tensor(np.random.default_rng(1).standard_normal(tuple(out.shape)))
        firsts = lib.autograd.grad(out, (x, w, b), seed, allow_unused=True, create_graph=True)
        total = sum((g * g).sum() for g in firsts if g is not None and g.requires_grad)
        seconds = lib.autograd.grad(total, (x, w, b), allow_unused=True) \
            if isinstance(total, lib.Tensor) else (None,) * 3
        results.append([None if g is None else g.detach().numpy() for g in firsts + seconds])
    for got, want in zip(*results):
        assert (got is None) == (want is None)
        if got is not None:
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_composite_node_frees_its_graph_and_checks_versions():
    x = tj.randn(3, 4, requires_grad=True)
    loss = tj.nn.functional.mse_loss(x * 1, tj.zeros(3, 4))
    loss.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        loss.backward()
    y = x * 1
    w, b = tj.randn(5, 4, requires_grad=True), tj.randn(5, requires_grad=True)
    loss = tj.nn.functional.linear(y, w, b).sum()  # AddmmBackward0: its matmul saves y
    y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_hooks_and_retain_grad_on_a_composite_output():
    x = tj.randn(3, 4, requires_grad=True)
    p = tj.softmax(x, 1)
    p.retain_grad()
    seen = []
    p.register_hook(lambda g: seen.append(g.shape))
    (p * tj.arange(4.0)).sum().backward()
    assert seen == [tj.Size([3, 4])] and p.grad is not None
    np.testing.assert_allclose(p.grad.numpy(), np.broadcast_to(np.arange(4.0), (3, 4)))


def test_accumulate_grad_keeps_its_leaf_alive():
    """As in PyTorch: the graph holds its leaves, a leaf does not hold its graph."""
    x = tj.randn(3, requires_grad=True)
    y = (x * 2).sum()
    acc = y.grad_fn.next_functions[0][0].next_functions[0][0]
    ref = weakref.ref(x)
    del x
    gc.collect()
    assert ref() is not None and acc.variable is ref()
    leaf = tj.randn(3, requires_grad=True)
    acc = weakref.ref((leaf * 2).grad_fn.next_functions[0][0])
    gc.collect()
    assert acc() is None  # the leaf alone did not keep its accumulator


def test_leaf_hooks_survive_without_a_graph():
    x = tj.randn(3, requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(1))
    gc.collect()
    (x * 2).sum().backward()
    assert seen == [1]


def test_traces_record_the_compositions_primitives():
    """Tracing does not see composite nodes: it records (and fuses) the primitives."""
    def f(x, w, b):
        return tj.nn.functional.mse_loss(tj.nn.functional.linear(x, w, b), tj.zeros(3, 5))

    x, w, b, _, _ = _inputs(tj)
    traced = tj.trace(f, (x, w, b))
    assert "matmul" in {n.op for n in traced.graph.nodes}
    loss = traced(x, w, b)
    want = tj.autograd.grad(f(x, w, b), (x, w, b))
    got = tj.autograd.grad(loss, (x, w, b))
    np.testing.assert_allclose(loss.item(), f(x, w, b).item(), rtol=1e-12)
    for g, h in zip(got, want):
        np.testing.assert_allclose(g.numpy(), h.numpy(), rtol=1e-10)


def test_an_input_passed_twice_to_a_composite():
    x = tj.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = tj.stack([x, x * x])
    (g,) = tj.autograd.grad((y * y).sum(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), 2 * x.detach().numpy() +
                               4 * x.detach().numpy() ** 3)
    (gg,) = tj.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), 2 + 12 * x.detach().numpy() ** 2)
    z = tj.stack([x, x])
    (h,) = tj.autograd.grad((z * z).sum(), x, create_graph=True)
    np.testing.assert_allclose(h.detach().numpy(), 4 * x.detach().numpy())
    (hh,) = tj.autograd.grad(h.sum(), x)
    np.testing.assert_allclose(hh.numpy(), [4.0, 4.0, 4.0])
