"""A per-sample loop over a padded batch, each sequence run at its true length through
nn.RNN, compiled once with tj.script: new batch sizes and lengths reuse the program,
and gradients through the loop equal eager's."""
import tracejit as tj
from tracejit import nn


class PerSample(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(3, 8)
        self.head = nn.Linear(8, 1)

    def forward(self, x, lengths):
        outs = []
        for i in range(x.shape[0]):
            n = int(lengths[i])
            out, h = self.rnn(x[i, :n].unsqueeze(1))
            outs.append(h[0, 0])
        return self.head(tj.stack(outs))


def main(seed: int = 0) -> dict:
    tj.manual_seed(seed)
    model = PerSample()
    scripted = tj.script(model)
    opt = tj.optim.SGD(model.parameters(), lr=0.05)
    losses, worst = [], 0.0
    for step in range(6):
        batch, length = 3 + step, 4 + 2 * step
        x = tj.randn(batch, length, 3)
        lengths = tj.randint(1, length + 1, (batch,))
        y = tj.randn(batch, 1)
        eager = ((model(x, lengths) - y) ** 2).mean()
        loss = ((scripted(x, lengths) - y) ** 2).mean()
        worst = max(worst, abs(loss.item() - eager.item()))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    print(f"compiles for {len(losses)} batches of new sizes and lengths: "
          f"{scripted.stats['compiles']}")
    print(f"largest difference of a loss from eager's: {worst:.2e}")
    return {"compiles": scripted.stats["compiles"], "worst": worst, "losses": losses}


if __name__ == "__main__":
    main()
