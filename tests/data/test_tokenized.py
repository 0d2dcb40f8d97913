import pytest
from datasets import Dataset
from decoder_models import tiny_bpe_tokenizer
from glue_files import make_glue_dir
from transformers import AutoTokenizer

from theseus_pl.data.datamodule import TextTaskDataModule, sample_rows
from theseus_pl.data.sources import GlueDirSource
from theseus_pl.data.tasks import glue_task
from theseus_pl.data.tokenized import tokenized_split, tokenizer_fingerprint

pytestmark = pytest.mark.quick


class CountingSource(GlueDirSource):
    reads = 0

    def read(self, task, split):
        CountingSource.reads += 1
        return super().read(task, split)


@pytest.fixture
def glue_dir(tmp_path):
    return make_glue_dir(tmp_path / "glue")


def test_second_load_comes_from_the_cache(glue_dir, tiny_tokenizer, tmp_path):
    source, task = CountingSource(glue_dir), glue_task("RTE")
    CountingSource.reads = 0
    first = tokenized_split(source, task, "train", tiny_tokenizer, 128, tmp_path / "cache")
    second = tokenized_split(source, task, "train", tiny_tokenizer, 128, tmp_path / "cache")
    assert CountingSource.reads == 1
    assert first.to_dict() == second.to_dict()
    assert set(first.column_names) == {"input_ids", "token_type_ids", "attention_mask", "labels"}
    tokenized_split(source, task, "train", tiny_tokenizer, 64, tmp_path / "cache")
    assert CountingSource.reads == 2, "another max length is another cache entry"


def test_changed_file_invalidates_the_cache(glue_dir, tiny_tokenizer, tmp_path):
    source, task = GlueDirSource(glue_dir), glue_task("RTE")
    before = tokenized_split(source, task, "validation", tiny_tokenizer, 128, tmp_path)
    path = glue_dir / "RTE" / "dev.tsv"
    path.write_text(path.read_text() + "1\tthe cat\tthe mat\tentailment\n")
    assert len(tokenized_split(source, task, "validation", tiny_tokenizer, 128, tmp_path)) == len(before) + 1


def test_pairs_are_tokenised_together_and_truncated(glue_dir, tiny_tokenizer, tmp_path):
    dataset = tokenized_split(GlueDirSource(glue_dir), glue_task("RTE"), "train", tiny_tokenizer, 5, tmp_path)
    first = dataset[0]
    assert len(first["input_ids"]) == 5
    assert first["input_ids"][0] == tiny_tokenizer.cls_token_id
    assert first["token_type_ids"][-1] == 1
    assert first["input_ids"][-1] == tiny_tokenizer.sep_token_id


def test_sampling_is_reproducible_and_keeps_file_order(glue_dir, tiny_tokenizer, tmp_path):
    dataset = tokenized_split(GlueDirSource(glue_dir), glue_task("MNLI"), "train", tiny_tokenizer, 128, tmp_path)
    rows = dataset.add_column("row", list(range(len(dataset))))
    assert sample_rows(rows, 1, seed=3)["row"] == sample_rows(rows, 1, seed=3)["row"]
    assert sample_rows(rows, 5, seed=3) is rows
    big = rows.select([0, 1] * 50).add_column("n", list(range(100))).remove_columns("row")
    picked = sample_rows(big, 10, seed=1)["n"]
    assert picked == sorted(picked)
    assert picked != sample_rows(big, 10, seed=2)["n"]


def test_batches_are_padded_to_their_longest_row(glue_dir, tiny_tokenizer, tmp_path):
    datamodule = TextTaskDataModule("MRPC", tiny_tokenizer, glue_dir=str(glue_dir), cache_dir=tmp_path, batch_size=2)
    datamodule.prepare_data()
    datamodule.setup("fit")
    batch = next(iter(datamodule.val_dataloader()))
    assert batch["input_ids"].shape == (1, len(tiny_tokenizer("a cat sat", "a cat sat on the mat")["input_ids"]))
    assert batch["labels"].tolist() == [1]


def test_pad_to_max_length_gives_every_batch_the_same_shape(glue_dir, tiny_tokenizer, tmp_path):
    datamodule = TextTaskDataModule(
        "MRPC", tiny_tokenizer, glue_dir=str(glue_dir), cache_dir=tmp_path, max_length=24, pad_to_max_length=True
    )
    datamodule.setup("fit")
    batch = next(iter(datamodule.val_dataloader()))
    assert batch["input_ids"].shape == (1, 24)
    assert batch["attention_mask"].sum() == len(tiny_tokenizer("a cat sat", "a cat sat on the mat")["input_ids"])


