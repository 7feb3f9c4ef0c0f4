"""A network whose depth is chosen per sample: harder inputs (larger norm) get more
residual blocks. Define-by-run autograd handles the different graph per sample."""
import tracejit as tj
from tracejit import nn


class AdaptiveDepth(nn.Module):
    def __init__(self, width: int = 8, max_depth: int = 4):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(width, width) for _ in range(max_depth)])
        self.head = nn.Linear(width, 1)

    def depth_for(self, x) -> int:
        return min(len(self.blocks), 1 + int(x.norm().item()))

    def forward(self, x):
        outs = []
        for row in x:
            h = row
            for block in self.blocks[:self.depth_for(row)]:
                h = h + block(h).tanh()
            outs.append(self.head(h))
        return tj.stack(outs)


def main(seed: int = 0) -> dict:
    tj.manual_seed(seed)
    model = AdaptiveDepth()
    x = tj.randn(6, 8) * tj.linspace(0.1, 1.2, 6).unsqueeze(1)
    y = tj.randn(6, 1)
    depths = [model.depth_for(row) for row in x]
    opt = tj.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    used = [b for b, blk in enumerate(model.blocks) if blk.weight.grad is not None]
    print(f"depth per sample: {depths}")
    print(f"blocks that received gradient: {used}")
    print(f"loss: {losses[0]:.4f} -> {losses[-1]:.4f}")
    return {"depths": depths, "used": used, "first": losses[0], "last": losses[-1]}


if __name__ == "__main__":
    main()
