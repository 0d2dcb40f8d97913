import json

import pandas as pd
import pytest
from glue_files import STSB_HEADER, make_glue_dir, write_tsv

from theseus_pl.data.datamodule import TextTaskDataModule, resolve_task
from theseus_pl.data.sources import FilesSource, GlueDirSource, HubSource
from theseus_pl.data.tasks import GLUE_TASKS, glue_task

pytestmark = pytest.mark.quick


@pytest.fixture
def glue_dir(tmp_path):
    return make_glue_dir(tmp_path / "glue")


def test_registry_holds_the_nine_glue_tasks_with_the_papers_lengths():
    assert list(GLUE_TASKS) == ["CoLA", "SST-2", "MRPC", "QQP", "STS-B", "MNLI", "QNLI", "RTE", "WNLI"]
    assert {name: spec.max_length for name, spec in GLUE_TASKS.items() if spec.max_length != 128} == {"QNLI": 256}
    assert glue_task("STS-B").is_regression and glue_task("STS-B").num_labels == 1
    assert glue_task("mnli").num_labels == 3
    assert glue_task("sst2") is GLUE_TASKS["SST-2"]


@pytest.mark.parametrize(
    ("task", "split", "rows"),
    [
        (
            "MRPC",
            "train",
            {"sentence1": ['he said "hi', "the cat"], "sentence2": ["he said hi", "the dog"], "label": [1, 0]},
        ),
        (
            "QQP",
            "train",
            {"question1": ["is the cat good", "the dog"], "question2": ["is a cat good", "the mat"], "label": [1, 0]},
        ),
        ("MNLI", "train", {"premise": ["the cat sat", "a"], "hypothesis": ["a cat sat", "b"], "label": [0, 2]}),
        ("MNLI", "validation_matched", {"premise": ["a"], "hypothesis": ["b"], "label": [1]}),
        ("MNLI", "validation_mismatched", {"premise": ["c", "e"], "hypothesis": ["d", "f"], "label": [0, 2]}),
        ("QNLI", "train", {"question": ["the cat", "a"], "sentence": ['he said "hi', "b"], "label": [0, 1]}),
        ("RTE", "train", {"sentence1": ["the cat", "a"], "sentence2": ['he said "hi', "b"], "label": [1, 0]}),
        ("WNLI", "dev", None),
        ("WNLI", "validation", {"sentence1": ["the dog"], "sentence2": ["a dog"], "label": [1]}),
        ("CoLA", "train", {"sentence": ["the cat sat .", "cat the sat ."], "label": [1, 0]}),
        ("STS-B", "validation", {"sentence1": ["a dog"], "sentence2": ["a mat"], "label": [0.75]}),
    ],
)
def test_classic_layout_files_load_with_their_quirks(glue_dir, task, split, rows):
    source = GlueDirSource(glue_dir)
    if rows is None:
        with pytest.raises(ValueError, match="WNLI has no split 'dev'; it has train, validation, test"):
            source.read(glue_task(task), split)
        return
    assert source.read(glue_task(task), split).to_dict() == rows


@pytest.mark.parametrize(
    ("task", "split", "indices"),
    [("QQP", "test", [40, 41]), ("RTE", "test", [0, 1, 2]), ("MNLI", "test_mismatched", [0, 1]), ("CoLA", "test", [0])],
)
def test_test_splits_carry_the_file_index_and_no_label(glue_dir, task, split, indices):
    dataset = GlueDirSource(glue_dir).read(glue_task(task), split)
    assert "label" not in dataset.column_names
    assert dataset["idx"] == indices


