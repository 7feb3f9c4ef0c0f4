"""A network whose depth is chosen per sample: harder inputs (larger norm) get more
residual blocks. Define-by-run autograd handles the different graph per sample, and
tj.script compiles the model once for every depth: the choice is a branch in the program."""
import tracejit as tj
from tracejit import nn


class AdaptiveDepth(nn.Module):
    def __init__(self, width: int = 8, max_depth: int = 4):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(width, width) for _ in range(max_depth)])
        self.head = nn.Linear(width, 1)

    def depth_for(self, x) -> int:
        """Block d runs for a sample whose norm is at least d."""
        return min(len(self.blocks), 1 + int(x.norm().item()))

    def forward(self, x):
        outs = []
        for row in x:                    # a loop over the samples
            norm = row.norm()
            h = row
            d = 0
            for block in self.blocks:    # the blocks the sample's depth asks for
                if norm >= d:            # a tensor: one branch of the program for all
                    h = h + block(h).tanh()
                d += 1
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

    scripted = tj.script(model)          # one program: every depth is a path in it
    worst = 0.0
    for batch in (x, tj.randn(9, 8) * 0.5, tj.randn(3, 8) * 2):
        worst = max(worst, (scripted(batch) - model(batch)).abs().max().item())
    print(f"tj.script vs eager on batches of 6, 9 and 3 samples of mixed depths: "
          f"max |diff| = {worst:.1e}, compiles: {scripted.stats['compiles']}")
    return {"depths": depths, "used": used, "first": losses[0], "last": losses[-1],
            "worst": worst, "compiles": scripted.stats["compiles"]}


if __name__ == "__main__":
    main()
