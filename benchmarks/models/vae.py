"""The VAE of PyTorch's examples (MNIST): a 784-400-(20, 20) MLP encoder, the
reparameterisation `mu + eps * exp(logvar / 2)`, a 20-400-784 decoder; the loss is the
binary cross-entropy of the reconstruction (summed) plus the KL divergence, Adam.

Written once against a library module `lib` (`tracejit` or `torch`); `forward(x)`
returns the loss. The example decodes through a sigmoid and calls
`F.binary_cross_entropy`; tracejit has no `binary_cross_entropy`, so the decoder returns
logits and the loss is `binary_cross_entropy_with_logits` (the same value).
"""
from __future__ import annotations

SIZES = {"small": dict(batch=16, hidden=400, latent=20),
         "large": dict(batch=128, hidden=400, latent=20)}
TITLE = "VAE (784-{hidden}-{latent} MLP encoder/decoder, BCE + KL, batch {batch}, Adam)"
RANDOM = True  # the reparameterisation draws noise every step
NOTES = ["BCE on logits (binary_cross_entropy_with_logits), where the example applies "
         "a sigmoid and F.binary_cross_entropy"]


def build(lib, cfg):
    nn, F = lib.nn, lib.nn.functional

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(784, cfg["hidden"])
            self.fc21 = nn.Linear(cfg["hidden"], cfg["latent"])
            self.fc22 = nn.Linear(cfg["hidden"], cfg["latent"])
            self.fc3 = nn.Linear(cfg["latent"], cfg["hidden"])
            self.fc4 = nn.Linear(cfg["hidden"], 784)

        def forward(self, x):
            h1 = F.relu(self.fc1(x))
            mu, logvar = self.fc21(h1), self.fc22(h1)
            std = (0.5 * logvar).exp()
            z = mu + lib.randn_like(std) * std
            logits = self.fc4(F.relu(self.fc3(z)))
            bce = F.binary_cross_entropy_with_logits(logits, x, reduction="sum")
            kld = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum()
            return bce + kld

    return VAE()


def data(cfg, rng):
    return (rng.random((cfg["batch"], 784)).astype("float32"),)


def optimizer(lib, model, cfg):
    return lib.optim.Adam(model.parameters(), lr=1e-3)


if __name__ == "__main__":
    import sys

    import run
    run.main(sys.argv[1:] + ["vae"])
