"""A record's ``deployment`` block (every kind that deploys to ONNX keeps one in its ``results.json``; a checkpoint
deployed on its own keeps it in ``onnx/deployment.json``): written and read back by type."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from theseus_pl.app.results.envelope import (
    Keys,
    ResultsError,
    plain,
    write_json,
)
from theseus_pl.app.results.field_types import check_types
from theseus_pl.deployment.record import Deployment, DeploySettings


def deployment_dict(deployment: Deployment) -> dict[str, Any]:
    """The ``deployment`` block as ``results.json`` lays it out (numbers as they are)."""
    return plain(deployment)


def write_deployment(path: Path, deployment: Deployment) -> Path:
    """The ``deployment`` block alone (``<model>/onnx/deployment.json``), written as ``results.json`` is."""
    return write_json(path, deployment_dict(deployment))


def read_deployment(path: Path) -> Deployment:
    """The ``deployment`` block :func:`write_deployment` wrote."""
    try:
        deployment = deployment_from(Keys(json.loads(Path(path).read_text()), ""))
        check_types(deployment)
    except ResultsError as error:
        raise ResultsError(f"{path}: {error}") from None
    return deployment


def deployment_from(read: Keys) -> Deployment:
    """The ``deployment`` block of a record (every kind that deploys to ONNX keeps one) as read from its file."""
    values = read.pick(Deployment)
    settings = read.nested("settings").pick(DeploySettings)
    settings["batch_sizes"] = tuple(settings.get("batch_sizes", DeploySettings.batch_sizes))
    return Deployment(**{**values, "settings": DeploySettings(**settings)})
