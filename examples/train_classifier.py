"""Train a small classifier on a synthetic dataset (made here) to > 90% accuracy with
Adam, save it with tj.save and reload it into a fresh model. The loss is traced once by
tj.trace and serves the full batches and the shorter last one."""
import os
import tempfile

import tracejit as tj
from tracejit import nn


def make_dataset(n: int, seed: int):
    """Three classes: points around three centres in 2-D, plus a noise feature."""
    tj.manual_seed(seed)
    labels = tj.randint(0, 3, (n,))
    centres = tj.tensor([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])
    points = centres[labels] + tj.randn(n, 2) * 0.6
    return tj.cat([points, tj.randn(n, 1)], 1), labels


def make_model():
    return nn.Sequential(nn.Linear(3, 32), nn.ReLU(), nn.Linear(32, 3))


def accuracy(model, x, y) -> float:
    with tj.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def main(path: str | None = None) -> dict:
    x, y = make_dataset(600, seed=1)
    x_test, y_test = make_dataset(300, seed=2)
    tj.manual_seed(0)
    model = make_model()
    opt = tj.optim.Adam(model.parameters(), lr=0.02)

    def loss_fn(a, b):
        return nn.functional.cross_entropy(model(a), b)

    traced = tj.trace(loss_fn, (x[:64], y[:64]))
    for _epoch in range(30):
        for xb, yb in zip(x.split(64), y.split(64)):   # 9 batches of 64, one of 24
            opt.zero_grad()
            traced(xb, yb).backward()
            opt.step()
    traced_diff = abs(traced(x, y).item() - loss_fn(x, y).item())
    print(f"tj.trace vs eager: training loss {loss_fn(x, y).item():.4f}, "
          f"|diff| = {traced_diff:.1e}, compiles: {traced.stats['compiles']}")
    acc = accuracy(model, x_test, y_test)
    path = path or os.path.join(tempfile.mkdtemp(), "classifier.npz")
    tj.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, path)
    restored = make_model()
    restored.load_state_dict(tj.load(path)["model"])
    same = tj.equal(restored(x_test), model(x_test))
    print(f"test accuracy {acc:.3f}; saved to {path}; reloaded model agrees: {same}")
    return {"accuracy": acc, "reloaded_same": same, "traced_diff": traced_diff,
            "compiles": traced.stats["compiles"]}


if __name__ == "__main__":
    main()
