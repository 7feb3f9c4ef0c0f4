"""The DCGAN of PyTorch's examples (dcgan): a generator of ConvTranspose2d + BatchNorm2d +
ReLU layers ending in tanh, from noise [B, nz, 1, 1] to 64x64 images, and a
discriminator of strided Conv2d + BatchNorm2d + LeakyReLU(0.2) layers ending in a
sigmoid; the example's weights_init (N(0, 0.02) convolutions, N(1, 0.02) BatchNorm
scales); BCELoss, Adam(lr 2e-4, betas (0.5, 0.999)) for each network. One step is the
example's: the discriminator on a real batch and on the generator's detached fakes, its
update; then the generator through the discriminator, its update.

Written once against a library module `lib` (`tracejit` or `torch`). The step uses two
networks, so the traced and compiled contestants wrap each (`PARTS`), as a user would.
"""
from __future__ import annotations

SIZES = {"small": dict(nz=16, ngf=8, ndf=8, batch=8),
         "large": dict(nz=100, ngf=32, ndf=32, batch=32)}
TITLE = "DCGAN (64x64 images, ngf {ngf}, ndf {ndf}, nz {nz}, batch {batch}, two Adams)"
NOTES: list = []
NC = 3


def build(lib, cfg):
    nn = lib.nn
    nz, ngf, ndf = cfg["nz"], cfg["ngf"], cfg["ndf"]

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False),
                nn.BatchNorm2d(ngf * 8), nn.ReLU(True),
                nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False),
                nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
                nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),
                nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
                nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),
                nn.BatchNorm2d(ngf), nn.ReLU(True),
                nn.ConvTranspose2d(ngf, NC, 4, 2, 1, bias=False),
                nn.Tanh())

        def forward(self, input):
            return self.main(input)

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                nn.Conv2d(NC, ndf, 4, 2, 1, bias=False),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
                nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False),
                nn.BatchNorm2d(ndf * 4), nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf * 4, ndf * 8, 4, 2, 1, bias=False),
                nn.BatchNorm2d(ndf * 8), nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False),
                nn.Sigmoid())

        def forward(self, input):
            return self.main(input)

    def weights_init(m):
        classname = m.__class__.__name__
        if classname.find("Conv") != -1:
            nn.init.normal_(m.weight.data, 0.0, 0.02)
        elif classname.find("BatchNorm") != -1:
            nn.init.normal_(m.weight.data, 1.0, 0.02)
            nn.init.constant_(m.bias.data, 0)

    class DCGAN(nn.Module):
        def __init__(self):
            super().__init__()
            self.netG = Generator()
            self.netD = Discriminator()
            self.netG.apply(weights_init)
            self.netD.apply(weights_init)

    return DCGAN()


def data(cfg, rng):
    noise = rng.standard_normal((cfg["batch"], cfg["nz"], 1, 1)).astype("float32")
    real = rng.uniform(-1, 1, (cfg["batch"], NC, 64, 64)).astype("float32")
    return noise, real


def optimizer(lib, model, cfg):
    return (lib.optim.Adam(model.netD.parameters(), lr=2e-4, betas=(0.5, 0.999)),
            lib.optim.Adam(model.netG.parameters(), lr=2e-4, betas=(0.5, 0.999)))


def parts(inputs):
    """The networks a traced or compiled contestant wraps, each with example inputs."""
    noise, real = inputs
    return {"netG": (noise,), "netD": (real,)}


def train_step(lib, nets, opts, inputs):
    """One iteration of the example's training loop; returns errD + errG (detached)."""
    netG, netD = nets["netG"], nets["netD"]
    optimizerD, optimizerG = opts
    noise, real = inputs
    criterion = lib.nn.BCELoss()
    batch_size = real.shape[0]
    real_label, fake_label = 1.0, 0.0
    # (1) update D: maximize log(D(x)) + log(1 - D(G(z)))
    optimizerD.zero_grad()
    label = lib.full((batch_size,), real_label)
    output = netD(real).view(-1)
    errD_real = criterion(output, label)
    errD_real.backward()
    fake = netG(noise)
    label = lib.full((batch_size,), fake_label)
    output = netD(fake.detach()).view(-1)
    errD_fake = criterion(output, label)
    errD_fake.backward()
    optimizerD.step()
    # (2) update G: maximize log(D(G(z)))
    optimizerG.zero_grad()
    label = lib.full((batch_size,), real_label)
    output = netD(fake).view(-1)
    errG = criterion(output, label)
    errG.backward()
    optimizerG.step()
    return (errD_real + errD_fake + errG).detach()


if __name__ == "__main__":
    import sys

    import run
    run.main(sys.argv[1:] + ["dcgan"])
