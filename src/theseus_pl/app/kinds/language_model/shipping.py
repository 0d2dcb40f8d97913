"""A decoder-LM successor shipped as GGUF files for llama.cpp: inside a run (``deploy.gguf``) and on a finished run's
folder (``python -m theseus_pl.deploy RUN_DIR --gguf ...``), checked on the run's own held-out windows and timed in
llama.cpp against its predecessor (:mod:`theseus_pl.deployment.gguf_stage`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, cast

from hydra import compose, initialize_config_module
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from transformers import AutoConfig, AutoTokenizer, PreTrainedModel

from theseus_pl.app.checks.multirun import CONFIG
from theseus_pl.app.config.resolvers import register_resolvers
from theseus_pl.app.kinds.language_model.checks import gguf_deploy_problems
from theseus_pl.app.kinds.language_model.config import LanguageModelConfig
from theseus_pl.app.kinds.language_model.data import language_model_datamodule
from theseus_pl.app.kinds.language_model.record import LanguageModelResults
from theseus_pl.app.results.reading import read_run
from theseus_pl.app.results.registry import kind_named
from theseus_pl.app.ship.deploy_folder import check_not_a_runs_successor, recorded_deployment
from theseus_pl.core.decoders import load_causal_lm
from theseus_pl.data.language_model import LanguageModelingDataModule, collate_windows
from theseus_pl.deployment.gguf_stage import deploy_gguf, gguf_deployment_files
from theseus_pl.deployment.llama_cpp_runtime import llama_cpp_problem
from theseus_pl.deployment.record import DeploySettings

log = logging.getLogger(__name__)
DECODE_TOKENS = 64  # tokens each decode timing generates, in PyTorch and in llama.cpp
GGUF_CHECK_WINDOWS = 4  # held-out windows a GGUF file's logits are checked on


def shipped_gguf(
    config: LanguageModelConfig,
    cache_dir: Path,
    deploy: DeploySettings,
    successor_dir: Path,
    successor: PreTrainedModel,
    predecessor: str,
    origin: str,
    datamodule: LanguageModelingDataModule,
) -> list[dict[str, Any]]:
    """The successor as GGUF files of ``deploy.gguf``'s types, checked on the run's first held-out windows; timed in
    llama.cpp against the predecessor at the same type where ``deploy.llama_cpp`` asks and its binding is installed.
    A GGUF predecessor (``origin`` gguf) lends its tokenizer fields exactly."""
    timed = timed_in_llama_cpp(deploy)
    if not timed and deploy.llama_cpp == "auto":
        log.info("The GGUF files are not timed in llama.cpp: %s", llama_cpp_problem())
    validation = datamodule.splits["validation"]
    windows = collate_windows(list(validation.select(range(min(GGUF_CHECK_WINDOWS, len(validation))))))
    return deploy_gguf(
        successor_dir, successor, _local_folder(predecessor), list(deploy.gguf), windows["input_ids"],
        Path(config.model.gguf).expanduser() if origin == "gguf" and config.model.gguf else None,
        {"repeats": deploy.repeats, "new_tokens": DECODE_TOKENS, "threads": deploy.threads} if timed else None,
        cache_dir,
    )  # fmt: skip


def deploy_language_model_run(run_dir: Path, deploy: DeploySettings) -> list[dict[str, Any]]:
    """``python -m theseus_pl.deploy RUN_DIR --gguf ...`` on a finished decoder-LM run: :func:`shipped_gguf` on the
    run's own held-out windows and predecessor; its ``results.json`` and model card gain the rows. Refused before
    any export where the files cannot be made or timed as asked."""
    results, cfg, successor_dir = _checked_language_model_run(run_dir, deploy)
    tokenizer = AutoTokenizer.from_pretrained(successor_dir)
    cache_dir = Path(cfg.paths.cache_dir)
    datamodule = language_model_datamodule(cfg, tokenizer, cache_dir)
    datamodule.setup("fit")
    successor = load_causal_lm(successor_dir).eval()
    origin = results.predecessor.origin or "given"
    return recorded_deployment(
        run_dir,
        results,
        "gguf",
        lambda: shipped_gguf(
            cast(LanguageModelConfig, cfg),
            cache_dir,
            deploy,
            successor_dir,
            successor,
            results.predecessor.dir,
            origin,
            datamodule,
        ),
        lambda rows: [row["file"] for row in rows],
    )


def planned_language_model_deployment(run_dir: Path, deploy: DeploySettings) -> list[str]:
    """``--dry-run --gguf``: the checks :func:`deploy_language_model_run` makes first, then what it would write."""
    results, _, successor_dir = _checked_language_model_run(run_dir, deploy)
    timed = timed_in_llama_cpp(deploy)
    earlier = gguf_deployment_files(successor_dir)
    return [
        *([f"remove an earlier deployment's {', '.join(str(path) for path in earlier)}"] if earlier else []),
        *(f"write {successor_dir / 'gguf' / f'model.{kind}.gguf'}" for kind in deploy.gguf),
        f"check each against the PyTorch successor on the run's first {GGUF_CHECK_WINDOWS} held-out windows",
        f"time each in llama.cpp against {results.predecessor.dir} at the same type, {deploy.repeats} rounds"
        if timed
        else f"not time them in llama.cpp ({llama_cpp_problem() or 'deploy.llama_cpp=false'})",
        f"write the rows to {run_dir / 'results.json'} and {successor_dir / 'README.md'}",
    ]


def timed_in_llama_cpp(deploy: DeploySettings) -> bool:
    """Whether the GGUF files are timed in llama.cpp: asked (``true``; the checks refused a run without the binding),
    or ``auto`` where llama-cpp-python is installed."""
    return deploy.llama_cpp is True or (deploy.llama_cpp == "auto" and llama_cpp_problem() is None)


def _checked_language_model_run(run_dir: Path, deploy: DeploySettings) -> tuple[LanguageModelResults, DictConfig, Path]:
    """A finished decoder-LM run's record, config (with ``deploy``'s GGUF settings) and successor folder; a
    ValueError naming every reason its GGUF files cannot be made or timed as asked."""
    if not (run_dir / "results.json").is_file():
        check_not_a_runs_successor(run_dir, f" --gguf {' '.join(deploy.gguf)}", deploys_alone=False)
        raise ValueError(f"{run_dir} has no results.json: --gguf deploys a finished decoder-LM run's folder.")
    results = read_run(run_dir / "results.json")
    if not isinstance(results, LanguageModelResults):  # read as its kind's record: each other kind is named
        instead = kind.without_gguf if (kind := kind_named(results.kind)) else ""
        raise ValueError(
            f"{run_dir} is a run of kind {results.kind!r}: --gguf writes decoder LMs (runs of kind "
            f"{LanguageModelResults.kind!r}) only{instead}."
        )
    successor_dir = run_dir / "successor"
    if not (run_dir / ".hydra" / "config.yaml").is_file():
        raise ValueError(f"{run_dir} has no .hydra/config.yaml, so the held-out text the GGUF files are checked on is "
                         "unknown: give the run's folder as the run left it.")  # fmt: skip
    if not (successor_dir / "config.json").is_file():
        raise ValueError(f"{successor_dir} holds no config.json: the run's successor is not there to write as GGUF.")
    register_resolvers()
    cfg = _run_config(run_dir)
    cfg.deploy.gguf, cfg.deploy.llama_cpp = list(deploy.gguf), deploy.llama_cpp
    problems = gguf_deploy_problems(cfg, AutoConfig.from_pretrained(successor_dir).model_type, results.predecessor.dir)
    if problems:
        raise ValueError(" ".join(problems))
    return results, cfg, successor_dir


def _run_config(run_dir: Path) -> DictConfig:
    """The run's config as it ran, any key added to the configs since taken from today's composition of the run's own
    overrides: a decoder run from before ``data.corpus`` existed (its ``data.files: null`` then meant the convention
    speeches, today's default corpus) deploys on the text it trained on instead of being refused for naming none."""
    saved = OmegaConf.load(run_dir / ".hydra" / "config.yaml")
    overrides = run_dir / ".hydra" / "overrides.yaml"
    if not overrides.is_file():
        return saved
    try:
        with initialize_config_module(CONFIG[0], version_base="1.3"):
            today = compose(CONFIG[1], overrides=[*OmegaConf.load(overrides), "paths.output_dir=unused"])
    except HydraException as error:  # an experiment renamed since: the saved config alone
        log.info("The run's overrides no longer compose (%s); reading its saved config alone.", error)
        return saved
    OmegaConf.set_struct(today, False)  # keys the configs have dropped since stay
    return OmegaConf.merge(today, saved)


def _local_folder(model: str) -> Path:
    """A model's folder on disk: itself, or its hub snapshot (already in the hub cache: the run loaded it)."""
    if Path(model).is_dir():
        return Path(model)
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(model))
