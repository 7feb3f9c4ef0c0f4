"""The super-resolution CNN of PyTorch's examples (ESPCN): four convolutions with ReLU
and `pixel_shuffle` by 3, MSE against the high-resolution image, Adam.

Written once against a library module `lib` (`tracejit` or `torch`); `forward(x, y)`
returns the loss.
"""
from __future__ import annotations

SIZES = {"small": dict(batch=4, size=32, upscale=3), "large": dict(batch=16, size=64,
                                                                   upscale=3)}
TITLE = "super-resolution CNN (4 convs, pixel_shuffle x{upscale}, {size}x{size}, batch {batch})"
NOTES: list = []
# what the model needs from the library; the runner names what is missing
REQUIRES = ["nn.functional.pixel_shuffle"]


def build(lib, cfg):
    nn, F = lib.nn, lib.nn.functional
    r = cfg["upscale"]

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 64, 5, padding=2)
            self.conv2 = nn.Conv2d(64, 64, 3, padding=1)
            self.conv3 = nn.Conv2d(64, 32, 3, padding=1)
            self.conv4 = nn.Conv2d(32, r * r, 3, padding=1)

        def forward(self, x, y):
            x = F.relu(self.conv1(x))
            x = F.relu(self.conv2(x))
            x = F.relu(self.conv3(x))
            return F.mse_loss(F.pixel_shuffle(self.conv4(x), r), y)

    return Net()


def data(cfg, rng):
    b, s, r = cfg["batch"], cfg["size"], cfg["upscale"]
    return (rng.random((b, 1, s, s)).astype("float32"),
            rng.random((b, 1, s * r, s * r)).astype("float32"))


def optimizer(lib, model, cfg):
    return lib.optim.Adam(model.parameters(), lr=1e-3)


if __name__ == "__main__":
    import sys

    import run
    run.main(sys.argv[1:] + ["super_res"])
