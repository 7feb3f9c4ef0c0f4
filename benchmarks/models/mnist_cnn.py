"""The MNIST CNN of PyTorch's examples (its first version): conv 5x5 - max-pool - ReLU
twice, dropout, two linear layers, log_softmax and the negative log-likelihood, SGD with
momentum, on 28x28 single-channel images.

Written once against a library module `lib` (`tracejit` or `torch`); `forward(x, y)`
returns the loss.
"""
from __future__ import annotations

SIZES = {"small": dict(batch=8, dropout=0.5), "large": dict(batch=64, dropout=0.5)}
TITLE = "MNIST CNN (conv-pool-relu x2, dropout, 2 linear, NLL; batch {batch}, SGD momentum)"
NOTES: list = []  # written as the example writes it (x.view(-1, 320))


def build(lib, cfg):
    nn, F = lib.nn, lib.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
            self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
            self.dropout = nn.Dropout(cfg["dropout"])
            self.fc1 = nn.Linear(320, 50)
            self.fc2 = nn.Linear(50, 10)

        def forward(self, x, y):
            x = F.relu(F.max_pool2d(self.conv1(x), 2))
            x = F.relu(F.max_pool2d(self.conv2(x), 2))
            x = x.view(-1, 320)
            x = F.relu(self.fc1(x))
            x = self.dropout(x)
            x = self.fc2(x)
            return F.nll_loss(F.log_softmax(x, dim=1), y)

    return Net()


def data(cfg, rng):
    x = rng.standard_normal((cfg["batch"], 1, 28, 28)).astype("float32")
    return x, rng.integers(0, 10, cfg["batch"])


def optimizer(lib, model, cfg):
    return lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)


if __name__ == "__main__":
    import sys

    import run
    run.main(sys.argv[1:] + ["mnist_cnn"])
