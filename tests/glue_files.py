"""Hand-made files in the classic GLUE layout, with each task's quirks (made up here, not copied from GLUE)."""

from __future__ import annotations

from pathlib import Path

BOM = "\ufeff"
STSB_HEADER = [
    "index",
    "genre",
    "filename",
    "year",
    "old_index",
    "source1",
    "source2",
    "sentence1",
    "sentence2",
    "score",
]


def write_tsv(path: Path, rows: list[list[str]], prefix: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(prefix + "".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")
    return path


def make_glue_dir(root: Path) -> Path:
    """MRPC, QQP, MNLI, QNLI, WNLI (and a tiny RTE/CoLA/STS-B) with quotes inside sentences."""
    mrpc_header = ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
    for split, rows in {
        "train": [["1", "1", "2", 'he said "hi', "he said hi"], ["0", "3", "4", "the cat", "the dog"]],
        "dev": [["1", "5", "6", "a cat sat", "a cat sat on the mat"]],
    }.items():
        write_tsv(root / "MRPC" / f"{split}.tsv", [mrpc_header, *rows], prefix=BOM)
    write_tsv(
        root / "MRPC" / "test.tsv", [["index", "#1 ID", "#2 ID", "#1 String", "#2 String"], ["0", "7", "8", "a", "b"]]
    )

    qqp_header = ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]
    write_tsv(
        root / "QQP" / "train.tsv",
        [
            qqp_header,
            ["10", "1", "2", "is the cat good", "is a cat good", "1"],
            ["11", "3", "4", "the dog", "the mat", "0"],
        ],
    )
    write_tsv(root / "QQP" / "dev.tsv", [qqp_header, ["12", "5", "6", "a", "b", "0"]])
    write_tsv(root / "QQP" / "test.tsv", [["id", "question1", "question2"], ["40", "a", "b"], ["41", "c", "d"]])

    mnli_header = ["index", "promptID", "pairID", "genre", "sentence1", "sentence2", "label1", "gold_label"]
    write_tsv(
        root / "MNLI" / "train.tsv",
        [
            mnli_header,
            ["0", "1", "1e", "g", "the cat sat", "a cat sat", "entailment", "entailment"],
            ["1", "2", "2c", "g", "a", "b", "x", "contradiction"],
        ],
    )
    write_tsv(root / "MNLI" / "dev_matched.tsv", [mnli_header, ["0", "3", "3n", "g", "a", "b", "neutral", "neutral"]])
    write_tsv(
        root / "MNLI" / "dev_mismatched.tsv",
        [
            mnli_header,
            ["0", "4", "4e", "g", "c", "d", "x", "entailment"],
            ["1", "5", "5c", "g", "e", "f", "x", "contradiction"],
        ],
    )
    for split in ("test_matched", "test_mismatched"):
        write_tsv(
            root / "MNLI" / f"{split}.tsv",
            [
                ["index", "promptID", "pairID", "genre", "sentence1", "sentence2"],
                ["0", "1", "1", "g", "a cat", "a dog"],
                ["1", "2", "2", "g", "b", "c"],
            ],
        )

    for task, labels in {
        "QNLI": ("entailment", "not_entailment"),
        "RTE": ("not_entailment", "entailment"),
        "WNLI": ("0", "1"),
    }.items():
        first, second = ("question", "sentence") if task == "QNLI" else ("sentence1", "sentence2")
        header = ["index", first, second, "label"]
        write_tsv(
            root / task / "train.tsv", [header, ["0", "the cat", 'he said "hi', labels[0]], ["1", "a", "b", labels[1]]]
        )
        write_tsv(root / task / "dev.tsv", [header, ["0", "the dog", "a dog", labels[1]]])
        write_tsv(
            root / task / "test.tsv", [["index", first, second], ["0", "a", "b"], ["1", "c", "d"], ["2", "e", "f"]]
        )

    write_tsv(root / "CoLA" / "train.tsv", [["src1", "1", "", "the cat sat ."], ["src1", "0", "*", "cat the sat ."]])
    write_tsv(root / "CoLA" / "dev.tsv", [["src2", "1", "", "a dog sat ."]])
    write_tsv(root / "CoLA" / "test.tsv", [["index", "sentence"], ["0", "the mat ."]])

    write_tsv(
        root / "STS-B" / "train.tsv", [STSB_HEADER, ["0", "g", "f", "y", "1", "n", "n", "a cat", "the cat", "4.200"]]
    )
    write_tsv(root / "STS-B" / "dev.tsv", [STSB_HEADER, ["0", "g", "f", "y", "2", "n", "n", "a dog", "a mat", "0.750"]])
    write_tsv(root / "STS-B" / "test.tsv", [STSB_HEADER[:-1], ["0", "g", "f", "y", "3", "n", "n", "a", "b"]])
    return root
