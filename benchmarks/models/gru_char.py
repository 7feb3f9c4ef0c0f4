"""A character-level GRU model (char-rnn's shape): embedding, a 1-layer GRU
(batch_first), a linear head over the characters; cross-entropy, Adam.

Written once against a library module `lib` (`tracejit` or `torch`); `forward(x, y)`
returns the loss.
"""
from __future__ import annotations

SIZES = {"small": dict(vocab=65, hidden=64, seq=32, batch=8),
         "large": dict(vocab=65, hidden=256, seq=64, batch=32)}
TITLE = "GRU char model (GRU {hidden}, {seq} steps x batch {batch}, Adam)"
NOTES: list = []


def build(lib, cfg):
    nn, F = lib.nn, lib.nn.functional

    class CharGRU(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(cfg["vocab"], cfg["hidden"])
            self.gru = nn.GRU(cfg["hidden"], cfg["hidden"], batch_first=True)
            self.head = nn.Linear(cfg["hidden"], cfg["vocab"])

        def forward(self, x, y):
            out, h = self.gru(self.embed(x))
            logits = self.head(out)
            return F.cross_entropy(logits.reshape(-1, cfg["vocab"]), y.reshape(-1))

    return CharGRU()


def data(cfg, rng):
    text = rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["seq"] + 1))
    return text[:, :-1].copy(), text[:, 1:].copy()


def optimizer(lib, model, cfg):
    return lib.optim.Adam(model.parameters(), lr=2e-3)


if __name__ == "__main__":
    import sys

    import run
    run.main(sys.argv[1:] + ["gru_char"])
