"""`tj.utils.data`: datasets, samplers and a loader with PyTorch's names, enough for the
training loop people write (`DataLoader(TensorDataset(x, y), batch_size=32,
shuffle=True, sampler=DistributedSampler(...))`)."""
from __future__ import annotations

import math

import numpy as np


class Dataset:
    """Indexable samples: subclasses define `__getitem__` and `__len__`."""

    def __getitem__(self, index):
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError


class TensorDataset(Dataset):
    """Sample i is (t[i] for t in tensors); all tensors share their first size."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        n = tensors[0].shape[0]
        if any(t.shape[0] != n for t in tensors):
            raise ValueError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


def _rng(generator):
    from ..ops.creation import GENERATOR

    return (generator or GENERATOR).rng


class SequentialSampler:
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler:
    """A permutation of the indices per epoch, from `generator` (tj.Generator) or the
    global one that tj.manual_seed seeds."""

    def __init__(self, data_source, generator=None):
        self.data_source, self.generator = data_source, generator

    def __iter__(self):
        return iter(_rng(self.generator).permutation(len(self.data_source)).tolist())

    def __len__(self) -> int:
        return len(self.data_source)


class DistributedSampler:
    """This rank's share of the indices, PyTorch's way: shuffled with `seed + epoch`
    (call `set_epoch` each epoch), padded by repeating from the start so every rank gets
    as many (or, with drop_last, the tail dropped), then every num_replicas-th index
    from `rank`."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle: bool = True,
                 seed: int = 0, drop_last: bool = False):
        from .. import distributed as dist

        if num_replicas is None:
            num_replicas = dist.get_world_size()
        if rank is None:
            rank = dist.get_rank()
        if not 0 <= rank < num_replicas:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.shuffle, self.seed, self.drop_last, self.epoch = shuffle, seed, drop_last, 0
        n = len(dataset)
        self.num_samples = n // num_replicas if drop_last and n % num_replicas else \
            math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            rng = np.random.Generator(np.random.PCG64(self.seed + self.epoch))
            indices = rng.permutation(n).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            while pad > 0:
                indices += indices[:pad]
                pad = self.total_size - len(indices)
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples


def default_collate(samples):
    """Stack a batch: tensors along a new first dimension, numbers into a tensor, tuples
    and lists position by position, dicts key by key."""
    from ..tensor.creation import tensor
    from ..tensor.functional import stack
    from ..tensor.tensor import Tensor

    first = samples[0]
    if isinstance(first, Tensor):
        return stack(list(samples))
    if isinstance(first, (int, float, bool, np.number)):
        return tensor(list(samples))
    if isinstance(first, dict):
        return {k: default_collate([s[k] for s in samples]) for k in first}
    if isinstance(first, (tuple, list)):
        return type(first)(default_collate(list(col)) for col in zip(*samples))
    raise TypeError(f"default_collate: cannot batch samples of type {type(first).__name__}")


class DataLoader:
    """Batches of a dataset in sampler order (sequential, shuffled with `shuffle=True`,
    or the given `sampler`), `drop_last` dropping a short last batch."""

    def __init__(self, dataset, batch_size: int = 1, shuffle: bool = False, sampler=None,
                 drop_last: bool = False, collate_fn=None, generator=None, **kwargs):
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.sampler = sampler or (RandomSampler(dataset, generator) if shuffle else
                                   SequentialSampler(dataset))
        self.collate_fn = collate_fn or default_collate

    def __iter__(self):
        batch = []
        for i in self.sampler:
            batch.append(self.dataset[i])
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)