@pytest.mark.parametrize("suffix", ["csv", "tsv", "json", "jsonl", "parquet"])
def test_own_files_load_in_every_format(tmp_path, suffix):
    frame = pd.DataFrame(
        {"review": ['great "film', "dull", "fine"], "stars": ["pos", "neg", "pos"], "extra": [1, 2, 3]}
    )
    path = tmp_path / f"train.{suffix}"
    if suffix == "csv":
        frame.to_csv(path, index=False)
    elif suffix == "tsv":
        path.write_text("review\tstars\textra\n" + "".join(f"{r}\t{s}\t{e}\n" for r, s, e in frame.itertuples(False)))
    elif suffix == "json":
        path.write_text(json.dumps(frame.to_dict(orient="records")))
    elif suffix == "jsonl":
        frame.to_json(path, orient="records", lines=True)
    else:
        frame.to_parquet(path)
    task = resolve_task("reviews", files={"train": str(path)}, text_columns=["review"], labels=["neg", "pos"])
    dataset = FilesSource({"train": path}, label_column="stars").read(task, "train")
    assert dataset.to_dict() == {"review": ['great "film', "dull", "fine"], "label": [1, 0, 1]}


@pytest.mark.parametrize(
    ("suffix", "content", "says"),
    [
        (
            "csv",
            'review,stars\n"good",pos\nbad,neg,extra\n',
            "CSV: Error tokenizing data. C error: Expected 2 fields in line 3",
        ),
        ("csv", "", "CSV: No columns to parse from file"),
        ("json", '[{"review": "good", "stars": "pos"},', "JSON: "),
        ("jsonl", '{"review": "good", "stars": "pos"}\n{"review": \n', "JSON lines: "),
        ("parquet", "not parquet", "parquet: "),
    ],
)
def test_an_own_file_its_reader_cannot_parse_is_refused_naming_it(tmp_path, suffix, content, says):
    path = tmp_path / f"train.{suffix}"
    path.write_text(content)
    task = resolve_task("reviews", files={"train": str(path)}, text_columns=["review"], labels=["neg", "pos"])
    with pytest.raises(ValueError) as refused:
        FilesSource({"train": path}, label_column="stars").read(task, "train")
    assert str(refused.value).startswith(f"{path} cannot be read as {says}")


def test_own_regression_files_read_float_scores(tmp_path):
    path = write_tsv(tmp_path / "dev.tsv", [["a", "b", "label"], ["x", "y", "0.5"], ["z", "w", "3"]])
    task = resolve_task("sim", files={"validation": str(path)}, text_columns=["a", "b"], regression=True)
    assert task.metric == "pearson_spearman"
    assert FilesSource({"validation": path}).read(task, "validation")["label"] == [0.5, 3.0]


def _error(make):
    with pytest.raises((ValueError, FileNotFoundError, RuntimeError)) as error:
        make()
    return str(error.value)


def test_unknown_task_lists_the_valid_ones():
    message = _error(lambda: glue_task("RTE2"))
    assert "Unknown task 'RTE2'" in message
    assert "CoLA, SST-2, MRPC, QQP, STS-B, MNLI, QNLI, RTE, WNLI" in message


def test_missing_folder_and_file_name_the_path_and_layout(tmp_path, glue_dir):
    message = _error(lambda: GlueDirSource(tmp_path / "nowhere").read(glue_task("RTE"), "train"))
    assert f"data.glue_dir={tmp_path / 'nowhere'} is not a folder" in message
    assert "/RTE/{train,dev,test}.tsv" in message
    (glue_dir / "RTE" / "dev.tsv").unlink()
    message = _error(lambda: GlueDirSource(glue_dir).read(glue_task("RTE"), "validation"))
    assert f"Missing {glue_dir / 'RTE' / 'dev.tsv'}" in message
    message = _error(lambda: FilesSource({"train": tmp_path / "x.csv"}).read(glue_task("RTE"), "train"))
    assert f"data.files.train={tmp_path / 'x.csv'} does not exist" in message
    message = _error(lambda: FilesSource({"train": tmp_path}).read(glue_task("RTE"), "train"))
    assert message == f"data.files.train={tmp_path} is a folder: name the train split's file in it."


