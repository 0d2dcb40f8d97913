"""What can be known to be wrong with a decoder-LM run once its predecessor's folder is at hand, before any compute:
the model's structure (read on the meta device: no weights), the window against its positions, the tokenizer, the
texts (the other held-out text must not be the training text), the lm-eval tasks (installed, known, their data at
hand), the GGUF files asked for (the family, llama.cpp's binding). The settings themselves are checked as for every
run (:mod:`~theseus_pl.app.checks.settings`), then by the decoder LM's own rules on its method's options
(:func:`language_model_method_problems`, which the kind registers)."""

from __future__ import annotations

from pathlib import Path

import torch
from omegaconf import DictConfig, ListConfig
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerBase

from theseus_pl.app.checks.settings import (
    changed_from_defaults,
    successor_depth_problems,
    teacher_of,
    trains_nothing_problems,
)
from theseus_pl.app.methods.method import ADAPTED_TEACHER, CompressionMethod, TheseusSettings
from theseus_pl.app.predecessors.adapted import ADAPTATION_KEYS
from theseus_pl.core.decoders import check_decoder_fits, is_decoder
from theseus_pl.core.families import find_layer_stack
from theseus_pl.core.memory import checkpointing_problem
from theseus_pl.core.settings import whole_number
from theseus_pl.data.harness_tasks import LOCAL_TASKS, local_task_folder
from theseus_pl.data.language_model import window_problem
from theseus_pl.data.text_corpus import HubText, text_source
from theseus_pl.deployment.gguf_export import gguf_problems, rope_problem, tokenizer_problem
from theseus_pl.deployment.gguf_types import GGUF_TYPES
from theseus_pl.deployment.llama_cpp_runtime import llama_cpp_problem
from theseus_pl.lightning.language_model_harness import harness_problems


def language_model_problems(
    cfg: DictConfig, predecessor_dir: str, tokenizer: PreTrainedTokenizerBase, replaces_modules: bool
) -> list[str]:
    """Every reason the run cannot work with this predecessor and tokenizer; ``replaces_modules``: the method wraps
    the predecessor's layers in modules (Theseus), which some decoders' layers do not allow (removal methods keep
    each kept layer as it was)."""
    problems = []
    chosen = [name for name in ("model_checkpoint", "early_stopping") if cfg.callbacks.get(name) is not None]
    if chosen:  # callbacks=default: they monitor val/score, which no LM run logs (a crash at the first validation)
        problems.append(
            f"callbacks.{' and callbacks.'.join(chosen)}: a decoder-LM run trains every method for the same steps and "
            "scores the last step's model (no best checkpoint, no early stop on the windows it is scored on): use "
            "callbacks=lm, as its experiments do."
        )
    config = AutoConfig.from_pretrained(predecessor_dir)
    if replaces_modules:
        try:
            check_decoder_fits(config)
        except ValueError as error:
            problems.append(f"method={cfg.method.name}: {error}")
    with torch.device("meta"):  # the model's structure, without its weights
        model = AutoModelForCausalLM.from_config(config)
    if not is_decoder(model):
        problems.append(f"model: {predecessor_dir} is not a causal language model of a known decoder family.")
    else:
        try:
            layers = len(find_layer_stack(model, cfg.theseus.get("layers_path")).layers)
        except ValueError as error:
            problems.append(f"theseus.layers_path: {error}")
        else:
            problems += successor_depth_problems(cfg.theseus.successor_layers, layers)
    if cfg.get("activation_checkpointing") is True and (problem := checkpointing_problem(config, causal_lm=True)):
        problems.append(problem)
    problems += gguf_deploy_problems(cfg, config.model_type, predecessor_dir)
    window = cfg.data.window  # not a whole number of at least 2: the settings check has said so
    if whole_number(window) and window >= 2:
        problem = window_problem(window, getattr(config, "max_position_embeddings", None))
        problems += [problem] if problem else []
    if tokenizer.eos_token_id is None:
        problems.append("The tokenizer has no end-of-text token (eos_token) to put between documents.")
    problems += _text_problems(cfg.data)
    if cfg.evaluation.lm_eval.tasks:
        try:
            folders = harness_task_folders(cfg.evaluation.lm_eval, Path(cfg.paths.cache_dir))
        except (FileNotFoundError, ValueError) as error:
            problems.append(str(error))
        else:
            problems += harness_problems(list(cfg.evaluation.lm_eval.tasks), folders)
    return problems


