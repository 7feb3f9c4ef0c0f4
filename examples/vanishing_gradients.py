"""Diagnosing vanishing gradients: per-layer gradient norms of a deep network with
sigmoid activations shrink towards the input; with ReLU and Kaiming init they do not."""
import math

import tracejit as tj
from tracejit import nn


def layer_grad_norms(activation, depth: int = 12, width: int = 64, seed: int = 0) -> list:
    tj.manual_seed(seed)
    layers = []
    for _ in range(depth):
        lin = nn.Linear(width, width)
        if activation == "relu":
            nn.init.kaiming_uniform_(lin.weight, nonlinearity="relu")
            nn.init.zeros_(lin.bias)
        layers += [lin, nn.ReLU() if activation == "relu" else nn.Sigmoid()]
    net = nn.Sequential(*layers)
    x = tj.randn(32, width)
    net(x).pow(2).mean().backward()
    return [layer.weight.grad.norm().item() for layer in net if isinstance(layer, nn.Linear)]


def main() -> dict:
    result = {}
    for act in ("sigmoid", "relu"):
        norms = layer_grad_norms(act)
        ratio = norms[0] / norms[-1]
        result[act] = ratio
        bars = " ".join(f"{math.log10(n):5.1f}" for n in norms)
        print(f"{act:8s} log10 |grad| first->last layer: {bars}   first/last = {ratio:.1e}")
    return result


if __name__ == "__main__":
    main()
