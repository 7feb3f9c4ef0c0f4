"""Attention whose scores are scaled by a per-token importance mask: tokens with
importance 0 get no attention and therefore no gradient. tj.trace compiles the same
function once for every batch, query and key length."""
import math

import tracejit as tj


def attention(q, k, v, importance):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores * importance.unsqueeze(-2)                   # scale per key token
    scores = scores.masked_fill(importance.unsqueeze(-2) == 0, -1e9)
    weights = scores.softmax(-1)
    return weights @ v, weights


def main(seed: int = 0) -> dict:
    tj.manual_seed(seed)
    q, k = tj.randn(2, 4, 8), tj.randn(2, 5, 8)
    v = tj.randn(2, 5, 8, requires_grad=True)
    importance = tj.tensor([[1.0, 0.5, 0.0, 2.0, 1.0], [0.0, 1.0, 1.0, 0.0, 0.3]])
    out, weights = attention(q, k, v, importance)
    out.sum().backward()
    masked_weight = weights[importance.unsqueeze(1).expand(2, 4, 5) == 0].abs().max().item()
    masked_grad = v.grad[importance == 0].abs().max().item()
    print(f"output {list(out.shape)}; attention rows sum to "
          f"{weights.sum(-1).min().item():.4f}..{weights.sum(-1).max().item():.4f}")
    print(f"largest weight on an unimportant token: {masked_weight:.1e}; "
          f"largest gradient reaching one: {masked_grad:.1e}")

    traced = tj.trace(attention, (q, k, v, importance))
    q, k, v = tj.randn(3, 6, 8), tj.randn(3, 7, 8), tj.randn(3, 7, 8, requires_grad=True)
    importance = (tj.rand(3, 7) > 0.3).float()
    traced_diff = (traced(q, k, v, importance)[0] - attention(q, k, v, importance)[0]
                   ).abs().max().item()
    print(f"tj.trace vs eager on 3 batches of 6 queries and 7 keys: max |diff| = "
          f"{traced_diff:.1e}, compiles: {traced.stats['compiles']}")
    return {"masked_weight": masked_weight, "masked_grad": masked_grad,
            "row_sums": weights.sum(-1).detach().numpy(), "traced_diff": traced_diff,
            "compiles": traced.stats["compiles"]}


if __name__ == "__main__":
    main()
