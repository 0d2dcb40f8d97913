"""Whole run records to plant where a test needs finished runs (report, notebook, model card) without training."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from theseus_pl.app.kinds.embedding_model.record import EmbeddingData, EmbeddingModelResults, EmbeddingSide
from theseus_pl.app.kinds.task_model.record import (
    DataFacts,
    LayerCounts,
    ModelShape,
    ParamCounts,
    PredecessorResult,
    SuccessorResult,
    TaskModelResults,
)
from theseus_pl.app.results import registry
from theseus_pl.app.results.envelope import Hardware, RunRecord, write_results

V1_RESULTS = Path(__file__).parent / "app" / "fixtures" / "results_v1.json"  # written by theseus_pl at 0fa8775
# Schema version 2, as theseus_pl wrote it at 2f0de61: the V1 run rewritten, and a decoder-LM run's record.
V2_RESULTS = Path(__file__).parent / "app" / "fixtures" / "results_v2.json"
V2_LANGUAGE_MODEL = Path(__file__).parent / "app" / "fixtures" / "results_language_model_v2.json"


def a_run(
    task: str = "RTE",
    method: str = "theseus_curriculum",
    predecessor_score: float | None = 80.0,
    successor_score: float | None = 70.0,
    **changes: Any,
) -> TaskModelResults:
    """A 6 -> 3 layer run on a two-class pair task, every field set; ``changes`` replace top-level fields."""
    record = TaskModelResults(
        task=task,
        method=method,
        settings={"optimizer.lr": 2e-5, "seed": 1},
        predecessor=PredecessorResult(
            score=predecessor_score,
            metrics={"accuracy": None if predecessor_score is None else predecessor_score / 100},
            dir="/runs/cache/predecessors/RTE-0123456789abcdef",
            origin="fine-tuned",
            shape=ModelShape(layers=6, hidden_size=384, intermediate_size=1536),
        ),
        successor=SuccessorResult(
            score=successor_score,
            metrics={"accuracy": None if successor_score is None else successor_score / 100},
            best_checkpoint="/runs/run/checkpoints/best-step200.ckpt",
            shape=ModelShape(layers=3, hidden_size=384, intermediate_size=1536),
        ),
        successor_dir="/runs/run/successor",
        layers=LayerCounts(predecessor=6, successor=3),
        params=ParamCounts(
            predecessor=22_713_216, successor=17_390_208, predecessor_layers=10_646_784, successor_layers=5_323_392
        ),
        speedup=1.9,
        schedule="CurriculumSchedule(b=0.3, k=0.0035)",
        switch_step=200,
        successor_finetuning_steps=200,
        steps=400,
        data=DataFacts(
            train_size=2490,
            eval_size=277,
            eval_splits=["validation"],
            text_columns=["sentence1", "sentence2"],
            labels=["entailment", "not_entailment"],
            source="GLUE RTE, from the hub",
            dataset="nyu-mll/glue",
            dataset_config="rte",
        ),
        seed=1,
        wall_seconds=95.0,
    )
    return replace(record, **changes)


def an_embedding_run(
    method: str = "embedding_theseus", successor_sts: float = 78.5, **changes: Any
) -> EmbeddingModelResults:
    """A 6 -> 3 layer sentence-embedding run (all-MiniLM-L6-v2's top layers kept), timed on a quiet machine, every
    field set; ``changes`` replace top-level fields."""
    record = EmbeddingModelResults(
        method=method,
        settings={"optimizer.lr": 1e-4, "trainer.max_steps": 500, "theseus.successor_layers": 3, "seed": 1},
        predecessor=EmbeddingSide(dir="/runs/cache/hub/all-MiniLM-L6-v2", layers=6, params=22_713_216, dimensions=384,
                                  sts=82.0),
        successor=EmbeddingSide(dir="/runs/run/successor", layers=3, params=17_390_208, dimensions=384,
                                sts=successor_sts, mse=0.000123, cosine=0.9712),
        kept_layers=[3, 4, 5],
        base_model="sentence-transformers/all-MiniLM-L6-v2",
        data=EmbeddingData(source="the training sentences of STS-B, CoLA (GLUE, from the classic GLUE files; their "
                           "labels unused)", train_sentences=7500, held_out_sentences=500, max_length=128,
                           sts_pairs=1500, train_sentences_seen=16_000),
        steps=500,
        best_step=400,
        schedule="CurriculumSchedule(b=0.3, k=0.0035)",
        speed={"predecessor_batch1": 95.0, "successor_batch1": 180.5, "batch1_speedup": 1.9,
               "predecessor_batch32": 410.0, "successor_batch32": 795.4, "batch32_speedup": 1.94, "other_cores": 0.05},
        seed=1,
        hardware=Hardware(precision="32-true", precision_requested="auto", accelerator="cpu",
                          cpu="AMD EPYC 7B13 64-Core Processor", cpu_flags=["avx2"]),
        wall_seconds=300.0,
    )  # fmt: skip
    return replace(record, **changes)


def plant(folder: Path, record: RunRecord) -> Path:
    """``folder/results.json`` holding ``record``, as a finished run leaves it."""
    folder.mkdir(parents=True, exist_ok=True)
    return write_results(folder / "results.json", record)


class NewKindResults(RunRecord):
    """A record of a kind registered with its record alone: what a new kind is until its card, deployment, report
    tables and dashboard are registered."""

    kind = "sentence_embedding"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NewKindResults:
        return cls()


def registering_for_the_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry of kinds as it is (the built-in kinds loaded), restored when the test ends: a kind the test
    registers is gone for the next one."""
    monkeypatch.setattr(registry, "_KINDS", dict(registry.registered_kinds()))


def plant_new_kind(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``folder/results.json`` of :class:`NewKindResults`, which ``read_run`` reads for the test's length."""
    registering_for_the_test(monkeypatch)
    registry.register_kind(registry.Kind(NewKindResults.kind, record=NewKindResults))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps({"schema_version": 3, "kind": NewKindResults.kind}))
    return folder / "results.json"
