"""Diagnosing vanishing gradients: per-layer gradient norms of a deep network with
sigmoid activations shrink towards the input; with ReLU and Kaiming init they do not.
The gradients of a traced call (tj.trace) are eager's."""
import math

import tracejit as tj
from tracejit import nn


def layer_grad_norms(activation, depth: int = 12, width: int = 64, seed: int = 0,
                     traced: bool = False) -> list:
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

    def loss_fn(a):
        return net(a).pow(2).mean()

    (tj.trace(loss_fn, (x,)) if traced else loss_fn)(x).backward()
    return [layer.weight.grad.norm().item() for layer in net if isinstance(layer, nn.Linear)]


def main() -> dict:
    result, worst = {}, 0.0
    for act in ("sigmoid", "relu"):
        norms = layer_grad_norms(act)
        ratio = norms[0] / norms[-1]
        result[act] = ratio
        bars = " ".join(f"{math.log10(n):5.1f}" for n in norms)
        print(f"{act:8s} log10 |grad| first->last layer: {bars}   first/last = {ratio:.1e}")
        traced = layer_grad_norms(act, traced=True)
        worst = max(worst, max(abs(t - n) / n for t, n in zip(traced, norms)))
    print(f"the same networks through tj.trace: gradient norms within {worst:.1e} "
          "(relative) of eager's")
    result["traced_rel_diff"] = worst
    return result


if __name__ == "__main__":
    main()
