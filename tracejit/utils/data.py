"""`tj.utils.data`: datasets, samplers and a loader with PyTorch's names, enough for the
training loop people write (`DataLoader(TensorDataset(x, y), batch_size=32,
shuffle=True, sampler=DistributedSampler(...))`)."""
from __future__ import annotations

import math

import numpy as np

from ..ops.creation import GENERATOR
from ..tensor.creation import tensor
from ..tensor.functional import stack
from ..tensor.tensor import Tensor
from .. import distributed as dist


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
    return (generator or GENERATOR).rng


class SequentialSampler:
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler:
    """Indices in random order, from `generator` (tj.Generator) or the global one that
    tj.manual_seed seeds: a permutation per epoch, or `num_samples` of them (whole
    permutations, then part of one), or with `replacement` `num_samples` independent
    draws.

    >>> RandomSampler(dataset, replacement=True, num_samples=1000)
    """

    def __init__(self, data_source, replacement: bool = False, num_samples: int | None = None,
                 generator=None):
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement="
                            f"{replacement}")
        self.data_source, self.replacement = data_source, replacement
        self._num_samples, self.generator = num_samples, generator
        if not isinstance(self.num_samples, int) or isinstance(self.num_samples, bool) or \
                self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n, rng = len(self.data_source), _rng(self.generator)
        if self.replacement:
            return iter(rng.integers(0, n, self.num_samples).tolist())
        whole, rest = divmod(self.num_samples, n)
        order = [rng.permutation(n) for _ in range(whole)] + [rng.permutation(n)[:rest]]
        return iter(np.concatenate(order).tolist())

    def __len__(self) -> int:
        return self.num_samples


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self) -> int:
        return len(self.indices)


def random_split(dataset, lengths, generator=None) -> list:
    """Non-overlapping random Subsets of the given lengths, or of fractions of the
    dataset's length (summing to 1: the floors, with what remains given one by one to
    the first subsets).

    >>> train, val = random_split(dataset, [0.8, 0.2], generator=tj.Generator().manual_seed(0))
    """
    n = len(dataset)
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        counts = [int(math.floor(n * frac)) for frac in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input "
                         "dataset!")
    order = _rng(generator).permutation(n).tolist()
    out, offset = [], 0
    for length in lengths:
        out.append(Subset(dataset, order[offset:offset + length]))
        offset += length
    return out


class DistributedSampler:
    """This rank's share of the indices, PyTorch's way: shuffled with `seed + epoch`
    (call `set_epoch` each epoch), padded by repeating from the start so every rank gets
    as many (or, with drop_last, the tail dropped), then every num_replicas-th index
    from `rank`."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle: bool = True,
                 seed: int = 0, drop_last: bool = False):
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
        self.sampler = sampler or (RandomSampler(dataset, generator=generator) if shuffle else
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
