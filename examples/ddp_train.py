"""Data-parallel training on MPI: every rank trains the same MLP on its share of the data;
DistributedDataParallel averages the gradients during backward().

    mpiexec -n 2 python examples/ddp_train.py

(Run alone, it is a world of one process.)
"""
import numpy as np

import tracejit as tj
import tracejit.distributed as dist
from tracejit import nn
from tracejit.nn.parallel import DistributedDataParallel as DDP
from tracejit.utils.data import DataLoader, DistributedSampler, TensorDataset


def main(epochs: int = 3) -> float:
    dist.init_process_group("mpi")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 10)).astype(np.float32)
    y = (x[:, :3].sum(1) > 0).astype(np.int64)
    data = TensorDataset(tj.from_numpy(x), tj.from_numpy(y))
    sampler = DistributedSampler(data, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=32, sampler=sampler)
    tj.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2)))
    opt = tj.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
    with tj.no_grad():
        accuracy = (model(tj.from_numpy(x)).argmax(-1) == tj.from_numpy(y)).float().mean()
    if dist.get_rank() == 0:
        print(f"{dist.get_world_size()} ranks, accuracy {accuracy.item():.3f}")
    dist.destroy_process_group()
    return accuracy.item()


if __name__ == "__main__":
    main()
