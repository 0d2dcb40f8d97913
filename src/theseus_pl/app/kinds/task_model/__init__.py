"""The task model's registration: a classifier or regressor (an encoder) compressed on a task."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from theseus_pl.app.config.kinds import TASK_MODEL
from theseus_pl.app.kinds.task_model.card import task_model_card
from theseus_pl.app.kinds.task_model.config import TaskModelConfig
from theseus_pl.app.kinds.task_model.record import TaskModelResults
from theseus_pl.app.kinds.task_model.report import task_model_report, unknown_rows
from theseus_pl.app.results.registry import Deployer, Kind
from theseus_pl.deployment.record import Deployment, DeploySettings


def _method_problems(cfg: Any, method: Any, theseus: Any) -> list[str]:
    """Its method checks, imported as a run is checked: their modules import Lightning, which a report needs not."""
    from theseus_pl.app.kinds.task_model.checks import task_model_method_problems

    return task_model_method_problems(cfg, method, theseus)


def _run(cfg: Any, settings: Any) -> Any:
    from theseus_pl.app.kinds.task_model.run import TaskModelRun  # Lightning's import waits for a run

    return TaskModelRun(cfg, settings)


# Its deployment (torch, ONNX Runtime) imported as it deploys: reading and reporting its runs needs neither.
def _deploy(folder: Path, settings: DeploySettings, glue_dir: str | None) -> Deployment:
    from theseus_pl.app.kinds.task_model.shipping import deploy_run

    return deploy_run(folder, settings, glue_dir)


def _planned(folder: Path, settings: DeploySettings, glue_dir: str | None) -> list[str]:
    from theseus_pl.app.kinds.task_model.shipping import planned_deployment

    return planned_deployment(folder, settings, glue_dir=glue_dir)


def _dashboard() -> Any:
    """Its part of the W&B workspace and sweep report, imported as a view is built: W&B's workspace library (0.3 s
    and more) is for those views alone, not for every run and reader of its records."""
    from theseus_pl.app.kinds.task_model.dashboard import TASK_MODEL_DASHBOARD

    return TASK_MODEL_DASHBOARD


KIND = Kind(
    name=TASK_MODEL,
    record=TaskModelResults,
    run=_run,
    config=TaskModelConfig,
    method_problems=_method_problems,
    card=task_model_card,
    dashboard=_dashboard,
    report=task_model_report,
    unknown_rows=unknown_rows,
    deployer=Deployer(deploy=_deploy, plan=_planned),
    without_gguf="; deploy it to ONNX without --gguf",
    without_config="deploy its successor/ with --task.",
    search_option="fastest_within",
    described="encoder task models (classifiers and regressors)",
    methods_hint="on a classification or regression task use an encoder method such as theseus, fine_tuning or kd "
    "(a language-model run: +experiment=smollm2_quick)",
)  # fmt: skip
