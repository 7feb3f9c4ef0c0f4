"""A small MLP classifier, traced.

Its IR: `python -m tracejit dump examples/mlp.py:MLP --input f32[8,784]`."""
import tracejit as tj
from tracejit import nn


class MLP(nn.Module):
    def __init__(self, sizes=(784, 128, 10)):
        super().__init__()
        self.fc1 = nn.Linear(sizes[0], sizes[1])
        self.fc2 = nn.Linear(sizes[1], sizes[2])

    def forward(self, x):
        return self.fc2(self.fc1(x).relu()).log_softmax(-1)


def gated(x, w):
    """Data-dependent control flow: the trace guards the branch it took."""
    h = x @ w
    if h.mean() > 0:
        h = h.tanh()
    return h.sum(-1)


if __name__ == "__main__":
    model = MLP()
    traced = tj.trace(model, (tj.randn(8, 784),))
    print(traced.graph)
    x = tj.randn(32, 784)
    diff = (traced(x) - model(x)).abs().max().item()
    print(f"tj.trace (traced on a batch of 8) vs eager on a batch of 32: max |diff| = "
          f"{diff:.1e}, compiles: {traced.stats['compiles']}")
