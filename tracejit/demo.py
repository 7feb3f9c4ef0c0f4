"""`python -m tracejit demo`: a guided tour of eager tensors, autograd and tracing.

Each section prints what it does and what tracejit computed; the test suite
runs it and checks the figures.
"""
from __future__ import annotations

import statistics
import time

import tracejit as tj


def _section(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 66 - len(title)))


def graph_introspection() -> dict:
    _section("1. The graph behind an eager computation")
    x = tj.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = tj.tensor([0.5, -1.0, 2.0], requires_grad=True)
    y = (x * w).tanh().sum()
    print(f"y = (x * w).tanh().sum() = {y.item():.6f}")
    print(f"y.grad_fn = {y.grad_fn.name()}")
    node, depth = y.grad_fn, 0
    while node is not None:
        nexts = [f"{n.name() if n else None}" for n, _ in node.next_functions]
        print(f"{'  ' * depth}{node.name()} -> {', '.join(nexts) or '(leaf sink)'}")
        if node.name() == "AccumulateGrad":
            print(f"{'  ' * depth}  .variable is x: {node.variable is x}")
        node = node.next_functions[0][0] if node.next_functions else None
        depth += 1
    y.backward()
    print(f"dy/dx = {x.grad}")
    print(f"dy/dw = {w.grad}")
    return {"y": y.item(), "x_grad": x.grad.tolist(), "w_grad": w.grad.tolist()}


class ClampedExp(tj.autograd.Function):
    """exp(x) whose gradient is clipped to [-1, 1]: a custom backward rule."""

    @staticmethod
    def forward(ctx, x):
        out = x.exp()
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return (grad * out).clamp(-1.0, 1.0)


def custom_function() -> dict:
    _section("2. A custom autograd.Function")
    x = tj.tensor([-1.0, 0.0, 2.0], requires_grad=True)
    y = ClampedExp.apply(x)
    print(f"ClampedExp.apply(x) = {y}")
    print(f"y.grad_fn = {y.grad_fn.name()}")
    y.sum().backward()
    print(f"clipped gradient    = {x.grad}  (exp would give [0.3679, 1, 7.389])")
    return {"grad": x.grad.tolist()}


def higher_order() -> dict:
    _section("3. Higher-order gradients with create_graph=True")
    x = tj.tensor(2.0, requires_grad=True)
    y = x ** 4
    (d1,) = tj.autograd.grad(y, x, create_graph=True)
    (d2,) = tj.autograd.grad(d1, x, create_graph=True)
    (d3,) = tj.autograd.grad(d2, x)
    print(f"y = x**4 at x=2: dy/dx = {d1.item():g}, d2y/dx2 = {d2.item():g}, "
          f"d3y/dx3 = {d3.item():g}")
    print("expected          4x^3 = 32,        12x^2 = 48,         24x = 48")
    return {"d1": d1.item(), "d2": d2.item(), "d3": d3.item()}


def training_step() -> dict:
    _section("4. A small model trained eagerly")
    tj.manual_seed(0)
    model = tj.nn.Sequential(tj.nn.Linear(2, 16), tj.nn.Tanh(), tj.nn.Linear(16, 1))
    opt = tj.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = tj.randn(64, 2)
    target = (x[:, :1] * x[:, 1:]).tanh()
    losses = []
    for _step in range(60):
        opt.zero_grad()
        loss = tj.nn.functional.mse_loss(model(x), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    print(f"parameters: {[name for name, _ in model.named_parameters()]}")
    print(f"loss: step 0 {losses[0]:.4f} -> step 59 {losses[-1]:.4f}")
    return {"first": losses[0], "last": losses[-1]}


def traced_model() -> dict:
    _section("5. Tracing a model: guards, IR before and after fusion, speed")

    tj.manual_seed(0)
    model = tj.nn.Sequential(tj.nn.Linear(64, 256), tj.nn.GELU(approximate="tanh"),
                             tj.nn.Linear(256, 64), tj.nn.LayerNorm(64))
    with tj.no_grad():  # inference: the grad mode is part of what a trace assumes
        traced = tj.trace(model, (tj.randn(8, 64),))
    stages = traced.traces[0].stages
    print(stages[0][1])
    print()
    print(traced.graph)
    x = tj.randn(512, 64)
    with tj.no_grad():
        start = time.perf_counter()
        same = bool(tj.allclose(traced(x), model(x), atol=1e-5))  # the first call
        first = time.perf_counter() - start
        background = tj.backends.background.status()["sent"]
        tj.jit.wait_for_kernels()  # kernels new to the disk cache compile meanwhile
        traced(x)
        ready = time.perf_counter() - start

        def timed(fn) -> float:
            start = time.perf_counter()
            fn()
            return time.perf_counter() - start
        eager, compiled = [], []
        for _ in range(25):  # interleaved, so that a slow spell of the machine hits both
            eager.append(timed(lambda: model(x)))
            compiled.append(timed(lambda: traced(x)))
        eager_s, traced_s = statistics.median(eager), statistics.median(compiled)
    how = (f"{background} kernel(s) compiled in the background, in use after {ready:.1f} s"
           if background else "kernels loaded from the disk cache" if
           traced.stats["compiles"] else "no kernels")
    print(f"\nbatch 512 (traced with batch 8: the sizes are symbolic): traced == eager: {same}"
          f"\nfirst call {first:.2f} s ({how}); then, medians of 25 calls each: "
          f"eager {eager_s * 1e3:.2f} ms, traced {traced_s * 1e3:.2f} ms "
          f"(speed-up {eager_s / traced_s:.2f}x); compiles: {traced.stats['compiles']}"
          "\n(timings on a machine that other jobs share vary from run to run; "
          "docs/benchmarks.md has measured tables)")
    return {"same": same, "nodes_before": len(stages[0][1].nodes),
            "nodes_after": len(traced.graph.nodes), "compiles": traced.stats["compiles"]}


def main() -> dict:
    print("tracejit demo: eager tensors and autograd (PyTorch semantics), then tracing")
    return {"graph": graph_introspection(), "function": custom_function(),
            "higher_order": higher_order(), "training": training_step(),
            "traced": traced_model()}


if __name__ == "__main__":
    main()
