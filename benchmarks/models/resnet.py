"""A torchvision-style ResNet for 32x32 images: torchvision's BasicBlock (two 3x3 convs
with BatchNorm2d, a 1x1 conv and BatchNorm shortcut when the shape changes), a 3x3 stem,
three stages, global average pooling and a linear classifier; cross-entropy, SGD with
momentum and weight decay. Small: one block per stage (ResNet-8); large: three
(ResNet-20, the CIFAR ResNet of He et al.).

Written once against a library module `lib` (`tracejit` or `torch`); `forward(x, y)`
returns the loss.
"""
from __future__ import annotations

SIZES = {"small": dict(blocks=1, width=16, batch=8), "large": dict(blocks=3, width=16,
                                                                    batch=32)}
TITLE = "ResNet (BasicBlock x{blocks} per stage, widths {width}-{width}*4, 32x32, batch " \
        "{batch}, SGD)"
NOTES: list = []


def build(lib, cfg):
    nn, F = lib.nn, lib.nn.functional

    class BasicBlock(nn.Module):
        expansion = 1

        def __init__(self, inplanes, planes, stride=1, downsample=None):
            super().__init__()
            self.conv1 = nn.Conv2d(inplanes, planes, 3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU()
            self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = downsample

        def forward(self, x):
            identity = x
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            if self.downsample is not None:
                identity = self.downsample(x)
            return self.relu(out + identity)

    class ResNet(nn.Module):
        def __init__(self, num_classes=10):
            super().__init__()
            w = cfg["width"]
            self.inplanes = w
            self.conv1 = nn.Conv2d(3, w, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(w)
            self.relu = nn.ReLU()
            self.layer1 = self._make_layer(w, cfg["blocks"])
            self.layer2 = self._make_layer(2 * w, cfg["blocks"], stride=2)
            self.layer3 = self._make_layer(4 * w, cfg["blocks"], stride=2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(4 * w, num_classes)

        def _make_layer(self, planes, blocks, stride=1):
            downsample = None
            if stride != 1 or self.inplanes != planes:
                downsample = nn.Sequential(
                    nn.Conv2d(self.inplanes, planes, 1, stride=stride, bias=False),
                    nn.BatchNorm2d(planes))
            layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
            self.inplanes = planes
            layers += [BasicBlock(planes, planes) for _ in range(1, blocks)]
            return nn.Sequential(*layers)

        def forward(self, x, y):
            x = self.relu(self.bn1(self.conv1(x)))
            x = self.layer3(self.layer2(self.layer1(x)))
            x = self.fc(self.avgpool(x).flatten(1))
            return F.cross_entropy(x, y)

    return ResNet()


def data(cfg, rng):
    x = rng.standard_normal((cfg["batch"], 3, 32, 32)).astype("float32")
    return x, rng.integers(0, 10, cfg["batch"])


def optimizer(lib, model, cfg):
    return lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)


if __name__ == "__main__":
    import sys

    import run
    run.main(sys.argv[1:] + ["resnet"])
