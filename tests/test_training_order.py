import torch

from theseus_pl.data.length_grouping import LengthGroupedBatchSampler


def lengths(n=1000):
    return torch.randint(5, 129, (n,), generator=torch.Generator().manual_seed(0)).tolist()


def padded_tokens(batches, sizes):
    return sum(len(batch) * max(sizes[i] for i in batch) for batch in batches)


def test_every_row_once_per_epoch_in_full_batches():
    sizes = lengths()
    batches = list(LengthGroupedBatchSampler(sizes, 32, torch.Generator().manual_seed(1), group_factor=4))
    assert sorted(i for batch in batches for i in batch) == list(range(len(sizes)))
    assert len(batches) == len(LengthGroupedBatchSampler(sizes, 32, torch.Generator()))
    assert sum(len(batch) != 32 for batch in batches) <= -(-len(sizes) // (32 * 4))


def test_grouping_cuts_padding_and_is_reproducible_but_varies_by_epoch():
    sizes = lengths()
    grouped = list(LengthGroupedBatchSampler(sizes, 32, torch.Generator().manual_seed(1)))
    random = torch.randperm(len(sizes), generator=torch.Generator().manual_seed(1)).split(32)
    assert padded_tokens(grouped, sizes) < 0.7 * padded_tokens([b.tolist() for b in random], sizes)
    assert grouped == list(LengthGroupedBatchSampler(sizes, 32, torch.Generator().manual_seed(1)))
    sampler = LengthGroupedBatchSampler(sizes, 32, torch.Generator().manual_seed(1))
    assert list(sampler) != list(sampler)
