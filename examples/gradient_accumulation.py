"""Gradient accumulation: summing gradients of micro-batches (each loss scaled by its
share of the batch) equals the gradient of the full batch."""
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
    return {"max_diff": diff}


if __name__ == "__main__":
    main()