def _text_problems(data: DictConfig) -> list[str]:
    """The training text and the other held-out text name texts that exist, and not the same one (compared by their
    fingerprints: the same files' contents, the same hub dataset, configuration, split and column, the same corpus),
    nor, where both are local, texts sharing a document (one of the training files named as the other text)."""
    try:
        training = text_source(data)
        other = text_source(data.other_text, "data.other_text") if data.get("other_text") else None
        # the fingerprints read the user's files: one that is not UTF-8 is named here, not in a traceback later
        fingerprints = [source.fingerprint() if source else None for source in (training, other)]
    except (ValueError, FileNotFoundError, ModuleNotFoundError) as error:
        return [str(error)]
    if training is None:
        return ["data: name the text to train on: data.files, data.hub_dataset or data.corpus."]
    fix = ("it must come from another source to say anything the held-out split does not; name another (e.g. "
           "data.other_text.corpus=guardian_headlines) or data.other_text.corpus=null to score none.")  # fmt: skip
    if other is not None and fingerprints[0] == fingerprints[1]:
        return [f"data.other_text is the training text ({training.describe()}): {fix}"]
    if other is not None and not isinstance(training, HubText) and not isinstance(other, HubText):  # read here
        trained = set(training.documents())
        shared = sum(document in trained for document in other.documents())
        if shared:  # one of the training files, a folder of them, copies of its documents
            return [f"data.other_text ({other.describe()}) holds {shared} document(s) of the training text "
                    f"({training.describe()}): {fix}"]  # fmt: skip
    return []


def harness_task_folders(lm_eval: DictConfig, cache_dir: Path) -> list[Path]:
    """The folders of task YAMLs lm-eval is to read besides its own: the local GLUE tasks' (written into the cache
    from ``lm_eval.glue_dir`` when one is asked for) and ``lm_eval.include_path``. An error naming the setting."""
    folders = []
    local = [task for task in lm_eval.tasks if task in LOCAL_TASKS]
    if local:
        if not lm_eval.get("glue_dir"):
            raise ValueError(
                f"evaluation.lm_eval.tasks: {', '.join(local)} read(s) a local GLUE folder: give "
                "evaluation.lm_eval.glue_dir=PATH (the classic layout: PATH/SST-2/dev.tsv, PATH/RTE/dev.tsv)."
            )
        try:
            folders.append(local_task_folder(lm_eval.glue_dir, local, cache_dir / "lm-eval"))
        except (FileNotFoundError, ValueError) as error:
            raise type(error)(f"evaluation.lm_eval.glue_dir: {error}") from None
    if lm_eval.get("include_path"):
        folder = Path(lm_eval.include_path).expanduser()
        if not folder.is_dir():
            raise FileNotFoundError(f"evaluation.lm_eval.include_path={folder} is not a folder of task YAMLs.")
        folders.append(folder)
    return folders