def test_missing_column_is_named_with_the_columns_found(glue_dir):
    write_tsv(glue_dir / "RTE" / "train.tsv", [["index", "sentence1", "label"], ["0", "a", "entailment"]])
    message = _error(lambda: GlueDirSource(glue_dir).read(glue_task("RTE"), "train"))
    assert "has no column 'sentence2'; its columns are ['index', 'sentence1', 'label']" in message


def test_label_outside_the_tasks_set_names_file_and_line(glue_dir):
    path = write_tsv(
        glue_dir / "RTE" / "train.tsv",
        [["index", "sentence1", "sentence2", "label"], ["0", "a", "b", "entailment"], ["1", "a", "b", "neutral"]],
    )
    message = _error(lambda: GlueDirSource(glue_dir).read(glue_task("RTE"), "train"))
    assert (
        f"{path}, line 3: label 'neutral' is not one of the task's labels ['entailment', 'not_entailment']" in message
    )


def test_non_numeric_stsb_score_names_file_and_line(glue_dir):
    path = write_tsv(
        glue_dir / "STS-B" / "train.tsv", [STSB_HEADER, ["0", "g", "f", "y", "1", "n", "n", "a", "b", "high"]]
    )
    message = _error(lambda: GlueDirSource(glue_dir).read(glue_task("STS-B"), "train"))
    assert f"{path}, line 2: score 'high' is not a number" in message


@pytest.mark.parametrize("score", ["nan", "inf", "-Infinity"])
def test_a_non_finite_stsb_score_names_file_and_line(glue_dir, score):
    row = ["0", "g", "f", "y", "1", "n", "n", "a", "b"]
    path = write_tsv(glue_dir / "STS-B" / "dev.tsv", [STSB_HEADER, [*row, "1.0"], [*row, score]])
    message = _error(lambda: GlueDirSource(glue_dir).read(glue_task("STS-B"), "validation"))
    assert f"{path}, line 3: score {score!r} is not a finite number" in message


def test_a_row_with_a_wrong_field_count_is_refused(glue_dir):
    path = write_tsv(
        glue_dir / "RTE" / "train.tsv", [["index", "sentence1", "sentence2", "label"], ["0", "a", "entailment"]]
    )
    message = _error(lambda: GlueDirSource(glue_dir).read(glue_task("RTE"), "train"))
    assert f"{path}, line 2: 3 fields where the header has 4" in message


def test_empty_split_is_refused(glue_dir):
    path = write_tsv(glue_dir / "RTE" / "train.tsv", [["index", "sentence1", "sentence2", "label"]])
    message = _error(lambda: GlueDirSource(glue_dir).read(glue_task("RTE"), "train"))
    assert f"The train split of RTE ({path}) is empty" in message


def test_offline_hub_says_how_to_use_a_local_folder():
    message = _error(lambda: HubSource().read(glue_task("RTE"), "train"))
    assert "Could not load nyu-mll/glue (rte, split train)" in message
    assert "data.glue_dir=PATH (classic layout: PATH/RTE/train.tsv" in message


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(labels=None), "give data.labels"),
        (dict(labels=["a"], regression=True), "not both"),
        (dict(labels=["a", "b"], metric="pearson_spearman"), "does not fit a classification task"),
        (dict(labels=["a", "b"], metric="bleu"), "data.metric='bleu' is not one of"),
        (dict(labels=["a", "b"], text_columns=["a", "b", "c"]), "must name one or two text columns"),
    ],
)
def test_bad_own_task_settings_are_refused(tmp_path, kwargs, message):
    settings = dict(files={"train": "x.csv"}, text_columns=["text"]) | kwargs
    with pytest.raises(ValueError, match=message):
        resolve_task("mine", **settings)


def test_a_metric_on_a_glue_task_is_refused_not_dropped():
    with pytest.raises(ValueError, match=r"^data\.metric=banana chooses how your own data is scored; RTE is scored by"):
        resolve_task("RTE", metric="banana")


