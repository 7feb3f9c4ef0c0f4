"""tj.utils.data: datasets, samplers and the loader, against PyTorch's rules."""
from __future__ import annotations

import pytest

import tracejit as tj
from tracejit.utils.data import DataLoader, DistributedSampler, TensorDataset


def test_a_loader_batches_in_order_and_drops_the_short_batch_when_asked():
    x, y = tj.arange(10).float().reshape(10, 1), tj.arange(10)
    batches = list(DataLoader(TensorDataset(x, y), batch_size=4))
    assert [b[1].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert batches[0][0].shape == (4, 1)
    loader = DataLoader(TensorDataset(x, y), batch_size=4, drop_last=True)
    assert len(loader) == 2 and [b[1].tolist() for b in loader] == [[0, 1, 2, 3],
                                                                   [4, 5, 6, 7]]


def test_shuffling_follows_a_seeded_generator():
    ds = TensorDataset(tj.arange(20))

    def order(seed):
        g = tj.Generator().manual_seed(seed)
        return [b[0].tolist() for b in DataLoader(ds, batch_size=5, shuffle=True,
                                                  generator=g)]
    first = order(3)
    assert first == order(3) and first != order(4)
    assert sorted(sum(first, [])) == list(range(20))
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(ds, shuffle=True, sampler=[0, 1])


@pytest.mark.parametrize("n,drop_last", [(10, False), (11, False), (11, True)])
def test_distributed_sampler_splits_every_epoch_between_the_ranks(n, drop_last):
    ds = TensorDataset(tj.arange(n))
    samplers = [DistributedSampler(ds, num_replicas=3, rank=r, seed=1, drop_last=drop_last)
                for r in range(3)]
    for epoch in (0, 1):
        for s in samplers:
            s.set_epoch(epoch)
        parts = [list(s) for s in samplers]
        assert len({len(p) for p in parts}) == 1 and len(parts[0]) == len(samplers[0])
        seen = sum(parts, [])
        if drop_last:
            assert len(seen) == 9 and len(set(seen)) == 9
        else:  # padded by repeating from the start: every index at least once
            assert set(seen) == set(range(n)) and len(seen) == 3 * -(-n // 3)
        if epoch == 0:
            first = parts
    assert parts != first  # set_epoch reshuffles
    loader = DataLoader(ds, batch_size=2, sampler=samplers[0])
    assert sum(len(b[0]) for b in loader) == len(samplers[0])
    with pytest.raises(ValueError, match="Invalid rank"):
        DistributedSampler(ds, num_replicas=2, rank=2)
