"""The sentence-embedding model's registration: a sentence-transformers model compressed to its own sentence
vectors, shipped as a sentence-transformers folder with its encoder in ONNX (and OpenVINO)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from theseus_pl.app.config.kinds import EMBEDDING_MODEL
from theseus_pl.app.kinds.embedding_model.card import embedding_model_card
from theseus_pl.app.kinds.embedding_model.checks import embedding_model_method_problems
from theseus_pl.app.kinds.embedding_model.dashboard import EMBEDDING_MODEL_DASHBOARD
from theseus_pl.app.kinds.embedding_model.record import EmbeddingModelResults
from theseus_pl.app.kinds.embedding_model.report import STEM, write_embedding_model_report
from theseus_pl.app.kinds.embedding_model.shipping import (
    deploy_embedding_run,
    planned_embedding_deployment,
    sentence_transformers_missing_parts,
)
from theseus_pl.app.results.registry import Deployer, Kind, ReportPart
from theseus_pl.deployment.record import DeploySettings


def _run(cfg: Any, settings: Any) -> Any:
    from theseus_pl.app.kinds.embedding_model.run import EmbeddingModelRun  # Lightning's import waits for a run

    return EmbeddingModelRun(cfg, settings)


def _report(runs: list[EmbeddingModelResults], rows: str, output: Path) -> ReportPart:
    """Its table does not read ``--rows``: a line per run."""
    written, warnings = write_embedding_model_report(runs, output)
    return ReportPart(written, warnings, output / f"{STEM}.md")


def _planned(folder: Path, settings: DeploySettings, glue_dir: str | None) -> list[str]:
    return planned_embedding_deployment(folder, settings)


KIND = Kind(
    name=EMBEDDING_MODEL,
    record=EmbeddingModelResults,
    run=_run,
    method_problems=embedding_model_method_problems,
    card=embedding_model_card,
    dashboard=EMBEDDING_MODEL_DASHBOARD,
    report=_report,
    missing_parts=sentence_transformers_missing_parts,
    deployer=Deployer(deploy=deploy_embedding_run, plan=_planned),
    without_gguf="; its successor is a sentence-transformers folder already",
    described="sentence-embedding models",
    methods_hint="on a sentence-embedding model use embedding_theseus, embedding_mse (embedding_fine_tuning on "
    "labelled pairs) or embedding_truncation",
)  # fmt: skip
