"""A sentence-embedding successor deployed to ONNX Runtime (and OpenVINO): ``python -m theseus_pl.deploy RUN_DIR`` on a
finished sentence-embedding run's folder (:mod:`theseus_pl.deployment.embedding_stage`), checked and scored on the
run's own STS-B dev pairs, OpenVINO's int8 calibrated on its own training sentences, timed beside its predecessor; the
run's ``results.json`` and model card gain the block."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from theseus_pl.app.config.resolvers import register_resolvers
from theseus_pl.app.kinds.embedding_model.record import EmbeddingModelResults
from theseus_pl.app.kinds.embedding_model.run import sts_dev_pairs, training_sentences
from theseus_pl.app.ship.deploy_folder import CONFIG, deployable_record, recorded_deployment
from theseus_pl.deployment.onnx_deployment import onnx_files
from theseus_pl.deployment.onnx_export import DeploymentError, require_onnxruntime
from theseus_pl.deployment.record import Deployment, DeploySettings
from theseus_pl.deployment.targets import AUTO, auto_in_words, timing_in_words

log = logging.getLogger(__name__)


def deploy_embedding_run(run_dir: Path, settings: DeploySettings, glue_dir: str | None = None) -> Deployment:
    """Deploy a finished sentence-embedding run's successor on the run's STS-B dev pairs (from ``glue_dir``, else
    the folder the run read); OpenVINO's int8 is calibrated on the run's training sentences (never dev)."""
    results = _checked(run_dir, settings)
    from theseus_pl.core.embeddings import load_embedding_model
    from theseus_pl.deployment.embedding_stage import StsPairs, deploy_embedding_model

    data = _run_data(run_dir, glue_dir)
    rows = sts_dev_pairs(data)
    pairs = StsPairs(rows["sentence1"], rows["sentence2"], rows["label"])
    calibration = training_sentences(data, rows) if settings.openvino else []
    predecessor_dir = Path(results.predecessor.dir)
    predecessor = load_embedding_model(predecessor_dir) if predecessor_dir.is_dir() else None
    if predecessor is None:
        log.warning("The run's predecessor (%s) is gone: no ratios over it.", predecessor_dir)
    successor_dir = run_dir / "successor"
    return recorded_deployment(
        run_dir, results, "deployment",
        lambda: deploy_embedding_model(successor_dir, settings, pairs, predecessor,
                                       predecessor_dir if predecessor else None, calibration),
        lambda block: block.files,
    )  # fmt: skip


def planned_embedding_deployment(run_dir: Path, settings: DeploySettings, glue_dir: str | None = None) -> list[str]:
    """The dry run of :func:`deploy_embedding_run`: its checks before any export (the dev pairs it scores on read,
    from ``glue_dir`` as the deployment would), then what it would do."""
    results = _checked(run_dir, settings)
    data = _run_data(run_dir, glue_dir)
    pairs = sts_dev_pairs(data)
    successor_dir, predecessor_dir = run_dir / "successor", Path(results.predecessor.dir)
    from theseus_pl.deployment.embedding_stage import planned_ir_files
    from theseus_pl.deployment.openvino_export import calibration_in_words

    openvino = planned_ir_files(successor_dir, settings, True)
    files = onnx_files(successor_dir, settings.quantize) | openvino
    asked = settings.calibration_rows
    rows = min(asked, len(training_sentences(data, pairs))) if "openvino_int8" in openvino else asked  # all, if fewer
    calibration = calibration_in_words(openvino, rows, "training sentences", asked=asked)
    beside = predecessor_dir if predecessor_dir.is_dir() else None
    timing = timing_in_words(settings, settings.threads or torch.get_num_threads(), beside, settings.own_lengths)
    auto = f" ({auto_in_words(settings.max_score_drop)}, in STS-B points)"
    backends = "backend='onnx' and 'openvino'" if settings.openvino else "backend='onnx'"
    return [
        f"export the encoder of {successor_dir}: {', '.join(map(str, files.values()))} (an earlier "
        f"deployment's files in onnx/ and openvino/ removed first, others kept; sentence-transformers' {backends} "
        f"looks there){calibration}",
        f"check the exported fp32 sentence vectors against PyTorch's and score each model on the run's "
        f"{len(pairs):,} STS-B dev pairs",
        timing,
        f"ship the target {settings.target}{auto if settings.target == AUTO else ''}",
        f"write the deployment block to {run_dir / 'results.json'}, {successor_dir / 'README.md'}",
    ]


def _run_data(run_dir: Path, glue_dir: str | None) -> DictConfig:
    """The data settings the run read, its GLUE folder moved to ``glue_dir`` where one is given."""
    register_resolvers()
    data = OmegaConf.load(run_dir / CONFIG).data
    if glue_dir is not None:
        data.glue_dir = glue_dir
    return data


def _checked(run_dir: Path, settings: DeploySettings) -> EmbeddingModelResults:
    """The run's record, refused before any work where the folder, the extras or the settings will not do."""
    results = deployable_record(run_dir)
    if not isinstance(results, EmbeddingModelResults):
        raise DeploymentError(f"{run_dir} is a run of kind {results.kind!r}, not a sentence-embedding run.")
    require_onnxruntime()
    try:
        from theseus_pl.deployment.embedding_stage import check_embedding_settings
    except ModuleNotFoundError as missing:  # the embeddings extra
        raise DeploymentError(str(missing)) from None
    check_embedding_settings(settings)
    return results


def sentence_transformers_missing_parts(successor: Path) -> list[str]:
    """What a sentence-transformers folder lacks of what loads it: its ``modules.json`` and every module folder it
    names (the pooling, the normalisation)."""
    modules = successor / "modules.json"
    if not modules.is_file():
        return ["modules.json"]
    try:
        paths = [module.get("path", "") for module in json.loads(modules.read_text())]
    except (json.JSONDecodeError, AttributeError, TypeError):
        return ["a readable modules.json"]
    return [f"{path}/" for path in paths if path and not (successor / path).is_dir()]
