"""The sentence-embedding model's registration: a sentence-transformers model compressed to its own sentence
vectors, shipped as a sentence-transformers folder with its encoder in ONNX (and OpenVINO)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from theseus_pl.app.config.kinds import EMBEDDING_MODEL
from theseus_pl.app.kinds.embedding_model.card import embedding_model_card
from theseus_pl.app.kinds.embedding_model.config import EmbeddingModelConfig
from theseus_pl.app.kinds.embedding_model.record import EmbeddingModelResults
from theseus_pl.app.kinds.embedding_model.report import STEM, write_embedding_model_report
from theseus_pl.app.results.registry import Deployer, Kind, ReportPart
from theseus_pl.deployment.record import Deployment, DeploySettings


def _method_problems(cfg: Any, method: Any, theseus: Any) -> list[str]:
    """Its method checks, imported as a run is checked: their modules import Lightning, which a report needs not."""
    from theseus_pl.app.kinds.embedding_model.checks import embedding_model_method_problems

    return embedding_model_method_problems(cfg, method, theseus)


def _run(cfg: Any, settings: Any) -> Any:
    from theseus_pl.app.kinds.embedding_model.run import EmbeddingModelRun  # Lightning's import waits for a run

    return EmbeddingModelRun(cfg, settings)


def _report(runs: list[EmbeddingModelResults], rows: str, output: Path) -> ReportPart:
    """Its table does not read ``--rows``: a line per run."""
    written, warnings = write_embedding_model_report(runs, output)
    return ReportPart(written, warnings, output / f"{STEM}.md")


# Its shipping (torch, ONNX Runtime) imported as it ships: reading and reporting its runs needs neither.
def _deploy(folder: Path, settings: DeploySettings, glue_dir: str | None) -> Deployment:
    from theseus_pl.app.kinds.embedding_model.shipping import deploy_embedding_run

    return deploy_embedding_run(folder, settings, glue_dir)


def _planned(folder: Path, settings: DeploySettings, glue_dir: str | None) -> list[str]:
    from theseus_pl.app.kinds.embedding_model.shipping import planned_embedding_deployment

    return planned_embedding_deployment(folder, settings, glue_dir)


def _static_reference(trial_folder: Path, batch_size: int, cache_dir: Path) -> list[Any]:
    from theseus_pl.app.kinds.embedding_model.static_reference import static_reference

    return static_reference(trial_folder, batch_size, cache_dir)


def _missing_parts(successor: Path) -> list[str]:
    from theseus_pl.app.kinds.embedding_model.shipping import sentence_transformers_missing_parts

    return sentence_transformers_missing_parts(successor)


def _dashboard() -> Any:
    """Its part of the W&B workspace and sweep report, imported as a view is built: W&B's workspace library (0.3 s
    and more) is for those views alone, not for every run and reader of its records."""
    from theseus_pl.app.kinds.embedding_model.dashboard import EMBEDDING_MODEL_DASHBOARD

    return EMBEDDING_MODEL_DASHBOARD


KIND = Kind(
    name=EMBEDDING_MODEL,
    record=EmbeddingModelResults,
    run=_run,
    config=EmbeddingModelConfig,
    method_problems=_method_problems,
    card=embedding_model_card,
    dashboard=_dashboard,
    report=_report,
    missing_parts=_missing_parts,
    deployer=Deployer(deploy=_deploy, plan=_planned),
    search_references=_static_reference,
    without_gguf="; its successor is a sentence-transformers folder already",
    without_config="put the run's .hydra/config.yaml back and deploy its folder again: a sentence-embedding "
    "successor deploys from its run's folder only, whose config names the STS-B dev pairs and training sentences.",
    search_option="fastest_embedding",
    described="sentence-embedding models",
    methods_hint="on a sentence-embedding model use embedding_theseus, embedding_mse (embedding_fine_tuning on "
    "labelled pairs) or embedding_truncation",
)  # fmt: skip
