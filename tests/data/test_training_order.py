import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler

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


def test_under_ddp_each_process_takes_the_share_lightnings_sampler_gave_it_and_resumes_it_mid_epoch(monkeypatch):
    """Wrapped in Lightning's distributed sampler, a resumed epoch's shorter order was indexed past its end (an
    IndexError on every process), and each process skipped its own rows of the whole order, not every process's."""
    import torch.distributed as dist
    from lightning.fabric.utilities.distributed import DistributedSamplerWrapper

    from theseus_pl.data.training_order import ResumableDataModule

    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda: 2)
    for rank in (0, 1):
        monkeypatch.setattr(dist, "get_rank", lambda rank=rank: rank)
        whole = ShuffledSampler(11, seed=3)  # 11 rows: padded to 12, 6 a process
        monkeypatch.setattr(dist, "is_initialized", lambda: False)
        lightnings = DistributedSamplerWrapper(ShuffledSampler(11, seed=3), num_replicas=2, rank=rank, shuffle=False)
        monkeypatch.setattr(dist, "is_initialized", lambda: True)
        share = list(whole)
        assert isinstance(whole, DistributedSampler) and len(whole) == 6  # left unwrapped by Lightning
        assert share == list(lightnings) and len(share) == 6
        data = ResumableDataModule()
        data.batch_size = 2
        data.load_state_dict({"train_batches_done": 2})  # two batches of this process's share done
        assert list(data.resume_order(ShuffledSampler(11, seed=3))) == share[4:]