def test_mnli_validates_on_matched_and_mismatched(glue_dir, tiny_tokenizer, tmp_path):
    datamodule = TextTaskDataModule("MNLI", tiny_tokenizer, glue_dir=str(glue_dir), cache_dir=tmp_path)
    datamodule.setup("validate")
    loaders = datamodule.val_dataloader()
    assert [len(loader.dataset) for loader in loaders] == [1, 2]


def test_a_split_read_before_any_setup_is_set_up_as_its_stage_sets_it_up(glue_dir, tiny_tokenizer, tmp_path):
    """A run that loads its predecessor instead of fine-tuning it reads the data first to count, calibrate or time."""
    datamodule = TextTaskDataModule("MNLI", tiny_tokenizer, glue_dir=str(glue_dir), cache_dir=tmp_path, seed=3)
    assert [len(loader.dataset) for loader in datamodule.val_dataloader()] == [1, 2]
    assert "train" not in datamodule.splits  # the dev rows alone
    assert len(datamodule.train_dataloader().dataset) == len(datamodule.split("train"))
    set_up = TextTaskDataModule("MNLI", tiny_tokenizer, glue_dir=str(glue_dir), cache_dir=tmp_path, seed=3)
    set_up.setup("fit")
    assert set_up.splits["train"]["input_ids"] == datamodule.split("train")["input_ids"]


def test_dev_batches_go_longest_first_with_every_row_once(glue_dir, tiny_tokenizer, tmp_path):
    datamodule = TextTaskDataModule("MRPC", tiny_tokenizer, glue_dir=str(glue_dir), cache_dir=tmp_path, batch_size=2)
    sizes = [3, 9, 4, 7, 5]
    datamodule.splits["validation"] = Dataset.from_dict(
        {"input_ids": [[101] * n for n in sizes], "attention_mask": [[1] * n for n in sizes], "label": sizes}
    )
    batches = list(datamodule.val_dataloader())
    assert [batch["labels"].tolist() for batch in batches] == [[9, 7], [5, 4], [3]]
    assert [batch["input_ids"].shape[1] for batch in batches] == [9, 5, 3]


def test_a_dev_split_of_one_class_is_warned_about_once(glue_dir, tiny_tokenizer, tmp_path, caplog):
    datamodule = TextTaskDataModule("MRPC", tiny_tokenizer, glue_dir=str(glue_dir), cache_dir=tmp_path)
    datamodule.setup("fit")
    datamodule.setup("validate")
    warnings = [r.getMessage() for r in caplog.records if "holds only the class" in r.getMessage()]
    assert warnings == ["The validation split of MRPC (1 rows) holds only the class 'equivalent': its scores say "
                        "nothing about the model (a constant predictor scores 100). Use more dev rows "
                        "(data.max_eval_samples) or check the file."]  # fmt: skip
    caplog.clear()
    two_classes = TextTaskDataModule("MRPC", tiny_tokenizer, glue_dir=str(glue_dir), cache_dir=tmp_path)
    two_classes.load = lambda split: datamodule.load("train")  # the train file holds both classes
    two_classes.setup("validate")
    assert "holds only the class" not in caplog.text


def test_a_tokenizer_of_the_same_vocabulary_with_another_end_of_text_or_truncation_side_is_another_tokenizer(
    tmp_path,
):
    """Keyed by the backend's definition alone, a decoder whose tokenizer had the same vocabulary but another
    end-of-text token got the other's cached windows (their separator between documents), and a tokenizer truncating
    on the left the other's rows."""
    tokenizer = tiny_bpe_tokenizer()
    tokenizer.save_pretrained(tmp_path / "saved")
    assert tokenizer_fingerprint(AutoTokenizer.from_pretrained(tmp_path / "saved")) == tokenizer_fingerprint(tokenizer)
    other_end = tiny_bpe_tokenizer()
    other_end.eos_token = other_end.convert_ids_to_tokens(3)
    left = tiny_bpe_tokenizer()
    left.truncation_side = "left"
    fingerprints = {tokenizer_fingerprint(each) for each in (tokenizer, other_end, left)}
    assert len(fingerprints) == 3