def gguf_deploy_problems(cfg: DictConfig, model_type: str, predecessor_dir: str) -> list[str]:
    """What stops the GGUF files asked for (``deploy.gguf``): the family, the tokenizer (copied from a GGUF
    predecessor, else read from the folder's tokenizer.json), llama.cpp's binding where ``deploy.llama_cpp=true``."""
    types = cfg.deploy.get("gguf")
    if not isinstance(types, ListConfig) or not types:  # none asked, or a rule already says what is wrong
        return []
    problems = gguf_problems(model_type, [kind for kind in types if kind in GGUF_TYPES])
    from_gguf = bool(cfg.model.get("gguf")) and not cfg.model.get("predecessor")
    local = not from_gguf and Path(predecessor_dir).is_dir()
    if not problems and local and (problem := tokenizer_problem(Path(predecessor_dir))):
        problems.append(f"deploy.gguf=[{','.join(types)}]: {problem}")
    if not problems and local and (problem := rope_problem(AutoConfig.from_pretrained(predecessor_dir))):
        problems.append(f"deploy.gguf=[{','.join(types)}]: {predecessor_dir}: {problem}")
    if cfg.deploy.get("llama_cpp") is True and (problem := llama_cpp_problem()):
        problems.append(f"deploy.llama_cpp=true: {problem}")
    return problems


def language_model_method_problems(cfg: DictConfig, method: CompressionMethod, theseus: TheseusSettings) -> list[str]:
    """What a decoder LM's run refuses of its method's options: an adapted teacher where no distillation loss reads
    it, and the LM's own rules."""
    if problems := trains_nothing_problems(cfg, method):
        return problems
    adapts = teacher_of(method) == ADAPTED_TEACHER
    if adapts and not method.adapted_teacher:  # type: ignore[attr-defined]
        return ["method.teacher=adapted is read by a distillation loss only: give method.alpha above 0."]
    return _language_model_problems(cfg, theseus, adapts)


def _language_model_problems(cfg: DictConfig, theseus: TheseusSettings, adapts: bool) -> list[str]:
    """Settings a language-model run does not read (yet), or cannot honour; ``adapts``: the method distils from the
    predecessor adapted to the text, which reads the finetune group's steps and optimizer settings."""
    problems = []
    if cfg.evaluation.single_modules is True:
        problems.append(
            "evaluation.single_modules=true scores each Theseus module alone on a task; a decoder-LM run is scored on "
            "held-out windows. Leave it false."
        )
    problems += [
        f"theseus.successor.{name}={width} narrows encoder successors; a decoder-LM successor is made of whole "
        "copied layers (depth only). Leave it null."
        for name, width in theseus.widths.items()
    ]
    deploy = [setting for setting in changed_from_defaults(cfg, "deploy") if not setting.startswith(GGUF_SETTINGS)]
    if deploy:
        problems.append(
            f"{', '.join(deploy)}: the deploy group exports an encoder successor to ONNX; a decoder-LM successor "
            "ships as GGUF files for llama.cpp (deploy.gguf=[f16,q8_0], deploy.llama_cpp, deploy.repeats, "
            "deploy.threads). Leave the ONNX settings at their defaults."
        )
    changed = changed_from_defaults(cfg, "finetune")
    if adapts:
        changed = [setting for setting in changed if not setting.startswith(ADAPTATION_SETTINGS)]
        if cfg.finetune.get("steps") is None:
            problems.append(
                "method.teacher=adapted distils from the predecessor fine-tuned on the training text first: give "
                "its budget, finetune.steps=N (the comparison's: the run's own trainer.max_steps)."
            )
    if changed:
        problems.append(
            f"{', '.join(changed)}: a decoder-LM run compresses its predecessor as given (model.gguf, model.base or "
            "model.predecessor) and fine-tunes it first only as a teacher (method.teacher=adapted, with "
            "finetune.steps, lr, weight_decay, warmup_ratio). Leave the finetune group at its defaults."
        )
    return problems


# The deploy group's keys a decoder-LM run reads: its GGUF files and their timing in llama.cpp.
GGUF_SETTINGS = ("deploy.gguf=", "deploy.llama_cpp=", "deploy.repeats=", "deploy.threads=")
# The finetune group's keys a decoder-LM run reads when it adapts its predecessor to the text (method.teacher=adapted).
ADAPTATION_SETTINGS = tuple(f"finetune.{name}=" for name in ADAPTATION_KEYS)
