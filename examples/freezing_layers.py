"""Freezing layers: a pretrained feature extractor keeps its weights while a new head
trains; frozen parameters get no gradient and the optimiser skips them, in eager mode
and in a training step traced with tj.trace."""
import tracejit as tj
from tracejit import nn


def main(seed: int = 0) -> dict:
    tj.manual_seed(seed)
    features = nn.Sequential(nn.Linear(4, 16), nn.ReLU())
    head = nn.Linear(16, 2)
    model = nn.Sequential(features, head)
    features.requires_grad_(False)
    before = {k: v.clone() for k, v in features.state_dict().items()}
    head_before = head.weight.clone()
    opt = tj.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.05)
    x, y = tj.randn(64, 4), tj.randint(0, 2, (64,))

    def loss_fn(a, b):
        return nn.functional.cross_entropy(model(a), b)

    traced = tj.trace(loss_fn, (x, y))
    worst = 0.0
    for step in range(20):
        opt.zero_grad()
        loss = traced(x, y) if step % 2 else loss_fn(x, y)   # traced and eager steps
        loss.backward()
        if step % 2:
            worst = max(worst, abs(loss.item() - loss_fn(x, y).item()))
        opt.step()
    frozen_same = all(tj.equal(before[k], v) for k, v in features.state_dict().items())
    head_moved = (head.weight - head_before).abs().max().item()
    grads = [p.grad is None for p in features.parameters()]
    print(f"frozen layer unchanged: {frozen_same}; frozen grads are None: {all(grads)}; "
          f"head moved by up to {head_moved:.3f}")
    print(f"steps alternating eager and tj.trace: traced loss vs eager's at most "
          f"{worst:.1e} apart, compiles: {traced.stats['compiles']}")
    return {"frozen_same": frozen_same, "frozen_grads_none": all(grads),
            "head_moved": head_moved, "traced_diff": worst,
            "compiles": traced.stats["compiles"]}


if __name__ == "__main__":
    main()
