"""What a task is called and whether a classifier's head fits it: the names users see on runs and models."""

import pytest

from theseus_pl.data.datamodule import resolve_task
from theseus_pl.data.tasks import custom_task, glue_task, head_label_problem, name_from_files

pytestmark = pytest.mark.quick


@pytest.mark.parametrize(
    ("train", "name"),
    [
        ("reviews/train.csv", "reviews"),
        ("data/reviews_train.csv", "reviews"),
        ("data/reviews-TRAIN.tsv", "reviews"),
        ("support tickets.jsonl", "support_tickets"),
        ("emails/data.parquet", "emails"),
    ],
)
def test_own_files_are_named_after_their_folder_or_stem(train, name):
    assert name_from_files({"train": train, "validation": "x/dev.csv"}) == name


def test_own_data_is_never_called_a_glue_task():
    files = {"train": "reviews/train.csv", "validation": "reviews/dev.csv"}
    assert resolve_task(None, files, ["text"], ["negative", "positive"]).name == "reviews"
    assert resolve_task("tickets", files, ["text"], ["a", "b"]).name == "tickets"
    assert resolve_task("SST-2", files) == glue_task("SST-2")  # the user's copy of SST-2, read as SST-2
    with pytest.raises(ValueError, match=r"data.task=SST-2 is a GLUE task, .* but data.text_columns, data.labels"):
        resolve_task("SST-2", files, ["text"], ["negative", "positive"])
    with pytest.raises(ValueError, match="No data named"):
        resolve_task(None)
    with pytest.raises(ValueError, match=r"also give data\.text_columns"):
        resolve_task(None, files)


def test_a_head_fits_by_count_when_unnamed_and_by_names_in_order_when_named():
    task = custom_task("reviews", ["text"], ["negative", "positive"])
    assert head_label_problem({0: "LABEL_0", 1: "LABEL_1"}, task) is None
    assert head_label_problem({0: "NEGATIVE", 1: "POSITIVE"}, task) is None  # case does not matter
    assert "list them in the head's order" in head_label_problem({0: "positive", 1: "negative"}, task)
    assert "its head's labels are ['rotten', 'fresh']" in head_label_problem({0: "rotten", 1: "fresh"}, task)
    assert "its head predicts 3 labels" in head_label_problem({0: "a", 1: "b", 2: "c"}, task)
    assert head_label_problem({0: "LABEL_0"}, custom_task("scores", ["text"], regression=True)) is None


def test_repeated_labels_are_refused():
    with pytest.raises(ValueError, match="lists negative more than once"):
        custom_task("reviews", ["text"], ["negative", "positive", "negative"])
