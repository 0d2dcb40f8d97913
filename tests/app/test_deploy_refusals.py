"""Deploy on a finished run it does not ship that way: refused before any export, in one line that names the run's
kind and says how its successor ships instead. No model is loaded: the refusals come from the record alone."""

from pathlib import Path

import pytest
from results_records import a_run, an_embedding_run, plant

from theseus_pl.app.results.envelope import RunRecord
from theseus_pl.deploy import main

DRY_RUN = pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["deploy", "dry run"])


def finished(folder: Path, record: RunRecord) -> Path:
    """A finished run's folder as deploy looks at it: its record, a successor/ folder and the run's config."""
    plant(folder, record)
    (folder / "successor").mkdir()
    (folder / ".hydra").mkdir()
    (folder / ".hydra" / "config.yaml").write_text("{}\n")
    return folder


def refusal(argv: list[str]) -> str:
    """The one line a refused deploy says (it exits with status 2)."""
    with pytest.raises(SystemExit) as refused:
        main(argv)
    assert refused.value.code == 2
    (line,) = str(refused.value).splitlines()
    return line


@DRY_RUN
def test_a_sentence_embedding_run_is_refused_saying_its_successor_ships_as_it_is(tmp_path, dry_run):
    run_dir = finished(tmp_path / "run", an_embedding_run())
    assert refusal([str(run_dir), *dry_run]) == (
        f"{run_dir} is a sentence-embedding run: its successor {run_dir / 'successor'} is a sentence-transformers "
        "folder already (SentenceTransformer(path) loads it; its model card inside); ONNX export of sentence-embedding "
        "runs is not built yet."
    )
    assert not (run_dir / "successor" / "onnx").exists()


@pytest.mark.parametrize(
    ("record", "kind", "instead"),
    [
        (a_run(), "task_model", "deploy it to ONNX without --gguf"),
        (an_embedding_run(), "embedding_model", "its successor is a sentence-transformers folder already"),
    ],
    ids=["task model", "sentence embedding"],
)
@DRY_RUN
def test_gguf_names_the_kind_of_a_run_that_is_no_decoder_lm(tmp_path, record, kind, instead, dry_run):
    run_dir = finished(tmp_path / "run", record)
    assert refusal([str(run_dir), "--gguf", "f16", *dry_run]) == (
        f"{run_dir} is a run of kind {kind!r}: --gguf writes decoder LMs (runs of kind 'language_model') only; "
        f"{instead}."
    )
