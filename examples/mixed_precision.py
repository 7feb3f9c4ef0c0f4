"""Mixed-precision training of a small CNN with BatchNorm: autocast + GradScaler, the
loss traced (the casts are in the graph), against the same training in float32.

The data: 8x8 images with one bright quadrant; the class is which one.
Run: python examples/mixed_precision.py
"""
import time

import tracejit as tj
from tracejit import nn


def make_data(n: int, seed: int):
    tj.manual_seed(seed)
    labels = tj.randint(0, 4, (n,))
    images = tj.randn(n, 1, 8, 8)
    for q, (r, c) in enumerate([(0, 0), (0, 4), (4, 0), (4, 4)]):
        mask = (labels == q).float().reshape(n, 1, 1, 1)
        patch = tj.zeros(n, 1, 8, 8)
        patch[:, :, r:r + 4, c:c + 4] = 0.8
        images = images + mask * patch
    return images, labels


def make_model():
    tj.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 4))


def train(mixed: bool, steps: int = 60, batch: int = 64) -> dict:
    x, y = make_data(steps * batch, seed=1)
    model = make_model()
    opt = tj.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = tj.amp.GradScaler("cpu", enabled=mixed)
    lossf = nn.CrossEntropyLoss()

    def loss_of(xb, yb):
        return lossf(model(xb), yb)

    region = tj.autocast("cpu", dtype=tj.float16, enabled=mixed)
    with region:
        traced = tj.trace(loss_of, (x[:batch], y[:batch]))
    losses, times = [], []
    for step in range(steps):
        xb, yb = x[step * batch:(step + 1) * batch], y[step * batch:(step + 1) * batch]
        start = time.perf_counter()
        opt.zero_grad()
        with region:
            loss = traced(xb, yb)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
    model.eval()
    xt, yt = make_data(512, seed=2)
    with tj.no_grad(), region:
        accuracy = (model(xt).argmax(1) == yt).float().mean().item()
    times.sort()
    return {"first": losses[0], "last": sum(losses[-5:]) / 5, "accuracy": accuracy,
            "scale": scaler.get_scale(), "step_ms": 1e3 * times[len(times) // 2],
            "compiles": traced.stats["compiles"]}


def main() -> dict:
    fp32 = train(mixed=False)
    amp = train(mixed=True)
    for name, r in (("float32", fp32), ("autocast float16", amp)):
        print(f"{name:17s} loss {r['first']:.3f} -> {r['last']:.3f}, test accuracy "
              f"{r['accuracy']:.1%}, median step {r['step_ms']:.2f} ms, loss scale "
              f"{r['scale']:.0f}, traces {r['compiles']}")
    print(f"mixed precision / float32 step time: {amp['step_ms'] / fp32['step_ms']:.2f}x "
          "(on a CPU float16 saves memory, not time: BatchNorm's running statistics are "
          "updated in place, so this traced step runs op by op, in numpy's slow float16 "
          "loops, and matmuls convert to float32 and back; fused float16 kernels compute "
          "in float32 and run at float32's speed)")
    return {"fp32": fp32, "amp": amp}


if __name__ == "__main__":
    main()
