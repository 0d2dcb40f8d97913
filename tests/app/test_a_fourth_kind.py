"""A fourth kind of run, added from this file alone: no file under ``src/`` names it.

A *text scorer* is a tiny encoder that scores a number from text, under a kind of its own. It reuses what the task
model's run does (its run subclasses the task model's), and brings its own record, method, card and report table.
Registered once (:func:`~theseus_pl.app.results.registry.register_kind`), it passes ``--check`` and runs, writes its
``results.json`` and card, appears in ``python -m theseus_pl.report`` and in the offline W&B run's summary; ``deploy``
and the dashboard's report refuse it in one line each (it registered no deployer and no dashboard), and
``publish --dry-run`` lists its files and card (it registered a card). If a test here needs an edit under ``src/``,
the registry is not whole yet. Installed as a package of its own, the same kind is found by its entry point."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import pytest
from app_runs import compose_config, tiny_run_overrides
from huggingface_hub import ModelCard
from omegaconf import OmegaConf
from results_records import registering_for_the_test
from wandb_records import read_offline_run

from theseus_pl.app.kinds.task_model.checks import task_model_method_problems
from theseus_pl.app.kinds.task_model.record import TaskModelResults
from theseus_pl.app.kinds.task_model.run import TaskModelRun
from theseus_pl.app.methods.truncation import FineTuning
from theseus_pl.app.report.files import write_markdown_and_csv
from theseus_pl.app.results import registry
from theseus_pl.app.results.reading import read_run
from theseus_pl.app.results.registry import Kind, ReportPart, register_kind
from theseus_pl.app.run.pipeline import plan, refusal_problems, run
from theseus_pl.dashboard import main as dashboard_main
from theseus_pl.deploy import main as deploy_main
from theseus_pl.deployment.targets import ENCODERS
from theseus_pl.publish import main as publish_main
from theseus_pl.report import main as report_main

SCORER = "text_scorer"
CARD_HEAD = "---\nlibrary_name: transformers\n---\n\n# A text scorer\n\n"


@dataclass
class ScorerResults(TaskModelResults):
    """A text scorer's record: the task model's fields, under its own kind."""

    kind: ClassVar[str] = SCORER


class ScorerFineTuning(FineTuning):
    """The bottom layers fine-tuned, for text scorers: a method says which kinds it compresses."""

    kinds: ClassVar[tuple[str, ...]] = (SCORER,)


class ScorerRun(TaskModelRun):
    description = "a text scorer (an encoder scoring a number from text)"

    def record(self, *args: Any, **kwargs: Any) -> ScorerResults:
        results = super().record(*args, **kwargs)
        return ScorerResults(**{field.name: getattr(results, field.name) for field in fields(results)})


def scorer_card(results: ScorerResults, repo_id: str | None) -> ModelCard:
    score, layers = results.successor.score, results.layers.successor
    return ModelCard(f"{CARD_HEAD}It scores {score:.2f} on {results.task} dev with {layers} layers.\n")


def scorer_report(runs: list[ScorerResults], rows: str, output: Path) -> ReportPart:
    table = pd.DataFrame([{"task": run.task, "method": run.method, "score": run.successor.score} for run in runs])
    written = write_markdown_and_csv(table, output, "scorer_table")
    return ReportPart(written, [], written[0])


SCORER_KIND = Kind(
    SCORER,
    record=ScorerResults,
    run=ScorerRun,
    card=scorer_card,
    report=scorer_report,
    method_problems=task_model_method_problems,  # the task model's rules hold
)


@pytest.fixture
def scorer(monkeypatch: pytest.MonkeyPatch) -> Kind[ScorerResults]:
    registering_for_the_test(monkeypatch)
    return register_kind(SCORER_KIND)


def test_an_installed_package_adds_its_kind_by_an_entry_point_and_a_broken_one_is_named(tmp_path, monkeypatch, caplog):
    """As a package that ships a kind declares it: an entry point in the ``theseus_pl.kinds`` group of its
    distribution's metadata, found on the path by importlib.metadata, as pip's install leaves it."""
    metadata = tmp_path / "theseus_scorer-0.1.dist-info"
    metadata.mkdir()
    (metadata / "METADATA").write_text("Metadata-Version: 2.1\nName: theseus-scorer\nVersion: 0.1\n")
    (metadata / "entry_points.txt").write_text(
        f"[theseus_pl.kinds]\n{SCORER} = {__name__}:SCORER_KIND\nbroken = theseus_scorer_gone:KIND\n"
        "impostor = theseus_pl.app.kinds.task_model:KIND\n"
    )
    registering_for_the_test(monkeypatch)  # loads the built-in kinds first where this is the process's first lookup
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_loaded", False)  # as in a new process: the lookup loads the kinds
    with caplog.at_level(logging.WARNING, logger=registry.__name__):
        kinds = registry.registered_kinds()
    assert list(kinds) == ["task_model", "language_model", "embedding_model", SCORER] and kinds[SCORER] is SCORER_KIND
    assert (
        "The kind entry point broken = theseus_scorer_gone:KIND (from theseus-scorer) was not loaded: "
        "ModuleNotFoundError: No module named 'theseus_scorer_gone'"
    ) in caplog.text
    assert (
        "impostor = theseus_pl.app.kinds.task_model:KIND (from theseus-scorer) was not loaded: ValueError: it "
        "names the kind 'task_model', registered already" in caplog.text
    )


def _overrides(tiny_base: Path, glue_dir: Path, tmp_path: Path, *more: str) -> list[str]:
    return [*tiny_run_overrides(tiny_base, glue_dir, tmp_path), "+data.kind=text_scorer", "method=fine_tuning",
            f"method._target_={__name__}.ScorerFineTuning", "method.name=scorer_fine_tuning", *more]  # fmt: skip


def test_a_kind_registered_from_outside_checks_runs_records_reports_and_is_refused_where_it_registered_nothing(
    scorer, tiny_base, glue_dir, tmp_path, monkeypatch, capsys
):
    overrides = _overrides(tiny_base, glue_dir, tmp_path)
    assert any("text scorer" in line for line in plan(compose_config(*overrides)))  # --check, in its own words

    monkeypatch.setenv("WANDB_MODE", "offline")
    cfg = compose_config(*overrides, "logger=default")
    results = run(cfg)
    run_dir, results_path = tmp_path / "run", tmp_path / "run" / "results.json"
    (run_dir / ".hydra").mkdir()
    OmegaConf.save(cfg, run_dir / ".hydra" / "config.yaml")  # as the command line leaves it
    written = json.loads(results_path.read_text())
    assert written["kind"] == SCORER and written["method"] == "scorer_fine_tuning"
    assert isinstance(read_run(results_path), ScorerResults) and read_run(results_path) == results
    assert (run_dir / "successor" / "README.md").read_text().startswith(CARD_HEAD)
    summary = read_offline_run(Path(results.wandb.dir)).summary
    assert summary["final/successor_score"] == pytest.approx(results.successor.score)

    report_main([str(run_dir), "--output", str(tmp_path / "report")])
    assert "scorer_fine_tuning" in (tmp_path / "report" / "scorer_table.md").read_text()
    assert not (tmp_path / "report" / "table.md").exists()  # no task model among the runs

    with pytest.raises(SystemExit) as refused:
        deploy_main([str(run_dir), "--dry-run"])
    assert str(refused.value) == f"{run_dir} is a run of kind {SCORER!r}: {ENCODERS}."
    capsys.readouterr()
    with pytest.raises(SystemExit):  # it registered no dashboard: no view that silently lacks its runs
        dashboard_main(["--entity", "e", "--project", "p", "--report", str(tmp_path), "--dry-run"])
    assert "the sweep's W&B report knows runs of kind 'task_model', 'language_model', 'embedding_model' only" in (
        capsys.readouterr().err
    )
    capsys.readouterr()
    publish_main([str(run_dir), "--repo-id", "org/scorer", "--dry-run"])  # it registered a card: publish sends it
    listed = capsys.readouterr().out
    assert "README.md (the model card, rewritten from results.json)" in listed and "model.safetensors" in listed


def test_a_method_that_does_not_compress_the_kind_is_refused_naming_the_kinds_it_compresses(
    scorer, tiny_base, glue_dir, tmp_path
):
    cfg = compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path), "+data.kind=text_scorer", "method=kd")
    kinds = "encoder task models (classifiers and regressors), decoder language models and sentence-embedding models"
    assert refusal_problems(cfg) == [f"method=kd compresses {kinds}; this run is of kind text_scorer."]