def test_own_files_without_text_columns_are_refused(tiny_tokenizer):
    with pytest.raises(ValueError, match=r"with data\.files, also give data\.text_columns"):
        TextTaskDataModule("mine", tiny_tokenizer, files={"train": "x.csv"})


def _write_rows(path, rows):
    """``rows`` (dicts) as a file of ``path``'s format, as a user's tool writes it: a missing value is an absent key
    in JSON, a null in parquet."""
    if path.suffix == ".csv":
        pd.DataFrame(rows).to_csv(path, index=False)
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    elif path.suffix == ".json":
        path.write_text(json.dumps(rows))
    else:
        pd.DataFrame(rows).to_parquet(path)
    return path


# Where the row at index 7 (the eighth) is in each format: a CSV's header is line 1; parquet and a JSON array have
# no lines.
EIGHTH_ROW = {"csv": "line 9", "jsonl": "line 8", "json": "record 8", "parquet": "row 8"}


@pytest.mark.parametrize("suffix", list(EIGHTH_ROW))
def test_a_bad_label_is_named_where_the_format_puts_its_row(tmp_path, suffix):
    rows = [{"text": f"row {i}", "label": "pos"} for i in range(10)]
    rows[7]["label"] = "maybe"
    path = _write_rows(tmp_path / f"train.{suffix}", rows)
    task = resolve_task("reviews", files={"train": str(path)}, text_columns=["text"], labels=["neg", "pos"])
    message = _error(lambda: FilesSource({"train": path}).read(task, "train"))
    assert f"{path}, {EIGHTH_ROW[suffix]}: label 'maybe' is not one of the task's labels" in message


@pytest.mark.parametrize("suffix", ["jsonl", "json", "parquet"])
def test_a_row_without_text_is_refused_where_it_is(tmp_path, suffix):
    rows = [{"text": f"row {i}", "label": "pos"} for i in range(10)]
    rows[7] = {"label": "neg"}  # no text: an absent key in JSON, a null in parquet
    rows[9]["text"] = None
    path = _write_rows(tmp_path / f"train.{suffix}", rows)
    task = resolve_task("reviews", files={"train": str(path)}, text_columns=["text"], labels=["neg", "pos"])
    message = _error(lambda: FilesSource({"train": path}).read(task, "train"))
    assert message == f"{path}, {EIGHTH_ROW[suffix]}: no text in column 'text' (and 1 more rows)."


@pytest.mark.parametrize("suffix", ["csv", "tsv"])
def test_a_header_naming_a_read_column_twice_is_refused(tmp_path, suffix):
    separator = "," if suffix == "csv" else "\t"
    path = tmp_path / f"train.{suffix}"
    path.write_text(separator.join(["text", "text", "label"]) + "\n" + separator.join(["a", "b", "pos"]) + "\n")
    task = resolve_task("reviews", files={"train": str(path)}, text_columns=["text"], labels=["neg", "pos"])
    message = _error(lambda: FilesSource({"train": path}).read(task, "train"))
    assert message == f"{path}: its header names the column 'text' 2 times (columns 1, 2). Name each column once."


def test_a_bad_byte_is_named_at_its_offset_in_the_file_and_its_line(tmp_path):
    path = tmp_path / "train.csv"
    lines = ["text,label", *(f"sentence number {i},pos" for i in range(40))]
    content = bytearray("\n".join(lines).encode())
    content[430] = 0xFF  # far past the first chunk pandas decodes
    path.write_bytes(bytes(content))
    task = resolve_task("reviews", files={"train": str(path)}, text_columns=["text"], labels=["neg", "pos"])
    message = _error(lambda: FilesSource({"train": path}).read(task, "train"))
    line = content[:430].count(b"\n") + 1
    assert f"{path} is not UTF-8 text (invalid start byte at byte 430, line {line})." in message
