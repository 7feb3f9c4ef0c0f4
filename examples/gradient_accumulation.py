"""Gradient accumulation: summing gradients of micro-batches (each loss scaled by its
share of the batch) equals the gradient of the full batch, eagerly and with the loss
traced once by tj.trace for micro-batches and full batch alike."""
import tracejit as tj
from tracejit import nn


def main(seed: int = 0) -> dict:
    tj.manual_seed(seed)
    model = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 3))
    x, y = tj.randn(32, 5), tj.randint(0, 3, (32,))
    loss_fn = nn.CrossEntropyLoss()

    model.zero_grad()
    loss_fn(model(x), y).backward()
    full = [p.grad.clone() for p in model.parameters()]

    model.zero_grad()
    for xb, yb in zip(x.split(8), y.split(8)):            # 4 micro-batches of 8
        (loss_fn(model(xb), yb) * (len(xb) / len(x))).backward()
    accumulated = [p.grad for p in model.parameters()]
    diff = max((a - b).abs().max().item() for a, b in zip(full, accumulated))
    print(f"full-batch vs accumulated gradient: max |diff| = {diff:.2e}")

    traced = tj.trace(lambda a, b: loss_fn(model(a), b), (x[:8], y[:8]))
    model.zero_grad()
    for xb, yb in zip(x.split(8), y.split(8)):
        (traced(xb, yb) * (len(xb) / len(x))).backward()
    traced_diff = max((a - p.grad).abs().max().item()
                      for a, p in zip(full, model.parameters()))
    print(f"the same with tj.trace: max |diff| = {traced_diff:.2e}, "
          f"compiles: {traced.stats['compiles']}")
    return {"max_diff": diff, "traced_diff": traced_diff,
            "compiles": traced.stats["compiles"]}


if __name__ == "__main__":
    main()
