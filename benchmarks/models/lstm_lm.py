"""The word-level LSTM language model of PyTorch's examples (word_language_model):
embedding, dropout, a 2-layer LSTM, dropout, a linear decoder tied to the embedding's
weight; cross-entropy over the next words, SGD (the example's plain update, with gradient
clipping). Every step starts from a zero hidden state.

Written once against a library module `lib` (`tracejit` or `torch`); `forward(x, y)`
returns the loss (inputs are [seq, batch], as in the example).
"""
from __future__ import annotations

SIZES = {"small": dict(vocab=1000, emsize=64, nhid=64, bptt=16, batch=8, dropout=0.2),
         "large": dict(vocab=10000, emsize=200, nhid=200, bptt=35, batch=20, dropout=0.2)}
TITLE = "LSTM word LM (vocab {vocab}, 2 x LSTM {nhid}, tied decoder, {bptt} steps x batch " \
        "{batch}, SGD + clipping)"
NOTES: list = []


def build(lib, cfg):
    nn, F = lib.nn, lib.nn.functional

    class RNNModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(cfg["dropout"])
            self.encoder = nn.Embedding(cfg["vocab"], cfg["emsize"])
            self.rnn = nn.LSTM(cfg["emsize"], cfg["nhid"], 2, dropout=cfg["dropout"])
            self.decoder = nn.Linear(cfg["nhid"], cfg["vocab"])
            self.decoder.weight = self.encoder.weight  # tied weights (emsize == nhid)

        def forward(self, x, y):
            emb = self.drop(self.encoder(x))
            output, hidden = self.rnn(emb)
            output = self.drop(output)
            decoded = self.decoder(output).view(-1, cfg["vocab"])
            return F.cross_entropy(decoded, y.view(-1))

    return RNNModel()


def data(cfg, rng):
    text = rng.integers(0, cfg["vocab"], (cfg["bptt"] + 1, cfg["batch"]))
    return text[:-1].copy(), text[1:].copy()


def optimizer(lib, model, cfg):
    return lib.optim.SGD(model.parameters(), lr=20.0)


CLIP = 0.25  # the step clips the gradients' norm to this before the update


if __name__ == "__main__":
    import sys

    import run
    run.main(sys.argv[1:] + ["lstm_lm"])
