"""A language-model run behind ``python -m theseus_pl +experiment=smollm2_quick``: a decoder LM compressed on text.

What this kind supplies to the run's stages (:class:`~theseus_pl.app.run.kind.RunKind`): the predecessor is the
given causal LM (a GGUF file converted once, a folder or a hub id) and is not fine-tuned; every method trains, if it
trains, on the same windows for the same steps, and the last step's model is scored (no checkpoint is chosen on the
held-out windows); the successor and the predecessor are scored on the same held-out windows (perplexity, and KL and
top-1 agreement with the predecessor); the export is a plain ``…ForCausalLM`` folder, timed against the predecessor at
prefill and decode, and both models continue one fixed prompt.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from datasets import Dataset
from omegaconf import DictConfig
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from theseus_pl.app.checks.refused import RunRefused
from theseus_pl.app.checks.resources import language_model_resource_problems
from theseus_pl.app.checks.schedule import schedule_problems, validation_problems
from theseus_pl.app.checks.trainer import device_problems
from theseus_pl.app.config.kinds import LANGUAGE_MODEL
from theseus_pl.app.kinds.language_model.checks import harness_task_folders, language_model_problems
from theseus_pl.app.kinds.language_model.config import LanguageModelConfig
from theseus_pl.app.kinds.language_model.data import language_model_datamodule
from theseus_pl.app.kinds.language_model.record import (
    GenerationSample,
    LanguageModelData,
    LanguageModelResults,
    LanguageModelSide,
)
from theseus_pl.app.kinds.language_model.shipping import DECODE_TOKENS, shipped_gguf
from theseus_pl.app.methods.kind_models import LanguageModels
from theseus_pl.app.methods.method import CompressionMethod, Method, MethodInputs, SoftTargets
from theseus_pl.app.methods.schedules import successor_finetuning_steps
from theseus_pl.app.predecessors.adapted import adaptation_module, adapted_folder, adapted_predecessor
from theseus_pl.app.predecessors.gguf import converted_gguf
from theseus_pl.app.predecessors.harness_scores import cached_harness_scores
from theseus_pl.app.predecessors.resumable_training import entry_state
from theseus_pl.app.results.envelope import Hardware, WandbLink, budget_settings
from theseus_pl.app.run.kind import PredecessorTraining, RunKind
from theseus_pl.app.run.stages import each_process, empty_successor_folder, hub_id, rows_per_step
from theseus_pl.app.ship.model_card import write_model_card
from theseus_pl.app.tracking.wandb_run import save_files
from theseus_pl.core.decoders import load_causal_lm, new_token_room
from theseus_pl.core.families import find_layer_stack
from theseus_pl.core.memory import training_memory_bytes
from theseus_pl.core.timing import generation_speed
from theseus_pl.data.cache_entry import is_cached
from theseus_pl.data.language_model import (
    IGNORED,
    LanguageModelingDataModule,
    collate_windows,
    tokenized_windows,
    window_loader,
)
from theseus_pl.data.text_corpus import TextSource, text_source
from theseus_pl.lightning.language_model_evaluation import evaluate_language_model
from theseus_pl.lightning.language_model_harness import harness_scores

log = logging.getLogger(__name__)

PROMPT = "The president said in his speech that the economy"  # every run's generation sample continues this
SAMPLE_TOKENS = 20


class LanguageModelRun(RunKind[LanguageModelResults]):
    """A decoder LM compressed on text (``data=lm_text``)."""

    config: LanguageModelConfig  # its settings, typed (the registration's config)
    name = LANGUAGE_MODEL
    description = "language model (a decoder compressed on text)"
    datamodule: LanguageModelingDataModule
    other_windows: Dataset | None  # the other held-out text's windows (data.other_text), if it is scored
    adapted_dir: str | None = None  # the predecessor adapted to the training text (method.teacher=adapted), if made
    teacher: PreTrainedModel | None = None  # that model, loaded to be scored

    def check(self) -> None:
        cfg, problems = self.cfg, self.settings.problems
        if missing := language_model_resource_problems(cfg):  # nothing further can be read without them
            raise RunRefused(problems + device_problems(cfg) + missing)
        try:
            self.predecessor_dir, self.origin = _predecessor_folder(cfg.model, self.cache_dir)
        except RunRefused as refused:
            raise RunRefused(problems + refused.problems) from None
        self.tokenizer = AutoTokenizer.from_pretrained(self.predecessor_dir)
        replaces_modules = self.settings.method is not None and self.settings.method.needs_schedule
        problems = problems + device_problems(cfg) + language_model_problems(cfg, self.predecessor_dir, self.tokenizer,
                                                                             replaces_modules)  # fmt: skip
        problems += schedule_problems(cfg, self.settings, train_rows=None)  # the windows are counted only later
        if problems:
            raise RunRefused(problems)

    def prepare_data(self) -> None:
        """The text tokenised into windows (cached), then what needs them counted refused before anything trains."""
        self.datamodule = language_model_datamodule(self.cfg, self.tokenizer, self.cache_dir)
        self.datamodule.setup("fit")
        windows = len(self.datamodule.splits["train"])
        if problems := schedule_problems(self.cfg, self.settings, windows) + validation_problems(
            self.cfg, windows, "training windows"
        ):
            raise RunRefused(problems)
        self.other_windows = _other_windows(self.cfg, self.tokenizer, self.cache_dir)

    def plan(self, steps: int | None, world_size: int, precision: str) -> list[str]:
        config, datamodule = self.config, self.datamodule
        train, held_out = len(datamodule.splits["train"]), len(datamodule.splits["validation"])
        window, batch = datamodule.window, datamodule.batch_size
        tokens = (steps or 0) * rows_per_step(self.cfg, world_size) * window
        layers = AutoConfig.from_pretrained(self.predecessor_dir).num_hidden_layers
        named = hub_id(self.cfg.model) or config.model.gguf or config.model.base or config.model.predecessor
        made = "converted from its GGUF file, cached" if self.origin == "gguf" else "given"
        other = (
            [f"other held-out text: {_other_source(self.cfg).describe()}: {len(self.other_windows):,} windows scored"]
            if self.other_windows is not None
            else []
        )
        method = self.settings.method
        if self._adapts_teacher():
            entry = self._adapted_entry(precision)
            state = entry_state(entry, config.finetune.steps, self.interrupted_training(entry), "adapted to the text",
                                "adapting it to the text", "adaptation to the text")  # fmt: skip
            other.append(
                f"teacher: the predecessor adapted to the text ({batch} windows a step at lr {config.finetune.lr:g}, "
                f"every parameter; {state})"
            )
        lm_eval = config.evaluation.lm_eval
        if lm_eval.tasks:
            limit = f", at most {lm_eval.limit} examples a task" if lm_eval.limit else ""
            other.append(f"lm-eval: {', '.join(lm_eval.tasks)} on both models, {lm_eval.num_fewshot}-shot, fp32{limit}")
        memory = []
        if method is not None and method.trains:
            peak = peak_memory_estimate(self.cfg, method, AutoConfig.from_pretrained(self.predecessor_dir))
            where = (" on each device" if world_size > 1 else "") + (
                ", activations checkpointed" if config.activation_checkpointing else ""
            )
            memory.append(f"memory: about {peak / 2**30:.1f} GiB at the training step's peak{where} (the decoder "
                          "guide's formula)")  # fmt: skip
        return [
            f"data: {datamodule.source.describe()}: {train:,} training windows of {window} tokens; scored on "
            f"{held_out:,} held-out windows",
            *other,
            f"predecessor: {named} ({made}), {layers} layers",
            f"training: {steps:,} optimizer steps of {batch} windows{each_process(world_size)} ({tokens:,} tokens)",
            *memory,
        ]

    def prepare_predecessor(self, evaluation: dict[str, Any]) -> None:
        """The predecessor adapted to the training text, where the method distils from it (from the cache, or
        fine-tuned into it now)."""
        if self._adapts_teacher():
            config = self.config
            self.adapted_dir = adapted_predecessor(
                self.predecessor_dir, self.datamodule, self.finetune_settings(), config.seed, self.cache_dir,
                evaluation, config.checkpoint.every_n_steps, config.callbacks.get("resume_checkpoint") is not None,
            )  # fmt: skip

    def stand_in_predecessor(self, folder: Path, evaluation: dict[str, Any]) -> PredecessorTraining | None:
        """The adaptation of the predecessor to the text, where the method distils from it and the cache lacks it
        (the timed method's teacher is the predecessor itself: the same shapes)."""
        if not self._adapts_teacher():
            return None
        entry = self._adapted_entry(evaluation["precision"])
        if is_cached(entry):
            return None
        finetune = self.finetune_settings()
        done = self.interrupted_training(entry) or 0  # an interrupted adaptation has only the rest to run
        return PredecessorTraining(adaptation_module(self.predecessor_dir, finetune), finetune["steps"] - done,
                                   "the predecessor's adaptation to the text", validates=False)  # fmt: skip

    def _adapts_teacher(self) -> bool:
        method = self.settings.method
        return isinstance(method, SoftTargets) and method.adapted_teacher

    def _adapted_entry(self, precision: str) -> Path:
        """The folder the predecessor adapted to the text is cached in, made or not."""
        return adapted_folder(self.predecessor_dir, self.datamodule, self.finetune_settings(), self.config.seed,
                              self.cache_dir, precision)  # fmt: skip

    def data_fingerprint(self) -> tuple[str, str] | None:
        # data.files names folders whose .txt files may be added or edited: the held-out documents are drawn from them
        source = self.datamodule.source
        return source.fingerprint(), source.describe()

    def method_inputs(self, optimizer: dict[str, Any]) -> MethodInputs:
        datamodule = self.datamodule
        return self.inputs_from(self.predecessor_dir, LanguageModels(), optimizer, lambda: _calibration(datamodule),
                                self.adapted_dir)  # fmt: skip

    def record(
        self,
        trainer: pl.Trainer | None,
        method: Method,
        resumed_from: str | None,
        evaluation: dict[str, Any],
        hardware: Hardware,
        link: WandbLink | None,
    ) -> LanguageModelResults:
        """The last step's model exported and scored as users will load it, in the same pass as the predecessor."""
        cfg, config, datamodule, tokenizer = self.cfg, self.config, self.datamodule, self.tokenizer
        assert self.settings.method is not None and self.settings.theseus is not None  # else refused in its check
        theseus, lm_eval = self.settings.theseus, config.evaluation.lm_eval
        steps = trainer.global_step if trainer is not None else 0
        successor_dir = empty_successor_folder(self.output_dir)
        method.successor().save_pretrained(successor_dir)
        tokenizer.save_pretrained(successor_dir)
        self.successor = successor = load_causal_lm(successor_dir).eval()  # what users ship
        self.predecessor = predecessor = load_causal_lm(self.predecessor_dir).eval()
        metrics = evaluate_language_model(successor, datamodule, evaluation, reference=predecessor)
        other = self._other_text_metrics(successor, predecessor, evaluation)
        self.teacher = teacher = load_causal_lm(self.adapted_dir).eval() if self.adapted_dir is not None else None
        return LanguageModelResults(
            method=method.name,
            settings={"optimizer.lr": config.optimizer.lr, **budget_settings(config.trainer),
                      "theseus.successor_layers": theseus.successor_layers,
                      "theseus.init": self.settings.method.start_layers(theseus.init, LanguageModels()),
                      "seed": config.seed,
                      # the distillation's loss (method.alpha: 0 the LM loss, 1 the KL alone, between: a mix)
                      **{f"method.{key}": cfg.method[key] for key in ("alpha", "temperature") if key in cfg.method},
                      **({"finetune.steps": config.finetune.steps} if self.adapted_dir is not None else {}),
                      # lm-eval on each task's first examples only: no score of the whole task (card, report)
                      **({"evaluation.lm_eval.limit": lm_eval.limit} if lm_eval.limit and lm_eval.tasks else {}),
                      # the embeddings, final norm and head trained from the switch on (the card says which)
                      **({"theseus.finetune_shared": True}
                         if self.settings.method.replaces_modules and theseus.finetune_shared else {})},
            predecessor=_side(predecessor, self.predecessor_dir, _reference_side(metrics), self.origin,
                              _reference_side(other) if other else None),
            successor=_side(successor, str(successor_dir), metrics,
                            other_text=_successor_side(other) if other else None),
            base_model=hub_id(cfg.model),
            teacher=self._teacher_side(teacher, predecessor, evaluation) if teacher is not None else None,
            data=_data_facts(cfg, datamodule, steps, self.other_windows, trainer.world_size if trainer else 1,
                             self.adapted_dir is not None),
            steps=steps,
            resumed_from=resumed_from,
            schedule=method.schedule.describe() if method.schedule else None,
            successor_finetuning_steps=successor_finetuning_steps(method.schedule, steps),
            seed=config.seed,
            hardware=hardware,
            wandb=link,
        )  # fmt: skip

    def _teacher_side(
        self, teacher: PreTrainedModel, predecessor: PreTrainedModel, evaluation: dict[str, Any]
    ) -> LanguageModelSide:
        """The adapted predecessor scored as the successor is: the comparison's reference row."""
        metrics = evaluate_language_model(teacher, self.datamodule, evaluation, reference=predecessor)
        other = self._other_text_metrics(teacher, predecessor, evaluation)
        return _side(teacher, str(self.adapted_dir), metrics, "adapted", _successor_side(other) if other else None)

    def _other_text_metrics(
        self, successor: PreTrainedModel, predecessor: PreTrainedModel, evaluation: dict[str, Any]
    ) -> dict[str, float] | None:
        """Both models on the other held-out text, in one pass, as on the run's own held-out windows."""
        if self.other_windows is None:
            return None
        loader = window_loader(self.other_windows, self.datamodule.eval_batch_size)
        return evaluate_language_model(successor, loader, evaluation, reference=predecessor)

    def _harness_scores(self, results: LanguageModelResults) -> None:
        """The models' lm-eval scores in fp32 on the run's device; the predecessor's (and the adapted teacher's)
        from the cache when a run before scored it the same way."""
        lm_eval, cache_dir = self.config.evaluation.lm_eval, self.cache_dir
        tasks, folders = list(lm_eval.tasks), harness_task_folders(lm_eval, cache_dir)
        device = "cuda" if torch.cuda.is_available() and self.config.trainer["accelerator"] != "cpu" else "cpu"
        options = {"num_fewshot": lm_eval.num_fewshot, "limit": lm_eval.limit, "batch_size": lm_eval.batch_size}

        def score(model: PreTrainedModel) -> dict[str, dict[str, float]]:
            try:
                return harness_scores(model.to(device), self.tokenizer, tasks, folders, **options)
            finally:
                model.to("cpu")

        def cached(folder: str, model: PreTrainedModel) -> dict[str, dict[str, float]]:
            settings = {**options, "device": device}
            return cached_harness_scores(folder, tasks, folders, settings, cache_dir / "lm-eval", lambda: score(model))

        results.predecessor.lm_eval = cached(self.predecessor_dir, self.predecessor)
        if results.teacher is not None and self.adapted_dir is not None and self.teacher is not None:
            results.teacher.lm_eval = cached(self.adapted_dir, self.teacher)
        results.successor.lm_eval = score(self.successor)

    def optional_steps(self, results: LanguageModelResults) -> list[tuple[str, Callable[[], object]]]:
        steps: list[tuple[str, Callable[[], object]]] = []

        def speed() -> None:
            benchmark = self.config.benchmark
            results.speed = _speed(self.predecessor, self.successor, self.datamodule, benchmark.batch_size,
                                   benchmark.repeats)  # fmt: skip

        def sample() -> None:
            results.sample = _sample(self.predecessor, self.successor, self.tokenizer)

        if self.config.benchmark.repeats:
            steps.append(("speed", speed))
        steps.append(("sample", sample))
        if self.config.evaluation.lm_eval.tasks:
            steps.append(("lm_eval", lambda: self._harness_scores(results)))
        if self.settings.deploy is not None and self.settings.deploy.gguf:
            steps.append(("gguf", lambda: self._gguf(results)))
        steps.append(("model_card", lambda: write_model_card(Path(results.successor.dir), results)))
        return steps

    def _gguf(self, results: LanguageModelResults) -> None:
        """The successor as GGUF files (``deploy.gguf``), checked and timed (:func:`shipped_gguf`)."""
        assert self.settings.deploy is not None
        results.gguf = shipped_gguf(
            self.config, self.cache_dir, self.settings.deploy, Path(results.successor.dir), self.successor,
            self.predecessor_dir, self.origin, self.datamodule,
        )  # fmt: skip

    def publish(self, experiment: Any, results: LanguageModelResults, results_path: Path) -> None:
        files = {"results.json": results_path, "config.yaml": self.output_dir / ".hydra" / "config.yaml",
                 "model_card.md": Path(results.successor.dir) / "README.md"}  # fmt: skip
        _publish(experiment, results, files)


def peak_memory_estimate(cfg: DictConfig, method: CompressionMethod, config: PretrainedConfig) -> int:
    """``core.memory.training_memory_bytes`` for a run's model (its config alone, on the meta device: no weights),
    method and batch. Theseus trains its successor modules beside the whole frozen predecessor, running between the
    successor's and the predecessor's depth (counted halfway); the other methods train the kept model, beside the
    predecessor as a frozen teacher when they distil."""
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    stack = find_layer_stack(model, cfg.theseus.get("layers_path")).layers
    total, layer = model.num_parameters(), sum(p.numel() for p in stack[0].parameters())
    depth, kept = len(stack), cfg.theseus.successor_layers
    soft = isinstance(method, SoftTargets)
    distils = soft and method.alpha > 0
    teacher = total if soft and method.adapted_teacher else 0
    if method.replaces_modules:
        trained, frozen, layers = kept * layer, total + teacher, (depth + kept) // 2
    else:
        trained, frozen, layers = total - (depth - kept) * layer, (total if distils else 0) + teacher, kept
    tokens = cfg.data.batch_size * cfg.data.window
    return training_memory_bytes(trained, frozen, tokens, config.vocab_size, config.hidden_size, layers, distils,
                                 checkpointed=bool(cfg.get("activation_checkpointing")))  # fmt: skip


def _predecessor_folder(model: DictConfig, cache_dir: Path) -> tuple[str, str]:
    """The predecessor as a folder or hub id ``from_pretrained`` reads, and where it came from; refused where two
    settings name it (``+experiment=smollm2_quick model.base=MY_LM`` compressed the experiment's GGUF file)."""
    named = [f"model.{key}={model[key]}" for key in ("predecessor", "gguf", "base") if model.get(key)]
    if len(named) > 1:
        raise RunRefused(
            [
                f"model: {' and '.join(named)} each name the model to compress: keep one (model.gguf=null to compress "
                "model.base or model.predecessor instead of the experiment's GGUF file)."
            ]
        )
    if model.get("predecessor"):
        return str(model.predecessor), "given"
    if model.get("gguf"):
        try:
            return str(converted_gguf(Path(model.gguf).expanduser(), cache_dir)), "gguf"
        except ValueError as error:
            raise RunRefused([str(error)]) from None
    if model.get("base"):
        return str(model.base), "given"
    raise RunRefused(["model: give model.gguf (a GGUF file), model.base or model.predecessor (a causal LM)."])


def _other_source(cfg: DictConfig) -> TextSource | None:
    other = cfg.data.get("other_text")
    return text_source(other, "data.other_text") if other else None


def _other_windows(cfg: DictConfig, tokenizer: PreTrainedTokenizerBase, cache_dir: Path) -> Dataset | None:
    """The first ``data.other_text.max_windows`` windows of all of the other held-out text (every run scores the
    same ones), tokenised once into the cache; None where no other text is named."""
    source = _other_source(cfg)
    if source is None:
        return None
    try:
        windows = tokenized_windows(source, tokenizer, cfg.data.window, None, 0, cache_dir / "tokenized")["validation"]
    except (ValueError, FileNotFoundError) as error:  # a file's own error names data.other_text.files already
        named = str(error) if str(error).startswith("data.other_text") else f"data.other_text: {error}"
        raise RunRefused([named]) from None
    limit = cfg.data.other_text.get("max_windows")
    return windows.select(range(limit)) if limit is not None and len(windows) > limit else windows


def _calibration(datamodule: LanguageModelingDataModule, windows: int = 32) -> list[dict[str, torch.Tensor]]:
    """The first training windows (the same ones on every run), in batches: what layer choices are measured on."""
    split = datamodule.splits["train"]
    rows = list(split.select(range(min(windows, len(split)))))
    size = datamodule.batch_size
    return [collate_windows(rows[start : start + size]) for start in range(0, len(rows), size)]


def _side(
    model: PreTrainedModel,
    directory: str,
    metrics: dict[str, float],
    origin: str | None = None,
    other_text: dict[str, float] | None = None,
) -> LanguageModelSide:
    return LanguageModelSide(
        dir=directory, layers=model.config.num_hidden_layers, params=sum(p.numel() for p in model.parameters()),
        perplexity=metrics["perplexity"], nll=metrics["nll"], kl=metrics.get("kl"), agreement=metrics.get("agreement"),
        origin=origin, other_text=other_text,
    )  # fmt: skip


def _successor_side(metrics: dict[str, float]) -> dict[str, float]:
    """The successor's own numbers, the predecessor's (``reference_*``) left out."""
    return {name: value for name, value in metrics.items() if not name.startswith("reference_")}


def _reference_side(metrics: dict[str, float]) -> dict[str, float]:
    """The predecessor's own numbers, measured beside the successor's in the same pass."""
    return {"perplexity": metrics["reference_perplexity"], "nll": metrics["reference_nll"]}


def _data_facts(
    cfg: DictConfig,
    datamodule: LanguageModelingDataModule,
    steps: int,
    other_windows: Dataset | None,
    world_size: int,
    adapted: bool = False,
) -> LanguageModelData:
    validation = datamodule.splits["validation"]
    other = _other_source(cfg) if other_windows is not None else None
    return LanguageModelData(
        source=datamodule.source.describe(), window=datamodule.window, train_windows=len(datamodule.splits["train"]),
        eval_windows=len(validation), eval_tokens=_predicted_tokens(validation),
        train_tokens=steps * rows_per_step(cfg, world_size) * datamodule.window,  # accumulated, on every process
        other_source=other.describe() if other else None,
        other_eval_windows=len(other_windows) if other_windows is not None else None,
        other_eval_tokens=_predicted_tokens(other_windows) if other_windows is not None else None,
        # the adaptation trains on one device without accumulating (predecessors.adapted)
        teacher_train_tokens=cfg.finetune.steps * cfg.data.batch_size * datamodule.window if adapted else None,
    )  # fmt: skip


def _predicted_tokens(windows: Dataset) -> int:
    """The tokens a window predicts: every real token after its first."""
    return int((torch.tensor(windows["labels"])[:, 1:] != IGNORED).sum())


def _speed(
    predecessor: PreTrainedModel,
    successor: PreTrainedModel,
    datamodule: LanguageModelingDataModule,
    batch_size: int,
    repeats: int,
) -> dict[str, float]:
    """Prefill of one batch of ``batch_size`` held-out windows (``benchmark.batch_size``) and decode of 64 tokens
    (fewer where the model has fewer positions) after the prompt of its first window's start."""
    validation = datamodule.splits["validation"]
    rows = list(validation.select(range(min(batch_size, len(validation)))))
    batch = {key: value for key, value in collate_windows(rows).items() if key != "labels"}
    prompt = batch["input_ids"][:1, :16]
    new_tokens = new_token_room(successor.config, prompt.shape[1], DECODE_TOKENS)
    return generation_speed(predecessor, successor, batch, prompt, new_tokens=new_tokens, repeats=repeats)


def _sample(
    predecessor: PreTrainedModel, successor: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> GenerationSample:
    prompt = tokenizer(PROMPT, return_tensors="pt")
    new_tokens = new_token_room(successor.config, prompt["input_ids"].shape[1], SAMPLE_TOKENS)

    def continuation(model: PreTrainedModel) -> str:
        with torch.no_grad():
            ids = model.generate(**prompt, max_new_tokens=new_tokens, do_sample=False,
                                 pad_token_id=tokenizer.eos_token_id)  # fmt: skip
        return tokenizer.decode(ids[0, prompt["input_ids"].shape[1] :], skip_special_tokens=True)

    return GenerationSample(prompt=PROMPT, predecessor=continuation(predecessor), successor=continuation(successor))


def _publish(run: Any, results: LanguageModelResults, files: dict[str, Path]) -> None:
    """A decoder-LM run's summary (its record's ``summary()``), its generation sample as a table, and its files
    (``results.json``, the config, the model card); raises on a W&B failure."""
    import wandb

    run.summary.update(results.summary())
    if results.sample is not None:
        sample = results.sample
        columns = ["prompt", "predecessor", "successor"]
        run.log({"generation_sample": wandb.Table(columns=columns, data=[[sample.prompt, sample.predecessor,
                                                                          sample.successor]])})  # fmt: skip
    save_files(run, files)
