import pytest
import torch
from torch.utils.data import DataLoader

from theseus_pl.data.training_order import LengthGroupedSampler, ShuffledSampler

pytestmark = pytest.mark.quick


def lengths(n=1000):
    return torch.randint(5, 129, (n,), generator=torch.Generator().manual_seed(0)).tolist()


def padded_tokens(batches, sizes):
    return sum(len(batch) * max(sizes[i] for i in batch) for batch in batches)


def batches_of(sampler, batch_size=32):
    return [batch.tolist() for batch in DataLoader(range(len(sampler)), batch_size=batch_size, sampler=sampler)]


def test_every_row_once_per_epoch_in_full_batches_cut_by_a_plain_loader():
    sizes = lengths()
    sampler = LengthGroupedSampler(sizes, 32, seed=1, group_factor=4)
    batches = batches_of(sampler)
    assert sorted(i for batch in batches for i in batch) == list(range(len(sizes)))
    assert [len(batch) for batch in batches[:-1]] == [32] * (len(batches) - 1)  # the short batch comes last

    # The loader's cuts are the sampler's groups: each batch holds rows of similar length.
    def spread(batches):
        return sum(max(sizes[i] for i in b) - min(sizes[i] for i in b) for b in batches)

    assert spread(batches) < 0.4 * spread(batches_of(ShuffledSampler(len(sizes), seed=1)))


def test_grouping_cuts_padding_and_is_reproducible_but_varies_by_epoch():
    sizes = lengths()
    grouped = batches_of(LengthGroupedSampler(sizes, 32, seed=1))
    random = batches_of(ShuffledSampler(len(sizes), seed=1))
    assert padded_tokens(grouped, sizes) < 0.7 * padded_tokens(random, sizes)
    assert grouped == batches_of(LengthGroupedSampler(sizes, 32, seed=1))
    sampler = LengthGroupedSampler(sizes, 32, seed=1)
    assert list(sampler) != list(sampler)


def test_an_epoch_is_fixed_by_seed_and_epoch_and_a_resumed_pass_continues_it():
    for sampler in (ShuffledSampler(100, seed=3), LengthGroupedSampler(lengths(100), 8, seed=3)):
        epochs = [list(sampler) for _ in range(3)]
        assert epochs[0] != epochs[1] != epochs[2]
        sampler.set_epoch(1)  # Lightning names the epoch
        assert list(sampler) == epochs[1]
        assert list(sampler) == epochs[2]  # and the pass after it is the next one
        sampler.start_at(epoch=1, rows_done=40)
        assert list(sampler) == epochs[1][40:]
        assert list(sampler) == epochs[2]
