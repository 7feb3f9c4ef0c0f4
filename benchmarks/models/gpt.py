"""A GPT-style character transformer (minGPT/nanoGPT's shape): token and position
embeddings, pre-LayerNorm blocks of causal self-attention and a GELU MLP, a final
LayerNorm and a linear head; cross-entropy over next characters, AdamW.

The model is written once against a library module `lib` (`tracejit` or `torch`), as a
user writes it; `forward(idx, targets)` returns the loss, as nanoGPT's does.
"""
from __future__ import annotations

import math

SIZES = {"small": dict(vocab=65, n_layer=2, n_embd=64, n_head=4, block=32, batch=4,
                       dropout=0.1),
         "large": dict(vocab=65, n_layer=4, n_embd=128, n_head=4, block=64, batch=16,
                       dropout=0.1)}
TITLE = "GPT char model ({n_layer} layers x {n_embd}, {n_head} heads, batch {batch} x " \
        "{block} tokens, AdamW)"
NOTES: list = []  # written as minGPT writes it: tril mask, views of the split q, k, v


def build(lib, cfg):
    nn, F = lib.nn, lib.nn.functional
    C, H, T = cfg["n_embd"], cfg["n_head"], cfg["block"]

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(C, 3 * C)
            self.c_proj = nn.Linear(C, C)
            self.attn_dropout = nn.Dropout(cfg["dropout"])
            self.resid_dropout = nn.Dropout(cfg["dropout"])
            self.register_buffer("bias", lib.tril(lib.ones(T, T)).view(1, 1, T, T))

        def forward(self, x):
            B, T_, C_ = x.size()
            q, k, v = self.c_attn(x).split(C, dim=2)
            k = k.view(B, T_, H, C_ // H).transpose(1, 2)
            q = q.view(B, T_, H, C_ // H).transpose(1, 2)
            v = v.view(B, T_, H, C_ // H).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T_, :T_] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T_, C_)
            return self.resid_dropout(self.c_proj(y))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(C, 4 * C)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * C, C)
            self.dropout = nn.Dropout(cfg["dropout"])

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(C)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(C)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(cfg["vocab"], C)
            self.wpe = nn.Embedding(T, C)
            self.drop = nn.Dropout(cfg["dropout"])
            self.h = nn.ModuleList([Block() for _ in range(cfg["n_layer"])])
            self.ln_f = nn.LayerNorm(C)
            self.lm_head = nn.Linear(C, cfg["vocab"], bias=False)

        def forward(self, idx, targets):
            b, t = idx.size()
            pos = lib.arange(0, t, dtype=lib.long)
            x = self.drop(self.wte(idx) + self.wpe(pos))
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    return GPT()


def data(cfg, rng):
    text = rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["block"] + 1))
    return text[:, :-1].copy(), text[:, 1:].copy()


def optimizer(lib, model, cfg):
    return lib.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95),
                           weight_decay=0.1)


if __name__ == "__main__":
    import sys

    import run
    run.main(sys.argv[1:] + ["gpt"])
